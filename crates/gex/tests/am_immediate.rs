//! Back-pressure on Active Messages: `GEX_FLAG_IMMEDIATE` ("NOTE 1: Return value"), with
//! 1 to 4 ranks.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::poll_until;
use gex::testing::spmd;
use gex::{AmEntry, AmRole, Client, Flags, Lc, NoOp, Segment, Token};

const MB: usize = 1 << 20;

mod flood {
    use super::*;
    pub(crate) static RUNS: AtomicUsize = AtomicUsize::new(0);
    pub(crate) fn count(_token: &Token<'_>, args: &[u32]) {
        assert_eq!(args, [7, 8]);
        RUNS.fetch_add(1, Ordering::Relaxed);
    }
}

/// `GEX_FLAG_IMMEDIATE` ("NOTE 1: Return value"): a rank floods its successor, which
/// does not poll, with IMMEDIATE Requests until one returns `Err(NoOp)` (non-zero); then
/// the successor drains its queue and its handler runs exactly once per `Ok` send: a
/// "no op" performs no communication.
#[test]
fn immediate_flood_until_no_op() {
    // A rank that stops polling must still learn that its predecessor has finished
    // flooding it; between hosts a message cannot reach it, and a put may not either.
    if gex::testing::skip_where_rma_needs_progress("puts to ranks that do not poll") {
        return;
    }
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("AM_FLOOD", Flags::NONE).unwrap();
            let mut t = [AmEntry::short("flood", AmRole::Request, 2, flood::count)];
            ep.register_handlers(&mut t).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let (me, size) = (team.rank(), team.size());
            let next = (me + 1) % size;
            let prev = (me + size - 1) % size;
            // A peer may still be polling in the attach barrier after we left it. Each
            // rank tells its predecessor by RMA (which lands without the target's
            // polling on the placements this test runs on) that it has stopped polling,
            // and floods its successor only once told so.
            team.put_val_blocking(prev, bases[prev as usize] + 8, 1, 8, Flags::NONE)
                .unwrap();
            let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
            // SAFETY: the second word of our segment, written by our successor.
            while unsafe { common::read_u64(seg.addr() as usize + 8) } != 1 {
                assert!(std::time::Instant::now() < end, "successor never got ready");
                std::hint::spin_loop();
            }
            // Flood without polling (IMMEDIATE sends never poll).
            let mut ok = 0u64;
            let noop = loop {
                match team.request_short(next, t[0].index, &[7, 8], Flags::IMMEDIATE) {
                    Ok(()) => ok += 1,
                    Err(e) => break e,
                }
                assert!(ok < 1_000_000, "IMMEDIATE never reported back-pressure");
            };
            assert_eq!(noop, NoOp);
            assert!(ok >= 1);
            // More IMMEDIATE sends still find the queue full: nothing was drained.
            for _ in 0..10 {
                assert_eq!(
                    team.request_short(next, t[0].index, &[7, 8], Flags::IMMEDIATE),
                    Err(NoOp)
                );
            }
            // IMMEDIATE Medium and Long are refused the same way.
            assert_eq!(
                team.request_medium(next, t[0].index, &[1], Lc::Now, Flags::IMMEDIATE, &[7, 8]),
                Err(NoOp)
            );
            assert_eq!(
                team.request_long(
                    next,
                    t[0].index,
                    &[1],
                    bases[next as usize],
                    Lc::Now,
                    Flags::IMMEDIATE,
                    &[7, 8]
                ),
                Err(NoOp)
            );
            assert!(matches!(
                team.prepare_request_medium(next, None, 1, 10, Lc::Now, Flags::IMMEDIATE, 2),
                Err(NoOp)
            ));
            // Tell the successor how many got through (by RMA, as above); it stays
            // zero until then.
            team.put_val_blocking(next, bases[next as usize], ok + 1, 8, Flags::NONE)
                .unwrap();
            let flag = seg.addr() as usize;
            let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let expected = loop {
                // SAFETY: the first word of our segment, written by our predecessor.
                let v = unsafe { common::read_u64(flag) };
                if v != 0 {
                    break v - 1;
                }
                assert!(
                    std::time::Instant::now() < end,
                    "predecessor never reported"
                );
                std::hint::spin_loop();
            };
            assert_eq!(
                flood::RUNS.load(Ordering::Relaxed),
                0,
                "no handler runs without polling"
            );
            poll_until("the flood to drain", 10, || {
                flood::RUNS.load(Ordering::Relaxed) as u64 >= expected
            });
            for _ in 0..100 {
                gex::poll();
            }
            assert_eq!(
                flood::RUNS.load(Ordering::Relaxed) as u64,
                expected,
                "handler runs == Ok sends"
            );
            // Once drained, IMMEDIATE sends succeed again.
            team.barrier();
            assert_eq!(
                team.request_short(next, t[0].index, &[7, 8], Flags::IMMEDIATE),
                Ok(())
            );
            poll_until("one more", 10, || {
                flood::RUNS.load(Ordering::Relaxed) as u64 == expected + 1
            });
            client.finalize();
        });
    }
}
