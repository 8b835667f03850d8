//! Events and NBI synchronization ("Events", "Event test/wait operations",
//! "Sync of specified subset of NBI operations", "NBI Access regions", "Extract a leaf
//! event from the root event"), with 1 to 4 ranks.
mod common;

use std::time::{Duration, Instant};

use common::pattern;
use gex::testing::spmd;
use gex::{Client, Event, EventCategory, Flags, Lc, Segment, Team};

const MB: usize = 1 << 20;

/// Makes rank 0's next barrier stay pending: every other rank waits for rank 0 to put a
/// release flag at `offset` in its segment before entering. It polls meanwhile: between
/// hosts the put may need the target's progress to land (under Open MPI's `osc pt2pt`
/// it is applied when the target enters MPI).
struct Gate {
    team: Team,
    bases: Vec<usize>,
    local: usize,
    offset: usize,
}

impl Gate {
    fn release(&self) {
        for r in 1..self.team.size() {
            self.team
                .put_val_blocking(r, self.bases[r as usize] + self.offset, 1, 8, Flags::NONE)
                .unwrap();
        }
    }

    fn wait_released(&self) {
        // SAFETY: a word of our own segment, written by rank 0's put.
        common::poll_until("rank 0's release of the gate", 10, || unsafe {
            common::read_u64(self.local + self.offset) == 1
        });
    }
}

/// "Completion of a single NB event" and of arrays ("some", "all"): events of NB puts
/// and gets, tested until complete; arrays of only `GEX_EVENT_INVALID` (and empty ones) succeed at once; a
/// pending event (rank 0's split-phase barrier, held open by the other ranks) makes
/// Test/TestSome/TestAll fail, with the invalid entries ignored, until it completes;
/// WaitSome and WaitAll then return and overwrite completed events with INVALID.
#[test]
fn test_and_wait_on_events() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("EV_TESTWAIT", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            // NB operations: complete events, consumed by test.
            let data = pattern(me as u64, 4096);
            let mut evs: Vec<Event> = Vec::new();
            for r in 0..team.size() {
                // SAFETY: `data` outlives the events, which are waited below.
                evs.push(
                    unsafe {
                        team.put_nb(
                            r,
                            bases[r as usize] + 8192 * me as usize,
                            &data,
                            Lc::Now,
                            Flags::NONE,
                        )
                    }
                    .unwrap(),
                );
            }
            let mut got = vec![0u8; 4096];
            // SAFETY: `got` is untouched until the event is synchronized.
            let mut gev = unsafe {
                team.get_nb(
                    got.as_mut_ptr(),
                    me,
                    bases[me as usize] + 8192 * me as usize,
                    4096,
                    Flags::NONE,
                )
            }
            .unwrap();
            assert!(gev.test(), "a completed get tests complete");
            assert!(gev.is_invalid(), "a successful test consumes the event");
            assert!(gev.test(), "testing INVALID succeeds");
            assert!(got == data);
            // Complete at return into a mapped segment; into one on another host, once
            // polls have finished the puts (by messages, or through the MPI window).
            while !Event::test_all(&mut evs) {
                gex::poll();
            }
            assert!(evs.iter().all(Event::is_invalid));
            // All-invalid and empty arrays.
            let mut invalid: Vec<Event> = (0..5).map(|_| Event::invalid()).collect();
            assert!(
                Event::test_some(&mut invalid),
                "TestSome on only INVALID succeeds"
            );
            assert!(
                Event::test_all(&mut invalid),
                "TestAll on only INVALID succeeds"
            );
            Event::wait_some(&mut invalid);
            Event::wait_all(&mut invalid);
            assert!(Event::test_some(&mut []));
            assert!(Event::test_all(&mut []));
            Event::invalid().wait();
            assert!(Event::default().is_invalid());

            // A pending event: rank 0's barrier while the others hold back.
            let gate = Gate {
                team,
                bases: bases.clone(),
                local: seg.addr() as usize,
                offset: 65536,
            };
            if me == 0 {
                let mut v = vec![Event::invalid(), team.barrier_nb(), Event::invalid()];
                if team.size() == 1 {
                    assert!(v[1].is_invalid(), "a one-rank barrier completes at once");
                } else {
                    assert!(!v[1].is_invalid(), "the barrier is pending");
                    let end = Instant::now() + Duration::from_millis(100);
                    while Instant::now() < end {
                        gex::poll();
                        assert!(
                            !v[1].test(),
                            "the barrier completed before the others entered"
                        );
                        assert!(
                            !Event::test_some(&mut v),
                            "TestSome ignores INVALID entries"
                        );
                        assert!(!Event::test_all(&mut v));
                        assert!(!v[1].is_invalid(), "a failed test leaves the event");
                    }
                    assert!(
                        v[1].query_leaf(EventCategory::LC).is_invalid(),
                        "a barrier has no lc leaf"
                    );
                    gate.release();
                }
                Event::wait_some(&mut v);
                assert!(
                    v.iter().all(Event::is_invalid),
                    "WaitSome overwrites the completed event"
                );
                assert!(Event::test_all(&mut v));
            } else {
                gate.wait_released();
                let mut v = vec![team.barrier_nb()];
                Event::wait_all(&mut v);
                assert!(v[0].is_invalid());
            }
            // Pending event in wait_all with a mix, second round.
            let gate = Gate {
                offset: 65544,
                ..gate
            };
            if me == 0 {
                let mut v = vec![team.barrier_nb(), Event::invalid()];
                if team.size() > 1 {
                    assert!(!Event::test_all(&mut v));
                    gate.release();
                }
                Event::wait_all(&mut v);
                assert!(v.iter().all(Event::is_invalid));
            } else {
                gate.wait_released();
                let mut ev = team.barrier_nb();
                while !ev.test() {
                    gex::poll();
                }
            }
            client.finalize();
        });
    }
}

/// "Extract a leaf event from the root event": the lc leaf of an operation whose local
/// completion already happened is INVALID (or tests done), that of a DEFER put still in
/// flight (to another host: the conduit may read its source until it completes) is
/// pending while the put is, and completes with it; other categories are refused.
#[test]
fn query_leaf_lc() {
    for n in 1..=2 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("EV_LEAF", Flags::NONE).unwrap();
            let _seg = Segment::attach(&team, MB).unwrap();
            let dest = team.segment_bound(0).unwrap().owner_addr + 64 * team.rank() as usize;
            let data = [9u8; 64];
            for lc in 0..2 {
                // SAFETY: `data` is a local that outlives the event.
                let root = unsafe {
                    team.put_nb(
                        0,
                        dest,
                        &data,
                        if lc == 0 { Lc::Now } else { Lc::Defer },
                        Flags::NONE,
                    )
                }
                .unwrap();
                let mut leaf = root.query_leaf(EventCategory::LC);
                if lc == 0 {
                    assert!(
                        leaf.is_invalid() || leaf.test(),
                        "lc leaf of a locally complete put"
                    );
                } else {
                    assert!(
                        leaf.is_invalid() || !root.is_invalid(),
                        "a pending lc leaf of a complete put"
                    );
                }
                root.wait();
                leaf.wait();
            }
            let mut leaf = Event::invalid().query_leaf(EventCategory::LC);
            assert!(leaf.is_invalid() || leaf.test());
            for cat in [
                EventCategory::PUT,
                EventCategory::GET,
                EventCategory::ALL,
                EventCategory::LC | EventCategory::PUT,
            ] {
                common::expect_panic(&["Event::query_leaf", "LC"], || {
                    Event::invalid().query_leaf(cat)
                });
            }
            team.barrier();
            client.finalize();
        });
    }
}

/// "Sync of specified subset of NBI operations" and the lc options of PutNBI: NBI puts
/// and gets are synchronized by `gex_NBI_Test`/`Wait` on their categories; with nothing
/// outstanding every category tests complete.
#[test]
fn nbi_test_and_wait_by_category() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("EV_NBI", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            let cats = [
                EventCategory::GET,
                EventCategory::PUT,
                EventCategory::AM,
                EventCategory::LC,
                EventCategory::RMW,
                EventCategory::ALL,
            ];
            for c in cats {
                assert!(gex::nbi_test(c), "nothing outstanding in {c:?}");
            }
            let data: Vec<Vec<u8>> = (0..team.size())
                .map(|r| pattern((me * 16 + r) as u64, 3000))
                .collect();
            for r in 0..team.size() {
                let dest = bases[r as usize] + 4096 * me as usize;
                // SAFETY: `data` outlives the nbi_wait below.
                unsafe { team.put_nbi(r, dest, &data[r as usize], Lc::Group, Flags::NONE) }
                    .unwrap();
                team.put_val_nbi(r, dest + 3000, 0xABCD, 2, Flags::NONE)
                    .unwrap();
            }
            gex::nbi_wait(EventCategory::LC);
            gex::nbi_wait(EventCategory::PUT);
            assert!(gex::nbi_test(EventCategory::PUT | EventCategory::LC));
            team.barrier();
            let mut got: Vec<Vec<u8>> = (0..team.size()).map(|_| vec![0u8; 3002]).collect();
            for (r, g) in got.iter_mut().enumerate() {
                // SAFETY: `got` is untouched until nbi_wait(GET).
                unsafe {
                    team.get_nbi(
                        g.as_mut_ptr(),
                        r as u32,
                        bases[r] + 4096 * r,
                        3002,
                        Flags::NONE,
                    )
                }
                .unwrap();
            }
            gex::nbi_wait(EventCategory::GET);
            assert!(gex::nbi_test(EventCategory::ALL));
            for (r, g) in got.iter().enumerate() {
                let want = pattern((r as u32 * 16 + r as u32) as u64, 3000);
                assert!(g[..3000] == want[..], "NBI get of rank {r}'s own data");
                assert_eq!(&g[3000..], &0xABCDu16.to_ne_bytes());
            }
            // Our own segment holds every rank's data.
            for w in 0..team.size() {
                // SAFETY: inside our segment; written before the barrier.
                let at =
                    unsafe { std::slice::from_raw_parts(seg.addr().add(4096 * w as usize), 3000) };
                assert!(
                    at == pattern((w * 16 + me) as u64, 3000),
                    "data from rank {w}"
                );
            }
            // Misuse of lc options names the call.
            let dest = bases[me as usize];
            let mut ev = Event::invalid();
            // SAFETY: the lc option is refused before the put starts, so the source
            // need only live through the call.
            common::expect_panic(&["Team::put_nbi", "Now, Defer or Group"], || unsafe {
                team.put_nbi(me, dest, &[1], Lc::Event(&mut ev), Flags::NONE)
            });
            // SAFETY: as above.
            common::expect_panic(&["Team::put_nb", "Now, Defer or an event"], || unsafe {
                team.put_nb(me, dest, &[1], Lc::Group, Flags::NONE)
                    .map(Event::wait)
            });
            team.barrier();
            client.finalize();
        });
    }
}

/// "NBI Access regions": between Begin and End, NBI puts and gets (and a value put) are
/// collected into the one event End returns; waiting on it makes all of them complete.
/// Regions do not nest, and End needs a Begin.
#[test]
fn nbi_access_region() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("EV_REGION", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            assert!(!gex::event::nbi_in_access_region());
            gex::nbi_begin_access_region();
            assert!(gex::event::nbi_in_access_region());
            common::expect_panic(
                &["nbi_begin_access_region", "already open"],
                gex::nbi_begin_access_region,
            );
            let data: Vec<Vec<u8>> = (0..3)
                .map(|k| pattern((me * 10 + k) as u64, 5000))
                .collect();
            for r in 0..team.size() {
                for (k, d) in data.iter().enumerate() {
                    let dest = bases[r as usize] + (me as usize * 3 + k) * 8192;
                    // SAFETY: `data` outlives the region's event.
                    unsafe {
                        team.put_nbi(
                            r,
                            dest,
                            d,
                            if k == 0 { Lc::Defer } else { Lc::Now },
                            Flags::NONE,
                        )
                    }
                    .unwrap();
                }
                team.put_val_nbi(
                    r,
                    bases[r as usize] + 100_000 + 8 * me as usize,
                    0x1234_5678,
                    4,
                    Flags::NONE,
                )
                .unwrap();
            }
            // Gets in the region read our own earlier puts back (ordered on smp: they
            // completed at initiation).
            let mut back = vec![0u8; 5000];
            // SAFETY: `back` is untouched until the region's event is waited.
            unsafe {
                team.get_nbi(
                    back.as_mut_ptr(),
                    me,
                    bases[me as usize] + me as usize * 3 * 8192,
                    5000,
                    Flags::NONE,
                )
            }
            .unwrap();
            let ev = gex::nbi_end_access_region();
            assert!(!gex::event::nbi_in_access_region());
            ev.wait();
            assert!(back == data[0], "get inside the access region");
            common::expect_panic(
                &["nbi_end_access_region", "no access region"],
                gex::nbi_end_access_region,
            );
            // An empty region yields an event too.
            gex::nbi_begin_access_region();
            let mut ev = gex::nbi_end_access_region();
            assert!(ev.test());
            team.barrier();
            for w in 0..team.size() {
                for k in 0..3 {
                    // SAFETY: inside our segment; written before the barrier.
                    let at = unsafe {
                        std::slice::from_raw_parts(
                            seg.addr().add((w as usize * 3 + k) * 8192),
                            5000,
                        )
                    };
                    assert!(
                        at == pattern((w * 10 + k as u32) as u64, 5000),
                        "region put {k} from {w}"
                    );
                }
                // SAFETY: as above.
                let v = unsafe {
                    (seg.addr().add(100_000 + 8 * w as usize) as *const u32).read_unaligned()
                };
                assert_eq!(v, 0x1234_5678);
            }
            client.finalize();
        });
    }
}

/// The LC leaf of a put whose source the conduit may read until the put completes
/// (`lc_opt` DEFER or an event, the GROUP puts of an access region, whose event's leaf
/// stands for them, and a VIS put without `ENABLE_LEAF_LC`, whose local completion
/// "behaves as GEX_EVENT_DEFER") is never invalid while the put is pending: a client
/// that finds it invalid reuses the source. Between hosts the large puts are in flight
/// at return.
#[test]
fn lc_leaves_stay_pending_while_puts_may_read_their_sources() {
    for n in 1..=3 {
        spmd(n, || {
            let (client, _ep, team) = Client::init("EV_LEAF_HELD", Flags::NONE).unwrap();
            let _seg = Segment::attach(&team, 4 * MB).unwrap();
            let me = team.rank();
            let peer = (me + 1) % team.size();
            let dest = team.segment_bound(peer).unwrap().owner_addr + MB * me as usize;
            for mode in 0..4u8 {
                let data = vec![me as u8 + 10 * mode; MB];
                let mut lc_event = Event::invalid();
                let mut root = match mode {
                    0 | 1 => {
                        let lc = if mode == 0 {
                            Lc::Defer
                        } else {
                            Lc::Event(&mut lc_event)
                        };
                        // SAFETY: `data` outlives the put, waited for below.
                        unsafe { team.put_nb(peer, dest, &data, lc, Flags::NONE) }.unwrap()
                    }
                    3 => {
                        let halves: Vec<&[u8]> = data.chunks(MB / 2).collect();
                        let dst = [gex::Memvec::new(dest, MB)];
                        // SAFETY: as above.
                        unsafe { team.vector_put_nb(peer, &dst, &halves, Flags::NONE) }.unwrap()
                    }
                    _ => {
                        gex::nbi_begin_access_region();
                        for (i, half) in data.chunks(MB / 2).enumerate() {
                            let at = dest + i * MB / 2;
                            // SAFETY: as above; the region's event is waited for below.
                            unsafe { team.put_nbi(peer, at, half, Lc::Group, Flags::NONE) }
                                .unwrap();
                        }
                        gex::nbi_end_access_region()
                    }
                };
                let leaf = root.query_leaf(EventCategory::LC);
                let leaf_invalid = leaf.is_invalid();
                assert!(
                    !leaf_invalid || root.test(),
                    "mode {mode}: the LC leaf is invalid while the put is pending"
                );
                root.wait();
                leaf.wait();
                lc_event.wait();
                team.barrier();
                let mine = team.segment_bound(me).unwrap().owner_addr;
                let from = (me + team.size() - 1) % team.size();
                // SAFETY: this rank's own segment; the writer's put completed before the
                // barrier.
                let got = unsafe {
                    std::slice::from_raw_parts((mine + MB * from as usize) as *const u8, MB)
                };
                assert!(
                    got.iter().all(|&b| b == from as u8 + 10 * mode),
                    "mode {mode}"
                );
                team.barrier();
            }
            client.finalize();
        });
    }
}
