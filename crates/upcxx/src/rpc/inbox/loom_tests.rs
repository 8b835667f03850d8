//! The inbox under every interleaving (up to `LOOM_MAX_PREEMPTIONS` preemptions) of the
//! polls of other threads filling it and its owner taking pages.
use super::*;
use std::sync::Arc;

fn head(n: u32) -> Head {
    Head::new(n, KIND_RPC, 0, [0; 2], [0; 4], 4)
}

/// Takes every page queued now; the message numbers in order.
fn take_all(inbox: &Inbox, got: &mut Vec<u32>) {
    while let Some(page) = inbox.take() {
        for (h, payload) in page.messages() {
            assert_eq!(payload, h.src.to_le_bytes(), "a message arrives whole");
            got.push(h.src);
        }
        inbox.recycle(page);
    }
}

#[test]
fn loom_messages_from_other_threads_arrive_once_in_order() {
    let explored = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&explored);
    loom::model(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let inbox = Arc::new(Inbox::new());
        let senders: Vec<_> = [[1, 2], [3, 4]]
            .into_iter()
            .map(|ns| {
                let inbox = Arc::clone(&inbox);
                loom::thread::spawn(move || {
                    for n in ns {
                        inbox.push(&head(n), &n.to_le_bytes());
                    }
                })
            })
            .collect();
        let mut got = Vec::new();
        // The owner's poll: the lock-free emptiness test, then a take.
        if !inbox.is_empty() {
            take_all(&inbox, &mut got);
        }
        senders.into_iter().for_each(|s| s.join().unwrap());
        // Every push happened before: the flag must show what is left.
        assert_eq!(inbox.is_empty(), got.len() == 4, "{got:?}");
        take_all(&inbox, &mut got);
        assert!(inbox.is_empty());
        let pos = |x: u32| got.iter().position(|&g| g == x).expect("delivered");
        assert!(pos(1) < pos(2) && pos(3) < pos(4), "{got:?}");
        assert_eq!(got.len(), 4, "{got:?}");
    });
    println!(
        "loom: {} interleavings explored",
        explored.load(std::sync::atomic::Ordering::Relaxed)
    );
}
