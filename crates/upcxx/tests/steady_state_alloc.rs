//! The common communication paths cost no heap allocation once warmed up: a
//! round-trip `rpc` with a small result, an `rpc_ff`, and `rput`/`rget` waited on
//! (UPC++ core issue, performance part).
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gex::testing::spmd;
use upcxx::{progress, rank_me, ProgressLevel};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts calls on this thread.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f`, run 1000 times after 100 runs of warm-up.
fn steady_allocations(mut f: impl FnMut(u64)) -> usize {
    for i in 0..100 {
        f(i);
    }
    let before = ALLOCS.with(|a| a.get());
    for i in 0..1000 {
        f(i);
    }
    ALLOCS.with(|a| a.get()) - before
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

#[test]
fn the_counter_sees_allocations() {
    // Guards the test above against a counter that never counts.
    let n = steady_allocations(|i| drop(std::hint::black_box(vec![i])));
    assert_eq!(n, 1000);
}
