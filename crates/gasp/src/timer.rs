//! Global timers (UPC performance-tool interface proposal §3.5: `pupc_ticks_now`,
//! `pupc_ticks_to_us`, `pupc_tick_granularityus`).
//!
//! A tick is the CPU's time-stamp counter on x86-64 (`rdtsc`, a fraction of what
//! `clock_gettime` costs to read): every notification to the profiler or tracer reads
//! the clock once (an interval twice: START and END), so the cheaper clock is worth the
//! calibration. The counter is invariant
//! and shared by all cores of a host on the CPUs this runs on (`constant_tsc`,
//! `nonstop_tsc`), so ticks are consistent across the ranks of a host. Elsewhere a tick
//! is a nanosecond of `CLOCK_MONOTONIC`, which is host-wide too.
//!
//! Conversion to wall time is calibrated against `CLOCK_MONOTONIC`: [`calibration`]
//! anchors (ticks, ns) once and measures the rate over at least 5 ms; a tool that runs
//! long can [`Calibration::refine`] over its whole run. The trace converts every
//! timestamp to `CLOCK_MONOTONIC` nanoseconds, the clock all ranks of a host share, which
//! is what aligns the ranks' timelines.

use std::sync::OnceLock;
use std::time::Duration;

/// A point in time, in ticks (`pupc_tick_t`); differences are plain subtraction.
pub type Ticks = u64;

/// The current time in ticks (`pupc_ticks_now`).
#[inline(always)]
pub fn ticks_now() -> Ticks {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions; every x86-64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the host-wide clock ticks are calibrated against.
pub fn monotonic_ns() -> u64 {
    let t = clock_monotonic();
    t.0 * 1_000_000_000 + t.1
}

fn clock_monotonic() -> (u64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64, ts.tv_nsec as u64)
}

/// Converts a difference of ticks to microseconds (`pupc_ticks_to_us`).
pub fn ticks_to_us(ticks: Ticks) -> f64 {
    calibration().ns_per_tick * ticks as f64 / 1000.0
}

/// Converts a difference of ticks to nanoseconds.
pub fn ticks_to_ns(ticks: Ticks) -> u64 {
    (calibration().ns_per_tick * ticks as f64) as u64
}

/// The granularity of the clock in microseconds (`pupc_tick_granularityus`): the smallest
/// non-zero difference two reads can show.
pub fn tick_granularity_us() -> f64 {
    calibration().ns_per_tick / 1000.0
}

/// The relation between ticks and `CLOCK_MONOTONIC` on this process.
#[derive(Clone, Copy, Debug)]
pub struct Calibration {
    /// The ticks of the anchor, a pair of readings taken together.
    pub anchor_ticks: Ticks,
    /// The `CLOCK_MONOTONIC` nanoseconds read with `anchor_ticks`.
    pub anchor_ns: u64,
    /// The rate: nanoseconds per tick (1 where a tick is a nanosecond of
    /// `CLOCK_MONOTONIC`).
    pub ns_per_tick: f64,
}

impl Calibration {
    fn measure() -> Calibration {
        if cfg!(not(target_arch = "x86_64")) {
            let now = monotonic_ns();
            return Calibration {
                anchor_ticks: now,
                anchor_ns: now,
                ns_per_tick: 1.0,
            };
        }
        let (t0, n0) = paired_reading();
        let min = Duration::from_millis(5).as_nanos() as u64;
        loop {
            std::hint::spin_loop();
            let (t1, n1) = paired_reading();
            if n1 - n0 >= min && t1 > t0 {
                return Calibration {
                    anchor_ticks: t0,
                    anchor_ns: n0,
                    ns_per_tick: (n1 - n0) as f64 / (t1 - t0) as f64,
                };
            }
        }
    }

    /// The same anchor with the rate measured from the anchor to now (more accurate the
    /// longer the process has run).
    pub fn refine(&self) -> Calibration {
        let (t1, n1) = paired_reading();
        if t1 <= self.anchor_ticks || n1 - self.anchor_ns < 5_000_000 {
            return *self;
        }
        Calibration {
            ns_per_tick: (n1 - self.anchor_ns) as f64 / (t1 - self.anchor_ticks) as f64,
            ..*self
        }
    }

    /// `CLOCK_MONOTONIC` nanoseconds at tick `t`.
    pub fn to_monotonic_ns(&self, t: Ticks) -> u64 {
        let delta = t as i128 - self.anchor_ticks as i128;
        (self.anchor_ns as i128 + (delta as f64 * self.ns_per_tick) as i128).max(0) as u64
    }
}

/// Reads ticks and `CLOCK_MONOTONIC` as close together as possible: the pair with the
/// shortest tick interval around the clock read, of a few tries.
fn paired_reading() -> (Ticks, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = ticks_now();
        let ns = monotonic_ns();
        let b = ticks_now();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a + (b - a) / 2, ns);
        }
    }
    (best.1, best.2)
}

/// This process's calibration, measured on first use (5 ms).
pub fn calibration() -> &'static Calibration {
    static CALIBRATION: OnceLock<Calibration> = OnceLock::new();
    CALIBRATION.get_or_init(Calibration::measure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_measure_wall_time() {
        let c = calibration();
        let (t0, n0) = (ticks_now(), monotonic_ns());
        std::thread::sleep(Duration::from_millis(20));
        let (t1, n1) = (ticks_now(), monotonic_ns());
        let by_ticks = ticks_to_ns(t1 - t0) as f64;
        let by_clock = (n1 - n0) as f64;
        assert!(
            (by_ticks / by_clock - 1.0).abs() < 0.05,
            "{by_ticks} vs {by_clock}"
        );
        let mapped = c.to_monotonic_ns(t1) as f64;
        assert!((mapped - n1 as f64).abs() < 1e6, "{mapped} vs {n1}");
        assert!(tick_granularity_us() > 0.0 && tick_granularity_us() < 1.0);
        assert!((ticks_to_us(t1 - t0) - by_clock / 1000.0).abs() < by_clock / 1000.0 * 0.05);
    }
}
