//! The common communication paths cost no heap allocation once warmed up: a
//! round-trip `rpc` with a small result, an `rpc_ff`, and `rput`/`rget` waited on
//! (UPC++ core issue, performance part).
mod common;
#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use common::Unserializable;
use gex::testing::spmd;
use upcxx::{progress, rank_me, ProgressLevel};

/// Allocations made by `f`, run 1000 times after 100 runs of warm-up.
fn steady_allocations(mut f: impl FnMut(u64)) -> usize {
    for i in 0..100 {
        f(i);
    }
    counting_alloc::allocations_in(|| {
        for i in 0..1000 {
            f(i);
        }
    })
}

#[test]
fn round_trips_and_rma_do_not_allocate_in_the_steady_state() {
    spmd(1, || {
        upcxx::init();
        let me = rank_me();
        let rpcs = steady_allocations(|i| {
            assert_eq!(upcxx::rpc(me, |x: u64| x + 1, (i,)).wait(), i + 1);
        });
        assert_eq!(rpcs, 0, "rpc(..).wait() allocated {rpcs} times");
        let ffs = steady_allocations(|i| {
            upcxx::rpc_ff(me, |x: u64| assert!(x < 1100), (i,));
            progress(ProgressLevel::User);
        });
        assert_eq!(ffs, 0, "rpc_ff allocated {ffs} times");
        let gp = upcxx::new_(0u64);
        let rma = steady_allocations(|i| {
            upcxx::rput(i, gp).wait();
            assert_eq!(upcxx::rget(gp).wait(), i);
        });
        assert_eq!(rma, 0, "rput/rget allocated {rma} times");
        upcxx::delete_(gp);
        upcxx::finalize();
    });
}

/// Thousands of round trips in flight, joined by one `when_all` of their futures, cost
/// a few allocations per join (the vectors, the join), none per future.
#[test]
fn when_all_of_round_trips_allocates_per_join_not_per_future() {
    spmd(1, || {
        upcxx::init();
        let me = rank_me();
        const N: u64 = 2000;
        let joins = steady_allocations(|i| {
            if i % 100 != 0 {
                return;
            }
            let futures: Vec<_> = (0..N)
                .map(|k| upcxx::rpc(me, |x: u64| x * 2, (i + k,)))
                .collect();
            let values = upcxx::when_all(futures).wait();
            assert!(values.iter().zip(i..).all(|(&v, x)| v == 2 * x));
        });
        // 10 joins of N futures each.
        assert!(
            joins <= 10 * 8,
            "10 joins of {N} futures allocated {joins} times"
        );
        upcxx::finalize();
    });
}

/// The same between processes, on 2 and 3 ranks, every rank at once: each starts
/// thousands of round trips to the next rank and joins them with one `when_all`, while
/// its progress runs the previous rank's calls and sends their replies. Per join a few
/// allocations on each rank (the vectors, the join), none per future, per call run or
/// per reply delivered (UPC++ core issue, performance part; §9.3 `rpc`, §5.8.1
/// `when_all`).
#[test]
fn remote_round_trips_joined_allocate_per_join_not_per_future() {
    for ranks in [2, 3] {
        spmd(ranks, || {
            upcxx::init();
            let next = (rank_me() + 1) % upcxx::rank_n();
            const N: u64 = 2000;
            let joins = steady_allocations(|i| {
                if i % 100 != 0 {
                    return;
                }
                let futures: Vec<_> = (0..N)
                    .map(|k| upcxx::rpc(next, |x: u64| x + 3, (i * N + k,)))
                    .collect();
                let values = upcxx::when_all(futures).wait();
                assert!(values.iter().zip(i * N..).all(|(&v, x)| v == x + 3));
            });
            // 10 joins of N futures each.
            assert!(
                joins <= 10 * 8,
                "rank {}: 10 joins of {N} remote futures allocated {joins} times",
                rank_me()
            );
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// A collective waited for allocates when it starts, not at each progress call of the
/// wait: rank 0 makes a thousand user-level progress calls while its reduction waits
/// for the others, which start theirs only when it tells them to.
#[test]
fn a_pending_collective_allocates_nothing_per_progress() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static GO: AtomicBool = AtomicBool::new(false);
    fn go() {
        GO.store(true, Ordering::Relaxed);
    }
    for ranks in [2, 3] {
        spmd(ranks, || {
            upcxx::init();
            let n = u64::from(upcxx::rank_n());
            let world = upcxx::world();
            if rank_me() == 0 {
                let sum = upcxx::reduce_all(1u64, upcxx::op_fast_add, world);
                let waits = counting_alloc::allocations_in(|| {
                    for _ in 0..1000 {
                        progress(ProgressLevel::User);
                    }
                });
                assert!(!sum.ready());
                assert_eq!(waits, 0, "1000 progress calls allocated {waits} times");
                for r in 1..upcxx::rank_n() {
                    upcxx::rpc_ff(r, go, ());
                }
                assert_eq!(sum.wait(), n);
            } else {
                while !GO.load(Ordering::Relaxed) {
                    progress(ProgressLevel::User);
                }
                assert_eq!(upcxx::reduce_all(1u64, upcxx::op_fast_add, world).wait(), n);
            }
            upcxx::finalize();
        });
    }
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the test above against a counter that never counts.
    let n = steady_allocations(|i| drop(std::hint::black_box(vec![i])));
    assert_eq!(n, 1000);
}

/// A call that fails after claiming the reply cell of its future gives the cell back:
/// a round-trip `rpc` whose arguments do not serialize, and a lent VIS call that fails
/// its checks after arming its default `operation_cx::as_future`. Every failure then
/// allocates what its panic does, the same each time; a cell kept by each would also
/// grow the thread's pool of cells every 32 failures.
#[test]
fn calls_that_fail_after_claiming_a_reply_cell_give_it_back() {
    spmd(1, || {
        upcxx::init();
        let me = rank_me();
        let gp = upcxx::new_array::<u64>(8);
        let src = [7u64; 4];
        let fail = |which: &str| {
            let failed = std::panic::catch_unwind(|| {
                if which == "rpc" {
                    drop(upcxx::rpc(me, |_: Unserializable| 0u64, (Unserializable,)));
                } else {
                    // SAFETY: the call fails its checks (a stride shorter than a run)
                    // before it starts.
                    drop(unsafe { upcxx::rput_strided_lent(&src, 0, [4], gp, [8], [2]) });
                }
            });
            assert!(failed.is_err(), "{which} fails");
            progress(ProgressLevel::User);
        };
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        for which in ["rpc", "rput_strided_lent"] {
            for _ in 0..40 {
                fail(which);
            }
            let one = counting_alloc::allocations_in(|| fail(which));
            let many = counting_alloc::allocations_in(|| (0..64).for_each(|_| fail(which)));
            assert_eq!(
                many,
                64 * one,
                "64 failed {which} calls allocated {many} times, one {one} times"
            );
        }
        std::panic::set_hook(hook);
        assert_eq!(upcxx::rpc(me, |x: u64| x + 1, (1u64,)).wait(), 2);
        upcxx::delete_array(gp);
        upcxx::finalize();
    });
}
