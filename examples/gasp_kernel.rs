//! The measuring kernel of `cargo bench --bench gasp` (`benches/gasp.rs`), not a
//! tutorial: the bench builds it with and without the `gasp` feature and runs it as
//! 2-rank jobs, with and without a GASP tool attached, to measure what the
//! instrumentation costs.
//!
//! Rank 0 times `upcxx::rput(v, p).wait()` of a `u64` into rank 1's segment and
//! `upcxx::rpc(1, empty, ()).wait()`, one sample of each in turn: `GASP_KERNEL_WARMUP`
//! discarded samples (default 2), then `GASP_KERNEL_SAMPLES` measured ones (default 7).
//! A sample is `N` calls, `N` picked after a warm-up so that a sample lasts about
//! `GASP_KERNEL_SAMPLE_MS` (default 30). Rank 1 meanwhile waits in `upcxx::barrier`,
//! whose user-level progress runs the RPCs. Every rput, rpc and wait goes through the
//! public API from its own call site, as in a program, so a tool sees what it would see
//! there.
//!
//! Around the samples rank 0 probes the machine's state: before the rput sample,
//! between the two and after the RPC sample, a quarter of a sample's time of raw
//! ping-pong of one cache line of rank 1's segment (rank 0 stores, rank 1 answers from
//! inside an RPC, no library call in the loop). A sample's `probe` is the slowest of its
//! three, in ns per round trip: ≈60 on this VM when the ranks run on nearby cores, far
//! more when they do not, or share one.
//!
//! Afterwards rank 0 checks the paths it measured: rank 1 reads the last value put in its
//! own memory, and an RPC returns a value only rank 1 computes. Rank 0 then prints one
//! line (to the file named by `PGAS_BENCH_OUT` when the bench set it):
//!
//! ```text
//! GASP_KERNEL {"instrumented":true,"tool":false,"iters":{"rput_8B":N,"rpc_roundtrip":M},
//!   "calls":{...},"rput_8B":[ns per call, ...],"rpc_roundtrip":[...],"probe":[...]}
//! ```
//!
//! (one line), where `instrumented` says whether the `gasp` feature was on, `tool`
//! whether a tool is attached, and `calls` how many of each operation rank 0 made in
//! all (warm-up, calibration and samples; not the checks).
//!
//! With `GASP_KERNEL_COUNT=N` the kernel times nothing: every rank attaches a tool of
//! its own that counts notifications (GASP §3: each begin, end and atomic event is one
//! `gasp_event_notify`), rank 0 makes `N` calls of each operation, and the line adds
//! `"notifications":{"rput_8B":[rank 0, rank 1],"rpc_roundtrip":[...]}`, what one call
//! made each rank report (the sample lists are empty). The bench turns its per-event
//! targets into per-call ones with these.
//! By hand: `UPCXX_RANKS=2 cargo run --release --example gasp_kernel`, with
//! `GASP_TOOL=profile` or `trace` to attach a tool.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use upcxx::GlobalPtr;

/// The prefix of the result line.
const TAG: &str = "GASP_KERNEL";
/// The file the result line goes to instead of stdout (the bench harness's variable).
const OUT: &str = "PGAS_BENCH_OUT";
/// Untimed RPCs before each timed RPC sample.
const WAKE_RPCS: u64 = 64;

/// Notifications this rank's counting tool received (`GASP_KERNEL_COUNT`).
static NOTIFICATIONS: AtomicU64 = AtomicU64::new(0);

/// The counting tool of `GASP_KERNEL_COUNT`.
struct Counter;

impl gasp::Tool for Counter {
    fn event_notify(&self, _event: &gasp::Event<'_>) {
        NOTIFICATIONS.fetch_add(1, Ordering::Relaxed);
    }

    fn control(&self, _on: bool) -> bool {
        true
    }

    fn create_event(&self, _name: &str, _desc: Option<&str>) -> u32 {
        gasp::USEREVT_START
    }
}

/// This rank's count so far (called on rank 1 by RPC).
fn notifications() -> u64 {
    NOTIFICATIONS.load(Ordering::Relaxed)
}

/// Rank 1's word that rank 0 puts into (a cache line of its own).
static TARGET: OnceLock<GlobalPtr<u64>> = OnceLock::new();

fn target() -> GlobalPtr<u64> {
    *TARGET
        .get()
        .expect("rank 1 allocates its word before the first barrier")
}

/// [`target`] as an RPC result, a one-element tuple.
fn target_wire() -> (GlobalPtr<u64>,) {
    (target(),)
}

/// Rank 1's ping-pong word, one cache line after [`target`]: the probe of the machine's
/// state (see [`probe`]).
fn ping() -> GlobalPtr<u64> {
    target().add(PING_OFFSET)
}

/// [`ping`] in `u64`s from [`target`].
const PING_OFFSET: usize = 8;

/// The body of the measured RPC.
fn empty() {}

/// Rank 1's half of [`probe`]: answers `n` pings, the first `first + 1`, each with the
/// next value.
fn pong(first: u64, n: u64) {
    // SAFETY: rank 1's own segment word, used only by the probe; atomics of the same
    // size and alignment as the u64 (an aligned cache line of the segment).
    let word = unsafe { &*ping().local().cast::<AtomicU64>() };
    for i in 0..n {
        spin_until(|| word.load(Ordering::Acquire) == first + 2 * i + 1);
        word.store(first + 2 * i + 2, Ordering::Release);
    }
}

/// Tests `done` until it holds: spinning, and yielding the core now and then so that
/// two ranks sharing one core still make progress.
fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(4096) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Rank 1: the value its word holds, read in its own memory.
fn read_target() -> u64 {
    // SAFETY: rank 1's own segment word, allocated for this kernel; rank 0's last put
    // completed before the RPC that runs this was sent.
    unsafe { target().local().read_volatile() }
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
        Err(_) => default,
    }
}

/// Runs `run` in short batches for `time` (warm caches, an awake peer).
fn warm_up(time: Duration, run: &mut impl FnMut(u64) -> Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < time {
        run(64);
    }
}

/// An iteration count for which `run(n)` lasts about `target`.
fn calibrate(target: Duration, run: &mut impl FnMut(u64) -> Duration) -> u64 {
    let target = target.as_secs_f64();
    let mut n = 1u64;
    loop {
        let t = run(n).as_secs_f64();
        if t >= target / 8.0 || n >= 1 << 40 {
            return ((n as f64 * target / t.max(1e-9)).ceil() as u64).max(1);
        }
        n *= if t < target / 100.0 { 10 } else { 2 };
    }
}

fn main() {
    let count = env_u64("GASP_KERNEL_COUNT", 0);
    if count > 0 {
        gasp::register_tool(|_, _| Box::new(Counter));
    }
    upcxx::init();
    assert_eq!(upcxx::rank_n(), 2, "gasp_kernel runs on exactly 2 ranks");
    if upcxx::rank_me() == 1 {
        let word = upcxx::allocate(128, 64)
            .expect("segment space for two cache lines")
            .cast::<u64>();
        // SAFETY: a fresh block of our own segment that no other rank knows yet.
        unsafe {
            word.local().write(0);
            word.add(PING_OFFSET).local().write(0);
        }
        TARGET.set(word).expect("allocated once");
    }
    upcxx::barrier();
    if upcxx::rank_me() == 0 {
        measure(count);
    }
    // Rank 1 serves the RPCs here, in the barrier's user-level progress.
    upcxx::barrier();
    upcxx::finalize();
}

/// Rank 0's part: warm-up and calibration, interleaved samples (or, with `count` > 0,
/// counted calls), checks, the line.
fn measure(count: u64) {
    let (dest,) = upcxx::rpc(1, target_wire, ()).wait();
    assert_eq!(dest.where_(), 1, "the rput target lives on rank 1");
    let warmup = env_u64("GASP_KERNEL_WARMUP", 2);
    let samples = env_u64("GASP_KERNEL_SAMPLES", 7);
    let sample_time = Duration::from_millis(env_u64("GASP_KERNEL_SAMPLE_MS", 30).max(1));

    let mut next = 0u64;
    let mut rput = |n: u64| {
        let t0 = Instant::now();
        for _ in 0..n {
            next += 1;
            upcxx::rput(next, dest).wait();
        }
        t0.elapsed()
    };
    let mut rpcs = 0u64;
    let mut rpc = |n: u64| {
        rpcs += n;
        let t0 = Instant::now();
        for _ in 0..n {
            upcxx::rpc(1, empty, ()).wait();
        }
        t0.elapsed()
    };

    // The probe: a raw ping-pong of one cache line with rank 1 (a store, and a load
    // that waits for the answer), no library call in the loop. Rank 1 answers in an
    // RPC; the first exchange waits for it to start and is not timed.
    // SAFETY: rank 1's segment word, reached through the local team's shared memory,
    // used only by the probe; aligned and `u64`-sized, as the atomic.
    let ping_word = unsafe { &*dest.add(PING_OFFSET).local().cast::<AtomicU64>() };
    let mut pinged = 0u64;
    let mut probe = |n: u64| {
        let first = pinged;
        pinged += 2 * (n + 1);
        let answered = upcxx::rpc(1, pong, (first, n + 1));
        let exchange = |i: u64| {
            ping_word.store(first + 2 * i + 1, Ordering::Release);
            spin_until(|| ping_word.load(Ordering::Acquire) == first + 2 * i + 2);
        };
        exchange(0);
        let t0 = Instant::now();
        for i in 1..=n {
            exchange(i);
        }
        let t = t0.elapsed();
        answered.wait();
        t
    };

    let mut counted = serde_json::Value::Null;
    if count > 0 {
        // What one call makes each rank report. Rank 1's count is read by RPCs, whose
        // own RPC_EXECUTE END (of the first) and START (of the second) fall between
        // the readings there; here the readings bracket only the calls.
        let remote = || upcxx::rpc(1, notifications, ()).wait();
        let per_call = |op: &mut dyn FnMut(u64) -> Duration| {
            op(64);
            let there = remote();
            let here = notifications();
            op(count);
            let here = notifications() - here;
            let there = remote() - there - 2;
            [here as f64 / count as f64, there as f64 / count as f64]
        };
        counted = serde_json::json!({
            "rput_8B": per_call(&mut rput),
            "rpc_roundtrip": per_call(&mut rpc),
        });
    }
    let (n_rput, n_rpc, n_probe) = if count > 0 {
        (0, 0, 0)
    } else {
        warm_up(sample_time / 4, &mut rput);
        let n_rput = calibrate(sample_time, &mut rput);
        warm_up(sample_time / 4, &mut rpc);
        let n_rpc = calibrate(sample_time, &mut rpc);
        (n_rput, n_rpc, calibrate(sample_time / 4, &mut probe))
    };
    let (mut rput_ns, mut rpc_ns, mut probe_ns) = (Vec::new(), Vec::new(), Vec::new());
    for s in (0..warmup + samples).filter(|_| count == 0) {
        let mut probe_once = || probe(n_probe).as_nanos() as f64 / n_probe as f64;
        let p0 = probe_once();
        let a = rput(n_rput).as_nanos() as f64 / n_rput as f64;
        let p1 = probe_once();
        // Rank 1 naps in its barrier's backoff while nothing reaches it (during the
        // rput sample): a few untimed RPCs wake it up.
        rpc(WAKE_RPCS);
        let b = rpc(n_rpc).as_nanos() as f64 / n_rpc as f64;
        let p = p0.max(p1).max(probe_once());
        if s >= warmup {
            rput_ns.push(a);
            rpc_ns.push(b);
            probe_ns.push(p);
        }
    }

    assert_eq!(
        upcxx::rpc(1, read_target, ()).wait(),
        next,
        "rank 1 does not hold the last value rank 0 put"
    );
    let x = black_box(0x5eed_1234_u64);
    let got = upcxx::rpc(1, |x: u64| (upcxx::rank_me(), !x), (x,)).wait();
    assert_eq!(got, (1, !x), "the RPC round trip returned a wrong result");

    let mut result = serde_json::json!({
        "instrumented": cfg!(feature = "gasp"),
        "tool": gasp::enabled(),
        "iters": {"rput_8B": n_rput, "rpc_roundtrip": n_rpc},
        "calls": {"rput_8B": next, "rpc_roundtrip": rpcs},
        "rput_8B": rput_ns,
        "rpc_roundtrip": rpc_ns,
        "probe": probe_ns,
    });
    if count > 0 {
        result["notifications"] = counted;
    }
    let line = format!("{TAG} {result}");
    match std::env::var_os(OUT) {
        Some(path) => std::fs::write(&path, line + "\n").unwrap_or_else(|e| {
            panic!(
                "cannot write the results to {}: {e}",
                path.to_string_lossy()
            )
        }),
        None => println!("{line}"),
    }
}
