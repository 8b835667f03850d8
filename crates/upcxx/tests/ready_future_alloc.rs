//! A ready future of plain values is created without heap allocation (UPC++ core issue:
//! "A ready future of plain values costs no heap allocation").
#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations_in;

#[test]
fn ready_futures_do_not_allocate() {
    let n = allocations_in(|| {
        let f = upcxx::make_future((1u64, 2.0f64));
        assert!(f.ready());
        let g = f.then(|(a, b)| a as f64 + b).then(|x| x * 2.0);
        let all = upcxx::when_all((g, upcxx::make_future(7u8)));
        assert_eq!(all.into_result(), (6.0, 7));
        assert_eq!(upcxx::to_future(3i32).wait(), 3);
    });
    assert_eq!(n, 0, "ready futures allocated {n} times");
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the test above against a counter that never counts.
    let n = allocations_in(|| {
        let p: upcxx::Promise<u8> = upcxx::Promise::new();
        p.fulfill_result(1);
    });
    assert!(n > 0);
}
