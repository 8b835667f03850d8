//! The gex and UPC++ figures over the mpi conduit, within a host and between hosts,
//! against raw MPI and the smp conduit measured in the same run:
//! `cargo bench --features mpi --bench mpi`.
//!
//! The bench process is the driver: it runs this same executable as three kinds of
//! 2-rank job (the first two twice, see below), then prints a table and writes
//! `<target>/bench-results/mpi.json` (see `common/mod.rs`; same format as `gex.json`):
//!
//! * `smp`: gex's own launcher, the smp conduit (figures `smp.*`);
//! * `host`: `mpirun -n 2` with `GEX_MPI_HOST_RANKS=2`, both ranks on one host:
//!   shared-memory segments and AMs through the host's shared-memory queues
//!   (`mpi.host.*`, and the raw baselines `raw.mpi.host.*`);
//! * `net`: the same with `GEX_MPI_HOST_RANKS=1`, each rank its own "host", so every
//!   transfer takes the network path (MPI RMA and point-to-point) even on one machine
//!   (`mpi.net.*`, `raw.mpi.net.*`).
//!
//! The `mpirun --oversubscribe` prefix (with `--allow-run-as-root` as root) is replaced
//! by the words of `GEX_MPIRUN` when it is set, so that a multi-host set-up can pass its
//! own (the net job then spans real hosts); the bench adds `-n 2`, `--timeout`, and
//! `-x` for each variable it sets (Open MPI's options, as `upcxx-run --conduit mpi`
//! uses). Each job checks that its ranks are on the hosts it claims (one host, or two):
//! a prefix that spreads the ranks over hosts fails the host job, so run it with
//! `PGAS_BENCH_MPI_JOBS=smp,net` (below).
//!
//! The figures (`mpi/kernels.rs`) are the same code on every path: nothing is read or written
//! through a mapping of the other rank's segment, rank 1 polls while rank 0 measures,
//! and the collectives learn their operation count from an AM:
//!
//! | figure (`<path>.` + …) | what                                                     | target |
//! |------------------------|----------------------------------------------------------|--------|
//! | `am_short_roundtrip`   | request_short to rank 1, whose handler replies; rank 0 polls for the reply | net: ≤ 1.3× `send_recv_pingpong` |
//! | `rpc_roundtrip`        | `upcxx::rpc(1, \|x\| x + 1, (n,)).wait()`, rank 1 in user-level progress | net: ≤ 1.3× `send_recv_pingpong` |
//! | `am_medium_rate`       | 64-byte Medium requests streamed to rank 1 without polling, as messages per second (counted and checked by rank 1) | net: ≥ 1.0× `isend_rate` |
//! | `put_8B`               | `put_blocking` of 8 bytes into rank 1's segment          | net: ≤ 1.3× `put_flush_8B` |
//! | `get_8B`               | `get_blocking` of 8 bytes of rank 1's segment            | net: `get_flush_8B` (—) |
//! | `put_nb_8B`            | `put_nb` of 8 bytes into rank 1's segment, its event waited for | net: — |
//! | `get_nb_8B`            | `get_nb` of the 8 bytes of `get_8B`, its event waited for | net: — |
//! | `rget_8B`              | `upcxx::rget(gp).wait()` of the same 8 bytes, rank 1 in user-level progress | net: ≤ 1.2× `get_nb_8B` |
//! | `rget_8B_x64`          | the same, 64 `rget`s in flight then one `when_all`, time per get | net: ≤ 0.5× `rget_8B` (the gets overlap) |
//! | `rput_8B`              | `upcxx::rput(v, gp).wait()` of 8 bytes into rank 1's area, rank 1 in user-level progress | net: ≤ 1.2× `put_nb_8B` |
//! | `put_bw_1MiB`          | `put_blocking` of 1 MiB, as bandwidth                    | net: `put_flush_bw_1MiB` (—) |
//! | `indexed_put_1000x8B`  | `indexed_put_blocking` of 1,000 runs of 8 bytes, 16 bytes apart, into rank 1's segment | net: — |
//! | `indexed_get_1000x8B`  | `indexed_get_blocking` of the same runs                  | net: — |
//! | `fetch_add_i64`        | a blocking `GEX_OP_FADD` of an i64 domain on a word of rank 1's segment | net: `fetch_and_op_i64` (—) |
//! | `barrier`              | `Team::barrier_nb().wait()`, both ranks                  | net: ≤ 1.3× `barrier` (raw) |
//! | `broadcast_1MiB`       | `Team::broadcast_nb` of 1 MiB, the root alternating, time per broadcast | net: `bcast_1MiB` (—) |
//!
//! Between hosts `put_8B` and `get_8B` (blocking) travel as Active Messages to rank 1,
//! which copies, or through the MPI window, whichever the job measured faster when it
//! attached its segments (reported under `GEX_MPI_STATS=1`); `put_nb_8B`, `get_nb_8B`,
//! `rput_8B` and `rget_8B` (non-blocking) travel as messages (the conduit leaves
//! transfers of at most `GEX_MPI_AM_RMA_MAX` bytes to them, which gather those in
//! flight), and so do the indexed figures' runs; `put_bw_1MiB` and `broadcast_1MiB` take the MPI window. The
//! indexed figures have no raw baseline between hosts.
//!
//! `benches/originals/README.md` sets the net figures beside GASNet-EX's own mpi
//! conduit and UPC++ on it, measured on the same machine: its AM round trip misses 1.3×
//! of `send_recv_pingpong` too. Part of every AM layer's distance to that baseline is
//! MPI's own: Open MPI carries a message of at most 8 bytes (the baseline's) faster
//! than any longer one, and an AM's header alone is longer (a raw ping-pong of 12 to 48
//! bytes took 12-20 ns more per round trip than one of 8 in the fast state of this
//! machine, 80-150 ns more in its slow state).
//!
//! Within a host every `mpi.host.<figure>` is related to `smp.<figure>`: time ≤ 1.2×
//! (bandwidth and rate ≥ 1/1.2×). The raw baselines (`mpi/raw.rs`, MPI calls through rsmpi's
//! `mpi::ffi` on a communicator and an `MPI_Win_create` window of their own, made as
//! the conduit makes its window, in the same processes) are
//! `send_recv_pingpong` (`MPI_Send`/`MPI_Recv` of 8 bytes and back),
//! `anysource_pingpong` (the same made as a message layer must, not knowing who sends
//! next: receives from any source posted ahead, `MPI_Isend` + `MPI_Test`, arrivals
//! found by `MPI_Test`; related to `send_recv_pingpong` without a target, and noted
//! under the table as the floor of `am_short_roundtrip`), `isend_rate` (a
//! stream of 64-byte `MPI_Isend`s, received with pre-posted `MPI_Irecv`s: one MPI
//! message per AM is what the conduit's aggregation must beat), `put_flush_8B` and
//! `put_flush_bw_1MiB` (`MPI_Put` + `MPI_Win_flush`), `get_flush_8B` (`MPI_Get` +
//! `MPI_Win_flush`), `fetch_and_op_i64` (`MPI_Fetch_and_op` + `MPI_Win_flush`),
//! `barrier` (`MPI_Barrier`) and `bcast_1MiB` (`MPI_Bcast`, the root alternating).
//!
//! `rget_8B` and `rget_8B_x64` between hosts: a plain `rget` of a value read into a
//! buffer of its own (zeroed, allocated), armed a promise and its state, and boxed a
//! closure for progress to test: with `gex`'s handle, four allocations per get. Its
//! future now holds a reply cell (as an RPC's does) into which the get reads, and the
//! closure holds only the event and the cell: two. Every other `operation_cx::as_future`
//! whose value fits a cell (an `rput`'s, an `rget_vec`'s, an atomic's) takes one in
//! place of its promise and state. A value that progress delivers must be ready in that
//! progress, as a promise it fulfils is (`thread::arrival_epoch`): ready at the next
//! one instead, each `rget` waited for one more poll, and `rget_8B` read 1.17-1.25x
//! `get_8B` against 1.07-1.13x before. In alternating runs of the three binaries (three
//! each, the machine in its slow state but for the last): `rget_8B` 1.01-1.13x
//! `get_8B` now; `rget_8B_x64` 262-298 ns per get against 441-443 before (0.18-0.21x
//! `rget_8B`, against 0.32-0.35x). Timed in a loop of 64 in flight joined by
//! `when_all`, `rput`s took 260-313 ns each against 298-476 with promises, and
//! `rget_vec`s of one word 331-407 against 410-657.
//!
//! `put_8B` between hosts read 2.05-2.07x `put_flush_8B` (target 1.3x) on a machine
//! whose window Open MPI's `osc ucx` serves: there a flushed `MPI_Put` of 8 bytes took
//! 0.63-0.91 µs and the put by messages (then the only path below 3 KiB) 1.3-1.45 µs.
//! Since the job measures both paths of a blocking put at attach, `put_8B` there read
//! 1.02-1.14x `put_flush_8B` in five runs (1.35x in a sixth, in which the measurement
//! chose messages: with the machine slow both paths took 1.0-1.5 µs, close enough for
//! either to win a measurement), and `get_8B` 1.05-1.14x `get_flush_8B` (1.9x before).
//! `rput_8B` and `rget_8B` (non-blocking, by messages) kept their times, 1.5-1.8 µs in
//! those runs, so their ratios to the blocking figures, now through the window, read
//! 1.2-1.6x: the distance between the two paths, not a cost of upcxx. So their targets
//! now relate them to gex's non-blocking calls, `put_nb_8B` and `get_nb_8B`, which take
//! the same path as they do. In runs of a variant that sent them through the window
//! too, a single `rget` gained little (1.50 against 1.60-1.77 µs), a single `rput`
//! nothing (1.75 against 1.50-1.69 µs: an `MPI_Rput`, then a flush in a later poll),
//! and 64 `rget`s in flight lost 2x (0.80 against 0.43 µs each), so non-blocking
//! transfers stay with messages.
//!
//! The mpi jobs run with `GEX_MPI_THREAD=single`: the bench's ranks communicate from
//! one thread, and a raw MPI program started with `MPI_Init` gets `MPI_THREAD_SINGLE`.
//! The level applies to the baselines too (one process), and matters to them as to the
//! conduit: Open MPI locks around matching and sending at every higher level, and a
//! raw ping-pong takes about a fifth longer under `MPI_THREAD_SERIALIZED`.
//! `PGAS_BENCH_MPI_THREAD=serialized` runs the jobs at that level instead, to compare.
//!
//! **Where the round trips between hosts lose to their targets.** An idle poll between
//! hosts is about 850 instructions (callgrind), 110-125 ns: two `MPI_Testsome`, each
//! Open MPI's argument checks (70), its scan of the 5 requests tested (82) and one
//! progress pass (about 145), and about 240 of ours. An arrival waits on average half
//! an iteration, against a raw loop of `MPI_Test` on one request; the second
//! `Testsome` reports at once what the first one's pass delivered. `rpc_roundtrip`
//! exceeds `am_short_roundtrip` by about 320 ns on the smp conduit (the upcxx layer)
//! and 450-490 ns between hosts, where the rest is the message size: a raw Open MPI
//! ping-pong took 716-804 ns with 8-byte messages, 837-1,026 with 16-40 bytes and
//! 895-1,058 with 48-128 (the shared-memory transport carries payloads of up to 8 bytes
//! on a faster path, which the AM's 8-byte compact form takes and an RPC message, 66-80
//! bytes, cannot). Under `GEX_MPI_THREAD=single` the conduit's lock is a flag without a
//! locked instruction (`mpi/serial.rs`): an AM round trip took 4-9% less in three sets
//! of alternating runs.
//!
//! A figure a path cannot measure is reported under the table and in the JSON's
//! `"unsupported"` list (`name`, `why`), never as a number. Every job runs under UPC++
//! (which reaches the segments of other hosts through gex). gex atomics are probed
//! once per job: `fetch_add_i64` is measured when an atomic reaches the other rank's
//! segment from the job's path, and otherwise reported with the probe's panic message.
//!
//! `PGAS_BENCH_MPI_JOBS` names the jobs to run (comma-separated, default
//! `smp,host,net`).
//!
//! Within each job the gex figures and the raw baselines are measured interleaved, as in
//! `gex.rs`: a calibration phase for each, then rounds of one ~30 ms sample of each
//! (medians of 9 samples after 2 warm-up rounds; `PGAS_BENCH_SAMPLES`,
//! `PGAS_BENCH_SAMPLE_MS`). The smp figures come from a job of their own in the same run
//! (two conduits cannot share a process), so the within-host ratios are not interleaved
//! sample by sample. This machine switches between a fast and a slow state on the scale
//! of a job: run once each, the second job could read 2.3-2.8x the first on the AM and
//! RPC round trips, the barrier and the AM rate, in either order. So the smp and host
//! jobs run twice, as smp, host, host, smp, and each of their figures is the median of
//! both runs' samples (18 by default).
//!
//! Data is checked in every figure (the pong carries the ping's sequence number, RPCs
//! and fetch-adds return values checked one by one, puts are read back and checked by
//! rank 1 in its own memory, gets return what rank 1 wrote, the first barrier orders a
//! put, the first broadcast from each root lands in a poisoned buffer), so a broken path
//! fails its job instead of reporting a great number.

mod common;
#[path = "mpi/kernels.rs"]
mod kernels;
#[path = "mpi/launch.rs"]
mod launch;
#[path = "mpi/raw.rs"]
mod raw;

use std::time::Duration;

use common::{median, Measured, RankJob, Report, Sampler, TargetIs};
use gex::Team;
use kernels::{Area, Figures, AREA_BYTES};
use launch::{Unsupported, GEX_MPI_HOST_RANKS, GEX_MPI_THREAD};
use serde_json::json;

const BENCH: &str = "mpi";
/// Each rank's segment (the area of `kernels.rs`, and UPC++'s own allocations).
const SEGMENT: usize = 32 << 20;

/// Bytes of the put bandwidth figures.
pub(crate) const BW_BYTES: usize = 1 << 20;
/// Bytes of the broadcast figures.
pub(crate) const BCAST_BYTES: usize = 1 << 20;
/// What rank 1 holds for the get figures.
pub(crate) const GET_VALUE: u64 = 0x0123_4567_89ab_cdef;
/// The pattern of the put bandwidth figures.
pub(crate) const BW_SEED: u64 = 0x5eed_0a00;

/// The jobs: where their ranks run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Smp,
    Host,
    Net,
}

impl Path {
    const ALL: [Path; 3] = [Path::Smp, Path::Host, Path::Net];

    fn job(self) -> &'static str {
        match self {
            Path::Smp => "smp",
            Path::Host => "host",
            Path::Net => "net",
        }
    }

    fn from_job(job: &str) -> Path {
        Path::ALL
            .into_iter()
            .find(|p| p.job() == job)
            .unwrap_or_else(|| panic!("mpi bench: unknown job {job}"))
    }

    /// The prefix of its gex figures.
    fn prefix(self) -> &'static str {
        match self {
            Path::Smp => "smp.",
            Path::Host => "mpi.host.",
            Path::Net => "mpi.net.",
        }
    }

    /// The prefix of its raw MPI baselines.
    fn raw_prefix(self) -> &'static str {
        match self {
            Path::Smp => "",
            Path::Host => "raw.mpi.host.",
            Path::Net => "raw.mpi.net.",
        }
    }

    /// Hosts the job's 2 ranks must span.
    fn hosts(self) -> usize {
        if self == Path::Net {
            2
        } else {
            1
        }
    }
}

// ---------------------------------------------------------------------------------------
// Rank side
// ---------------------------------------------------------------------------------------

fn rank_main(job: RankJob) {
    let path = Path::from_job(&job.job);
    upcxx::init();
    let team = upcxx::backend::gex_team();
    team.endpoint()
        .register_handlers(&mut kernels::handlers())
        .expect("register the bench's handlers");
    let mine = upcxx::allocate(AREA_BYTES, 4096).expect("segment space for the area");
    let area = Area::exchange(team, mine.local(), upcxx::barrier);
    // Rank 1's area for the UPC++ figures: a global pointer is plain data, broadcast as
    // any value is.
    let peer_area = upcxx::broadcast(mine, 1, upcxx::world()).wait();
    run_figures(&job, path, area, peer_area, &upcxx::barrier);
    upcxx::finalize();
}

fn check_placement(team: Team, path: Path) {
    assert_eq!(team.size(), 2, "the mpi benchmarks need exactly 2 ranks");
    let on_my_host = gex::host_info().members.len();
    let hosts = if on_my_host == 2 { 1 } else { 2 };
    assert_eq!(
        hosts,
        path.hosts(),
        "job {}: its 2 ranks are on {hosts} host(s), it needs {} (see GEX_MPIRUN)",
        path.job(),
        path.hosts()
    );
}

fn run_figures(
    job: &RankJob,
    path: Path,
    area: Area,
    peer_area: upcxx::GlobalPtr<u8>,
    barrier: &dyn Fn(),
) {
    let team = area.team;
    check_placement(team, path);
    let raw = (path != Path::Smp).then(raw::Raw::new);
    let ad = kernels::atomic_domain(&team);
    barrier();
    let probe = kernels::probe_atomics(area, &ad);
    let everywhere = match &raw {
        Some(r) => r.all(probe.is_ok()),
        None => probe.is_ok(),
    };
    let atomics = match probe {
        Ok(()) if everywhere => Ok(ad.clone()),
        Ok(()) => Err("gex atomics do not reach rank 0's segment from rank 1".to_owned()),
        Err(why) => Err(why),
    };
    barrier();
    let figures = Figures {
        area,
        peer_area,
        atomics,
    };
    let (mut benches, unsupported) = kernels::figures(&figures, path.prefix());
    if let Some(r) = raw {
        benches.extend(raw::figures(r, path.raw_prefix()));
    }
    let sampler = Sampler::from_env();
    let results = common::figures::measure(team.rank(), sampler, barrier, benches);
    ad.destroy();
    if let Some(r) = raw {
        r.free();
    }
    if team.rank() == 0 {
        launch::write_rank_results(job, &results, &unsupported);
    }
}

// ---------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------

/// The figures of every path, and whether they are bandwidths or rates (a higher ratio is
/// better) or times.
const FIGURES: [(&str, bool); 16] = [
    ("am_short_roundtrip", false),
    ("rpc_roundtrip", false),
    ("am_medium_rate", true),
    ("put_8B", false),
    ("get_8B", false),
    ("put_nb_8B", false),
    ("get_nb_8B", false),
    ("rget_8B", false),
    ("rget_8B_x64", false),
    ("rput_8B", false),
    ("put_bw_1MiB", true),
    ("indexed_put_1000x8B", false),
    ("indexed_get_1000x8B", false),
    ("fetch_add_i64", false),
    ("barrier", false),
    ("broadcast_1MiB", false),
];

/// A target: the ratio to the baseline, and whether it is a most or a least.
type Target = Option<(f64, TargetIs)>;

/// Between hosts: each figure's raw baseline, with its target.
const NET_BASELINES: [(&str, &str, Target); 9] = [
    (
        "am_short_roundtrip",
        "send_recv_pingpong",
        Some((1.3, TargetIs::Max)),
    ),
    (
        "rpc_roundtrip",
        "send_recv_pingpong",
        Some((1.3, TargetIs::Max)),
    ),
    ("am_medium_rate", "isend_rate", Some((1.0, TargetIs::Min))),
    ("put_8B", "put_flush_8B", Some((1.3, TargetIs::Max))),
    ("get_8B", "get_flush_8B", None),
    ("put_bw_1MiB", "put_flush_bw_1MiB", None),
    ("fetch_add_i64", "fetch_and_op_i64", None),
    ("barrier", "barrier", Some((1.3, TargetIs::Max))),
    ("broadcast_1MiB", "bcast_1MiB", None),
];

/// Between hosts: the UPC++ figures against gex's and against each other, with their
/// targets.
const NET_UPCXX: [(&str, &str, Target); 3] = [
    ("rget_8B", "get_nb_8B", Some((1.2, TargetIs::Max))),
    ("rget_8B_x64", "rget_8B", Some((0.5, TargetIs::Max))),
    ("rput_8B", "put_nb_8B", Some((1.2, TargetIs::Max))),
];

/// Names the jobs to run, comma-separated (default: `smp,host,net`).
const BENCH_MPI_JOBS: &str = "PGAS_BENCH_MPI_JOBS";

/// The jobs [`BENCH_MPI_JOBS`] names, in the order of [`Path::ALL`].
fn jobs() -> Vec<Path> {
    let Ok(list) = std::env::var(BENCH_MPI_JOBS) else {
        return Path::ALL.to_vec();
    };
    let named: Vec<Path> = list.split(',').map(|j| Path::from_job(j.trim())).collect();
    Path::ALL
        .into_iter()
        .filter(|p| named.contains(p))
        .collect()
}

/// The order in which to run `jobs`: with both the smp and the host job, those two
/// twice, as smp, host, host, smp, then the rest. Their ratios compare two jobs, and this
/// machine switches between a fast and a slow state on the scale of a job (a job run
/// after another could read 2.4x slower than the same job run first): each figure
/// pools the samples of its two runs, which stand on both sides of the other job's.
fn schedule(jobs: &[Path]) -> Vec<Path> {
    if !(jobs.contains(&Path::Smp) && jobs.contains(&Path::Host)) {
        return jobs.to_vec();
    }
    let rest = jobs.iter().filter(|p| !matches!(p, Path::Smp | Path::Host));
    [Path::Smp, Path::Host, Path::Host, Path::Smp]
        .into_iter()
        .chain(rest.copied())
        .collect()
}

/// Adds `results` to `pooled`: a figure measured before gets these samples too, and
/// its value becomes the median of all of them.
fn pool(pooled: &mut Vec<Measured>, results: Vec<Measured>) {
    for m in results {
        match pooled.iter_mut().find(|p| p.name == m.name) {
            Some(p) => {
                p.samples.extend(m.samples);
                p.value = median(&p.samples);
            }
            None => pooled.push(m),
        }
    }
}

/// Within a host: every figure against the smp conduit's.
const HOST_VS_SMP: f64 = 1.2;

fn driver() -> i32 {
    let machine = common::machine_note();
    let sampler = Sampler::from_env();
    eprintln!(
        "mpi bench: 2-rank jobs on the smp conduit, then under {} within a host and \
         between hosts; {} samples of ~{} ms per figure; {machine}",
        launch::mpirun_prefix().map_or_else(|e| e, |p| p.join(" ")),
        sampler.samples,
        sampler.sample_time.as_millis()
    );
    let timeout = Duration::from_secs(300);
    let mut report = Report::new(BENCH, 2);
    let mut measured: Vec<Measured> = Vec::new();
    let mut unsupported: Vec<Unsupported> = Vec::new();
    for path in schedule(&jobs()) {
        let outcome = match path {
            Path::Smp => launch::run_smp_job(BENCH, path.job(), 2, SEGMENT, timeout),
            Path::Host | Path::Net => {
                let cap = if path == Path::Net { "1" } else { "2" };
                let env = [
                    (GEX_MPI_HOST_RANKS, cap.to_owned()),
                    (
                        GEX_MPI_THREAD,
                        std::env::var("PGAS_BENCH_MPI_THREAD").unwrap_or("single".into()),
                    ),
                ];
                launch::run_mpi_job(BENCH, path.job(), 2, SEGMENT, &env, timeout)
            }
        };
        match outcome {
            Ok((results, missing)) => {
                pool(&mut measured, results);
                for u in missing {
                    if !unsupported.iter().any(|known| known.name == u.name) {
                        unsupported.push(u);
                    }
                }
            }
            Err(e) => report.errors.push(e),
        }
    }
    report.add(measured);

    for (figure, bandwidth) in FIGURES {
        let target = if bandwidth {
            (1.0 / HOST_VS_SMP, TargetIs::Min)
        } else {
            (HOST_VS_SMP, TargetIs::Max)
        };
        report.relate(
            &format!("mpi.host.{figure}"),
            &format!("smp.{figure}"),
            Some(target),
        );
    }
    for (figure, baseline, target) in NET_BASELINES {
        report.relate(
            &format!("mpi.net.{figure}"),
            &format!("raw.mpi.net.{baseline}"),
            target,
        );
    }

    for (figure, baseline, target) in NET_UPCXX {
        report.relate(
            &format!("mpi.net.{figure}"),
            &format!("mpi.net.{baseline}"),
            target,
        );
    }

    // What MPI itself costs under an AM round trip (see `raw.rs`): the floor of
    // `am_short_roundtrip`, related to the target's baseline, and the figure to it.
    let floor = "raw.mpi.net.anysource_pingpong";
    report.relate(floor, "raw.mpi.net.send_recv_pingpong", None);
    let mut notes: Vec<String> = Vec::new();
    if let (Some(am), Some(base)) = (
        report.value_of("mpi.net.am_short_roundtrip"),
        report.value_of(floor),
    ) {
        notes.push(format!(
            "mpi.net.am_short_roundtrip is {:.3}x {floor}, the floor under it",
            am / base
        ));
    }

    report.section(
        "unsupported",
        json!(unsupported
            .iter()
            .map(|u| json!({"name": u.name, "why": u.why}))
            .collect::<Vec<_>>()),
    );
    notes.extend(
        unsupported
            .iter()
            .map(|u| format!("{}: unsupported: {}", u.name, u.why)),
    );
    report.finish(
        &format!(
            "mpi benchmarks: smp.* on the smp conduit, mpi.host.* and raw.mpi.host.* under \
             mpirun on one host, mpi.net.* and raw.mpi.net.* with GEX_MPI_HOST_RANKS=1 (the \
             network path); 2 ranks; {machine}"
        ),
        &notes,
    )
}

fn main() {
    // Started by hand: `upcxx-run -n 2` is the smp job, `mpirun -n 2` the host job.
    let by_hand = if std::env::var_os(gex::job::UPCXX_RANK).is_some() {
        Path::Smp
    } else {
        Path::Host
    };
    if let Some(job) = launch::rank_job(by_hand.job()) {
        rank_main(job);
        return;
    }
    std::process::exit(driver());
}
