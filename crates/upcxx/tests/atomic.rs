//! Atomics (UPC++ spec ch. 13) on 1 to 4 ranks: every operation of §13.3 on every
//! permitted type against a sequential model, on every target rank; completions as
//! future, promise and LPC (§7, §13.3 "Completions"); contention on one word whose
//! final value proves atomicity; domains over split teams; construction and `destroy`
//! (§13.3 ¶4, ¶13, ¶20); and every erroneous call.

mod common;
use common::{all_gather, panic_text};

use std::fmt::Debug;
use std::rc::Rc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::{Arc, Mutex};

use gex::AtomicType;
use upcxx::{
    current_persona, new_array, operation_cx, rank_me, rank_n, AtomicDomain, AtomicOp,
    EntryBarrier, GlobalPtr, Promise,
};

/// What a test needs of a type: the model of Tables 13.1 and 13.2 and sample values.
trait Model: AtomicType + Debug + Default {
    /// The value after `op` with operand `a` (and `b` for compare_exchange).
    fn after(op: AtomicOp, v: Self, a: Self, b: Self) -> Self;
    fn samples() -> [(Self, Self, Self); 3];
    fn same(x: Self, y: Self) -> bool;
}

macro_rules! model {
    ($($t:ty: $bits:expr, $one:expr, [$($s:expr),*];)*) => {$(
        impl Model for $t {
            fn after(op: AtomicOp, v: $t, a: $t, b: $t) -> $t {
                #[allow(clippy::redundant_closure_call)]
                let bits = $bits;
                use AtomicOp::*;
                match op {
                    Load => v,
                    Store => a,
                    CompareExchange => if v.to_bits() == a.to_bits() { b } else { v },
                    Add | FetchAdd => v + a,
                    Sub | FetchSub => v - a,
                    Mul | FetchMul => v * a,
                    Min | FetchMin => if a < v { a } else { v },
                    Max | FetchMax => if v < a { a } else { v },
                    BitAnd | FetchBitAnd => bits(v, a, 0),
                    BitOr | FetchBitOr => bits(v, a, 1),
                    BitXor | FetchBitXor => bits(v, a, 2),
                    Inc | FetchInc => v + $one,
                    Dec | FetchDec => v - $one,
                }
            }
            fn samples() -> [($t, $t, $t); 3] { [$($s),*] }
            fn same(x: $t, y: $t) -> bool { x.to_bits() == y.to_bits() }
        }
    )*};
}

fn int_bits<
    T: std::ops::BitAnd<Output = T> + std::ops::BitOr<Output = T> + std::ops::BitXor<Output = T>,
>() -> impl Fn(T, T, u8) -> T {
    |v, a, k| match k {
        0 => v & a,
        1 => v | a,
        _ => v ^ a,
    }
}

fn no_bits<T>(_: T, _: T, _: u8) -> T {
    unreachable!("bit-wise operations are not permitted for floating point")
}

model! {
    i32: int_bits::<i32>(), 1, [(7, 3, 9), (7, 7, -9), (-12, 5, 0)];
    u32: int_bits::<u32>(), 1, [(7, 3, 9), (7, 7, 9), (0xF0F0, 0x0FF0, 1)];
    i64: int_bits::<i64>(), 1, [(7, 3, 9), (7, 7, -9), (-(1 << 40), 5, 0)];
    u64: int_bits::<u64>(), 1, [(7, 3, 9), (7, 7, 9), (1 << 40, 0xFFFF, 1)];
    f32: no_bits::<f32>, 1.0, [(1.5, 2.25, 8.0), (1.5, 1.5, -3.0), (-4.0, 0.5, 0.0)];
    f64: no_bits::<f64>, 1.0, [(1.5, 2.25, 8.0), (1.5, 1.5, -3.0), (-4.0, 0.5, 0.0)];
}

/// Every operation permitted for `T`.
fn permitted<T: AtomicType>() -> Vec<AtomicOp> {
    AtomicOp::ALL
        .into_iter()
        .filter(|op| op.permits::<T>())
        .collect()
}

/// Runs `op` through the method of its name with the default completion; the value
/// read, if the operation produces one.
fn run<T: Model>(ad: &AtomicDomain<T>, op: AtomicOp, p: GlobalPtr<T>, a: T, b: T) -> Option<T> {
    use AtomicOp::*;
    let o = AcqRel;
    match op {
        Load => Some(ad.load(p, Acquire).wait()),
        Store => none(ad.store(p, a, Release)),
        CompareExchange => Some(ad.compare_exchange(p, a, b, o).wait()),
        Add => none(ad.add(p, a, o)),
        FetchAdd => Some(ad.fetch_add(p, a, o).wait()),
        Sub => none(ad.sub(p, a, Relaxed)),
        FetchSub => Some(ad.fetch_sub(p, a, Acquire).wait()),
        Mul => none(ad.mul(p, a, Release)),
        FetchMul => Some(ad.fetch_mul(p, a, o).wait()),
        Min => none(ad.min(p, a, o)),
        FetchMin => Some(ad.fetch_min(p, a, Relaxed).wait()),
        Max => none(ad.max(p, a, o)),
        FetchMax => Some(ad.fetch_max(p, a, o).wait()),
        BitAnd => none(ad.bit_and(p, a, o)),
        FetchBitAnd => Some(ad.fetch_bit_and(p, a, o).wait()),
        BitOr => none(ad.bit_or(p, a, o)),
        FetchBitOr => Some(ad.fetch_bit_or(p, a, o).wait()),
        BitXor => none(ad.bit_xor(p, a, o)),
        FetchBitXor => Some(ad.fetch_bit_xor(p, a, o).wait()),
        Inc => none(ad.inc(p, o)),
        FetchInc => Some(ad.fetch_inc(p, o).wait()),
        Dec => none(ad.dec(p, Relaxed)),
        FetchDec => Some(ad.fetch_dec(p, o).wait()),
    }
}

/// Waits for a non-fetching operation, which produces no value.
fn none<T>(done: upcxx::Future<()>) -> Option<T> {
    done.wait();
    None
}

fn every_operation<T: Model>() {
    let ops = permitted::<T>();
    let ad = AtomicDomain::<T>::new(&ops);
    let me = rank_me();
    // One word per (writer rank, case) on every rank.
    let cases = ops.len() * 3;
    let mine: GlobalPtr<T> = new_array(cases * rank_n() as usize);
    let all: Vec<GlobalPtr<T>> = all_gather(&mine);
    for (tgt, &base) in all.iter().enumerate() {
        for (i, &op) in ops.iter().enumerate() {
            for (j, (start, a, b)) in T::samples().into_iter().enumerate() {
                let p = base.add(me as usize * cases + i * 3 + j);
                ad.store(p, start, Relaxed).wait();
                let got = run(&ad, op, p, a, b);
                let now = ad.load(p, Relaxed).wait();
                let what = format!("{} on {start:?} with {a:?}, {b:?} at rank {tgt}", op.name());
                let want = T::after(op, start, a, b);
                assert!(T::same(now, want), "{what}: value {now:?}, model {want:?}");
                let fetches = op == AtomicOp::Load
                    || op == AtomicOp::CompareExchange
                    || op.name().starts_with("fetch_");
                assert_eq!(got.is_some(), fetches, "{what}");
                if let Some(v) = got {
                    assert!(T::same(v, start), "{what}: read {v:?}, was {start:?}");
                }
            }
        }
    }
    let mut ad = ad;
    ad.destroy(EntryBarrier::User);
    upcxx::delete_array(mine);
}

/// §13.3 ¶23–¶48, Tables 13.1 and 13.2: every operation on every permitted type, with
/// its default completion, on every target rank, agrees with the sequential model,
/// and the fetching ones produce the value read.
#[test]
fn every_operation_and_type_matches_the_model() {
    for n in 1..=4 {
        gex::testing::spmd(n, || {
            upcxx::init();
            every_operation::<i32>();
            every_operation::<u32>();
            every_operation::<i64>();
            every_operation::<u64>();
            every_operation::<f32>();
            every_operation::<f64>();
            upcxx::finalize();
        });
    }
}

const ROUNDS: u64 = 5_000;

/// §13.1 ¶1: a read-modify-write "will happen without interference or interleaving
/// with other concurrently executing atomic operations": every rank hammers one word
/// of rank 0 (and, on a split team, of the team's rank 0) with fetch_add, inc, bit_xor
/// and a compare_exchange loop; the totals are exact and the values fetch_inc read are
/// all distinct. With fewer rounds where some ranks are on other hosts than the words
/// (each operation is then a round trip over the network).
#[test]
fn contention_loses_no_update_on_the_world_and_on_a_split_team() {
    for n in 2..=4 {
        gex::testing::spmd(n, || {
            upcxx::init();
            let me = rank_me();
            // Every rank's local team is the world exactly when all share one host.
            let rounds = if upcxx::local_team().rank_n() == rank_n() {
                ROUNDS
            } else {
                ROUNDS / 10
            };
            for team in [
                upcxx::world().clone(),
                upcxx::world().split((me % 2) as i32, 0),
            ] {
                use AtomicOp::*;
                let mut ad = AtomicDomain::<u64>::new_in(
                    &[Load, FetchAdd, FetchInc, BitXor, CompareExchange, Inc],
                    &team,
                );
                // Every rank allocates; the words are those of the team's rank 0.
                let own = new_array::<u64>(4);
                let words = all_gather(&own)[team[0] as usize];
                let mut fetched = Vec::new();
                let key =
                    |r: u32, i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(r) << 50;
                upcxx::barrier();
                for i in 0..rounds {
                    ad.fetch_add(words, u64::from(me) + 1, Relaxed).wait();
                    fetched.push(ad.fetch_inc(words.add(1), Relaxed).wait());
                    ad.bit_xor(words.add(2), key(me, i), Relaxed).wait();
                    let mut seen = ad.load(words.add(3), Relaxed).wait();
                    loop {
                        let old = ad
                            .compare_exchange(words.add(3), seen, seen + 1, AcqRel)
                            .wait();
                        if old == seen {
                            break;
                        }
                        seen = old;
                    }
                }
                let all: Vec<Vec<u64>> = all_gather(&fetched);
                let members: Vec<u32> = (0..team.rank_n()).map(|r| team[r]).collect();
                let m = members.len() as u64;
                assert_eq!(
                    ad.load(words, Acquire).wait(),
                    rounds * members.iter().map(|&r| u64::from(r) + 1).sum::<u64>()
                );
                assert_eq!(ad.load(words.add(1), Relaxed).wait(), rounds * m);
                let xor = members
                    .iter()
                    .fold(0, |x, &r| (0..rounds).fold(x, |x, i| x ^ key(r, i)));
                assert_eq!(ad.load(words.add(2), Relaxed).wait(), xor);
                assert_eq!(ad.load(words.add(3), Relaxed).wait(), rounds * m);
                let mut seen: Vec<u64> = members
                    .iter()
                    .flat_map(|&r| all[r as usize].clone())
                    .collect();
                seen.sort_unstable();
                assert_eq!(
                    seen,
                    (0..rounds * m).collect::<Vec<_>>(),
                    "fetch_inc read a value twice"
                );
                ad.destroy(EntryBarrier::User);
                upcxx::barrier();
                upcxx::delete_array(own);
                if !team.id().eq(&upcxx::world().id()) {
                    team.destroy(EntryBarrier::User);
                }
            }
            upcxx::finalize();
        });
    }
}

/// §13.3 "Completions" with ch. 7's objects: operation completion as a future, a
/// promise or an LPC on a persona, alone and combined, with the value read for the
/// fetching operations and none for the others; notified during user-level progress,
/// never inside the initiating call (§7.1 ¶14).
#[test]
fn completions_as_future_promise_and_lpc() {
    gex::testing::spmd(2, || {
        upcxx::init();
        use AtomicOp::*;
        let mut ad = AtomicDomain::<i32>::new(&[Store, FetchAdd, Add, Load]);
        let own = new_array::<i32>(1);
        let word = all_gather(&own)[1 - rank_me() as usize];
        // Each rank works on the other's word, alone.
        ad.store(word, 10, Relaxed).wait();
        let fut = ad.fetch_add(word, 5, Relaxed);
        assert!(!fut.ready(), "notified inside the initiating call");
        assert_eq!(fut.wait(), 10);

        let promise = Promise::<i32>::new();
        let got = Arc::new(Mutex::new(Vec::new()));
        let got2 = got.clone();
        let cxs = operation_cx::as_promise(&promise)
            | operation_cx::as_future()
            | operation_cx::as_lpc(&current_persona(), move |v: i32| {
                got2.lock().unwrap().push(v)
            });
        let f = ad.fetch_add_with(word, 1, Relaxed, cxs);
        assert_eq!(f.wait(), 15);
        assert_eq!(promise.finalize().wait(), 15);
        upcxx::progress(upcxx::ProgressLevel::User);
        assert_eq!(*got.lock().unwrap(), [15]);

        // Non-fetching: a promise dependency, an LPC without argument, no future at all.
        let done = Promise::<()>::new();
        let ran = Arc::new(Mutex::new(0));
        let ran2 = ran.clone();
        let () = ad.add_with(
            word,
            100,
            Relaxed,
            operation_cx::as_promise(&done)
                | operation_cx::as_lpc(&current_persona(), move || *ran2.lock().unwrap() += 1),
        );
        done.finalize().wait();
        upcxx::progress(upcxx::ProgressLevel::User);
        assert_eq!(*ran.lock().unwrap(), 1);
        assert_eq!(
            ad.load_with(word, Acquire, operation_cx::as_future())
                .wait(),
            116
        );
        let p = Promise::<i32>::new();
        ad.load_with(word, Relaxed, operation_cx::as_promise(&p));
        assert_eq!(p.finalize().wait(), 116);
        upcxx::barrier();
        ad.destroy(EntryBarrier::Internal);
        upcxx::delete_array(own);
        upcxx::finalize();
    });
}

thread_local! {
    /// The domain of `operations_initiate_inside_callbacks_and_rpcs`, for its RPCs.
    static DOMAIN: std::cell::RefCell<Option<Rc<AtomicDomain<u64>>>> =
        const { std::cell::RefCell::new(None) };
}

/// §10.2 restricts waiting, not initiating: an atomic (progress level internal, §13.3)
/// may start inside a `then` callback and inside an RPC, whose futures the caller
/// chains. Each rank's word gets 1 from the callback of the rank before it and 10 from
/// an RPC run on the rank before it.
#[test]
fn operations_initiate_inside_callbacks_and_rpcs() {
    for n in 1..=4 {
        gex::testing::spmd(n, || {
            upcxx::init();
            use AtomicOp::*;
            let mut ad = Rc::new(AtomicDomain::<u64>::new(&[Load, FetchAdd]));
            DOMAIN.with(|d| *d.borrow_mut() = Some(Rc::clone(&ad)));
            let own = new_array::<u64>(1);
            let words = all_gather(&own);
            let (me, n) = (rank_me(), rank_n());
            let next = words[((me + 1) % n) as usize];
            upcxx::barrier();
            let in_callback = Rc::clone(&ad);
            let f = ad
                .load(next, Relaxed)
                .then(move |_| in_callback.fetch_add(next, 1, Relaxed));
            // Before it, 0, or 10 if the RPC of the rank two before came first.
            let before = f.wait();
            assert!(before == 0 || before == 10, "{before}");
            let far = words[((me + 2) % n) as usize];
            let in_rpc = |p: GlobalPtr<u64>| {
                DOMAIN.with(|d| d.borrow().as_ref().unwrap().fetch_add(p, 10, Relaxed))
            };
            let before = upcxx::rpc((me + 1) % n, in_rpc, (far,)).wait();
            assert!(before == 0 || before == 1, "{before}");
            upcxx::barrier();
            assert_eq!(ad.load(own, Relaxed).wait(), 11);
            upcxx::barrier();
            DOMAIN.with(|d| d.borrow_mut().take());
            Rc::get_mut(&mut ad)
                .expect("the domain's last handle")
                .destroy(EntryBarrier::User);
            upcxx::delete_array(own);
            upcxx::finalize();
        });
    }
}

/// Bad input panics naming the call and the rule, before anything happens: an
/// operation not given at construction, a memory order the operation does not take,
/// a null or misaligned pointer, a target outside the domain's team, a type not
/// permitted for an operation, a destroyed domain, a promise already ready; and dropping a domain not destroyed
/// while UPC++ is initialized (§13.3 ¶20), which is fine after `finalize`.
#[test]
fn bad_input_names_the_call_and_changes_nothing() {
    for n in 1..=3 {
        gex::testing::spmd(n, || {
            upcxx::init();
            use AtomicOp::*;
            let mut ad = AtomicDomain::<i64>::new(&[Load, Store, FetchAdd]);
            let word = upcxx::new_(7i64);
            let msg = panic_text(|| drop(ad.fetch_sub(word, 1, Relaxed)));
            assert!(msg.starts_with("upcxx::atomic_domain::fetch_sub: atomic_op::fetch_sub is not among the domain's operations (load, store, fetch_add)"), "{msg}");
            for (msg, what) in [
                (panic_text(|| drop(ad.store(word, 1, Acquire))), "store"),
                (panic_text(|| drop(ad.load(word, Release))), "load"),
                (
                    panic_text(|| drop(ad.fetch_add(word, 1, SeqCst))),
                    "fetch_add",
                ),
            ] {
                assert!(
                    msg.starts_with(&format!("upcxx::atomic_domain::{what}: memory order")),
                    "{msg}"
                );
            }
            let msg = panic_text(|| drop(ad.load(GlobalPtr::null(), Relaxed)));
            assert_eq!(
                msg,
                "upcxx::atomic_domain::load: the global pointer is null"
            );
            let odd: GlobalPtr<i64> = word.cast::<u8>().add(4).cast();
            let msg = panic_text(|| drop(ad.fetch_add(odd, 1, Relaxed)));
            assert!(
                msg.contains("upcxx::atomic_domain::fetch_add: the global pointer")
                    && msg.contains("is not aligned"),
                "{msg}"
            );
            let msg = panic_text(|| drop(AtomicDomain::<f64>::new(&[Add, BitXor])));
            assert!(msg.starts_with("upcxx::atomic_domain::atomic_domain: atomic_op::bit_xor is not permitted for f64"), "{msg}");
            // A promise already ready fails the call before the word changes (§7.2.1).
            let ready = Promise::<i64>::new();
            ready.fulfill_result(0);
            let msg = panic_text(|| {
                ad.fetch_add_with(word, 1, Relaxed, operation_cx::as_promise(&ready))
            });
            assert!(msg.contains("dependency count of zero"), "{msg}");
            let ready = Promise::<()>::new();
            ready.fulfill_anonymous(1);
            let msg =
                panic_text(|| ad.store_with(word, 1, Relaxed, operation_cx::as_promise(&ready)));
            assert!(msg.contains("dependency count of zero"), "{msg}");
            assert_eq!(
                ad.load(word, Relaxed).wait(),
                7,
                "a refused call changed the word"
            );

            // A domain over a team of one rank cannot reach the others.
            let alone = upcxx::world().split(rank_me() as i32, 0);
            let mut solo = AtomicDomain::<i64>::new_in(&[FetchAdd], &alone);
            let words = all_gather(&word);
            if rank_n() > 1 {
                let other = words[((rank_me() + 1) % rank_n()) as usize];
                let msg = panic_text(|| drop(solo.fetch_add(other, 1, Relaxed)));
                assert!(
                    msg.contains("upcxx::atomic_domain::fetch_add: the target's rank")
                        && msg.contains("is not a member"),
                    "{msg}"
                );
            }
            assert_eq!(solo.fetch_add(word, 1, Relaxed).wait(), 7);
            solo.destroy(EntryBarrier::None);
            let msg = panic_text(|| drop(solo.fetch_add(word, 1, Relaxed)));
            assert_eq!(msg, "upcxx::atomic_domain::fetch_add: the atomic domain was destroyed (atomic_domain::destroy)");
            let msg = panic_text(|| solo.destroy(EntryBarrier::None));
            assert!(
                msg.starts_with("upcxx::atomic_domain::destroy: the atomic domain was destroyed"),
                "{msg}"
            );
            alone.destroy(EntryBarrier::User);

            // §13.3 ¶20: dropping a live domain while initialized is an error...
            let live = AtomicDomain::<u32>::new(&[Load]);
            let msg = panic_text(|| drop(live));
            assert!(
                msg.contains(
                    "dropped without destroy() while UPC++ is initialized (UPC++ spec §13.3 ¶20)"
                ),
                "{msg}"
            );
            // ...but not once UPC++ was finalized since its creation.
            let kept = AtomicDomain::<u32>::new(&[Load]);
            upcxx::barrier();
            ad.destroy(EntryBarrier::User);
            upcxx::delete_(word);
            upcxx::finalize();
            drop(kept);
        });
    }
}

/// GASP: each operation reports `GASP_UPCXX_ATOMIC_OP` with the target, operation,
/// type, operands and size, at the caller's line; its `gex` operation is not reported
/// (an operation's internals are invisible); construction and destruction report
/// their events.
#[cfg(feature = "gasp")]
#[test]
fn atomic_operations_report_their_gasp_events() {
    use common::recorder::{Recorder, Shared};
    use gasp::events::*;
    use gasp::{Arg, EventType, GPtr};

    gex::testing::spmd(2, || {
        let rec = Arc::new(Recorder::default());
        let shared = rec.clone();
        gasp::register_tool(move |_, _| Box::new(Shared(shared)));
        upcxx::init();
        let own = new_array::<u64>(1);
        let word = all_gather(&own)[1 - rank_me() as usize];
        let new_line = line!() + 1;
        let mut ad = AtomicDomain::<u64>::new(&[AtomicOp::FetchBitXor, AtomicOp::CompareExchange]);
        let op_line = line!() + 1;
        ad.fetch_bit_xor(word, 6, Relaxed).wait();
        let cas_line = line!() + 1;
        ad.compare_exchange(word, 6, 9, AcqRel).wait();
        let destroy_line = line!() + 1;
        ad.destroy(EntryBarrier::User);
        let got = rec.0.lock().unwrap().clone();
        assert!(
            got.iter().all(|e| e.0 != GASP_GEX_AD_OP),
            "the gex operation was reported"
        );
        let ours: Vec<_> = got
            .into_iter()
            .filter(|e| (GASP_UPCXX_ATOMIC_OP..=GASP_UPCXX_ATOMIC_DOMAIN_DESTROY).contains(&e.0))
            .collect();
        let kinds: Vec<_> = ours.iter().map(|e| (e.0, e.1, e.2)).collect();
        assert_eq!(
            kinds,
            [
                (
                    GASP_UPCXX_ATOMIC_DOMAIN_CONSTRUCT,
                    EventType::Start,
                    new_line
                ),
                (GASP_UPCXX_ATOMIC_DOMAIN_CONSTRUCT, EventType::End, new_line),
                (GASP_UPCXX_ATOMIC_OP, EventType::Start, op_line),
                (GASP_UPCXX_ATOMIC_OP, EventType::End, op_line),
                (GASP_UPCXX_ATOMIC_OP, EventType::Start, cas_line),
                (GASP_UPCXX_ATOMIC_OP, EventType::End, cas_line),
                (
                    GASP_UPCXX_ATOMIC_DOMAIN_DESTROY,
                    EventType::Start,
                    destroy_line
                ),
                (
                    GASP_UPCXX_ATOMIC_DOMAIN_DESTROY,
                    EventType::End,
                    destroy_line
                ),
            ]
        );
        let target = Arg::GPtr(GPtr {
            rank: 1 - rank_me(),
            addr: 0,
        });
        let args = &ours[4].3;
        assert!(
            args[0].starts_with(&format!("{:?}", target)[..12]),
            "{args:?}"
        );
        assert_eq!(
            args[1..],
            [
                Arg::Int(gex::ops::Op::FCas.bit() as i32),
                Arg::Int(gex::ops::Dt::U64.bit() as i32),
                Arg::U64(6),
                Arg::U64(9),
                Arg::Bytes(8),
            ]
            .map(|a| format!("{a:?}"))
        );
        upcxx::delete_array(own);
        upcxx::finalize();
    });
}
