//! Property tests of the pages: messages of any sizes, pushed and taken in any
//! interleaving, come out whole, in order, with their headers (the page format is
//! what the consumer decodes, so every length and offset must hold). Cases:
//! `PROPTEST_CASES`.
use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Push(usize),
    PushInPlace(usize),
    PushPage(usize),
    Take,
}

fn op() -> impl Strategy<Value = Op> {
    // Mostly small messages; some around the page size, where a message stops
    // fitting in a page of its own size.
    prop_oneof![
        12 => (0usize..200).prop_map(Op::Push),
        1 => (PAGE - HEAD - 48..PAGE + 48).prop_map(Op::Push),
        6 => (0usize..200).prop_map(Op::PushInPlace),
        1 => (PAGE - HEAD - 48..PAGE + 48).prop_map(Op::PushInPlace),
        1 => (0usize..PAGE + 4096).prop_map(Op::PushPage),
        5 => Just(Op::Take),
    ]
}

fn message(n: u32, len: usize) -> (Head, Vec<u8>) {
    let head = Head::new(n, KIND_RPC, n, [n, !n], [n; 4], len as u32);
    (head, (0..len).map(|i| (i as u32 ^ n) as u8).collect())
}

fn drain(page: &Page, next: &mut u32) -> Result<(), TestCaseError> {
    for (head, payload) in page.messages() {
        let (want, bytes) = message(*next, head.len as usize);
        prop_assert_eq!(bytemuck::bytes_of(head), bytemuck::bytes_of(&want));
        prop_assert_eq!(payload, &bytes[..]);
        *next += 1;
    }
    Ok(())
}

proptest! {
    #[test]
    fn messages_come_out_whole_and_in_order(ops in prop::collection::vec(op(), 1..40)) {
        let mut q = Queue::new();
        let (mut sent, mut next) = (0u32, 0u32);
        for op in ops {
            match op {
                Op::Push(len) => {
                    let (h, p) = message(sent, len);
                    q.push(&h, &p);
                    sent += 1;
                }
                Op::PushInPlace(len) => {
                    // As a serializer does: in place if it fits, else copied. The
                    // header comes with no length (as a call to self has it before
                    // serializing), which `push_in_place` sets from what was written.
                    let (h, p) = message(sent, len);
                    let unsized_head = Head { len: 0, ..h };
                    let placed = q.push_in_place(&unsized_head, |room| {
                        (room.len() >= len).then(|| {
                            room[..len].copy_from_slice(&p);
                            len
                        })
                    });
                    if !placed {
                        q.push(&h, &p);
                    }
                    sent += 1;
                }
                Op::PushPage(len) => {
                    let (h, p) = message(sent, len);
                    let mut page = Page::for_message(&h);
                    page.write_payload(0, &p);
                    q.push_page(page);
                    sent += 1;
                }
                Op::Take => {
                    if let Some(page) = q.take() {
                        drain(&page, &mut next)?;
                        q.recycle(page);
                    }
                }
            }
        }
        while let Some(page) = q.take() {
            drain(&page, &mut next)?;
            q.recycle(page);
        }
        prop_assert_eq!(next, sent);
        prop_assert!(q.is_empty());
    }
}
