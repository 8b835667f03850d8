//! `when_all` concatenates the type parameters of the futures it joins: UPC++ spec
//! §5.8.1 ¶53 (and Appendix A.2), with `future<A, B>` written `Future<(A, B)>`.
use upcxx::{make_future, when_all, Future, Promise};

/// The value of a future, with its type spelled out: a `when_all` of the wrong type
/// does not compile.
fn value<T: 'static>(f: Future<T>) -> T {
    assert!(f.ready());
    f.into_result()
}

/// §5.8.1 ¶53: a `future<>` has no type parameters, so it contributes no value.
#[test]
fn unit_futures_contribute_no_value() {
    let n: u64 = value(when_all((make_future(()), make_future(7u64))));
    assert_eq!(n, 7);
    let n: u64 = value(when_all((make_future(7u64), make_future(()))));
    assert_eq!(n, 7);
    let pair: (u64, char) = value(when_all((
        make_future(()),
        make_future(7u64),
        make_future(()),
        make_future('x'),
    )));
    assert_eq!(pair, (7, 'x'));
    let () = value(when_all((make_future(()), make_future(()))));
}

/// §5.8.1 ¶53: one future's type parameters are the joined future's.
#[test]
fn one_future_gives_its_own_value() {
    let s: String = value(when_all((make_future(String::from("s")),)));
    assert_eq!(s, "s");
    let () = value(when_all((make_future(()),)));
}

/// §5.8.1 ¶53: a `future<A, B>` (a future of a tuple) contributes its elements.
#[test]
fn tuple_futures_contribute_their_elements() {
    let all: (u8, i32, bool, f64) = value(when_all((
        make_future((1u8, -2i32)),
        make_future(()),
        make_future((true,)),
        make_future(0.5f64),
    )));
    assert_eq!(all, (1, -2, true, 0.5));
}

/// The joined future is ready only when every input is, unit ones included, and has the
/// concatenated values then.
#[test]
fn waits_for_unit_futures_too() {
    let done = Promise::<()>::new();
    let v = Promise::<u32>::new();
    let all: Future<u32> = when_all((done.get_future(), v.get_future()));
    v.fulfill_result(5);
    assert!(!all.ready(), "ready before the unit future");
    done.fulfill_anonymous(1);
    assert!(all.ready());
    assert_eq!(all.into_result(), 5);
}

/// Values of user types join once `impl_future_value!` declares them.
#[test]
fn user_types_join_as_one_value() {
    #[derive(Debug, PartialEq)]
    struct Point(i32, i32);
    upcxx::impl_future_value!(Point);
    let all: (Point, u8) = value(when_all((make_future(Point(1, 2)), make_future(3u8))));
    assert_eq!(all, (Point(1, 2), 3));
}

/// §5.8.1 ¶53 over the futures of round-trip RPCs to every rank, some of whose replies
/// already arrived when they are joined: the values come in the order of the futures.
#[test]
fn when_all_of_rpc_futures_gives_their_values_in_order() {
    gex::testing::spmd(3, || {
        upcxx::init();
        let me = u64::from(upcxx::rank_me());
        let call = |k: u64| {
            let rank = (k % u64::from(upcxx::rank_n())) as upcxx::Rank;
            upcxx::rpc(rank, |x: u64| (upcxx::rank_me(), x + 1), (me * 10_000 + k,))
        };
        let mut futures: Vec<_> = (0..500).map(call).collect();
        // Let some replies arrive before the join.
        for _ in 0..50 {
            upcxx::progress(upcxx::ProgressLevel::User);
        }
        futures.extend((500..1000).map(call));
        let values = upcxx::when_all(futures).wait();
        for (k, (rank, v)) in values.into_iter().enumerate() {
            let k = k as u64;
            assert_eq!((u64::from(rank), v), (k % 3, me * 10_000 + k + 1));
        }
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// §5.8.1 ¶53 at the edges of a join of round trips: every reply already arrived when
/// the futures are joined (nothing left to count: the join is ready at once), or the joined future is dropped
/// before the replies come (they still land, and later calls get theirs).
#[test]
fn when_all_of_arrived_or_dropped_rpc_futures() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let other = (upcxx::rank_me() + 1) % upcxx::rank_n();
        let call = |k: u64| upcxx::rpc(other, |x: u64| x * 3, (k,));
        let arrived: Vec<_> = (0..300).map(call).collect();
        while !arrived.iter().all(|f| f.ready()) {
            upcxx::progress(upcxx::ProgressLevel::User);
        }
        // Every input is ready, so the join is (as a join of a tuple is).
        let joined = upcxx::when_all(arrived);
        assert!(joined.ready(), "a join of ready futures is not ready");
        let values = joined.into_result();
        assert!(values.iter().zip(0..).all(|(&v, k)| v == 3 * k));

        drop(upcxx::when_all((1000..1300).map(call).collect::<Vec<_>>()));
        for round in 0..3u64 {
            let ks = round * 10_000..round * 10_000 + 300;
            let values = upcxx::when_all(ks.clone().map(call).collect::<Vec<_>>()).wait();
            assert!(values.iter().zip(ks).all(|(&v, k)| v == 3 * k));
        }
        upcxx::barrier();
        upcxx::finalize();
    });
}
