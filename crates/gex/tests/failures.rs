//! Jobs that fail: a rank that panics, a handler that breaks the rules of "Calls from
//! restricted context" without catching the panic, a message for a handler index
//! nobody registered, a rank that calls `gex::exit(3)` (`gasnet_exit`) or ends the
//! job with `gex::exit(0)` (from its code, from a handler, before the others attach, or
//! while another rank is still busy), a rank that returns without finalizing, and a
//! job past its time limit. The launcher reports which rank failed and why, the job's
//! exit code says how, and no rank process survives its job.
mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::PidDir;
use gex::job::JobOutcome;
use gex::testing::{spmd_outcome, SpmdOptions};
use gex::{AmEntry, AmRole, Client, Flags, Segment, Team, Token};

const MB: usize = 1 << 20;

fn opts(n: usize, pids: &PidDir, env: &[(&str, String)]) -> SpmdOptions {
    let mut env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    env.push(pids.env());
    SpmdOptions {
        timeout: Duration::from_secs(20),
        env,
        ..SpmdOptions::new(n)
    }
}

static TEAM: OnceLock<Team> = OnceLock::new();

/// Init, record the pid, register `table`, attach (a barrier).
fn start(name: &str, table: &mut [AmEntry]) -> (Client, Team) {
    let (client, ep, team) = Client::init(name, Flags::NONE).unwrap();
    common::record_pid(team.rank());
    let _ = TEAM.set(team);
    ep.register_handlers(table).unwrap();
    let _ = Segment::attach(&team, MB).unwrap();
    (client, team)
}

fn env_u32(name: &str) -> u32 {
    std::env::var(name).unwrap().parse().unwrap()
}

#[track_caller]
fn assert_failed(outcome: &JobOutcome, needles: &[&str]) -> String {
    let report = outcome.failure.clone().expect("the job should have failed");
    assert_ne!(outcome.exit_code, 0, "exit code of a failed job ({report})");
    for n in needles {
        assert!(
            report.contains(n),
            "report {report:?} does not mention {n:?}"
        );
    }
    report
}

/// A rank that panics fails the job: the report names the rank and the panic message
/// (with its location), the exit code is the rank's (101, Rust's panic status), and the
/// other ranks, blocked in a barrier, are torn down.
#[test]
fn a_panicking_rank_fails_the_job() {
    for n in 1..=4 {
        let pids = PidDir::new("panic");
        let outcome = spmd_outcome(opts(n, &pids, &[]), || {
            let (client, team) = start("FAIL_PANIC", &mut []);
            if team.rank() == team.size() - 1 {
                panic!("deliberate failure on rank {}", team.rank());
            }
            team.barrier();
            client.finalize();
        });
        let Some(outcome) = outcome else { continue };
        let who = format!("rank {} of {n} failed", n - 1);
        let msg = format!("deliberate failure on rank {}", n - 1);
        assert_failed(&outcome, &[&who, &msg, "failures.rs"]);
        assert_eq!(outcome.exit_code, 101);
        pids.assert_all_gone(n);
    }
}

fn forbidden_request(token: &Token<'_>, _args: &[u32]) {
    // Requests are prohibited in handler context; nothing catches this panic.
    let t = *TEAM.get().unwrap();
    let _ = t.request_short(token.src_rank(), 200, &[], Flags::NONE);
}

fn forbidden_barrier(_token: &Token<'_>, _args: &[u32]) {
    TEAM.get().unwrap().barrier();
}

fn double_reply(token: &Token<'_>, _args: &[u32]) {
    token.reply_short(205, &[], Flags::NONE).unwrap();
    token.reply_short(205, &[], Flags::NONE).unwrap();
}

fn reply_once(token: &Token<'_>, _args: &[u32]) {
    token.reply_short(201, &[], Flags::NONE).unwrap();
}

fn reply_from_reply(token: &Token<'_>, _args: &[u32]) {
    token.reply_short(201, &[], Flags::NONE).unwrap();
}

fn nothing(_token: &Token<'_>, _args: &[u32]) {}

/// A handler that breaks a rule of restricted context without catching the panic takes
/// its rank down, and the report names that rank, the call and the rule. (Case 4 sends
/// to an index nobody registered, case 5 with the wrong number of arguments.)
#[test]
fn a_rule_breaking_handler_fails_the_job() {
    let cases: [(u32, usize, &[&str]); 6] = [
        (
            0,
            1,
            &[
                "gex::Team::request_short",
                "inside an Active Message handler",
            ],
        ),
        (
            1,
            2,
            &["gex::Team::barrier_nb", "inside an Active Message handler"],
        ),
        (
            2,
            3,
            &["gex::Token::reply_short", "already sent its one Reply"],
        ),
        (
            3,
            4,
            &[
                "gex::Token::reply_short",
                "may only be sent from a Request handler",
            ],
        ),
        (4, 2, &["no handler is registered at this index"]),
        (5, 3, &["number of arguments differs from the registration"]),
    ];
    for (case, n, needles) in cases {
        let pids = PidDir::new("rule");
        let outcome = spmd_outcome(opts(n, &pids, &[("CASE", case.to_string())]), || {
            let (client, team) = start(
                "FAIL_RULE",
                &mut [
                    AmEntry::short("nothing", AmRole::ReqRep, 0, nothing).at(200),
                    AmEntry::short("reply_from_reply", AmRole::Reply, 0, reply_from_reply).at(201),
                    AmEntry::short("forbidden_request", AmRole::Request, 0, forbidden_request)
                        .at(202),
                    AmEntry::short("forbidden_barrier", AmRole::Request, 0, forbidden_barrier)
                        .at(203),
                    AmEntry::short("double_reply", AmRole::Request, 0, double_reply).at(204),
                    AmEntry::short("reply_sink", AmRole::Reply, 0, nothing).at(205),
                    AmEntry::short("reply_once", AmRole::Request, 0, reply_once).at(206),
                ],
            );
            let target = team.size() - 1;
            if team.rank() == 0 {
                match env_u32("CASE") {
                    0 => team.request_short(target, 202, &[], Flags::NONE).unwrap(),
                    1 => team.request_short(target, 203, &[], Flags::NONE).unwrap(),
                    // The second Reply fails at `target`.
                    2 => team.request_short(target, 204, &[], Flags::NONE).unwrap(),
                    // `target` replies once; the Reply handler replying fails at rank 0.
                    3 => team.request_short(target, 206, &[], Flags::NONE).unwrap(),
                    4 => team.request_short(target, 250, &[], Flags::NONE).unwrap(),
                    _ => team
                        .request_short(target, 200, &[1, 2], Flags::NONE)
                        .unwrap(),
                }
            }
            wait_for_teardown(&team);
            client.finalize();
        });
        let Some(outcome) = outcome else { continue };
        let report = assert_failed(&outcome, needles);
        let who = format!("rank {} of {n} failed", if case == 3 { 0 } else { n - 1 });
        assert!(report.starts_with(&who), "case {case}: {report}");
        pids.assert_all_gone(n);
    }
}

/// `gex::exit(3)` in one rank (`gasnet_exit`) ends the job with exit code 3, the report
/// naming the rank and the call; the other ranks are torn down.
#[test]
fn exit_with_a_code_ends_the_job() {
    for n in 1..=4 {
        let pids = PidDir::new("exit");
        let outcome = spmd_outcome(opts(n, &pids, &[]), || {
            let (client, team) = start("FAIL_EXIT", &mut []);
            if team.rank() == n_minus_one(team) {
                gex::exit(3);
            }
            wait_for_teardown(&team);
            client.finalize();
        });
        let Some(outcome) = outcome else { continue };
        let who = format!("rank {} of {n} failed", n - 1);
        assert_failed(&outcome, &[&who, "gex::exit(3)"]);
        assert_eq!(outcome.exit_code, 3);
        pids.assert_all_gone(n);
    }
}

fn n_minus_one(team: Team) -> u32 {
    team.size() - 1
}

/// A rank that initialized and then returns without `Client::finalize` (exiting with
/// status 0) is reported as failed ("exited before finalize", exit code 1), and the
/// others, waiting for it in `finalize`'s barrier, are torn down.
#[test]
fn returning_without_finalize_fails_the_job() {
    for n in 1..=4 {
        let pids = PidDir::new("nofinalize");
        let outcome = spmd_outcome(opts(n, &pids, &[]), || {
            let (client, team) = start("FAIL_NOFINALIZE", &mut []);
            team.barrier();
            if team.rank() != 0 {
                client.finalize();
            }
        });
        let Some(outcome) = outcome else { continue };
        assert_failed(
            &outcome,
            &[&format!("rank 0 of {n} exited before finalize")],
        );
        assert_eq!(outcome.exit_code, 1);
        pids.assert_all_gone(n);
    }
}

/// Runs `body` as a job of `n` ranks that all leave through `gex::exit` (no rank
/// returns from the body) and checks, in the test process, that the job ended with
/// status 0 and left no rank behind. The harness expects every rank to report that it
/// ran the body, so it complains about exactly that, and only because the job
/// succeeded.
///
/// Under `srun` a rank that does not leave within `job::EXIT_GRACE` (busy, or held
/// in a collective) is stopped by a leaving rank's `MPI_Abort` with status 0, and
/// Slurm counts the ranks it killed as failed: there the job may instead end with
/// that abort reported.
fn assert_job_exits_zero(n: usize, pids: &PidDir, body: impl FnOnce()) {
    let mut outcome = None;
    let r = common::try_panic_message(|| outcome = spmd_outcome(opts(n, pids, &[]), body));
    if !common::in_test_process() {
        return;
    }
    match (r, outcome) {
        (Some(msg), _) => assert!(
            msg.contains("exited successfully without running the body"),
            "{n} ranks: {msg}"
        ),
        (None, Some(o)) if under_srun() => {
            let report = o.failure.unwrap_or_default();
            assert!(
                report.contains("MPI_Abort with errorcode 0"),
                "{n} ranks: {report}"
            );
        }
        (None, _) => panic!("{n} ranks: the harness should notice that no rank reported back"),
    }
    pids.assert_all_gone(n);
}

/// Every rank leaving through `gex::exit(0)` after a barrier is a clean end: the job
/// succeeds.
#[test]
fn exit_zero_is_a_clean_end() {
    let pids = PidDir::new("exit0");
    assert_job_exits_zero(3, &pids, || {
        let (_client, team) = start("FAIL_EXIT0", &mut []);
        team.barrier();
        gex::exit(0);
    });
}

/// `gex::exit(0)` after `Client::finalize` just ends the process: the communication
/// layer is gone (under mpirun: MPI finalized, the host's queues freed), and the job
/// succeeds.
#[test]
fn exit_zero_after_finalize_is_a_clean_end() {
    let pids = PidDir::new("exit0fin");
    assert_job_exits_zero(3, &pids, || {
        let (client, team) = start("FAIL_EXIT0_FIN", &mut []);
        team.barrier();
        client.finalize();
        gex::exit(0);
    });
}

/// `gex::exit(0)` in one rank (`gasnet_exit`, which any rank may call) ends the whole
/// job with status 0: the other ranks, waiting for it in barriers, leave at once
/// instead of waiting for it forever.
#[test]
fn exit_zero_in_one_rank_ends_the_job() {
    for n in 1..=4 {
        let pids = PidDir::new("exit0one");
        assert_job_exits_zero(n, &pids, || {
            let (client, team) = start("FAIL_EXIT0_ONE", &mut []);
            if team.rank() == n_minus_one(team) {
                team.barrier();
                gex::exit(0);
            }
            wait_for_teardown(&team);
            client.finalize();
        });
    }
}

/// Two threads of one rank calling `gex::exit(0)` at once (as when one calls it and a
/// wait of the other notices the end): the first ends the job, the second waits for it
/// to, rather than leaving first (under mpirun, as a rank exiting unfinalized, which
/// failed the job); the job ends with status 0.
#[test]
fn exit_zero_from_two_threads_at_once_is_a_clean_end() {
    for n in 1..=3 {
        let pids = PidDir::new("exit0threads");
        assert_job_exits_zero(n, &pids, || {
            let (client, team) = start("FAIL_EXIT0_THREADS", &mut []);
            team.barrier();
            if team.rank() == n_minus_one(team) {
                let both = std::sync::Arc::new(std::sync::Barrier::new(2));
                let other = std::sync::Arc::clone(&both);
                std::thread::spawn(move || {
                    other.wait();
                    gex::exit(0);
                });
                both.wait();
                gex::exit(0);
            }
            wait_for_teardown(&team);
            client.finalize();
        });
    }
}

/// `gex::exit(0)` in a rank before the others have attached their segments (they
/// are in the attach's collectives, which it never joins): the job still ends with
/// status 0 and leaves no rank behind.
#[test]
fn exit_zero_before_the_others_attach_ends_the_job() {
    for n in 2..=3 {
        let pids = PidDir::new("exit0early");
        assert_job_exits_zero(n, &pids, || {
            let (client, _ep, team) = Client::init("FAIL_EXIT0_EARLY", Flags::NONE).unwrap();
            common::record_pid(team.rank());
            if team.rank() == 0 {
                gex::exit(0);
            }
            let _ = Segment::attach(&team, MB).unwrap();
            wait_for_teardown(&team);
            client.finalize();
        });
    }
}

fn exit_zero_in_handler(_token: &Token<'_>, _args: &[u32]) {
    gex::exit(0);
}

/// `gex::exit(0)` inside an AM handler (`gasnet_exit` may be called from handler
/// context): the rank whose handler runs it ends the job as from its own code, and the
/// sender, waiting in barriers, leaves too.
#[test]
fn exit_zero_in_a_handler_ends_the_job() {
    for n in 2..=3 {
        let pids = PidDir::new("exit0handler");
        assert_job_exits_zero(n, &pids, || {
            let mut table =
                [AmEntry::short("exit", AmRole::Request, 0, exit_zero_in_handler).at(210)];
            let (client, team) = start("FAIL_EXIT0_HANDLER", &mut table);
            team.barrier();
            if team.rank() == 0 {
                team.request_short(n_minus_one(team), 210, &[], Flags::NONE)
                    .unwrap();
            }
            wait_for_teardown(&team);
            client.finalize();
        });
    }
}

/// A rank still computing (never waiting for communication) when another ends the job
/// with `gex::exit(0)` is stopped after `job::EXIT_GRACE` (by the smp launcher; under
/// an MPI launcher, by the leaving rank's `MPI_Abort` with status 0); the job still
/// ends with status 0 (under `srun`, with the abort reported).
#[test]
fn a_rank_busy_after_exit_zero_is_stopped() {
    let pids = PidDir::new("exit0busy");
    assert_job_exits_zero(2, &pids, || {
        let (_client, team) = start("FAIL_EXIT0_BUSY", &mut []);
        team.barrier();
        if team.rank() == 0 {
            gex::exit(0);
        }
        loop {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
}

/// Whether this test's jobs start under Slurm's `srun` (the mpi mode of
/// `gex::testing` with `GEX_MPIRUN` naming it).
fn under_srun() -> bool {
    use gex::job::mpirun::{prefix, Launcher};
    gex::testing::test_conduit() == gex::testing::TestConduit::Mpi
        && prefix().is_ok_and(|p| p.first().is_some_and(|l| Launcher::of(l) == Launcher::Srun))
}

/// A job that runs past its time limit is stopped with exit code 124 and a report
/// naming the ranks still running; none survives.
#[test]
fn a_job_past_its_time_limit_is_stopped() {
    let pids = PidDir::new("timeout");
    let o = SpmdOptions {
        timeout: Duration::from_millis(1500),
        ..opts(2, &pids, &[])
    };
    let outcome = spmd_outcome(o, || {
        let (_client, team) = start("FAIL_TIMEOUT", &mut []);
        if team.rank() == 1 {
            loop {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        team.barrier();
    });
    let Some(outcome) = outcome else { return };
    assert_failed(&outcome, &["timed out", "still running"]);
    assert_eq!(outcome.exit_code, 124);
    pids.assert_all_gone(2);
}

/// Keeps a surviving rank busy in barriers (which poll, so it runs the messages that
/// make another rank fail) until the launcher tears the job down; returns after 10 s
/// if it never does, so the test fails on the job's outcome instead of hanging.
fn wait_for_teardown(team: &Team) {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        team.barrier();
    }
}
