//! Handler-safe locks ("Handler-safe locks (HSLs)": `gex_HSL_Lock/Unlock/Trylock`) and
//! the restricted context of a thread holding one ("Calls from restricted context"),
//! with 1 to 4 ranks.
mod common;

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{expect_panic, poll_until, try_panic_message, Errors};
use gex::testing::{spmd, spmd_outcome, SpmdOptions};
use gex::{AmEntry, AmRole, Client, Flags, Hsl, Segment, Team, Token};

const MB: usize = 1 << 20;
const HELD: &str = "while holding a handler-safe lock";

static LOCK: Hsl = Hsl::new();
static TEAM: OnceLock<Team> = OnceLock::new();
static ERRORS: Errors = Errors::new();
static RUNS: AtomicUsize = AtomicUsize::new(0);

/// A counter only ever touched under `LOCK`.
struct Guarded(UnsafeCell<u64>);
// SAFETY: every access holds LOCK.
unsafe impl Sync for Guarded {}
static COUNTER: Guarded = Guarded(UnsafeCell::new(0));

fn bump_locked() {
    LOCK.lock();
    // SAFETY: LOCK is held. A non-atomic read-modify-write with a pause in between, so
    // that a missing exclusion loses updates.
    unsafe {
        let v = std::ptr::read_volatile(COUNTER.0.get());
        std::hint::spin_loop();
        std::ptr::write_volatile(COUNTER.0.get(), v + 1);
    }
    LOCK.unlock();
}

/// Request handler: takes the HSL (allowed in a handler) and bumps the counter.
fn locking_handler(_token: &Token<'_>, _args: &[u32]) {
    bump_locked();
    RUNS.fetch_add(1, Ordering::Relaxed);
}

fn init(name: &str, handler: fn(&Token<'_>, &[u32])) -> (Client, Team, u8) {
    common::quiet_expected_panics();
    let (client, ep, team) = Client::init(name, Flags::NONE).unwrap();
    let mut t = [AmEntry::short("hsl_handler", AmRole::Request, 0, handler)];
    ep.register_handlers(&mut t).unwrap();
    let _ = TEAM.set(team);
    let _seg = Segment::attach(&team, MB).unwrap();
    team.barrier();
    (client, team, t[0].index)
}

/// An HSL can be taken inside a handler, and excludes the rank's other threads: a
/// thread polls (running handlers that lock) while the main thread locks for its own
/// updates of the same counter; no update is lost.
#[test]
fn hsl_in_handlers_excludes_other_threads() {
    for n in 1..=4 {
        spmd(n, || {
            let (client, team, h) = init("HSL_HANDLER", locking_handler);
            const PER_PEER: usize = 300;
            for r in 0..team.size() {
                for _ in 0..PER_PEER {
                    team.request_short(r, h, &[], Flags::NONE).unwrap();
                }
            }
            let want = PER_PEER * team.size() as usize;
            let stop = Arc::new(AtomicBool::new(false));
            let poller = {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        gex::poll();
                    }
                })
            };
            let mut mine = 0u64;
            let end = Instant::now() + Duration::from_secs(10);
            while RUNS.load(Ordering::Relaxed) < want {
                assert!(Instant::now() < end, "handlers did not run");
                bump_locked();
                mine += 1;
            }
            stop.store(true, Ordering::Relaxed);
            poller.join().unwrap();
            LOCK.lock();
            // SAFETY: LOCK is held.
            let total = unsafe { *COUNTER.0.get() };
            LOCK.unlock();
            assert_eq!(total, mine + want as u64, "updates under the HSL were lost");
            team.barrier();
            client.finalize();
        });
    }
}

/// While a thread holds an HSL it may not communicate or poll (each call fails naming
/// it, "while holding a handler-safe lock"); after unlocking it may again. Other
/// threads of the rank are not restricted meanwhile, and the restriction counts nested
/// locks.
#[test]
fn no_communication_while_holding_an_hsl() {
    for n in 1..=4 {
        spmd(n, || {
            let (client, team, h) = init("HSL_HOLD", locking_handler);
            let me = team.rank();
            let addr = team.segment_bound(me).unwrap().owner_addr;
            let other = Hsl::new();
            LOCK.lock();
            expect_panic(&["Team::request_short", HELD], || {
                team.request_short(me, h, &[], Flags::NONE)
            });
            expect_panic(&["Team::put_blocking", HELD], || {
                team.put_blocking(me, addr, &[1], Flags::NONE)
            });
            expect_panic(&["Team::get_blocking", HELD], || {
                team.get_blocking(&mut [0], me, addr, Flags::NONE)
            });
            expect_panic(&["poll", HELD], gex::poll);
            expect_panic(&["Team::barrier_nb", HELD], || team.barrier());
            expect_panic(&["Team::segment_bound", HELD], || team.segment_bound(me));
            expect_panic(&["Event::wait_all", HELD], || gex::Event::wait_all(&mut []));
            expect_panic(&["nbi_wait", HELD], || {
                gex::nbi_wait(gex::EventCategory::ALL)
            });
            // Queries are fine.
            assert_eq!(gex::job_rank(), me);
            assert!(team.endpoint().segment().is_some());
            // Another thread may communicate meanwhile.
            let t = team;
            std::thread::spawn(move || {
                t.put_blocking(me, addr + 8, &[7], Flags::NONE).unwrap();
                gex::poll();
            })
            .join()
            .expect("another thread communicates while this one holds an HSL");
            // Nested: still restricted until the last one is released.
            other.lock();
            LOCK.unlock();
            expect_panic(&["Team::put_blocking", HELD], || {
                team.put_blocking(me, addr, &[1], Flags::NONE)
            });
            {
                let _g = LOCK.guard();
                expect_panic(&["poll", HELD], gex::poll);
            }
            other.unlock();
            // Free again.
            team.put_blocking(me, addr, &[5], Flags::NONE).unwrap();
            gex::poll();
            let mut b = [0u8; 9];
            team.get_blocking(&mut b, me, addr, Flags::NONE).unwrap();
            assert_eq!((b[0], b[8]), (5, 7));
            expect_panic(&["Hsl::unlock", "not held"], || LOCK.unlock());
            team.barrier();
            client.finalize();
        });
    }
}

/// Another thread that holds [`LOCK`] until released.
struct Holder {
    release: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Holder {
    /// Starts a thread that takes the lock with `take`; returns once it holds it.
    fn take(take: impl FnOnce() + Send + 'static) -> Holder {
        let held = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let thread = {
            let (held, release) = (Arc::clone(&held), Arc::clone(&release));
            std::thread::spawn(move || {
                take();
                held.store(true, Ordering::Release);
                while !release.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                LOCK.unlock();
            })
        };
        while !held.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        Holder { release, thread }
    }

    /// Lets the thread unlock and end.
    fn release(self) {
        self.release.store(true, Ordering::Release);
        self.thread.join().unwrap();
    }
}

/// `gex_HSL_Trylock` fails while another thread holds the lock and succeeds once it is
/// released; a successful try_lock restricts the thread like `lock`.
#[test]
fn try_lock_across_threads() {
    spmd(1, || {
        let (client, team, _h) = init("HSL_TRY", locking_handler);
        let me = team.rank();
        let addr = team.segment_bound(me).unwrap().owner_addr;
        let holder = Holder::take(|| assert!(LOCK.try_lock(), "try_lock of a free lock"));
        for _ in 0..100 {
            assert!(
                !LOCK.try_lock(),
                "try_lock succeeded while another thread held the lock"
            );
        }
        // A failed try_lock does not restrict us.
        team.put_blocking(me, addr, &[1], Flags::NONE).unwrap();
        holder.release();
        assert!(LOCK.try_lock(), "try_lock after the other thread released");
        expect_panic(&["Team::put_blocking", HELD], || {
            team.put_blocking(me, addr, &[1], Flags::NONE)
        });
        assert!(
            !std::thread::spawn(|| LOCK.try_lock()).join().unwrap(),
            "held by us now"
        );
        LOCK.unlock();
        team.put_blocking(me, addr, &[2], Flags::NONE).unwrap();
        client.finalize();
    });
}

/// A Request handler that holds an HSL may not Reply: Replies are "conditionally
/// permitted in handler context, the condition being the caller must be within an
/// AMRequest handler and not holding a handler-safe lock".
fn reply_under_lock(token: &Token<'_>, _args: &[u32]) {
    LOCK.lock();
    let msg = try_panic_message(|| token.reply_short(token.info().entry.index, &[], Flags::NONE));
    LOCK.unlock();
    ERRORS.check(
        msg.as_deref()
            .is_some_and(|m| m.contains("Token::reply_short") && m.contains(HELD)),
        || format!("Reply while holding an HSL in a Request handler: {msg:?}"),
    );
    RUNS.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn no_reply_while_holding_an_hsl() {
    for n in 1..=2 {
        spmd(n, || {
            let (client, ep, team) = {
                common::quiet_expected_panics();
                let (client, ep, team) = Client::init("HSL_REPLY", Flags::NONE).unwrap();
                (client, ep, team)
            };
            // ReqRep so that a Reply that wrongly goes out still finds a handler.
            let mut t = [AmEntry::short(
                "reply_under_lock",
                AmRole::ReqRep,
                0,
                reply_under_lock,
            )];
            ep.register_handlers(&mut t).unwrap();
            let _seg = Segment::attach(&team, MB).unwrap();
            let peer = (team.rank() + 1) % team.size();
            team.request_short(peer, t[0].index, &[], Flags::NONE)
                .unwrap();
            poll_until("the handler", 10, || RUNS.load(Ordering::Relaxed) >= 1);
            team.barrier();
            ERRORS.assert_none();
            client.finalize();
        });
    }
}

/// HSLs are released by the thread that took them and do not nest: releasing one
/// another thread holds, or taking one again, fails naming the call (instead of
/// releasing the other thread's hold, or deadlocking), and changes nothing.
#[test]
fn only_the_holder_releases_and_no_thread_takes_twice() {
    spmd(1, || {
        let (client, _team, _h) = init("HSL_OWNER", locking_handler);
        let holder = Holder::take(|| LOCK.lock());
        expect_panic(&["Hsl::unlock", "not held by this thread"], || {
            LOCK.unlock()
        });
        assert!(!LOCK.try_lock(), "the other thread's hold was released");
        holder.release();
        LOCK.lock();
        expect_panic(&["Hsl::lock", "holds the lock already"], || LOCK.lock());
        LOCK.unlock();
        assert!(LOCK.try_lock());
        LOCK.unlock();
        client.finalize();
    });
}

/// `gex_HSL_Destroy` of a held lock is an error: dropping an `Hsl` this thread holds
/// fails naming it and leaves the thread free to communicate (its restricted context
/// ends with the lock), and so does unwinding from a panic past a held lock, without a
/// second panic. Dropping one another thread holds fails too.
#[test]
fn dropping_a_held_lock_fails_and_frees_the_thread() {
    spmd(1, || {
        let (client, team, _h) = init("HSL_DROP", locking_handler);
        let me = team.rank();
        let addr = team.segment_bound(me).unwrap().owner_addr;
        expect_panic(&["gex::Hsl dropped", "this thread holds it"], || {
            let held = Hsl::new();
            held.lock();
        });
        team.put_blocking(me, addr, &[1], Flags::NONE).unwrap();
        // A second panic in the unwinding drop would abort the process.
        let msg = try_panic_message(|| {
            let held = Hsl::new();
            held.lock();
            panic!("a failure while holding the lock");
        });
        assert_eq!(msg.as_deref(), Some("a failure while holding the lock"));
        team.put_blocking(me, addr, &[2], Flags::NONE).unwrap();
        let shared = Arc::new(Hsl::new());
        let other = Arc::clone(&shared);
        std::thread::spawn(move || other.lock()).join().unwrap();
        expect_panic(
            &["gex::Hsl dropped", "another thread holds it"],
            move || drop(shared),
        );
        team.put_blocking(me, addr, &[3], Flags::NONE).unwrap();
        client.finalize();
    });
}

fn keeps_the_lock(_token: &Token<'_>, _args: &[u32]) {
    LOCK.lock();
}

/// A handler that returns holding an HSL it took fails the rank with a message naming
/// the handler, instead of leaving its thread free to communicate with the lock held
/// (the handler's next run on that thread would then deadlock).
#[test]
fn a_handler_that_returns_holding_an_hsl_fails_the_rank() {
    let mut opts = SpmdOptions::new(2);
    opts.expect_failure = true;
    let Some(outcome) = spmd_outcome(opts, || {
        let (client, team, h) = init("HSL_KEPT", keeps_the_lock);
        if team.rank() == 0 {
            team.request_short(0, h, &[], Flags::NONE).unwrap();
        }
        // Rank 0 fails in its first poll; the job ends there.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            gex::poll();
        }
        if team.rank() == 0 {
            LOCK.unlock();
        }
        client.finalize();
    }) else {
        return;
    };
    let report = outcome.failure.expect("the job fails");
    assert!(
        report.contains("AM handler hsl_handler returned holding a handler-safe lock"),
        "{report}"
    );
    assert!(report.contains("rank 0"), "{report}");
}

/// A Commit is communication: taking an HSL between a Prepare and its Commit fails the
/// Commit naming it, and the slot it claimed is released (later messages get through).
#[test]
fn no_commit_while_holding_an_hsl() {
    for n in 1..=2 {
        spmd(n, || {
            let (client, team, h) = init("HSL_COMMIT", locking_handler);
            let peer = (team.rank() + 1) % team.size();
            let sd = team
                .prepare_request_medium(peer, None, 0, 8, gex::Lc::Now, Flags::NONE, 0)
                .unwrap();
            LOCK.lock();
            expect_panic(&["SrcDesc::commit_medium", HELD], move || {
                sd.commit_medium(h, 0, &[])
            });
            LOCK.unlock();
            team.request_short(peer, h, &[], Flags::NONE).unwrap();
            poll_until("the request", 10, || RUNS.load(Ordering::Relaxed) >= 1);
            team.barrier();
            client.finalize();
        });
    }
}
