//! Borrowed RPC arguments (`by_ref`): serialized from the borrow as UPC++ serializes
//! `const&` arguments (§9.3 ¶3, §7.3 ¶12 for `as_rpc`), received as owned values.

mod common;
use common::all_gather;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use upcxx::{
    by_ref, delete_array, new_array, operation_cx, progress, rank_me, rank_n, remote_cx, rpc,
    rpc_ff, rput_with, when_all, Future, GlobalPtr, ProgressLevel,
};

/// How many times a [`Counted`] was cloned in this process.
static CLONES: AtomicU64 = AtomicU64::new(0);

/// A serde type whose `Clone` counts.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Counted {
    id: u64,
    name: String,
    data: Vec<u8>,
}

impl Clone for Counted {
    fn clone(&self) -> Counted {
        CLONES.fetch_add(1, Ordering::SeqCst);
        Counted {
            id: self.id,
            name: self.name.clone(),
            data: self.data.clone(),
        }
    }
}

upcxx::impl_future_value!(Counted);

fn counted(from: u32) -> Counted {
    Counted {
        id: u64::from(from) * 1000 + 7,
        name: format!("from rank {from}"),
        data: (0..100u8).map(|b| b ^ from as u8).collect(),
    }
}

fn user_progress_until(mut done: impl FnMut() -> bool) {
    while !done() {
        progress(ProgressLevel::User);
    }
}

/// §9.3 ¶3: the function on every rank (this one included) receives owned values equal
/// to the borrowed `&str`, `&[u8]`, `&String`, `&Vec<T>` and `&Counted`, next to
/// arguments by value.
#[test]
fn the_target_receives_owned_values_of_borrowed_arguments() {
    for n in [1, 3] {
        gex::testing::spmd(n, || {
            upcxx::init();
            let me = rank_me();
            let text = format!("hello from {me}");
            let bytes: Vec<u8> = (0..=255u8).collect();
            let words = vec![u64::from(me); 5];
            let value = counted(me);
            let futs: Vec<Future<bool>> = (0..rank_n())
                .map(|r| {
                    rpc(
                        r,
                        |s: String, b: Vec<u8>, w: Vec<u64>, owned: String, c: Counted, x: u32| {
                            s == format!("hello from {x}")
                                && b == (0..=255u8).collect::<Vec<_>>()
                                && w == vec![u64::from(x); 5]
                                && owned == s
                                && c == counted(x)
                        },
                        (
                            by_ref(text.as_str()),
                            by_ref(&bytes[..]),
                            by_ref(&words),
                            by_ref(&text),
                            by_ref(&value),
                            me,
                        ),
                    )
                })
                .collect();
            assert!(when_all(futs).wait().into_iter().all(|ok| ok));
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// Counted values `rpc_ff` delivered here, and how many of them were wrong.
static FF_SEEN: AtomicU64 = AtomicU64::new(0);
static FF_BAD: AtomicU64 = AtomicU64::new(0);

fn check_counted(c: Counted, from: u32) {
    let counter = if c == counted(from) {
        &FF_SEEN
    } else {
        &FF_BAD
    };
    counter.fetch_add(1, Ordering::SeqCst);
}

/// A borrowed argument is not cloned by `rpc`, `rpc_ff` or `remote_cx::as_rpc`; the
/// same value passed by value is (the control that shows the counter counts).
#[test]
fn borrowed_arguments_are_not_cloned() {
    gex::testing::spmd(3, || {
        upcxx::init();
        let me = rank_me();
        let next = (me + 1) % rank_n();
        let value = counted(me);

        let got = rpc(next, |c: Counted| c, (by_ref(&value),)).wait();
        assert_eq!(got, value);
        rpc_ff(next, check_counted, (by_ref(&value), me));

        let mine = new_array::<u64>(1);
        let all = all_gather(&mine);
        let slot: GlobalPtr<u64> = all[next as usize];
        let landed = rput_with(
            5u64,
            slot,
            remote_cx::as_rpc(check_counted, (by_ref(&value), me)) | operation_cx::as_future(),
        );
        landed.wait();
        user_progress_until(|| FF_SEEN.load(Ordering::SeqCst) + FF_BAD.load(Ordering::SeqCst) == 2);
        assert_eq!(FF_BAD.load(Ordering::SeqCst), 0);
        assert_eq!(
            CLONES.load(Ordering::SeqCst),
            0,
            "a borrowed argument was cloned"
        );

        // By value, the caller that keeps its value has to clone it.
        rpc(next, |c: Counted| c.id, (value.clone(),)).wait();
        assert_eq!(CLONES.load(Ordering::SeqCst), 1);

        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

/// The bytes of a borrowed argument are those of its owned type: a `by_ref` of a `str`
/// or a slice serializes as the `String` or `Vec` the target decodes.
#[test]
fn a_borrowed_argument_serializes_as_its_owned_type() {
    use upcxx::serialization::{deserialize, serialize, ByRef};
    let v = vec![1u32, 300, 70_000];
    assert_eq!(serialize(&by_ref(&v[..])), serialize(&v));
    assert_eq!(serialize(&by_ref("abc")), serialize(&String::from("abc")));
    let c = counted(2);
    let back = deserialize::<ByRef<'_, Counted>>(&serialize(&by_ref(&c))).unwrap();
    assert_eq!(back, c);
    assert_eq!(CLONES.load(Ordering::SeqCst), 0);
}
