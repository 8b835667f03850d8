//! Measuring: a [`Measured`] quantity is the median of samples that a [`Sampler`] takes
//! (calibrated, warmed up, optionally interleaved in rounds), with the timing and
//! spinning primitives the benches' loops use.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Overrides the number of measured samples per result (default 9).
pub(crate) const BENCH_SAMPLES: &str = "PGAS_BENCH_SAMPLES";
/// Overrides the target duration of one sample in milliseconds (default 30).
pub(crate) const BENCH_SAMPLE_MS: &str = "PGAS_BENCH_SAMPLE_MS";

/// One measured quantity as a rank reports it: the median `value` of `samples`.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub samples: Vec<f64>,
}

impl Measured {
    /// From samples of any unit; the value is their median.
    pub(crate) fn new(
        name: impl Into<String>,
        unit: impl Into<String>,
        samples: Vec<f64>,
    ) -> Measured {
        Measured {
            name: name.into(),
            value: median(&samples),
            unit: unit.into(),
            samples,
        }
    }

    /// Latency in ns from samples of nanoseconds per operation.
    pub(crate) fn latency_ns(name: impl Into<String>, ns_per_op: &[f64]) -> Measured {
        Measured::new(name, "ns", ns_per_op.to_vec())
    }

    /// Bandwidth in GB/s (10^9 bytes/s) from samples of ns per operation of `bytes` bytes.
    pub(crate) fn bandwidth_gbs(
        name: impl Into<String>,
        bytes: usize,
        ns_per_op: &[f64],
    ) -> Measured {
        let s = ns_per_op.iter().map(|&ns| bytes as f64 / ns).collect();
        Measured::new(name, "GB/s", s)
    }

    /// A rate in operations per second from samples of ns per operation.
    pub(crate) fn rate(name: impl Into<String>, unit: &str, ns_per_op: &[f64]) -> Measured {
        let s = ns_per_op.iter().map(|&ns| 1e9 / ns).collect();
        Measured::new(name, unit, s)
    }

    /// (max - min) / median of the samples: how noisy the figure is.
    pub(crate) fn spread(&self) -> f64 {
        let (lo, hi) = self
            .samples
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        if self.samples.is_empty() || self.value == 0.0 {
            0.0
        } else {
            (hi - lo) / self.value.abs()
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({"name": self.name, "value": self.value, "unit": self.unit, "samples": self.samples})
    }

    pub(crate) fn from_json(v: &Value) -> Option<Measured> {
        Some(Measured {
            name: v.get("name")?.as_str()?.to_owned(),
            value: v.get("value")?.as_f64()?,
            unit: v.get("unit")?.as_str()?.to_owned(),
            samples: v
                .get("samples")?
                .as_array()?
                .iter()
                .filter_map(Value::as_f64)
                .collect(),
        })
    }
}

/// The median (mean of the middle two for an even count); NaN when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// How many samples to take and how long each lasts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sampler {
    /// Discarded samples after calibration.
    pub warmup: usize,
    /// Measured samples (odd, so the median is one of them).
    pub samples: usize,
    /// Target duration of one sample.
    pub sample_time: Duration,
}

impl Default for Sampler {
    fn default() -> Sampler {
        Sampler {
            warmup: 2,
            samples: 9,
            sample_time: Duration::from_millis(30),
        }
    }
}

impl Sampler {
    /// The defaults, overridden by [`BENCH_SAMPLES`] and [`BENCH_SAMPLE_MS`].
    pub(crate) fn from_env() -> Sampler {
        Sampler::default().with_env()
    }

    /// `self`, overridden by [`BENCH_SAMPLES`] and [`BENCH_SAMPLE_MS`].
    pub(crate) fn with_env(self) -> Sampler {
        let mut s = self;
        let var = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if let Some(n) = var(BENCH_SAMPLES).filter(|&n| n > 0) {
            s.samples = n as usize;
        }
        if let Some(ms) = var(BENCH_SAMPLE_MS).filter(|&ms| ms > 0) {
            s.sample_time = Duration::from_millis(ms);
        }
        s
    }

    /// Measures an operation: `run(iters)` performs `iters` operations and returns how
    /// long they took (timed by the caller with `Instant`, so it can leave setup and
    /// teardown out). Returns the nanoseconds per operation of each measured sample.
    pub(crate) fn ns_per_op(&self, mut run: impl FnMut(u64) -> Duration) -> Vec<f64> {
        let iters = self.calibrate(&mut run);
        for _ in 0..self.warmup {
            run(iters);
        }
        (0..self.samples)
            .map(|_| run(iters).as_nanos() as f64 / iters as f64)
            .collect()
    }

    /// Warm-up and measured samples together: the number of rounds of a schedule that
    /// interleaves several measurements (one sample of each per round; the first
    /// [`Sampler::warmup`] rounds are discarded), so that all their samples, and so the
    /// ratios between their medians, come from the same stretches of time.
    pub(crate) fn rounds(&self) -> usize {
        self.warmup + self.samples
    }

    /// An iteration count for which one `run(iters)` lasts about `sample_time`.
    ///
    /// One untimed `run(1)` comes first, so that one-time costs stay out of the count:
    /// the first touch of memory (a put into a part of a segment nobody wrote yet pays a
    /// page fault per 4 KiB page, ~30 times the copy) would otherwise pass for the cost
    /// of every operation, and the count come out ~30 times too small. Samples that
    /// short are dominated by their cold start (the other figures of a round empty the
    /// caches) and read ~0.6 of the steady state.
    pub(crate) fn calibrate(&self, run: &mut impl FnMut(u64) -> Duration) -> u64 {
        let target = self.sample_time.as_secs_f64();
        run(1);
        let mut iters = 1u64;
        loop {
            let t = run(iters).as_secs_f64();
            if t >= target / 8.0 || iters >= 1 << 40 {
                let scaled = (iters as f64 * target / t.max(1e-9)).ceil();
                return (scaled as u64).max(1);
            }
            // Grow fast while runs are far too short, carefully near the target.
            iters *= if t < target / 100.0 { 10 } else { 2 };
        }
    }
}

/// Times `iters` calls of `op` with `Instant`.
#[inline]
pub(crate) fn time_iters(iters: u64, mut op: impl FnMut()) -> Duration {
    let t0 = Instant::now();
    for _ in 0..iters {
        op();
    }
    t0.elapsed()
}

/// Unsuccessful checks between two yields of [`spin_until`] (a power of two).
pub(crate) const SPINS_PER_YIELD: u32 = 256;
const _: () = assert!(SPINS_PER_YIELD.is_power_of_two());

/// Spins until `done()` holds: a busy loop with the CPU's spin hint that yields the
/// processor every [`SPINS_PER_YIELD`] unsuccessful checks (several microseconds), so
/// that a waiter sharing a core with the process it waits for (more runnable processes
/// than cores) cannot starve it for a whole time slice. While both sides have a core,
/// a round trip is far shorter than that and the yield never happens.
#[inline]
pub(crate) fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if spins & (SPINS_PER_YIELD - 1) == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}
