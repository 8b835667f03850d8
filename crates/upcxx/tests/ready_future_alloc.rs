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

/// `when_all` over a vector of futures whose values are here (ready, or ready at the
/// next user-level progress, as an operation complete at initiation's) allocates at
/// most the vector of values, and is ready exactly when the last of them is.
#[test]
fn when_all_of_complete_futures_allocates_only_its_vector() {
    gex::testing::spmd(1, || {
        upcxx::init();
        let cells: upcxx::GlobalPtr<u64> = upcxx::new_array(64);
        for i in 0..64 {
            upcxx::rput(i, cells.add(i as usize)).wait();
        }
        let mut futures = Vec::with_capacity(65);
        let mut joined = None;
        let n = allocations_in(|| {
            futures.extend((0..64).map(|i| upcxx::rget(cells.add(i))));
            futures.push(upcxx::make_future(64));
            joined = Some(upcxx::when_all(std::mem::take(&mut futures)));
        });
        // At most the values' vector (which may reuse the futures' buffer).
        assert!(n <= 1, "when_all allocated {n} times");
        let joined = joined.unwrap();
        // The gets complete at initiation: their values are ready at the next progress.
        assert!(!joined.ready());
        upcxx::progress(upcxx::ProgressLevel::User);
        assert!(joined.ready());
        assert_eq!(joined.wait(), (0..=64).collect::<Vec<u64>>());
        upcxx::delete_array(cells);
        upcxx::finalize();
    });
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
