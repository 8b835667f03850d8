//! The mpi conduit: real programs started by `mpirun` (feature `mpi`).
//!
//! The multi-rank tests elsewhere start their ranks themselves (`gex::testing::spmd`,
//! `upcxx-run`), which is the smp conduit's job start; here the examples, built with
//! the feature, run as `mpirun -n N` jobs on 2 to 4 ranks:
//!
//! * [`examples_run_under_mpirun`]: `gex_hello`, `gex_network` (AMs of every category,
//!   puts and gets between every pair, checked), `rpc_hello`, `dht` and `stencil`, with
//!   all ranks on one host (shared-memory segments).
//! * [`the_network_path_carries_every_transfer`]: `gex_hello` and `gex_network` (with
//!   a VIS put's peer completion and SINGLE-addressed collectives) with
//!   `GEX_MPI_HOST_RANKS=1`, so every rank is its own host and every transfer between
//!   ranks goes over MPI point-to-point and RMA; the job reports one host per rank;
//!   and with hosts of two ranks, where some ranks map a source and others do not: mixed
//!   jobs, where some peers are reached through shared memory and some over MPI, and
//!   the barrier's rounds are signal words or MPI messages.
//! * [`same_host_ams_take_the_shared_memory_path`]: with `GEX_MPI_STATS=1` each rank
//!   reports which path carried the AMs it handled: none over MPI when all ranks share
//!   a host, and both paths in capped jobs; and within a host the barrier's rounds are
//!   signal words, not messages.
//! * [`network_streams_are_aggregated`]: between hosts, `gex_network`'s flood and its
//!   Replies travel in MPI messages of many AMs each.
//! * [`small_transfers_between_hosts_are_messages`]: between hosts a put or get of at
//!   most `GEX_MPI_AM_RMA_MAX` bytes travels as AMs to the owner (more AMs over MPI
//!   than with `GEX_MPI_AM_RMA_MAX=0`, which sends every transfer through the MPI
//!   window, both jobs checking their data); a threshold that is not a number ends
//!   the job naming the variable.
//! * [`the_threshold_between_hosts_is_measured_when_unset`]: with the variable unset
//!   and several hosts, rank 0 measures both paths of a blocking put at attach and
//!   every rank applies the threshold it chose to blocking transfers; with the variable
//!   set, or one host, nothing is measured.
//! * [`network_barrier_rounds_are_signals`]: between hosts the barrier's rounds are
//!   signals carried by the conduit's control messages, not Active Messages.
//! * [`only_host_leaders_run_barrier_rounds_between_hosts`]: with hosts of two ranks
//!   the barrier is hierarchical: only each host's lowest rank exchanges rounds with
//!   other hosts.
//! * [`upcxx_programs_run_across_hosts`]: `rpc_hello`, `dht`, `stencil`, `gups`,
//!   `histogram` and `summa` with `GEX_MPI_HOST_RANKS=1` and `=2`
//!   on 3 and 4 ranks, each checking its own result; `upcxx_hosts` checks `is_local`
//!   against the local team (the host), `rput`/`rget` and an atomic domain to every
//!   rank, and that `GlobalPtr::local` of a pointer to another host fails naming it.
//! * [`transfers_with_other_hosts_return_before_they_complete`]: `rget` and `rget_vec`
//!   from, and `rput_slice` to, a rank on another host return while that rank makes no
//!   progress.
//! * [`atomics_of_both_paths_are_atomic_together`]: `gex_atomics`, every rank updating
//!   words of every rank, with hosts of 1 and 2 ranks: ranks on the owner's host use
//!   CPU atomics on the mapping, the others messages to the owner, and the final
//!   values are exact; an atomic past a remote segment fails naming the call.
//! * [`a_missing_mpi_library_is_a_clear_error`]: MPI missing at run time: a program
//!   built with the feature, its MPI library hidden (a mount namespace binds
//!   `/dev/null` over it; root only), does not start, plainly or under `mpirun`: the
//!   dynamic loader names the library and the status is 127, at once.
//! * [`a_bad_host_cap_is_a_clear_error`]: `GEX_MPI_HOST_RANKS=0` ends the job with a
//!   message naming the variable.
//! * [`the_thread_level_is_chosen_by_gex_mpi_thread`]: by default (`serialized`) a
//!   second thread of each rank may communicate between hosts; `GEX_MPI_THREAD=single`
//!   runs a program that communicates from its first thread only, ends one that uses
//!   another with a message naming the variable, and a value that is neither is refused.
//! * [`a_host_window_that_cannot_be_allocated_ends_the_job`]: without Open MPI's
//!   shared-memory window component (`--mca osc ^sm`) the bootstrap's window of AM
//!   queues cannot be allocated: the job ends naming `MPI_Win_allocate_shared`.
//! * [`a_world_window_that_cannot_be_created_ends_the_job`]: a job whose MPI library
//!   cannot create the window between hosts ends as the segments attach, saying what
//!   to choose.
//! * [`ranks_that_disagree_on_the_segment_size_end_the_job`]: an MPMD `mpirun` line
//!   giving the ranks different `UPCXX_SEGMENT_SIZE`s stops at start-up, naming both.
//! * [`upcxx_run_starts_the_job_through_mpirun`]: `upcxx-run --conduit mpi -n 3`, and
//!   with `--profile` (the ranks' parts merged into one profile).
//! * [`the_environment_chooses_mpirun`]: `UPCXX_CONDUIT=mpi` for `upcxx-run` and for
//!   `UPCXX_RANKS=3 program`; `GEX_MPIRUN` as the launcher command, and empty.
//! * [`a_plain_start_uses_the_smp_conduit`]: the same binary started without `mpirun`
//!   (one rank, and `UPCXX_RANKS=3`) runs on the smp conduit.
//!
//! Build first: `cargo build --features mpi --examples`, then
//! `cargo test --features mpi --test mpi` (`.ci/run` does both).
#![cfg(feature = "mpi")]

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{am_paths, built, Limited};

/// How long one job may run.
const LIMIT: Duration = Duration::from_secs(120);

fn example(name: &str) -> PathBuf {
    built(&["examples", name], "cargo build --features mpi --examples")
}

/// Runs `cmd` to completion within [`LIMIT`], killing it past that.
///
/// Each run gets a session directory of its own: Open MPI's launchers that start at the
/// same moment (the tests run in parallel) race to create a shared one under `/tmp`, and
/// the loser fails with "A call to mkdir was unable to create the desired directory".
fn run(mut cmd: Command, what: &str) -> Output {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let session = std::env::temp_dir().join(format!(
        "pgas-mpi-test-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&session).expect("session directory");
    cmd.env("OMPI_MCA_orte_tmpdir_base", &session);
    /// Removes the directory however the run ends.
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _remove = Remove(session);
    run_in_session(cmd, what)
}

fn run_in_session(mut cmd: Command, what: &str) -> Output {
    // A test run under an MPI launcher must not pass its own rank to the job.
    for v in gex::job::mpirun::MPI_LAUNCHER_VARS
        .into_iter()
        .chain(["UPCXX_RANK"])
    {
        cmd.env_remove(v);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    Limited::spawn(&mut cmd, what)
        .output_within(LIMIT, &[])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `mpirun -n ranks` of an example, with `GEX_MPI_HOST_RANKS=cap` if given; returns
/// its standard output after checking that it succeeded.
fn mpirun(name: &str, ranks: u32, cap: Option<u32>) -> String {
    mpirun_args(name, &[], ranks, cap)
}

/// [`mpirun`] with arguments for the example.
fn mpirun_args(name: &str, args: &[&str], ranks: u32, cap: Option<u32>) -> String {
    let (out, what) = mpirun_output_args(name, args, ranks, cap);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The output of `mpirun -n ranks name`, and how to name the run.
fn mpirun_output(name: &str, ranks: u32, cap: Option<u32>) -> (Output, String) {
    mpirun_output_args(name, &[], ranks, cap)
}

/// [`mpirun_output`] with arguments for the example.
fn mpirun_output_args(name: &str, args: &[&str], ranks: u32, cap: Option<u32>) -> (Output, String) {
    mpirun_env(name, args, ranks, cap, &[])
}

/// [`mpirun_output_args`] with more environment variables for the ranks.
fn mpirun_env(
    name: &str,
    args: &[&str],
    ranks: u32,
    cap: Option<u32>,
    env: &[(&str, &str)],
) -> (Output, String) {
    mpirun_job(name, args, ranks, cap, env, &[])
}

/// A job of 2 ranks of example `name` (host cap `cap`) allowed only the one-sided
/// components `osc` of Open MPI (`--mca osc OSC`).
fn mpirun_osc(name: &str, osc: &str, cap: Option<u32>) -> (Output, String) {
    mpirun_job(name, &[], 2, cap, &[], &["--mca", "osc", osc])
}

/// `mpirun --oversubscribe` (as root too), without the conduit's settings the suite
/// may run under: the host cap, the thread level and the threshold of small transfers
/// between hosts are each test's own.
fn mpirun_command() -> Command {
    let mut cmd = Command::new("mpirun");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    cmd.arg("--oversubscribe");
    for k in ["GEX_MPI_HOST_RANKS", "GEX_MPI_THREAD", "GEX_MPI_AM_RMA_MAX"] {
        cmd.env_remove(k);
    }
    cmd
}

/// [`mpirun_env`] with more options for `mpirun` itself.
fn mpirun_job(
    name: &str,
    args: &[&str],
    ranks: u32,
    cap: Option<u32>,
    env: &[(&str, &str)],
    options: &[&str],
) -> (Output, String) {
    let mut cmd = mpirun_command();
    cmd.args(["-n", &ranks.to_string()]);
    cmd.args(options);
    if let Some(cap) = cap {
        cmd.args(["-x", &format!("GEX_MPI_HOST_RANKS={cap}")]);
    }
    for (k, v) in env {
        cmd.args(["-x", &format!("{k}={v}")]);
    }
    cmd.arg(example(name)).args(args);
    let what = format!("mpirun -n {ranks} {options:?} {name} {args:?} (host cap {cap:?})");
    (run(cmd, &what), what)
}

/// The `host h of H` lines of `gex_network`, one per rank.
fn hosts(stdout: &str) -> Vec<(u32, u32)> {
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.split(": host ").nth(1)?;
            let (h, total) = rest.split_once(" of ")?;
            Some((h.parse().ok()?, total.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn examples_run_under_mpirun() {
    for ranks in 2..=4 {
        let out = mpirun("gex_hello", ranks, None);
        for r in 0..ranks {
            assert!(
                out.contains(&format!("Hello from rank {r} of {ranks}")),
                "gex_hello on {ranks} ranks: rank {r} missing:\n{out}"
            );
        }
        let out = mpirun("gex_network", ranks, None);
        assert!(out.contains("verified"), "gex_network: {out}");
        assert_eq!(hosts(&out), vec![(0, 1); ranks as usize], "{out}");
        let out = mpirun("rpc_hello", ranks, None);
        for r in 0..ranks {
            let caller = (r + ranks - 1) % ranks;
            assert!(
                out.contains(&format!("Hello from rank {r}, called by rank {caller}")),
                "rpc_hello on {ranks} ranks:\n{out}"
            );
        }
        for name in ["dht", "stencil"] {
            let out = mpirun(name, ranks, None);
            assert!(out.contains("verified"), "{name} on {ranks} ranks:\n{out}");
        }
    }
}

/// A `UPCXX_RANKS` left in the environment does not turn each process `mpirun` started
/// into a job of its own: the job is mpirun's, of its ranks.
#[test]
fn a_leftover_upcxx_ranks_leaves_the_job_to_mpirun() {
    let (out, what) = mpirun_env("gex_hello", &[], 2, None, &[("UPCXX_RANKS", "3")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{what}: {}\n{stdout}", out.status);
    let hellos = stdout
        .lines()
        .filter(|l| l.contains("Hello from rank"))
        .count();
    assert_eq!(hellos, 2, "{what}:\n{stdout}");
    assert!(stdout.contains("Hello from rank 1 of 2"), "{stdout}");
}

/// A process whose launcher announced more processes than its MPI library counts (the
/// program linked with another MPI than the launcher's starts alone) fails saying so,
/// instead of running as a job of one.
#[test]
fn a_launcher_of_another_mpi_is_refused() {
    let mut cmd = Command::new(example("gex_hello"));
    cmd.env_remove("UPCXX_RANKS")
        .env_remove("UPCXX_RANK")
        .env("PMI_SIZE", "2")
        .env("PMI_RANK", "0");
    let what = "gex_hello with PMI_SIZE=2 and no launcher";
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = Limited::spawn(&mut cmd, what)
        .output_within(LIMIT, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    fails_with(
        &out,
        what,
        "the launcher started 2 processes but MPI counts 1",
    );
}

#[test]
fn the_network_path_carries_every_transfer() {
    for ranks in 2..=4 {
        let out = mpirun("gex_hello", ranks, Some(1));
        assert_eq!(
            out.matches("Hello from rank").count(),
            ranks as usize,
            "{out}"
        );
        let out = mpirun("gex_network", ranks, Some(1));
        assert!(out.contains("verified"), "gex_network: {out}");
        let mut seen = hosts(&out);
        seen.sort_unstable();
        let want: Vec<(u32, u32)> = (0..ranks).map(|h| (h, ranks)).collect();
        assert_eq!(seen, want, "one host per rank:\n{out}");
    }
    // Hosts of two ranks: 3 ranks make one host of two and one of one.
    let out = mpirun("gex_network", 3, Some(2));
    assert!(out.contains("verified"), "gex_network: {out}");
    let mut seen = hosts(&out);
    seen.sort_unstable();
    assert_eq!(seen, vec![(0, 2), (0, 2), (1, 2)], "{out}");
    // Two hosts of two.
    let out = mpirun("gex_hello", 4, Some(2));
    assert_eq!(out.matches("Hello from rank").count(), 4, "{out}");
    let out = mpirun("gex_network", 4, Some(2));
    assert!(out.contains("verified"), "gex_network: {out}");
    let mut seen = hosts(&out);
    seen.sort_unstable();
    assert_eq!(seen, vec![(0, 2), (0, 2), (1, 2), (1, 2)], "{out}");
}

/// `mpirun` of `gex_network` with `GEX_MPI_STATS=1` and `env` (and
/// `GEX_MPI_AM_RMA_MAX=3072` unless `env` names it): each rank's AMs from its host
/// queues and over MPI, and how to name the run.
fn gex_network_paths(
    ranks: u32,
    cap: Option<u32>,
    env: &[(&str, &str)],
) -> (Vec<(u32, u64, u64, u64)>, String) {
    let mut vars = vec![("GEX_MPI_STATS", "1")];
    // A threshold for small transfers given, unless `env` gives one: measured at
    // attach, it would add the measurement's messages to two ranks' counts, as many as
    // the sizes it measured, which differ from job to job, and its broadcast's to
    // every rank's.
    if !env.iter().any(|(k, _)| *k == "GEX_MPI_AM_RMA_MAX") {
        vars.push(("GEX_MPI_AM_RMA_MAX", "3072"));
    }
    vars.extend_from_slice(env);
    let (out, what) = mpirun_env("gex_network", &[], ranks, cap, &vars);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}:\n{stderr}");
    let paths = am_paths(&stderr);
    assert_eq!(
        paths.len(),
        ranks as usize,
        "{what}: a report per rank:\n{stderr}"
    );
    (paths, format!("{what}:\n{stderr}"))
}

/// Per rank, from [`common::am_paths`]: rank, AMs from the host queues, AMs over MPI,
/// MPI messages.
type Paths = Vec<(u32, u64, u64, u64)>;

/// [`gex_network_paths`] twice: with the barrier's rounds as signals (the default),
/// then forced to AMs (`GEX_COLL_BARRIER=am`); the second's extra AMs are the rounds'.
fn barrier_paths(ranks: u32, cap: Option<u32>) -> (Paths, Paths, String) {
    let (words, what) = gex_network_paths(ranks, cap, &[]);
    let (messages, _) = gex_network_paths(ranks, cap, &[("GEX_COLL_BARRIER", "am")]);
    (words, messages, what)
}

#[test]
fn same_host_ams_take_the_shared_memory_path() {
    // gex_network sends every rank, itself included, 502 Requests, each answered.
    let per_pair = 2 * 502;
    for (ranks, cap) in [(3, None), (3, Some(1)), (4, Some(2))] {
        let (paths, what) = gex_network_paths(ranks, cap, &[]);
        // Hosts of equal size: every rank of this rank's host, itself included,
        // sends through its queues.
        let peers_here = cap.unwrap_or(ranks);
        for &(rank, host, net, _) in &paths {
            assert!(
                host >= per_pair * u64::from(peers_here),
                "rank {rank} handled {host} AMs from its host queues: {what}"
            );
            if cap.is_none() {
                assert_eq!(net, 0, "rank {rank} handled AMs over MPI: {what}");
            } else {
                let elsewhere = u64::from(ranks - peers_here);
                assert!(
                    net >= per_pair * elsewhere,
                    "rank {rank} handled {net} AMs over MPI: {what}"
                );
            }
        }
    }
    // Within a host the barrier's rounds are signal words: forcing messages
    // (GEX_COLL_BARRIER=am) adds the rounds' AMs to every rank's count.
    let (words, messages, what) = barrier_paths(3, None);
    for (w, m) in words.iter().zip(&messages) {
        assert!(
            m.1 > w.1,
            "rank {}: {} AMs with signal words, {} with messages: {what}",
            w.0,
            w.1,
            m.1
        );
    }
}

/// Between hosts, a stream of AMs sent without polling between them (`gex_network`'s
/// flood of 500 Requests to every rank, and the Replies each poll's handlers send)
/// leaves in MPI messages of many AMs each.
#[test]
fn network_streams_are_aggregated() {
    for ranks in [2, 3, 5] {
        let (paths, what) = gex_network_paths(ranks, Some(1), &[]);
        for &(rank, _, net, messages) in &paths {
            assert!(
                net >= 2 * 502 * u64::from(ranks - 1) && messages * 4 < net,
                "rank {rank} handled {net} AMs over MPI in {messages} messages: {what}"
            );
        }
    }
}

/// Between hosts a put or get of at most `GEX_MPI_AM_RMA_MAX` bytes travels as Active
/// Messages to the owner, larger ones through the MPI window: `gex_network`'s small put
/// and get to the next rank (and their answers) add AMs over MPI at every rank with
/// the threshold at 3072, which the same job with the threshold at 0 (every transfer
/// through the window) does not count; both jobs check the bytes moved.
#[test]
fn small_transfers_between_hosts_are_messages() {
    for ranks in [2, 3] {
        let (messages, what) = gex_network_paths(ranks, Some(1), &[]);
        let (window, _) = gex_network_paths(ranks, Some(1), &[("GEX_MPI_AM_RMA_MAX", "0")]);
        for (m, w) in messages.iter().zip(&window) {
            // Its own put and get answered, and the previous rank's put and get.
            assert!(
                m.2 >= w.2 + 4,
                "rank {}: {} AMs over MPI by default, {} with every transfer through the \
                 window: {what}",
                m.0,
                m.2,
                w.2
            );
        }
    }
    let (out, what) = mpirun_env(
        "gex_hello",
        &[],
        2,
        Some(1),
        &[("GEX_MPI_AM_RMA_MAX", "3k")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what} succeeded");
    assert!(
        stderr.contains("GEX_MPI_AM_RMA_MAX=3k is not a number of bytes"),
        "{what}:\n{stderr}"
    );
}

/// With `GEX_MPI_AM_RMA_MAX` unset and several hosts, rank 0 measures small blocking
/// puts to another host both ways when the segments are attached (`gex/rma/probe.rs`)
/// and every rank applies the threshold it chose to blocking transfers: under
/// `GEX_MPI_STATS` each rank reports the same one, rank 0 with its figures, from which
/// the threshold follows (the largest size before the first at which the window was at
/// least 10% faster; as configured, 3072, if the measurement ran out of time);
/// `gex_network` checks the bytes its puts and gets moved. With the variable set, or
/// every rank on one host, nothing is measured, also when the variable is set for
/// rank 0 alone (every rank must join the measurement's broadcast, so a rank that
/// measured alone would hang the job).
#[test]
fn the_threshold_between_hosts_is_measured_when_unset() {
    let stats = ("GEX_MPI_STATS", "1");
    for ranks in [2, 3] {
        let (out, what) = mpirun_env("gex_network", &[], ranks, Some(1), &[stats]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}:\n{stderr}");
        let mut told: Vec<(u32, usize, &str)> = stderr
            .lines()
            .filter_map(|l| {
                let rest = l.split("gex: rank ").nth(1)?;
                let (rank, rest) =
                    rest.split_once(": GEX_MPI_AM_RMA_MAX of blocking transfers measured: ")?;
                let (max, seen) = rest.split_once(' ').unwrap_or((rest, ""));
                Some((rank.parse().ok()?, max.parse().ok()?, seen))
            })
            .collect();
        told.sort_unstable();
        let ranks_told: Vec<u32> = told.iter().map(|t| t.0).collect();
        assert_eq!(
            ranks_told,
            (0..ranks).collect::<Vec<_>>(),
            "{what}:\n{stderr}"
        );
        let max = told[0].1;
        assert!(
            [0, 8, 256, 1024, 3072].contains(&max),
            "{what}: threshold {max}:\n{stderr}"
        );
        assert!(
            told.iter().all(|t| t.1 == max),
            "{what}: the ranks apply different thresholds:\n{stderr}"
        );
        assert!(
            told[1..].iter().all(|t| t.2.is_empty()),
            "{what}: rank 0 alone says what it measured:\n{stderr}"
        );
        let seen = told[0].2;
        assert_eq!(
            max,
            threshold_from(seen).unwrap_or_else(|| panic!("{what}: figures {seen}")),
            "{what}: the threshold does not follow from the figures:\n{stderr}"
        );
    }
    let set = [stats, ("GEX_MPI_AM_RMA_MAX", "64")];
    for (cap, env) in [(Some(1), &set[..]), (None, &[stats][..])] {
        let (out, what) = mpirun_env("gex_network", &[], 2, cap, env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}:\n{stderr}");
        assert!(!stderr.contains("measured"), "{what}:\n{stderr}");
    }
    // Two application contexts: rank 0 with the variable, rank 1 without.
    let exe = example("gex_network");
    let mut cmd = mpirun_command();
    let both = ["-x", "GEX_MPI_HOST_RANKS=1", "-x", "GEX_MPI_STATS=1"];
    cmd.args(["-n", "1", "-x", "GEX_MPI_AM_RMA_MAX=64"])
        .args(both)
        .arg(&exe)
        .args([":", "-n", "1"])
        .args(both)
        .arg(&exe);
    let what = "mpirun of gex_network, GEX_MPI_AM_RMA_MAX=64 for rank 0 only";
    let out = run(cmd, what);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}:\n{stderr}");
    assert!(!stderr.contains("measured"), "{what}:\n{stderr}");
}

/// The threshold that the figures rank 0 reports call for (`gex/rma/probe.rs`), from
/// `(8 B: M ns by messages, W ns by RMA, 256 B: ...)`, 3072 (as configured) if they end
/// with the measurement out of time; `None` if they do not read so.
fn threshold_from(seen: &str) -> Option<usize> {
    let inner = seen.strip_prefix('(')?.strip_suffix(')')?;
    if inner.contains("over ") {
        return Some(3072);
    }
    let mut chosen = 0;
    for figure in inner.split(" ns by RMA").filter(|f| !f.is_empty()) {
        let figure = figure.trim_start_matches(", ");
        let (size, rest) = figure.split_once(" B: ")?;
        let (messages, window) = rest.split_once(" ns by messages, ")?;
        let (messages, window): (u128, u128) = (messages.parse().ok()?, window.parse().ok()?);
        if window * 100 <= messages * 90 {
            return Some(chosen);
        }
        chosen = size.parse().ok()?;
    }
    Some(chosen)
}

/// Between hosts the barrier's rounds are signals that the mpi conduit carries in
/// control messages, not Active Messages: forcing messages (`GEX_COLL_BARRIER=am`)
/// adds the rounds' AMs to every rank's count over MPI.
#[test]
fn network_barrier_rounds_are_signals() {
    for ranks in [2, 3] {
        let (words, messages, what) = barrier_paths(ranks, Some(1));
        for (w, m) in words.iter().zip(&messages) {
            assert!(
                m.2 > w.2,
                "rank {}: {} AMs over MPI with signals, {} with messages: {what}",
                w.0,
                w.2,
                m.2
            );
        }
    }
}

/// Across hosts of several ranks the barrier is hierarchical: only each host's leader
/// (its lowest rank) runs rounds with other hosts; the other ranks synchronize with
/// their leader through the host's shared memory. Forcing messages
/// (`GEX_COLL_BARRIER=am`) therefore adds AMs over MPI at the leaders only.
#[test]
fn only_host_leaders_run_barrier_rounds_between_hosts() {
    for ranks in [4, 5] {
        let (words, messages, what) = barrier_paths(ranks, Some(2));
        for (w, m) in words.iter().zip(&messages) {
            let leader = w.0.is_multiple_of(2);
            let (rank, net_words, net_messages) = (w.0, w.2, m.2);
            if leader {
                assert!(
                    net_messages > net_words,
                    "rank {rank} leads its host: {net_words} AMs over MPI with signals, \
                     {net_messages} with messages: {what}"
                );
            } else {
                assert_eq!(
                    net_messages, net_words,
                    "rank {rank} does not lead its host, yet its barriers crossed hosts: \
                     {what}"
                );
            }
        }
    }
}

/// The hosts a cap makes of `ranks` ranks: consecutive runs of at most `cap`.
fn local_teams(ranks: u32, cap: u32) -> Vec<Vec<u32>> {
    (0..ranks)
        .map(|r| {
            let first = r / cap * cap;
            (first..(first + cap).min(ranks)).collect()
        })
        .collect()
}

/// Checks that a failed run's standard error names what it must.
#[track_caller]
fn fails_with(out: &Output, what: &str, message: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what} succeeded");
    assert!(stderr.contains(message), "{what}:\n{stderr}");
}

#[test]
fn upcxx_programs_run_across_hosts() {
    for cap in [1, 2] {
        for ranks in [3, 4] {
            let out = mpirun("rpc_hello", ranks, Some(cap));
            for r in 0..ranks {
                let caller = (r + ranks - 1) % ranks;
                assert!(
                    out.contains(&format!("Hello from rank {r}, called by rank {caller}")),
                    "rpc_hello on {ranks} ranks, cap {cap}:\n{out}"
                );
            }
            for (name, args) in [
                ("dht", &[][..]),
                ("stencil", &[]),
                ("gups", &["8"]),
                ("histogram", &["20000"]),
            ] {
                let out = mpirun_args(name, args, ranks, Some(cap));
                assert!(
                    out.trim_end().ends_with("verified"),
                    "{name} on {ranks} ranks, cap {cap}:\n{out}"
                );
            }
            // A 1x3 or 2x2 grid; 64 samples of each rank's block.
            let out = mpirun("summa", ranks, Some(cap));
            assert!(
                out.contains(&format!("0 of {} sampled entries wrong", 64 * ranks))
                    && out.trim_end().ends_with("verified"),
                "summa on {ranks} ranks, cap {cap}:\n{out}"
            );
            let out = mpirun("upcxx_hosts", ranks, Some(cap));
            assert!(out.contains("verified"), "upcxx_hosts, cap {cap}:\n{out}");
            for (r, team) in local_teams(ranks, cap).iter().enumerate() {
                let line = format!("rank {r} of {ranks}: local team {team:?}");
                assert!(out.contains(&line), "{line} missing:\n{out}");
            }
        }
    }
    let (out, what) = mpirun_output_args("upcxx_hosts", &["local-elsewhere"], 4, Some(2));
    fails_with(
        &out,
        &what,
        "upcxx::GlobalPtr::local: rank 2 is on another host (not in local_team())",
    );
}

/// UPC++ spec §8.2.1-2, ch. 15 and §16.1.3: `rget`, `rget_vec`, `rget_into_vec`,
/// `rget_into_raw` and `rget_irregular_lent` from, `rput_slice`, `rput_vec`, `rput_raw`
/// and `rput_irregular_lent` to, and `copy` both ways with, a rank on another host
/// return before they complete; they complete in progress (`upcxx_hosts rma-overlap`,
/// whose far rank leaves the library before rank 0 starts its transfers and stays out
/// until they have returned). Small gets travel as messages, large gets, the puts (8
/// KiB, and 128 KiB for the puts from lent memory, more than the conduit copies for a
/// put that must read its source before it returns) and the copies through the MPI
/// window: also with the window served by Open MPI's `osc pt2pt` (as between hosts
/// joined by TCP), where the target serves a get or a flush only when it enters MPI,
/// so a transfer that waited inside the call (`MPI_Get` or `MPI_Put`, then
/// `MPI_Win_flush`) would wait for ever.
#[test]
fn transfers_with_other_hosts_return_before_they_complete() {
    for (ranks, cap, osc) in [
        (2, 1, "sm,pt2pt"),
        (3, 1, ""),
        (4, 2, ""),
        (4, 2, "sm,pt2pt"),
    ] {
        let file = std::env::temp_dir().join(format!(
            "pgas-rma-overlap-{}-{ranks}-{cap}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&file);
        let _ = std::fs::remove_file(file.with_extension("ready"));
        let path = file.to_str().unwrap();
        let env: &[(&str, &str)] = if osc.is_empty() {
            &[]
        } else {
            &[("OMPI_MCA_osc", osc)]
        };
        let (out, what) = mpirun_env("upcxx_hosts", &["rma-overlap", path], ranks, Some(cap), env);
        let _ = std::fs::remove_file(&file);
        let _ = std::fs::remove_file(file.with_extension("ready"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && stdout.contains("rank 0's gets from and put to rank")
                && stdout.contains("verified"),
            "{what} (osc {osc:?}): {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn atomics_of_both_paths_are_atomic_together() {
    for (ranks, cap) in [(4, 2), (3, 2), (3, 1), (4, 1)] {
        let out = mpirun("gex_atomics", ranks, Some(cap));
        assert!(
            out.contains(&format!(
                "{ranks} ranks: atomics of both paths on shared words"
            )) && out.trim_end().ends_with("verified"),
            "gex_atomics on {ranks} ranks, cap {cap}:\n{out}"
        );
        let mut seen = hosts(&out);
        seen.sort_unstable();
        let hosts_n = ranks.div_ceil(cap);
        let want: Vec<(u32, u32)> = (0..ranks).map(|r| (r / cap, hosts_n)).collect();
        assert_eq!(seen, want, "{out}");
    }
    // Rank 1 aims past the segment of rank 2, on the other host: refused before sending.
    let (out, what) = mpirun_output_args("gex_atomics", &["outside"], 4, Some(2));
    fails_with(&out, &what, "gex::AtomicDomain::op_blocking: [");
    fails_with(&out, &what, "+8) is outside the segment of rank 2");
}

/// The MPI library a program built with the feature loads, from `ldd`.
fn mpi_library(program: &std::path::Path) -> Option<PathBuf> {
    let out = Command::new("ldd").arg(program).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let (name, rest) = l.trim().split_once(" => ")?;
        name.starts_with("libmpi.so")
            .then(|| std::fs::canonicalize(rest.split_whitespace().next()?).ok())?
    })
}

#[test]
fn a_missing_mpi_library_is_a_clear_error() {
    // The library is hidden in a mount namespace of the job alone, which needs root
    // (CAP_SYS_ADMIN).
    let can_unshare = Command::new("unshare")
        .args(["-m", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !can_unshare {
        eprintln!("skipped: a_missing_mpi_library_is_a_clear_error: cannot make a mount namespace");
        return;
    }
    let program = example("gex_hello");
    let lib = mpi_library(&program).expect("gex_hello links an MPI library");
    for launch in [&[][..], &["mpirun", "--allow-run-as-root", "-n", "2"][..]] {
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-m",
            "sh",
            "-c",
            "mount --bind /dev/null \"$0\" && exec \"$@\"",
        ])
        .arg(&lib)
        .args(launch)
        .arg(&program);
        let what = format!("{launch:?} gex_hello without {}", lib.display());
        let out = run(cmd, &what);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(127), "{what}:\n{err}");
        assert!(
            err.contains("error while loading shared libraries") && err.contains("libmpi.so"),
            "{what}:\n{err}"
        );
    }
}

#[test]
fn a_bad_host_cap_is_a_clear_error() {
    for cap in [0, 5000] {
        let (out, what) = mpirun_output("gex_hello", 2, Some(cap));
        let stderr = String::from_utf8_lossy(&out.stderr);
        if cap == 0 {
            assert!(!out.status.success(), "{what} succeeded");
            assert!(
                stderr.contains("GEX_MPI_HOST_RANKS=0 is not a positive number of ranks"),
                "{what}:\n{stderr}"
            );
        } else {
            // A cap above the host's size changes nothing.
            assert!(out.status.success(), "{what}:\n{stderr}");
        }
    }
}

#[test]
fn the_thread_level_is_chosen_by_gex_mpi_thread() {
    const VERIFIED: &str = "3 ranks: AMs, puts and gets between every pair verified";
    let run = |level: Option<&str>, args: &[&str]| {
        let env: Vec<(&str, &str)> = level.map(|l| ("GEX_MPI_THREAD", l)).into_iter().collect();
        mpirun_env("gex_network", args, 3, Some(1), &env)
    };
    for (level, args) in [
        (None, &["--on-thread"][..]),
        (Some("serialized"), &["--on-thread"][..]),
        (Some("single"), &[][..]),
    ] {
        let (out, what) = run(level, args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(VERIFIED),
            "{what} with GEX_MPI_THREAD={level:?}: {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (out, what) = run(Some("single"), &["--on-thread"]);
    fails_with(
        &out,
        &what,
        "GEX_MPI_THREAD=single (MPI_THREAD_SINGLE) allows communication from the thread \
         that initialized gex only, and another thread communicated",
    );
    let (out, what) = run(Some("multiple"), &[]);
    fails_with(
        &out,
        &what,
        "GEX_MPI_THREAD=multiple is neither single nor serialized",
    );
}

#[test]
fn a_host_window_that_cannot_be_allocated_ends_the_job() {
    let (out, what) = mpirun_osc("gex_hello", "^sm", None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: the job ran:\n{stderr}");
    assert!(
        stderr.contains("MPI_Win_allocate_shared failed (MPI error")
            && stderr.contains("cannot allocate the AM queues shared within the host"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("Hello"),
        "a rank started its program"
    );
}

/// Between hosts RMA goes through a window over the segments; a job whose MPI library
/// has no one-sided component that takes it (here only `osc sm`, which serves windows
/// MPI allocates, not ours) ends when the segments attach, with a message that says
/// what to choose.
#[test]
fn a_world_window_that_cannot_be_created_ends_the_job() {
    let (out, what) = mpirun_osc("gex_network", "sm", Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: the job ran:\n{stderr}");
    assert!(
        stderr.contains("MPI_Win_create failed (MPI error")
            && stderr.contains("no one-sided component of the MPI library took it")
            && stderr.contains("OMPI_MCA_osc="),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("verified"),
        "the transfers ran"
    );
}

#[test]
fn ranks_that_disagree_on_the_segment_size_end_the_job() {
    let mut cmd = mpirun_command();
    let exe = example("gex_hello");
    cmd.args(["-n", "2", "-x", "UPCXX_SEGMENT_SIZE=64M"])
        .arg(&exe)
        .args([":", "-n", "1", "-x", "UPCXX_SEGMENT_SIZE=32M"])
        .arg(&exe);
    let out = run(cmd, "mpirun with two segment sizes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job ran:\n{stderr}");
    assert!(
        stderr.contains(
            "the ranks disagree on the segment size (UPCXX_SEGMENT_SIZE): rank 0 \
             has 67108864 bytes, rank 2 has 33554432"
        ),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("Hello"),
        "a rank started its program"
    );
}

#[test]
fn upcxx_run_starts_the_job_through_mpirun() {
    let launcher = built(&["upcxx-run"], "cargo build -p upcxx-run");
    let launch = |args: &[&str]| {
        let mut cmd = Command::new(&launcher);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // What mpirun's --allow-run-as-root says, for the mpirun it starts.
            cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
        cmd.env("GEX_MPI_HOST_RANKS", "1")
            .args(args)
            .arg(example("gex_network"));
        run(cmd, &format!("upcxx-run {args:?} gex_network"))
    };
    let out = launch(&["--conduit", "mpi", "-n", "3", "--timeout", "100"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("3 ranks: AMs, puts and gets"), "{stdout}");
    // Only the mpi conduit reads the host cap: three hosts show it is the one running.
    let mut seen = hosts(&stdout);
    seen.sort_unstable();
    assert_eq!(seen, vec![(0, 3), (1, 3), (2, 3)], "{stdout}");
    // The GASP profiler: the ranks' parts merged into one file, as with smp.
    let file = std::env::temp_dir().join(format!("mpi-profile-{}.json", std::process::id()));
    let profile = format!("--profile={}", file.display());
    let out = launch(&["--conduit", "mpi", "-n", "2", &profile]);
    let text = std::fs::read_to_string(&file);
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let profile: serde_json::Value = serde_json::from_str(&text.expect("profile written")).unwrap();
    assert_eq!(profile["ranks"], 2, "{profile}");
}

/// `UPCXX_CONDUIT=mpi` is `--conduit mpi`, for `upcxx-run` and for `UPCXX_RANKS=N
/// program`; `GEX_MPIRUN` replaces the launcher command.
#[test]
fn the_environment_chooses_mpirun() {
    let launcher = built(&["upcxx-run"], "cargo build -p upcxx-run");
    let hosts_of = |mut cmd: Command, what: &str| {
        cmd.env("UPCXX_CONDUIT", "mpi")
            .env("GEX_MPI_HOST_RANKS", "1");
        let out = run(cmd, what);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{what}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Only the mpi conduit reads the host cap.
        let mut seen = hosts(&stdout);
        seen.sort_unstable();
        assert_eq!(seen, vec![(0, 3), (1, 3), (2, 3)], "{what}: {stdout}");
        stdout
    };
    let mut cmd = Command::new(&launcher);
    cmd.args(["-n", "3"]).arg(example("gex_network"));
    hosts_of(cmd, "UPCXX_CONDUIT=mpi upcxx-run -n 3");
    let mut cmd = Command::new(example("gex_network"));
    cmd.env("UPCXX_RANKS", "3");
    hosts_of(cmd, "UPCXX_CONDUIT=mpi UPCXX_RANKS=3 gex_network");
    // A prefix of our own: mpirun tags every line with its rank.
    let mut prefix = "mpirun --oversubscribe --tag-output".to_owned();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        prefix.push_str(" --allow-run-as-root");
    }
    let mut cmd = Command::new(&launcher);
    cmd.env("GEX_MPIRUN", &prefix)
        .args(["-n", "3"])
        .arg(example("gex_network"));
    let out = hosts_of(cmd, "GEX_MPIRUN=... upcxx-run -n 3");
    assert!(
        out.lines()
            .all(|l| l.starts_with('[') && l.contains("]<stdout>:")),
        "{out}"
    );
    let mut cmd = Command::new(&launcher);
    cmd.env("UPCXX_CONDUIT", "mpi")
        .env("GEX_MPIRUN", " ")
        .args(["-n", "3"])
        .arg(example("gex_network"));
    let out = run(cmd, "GEX_MPIRUN=' ' upcxx-run");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("GEX_MPIRUN is set but names no command"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_plain_start_uses_the_smp_conduit() {
    // Plain: without the variables the suite may run under that choose mpirun.
    let plain = |name| {
        let mut cmd = Command::new(example(name));
        cmd.env_remove("UPCXX_CONDUIT")
            .env_remove("GEX_MPIRUN")
            .env_remove("GEX_MPI_HOST_RANKS");
        cmd
    };
    let out = run(plain("gex_hello"), "gex_hello");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Hello from rank 0 of 1"
    );
    let mut cmd = plain("gex_network");
    cmd.env("UPCXX_RANKS", "3");
    let out = run(cmd, "UPCXX_RANKS=3 gex_network");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("3 ranks: AMs, puts and gets"), "{stdout}");
    assert_eq!(hosts(&stdout), vec![(0, 1); 3], "{stdout}");
}
