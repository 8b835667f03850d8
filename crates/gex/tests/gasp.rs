//! GASP events of the gex layer (gasp-1.4 §3, §5.4), with 1 to 4 ranks: the events a
//! tool receives (tags, types, call sites, arguments), that an operation's internals are
//! not reported, user events and measurement control (§3.3, §5.3), the `--profile-only`
//! filter (§3.1.2), `--profile` vs `--profile-local` (§3.1.1), re-entrancy (§3.2) and the
//! sync of a pending operation (§5.4.6). The built-in tools' files are tested in
//! `gasp_tools.rs`.
// The events these tests look for are compiled only with the `gasp` feature (see
// `gasp_off.rs` for the build without it).
#![cfg(feature = "gasp")]
mod common;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use gasp::events::*;
use gasp::{Arg, Event, EventType, GPtr, InitInfo, Tool};
use gex::testing::spmd;
use gex::{
    AmCategory, AmEntry, AmRole, Client, Event as GexEvent, EventCategory, Flags, Segment, Team,
    Token,
};

/// One received event, owned.
#[derive(Clone, Debug, PartialEq)]
struct Rec {
    tag: u32,
    ty: EventType,
    file: String,
    line: u32,
    args: Vec<String>,
}

fn owned(e: &Event<'_>) -> Rec {
    Rec {
        tag: e.tag,
        ty: e.ty,
        file: e.location.file().to_owned(),
        line: e.location.line(),
        args: e.args.iter().map(|a| format!("{a:?}")).collect(),
    }
}

/// A tool that keeps every event; optionally calls back into the runtime from inside.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Rec>>,
    on: AtomicBool,
    names: Mutex<Vec<String>>,
    call_back: bool,
}

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

static REENTERED: AtomicBool = AtomicBool::new(false);

struct Shared(Arc<Recorder>);

impl Tool for Shared {
    fn event_notify(&self, event: &Event<'_>) {
        if INSIDE.with(|i| i.replace(true)) {
            REENTERED.store(true, Ordering::Relaxed);
        }
        self.0.events.lock().unwrap().push(owned(event));
        if self.0.call_back && !gex::layered::in_handler() && event.tag != GASP_UPC_COLLECTIVE_EXIT
        {
            // A tool calling the runtime: these calls report events of their own,
            // which must not reach the tool (they would recurse).
            gex::poll();
            let _ = gasp::create_event("from inside", None);
        }
        INSIDE.with(|i| i.set(false));
    }

    fn control(&self, on: bool) -> bool {
        !self.0.on.swap(!on, Ordering::Relaxed)
    }

    fn create_event(&self, name: &str, _desc: Option<&str>) -> u32 {
        let mut names = self.0.names.lock().unwrap();
        names.push(name.to_owned());
        USEREVT_START + names.len() as u32 - 1
    }
}

static RECORDER: OnceLock<Arc<Recorder>> = OnceLock::new();

/// Registers a recording tool (before `Client::init`) and returns it.
fn install_recorder(call_back: bool) -> Arc<Recorder> {
    let rec = RECORDER
        .get_or_init(|| {
            Arc::new(Recorder {
                call_back,
                ..Recorder::default()
            })
        })
        .clone();
    let shared = rec.clone();
    gasp::register_tool(move |info: &InitInfo, _args| {
        assert_eq!(info.language, gasp::Language::Gex);
        assert_eq!(info.rank, gex::job_rank());
        assert_eq!(info.ranks, gex::job_size());
        Box::new(Shared(shared))
    });
    rec
}

impl Recorder {
    fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    fn since(&self, mark: usize) -> Vec<Rec> {
        self.events.lock().unwrap()[mark..].to_vec()
    }
}

fn expect(tag: u32, ty: EventType, line: u32, args: &[Arg<'_>]) -> Rec {
    Rec {
        tag,
        ty,
        file: file!().to_owned(),
        line,
        args: args.iter().map(|a| format!("{a:?}")).collect(),
    }
}

static HANDLER_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn ping(_token: &Token<'_>, _args: &[u32]) {
    HANDLER_RUNS.fetch_add(1, Ordering::Relaxed);
}

/// A Medium ping, sent in place.
fn pong(_token: &Token<'_>, _payload: &[u8], _args: &[u32]) {
    HANDLER_RUNS.fetch_add(1, Ordering::Relaxed);
}

fn wait_for_pings(team: &Team, n: usize) {
    while HANDLER_RUNS.load(Ordering::Relaxed) < n {
        gex::poll();
    }
    team.barrier();
}

fn run_scripted_ops() {
    let rec = install_recorder(false);
    let (client, ep, team) = Client::init("GASPT", Flags::NONE).unwrap();
    let mut table = [
        AmEntry::short("ping", AmRole::Request, 1, ping),
        AmEntry::payload("pong", AmCategory::Medium, AmRole::Request, 0, pong),
    ];
    let reg_line = line!() + 1;
    ep.register_handlers(&mut table).unwrap();
    let (index, pong_index) = (table[0].index, table[1].index);
    let _segment = Segment::attach(&team, 1 << 16).unwrap();
    let mark = rec.len();
    let first_line = line!() + 1;
    team.barrier();
    let (me, n) = (team.rank(), team.size());
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    let dest = team.segment_bound(next).unwrap().owner_addr;
    let src = [7u8; 8];
    let put_line = line!() + 1;
    team.put_blocking(next, dest, &src, Flags::NONE).unwrap();
    let req_line = line!() + 1;
    team.request_short(next, index, &[5], Flags::NONE).unwrap();
    // Written in place: reported as one Request, of the bytes written, at this line.
    let in_place_line = line!() + 1;
    team.request_medium_in_place(next, pong_index, &[], Flags::NONE, |buf| {
        buf[..5].copy_from_slice(b"hello");
        Some(5)
    })
    .unwrap();
    let barrier_line = line!() + 1;
    team.barrier();
    wait_for_pings(&team, 2);
    let got = rec.since(mark);

    // The AM handler runs wherever this rank polls: check it apart from the rest.
    let (handler, rest): (Vec<Rec>, Vec<Rec>) =
        got.into_iter().partition(|r| r.tag == GASP_GEX_AM_HANDLER);
    let put = [
        Arg::Int(1),
        Arg::GPtr(GPtr {
            rank: next,
            addr: dest as u64,
        }),
        Arg::Ptr(src.as_ptr() as usize),
        Arg::Bytes(8),
    ];
    let am = [
        Arg::Rank(next),
        Arg::Int(index as i32),
        Arg::Int(0),
        Arg::Bytes(0),
    ];
    let medium = [
        Arg::Rank(next),
        Arg::Int(pong_index as i32),
        Arg::Int(1),
        Arg::Bytes(5),
    ];
    let b = [Arg::Int(0), Arg::Int(0)];
    let expected = [
        expect(GASP_UPC_BARRIER, EventType::Start, first_line, &b),
        expect(GASP_UPC_BARRIER, EventType::End, first_line, &b),
        expect(GASP_UPC_PUT, EventType::Start, put_line, &put),
        expect(GASP_UPC_PUT, EventType::End, put_line, &put),
        expect(GASP_GEX_AM_REQUEST, EventType::Start, req_line, &am),
        expect(GASP_GEX_AM_REQUEST, EventType::End, req_line, &am),
        expect(
            GASP_GEX_AM_REQUEST,
            EventType::Start,
            in_place_line,
            &medium,
        ),
        expect(GASP_GEX_AM_REQUEST, EventType::End, in_place_line, &medium),
        // The barrier's own AMs, notify and wait are internals: one BARRIER pair.
        expect(GASP_UPC_BARRIER, EventType::Start, barrier_line, &b),
        expect(GASP_UPC_BARRIER, EventType::End, barrier_line, &b),
    ];
    assert_eq!(rest[..expected.len()], expected[..], "rank {me}");
    // Then `wait_for_pings`: polls and a barrier.
    let tail = &rest[expected.len()..];
    assert!(
        tail.iter()
            .all(|r| r.tag == GASP_GEX_POLL || r.tag == GASP_UPC_BARRIER),
        "rank {me}: {tail:?}"
    );
    let from = [
        Arg::Rank(prev),
        Arg::Int(index as i32),
        Arg::Int(0),
        Arg::Bytes(0),
    ];
    let from_medium = [
        Arg::Rank(prev),
        Arg::Int(pong_index as i32),
        Arg::Int(1),
        Arg::Bytes(5),
    ];
    assert_eq!(
        handler,
        [
            expect(GASP_GEX_AM_HANDLER, EventType::Start, reg_line, &from),
            expect(GASP_GEX_AM_HANDLER, EventType::End, reg_line, &from),
            expect(
                GASP_GEX_AM_HANDLER,
                EventType::Start,
                reg_line,
                &from_medium
            ),
            expect(GASP_GEX_AM_HANDLER, EventType::End, reg_line, &from_medium),
        ],
        "rank {me}: the handler's events name its source and registration site"
    );
    client.finalize();
    let last = rec.since(rec.len() - 2);
    assert_eq!(last[0].tag, GASP_UPC_COLLECTIVE_EXIT);
    assert_eq!(last[1].ty, EventType::End);
    assert!(!REENTERED.load(Ordering::Relaxed));
}

#[test]
fn a_tool_receives_each_operation_once_with_its_call_site() {
    for ranks in [2, 3] {
        spmd(ranks, run_scripted_ops);
    }
}

/// GASP §5.4.2: a split-phase barrier is a NOTIFY interval (`barrier_nb`) and a WAIT
/// interval (the wait of its event), each at its own call site. Rank 0 notifies first
/// and only then lets the others enter, so its barrier cannot be complete when
/// `barrier_nb` returns: it reports both. A rank whose notify completed the barrier
/// gets an invalid event, whose wait reports nothing (an operation complete at
/// initiation); the others report both too.
#[test]
fn a_split_phase_barrier_reports_notify_then_wait() {
    for ranks in [2, 3] {
        spmd(ranks, || {
            let rec = install_recorder(false);
            let (client, _ep, team) = Client::init("GASPB", Flags::NONE).unwrap();
            let segment = Segment::attach(&team, 1 << 16).unwrap();
            let bases = common::segment_bases(&team);
            team.barrier();
            let mark = rec.len();
            let (notify_line, wait_line);
            if team.rank() == 0 {
                notify_line = line!() + 1;
                let barrier = team.barrier_nb();
                assert!(!barrier.is_invalid(), "the others have not entered yet");
                for r in 1..team.size() {
                    team.put_val_blocking(r, bases[r as usize], 1, 8, Flags::NONE)
                        .unwrap();
                }
                wait_line = line!() + 1;
                barrier.wait();
            } else {
                // SAFETY: the segment's first word is this rank's, written by rank 0.
                while unsafe { common::read_u64(segment.addr() as usize) } == 0 {
                    gex::poll();
                }
                notify_line = line!() + 1;
                let barrier = team.barrier_nb();
                wait_line = line!() + 1;
                barrier.wait();
            }
            let got: Vec<Rec> = rec
                .since(mark)
                .into_iter()
                .filter(|r| r.tag == GASP_UPC_NOTIFY || r.tag == GASP_UPC_WAIT)
                .collect();
            let b = [Arg::Int(0), Arg::Int(0)];
            let notify = [
                expect(GASP_UPC_NOTIFY, EventType::Start, notify_line, &b),
                expect(GASP_UPC_NOTIFY, EventType::End, notify_line, &b),
            ];
            let wait = [
                expect(GASP_UPC_WAIT, EventType::Start, wait_line, &b),
                expect(GASP_UPC_WAIT, EventType::End, wait_line, &b),
            ];
            let both: Vec<Rec> = notify.iter().chain(&wait).cloned().collect();
            let me = team.rank();
            if me == 0 {
                assert_eq!(got, both, "rank 0");
            } else {
                assert!(got == both || got == notify, "rank {me}: {got:?}");
            }
            client.finalize();
        });
    }
}

#[test]
fn user_events_and_measurement_control() {
    spmd(1, || {
        assert!(gasp::control(false), "no tool: control reports measuring");
        let rec = install_recorder(false);
        let (client, _ep, _team) = Client::init("GASPT", Flags::NONE).unwrap();
        let ev = gasp::create_event("phase", Some("%d %f"));
        assert_eq!(ev.0, USEREVT_START);
        let mark = rec.len();
        let line = line!() + 1;
        gasp::event_start(ev, &[Arg::Int(3), Arg::F64(0.5)]);
        gasp::event_atomic(ev, &[Arg::Str(c"mid")]);
        gasp::event_end(ev, &[]);
        let got = rec.since(mark);
        assert_eq!(
            got,
            [
                expect(ev.0, EventType::Start, line, &[Arg::Int(3), Arg::F64(0.5)]),
                expect(ev.0, EventType::Atomic, line + 1, &[Arg::Str(c"mid")]),
                expect(ev.0, EventType::End, line + 2, &[]),
            ]
        );
        // §3.3: control returns the previous setting, nonzero before the first call.
        assert!(gasp::control(false));
        assert!(!gasp::control(true));
        assert!(gasp::control(true));
        client.finalize();
    });
}

#[test]
fn profile_only_filters_system_events_but_not_user_events() {
    for ranks in [1, 3] {
        spmd(ranks, || {
            let list = std::env::temp_dir().join(format!("gasp-only-{}", std::process::id()));
            std::fs::write(&list, "GASP_UPC_BARRIER\nGASP_NO_SUCH_EVENT\n\n").unwrap();
            std::env::set_var("GASP_PROFILE_ONLY", &list);
            let rec = install_recorder(false);
            let (client, _ep, team) = Client::init("GASPT", Flags::NONE).unwrap();
            std::fs::remove_file(&list).unwrap();
            let _segment = Segment::attach(&team, 1 << 16).unwrap();
            let ev = gasp::create_event("mine", None);
            let mark = rec.len();
            let next = (team.rank() + 1) % team.size();
            let dest = team.segment_bound(next).unwrap().owner_addr;
            team.put_blocking(next, dest, &[1; 4], Flags::NONE).unwrap();
            gasp::event_atomic(ev, &[]);
            team.barrier();
            gex::poll();
            let tags: Vec<u32> = rec.since(mark).iter().map(|r| r.tag).collect();
            assert_eq!(tags, [ev.0, GASP_UPC_BARRIER, GASP_UPC_BARRIER]);
            client.finalize();
        });
    }
}

#[test]
fn exclude_local_drops_accesses_to_the_local_team_only() {
    spmd(2, || {
        std::env::set_var("GASP_EXCLUDE_LOCAL", "1");
        let rec = install_recorder(false);
        let (client, _ep, team) = Client::init("GASPT", Flags::NONE).unwrap();
        let _segment = Segment::attach(&team, 1 << 16).unwrap();
        let mark = rec.len();
        let next = (team.rank() + 1) % team.size();
        let dest = team.segment_bound(next).unwrap().owner_addr;
        team.put_blocking(next, dest, &[1; 4], Flags::NONE).unwrap();
        let mut buf = [0u8; 4];
        team.get_blocking(&mut buf, next, dest, Flags::NONE)
            .unwrap();
        team.barrier();
        let tags: Vec<u32> = rec.since(mark).iter().map(|r| r.tag).collect();
        // With every rank on one host the peer is in the local team (its segment
        // mapped here) and its accesses are left out; on another host they are kept.
        if gex::nbrhd_info().members.contains(&next) {
            assert_eq!(tags, [GASP_UPC_BARRIER, GASP_UPC_BARRIER]);
        } else {
            assert_eq!(
                tags,
                [
                    GASP_UPC_PUT,
                    GASP_UPC_PUT,
                    GASP_UPC_GET,
                    GASP_UPC_GET,
                    GASP_UPC_BARRIER,
                    GASP_UPC_BARRIER
                ]
            );
        }
        client.finalize();
    });
}

#[test]
fn a_tool_that_calls_the_runtime_does_not_recurse() {
    spmd(2, || {
        let rec = install_recorder(true);
        let (client, _ep, team) = Client::init("GASPT", Flags::NONE).unwrap();
        let mark = rec.len();
        team.barrier();
        gex::poll();
        let tags: Vec<u32> = rec.since(mark).iter().map(|r| r.tag).collect();
        assert_eq!(
            tags,
            [
                GASP_UPC_BARRIER,
                GASP_UPC_BARRIER,
                GASP_GEX_POLL,
                GASP_GEX_POLL
            ],
            "the tool's own poll calls are not reported"
        );
        assert!(!REENTERED.load(Ordering::Relaxed));
        client.finalize();
    });
}

/// GASP §5.4.6: the sync that retires a pending operation is reported whatever call
/// finds it complete: a successful `Event::test` (an unsuccessful one reports nothing),
/// `Event::wait_all` (each pending event's wait), `Event::wait_some` (its own
/// `GASP_GEX_WAIT_SOME` interval, then the sync of each event it found complete) and a
/// successful `gex::nbi_test` (`GASP_NB_IMPLICIT`). The pending operation is rank 0's
/// split-phase barrier (GASP §5.4.2: its sync is a `GASP_UPC_WAIT`): rank 0 notifies
/// first and only then lets the others enter, by a Short AM (sent without polling,
/// wherever the others are), and only its own polls complete it.
#[test]
fn every_call_that_retires_a_pending_operation_reports_its_sync() {
    static PHASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    fn enter(_token: &Token<'_>, args: &[u32]) {
        PHASE.store(u64::from(args[0]), Ordering::Release);
    }
    for ranks in [2, 3] {
        spmd(ranks, || {
            let rec = install_recorder(false);
            let (client, ep, team) = Client::init("GASPS", Flags::NONE).unwrap();
            let mut table = [AmEntry::short("enter", AmRole::Request, 1, enter)];
            ep.register_handlers(&mut table).unwrap();
            team.barrier();
            let syncs = |mark: usize| -> Vec<Rec> {
                rec.since(mark)
                    .into_iter()
                    .filter(|r| {
                        [GASP_UPC_WAIT, GASP_UPC_NB_SYNC, GASP_GEX_WAIT_SOME].contains(&r.tag)
                    })
                    .collect()
            };
            let b = [Arg::Int(0), Arg::Int(0)];
            let wait_at = |line: u32| {
                vec![
                    expect(GASP_UPC_WAIT, EventType::Start, line, &b),
                    expect(GASP_UPC_WAIT, EventType::End, line, &b),
                ]
            };
            if team.rank() != 0 {
                for phase in 1..=3u64 {
                    while PHASE.load(Ordering::Acquire) != phase {
                        gex::poll();
                    }
                    team.barrier_nb().wait();
                }
                client.finalize();
                return;
            }
            // Rank 0: a barrier the others enter once they see `phase` in their segment.
            let notify = |phase: u64| {
                let barrier = team.barrier_nb();
                assert!(!barrier.is_invalid(), "the others have not entered yet");
                for r in 1..team.size() {
                    team.request_short(r, table[0].index, &[phase as u32], Flags::NONE)
                        .unwrap();
                }
                barrier
            };

            let mut barrier = notify(1);
            let mark = rec.len();
            let line = line!() + 1;
            while !barrier.test() {
                gex::poll();
            }
            assert!(barrier.is_invalid(), "a successful test consumes the event");
            assert!(barrier.test(), "an invalid event tests complete");
            assert_eq!(syncs(mark), wait_at(line), "test");

            let mut events = [GexEvent::invalid(), notify(2)];
            let mark = rec.len();
            let line = line!() + 1;
            GexEvent::wait_all(&mut events);
            assert!(events.iter().all(GexEvent::is_invalid));
            assert_eq!(syncs(mark), wait_at(line), "wait_all");

            let mut events = [notify(3)];
            let mark = rec.len();
            let line = line!() + 1;
            GexEvent::wait_some(&mut events);
            assert!(events[0].is_invalid());
            let mut want = vec![
                expect(GASP_GEX_WAIT_SOME, EventType::Start, line, &[Arg::Int(1)]),
                expect(GASP_GEX_WAIT_SOME, EventType::End, line, &[Arg::Int(1)]),
            ];
            want.extend(wait_at(line));
            assert_eq!(syncs(mark), want, "wait_some");

            let mark = rec.len();
            let line = line!() + 1;
            assert!(gex::nbi_test(EventCategory::ALL));
            let implicit = [Arg::Handle(NB_IMPLICIT)];
            assert_eq!(
                syncs(mark),
                vec![
                    expect(GASP_UPC_NB_SYNC, EventType::Start, line, &implicit),
                    expect(GASP_UPC_NB_SYNC, EventType::End, line, &implicit),
                ],
                "nbi_test"
            );
            client.finalize();
        });
    }
}

/// A tool with a fixed table of user events, each named event at the tag the table
/// gives it (the spec lets a tool choose any tags in the user range): `setup` at the
/// bottom of the range and `phase` at the top. Keeps the user events it receives.
#[derive(Default)]
struct Table {
    names: Mutex<Vec<String>>,
    user: Mutex<Vec<(u32, EventType)>>,
}

struct TableTool(Arc<Table>);

impl Tool for TableTool {
    fn event_notify(&self, event: &Event<'_>) {
        if (USEREVT_START..=USEREVT_END).contains(&event.tag) {
            self.0.user.lock().unwrap().push((event.tag, event.ty));
        }
    }

    fn control(&self, _on: bool) -> bool {
        true
    }

    fn create_event(&self, name: &str, _desc: Option<&str>) -> u32 {
        self.0.names.lock().unwrap().push(name.to_owned());
        match name {
            "setup" => USEREVT_START,
            "phase" => USEREVT_END,
            _ => USEREVT_START + 1,
        }
    }
}

/// §5.3: an event the program created before the tool was attached keeps a tag of its
/// own, whatever tags the tool gives later events, and its events reach the tool under
/// the tag the tool gave it when attached.
#[test]
fn early_user_events_stay_apart_from_the_tags_a_tool_gives() {
    spmd(1, || {
        let setup = gasp::create_event("setup", None);
        let tool = Arc::new(Table::default());
        let attached = tool.clone();
        gasp::register_tool(move |_info: &InitInfo, _args| Box::new(TableTool(attached.clone())));
        let (client, _ep, _team) = Client::init("GASPT", Flags::NONE).unwrap();
        let phase = gasp::create_event("phase", None);
        assert_ne!(setup, phase, "an early event shares a tag with a later one");
        gasp::event_atomic(setup, &[]);
        gasp::event_atomic(phase, &[]);
        assert_eq!(*tool.names.lock().unwrap(), ["setup", "phase"]);
        assert_eq!(
            *tool.user.lock().unwrap(),
            [
                (USEREVT_START, EventType::Atomic),
                (USEREVT_END, EventType::Atomic)
            ]
        );
        client.finalize();
    });
}
