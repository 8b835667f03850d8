//! States of the machine, told apart by a probe taken around each sample.
//!
//! On a small VM the same code runs at different speeds from job to job, with where the
//! host places the job's processes: a raw cache-line ping-pong between two ranks takes
//! ≈30 ns when they share one core's caches, ≈70 ns on two cores, far more when they
//! share one hardware thread. A bench that probes the machine around each of its
//! samples can compare a figure with its baseline in one state at a time: the states
//! are the clusters of the probes. Sorted, a probe more than `gap` times the one
//! before it starts a new cluster (the probes within a state step by a few percent).
//!
//! This file is also compiled into the integration test `tests/bench_states.rs`, so the
//! clustering is tested by `cargo test` (bench targets are not).

/// A state of the machine: the probes of one cluster, `lo..=hi`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct State {
    pub lo: f64,
    pub hi: f64,
}

impl State {
    /// Whether a sample with this probe was taken in the state.
    pub(crate) fn contains(&self, probe: f64) -> bool {
        probe >= self.lo && probe <= self.hi
    }

    /// How many of `probes` lie in the state.
    pub(crate) fn count(&self, probes: &[f64]) -> usize {
        probes.iter().filter(|&&p| self.contains(p)).count()
    }
}

/// The clusters of `probes` (in any order), fastest first: sorted, a probe more than
/// `gap` times the one before it starts a new cluster. NaN probes are ignored.
pub(crate) fn clusters(probes: &[f64], gap: f64) -> Vec<State> {
    let mut sorted: Vec<f64> = probes.iter().copied().filter(|p| !p.is_nan()).collect();
    sorted.sort_by(f64::total_cmp);
    let mut out: Vec<State> = Vec::new();
    for p in sorted {
        match out.last_mut() {
            Some(last) if p <= last.hi * gap => last.hi = p,
            _ => out.push(State { lo: p, hi: p }),
        }
    }
    out
}

/// The states a bench judges, fastest first, given the probes of each group of samples
/// that are compared with each other (a figure and its baseline, say): every cluster
/// in which each non-empty group has at least `min` samples. When no cluster has, one
/// state made of the fastest clusters together, as many as it takes (all of them at
/// worst); none when there is no probe at all.
pub(crate) fn judged(groups: &[Vec<f64>], gap: f64, min: usize) -> Vec<State> {
    let all: Vec<f64> = groups.iter().flatten().copied().collect();
    let clusters = clusters(&all, gap);
    let enough = |s: &State| groups.iter().all(|g| g.is_empty() || s.count(g) >= min);
    let states: Vec<State> = clusters.iter().copied().filter(enough).collect();
    if !states.is_empty() {
        return states;
    }
    let Some(first) = clusters.first() else {
        return Vec::new();
    };
    let last = clusters.last().expect("a first cluster");
    let merged = clusters
        .iter()
        .map(|c| State {
            lo: first.lo,
            hi: c.hi,
        })
        .find(enough)
        .unwrap_or(State {
            lo: first.lo,
            hi: last.hi,
        });
    vec![merged]
}

/// The clusters faster than `reference` (the fastest judged state) that were not
/// judged: too few samples of some group were taken in them.
pub(crate) fn unjudged_faster(probes: &[f64], gap: f64, reference: &State) -> Vec<State> {
    clusters(probes, gap)
        .into_iter()
        .filter(|c| c.hi < reference.lo)
        .collect()
}
