//! Distributed objects (UPC++ spec ch. 14) on 1 to 5 ranks and on split teams:
//! construction and ids that agree (§14.2, §14.4 ¶3–¶21), deref (¶26–¶30), `fetch`
//! (¶32–¶35), `dist_id::here` and `when_here` (¶43–¶49), `&DistObject` and `&Team` as
//! arguments of `rpc`, `rpc_ff` and `as_rpc` (§9.3 ¶1, §14.3), a member built late,
//! dropping (¶15–¶17), what misuse does, and the GASP events.

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use common::{all_gather, panic_text};
use gex::testing::{spmd, spmd_outcome, SpmdOptions};
use serde::{Deserialize, Serialize};
use upcxx::{rank_me, rank_n, world, DistId, DistObject, Rank, Team};

#[test]
fn ids_agree_on_every_member_and_deref_gives_this_ranks_value() {
    for ranks in 1..=5 {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let a = DistObject::new(me * 10);
            let b = DistObject::new(String::from("b"));
            assert_eq!(*a, me * 10);
            assert_eq!(b.as_str(), "b");
            assert_eq!(a.team().id(), world().id());
            assert!(a.id().is_valid());
            assert!(!DistId::<u32>::default().is_valid());
            // Two objects built in the same order are numbered alike everywhere.
            let ids = all_gather(&(a.id(), b.id().team_id(), format!("{:?}", b.id())));
            assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
            assert_ne!(format!("{:?}", a.id()), ids[0].2);
            assert_eq!(*a.id().here(), me * 10);
            assert_eq!(*a.id().when_here().wait(), me * 10);
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

#[test]
fn fetch_returns_a_copy_of_each_members_value() {
    for ranks in 1..=5 {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let obj = DistObject::new(vec![me; me as usize + 1]);
            for r in 0..rank_n() {
                assert_eq!(obj.fetch(r).wait(), vec![r; r as usize + 1]);
            }
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// An id and a team id are plain values (§14.4 ¶37, §11.2): an RPC returns them, and
/// `then` and `when_all` carry them, as any value (§5.8.1 ¶36).
#[test]
fn ids_are_values_an_rpc_returns() {
    for ranks in 1..=4 {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let obj = DistObject::new(me + 7);
            upcxx::barrier();
            let peer = (me + 1) % rank_n();
            let (id, team) = upcxx::when_all((
                upcxx::rpc(peer, |obj: &DistObject<u32>| obj.id(), (&obj,)),
                upcxx::rpc(peer, || world().id(), ()),
            ))
            .wait();
            assert_eq!((id, team), (obj.id(), world().id()));
            let found = upcxx::make_future(()).then(move |()| id).wait();
            assert_eq!(*found.here(), me + 7);
            let team = upcxx::make_future(()).then(|()| world().clone()).wait();
            assert_eq!(team.id(), world().id());
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// A member type without `Clone`: §14.4 ¶32 asks only that it be serializable.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Tally {
    rank: Rank,
    hits: Vec<u64>,
}

/// `fetch` serializes the member itself for the reply (nothing is cloned first), so a
/// member that is not `Clone` can be fetched, and the copy is the value when the RPC ran.
#[test]
fn fetch_copies_members_that_are_not_clone() {
    for ranks in 1..=5 {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let obj = DistObject::new(RefCell::new(Tally {
                rank: me,
                hits: Vec::new(),
            }));
            for round in 0..3u64 {
                obj.borrow_mut().hits.push(round * 100 + u64::from(me));
                upcxx::barrier();
                for r in 0..rank_n() {
                    let want = Tally {
                        rank: r,
                        hits: (0..=round).map(|k| k * 100 + u64::from(r)).collect(),
                    };
                    assert_eq!(obj.fetch(r).wait().into_inner(), want);
                }
                upcxx::barrier();
            }
            upcxx::finalize();
        });
    }
}

/// Objects over a split team are numbered per team, ranks are team ranks, and objects
/// of the world built between them do not disturb their ids.
#[test]
fn objects_over_split_teams_use_team_ranks_and_ids() {
    for ranks in [2, 4, 5] {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let half = world().split((me % 2) as i32, me as i32);
            let h = DistObject::new_in(&half, me);
            let w = DistObject::new(me + 100);
            let h2 = DistObject::new_in(&half, me + 200);
            assert_eq!(h.id().team_id(), half.id());
            assert_eq!(h.team().rank_n(), half.rank_n());
            for r in 0..half.rank_n() {
                assert_eq!(h.fetch(r).wait(), half[r]);
                assert_eq!(h2.fetch(r).wait(), half[r] + 200);
            }
            assert_eq!(w.fetch(0).wait(), 100);
            let ids = all_gather(&(me % 2, h.id(), h2.id(), w.id()));
            for other in &ids {
                assert_eq!(other.3, w.id());
                assert_eq!(other.0 == me % 2, (other.1, other.2) == (h.id(), h2.id()));
            }
            let msg = panic_text(|| {
                drop(h.fetch(half.rank_n()));
            });
            assert!(
                msg.contains("dist_object::fetch") && msg.contains("not a rank"),
                "{msg}"
            );
            upcxx::barrier();
            drop((h, h2));
            half.destroy(upcxx::EntryBarrier::User);
            upcxx::finalize();
        });
    }
}

#[test]
fn dist_object_and_team_arguments_are_the_targets_own() {
    for ranks in 1..=5 {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let n = rank_n();
            let next = (me + 1) % n;
            let half = world().split((me % 2) as i32, me as i32);
            let hits = DistObject::new(Cell::new(0u32));
            let got = upcxx::rpc(
                next,
                |h: &DistObject<Cell<u32>>, t: &Team, from: Rank| {
                    h.set(h.get() + 1);
                    (rank_me(), t.rank_me(), t.id().to_u64(), from)
                },
                (&hits, world(), me),
            )
            .wait();
            assert_eq!(got, (next, next, world().id().to_u64(), me));
            // A split team's id is the target's own team of that id.
            let peer = half[(half.rank_me() + 1) % half.rank_n()];
            let (rank_there, id_there) =
                upcxx::rpc(peer, |t: &Team| (t.rank_me(), t.id()), (&half,)).wait();
            assert_eq!(id_there, half.id());
            assert_eq!(half[rank_there], peer);
            upcxx::rpc_ff(
                next,
                |h: &DistObject<Cell<u32>>, by: u32| h.set(h.get() + by),
                (&hits, 10u32),
            );
            // An rpc_ff is not ordered with the barrier: wait for it.
            while hits.get() < 11 {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            assert_eq!(hits.get(), 11);
            upcxx::barrier();
            half.destroy(upcxx::EntryBarrier::User);
            upcxx::finalize();
        });
    }
}

/// Many calls in a row naming objects, alternating between two objects of one type and
/// one of another, each find their own target object (the target reuses the handle of
/// the object named by the previous call only when it is the same object).
#[test]
fn calls_in_a_row_on_several_objects_each_find_their_own() {
    for ranks in [1, 2, 3] {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let next = (me + 1) % rank_n();
            let a = DistObject::new(Cell::new(0u64));
            let b = DistObject::new(Cell::new(0u64));
            let c = DistObject::new(RefCell::new(Vec::<u64>::new()));
            let mut futures = Vec::new();
            for i in 0..300u64 {
                let add = |o: &DistObject<Cell<u64>>, by: u64| {
                    o.set(o.get() + by);
                    o.get()
                };
                futures.push(match i % 5 {
                    0 | 1 => upcxx::rpc(next, add, (&a, 1)),
                    2 => upcxx::rpc(next, add, (&b, 1000)),
                    _ => upcxx::rpc(
                        next,
                        |o: &DistObject<RefCell<Vec<u64>>>, i: u64| {
                            o.borrow_mut().push(i);
                            i
                        },
                        (&c, i),
                    ),
                });
            }
            upcxx::when_all(futures).wait();
            upcxx::barrier();
            assert_eq!(a.get(), 120, "two in five calls add 1 to a");
            assert_eq!(b.get(), 60 * 1000, "one in five adds 1000 to b");
            let expect: Vec<u64> = (0..300).filter(|i| i % 5 >= 3).collect();
            assert_eq!(*c.borrow(), expect);
            upcxx::finalize();
        });
    }
}

/// One call naming several objects, the same one twice among them, finds each (the
/// target replaces the object it holds in hand while the call holds the one before).
#[test]
fn one_call_naming_several_objects_finds_each() {
    for ranks in [1, 2, 3] {
        spmd(ranks, || {
            upcxx::init();
            let next = (rank_me() + 1) % rank_n();
            let a = DistObject::new(Cell::new(1u64));
            let b = DistObject::new(Cell::new(20u64));
            let c = DistObject::new(String::from("c"));
            type Obj = DistObject<Cell<u64>>;
            for i in 0..50u64 {
                let got = upcxx::rpc(
                    next,
                    |x: &Obj, y: &Obj, s: &DistObject<String>, z: &Obj, by: u64| {
                        x.set(x.get() + by);
                        (x.get(), y.get(), s.len(), z.get())
                    },
                    (&a, &b, &c, &a, 1),
                )
                .wait();
                assert_eq!(got, (2 + i, 20, 1, 2 + i));
            }
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// A member holding a token (to count its handles) and a text to read.
type Tokened = DistObject<(Rc<()>, String)>;

thread_local! {
    static OWNER: RefCell<Option<Tokened>> = const { RefCell::new(None) };
}

/// §14.4 ¶17 with calls: a call may drop the owner of the object it names and still
/// read the member through its argument until it returns; the value is dropped at the
/// target's next user-level progress, once nothing holds it.
#[test]
fn a_call_may_drop_the_object_it_names() {
    for ranks in [1, 2, 3] {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let next = (me + 1) % rank_n();
            let token = Rc::new(());
            let obj = DistObject::new((Rc::clone(&token), format!("member of {me}")));
            // Calls in a row: the target holds its member in hand between them.
            for _ in 0..3 {
                let got = upcxx::rpc(next, |o: &Tokened| o.1.clone(), (&obj,)).wait();
                assert_eq!(got, format!("member of {next}"));
            }
            let here = obj.id().here();
            OWNER.with(|o| *o.borrow_mut() = Some(obj));
            upcxx::barrier();
            let got = upcxx::rpc(
                next,
                |o: &Tokened| {
                    drop(OWNER.with(|owner| owner.borrow_mut().take()));
                    o.1.clone()
                },
                (&here,),
            );
            drop(here);
            assert_eq!(got.wait(), format!("member of {next}"));
            upcxx::barrier();
            upcxx::progress(upcxx::ProgressLevel::User);
            assert!(OWNER.with(|o| o.borrow().is_none()));
            assert_eq!(Rc::strong_count(&token), 1, "the value was dropped");
            upcxx::finalize();
        });
    }
}

/// `as_rpc` with `&DistObject` and `&Team` arguments (§9.3 ¶1, §7.3): the call is
/// serialized when the put starts, so the references need only outlive the initiating
/// call, and they name the target's own objects (over the world and over a split team).
#[test]
fn as_rpc_takes_dist_object_and_team_references() {
    for ranks in [1, 3, 4] {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let seen = DistObject::new(Cell::new(0));
            let halves = world().split((me % 2) as i32, me as i32);
            let counted = DistObject::new_in(&halves, Cell::new(0u64));
            let slot = upcxx::new_(0u64);
            let slots = all_gather(&slot);
            // The next rank of this rank's half: a member of the team sent by id.
            let (hme, hn) = (halves.rank_me(), halves.rank_n());
            let next = halves[(hme + 1) % hn];
            let cx = upcxx::remote_cx::as_rpc(
                |s: &DistObject<Cell<u64>>, t: &Team, c: &DistObject<Cell<u64>>, v: u64| {
                    s.set(v + u64::from(t.rank_n()));
                    c.set(c.get() + u64::from(c.team().rank_n()));
                },
                (&seen, &halves, &counted, u64::from(me)),
            ) | upcxx::operation_cx::as_future();
            upcxx::rput_with(7u64, slots[next as usize], cx).wait();
            // Operation completion at the sender says nothing of the call's execution.
            while counted.get() == 0 {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            // Each rank ran one call, from the previous rank of its half, which saw this
            // rank's own half team and objects.
            let prev = halves[(hme + hn - 1) % hn];
            assert_eq!(seen.get(), u64::from(prev) + u64::from(hn));
            assert_eq!(counted.get(), u64::from(hn));
            upcxx::barrier();
            upcxx::delete_(slot);
            drop(counted);
            halves.destroy(upcxx::EntryBarrier::User);
            upcxx::finalize();
        });
    }
}

/// §14.3: an RPC that names an object its target has not built yet waits there, without
/// blocking the target's progress, and runs once the target builds it; `when_here`
/// futures are ready inside the constructor (§14.4 ¶5).
#[test]
fn a_call_naming_an_object_built_late_waits_for_it() {
    for ranks in [2, 3] {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            if me != 1 {
                let obj = DistObject::new(RefCell::new(Vec::<Rank>::new()));
                let len = upcxx::rpc(
                    1,
                    |o: &DistObject<RefCell<Vec<Rank>>>, from: Rank| {
                        o.borrow_mut().push(from);
                        o.borrow().len()
                    },
                    (&obj, me),
                );
                upcxx::rpc_ff(
                    1,
                    |o: &DistObject<RefCell<Vec<Rank>>>| o.borrow_mut().push(999),
                    (&obj,),
                );
                // RPCs from one rank arrive in order: once rank 1 has the id, the calls
                // above have arrived there, before it built the object.
                upcxx::rpc_ff(
                    1,
                    |id: DistId<RefCell<Vec<Rank>>>| LATE_ID.with(|l| l.set(Some(id))),
                    (obj.id(),),
                );
                assert!(len.wait() >= 1);
                upcxx::barrier();
            } else {
                // Progress for a while before building: the calls arrive and wait.
                let until = std::time::Instant::now() + Duration::from_millis(200);
                while std::time::Instant::now() < until || LATE_ID.with(|l| l.get()).is_none() {
                    upcxx::progress(upcxx::ProgressLevel::User);
                    std::thread::sleep(Duration::from_millis(1));
                }
                let id = LATE_ID.with(|l| l.get()).expect("the id arrived");
                let arrived = Rc::new(Cell::new(false));
                let flag = Rc::clone(&arrived);
                let waiting = id.when_here();
                assert!(!waiting.ready());
                let checked = waiting.then(move |o| {
                    flag.set(true);
                    assert!(o.borrow().is_empty());
                });
                let msg = panic_text(|| {
                    id.here();
                });
                assert!(msg.contains("not built here yet"), "{msg}");
                let obj = DistObject::new(RefCell::new(Vec::new()));
                assert!(arrived.get(), "when_here is ready inside the constructor");
                checked.wait();
                assert_eq!(obj.id(), id);
                assert!(obj.borrow().is_empty(), "the waiting calls run at progress");
                let senders = rank_n() as usize - 1;
                while obj.borrow().len() < 2 * senders {
                    upcxx::progress(upcxx::ProgressLevel::User);
                }
                let mut got = obj.borrow().clone();
                got.sort_unstable();
                let mut want: Vec<Rank> = (0..rank_n()).filter(|&r| r != 1).collect();
                want.extend(std::iter::repeat_n(999, senders));
                assert_eq!(got, want);
                upcxx::barrier();
            }
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

thread_local! {
    static LATE_ID: Cell<Option<DistId<RefCell<Vec<Rank>>>>> = const { Cell::new(None) };
}

/// §10.5.3, §14.3: calls that arrived and wait for an object follow the master persona:
/// the thread that builds the object after the persona moved to it runs them.
#[test]
fn calls_waiting_for_an_object_follow_the_master_persona() {
    static MOVED_ID: std::sync::Mutex<Option<DistId<RefCell<Vec<Rank>>>>> =
        std::sync::Mutex::new(None);
    for ranks in [2, 3] {
        spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            if me != 1 {
                let obj = DistObject::new(RefCell::new(Vec::<Rank>::new()));
                let len = upcxx::rpc(
                    1,
                    |o: &DistObject<RefCell<Vec<Rank>>>, from: Rank| {
                        o.borrow_mut().push(from);
                        o.borrow().len()
                    },
                    (&obj, me),
                );
                upcxx::rpc_ff(
                    1,
                    |id: DistId<RefCell<Vec<Rank>>>| *MOVED_ID.lock().unwrap() = Some(id),
                    (obj.id(),),
                );
                assert!(len.wait() >= 1);
                upcxx::barrier();
            } else {
                // The calls arrive here, on the main thread, and wait.
                while MOVED_ID.lock().unwrap().is_none() {
                    upcxx::progress(upcxx::ProgressLevel::User);
                }
                upcxx::liberate_master_persona();
                let ran = std::thread::spawn(|| {
                    let _master = upcxx::PersonaScope::new(&upcxx::master_persona());
                    let obj = DistObject::new(RefCell::new(Vec::<Rank>::new()));
                    assert_eq!(Some(obj.id()), *MOVED_ID.lock().unwrap());
                    let until = std::time::Instant::now() + Duration::from_secs(20);
                    while obj.borrow().len() < rank_n() as usize - 1 {
                        assert!(
                            std::time::Instant::now() < until,
                            "the waiting calls did not run on the persona's new thread"
                        );
                        upcxx::progress(upcxx::ProgressLevel::User);
                    }
                    let mut got = obj.borrow().clone();
                    got.sort_unstable();
                    upcxx::barrier();
                    got
                })
                .join()
                .unwrap();
                let want: Vec<Rank> = (0..rank_n()).filter(|&r| r != 1).collect();
                assert_eq!(ran, want);
                *MOVED_ID.lock().unwrap() = None;
                let _master = upcxx::PersonaScope::new(&upcxx::master_persona());
                upcxx::barrier();
                upcxx::finalize();
                return;
            }
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// §14.4 ¶17: dropping the handle `new` returned destroys the member here: its id no
/// longer finds it; its value is dropped once no handle is left.
#[test]
fn dropping_the_object_destroys_this_ranks_member() {
    for ranks in [1, 2] {
        spmd(ranks, || {
            upcxx::init();
            let token = Rc::new(());
            let obj = DistObject::new(Rc::clone(&token));
            let id = obj.id();
            let other = id.here();
            assert_eq!(Rc::strong_count(&token), 2);
            drop(other);
            assert_eq!(
                Rc::strong_count(&token),
                2,
                "a handle from here does not own it"
            );
            let kept = id.here();
            drop(obj);
            assert_eq!(
                Rc::strong_count(&token),
                2,
                "a handle keeps the value alive"
            );
            for msg in [
                panic_text(|| {
                    id.here();
                }),
                panic_text(|| {
                    drop(id.when_here());
                }),
            ] {
                assert!(msg.contains("was dropped here"), "{msg}");
            }
            drop(kept);
            assert_eq!(Rc::strong_count(&token), 1);
            // The numbering goes on: the next object is a new name.
            let next = DistObject::new(0u8);
            assert_ne!(format!("{:?}", next.id()), format!("{id:?}"));
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}

/// An RPC naming an object its target dropped fails the job, naming the object, also
/// when the target ran a call on it before.
#[test]
fn a_call_naming_an_object_dropped_on_its_target_fails_the_job() {
    let mut opts = SpmdOptions::new(2);
    opts.expect_failure = true;
    let Some(outcome) = spmd_outcome(opts, || {
        upcxx::init();
        let obj = DistObject::new(5u32);
        // A call on the member first: rank 1 holds it in hand when it drops it.
        if rank_me() == 0 {
            assert_eq!(obj.fetch(1).wait(), 5);
        }
        upcxx::barrier();
        if rank_me() == 1 {
            let id = obj.id();
            drop(obj);
            upcxx::barrier();
            let _ = id;
            loop {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
        }
        upcxx::barrier();
        obj.fetch(1).wait();
        unreachable!("rank 1 dropped its member");
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert!(report.contains("was dropped here"), "{report}");
}

/// An id whose member is never built here leaves `when_here` not ready; it holds up
/// nothing else.
#[test]
fn when_here_on_an_id_that_never_arrives_stays_not_ready() {
    spmd(2, || {
        upcxx::init();
        let real = DistObject::new(1u8);
        let bytes = upcxx::serialization::serialize(&(real.id().team_id(), 1000u64));
        let never: DistId<u8> = upcxx::serialization::deserialize::<DistId<u8>>(&bytes).unwrap();
        let f = never.when_here();
        for _ in 0..10 {
            upcxx::progress(upcxx::ProgressLevel::User);
        }
        assert!(!f.ready());
        assert_eq!(real.fetch(0).wait(), 1);
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// A name looked up as the wrong type fails naming both, never reinterprets the value.
#[test]
fn an_id_received_as_another_type_fails_naming_it() {
    spmd(1, || {
        upcxx::init();
        let obj = DistObject::new(1u64);
        let bytes = upcxx::serialization::serialize(&obj.id());
        let wrong = upcxx::serialization::deserialize::<DistId<String>>(&bytes).unwrap();
        let msg = panic_text(|| {
            wrong.here();
        });
        assert!(
            msg.contains("is not a DistObject<alloc::string::String>"),
            "{msg}"
        );
        let msg = panic_text(|| {
            DistId::<u8>::default().here();
        });
        assert!(msg.contains("invalid"), "{msg}");
        upcxx::finalize();
    });
}

/// GASP: construction and fetch are one `GASP_UPCXX_DIST_OBJECT_*` interval each at the
/// caller's line, naming the team and the object.
#[cfg(feature = "gasp")]
mod gasp_events {
    use std::sync::{Arc, OnceLock};

    use crate::common::recorder::{Recorder, Shared};
    use gasp::events::*;
    use gasp::EventType;
    use gex::testing::spmd;
    use upcxx::{world, DistObject};

    #[test]
    fn construction_fetch_and_drop_are_events_at_their_call_sites() {
        for ranks in [1, 3] {
            spmd(ranks, || {
                static REC: OnceLock<Arc<Recorder>> = OnceLock::new();
                let rec = REC.get_or_init(Arc::default).clone();
                let shared = rec.clone();
                gasp::register_tool(move |_, _| Box::new(Shared(shared)));
                upcxx::init();
                let mark = rec.0.lock().unwrap().len();
                let l_new = line!() + 1;
                let obj = DistObject::new(upcxx::rank_me());
                let l_fetch = line!() + 1;
                let v = obj.fetch(0);
                assert_eq!(v.wait(), 0);
                upcxx::barrier();
                drop(obj);
                let team = format!("{:?}", gasp::Arg::U64(world().id().to_u64()));
                let got: Vec<_> = rec.0.lock().unwrap()[mark..]
                    .iter()
                    .filter(|e| {
                        e.0 == GASP_UPCXX_DIST_OBJECT_CONSTRUCT
                            || e.0 == GASP_UPCXX_DIST_OBJECT_FETCH
                            || e.0 == GASP_UPCXX_DIST_OBJECT_DESTROY
                            || e.0 == GASP_UPCXX_RPC_SEND
                    })
                    .cloned()
                    .collect();
                let construct = GASP_UPCXX_DIST_OBJECT_CONSTRUCT;
                let fetch = GASP_UPCXX_DIST_OBJECT_FETCH;
                let seq = format!("{:?}", gasp::Arg::U64(0));
                let rank = format!("{:?}", gasp::Arg::Rank(0));
                let fetch_args = vec![team.clone(), seq.clone(), rank];
                let destroy = GASP_UPCXX_DIST_OBJECT_DESTROY;
                // The RPC that fetch sends is part of its interval, not an event of its
                // own; the drop is reported at the line that built the object.
                let want = vec![
                    (construct, EventType::Start, l_new, vec![team.clone()]),
                    (
                        construct,
                        EventType::End,
                        l_new,
                        vec![team.clone(), seq.clone()],
                    ),
                    (fetch, EventType::Start, l_fetch, fetch_args.clone()),
                    (fetch, EventType::End, l_fetch, fetch_args),
                    (destroy, EventType::Atomic, l_new, vec![team, seq]),
                ];
                assert_eq!(got, want);
                upcxx::barrier();
                upcxx::finalize();
            });
        }
    }
}

thread_local! {
    static KEPT: RefCell<Option<DistObject<u64>>> = const { RefCell::new(None) };
}

/// An owner the program keeps in a thread-local of its own is dropped when the thread
/// ends, after upcxx's own tables of that thread may be gone: the thread (here one that
/// takes the master persona, builds the object, and ends) ends cleanly.
#[test]
fn an_owner_in_a_thread_local_is_dropped_cleanly_at_the_threads_end() {
    for ranks in 1..=2 {
        spmd(ranks, || {
            upcxx::init();
            upcxx::liberate_master_persona();
            std::thread::spawn(|| {
                // Touched first, so that its destructor runs after upcxx's tables' ones.
                KEPT.with(|k| k.borrow_mut().take());
                let _s = upcxx::PersonaScope::new(&upcxx::master_persona());
                let obj = DistObject::new(u64::from(rank_me()));
                KEPT.with(|k| *k.borrow_mut() = Some(obj));
                upcxx::barrier();
            })
            .join()
            .expect("the thread ends cleanly");
            let _s = upcxx::PersonaScope::new(&upcxx::master_persona());
            upcxx::barrier();
            upcxx::finalize();
        });
    }
}
