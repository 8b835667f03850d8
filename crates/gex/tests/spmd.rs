//! Tests of `gex::testing::spmd`, the launcher run from inside a test: every rank runs
//! the test's body, a failing rank fails the test (or is reported, with
//! `expect_failure` and `spmd_outcome`), and the job's timeout stops it.
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{sleep_forever, TempDir};
use gex::job::InheritedRegion;
use gex::testing::{self, SpmdOptions};

fn env_rank() -> (usize, usize) {
    let rank = std::env::var("UPCXX_RANK")
        .expect("UPCXX_RANK")
        .parse()
        .expect("rank");
    let ranks = std::env::var("UPCXX_RANKS")
        .expect("UPCXX_RANKS")
        .parse()
        .expect("ranks");
    (rank, ranks)
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
        let region = InheritedRegion::from_env().unwrap().unwrap();
        assert_eq!(region.rank(), rank);
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
        let report = outcome.failure.expect("report");
        assert!(
            report.starts_with("rank 1 of 3 failed: panicked at ")
                && report.ends_with(": boom from rank 1"),
            "{report}"
        );
        assert!(report.contains("spmd.rs:"), "{report}");
        assert!(start.elapsed() < Duration::from_secs(5));
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
        assert_eq!(message, "spmd job failed: rank 0 of 2 exited with code 7");
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
            outcome.failure.as_deref(),
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
