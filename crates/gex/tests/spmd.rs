//! Tests of `gex::testing::spmd`, the launcher run from inside a test: every rank runs
//! the test's body, a failing rank fails the test (or is reported, with
//! `expect_failure` and `spmd_outcome`), and the job's timeout stops it.
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{sleep_forever, TempDir};
use gex::job::InheritedRegion;
use gex::testing::{self, SpmdOptions, TestConduit};

fn env_rank() -> (usize, usize) {
    testing::launcher_rank().expect("the launcher's rank variables")
}

fn on_smp() -> bool {
    testing::test_conduit() == TestConduit::Smp
}

/// The first line of a report (under mpirun the ranks' output follows it).
fn summary(report: &str) -> &str {
    report.lines().next().unwrap_or_default()
}

#[test]
fn spmd_runs_the_body_in_every_rank() {
    // The directory is created by the test process and handed to the ranks, which run
    // this function again (so it must not create another one there).
    let out = std::env::var_os("SPMD_OUT").map(PathBuf::from);
    let dir = match &out {
        Some(_) => None,
        None => Some(TempDir::new("spmd")),
    };
    let out_path = out.unwrap_or_else(|| dir.as_ref().unwrap().path().to_owned());
    let mut opts = SpmdOptions::new(3);
    opts.segment_size = 1 << 20;
    opts.env
        .push(("SPMD_OUT".into(), out_path.to_string_lossy().into_owned()));
    let body_out = out_path.clone();
    testing::spmd_with(opts, move || {
        let (rank, ranks) = env_rank();
        assert_eq!(ranks, 3);
        // The job region is the smp launcher's; under mpirun there is none.
        let region = InheritedRegion::from_env().unwrap();
        assert_eq!(region.map(|r| r.rank()), on_smp().then_some(rank));
        std::fs::write(body_out.join(format!("rank{rank}")), b"").unwrap();
    });
    if dir.is_some() {
        for r in 0..3 {
            assert!(
                out_path.join(format!("rank{r}")).exists(),
                "rank {r} did not run"
            );
        }
    }
}

#[test]
fn spmd_reports_a_panicking_rank() {
    let mut opts = SpmdOptions::new(3);
    opts.segment_size = 1 << 20;
    let start = Instant::now();
    let outcome = testing::spmd_outcome(opts, || {
        let (rank, _) = env_rank();
        if rank == 1 {
            panic!("boom from rank {rank}");
        }
        sleep_forever();
    });
    if let Some(outcome) = outcome {
        assert_eq!(outcome.exit_code, 101);
        let failure = outcome.failure.expect("report");
        let report = summary(&failure);
        assert!(
            report.starts_with("rank 1 of 3 failed: panicked at ")
                && report.ends_with(": boom from rank 1"),
            "{failure}"
        );
        assert!(report.contains("spmd.rs:"), "{failure}");
        // mpirun takes longer to start and to end a job.
        let within = if on_smp() { 5 } else { 20 };
        assert!(start.elapsed() < Duration::from_secs(within));
    }
}

#[test]
fn spmd_expect_failure() {
    let mut opts = SpmdOptions::new(2);
    opts.expect_failure = true;
    testing::spmd_with(opts, || std::process::exit(7));
}

#[test]
fn spmd_fails_the_test_when_a_rank_fails() {
    // Not `#[should_panic]`: the test function also runs in the ranks, where it must
    // not panic.
    let result = std::panic::catch_unwind(|| {
        testing::spmd(2, || {
            if env_rank().0 == 0 {
                std::process::exit(7);
            }
        })
    });
    if std::env::var_os(testing::GEX_SPMD_TEST).is_none() {
        let payload = result.expect_err("spmd should have panicked");
        let message = payload.downcast_ref::<String>().expect("panic message");
        assert_eq!(
            summary(message),
            "spmd job failed: rank 0 of 2 exited with code 7",
            "{message}"
        );
    }
}

#[test]
fn spmd_timeout() {
    let mut opts = SpmdOptions::new(2);
    opts.timeout = Duration::from_millis(1500);
    let outcome = testing::spmd_outcome(opts, || sleep_forever());
    if let Some(outcome) = outcome {
        assert_eq!(outcome.exit_code, 124);
        assert_eq!(
            outcome.failure.as_deref().map(summary),
            Some("job timed out after 1.5 s (ranks still running: 0, 1)")
        );
    }
}

#[test]
fn spmd_several_calls_in_one_test() {
    testing::spmd(2, || assert_eq!(env_rank().1, 2));
    testing::spmd(3, || assert_eq!(env_rank().1, 3));
    testing::spmd(1, || assert_eq!(env_rank(), (0, 1)));
}

mod nested {
    #[test]
    fn spmd_in_a_module() {
        gex::testing::spmd(2, || {
            assert_eq!(
                std::env::var("GEX_SPMD_TEST").unwrap(),
                "nested::spmd_in_a_module"
            );
        });
    }
}
