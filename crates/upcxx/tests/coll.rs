//! Collectives (UPC++ spec ch. 12) on 1 to 5 ranks and on split teams: `barrier`,
//! `barrier_async` (§12.2 ¶6–¶16), `broadcast` of a value, of a buffer and of a lent
//! vector (¶37–¶43), `reduce_one` and `reduce_all` of a value, of a buffer and of a lent
//! vector with the `op_fast_*` operations and closures (¶17–¶36), of plain data and of
//! `bool`s and enums, each completion kind of chapter 7 (future, promise, LPC), and
//! what misuse does.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::panic_text;
use gex::testing::{spmd, spmd_outcome, SpmdOptions};
use upcxx::coll::barrier;
use upcxx::{
    current_persona, local_team, op_fast_add, op_fast_bit_and, op_fast_bit_or, op_fast_bit_xor,
    op_fast_max, op_fast_min, op_fast_mul, operation_cx, rank_me, rank_n, world, EntryBarrier,
    Promise, Team,
};

/// Digit strings under concatenation: `(value, 10^digits)`. Associative, not
/// commutative, so the result spells the order in which ranks were combined.
fn concat(a: [u64; 2], b: [u64; 2]) -> [u64; 2] {
    [a[0] * b[1] + b[0], a[1] * b[1]]
}

/// The digits `1..=n` in order: what `concat` of ranks' `rank + 1` gives in rank order.
fn digits(n: u32) -> u64 {
    (1..=u64::from(n)).fold(0, |v, d| v * 10 + d)
}

/// Every collective, with the default completion, over `team`.
fn every_collective(team: &Team) {
    let me = team.rank_me();
    let n = team.rank_n();
    let m = u64::from(me);
    let nn = u64::from(n);
    barrier(team);
    upcxx::barrier_async(team).wait();
    for root in 0..n {
        assert_eq!(
            upcxx::broadcast(m * 100 + 5, root, team).wait(),
            u64::from(root) * 100 + 5
        );
    }
    let root = n - 1;
    let sum = upcxx::reduce_one(m + 1, op_fast_add, root, team).wait();
    if me == root {
        assert_eq!(sum, nn * (nn + 1) / 2);
    }
    assert_eq!(
        upcxx::reduce_all(m + 1, op_fast_add, team).wait(),
        nn * (nn + 1) / 2
    );
    let ord = upcxx::reduce_all([m + 1, 10], concat, team).wait();
    assert_eq!(ord[0], digits(n), "closure not combined in rank order");
    let ord = upcxx::reduce_one([m + 1, 10], concat, 0, team).wait();
    if me == 0 {
        assert_eq!(ord[0], digits(n));
    }
    // Buffers: element i of rank r is r * 10 + i.
    let src: Vec<i64> = (0..5).map(|i| i64::from(me) * 10 + i).collect();
    let mut dst = vec![0i64; 5];
    // SAFETY: both vectors outlive the wait, and are not touched until it returns.
    unsafe { upcxx::reduce_all_buffer(src.as_ptr(), dst.as_mut_ptr(), 5, op_fast_max, team) }
        .wait();
    let top = i64::from(n - 1) * 10;
    assert_eq!(dst, (0..5).map(|i| top + i).collect::<Vec<_>>());
    let mut dst = vec![-1i64; 5];
    // SAFETY: as above.
    unsafe { upcxx::reduce_one_buffer(src.as_ptr(), dst.as_mut_ptr(), 5, op_fast_min, 0, team) }
        .wait();
    if me == 0 {
        assert_eq!(dst, (0..5).collect::<Vec<_>>());
    } else {
        assert_eq!(dst, [-1; 5], "dst is ignored off the root");
    }
    let mut buf: Vec<u32> = if me == root {
        (0..1000).collect()
    } else {
        vec![0; 1000]
    };
    // SAFETY: `buf` outlives the wait and is not touched until it returns.
    unsafe { upcxx::broadcast_buffer(buf.as_mut_ptr(), buf.len(), root, team) }.wait();
    assert!(buf.iter().enumerate().all(|(i, &v)| v == i as u32));
    lent_vectors(team);
}

/// The vector forms of the buffer collectives: each rank's vector comes back, reduced
/// in place or overwritten by the root's.
fn lent_vectors(team: &Team) {
    let me = team.rank_me();
    let n = team.rank_n();
    let mine: Vec<i64> = (0..5).map(|i| i64::from(me) * 10 + i).collect();
    let top = i64::from(n - 1) * 10;
    let got = upcxx::reduce_all_vec(mine.clone(), op_fast_max, team).wait();
    assert_eq!(got, (0..5).map(|i| top + i).collect::<Vec<_>>());
    for root in [0, n - 1] {
        let got = upcxx::reduce_one_vec(mine.clone(), op_fast_add, root, team).wait();
        if me == root {
            let ranks = i64::from(n);
            let want: Vec<i64> = (0..5)
                .map(|i| 10 * ranks * (ranks - 1) / 2 + ranks * i)
                .collect();
            assert_eq!(got, want, "the sums at root {root}");
        } else {
            assert_eq!(
                got, mine,
                "a rank other than root {root} gets its own elements back"
            );
        }
    }
    // A closure, element by element in rank order; vectors that do not fit a message.
    let ord = upcxx::reduce_all_vec(vec![[u64::from(me) + 1, 10]; 3], concat, team).wait();
    assert!(ord.iter().all(|o| o[0] == digits(n)), "{ord:?}");
    let big: Vec<u64> = (0..20_000).map(|i| i * u64::from(me + 1)).collect();
    let sum = upcxx::reduce_all_vec(big, op_fast_add, team).wait();
    let ranks_sum = u64::from(n) * u64::from(n + 1) / 2;
    assert!(sum
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u64 * ranks_sum));
    for root in 0..n {
        let buf: Vec<u32> = if me == root {
            (0..3000).map(|i| i * (root + 1)).collect()
        } else {
            vec![u32::MAX; 3000]
        };
        let got = upcxx::broadcast_vec(buf, root, team).wait();
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, &v)| v == i as u32 * (root + 1)));
    }
    assert!(upcxx::reduce_all_vec(Vec::<u64>::new(), op_fast_add, team)
        .wait()
        .is_empty());
    assert!(upcxx::broadcast_vec(Vec::<u8>::new(), 0, team)
        .wait()
        .is_empty());
}

#[test]
fn every_collective_over_the_world_on_1_to_5_ranks() {
    for ranks in 1..=5 {
        spmd(ranks, || {
            upcxx::init();
            every_collective(world());
            upcxx::finalize();
        });
    }
}

#[test]
fn every_collective_over_the_local_team() {
    spmd(3, || {
        upcxx::init();
        every_collective(local_team());
        upcxx::finalize();
    });
}

/// Roots and ranks are relative to the team (§11.1 ¶2).
#[test]
fn every_collective_over_split_teams() {
    for ranks in [3, 5] {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            // Reverse world order within each parity.
            let t = world().split((me % 2) as i32, -(me as i32));
            every_collective(&t);
            let from_root = upcxx::broadcast(me, 0, &t).wait();
            assert_eq!(from_root, t[0]);
            let odd_or_even = upcxx::reduce_all(1u32, op_fast_add, &t).wait();
            assert_eq!(odd_or_even, t.rank_n());
            t.destroy(EntryBarrier::User);
            upcxx::finalize();
        });
    }
}

#[test]
fn op_fast_on_integers_and_floats() {
    spmd(4, || {
        upcxx::init();
        let w = world();
        let me = rank_me();
        let r = |v: i32| me as i32 + v;
        assert_eq!(upcxx::reduce_all(r(1), op_fast_add, w).wait(), 10);
        assert_eq!(upcxx::reduce_all(r(1), op_fast_mul, w).wait(), 24);
        assert_eq!(upcxx::reduce_all(r(-2), op_fast_min, w).wait(), -2);
        assert_eq!(upcxx::reduce_all(r(-2), op_fast_max, w).wait(), 1);
        let bit = 1u64 << me;
        assert_eq!(upcxx::reduce_all(bit, op_fast_bit_or, w).wait(), 0b1111);
        assert_eq!(upcxx::reduce_all(bit | 16, op_fast_bit_and, w).wait(), 16);
        assert_eq!(
            upcxx::reduce_all(bit | 16, op_fast_bit_xor, w).wait(),
            0b1111
        );
        let x = f64::from(me) + 0.5;
        assert_eq!(upcxx::reduce_all(x, op_fast_add, w).wait(), 8.0);
        assert_eq!(
            upcxx::reduce_all(x, op_fast_mul, w).wait(),
            0.5 * 1.5 * 2.5 * 3.5
        );
        assert_eq!(upcxx::reduce_all(-x as f32, op_fast_min, w).wait(), -3.5);
        assert_eq!(upcxx::reduce_all(x, op_fast_max, w).wait(), 3.5);
        // Types without a built-in gex operation go through the user reduction.
        assert_eq!(
            upcxx::reduce_all(200u8 + me as u8, op_fast_add, w).wait(),
            38
        );
        assert_eq!(upcxx::reduce_all(-(me as i16), op_fast_min, w).wait(), -3);
        assert_eq!(upcxx::reduce_all(me as usize, op_fast_max, w).wait(), 3);
        assert_eq!(
            upcxx::reduce_all(1u128 << me, op_fast_bit_xor, w).wait(),
            15
        );
        upcxx::finalize();
    });
}

/// A field-less enum, not every byte of which is one.
#[derive(
    Debug, Clone, Copy, PartialEq, PartialOrd, bytemuck::NoUninit, bytemuck::CheckedBitPattern,
)]
#[repr(u8)]
enum Phase {
    Setup = 1,
    Run = 2,
    Done = 3,
}

/// Values beyond plain data (§12.2 ¶25: *DefinitelyTriviallySerializable*): `bool`s
/// and a field-less enum broadcast and reduced, with closures and with every
/// `op_fast_*` on `bool` (¶22), on 1 to 5 ranks.
#[test]
fn bools_and_enums_are_broadcast_and_reduced() {
    for n in 1..=5 {
        spmd(n, || {
            upcxx::init();
            let w = world();
            let me = rank_me();
            let last = rank_n() - 1;
            let phase = [Phase::Setup, Phase::Run, Phase::Done][me as usize % 3];
            assert!(upcxx::broadcast(me == 0, 0, w).wait());
            assert_eq!(
                upcxx::broadcast(phase, last, w).wait(),
                [Phase::Setup, Phase::Run, Phase::Done][last as usize % 3]
            );
            let all_even =
                upcxx::reduce_all(me.is_multiple_of(2), |a: bool, b: bool| a && b, w).wait();
            assert_eq!(all_even, rank_n() == 1);
            assert!(upcxx::reduce_all(me == last, op_fast_bit_or, w).wait());
            assert!(upcxx::reduce_all(true, op_fast_bit_and, w).wait());
            assert_eq!(
                upcxx::reduce_all(true, op_fast_bit_xor, w).wait(),
                rank_n() % 2 == 1
            );
            // ¶22: add and max are `bit_or`, mul and min `bit_and`, over `bool`.
            let only_last = me == last;
            let multi = rank_n() > 1;
            assert!(upcxx::reduce_all(only_last, op_fast_add, w).wait());
            assert!(upcxx::reduce_all(only_last, op_fast_max, w).wait());
            assert_eq!(upcxx::reduce_all(only_last, op_fast_mul, w).wait(), !multi);
            assert_eq!(upcxx::reduce_all(only_last, op_fast_min, w).wait(), !multi);
            assert!(!upcxx::reduce_all(false, op_fast_add, w).wait());
            assert!(upcxx::reduce_all(true, op_fast_mul, w).wait());
            let latest =
                upcxx::reduce_one(phase, |a: Phase, b: Phase| if a < b { b } else { a }, 0, w)
                    .wait();
            if me == 0 {
                let want = if rank_n() >= 3 {
                    Phase::Done
                } else if rank_n() == 2 {
                    Phase::Run
                } else {
                    Phase::Setup
                };
                assert_eq!(latest, want);
            }
            upcxx::finalize();
        });
    }
}

/// Operation completion as a promise and as an LPC (§7.3), with the value where the
/// collective produces one, on every collective.
#[test]
fn completions_as_promise_and_lpc() {
    for ranks in [1, 2, 5] {
        spmd(ranks, || {
            upcxx::init();
            let w = world();
            let n = u64::from(rank_n());
            let done = Promise::<()>::new();
            let sum = Promise::<u64>::new();
            let got = Arc::new(AtomicU64::new(0));
            let lpc_got = got.clone();
            upcxx::barrier_async_with(w, operation_cx::as_promise(&done));
            let f = upcxx::reduce_all_with(
                1u64,
                op_fast_add,
                w,
                operation_cx::as_promise(&sum)
                    | operation_cx::as_future()
                    | operation_cx::as_lpc(&current_persona(), move |v: u64| {
                        lpc_got.store(v, Ordering::SeqCst)
                    }),
            );
            let bval = Promise::<u64>::new();
            upcxx::broadcast_with(
                9 + u64::from(rank_me()),
                0,
                w,
                operation_cx::as_promise(&bval),
            );
            done.finalize().wait();
            assert_eq!(f.wait(), n);
            assert_eq!(sum.finalize().wait(), n);
            assert_eq!(bval.finalize().wait(), 9);
            while got.load(Ordering::SeqCst) == 0 {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            assert_eq!(got.load(Ordering::SeqCst), n);
            let lpc_done = Arc::new(AtomicU64::new(0));
            let flag = lpc_done.clone();
            upcxx::barrier_async_with(
                w,
                operation_cx::as_lpc(&current_persona(), move || flag.store(1, Ordering::SeqCst)),
            );
            let mut buf = [rank_me(); 4];
            let p = Promise::<()>::new();
            // SAFETY: `buf` outlives the wait on `p` below and is not touched before.
            unsafe {
                upcxx::broadcast_buffer_with(
                    buf.as_mut_ptr(),
                    4,
                    0,
                    w,
                    operation_cx::as_promise(&p),
                )
            };
            p.finalize().wait();
            assert_eq!(buf, [0; 4]);
            // A lent vector comes back to a promise and to an LPC.
            let back = Promise::<Vec<u64>>::new();
            let sums = Arc::new(AtomicU64::new(0));
            let lpc_sums = sums.clone();
            upcxx::reduce_all_vec_with(
                vec![1u64, 2],
                op_fast_add,
                w,
                operation_cx::as_promise(&back),
            );
            upcxx::reduce_one_vec_with(
                vec![3u64],
                op_fast_add,
                0,
                w,
                operation_cx::as_lpc(&current_persona(), move |v: Vec<u64>| {
                    lpc_sums.store(v[0] + 1, Ordering::SeqCst)
                }),
            );
            let from_root = Promise::<Vec<u64>>::new();
            upcxx::broadcast_vec_with(
                vec![u64::from(rank_me()); 2],
                0,
                w,
                operation_cx::as_promise(&from_root),
            );
            assert_eq!(back.finalize().wait(), [n, 2 * n]);
            assert_eq!(from_root.finalize().wait(), [0, 0]);
            while sums.load(Ordering::SeqCst) == 0 {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            let want = if rank_me() == 0 { 3 * n } else { 3 };
            assert_eq!(sums.load(Ordering::SeqCst), want + 1);
            while lpc_done.load(Ordering::SeqCst) == 0 {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            upcxx::finalize();
        });
    }
}

/// §7.1 ¶14: notification happens during user-level progress, never inside the call.
#[test]
fn futures_turn_ready_only_in_progress() {
    for ranks in [1, 3] {
        spmd(ranks, || {
            upcxx::init();
            let f = upcxx::reduce_all(1u32, op_fast_add, world());
            assert!(!f.ready());
            let b = upcxx::barrier_async(world());
            assert!(!b.ready());
            assert_eq!(f.wait(), rank_n());
            b.wait();
            upcxx::finalize();
        });
    }
}

/// A pending collective completes only once the other ranks took part, so `discharge`
/// does not wait for it and `progress_required` is false meanwhile (§10.5.3 ¶3: the
/// master persona, which alone runs collectives, may answer false while it still needs
/// internal progress). Rank 0 starts a reduction and a barrier, discharges, and only
/// then lets the others start theirs, by an RPC: a `discharge` that waited for the
/// collectives would never return.
#[test]
fn discharge_does_not_wait_for_a_pending_collective() {
    static GO: AtomicU64 = AtomicU64::new(0);
    fn go() {
        GO.store(1, Ordering::Relaxed);
    }
    for ranks in [2, 3] {
        spmd(ranks, || {
            upcxx::init();
            let n = u64::from(rank_n());
            if rank_me() == 0 {
                let sum = upcxx::reduce_all(1u64, op_fast_add, world());
                let both = upcxx::barrier_async(world());
                assert!(!upcxx::progress_required());
                upcxx::discharge();
                assert!(!sum.ready() && !both.ready());
                for r in 1..rank_n() {
                    upcxx::rpc_ff(r, go, ());
                }
                assert_eq!(sum.wait(), n);
                both.wait();
            } else {
                while GO.load(Ordering::Relaxed) == 0 {
                    upcxx::progress(upcxx::ProgressLevel::User);
                }
                assert_eq!(upcxx::reduce_all(1u64, op_fast_add, world()).wait(), n);
                upcxx::barrier_async(world()).wait();
            }
            upcxx::finalize();
        });
    }
}

/// What a pending collective kept and progress drops at its completion is dropped as a
/// callback runs (§10.2): a reduction's operation, whose captures' `Drop` finds itself
/// in the restricted context. Rank 0's reduction is pending when it starts (the others
/// start theirs when it tells them to), so its completion is found by progress.
#[test]
fn a_reductions_operation_is_dropped_in_the_restricted_context() {
    static GO: AtomicU64 = AtomicU64::new(0);
    static DROPPED: AtomicU64 = AtomicU64::new(0);
    fn go() {
        GO.store(1, Ordering::Relaxed);
    }
    struct Probe;
    impl Drop for Probe {
        fn drop(&mut self) {
            let seen = if upcxx::in_restricted_context() { 1 } else { 2 };
            DROPPED.store(seen, Ordering::Relaxed);
        }
    }
    spmd(3, || {
        upcxx::init();
        let probe = Probe;
        let add = move |a: u64, b: u64| {
            let _ = &probe;
            a + b
        };
        if rank_me() == 0 {
            let sum = upcxx::reduce_all(1u64, add, world());
            for r in 1..rank_n() {
                upcxx::rpc_ff(r, go, ());
            }
            assert_eq!(sum.wait(), 3);
            assert_eq!(
                DROPPED.load(Ordering::Relaxed),
                1,
                "the operation was dropped outside the restricted context"
            );
        } else {
            while GO.load(Ordering::Relaxed) == 0 {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            assert_eq!(upcxx::reduce_all(1u64, add, world()).wait(), 3);
        }
        upcxx::finalize();
    });
}

/// §10.2 restricts waiting, not initiating: callbacks run by progress (the restricted
/// context) start the non-blocking collectives, whose futures chain, and build a
/// `dist_object` (§14.4 ¶6: progress level none).
#[test]
fn callbacks_initiate_collectives_and_build_dist_objects() {
    for ranks in [1, 2, 3, 5] {
        spmd(ranks, || {
            upcxx::init();
            let (me, n) = (u64::from(rank_me()), u64::from(rank_n()));
            let built = std::rc::Rc::new(std::cell::RefCell::new(None));
            let slot = built.clone();
            let (sum, root, vec) = upcxx::barrier_async(world())
                .then(move |()| {
                    *slot.borrow_mut() = Some(upcxx::DistObject::new(me * 3));
                    upcxx::reduce_all(me, op_fast_add, world())
                })
                .then(move |sum| {
                    let root = upcxx::broadcast(me + 100, 0, world());
                    let vec = upcxx::reduce_all_vec(vec![me, 1], op_fast_add, world());
                    upcxx::when_all((upcxx::make_future(sum), root, vec))
                })
                .then(|(sum, root, vec)| {
                    upcxx::barrier_async(world()).then(move |()| (sum, root, vec))
                })
                .wait();
            assert_eq!((sum, root), (n * (n - 1) / 2, 100));
            assert_eq!(vec, [sum, n]);
            let obj = built.borrow_mut().take().expect("built in the callback");
            let next = (rank_me() + 1) % rank_n();
            assert_eq!(obj.fetch(next).wait(), u64::from(next) * 3);
            upcxx::barrier();
            drop(obj);
            upcxx::finalize();
        });
    }
}

/// Many collectives in flight at once, on two teams, waited in reverse.
#[test]
fn many_collectives_in_flight() {
    spmd(4, || {
        upcxx::init();
        let me = rank_me();
        let t = world().split((me % 2) as i32, me as i32);
        let mut fs = Vec::new();
        for i in 0..20u64 {
            fs.push(upcxx::reduce_all(i + u64::from(me), op_fast_add, world()));
            fs.push(upcxx::reduce_all(i, op_fast_add, &t));
            fs.push(upcxx::broadcast(i, (i % 2) as u32, &t));
        }
        for (k, f) in fs.into_iter().enumerate().rev() {
            let i = (k / 3) as u64;
            let want = match k % 3 {
                0 => 4 * i + 6,
                1 => 2 * i,
                _ => i,
            };
            assert_eq!(f.wait(), want, "collective {k}");
        }
        t.destroy(EntryBarrier::User);
        upcxx::finalize();
    });
}

#[test]
fn bad_roots_and_teams_fail_naming_the_call() {
    spmd(2, || {
        upcxx::init();
        let msg = panic_text(|| {
            drop(upcxx::broadcast(1u8, 2, world()));
        });
        assert!(
            msg.contains("upcxx::broadcast") && msg.contains("root 2"),
            "{msg}"
        );
        let msg = panic_text(|| {
            drop(upcxx::reduce_one(1u8, op_fast_add, 5, world()));
        });
        assert!(
            msg.contains("upcxx::reduce_one") && msg.contains("root 5"),
            "{msg}"
        );
        let msg = panic_text(|| {
            drop(upcxx::reduce_one_vec(vec![1u8], op_fast_add, 2, world()));
        });
        assert!(
            msg.contains("upcxx::reduce_one_vec") && msg.contains("root 2"),
            "{msg}"
        );
        let msg = panic_text(|| {
            drop(upcxx::broadcast_vec(vec![1u8], 3, world()));
        });
        assert!(
            msg.contains("upcxx::broadcast_vec") && msg.contains("root 3"),
            "{msg}"
        );
        let none = world().split(upcxx::COLOR_NONE, 0);
        let msg = panic_text(|| {
            drop(upcxx::reduce_all(1u8, op_fast_add, &none));
        });
        assert!(msg.contains("color_none"), "{msg}");
        let t = world().split(0, 0);
        t.destroy(EntryBarrier::User);
        let msg = panic_text(|| {
            drop(upcxx::barrier_async(&t));
        });
        assert!(
            msg.contains("upcxx::barrier_async") && msg.contains("destroyed"),
            "{msg}"
        );
        upcxx::finalize();
    });
}

/// §12.2 ¶8 and §11.3.1 ¶23: `barrier` and `team::split` "will invoke user-level
/// progress", and so do the entry barriers of `team::destroy`, `atomic_domain::destroy`
/// and `cuda_device::destroy` with `entry_barrier::user` (§11.3.1 ¶35, §13.3 ¶18,
/// §16.1.1 ¶29), also when their barrier is complete at once (on a team of one, or
/// when every other member arrived first): an RPC a rank sent itself before the call
/// has run when the call returns.
#[test]
fn barriers_that_make_user_progress_run_rpcs_already_queued() {
    static RAN: AtomicU64 = AtomicU64::new(0);
    fn bump() {
        RAN.fetch_add(1, Ordering::Relaxed);
    }
    for n in 1..=5 {
        spmd(n, || {
            upcxx::init();
            let me = rank_me();
            upcxx::rpc_ff(me, bump, ());
            upcxx::barrier();
            assert_eq!(RAN.load(Ordering::Relaxed), 1, "after the world's barrier");
            upcxx::rpc_ff(me, bump, ());
            let alone = world().split(me as i32, 0);
            assert_eq!(RAN.load(Ordering::Relaxed), 2, "after a split");
            upcxx::rpc_ff(me, bump, ());
            barrier(&alone);
            assert_eq!(
                RAN.load(Ordering::Relaxed),
                3,
                "after a team of one's barrier"
            );
            let mut ad = upcxx::AtomicDomain::<u64>::new_in(&[upcxx::AtomicOp::Load], &alone);
            upcxx::rpc_ff(me, bump, ());
            ad.destroy(EntryBarrier::User);
            let ran = RAN.load(Ordering::Relaxed);
            assert_eq!(ran, 4, "after an atomic domain's destruction");
            upcxx::rpc_ff(me, bump, ());
            alone.destroy(EntryBarrier::User);
            assert_eq!(RAN.load(Ordering::Relaxed), 5, "after a team's destruction");
            let mut device = upcxx::CudaDevice::with_kind(gex::kinds::Mk::emulated(0, 1 << 20));
            upcxx::rpc_ff(me, bump, ());
            device.destroy(EntryBarrier::User);
            assert_eq!(
                RAN.load(Ordering::Relaxed),
                6,
                "after a device's destruction"
            );
            upcxx::finalize();
        });
    }
}

/// §12.2 ¶4, §13.3 ¶8, §16.1.1 ¶20: the collectives that make internal-level progress
/// (an atomic domain's construction, a device's, and the destroys with
/// `entry_barrier::internal`) send this thread's RPCs that internal progress owes: rank
/// 0 sends two `rpc_ff`s (the second gathered into a batch) and enters the collective;
/// rank 1 enters it only once both have run, so it hangs if the batch waits.
#[test]
fn collectives_that_make_internal_progress_send_batched_rpcs() {
    static RAN: AtomicU64 = AtomicU64::new(0);
    fn bump() {
        RAN.fetch_add(1, Ordering::Relaxed);
    }
    spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let mut step = 0;
        // Before each collective: rank 0 owes rank 1 two RPCs, rank 1 waits for them.
        let mut owe = || {
            step += 2;
            if me == 0 {
                upcxx::progress(upcxx::ProgressLevel::User);
                upcxx::rpc_ff(1, bump, ());
                upcxx::rpc_ff(1, bump, ());
            } else {
                while RAN.load(Ordering::Relaxed) < step {
                    upcxx::progress(upcxx::ProgressLevel::User);
                }
            }
        };
        owe();
        let mut ad = upcxx::AtomicDomain::<u64>::new(&[upcxx::AtomicOp::Load]);
        owe();
        ad.destroy(EntryBarrier::Internal);
        let pair = world().split(0, me as i32);
        owe();
        pair.destroy(EntryBarrier::Internal);
        owe();
        let mut device = upcxx::CudaDevice::with_kind(gex::kinds::Mk::emulated(0, 1 << 20));
        owe();
        device.destroy(EntryBarrier::Internal);
        upcxx::barrier();
        if me == 1 {
            assert_eq!(RAN.load(Ordering::Relaxed), 10);
        }
        upcxx::finalize();
    });
}

/// §12.2 ¶8 on a team of one, whose barrier is complete as it starts: RPCs that other
/// ranks sent before it, waiting unpolled in this rank's queues, have run when it
/// returns. The other ranks send, make sure the RPCs left, then raise a word of rank
/// 0's segment that rank 0 spins on without making progress. On ranks that share
/// memory only (where a message that left has arrived).
#[test]
fn a_barrier_of_one_runs_rpcs_that_arrived() {
    static RAN: AtomicU64 = AtomicU64::new(0);
    fn bump() {
        RAN.fetch_add(1, Ordering::Relaxed);
    }
    for n in 2..=4 {
        spmd(n, || {
            upcxx::init();
            let (me, n) = (rank_me(), rank_n());
            let alone = world().split(me as i32, 0);
            let word = upcxx::broadcast(upcxx::new_::<u64>(0), 0, world()).wait();
            if local_team().rank_n() == n {
                if me == 0 {
                    // SAFETY: rank 0's own word; the others change it only atomically.
                    let raised = unsafe { &*word.local().cast::<AtomicU64>() };
                    while raised.load(Ordering::Acquire) != u64::from(n - 1) {
                        std::hint::spin_loop();
                    }
                    barrier(&alone);
                    assert_eq!(RAN.load(Ordering::Relaxed), u64::from(n - 1));
                } else {
                    upcxx::rpc_ff(0, bump, ());
                    upcxx::discharge();
                    // SAFETY: a word of rank 0's segment, mapped here (same host).
                    let raised = unsafe { &*word.local().cast::<AtomicU64>() };
                    raised.fetch_add(1, Ordering::Release);
                }
            }
            upcxx::barrier();
            if me == 0 {
                upcxx::delete_(word);
            }
            alone.destroy(EntryBarrier::User);
            upcxx::finalize();
        });
    }
}

/// §12.1: ranks that call collectives in different orders fail the job with a message
/// that says so.
#[test]
fn collectives_in_different_orders_fail_the_job() {
    let mut opts = SpmdOptions::new(2);
    opts.expect_failure = true;
    let Some(outcome) = spmd_outcome(opts, || {
        upcxx::init();
        if rank_me() == 0 {
            upcxx::reduce_all(1u64, op_fast_add, world()).wait();
        } else {
            upcxx::broadcast(1u64, 1, world()).wait();
        }
        upcxx::barrier();
        unreachable!("the ranks disagree");
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert!(report.contains("different collective"), "{report}");
}

/// §12.2 ¶25, ¶39: the count of a buffer collective is single-valued; lent vectors of
/// different lengths fail the job with the mismatch message.
#[test]
fn vectors_of_different_lengths_fail_the_job() {
    let mut opts = SpmdOptions::new(2);
    opts.expect_failure = true;
    let Some(outcome) = spmd_outcome(opts, || {
        upcxx::init();
        let len = 4 + rank_me() as usize;
        upcxx::reduce_all_vec(vec![1u32; len], op_fast_add, world()).wait();
        upcxx::barrier();
        unreachable!("the ranks disagree");
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert!(
        report.contains("different single-valued arguments"),
        "{report}"
    );
}

/// §12.1: a barrier that ranks place differently among the other collectives fails
/// the job too (rank 1's broadcast reaches rank 0, which counted one barrier more).
#[test]
fn a_barrier_out_of_place_fails_the_job() {
    let mut opts = SpmdOptions::new(2);
    opts.expect_failure = true;
    let Some(outcome) = spmd_outcome(opts, || {
        upcxx::init();
        if rank_me() == 0 {
            upcxx::barrier();
            upcxx::broadcast(1u64, 1, world()).wait();
        } else {
            upcxx::broadcast(1u64, 1, world()).wait();
            upcxx::barrier();
        }
        upcxx::barrier();
        unreachable!("the ranks disagree");
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert!(report.contains("number of barriers"), "{report}");
}

/// GASP: each collective and team operation is one `GASP_UPCXX_*` interval at the
/// caller's line, naming the team; the `gex` events inside are hidden, syncs included.
#[cfg(feature = "gasp")]
mod gasp_events {
    use std::sync::{Arc, Mutex, OnceLock};

    use gasp::events::*;
    use gasp::{Event, EventType, Tool};
    use gex::testing::spmd;
    use upcxx::{op_fast_add, world, EntryBarrier};

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(u32, EventType, u32)>>);

    struct Shared(Arc<Recorder>);

    impl Tool for Shared {
        fn event_notify(&self, e: &Event<'_>) {
            self.0
                 .0
                .lock()
                .unwrap()
                .push((e.tag, e.ty, e.location.line()));
        }
        fn control(&self, _on: bool) -> bool {
            true
        }
        fn create_event(&self, _name: &str, _desc: Option<&str>) -> u32 {
            USEREVT_START
        }
    }

    #[test]
    fn each_collective_is_one_event_at_its_call_site() {
        for ranks in [1, 3] {
            spmd(ranks, || {
                static REC: OnceLock<Arc<Recorder>> = OnceLock::new();
                let rec = REC.get_or_init(Arc::default).clone();
                let shared = rec.clone();
                gasp::register_tool(move |_, _| Box::new(Shared(shared)));
                upcxx::init();
                let w = world();
                let mark = rec.0.lock().unwrap().len();
                let l_barrier = line!() + 1;
                upcxx::coll::barrier(w);
                let l_async = line!() + 1;
                let b = upcxx::barrier_async(w);
                b.wait();
                let l_bcast = line!() + 1;
                let v = upcxx::broadcast(5u64, 0, w).wait();
                let l_one = line!() + 1;
                let s = upcxx::reduce_one(1u64, op_fast_add, 0, w).wait();
                let first = |a: [u64; 2], b: [u64; 2]| [a[0] + b[0], 0];
                let l_all = line!() + 1;
                let c = upcxx::reduce_all([1u64, 10], first, w);
                let c = c.wait();
                let l_split = line!() + 1;
                let t = w.split(0, 0);
                let l_destroy = line!() + 1;
                t.destroy(EntryBarrier::User);
                assert_eq!((v, c[0]), (5, u64::from(upcxx::rank_n())));
                let _ = s;
                let got: Vec<(u32, EventType, u32)> = rec.0.lock().unwrap()[mark..]
                    .iter()
                    .filter(|e| e.0 != GASP_UPCXX_FUTURE_WAIT && e.0 != GASP_UPCXX_PROMISE_FULFILL)
                    .copied()
                    .collect();
                let mut want = Vec::new();
                for (tag, line) in [
                    (GASP_UPCXX_BARRIER, l_barrier),
                    (GASP_UPCXX_BARRIER_ASYNC, l_async),
                    (GASP_UPCXX_BROADCAST, l_bcast),
                    (GASP_UPCXX_REDUCE_ONE, l_one),
                    (GASP_UPCXX_REDUCE_ALL, l_all),
                    (GASP_UPCXX_TEAM_SPLIT, l_split),
                    (GASP_UPCXX_TEAM_DESTROY, l_destroy),
                ] {
                    want.push((tag, EventType::Start, line));
                    want.push((tag, EventType::End, line));
                }
                assert_eq!(got, want);
                upcxx::finalize();
            });
        }
    }
}

/// `gex::exit(0)` in one rank (`gasnet_exit`) ends a upcxx job too: the others, waiting
/// for it in upcxx's barrier and on a future nothing will ready, leave with status 0
/// instead of waiting forever. (The harness then complains that no rank reported back,
/// which it does only for a job that ended with 0.)
#[test]
fn gex_exit_zero_in_one_rank_ends_the_job() {
    let msg = panic_text(|| {
        spmd_outcome(SpmdOptions::new(3), || {
            upcxx::init();
            let last = rank_n() - 1;
            upcxx::barrier();
            match rank_me() {
                r if r == last => gex::exit(0),
                0 => upcxx::barrier(),
                _ => Promise::<()>::new().get_future().wait(),
            }
            unreachable!("rank {} went on after the job ended", rank_me());
        });
    });
    assert!(
        msg.contains("exited successfully without running the body"),
        "{msg}"
    );
}

/// §7.2.1 ¶3: a collective given a ready promise fails before it starts: only one rank
/// makes the mistake here, and the job's next collectives still match (a collective
/// started on that rank alone would pair its next barrier with the others' first, and
/// leave it waiting in a second), with what it lent given back.
#[test]
fn a_collective_with_a_ready_promise_starts_nothing() {
    for n in 1..=3 {
        spmd(n, || {
            upcxx::init();
            if rank_me() == 0 {
                let ready = Promise::<()>::new();
                ready.fulfill_anonymous(1);
                let text = panic_text(|| {
                    upcxx::barrier_async_with(world(), operation_cx::as_promise(&ready))
                });
                assert!(text.contains("already ready"), "{text}");
                let value = Promise::<u64>::new();
                value.fulfill_result(1);
                let text = panic_text(|| {
                    upcxx::broadcast_with(7u64, 0, world(), operation_cx::as_promise(&value))
                });
                assert!(text.contains("already ready"), "{text}");
                let text = panic_text(|| {
                    upcxx::reduce_all_with(
                        1u64,
                        op_fast_add,
                        world(),
                        operation_cx::as_promise(&value),
                    )
                });
                assert!(text.contains("already ready"), "{text}");
            }
            upcxx::barrier();
            let sum = upcxx::reduce_all(u64::from(rank_me()), op_fast_add, world()).wait();
            assert_eq!(sum, u64::from(rank_n() * (rank_n() - 1) / 2));
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}
