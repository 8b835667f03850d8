//! Runs the example programs as real multi-rank jobs and checks what they print.
//!
//! `cargo test` builds the examples next to the test binaries
//! (`target/<profile>/examples/`), so each test runs one with `UPCXX_RANKS=N`, which
//! makes the program launch itself as an N-rank job.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::built;
use gex::testing::Placement;

fn example(name: &str) -> PathBuf {
    built(&["examples", name], "cargo test --workspace")
}

/// Runs `name` on `ranks` ranks and returns its standard output; fails on a non-zero exit.
fn run(name: &str, ranks: usize) -> String {
    run_with(name, ranks, &[])
}

/// [`run`] with command-line arguments.
fn run_with(name: &str, ranks: usize, args: &[&str]) -> String {
    run_env(name, ranks, args, &[])
}

/// [`run_with`] with environment variables.
fn run_env(name: &str, ranks: usize, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(example(name))
        .args(args)
        .envs(env.iter().copied())
        .env("UPCXX_RANKS", ranks.to_string())
        .env_remove("UPCXX_RANK")
        .output()
        .expect("example starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} on {ranks} ranks exited with {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The last line of a job's output: the program's last word, printed by rank 0 after
/// the others finished. Under `mpirun` (`UPCXX_CONDUIT=mpi`) each rank's output is
/// forwarded on its own, so lines of different ranks may come in any order; there the
/// line `verified` counts as last wherever it comes.
fn last_line(out: &str) -> Option<&str> {
    let under_mpirun = std::env::var("UPCXX_CONDUIT").as_deref() == Ok("mpi");
    match out.lines().find(|l| *l == "verified") {
        Some(v) if under_mpirun => Some(v),
        _ => out.lines().last(),
    }
}

/// Where the ranks of a job [`run`] starts are (`UPCXX_CONDUIT=mpi` starts it through
/// `mpirun`, with the placement of `gex::testing::mpi_placement`).
fn placement() -> Placement {
    if std::env::var("UPCXX_CONDUIT").as_deref() == Ok("mpi") {
        gex::testing::mpi_placement()
    } else {
        Placement::OneHost
    }
}

fn assert_one_hello_per_rank(name: &str) {
    for n in 1..=4 {
        let out = run(name, n);
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        let want: Vec<String> = (0..n)
            .map(|r| format!("Hello from rank {r} of {n}"))
            .collect();
        assert_eq!(lines, want, "{name} with {n} ranks");
    }
}

#[test]
fn hello_prints_one_line_per_rank() {
    assert_one_hello_per_rank("hello");
}

#[test]
fn gex_hello_prints_one_line_per_rank() {
    assert_one_hello_per_rank("gex_hello");
}

#[test]
fn gex_network_checks_every_transfer_between_every_pair() {
    // And 17 ranks: the regions that grow with the job (a Long payload and an exchange
    // block per rank) do not run into each other or into the fixed ones.
    for n in (1..=5).chain([17]) {
        let out = run("gex_network", n);
        assert!(
            out.contains(&format!(
                "{n} ranks: AMs, puts and gets between every pair verified"
            )),
            "gex_network with {n} ranks:\n{out}"
        );
        // Each rank's host where the placement is known; else every rank counts the
        // same hosts, and the ranks of each are numbered from its lowest rank.
        let hosts: Vec<(usize, usize)> = (0..n)
            .map(|r| {
                let prefix = format!("rank {r} of {n}: host ");
                let line = out.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
                let (h, t) = line
                    .and_then(|l| l.split_once(" of "))
                    .unwrap_or_else(|| panic!("no host line of rank {r}:\n{out}"));
                (h.parse().unwrap(), t.parse().unwrap())
            })
            .collect();
        match placement() {
            Placement::Unknown => {
                let count = hosts[0].1;
                assert!(hosts.iter().all(|&(h, t)| t == count && h < t), "{out}");
                let firsts: Vec<usize> = (0..count)
                    .map(|h| hosts.iter().position(|&(x, _)| x == h).expect("every host"))
                    .collect();
                let mut sorted = firsts.clone();
                sorted.sort();
                assert_eq!(
                    firsts, sorted,
                    "hosts numbered by their lowest rank:\n{out}"
                );
            }
            known => {
                let want: Vec<_> = (0..n).map(|r| known.host_of(r, n).unwrap()).collect();
                assert_eq!(hosts, want, "{out}");
            }
        }
    }
}

#[test]
fn gex_atomics_totals_are_exact_on_both_paths() {
    for n in 1..=4 {
        for path in ["auto", "am"] {
            let out = run_env("gex_atomics", n, &[], &[("GEX_AD_PATH", path)]);
            assert!(
                out.contains(&format!("{n} ranks: atomics of both paths on shared words"))
                    && last_line(&out) == Some("verified"),
                "gex_atomics with {n} ranks, GEX_AD_PATH={path}:\n{out}"
            );
        }
    }
}

/// Every rank's local team is the ranks of its host: all of them on one host, the
/// blocks of the host cap (`GEX_MPI_HOST_RANKS`); where the placement is not known,
/// every rank is in its own local team and those of its members are the same.
#[test]
fn upcxx_hosts_finds_the_local_team_of_every_rank() {
    for n in 1..=4 {
        let out = run("upcxx_hosts", n);
        assert!(last_line(&out) == Some("verified"), "{out}");
        let teams: Vec<Vec<usize>> = (0..n)
            .map(|r| {
                let prefix = format!("rank {r} of {n}: local team ");
                let line = out.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
                let line = line.unwrap_or_else(|| panic!("no local team of rank {r}:\n{out}"));
                serde_json::from_str(line).expect("a list of ranks")
            })
            .collect();
        for (r, team) in teams.iter().enumerate() {
            assert!(team.contains(&r), "rank {r}'s local team {team:?}");
            assert!(team.iter().all(|&q| teams[q] == *team), "{out}");
            if let Some((host, _)) = placement().host_of(r, n) {
                let want: Vec<usize> = (0..n)
                    .filter(|&q| placement().host_of(q, n).unwrap().0 == host)
                    .collect();
                assert_eq!(*team, want, "rank {r}'s local team:\n{out}");
            }
        }
    }
}

#[test]
fn rpc_hello_runs_on_every_rank_count() {
    for n in 1..=4 {
        let out = run("rpc_hello", n);
        assert!(
            out.lines().count() >= n,
            "rpc_hello on {n} ranks printed:\n{out}"
        );
    }
}

/// The distributed hash table verifies every key it inserted and says so last.
#[test]
fn dht_verifies_its_keys() {
    for n in [1, 2, 3, 4] {
        let out = run("dht", n);
        assert_eq!(
            last_line(&out),
            Some("verified"),
            "dht on {n} ranks:\n{out}"
        );
    }
}

/// The histogram counts every sample exactly once and says so last.
#[test]
fn histogram_counts_every_sample() {
    for n in [1, 2, 3, 4] {
        let out = run("histogram", n);
        assert_eq!(
            last_line(&out),
            Some("verified"),
            "histogram on {n} ranks:\n{out}"
        );
    }
}

/// The Jacobi stencil matches a single-rank computation and says so last.
#[test]
fn stencil_matches_the_serial_result() {
    for n in [1, 2, 3, 4] {
        let out = run("stencil", n);
        assert_eq!(
            last_line(&out),
            Some("verified"),
            "stencil on {n} ranks:\n{out}"
        );
    }
}

/// The stencil with its rod in device memory (UPC++ ch. 16): on emulated devices it
/// runs everywhere and matches the serial result; plainly, it says why it skips
/// without a CUDA device (and runs on the GPUs where there are some).
#[test]
fn gpu_stencil_matches_the_serial_result_or_says_it_skipped() {
    for n in [1, 2, 3, 4] {
        let out = run_env(
            "gpu_stencil",
            n,
            &["40"],
            &[("GPU_STENCIL_DEVICE", "emulated")],
        );
        assert_eq!(
            last_line(&out),
            Some("verified"),
            "gpu_stencil on {n} ranks:\n{out}"
        );
        assert!(out.contains("on emulated devices"), "{out}");
    }
    let out = run_with("gpu_stencil", 2, &["40"]);
    if upcxx::CudaDevice::device_count() == 0 {
        assert_eq!(last_line(&out), Some("skipped"), "{out}");
        assert!(out.contains("no CUDA device"), "{out}");
    } else {
        assert_eq!(last_line(&out), Some("verified"), "{out}");
    }
}

/// SUMMA on grids of every shape: 1x1, 1x2, 1x3 (a prime), 2x2 and 2x3 (rectangular,
/// with more steps than grid columns), matches the serial product and says so last.
#[test]
fn summa_matches_the_serial_product() {
    for (ranks, grid, shapes) in [
        (1, "1x1", "C (96x96) = A (96x96) * B (96x96)"),
        (2, "1x2", "C (48x96) = A (48x96) * B (96x96)"),
        (3, "1x3", "C (32x96) = A (32x96) * B (96x96)"),
        (4, "2x2", "C (96x96) = A (96x96) * B (96x96)"),
        (6, "2x3", "C (64x96) = A (64x192) * B (192x96)"),
    ] {
        let out = run_with("summa", ranks, &["96"]);
        let what = format!("summa on {ranks} ranks:\n{out}");
        assert_eq!(last_line(&out), Some("verified"), "{what}");
        assert!(out.contains("GFLOP/s"), "{what}");
        assert!(out.contains(&format!("on a {grid} grid")), "{what}");
        assert!(out.contains(shapes), "{what}");
    }
}

/// GUPS applies every update with remote atomics and with RPC batches, finds every word
/// of both tables back at its start after the second pass, prints both rates and says
/// `verified` last.
#[test]
fn gups_verifies_both_variants() {
    for n in [2, 3] {
        let out = run_with("gups", n, &["10"]);
        assert_eq!(
            last_line(&out),
            Some("verified"),
            "gups on {n} ranks:\n{out}"
        );
        for variant in ["atomics", "rpc"] {
            assert!(
                out.lines().any(|l| l.trim_start().starts_with(variant)
                    && l.contains("GUP/s")
                    && l.contains(" 0 errors")),
                "gups on {n} ranks printed no {variant} rate:\n{out}"
            );
        }
    }
}

/// The soak workload, briefly: every value checked, memory flat (the example fails
/// otherwise), on 1, 3 and 5 ranks.
#[test]
fn soak_checks_everything_and_keeps_memory_flat() {
    for n in [1, 3, 5] {
        let out = run_with("soak", n, &["1"]);
        assert_eq!(
            last_line(&out),
            Some("verified"),
            "soak on {n} ranks:\n{out}"
        );
        assert!(
            out.contains("segments returned to their start usage: true"),
            "soak on {n} ranks:\n{out}"
        );
    }
}

/// A program built without the `mpi` feature, started by an MPI launcher as one of
/// several processes, fails saying so instead of running each process alone.
#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_refuses_an_mpi_launcher() {
    // Open MPI's mpirun, a PMI launcher, and Slurm's PMIx (the step's task count).
    let launchers: [&[(&str, &str)]; 3] = [
        &[("OMPI_COMM_WORLD_SIZE", "2")],
        &[("PMI_SIZE", "2")],
        &[("PMIX_RANK", "0"), ("SLURM_STEP_NUM_TASKS", "2")],
    ];
    for vars in launchers {
        let var = vars[0].0;
        let out = Command::new(example("gex_hello"))
            .envs(vars.iter().copied())
            .env_remove("UPCXX_RANKS")
            .env_remove("UPCXX_RANK")
            .output()
            .expect("example starts");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{var}: ran anyway\n{stderr}");
        assert!(
            stderr.contains("built without the `mpi` feature"),
            "{var}: {stderr}"
        );
    }
    // One process is a job of one, as a plain start.
    let out = Command::new(example("gex_hello"))
        .env("OMPI_COMM_WORLD_SIZE", "1")
        .env_remove("UPCXX_RANKS")
        .env_remove("UPCXX_RANK")
        .output()
        .expect("example starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
