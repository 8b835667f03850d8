//! RPCs a rank makes to itself (UPC++ spec §9.3; §10.5 for personas), which travel
//! through no Active Message but must behave as any other RPC: they run only during a
//! later user-level progress of the master persona (¶7), in the order sent, with their
//! arguments serialized when the call returns (¶3), from any thread; their replies
//! complete futures on the calling thread; a GASP tool sees them as RPCs.
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

use common::{panic_message, progress_until, Unserializable};
use gex::testing::spmd;
use upcxx::{
    by_ref, master_persona, progress, rank_me, rank_n, rpc, rpc_ff, Future, PersonaScope,
    ProgressLevel, Promise,
};

mod common;

thread_local! {
    /// What the RPCs run on this thread saw: (source rank, number, text argument).
    static LOG: RefCell<Vec<(u32, u32, String)>> = const { RefCell::new(Vec::new()) };
}

fn log(src: u32, i: u32, text: String) {
    LOG.with(|l| l.borrow_mut().push((src, i, text)));
}

fn logged() -> usize {
    LOG.with(|l| l.borrow().len())
}

/// §9.3 ¶3, ¶7: calls to self interleaved with calls to another rank, `rpc_ff` and
/// `rpc` mixed: each runs once, after the call returned and only in user-level
/// progress, in the order this rank sent them, with the values its arguments had
/// when the call returned (a by-reference argument too, the buffer changed after).
#[test]
fn self_rpcs_run_later_in_order_with_their_arguments_copied() {
    const SENT: u32 = 60;
    for n in [1, 2, 3, 5] {
        spmd(n, || {
            upcxx::init();
            let (me, peer) = (rank_me(), (rank_me() + 1) % rank_n());
            let mut text = String::new();
            let mut futs: Vec<Future<u32>> = Vec::new();
            for i in 0..SENT {
                text.clear();
                text.push_str(&format!("call {i}"));
                match i % 3 {
                    0 => rpc_ff(
                        me,
                        |i: u32, t: String| log(me_(), i, t),
                        (i, by_ref(&*text)),
                    ),
                    1 => futs.push(rpc(
                        me,
                        |i: u32, t: String| {
                            log(me_(), i, t);
                            i * 2
                        },
                        (i, text.clone()),
                    )),
                    _ => rpc_ff(me, |i: u32, t: String| log(me_(), i, t), (i, text.clone())),
                }
                text.push_str(" changed after the call");
                // And one to another rank between them.
                rpc_ff(peer, |i: u32| log(u32::MAX, i, String::new()), (i,));
                assert_eq!(
                    LOG.with(|l| l.borrow().iter().filter(|e| e.0 == me).count()),
                    0,
                    "a call to self ran inside rpc/rpc_ff"
                );
            }
            progress(ProgressLevel::Internal);
            assert!(
                LOG.with(|l| l.borrow().iter().all(|e| e.0 != me)),
                "a call to self ran during internal progress"
            );
            let mine = || LOG.with(|l| l.borrow().iter().filter(|e| e.0 == me).count());
            progress_until(|| mine() == SENT as usize);
            for (k, f) in futs.into_iter().enumerate() {
                assert_eq!(f.wait(), (3 * k as u32 + 1) * 2);
            }
            upcxx::barrier();
            progress_until(|| logged() == 2 * SENT as usize);
            LOG.with(|l| {
                let l = l.borrow();
                let own: Vec<_> = l.iter().filter(|e| e.0 == me).collect();
                for (i, e) in own.iter().enumerate() {
                    assert_eq!((e.1, e.2.as_str()), (i as u32, &*format!("call {i}")));
                }
                let from_peer: Vec<u32> =
                    l.iter().filter(|e| e.0 == u32::MAX).map(|e| e.1).collect();
                assert!(from_peer.iter().copied().eq(0..SENT), "{from_peer:?}");
            });
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

fn me_() -> u32 {
    rank_me()
}

thread_local! {
    static STAGE: Cell<u32> = const { Cell::new(0) };
}

/// §9.3 ¶7 from inside an RPC: an RPC to self that calls `rpc_ff` and `rpc` to self
/// does not run them in the progress call that runs it, but in a later one; the outer
/// call returns the inner call's future, and its own future gets that value (§9.1 ¶3).
#[test]
fn a_self_rpc_made_inside_an_rpc_runs_in_a_later_progress() {
    for n in [1, 3] {
        spmd(n, || {
            upcxx::init();
            let outer = rpc(
                rank_me(),
                |x: u64| -> Future<u64> {
                    STAGE.set(1);
                    rpc_ff(rank_me(), || STAGE.set(STAGE.get() + 10), ());
                    rpc(rank_me(), |x: u64| x * 2, (x,))
                },
                (21u64,),
            );
            assert_eq!(STAGE.get(), 0);
            progress_until(|| STAGE.get() != 0);
            assert_eq!(
                STAGE.get(),
                1,
                "the inner calls ran inside the outer one's progress"
            );
            assert!(!outer.ready());
            progress(ProgressLevel::User);
            assert_eq!(STAGE.get(), 11);
            assert_eq!(outer.wait(), 42);
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

static WORKER_RAN: AtomicU64 = AtomicU64::new(0);

/// §9.3 ¶6, §10.5: a thread without the master persona calls its own rank: the calls
/// run on the master persona's thread, in the order the worker sent them, and the
/// replies (`()`, small and large values) complete the worker's futures on the worker.
#[test]
fn self_rpcs_from_a_thread_without_the_master_persona() {
    for n in [1, 2] {
        spmd(n, || {
            upcxx::init();
            let master = std::thread::current().id();
            let worker = std::thread::spawn(move || {
                let me = rank_me();
                let mut sum = 0;
                for i in 0..100u64 {
                    rpc_ff(
                        me,
                        move |i: u64| {
                            assert_eq!(WORKER_RAN.fetch_add(1, Ordering::SeqCst), i, "in order");
                        },
                        (i,),
                    );
                    sum += rpc(me, |x: u64| x + 1, (i,)).wait();
                    rpc(me, |_: u64| (), (i,)).wait();
                    let big = rpc(me, |x: u64| vec![x; 1000], (i,)).wait();
                    assert!(big.len() == 1000 && big.iter().all(|&v| v == i));
                }
                let on_master = rpc(me, || format!("{:?}", std::thread::current().id()), ()).wait();
                (sum, on_master)
            });
            while !worker.is_finished() {
                progress(ProgressLevel::User);
            }
            let (sum, on) = worker.join().expect("worker");
            assert_eq!(sum, (1..=100).sum::<u64>());
            assert_eq!(
                on,
                format!("{master:?}"),
                "ran on the master persona's thread"
            );
            assert_eq!(WORKER_RAN.load(Ordering::SeqCst), 100);
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

static MOVED_RAN: AtomicU64 = AtomicU64::new(0);

/// §10.5.3: calls to self queued while this thread held the master persona go with
/// the persona: they run, in order, on the thread that holds it next.
#[test]
fn self_rpcs_queued_before_the_master_persona_moves_run_on_its_new_holder() {
    for n in [1, 3] {
        spmd(n, || {
            upcxx::init();
            for i in 0..20u64 {
                rpc_ff(
                    rank_me(),
                    move |i: u64| {
                        assert_eq!(MOVED_RAN.fetch_add(1, Ordering::SeqCst), i, "in order");
                    },
                    (i,),
                );
            }
            upcxx::liberate_master_persona();
            let here = std::thread::current().id();
            std::thread::spawn(move || {
                let _s = PersonaScope::new(&master_persona());
                assert_ne!(std::thread::current().id(), here);
                progress_until(|| MOVED_RAN.load(Ordering::SeqCst) == 20);
                // And one more sent by the new holder to itself.
                assert_eq!(rpc(rank_me(), |x: u64| x + 1, (1u64,)).wait(), 2);
                upcxx::barrier();
            })
            .join()
            .unwrap();
            let _s = PersonaScope::new(&master_persona());
            upcxx::finalize();
        });
    }
}

thread_local! {
    static PENDING: RefCell<Option<Promise<Vec<u64>>>> = const { RefCell::new(None) };
}

/// §9.1 ¶3, §6.5 ¶6: a self RPC returning a future not yet ready replies when it is
/// (fulfilled by a later self `rpc_ff`), with a result too large for a reply cell and
/// for a receive page, and its view argument stays valid until then.
#[test]
fn a_self_rpc_returning_a_future_replies_when_it_is_ready() {
    for n in [1, 4] {
        spmd(n, || {
            upcxx::init();
            let data: Vec<u64> = (0..100u64).collect();
            let f = rpc(
                rank_me(),
                |v: upcxx::serialization::View<'_, u64>| -> Future<Vec<u64>> {
                    let p = Promise::new();
                    let fut = p.get_future();
                    PENDING.with(|s| *s.borrow_mut() = Some(p));
                    let sum: u64 = v.iter().sum();
                    fut.then(move |mut big: Vec<u64>| {
                        big.push(sum);
                        big
                    })
                },
                (upcxx::serialization::make_view(&data),),
            );
            progress_until(|| PENDING.with(|s| s.borrow().is_some()));
            rpc_ff(
                rank_me(),
                || {
                    let p = PENDING.with(|s| s.borrow_mut().take()).expect("pending");
                    p.fulfill_result((0..20_000u64).collect());
                },
                (),
            );
            let got = f.wait();
            assert_eq!(got.len(), 20_001);
            assert!(got[..20_000].iter().copied().eq(0..20_000));
            assert_eq!(got[20_000], (0..100).sum::<u64>());
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

static NEVER: AtomicU64 = AtomicU64::new(0);

/// A serialization failure in a call to self is the call's panic, and nothing runs.
#[test]
fn a_failed_serialization_to_self_queues_nothing() {
    spmd(1, || {
        upcxx::init();
        for which in ["rpc_ff", "rpc"] {
            let err = std::panic::catch_unwind(|| {
                if which == "rpc_ff" {
                    rpc_ff(
                        0,
                        |_: u32, _: Unserializable| {
                            NEVER.fetch_add(1, Ordering::SeqCst);
                        },
                        (1u32, Unserializable),
                    );
                } else {
                    drop(rpc(
                        0,
                        |_: Unserializable| NEVER.fetch_add(1, Ordering::SeqCst),
                        (Unserializable,),
                    ));
                }
            })
            .expect_err("serialization fails");
            let msg = panic_message(err);
            assert!(
                msg.contains(&format!(
                    "upcxx::{which}: the arguments could not be serialized"
                )),
                "{msg}"
            );
        }
        assert_eq!(rpc(0, |x: u32| x + 1, (1u32,)).wait(), 2);
        assert_eq!(NEVER.load(Ordering::SeqCst), 0);
        upcxx::finalize();
    });
}

/// A type whose serializer sends an RPC to its own rank, which §6.1 ¶5 forbids.
struct Chatty;

impl serde::Serialize for Chatty {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        rpc_ff(rank_me(), || {}, ());
        s.serialize_unit()
    }
}

impl<'de> serde::Deserialize<'de> for Chatty {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <()>::deserialize(d).map(|()| Chatty)
    }
}

/// §6.1 ¶5: a serializer may not communicate; one that calls its own rank while its
/// call to self is being serialized fails clearly, on the master persona's thread and
/// on another, and the calls after it work.
#[test]
fn a_serializer_sending_to_self_panics_clearly() {
    spmd(1, || {
        upcxx::init();
        let chatty = || {
            let err = std::panic::catch_unwind(|| rpc_ff(0, |_: Chatty| {}, (Chatty,)))
                .expect_err("the serializer communicates");
            let msg = panic_message(err);
            assert!(msg.contains("serialization may not communicate"), "{msg}");
            rpc(0, |x: u32| x + 1, (1u32,))
        };
        assert_eq!(chatty().wait(), 2);
        let other = std::thread::spawn(move || chatty().wait());
        while !other.is_finished() {
            progress(ProgressLevel::User);
        }
        assert_eq!(other.join().expect("the other thread"), 2);
        upcxx::finalize();
    });
}

/// GASP (the `GASP_UPCXX_RPC_*` events): a call to self is reported as any RPC, its
/// send and its execution, paired by one message id.
#[cfg(feature = "gasp")]
#[test]
fn self_rpcs_report_their_send_and_execution() {
    use common::recorder::{Recorder, Shared};
    use gasp::events::*;
    use gasp::EventType;
    use std::sync::Arc;

    for n in [1, 3] {
        spmd(n, || {
            let rec = Arc::new(Recorder::default());
            let shared = rec.clone();
            gasp::register_tool(move |_, _| Box::new(Shared(shared)));
            upcxx::init();
            rpc_ff(rank_me(), |_: u64| {}, (7u64,));
            assert_eq!(rpc(rank_me(), |x: u64| x + 1, (8u64,)).wait(), 9);
            // No arguments and a `()` result: a message that is its header.
            rpc(rank_me(), || {}, ()).wait();
            upcxx::barrier();
            let got = rec.0.lock().unwrap().clone();
            let id = |tag: u32| -> Vec<String> {
                got.iter()
                    .filter(|e| e.0 == tag && e.1 == EventType::End)
                    .map(|e| e.3.last().expect("a msgid").clone())
                    .collect()
            };
            let (sent, ran) = (id(GASP_UPCXX_RPC_SEND), id(GASP_UPCXX_RPC_EXECUTE));
            assert_eq!(sent.len(), 3, "{got:?}");
            assert_eq!(sent, ran, "each execution names its send");
            upcxx::finalize();
        });
    }
}

thread_local! {
    static IN_HANDLER: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A gex handler that calls its own rank and records how that failed.
fn calls_self_in_a_handler(_: &gex::Token<'_>, _: &[u32]) {
    let err = std::panic::catch_unwind(|| rpc_ff(rank_me(), || {}, ()))
        .expect_err("an RPC from a handler fails");
    IN_HANDLER.with(|m| *m.borrow_mut() = Some(panic_message(err)));
}

/// A type whose serializer sends an RPC to the next rank.
struct ChattyToNext;

impl serde::Serialize for ChattyToNext {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        rpc_ff((rank_me() + 1) % rank_n(), || {}, ());
        s.serialize_unit()
    }
}

impl<'de> serde::Deserialize<'de> for ChattyToNext {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <()>::deserialize(d).map(|()| ChattyToNext)
    }
}

/// §6.1 ¶5: while a call to self is serialized, an RPC to another rank fails, as one
/// to this rank does (into a batch) or as its AM's send does (alone, gex refusing a
/// send between an AM's Prepare and its Commit), and the calls after it work.
#[test]
fn a_serializer_of_a_call_to_self_sending_elsewhere_panics_clearly() {
    spmd(2, || {
        upcxx::init();
        let err =
            std::panic::catch_unwind(|| rpc_ff(rank_me(), |_: ChattyToNext| {}, (ChattyToNext,)))
                .expect_err("the serializer communicates");
        let msg = panic_message(err);
        assert!(
            msg.contains("serialization may not communicate")
                || msg.contains("between an AM Prepare and its Commit"),
            "{msg}"
        );
        assert_eq!(rpc(rank_me(), |x: u32| x + 1, (1u32,)).wait(), 2);
        assert_eq!(rpc(1 - rank_me(), |x: u32| x + 1, (1u32,)).wait(), 2);
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// An AM handler may not communicate (GASNet-EX, "Calls from restricted context"): a
/// call to self, which stands for an AM, fails there as the AM's send would, and RPC
/// stays usable.
#[test]
fn a_self_rpc_from_an_am_handler_fails_as_its_send_would() {
    spmd(1, || {
        upcxx::init();
        let team = upcxx::backend::gex_team();
        let mut table = [gex::AmEntry::short(
            "calls self",
            gex::AmRole::Request,
            0,
            calls_self_in_a_handler,
        )];
        team.endpoint()
            .register_handlers(&mut table)
            .expect("register the handler");
        team.request_short(0, table[0].index, &[], gex::Flags::NONE)
            .expect("a blocking Request always succeeds");
        progress_until(|| IN_HANDLER.with(|m| m.borrow().is_some()));
        let msg = IN_HANDLER.with(|m| m.borrow_mut().take()).expect("ran");
        assert!(
            msg.contains("communication is not allowed inside an Active Message handler"),
            "{msg}"
        );
        assert_eq!(rpc(0, |x: u32| x + 1, (1u32,)).wait(), 2);
        upcxx::finalize();
    });
}
