//! Futures and promises: UPC++ spec ch. 5 and Appendix A.
use std::cell::{Cell, RefCell};
use std::rc::Rc;

use common::panic_message;
use upcxx::{make_future, to_future, when_all, Future, Promise};

mod common;

/// §5.5 ¶3: a callback on a ready future runs during `then`.
#[test]
fn then_on_ready_future_runs_immediately() {
    let ran = Rc::new(Cell::new(false));
    let r = Rc::clone(&ran);
    let f = make_future(20).then(move |x| {
        r.set(true);
        x + 1
    });
    assert!(ran.get(), "callback ran before then returned");
    assert!(f.ready());
    assert_eq!(f.result(), 21);
}

/// §5.5 ¶2: fulfilling the promise runs the callbacks before fulfil returns, in order.
#[test]
fn promise_fulfilment_runs_callbacks_in_registration_order() {
    let p: Promise<i32> = Promise::new();
    let log = Rc::new(RefCell::new(Vec::new()));
    let (l1, l2) = (Rc::clone(&log), Rc::clone(&log));
    let f = p.get_future();
    let g = f.clone();
    let a = f.then(move |x| l1.borrow_mut().push(("a", x)));
    let b = g.then(move |x| l2.borrow_mut().push(("b", x)));
    assert!(log.borrow().is_empty(), "nothing runs before fulfilment");
    assert!(!a.ready() && !b.ready());
    p.fulfill_result(7);
    assert_eq!(*log.borrow(), vec![("a", 7), ("b", 7)]);
    assert!(a.ready() && b.ready());
}

/// §5.3: dependency counting; the future is ready only when the counter reaches zero.
#[test]
fn dependency_counting() {
    let p: Promise<()> = Promise::new();
    p.require_anonymous(2);
    let f = p.get_future();
    p.fulfill_anonymous(1);
    assert!(!f.ready());
    p.fulfill_anonymous(1);
    assert!(!f.ready(), "the initial dependency is still there");
    let f2 = p.finalize();
    assert!(f.ready() && f2.ready());
}

/// §5.8.2 ¶4: `promise(dependency_count)` starts with that many dependencies (at least
/// one).
#[test]
fn promise_with_a_dependency_count() {
    let p: Promise<u64> = Promise::with_dependencies(3);
    let f = p.get_future();
    p.fulfill_result(7);
    assert!(!f.ready());
    p.fulfill_anonymous(1);
    assert!(!f.ready());
    p.fulfill_anonymous(1);
    assert_eq!(f.result(), 7);
    let zero = std::panic::catch_unwind(|| drop(Promise::<()>::with_dependencies(0)));
    let msg = panic_message(zero.unwrap_err());
    assert!(
        msg.contains("Promise::with_dependencies") && msg.contains("at least 1"),
        "{msg}"
    );
}

/// §5.8.1 ¶4: the default-constructed future never becomes ready (`Future::never`;
/// no runtime needed): nor do its continuations or a `when_all` including it.
#[test]
fn a_never_ready_future() {
    let f: Future<u32> = Future::never();
    assert!(!f.ready());
    let ran = Rc::new(Cell::new(false));
    let r = Rc::clone(&ran);
    let g = f.then(move |x| {
        r.set(true);
        x
    });
    let both = when_all((g, make_future(1u8)));
    assert!(!both.ready() && !ran.get());
}

#[test]
fn promise_with_values_needs_its_result() {
    let p: Promise<(u8, String)> = Promise::new();
    p.require_anonymous(1);
    p.fulfill_result((1, "x".into()));
    let f = p.get_future();
    assert!(!f.ready());
    p.fulfill_anonymous(1);
    assert_eq!(f.result(), (1, "x".to_string()));
}

#[test]
fn promise_counting_errors_are_reported() {
    let over = std::panic::catch_unwind(|| {
        let p: Promise<()> = Promise::new();
        p.fulfill_anonymous(2);
    });
    let msg = panic_message(over.unwrap_err());
    assert!(
        msg.contains("fulfill_anonymous") && msg.contains("below zero"),
        "{msg}"
    );

    let twice = std::panic::catch_unwind(|| {
        let p: Promise<i32> = Promise::new();
        p.require_anonymous(1);
        p.fulfill_result(1);
        p.fulfill_result(2);
    });
    let msg = panic_message(twice.unwrap_err());
    assert!(msg.contains("already"), "{msg}");

    let no_value = std::panic::catch_unwind(|| {
        let p: Promise<i32> = Promise::new();
        drop(p.finalize());
    });
    let msg = panic_message(no_value.unwrap_err());
    assert!(msg.contains("without a result"), "{msg}");

    let late = std::panic::catch_unwind(|| {
        let p: Promise<()> = Promise::new();
        drop(p.clone().finalize());
        p.require_anonymous(1);
    });
    let msg = panic_message(late.unwrap_err());
    assert!(msg.contains("already ready"), "{msg}");
}

/// §5.2 ¶36: a callback returning a future yields that future's value (flattened).
#[test]
fn then_flattens_futures() {
    let p: Promise<u64> = Promise::new();
    let inner = p.get_future();
    let f: Future<u64> = make_future(1).then(move |_| inner);
    assert!(!f.ready(), "the flattened future waits for the inner one");
    p.fulfill_result(99);
    assert_eq!(f.result(), 99);
    let g: Future<String> = make_future(3).then(|n| make_future("x".repeat(n)));
    assert_eq!(g.result(), "xxx");
}

#[test]
fn then_chains_and_unit_results() {
    let p: Promise<i32> = Promise::new();
    let f = p
        .get_future()
        .then(|x| x * 2)
        .then(|x| (x, x + 1))
        .then(|(a, b)| a + b)
        .then(|_| ());
    p.fulfill_result(5);
    assert!(f.ready());
    f.into_result();
}

#[test]
fn when_all_tuples_and_vectors() {
    let p1: Promise<i32> = Promise::new();
    let p2: Promise<String> = Promise::new();
    let all = when_all((p1.get_future(), make_future(2.5f64), p2.get_future()));
    assert!(!all.ready());
    p2.fulfill_result("s".into());
    assert!(!all.ready());
    p1.fulfill_result(1);
    assert_eq!(all.result(), (1, 2.5, "s".to_string()));

    let ps: Vec<Promise<usize>> = (0..4).map(|_| Promise::new()).collect();
    let v = when_all(ps.iter().map(|p| p.get_future()).collect::<Vec<_>>());
    for (i, p) in ps.iter().enumerate().rev() {
        assert!(!v.ready());
        p.fulfill_result(i * 10);
    }
    assert_eq!(v.result(), vec![0, 10, 20, 30]);
    assert!(when_all(()).ready());
    assert_eq!(
        when_all(Vec::<Future<u8>>::new()).result(),
        Vec::<u8>::new()
    );
}

/// The standard library's value types are values a callback returns (§5.8.1 ¶36): a
/// program cannot implement `FutureValue` for them itself.
#[test]
fn callbacks_return_the_standard_value_types() {
    use std::time::Duration;
    let d = make_future(3u64).then(Duration::from_secs).result();
    assert_eq!(d, Duration::from_secs(3));
    let (name, range, order) = when_all((
        make_future(()).then(|()| "done"),
        make_future(4usize).then(|n| 0..n),
        make_future(2).then(|x: i32| x.cmp(&1)),
    ))
    .result();
    assert_eq!(
        (name, range, order),
        ("done", 0..4, std::cmp::Ordering::Greater)
    );
    let addr = make_future(80u16)
        .then(|port| std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .result();
    assert_eq!(addr.port(), 80);
    let cell = make_future(5).then(std::cell::Cell::new).into_result();
    assert_eq!(cell.get(), 5);
    let path = to_future(std::path::PathBuf::from("/tmp")).result();
    assert_eq!(path, std::path::Path::new("/tmp"));
}

#[test]
fn to_future_accepts_values_and_futures() {
    assert_eq!(to_future(5u8).result(), 5);
    assert_eq!(to_future(make_future("a".to_string())).result(), "a");
}

#[test]
fn clones_each_get_the_value_and_non_clone_values_move() {
    struct NoClone(u32);
    upcxx::impl_future_value!(NoClone);
    let p: Promise<NoClone> = Promise::new();
    let f = p.get_future().then(|v| v.0 + 1);
    p.fulfill_result(NoClone(41));
    assert_eq!(f.into_result(), 42);

    let p: Promise<Vec<u8>> = Promise::new();
    let a = p.get_future();
    let b = a.clone();
    p.fulfill_result(vec![1, 2]);
    assert_eq!(a.into_result(), vec![1, 2]);
    assert_eq!(b.into_result(), vec![1, 2]);
}

/// §5.8.2 ¶20: `get_future` may be called any number of times. A promise of no value
/// (operation completion) serves every future and callback made of it; a value is
/// copied for several readers by `Future::clone` only, and a second reader of futures
/// from `get_future` is refused with a message that says so.
#[test]
fn every_future_of_a_promise_gets_its_value() {
    let p = Promise::<()>::new();
    let ran = Rc::new(Cell::new(0));
    let r = Rc::clone(&ran);
    let then = p.get_future().then(move |()| r.set(r.get() + 1));
    let (f, g) = (p.get_future(), p.get_future());
    let done = p.finalize();
    assert_eq!(ran.get(), 1);
    assert!(then.ready() && f.ready() && g.ready() && done.ready());
    f.into_result();
    g.into_result();
    done.into_result();

    let p = Promise::<u64>::new();
    let (f, g) = (p.get_future(), p.get_future());
    let h = g.clone();
    p.fulfill_result(5);
    // One clone lets the state copy the value for every reader.
    assert_eq!((g.into_result(), h.into_result()), (5, 5));
    assert_eq!(f.into_result(), 5, "the last reader takes the value");

    let p = Promise::<u64>::new();
    let (f, g) = (p.get_future(), p.get_future());
    p.fulfill_result(6);
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.into_result()));
    assert!(panic_message(e.unwrap_err()).contains("Future::clone"));
    drop(g);
}

/// §5.7 ¶2: every copy of a future sees the value, also one consumed inside a callback
/// that runs before the other callbacks of the same fulfilment.
#[test]
fn a_clone_consumed_inside_a_callback_leaves_the_value_to_the_others() {
    let p = Promise::<u64>::new();
    let f = p.get_future();
    let g = f.clone();
    let early = f.clone().then(move |v| v + g.into_result());
    let both = when_all((f.clone(), f.clone()));
    let late = f.then(|v| v * 10);
    p.fulfill_result(3);
    assert_eq!(early.into_result(), 6);
    assert_eq!(both.into_result(), (3, 3));
    assert_eq!(late.into_result(), 30);
}

#[test]
fn result_of_a_non_ready_future_panics() {
    let p: Promise<i32> = Promise::new();
    let f = p.get_future();
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.result()));
    assert!(panic_message(e.unwrap_err()).contains("not ready"));
}
