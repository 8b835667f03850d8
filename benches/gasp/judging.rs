//! Judging by states of the machine (the bench's docs): the samples of each state, the
//! states judged, and the note on a judged state other than the reference.

use crate::common::states::{self, State};
use crate::common::{fmt_value, median, TargetIs};
use crate::kernel::Sample;
use crate::variant::{Variant, OPS};

/// Two sorted probes this many times apart belong to different states of the machine
/// (the module docs): 1.5 separates the ≈30 ns state (two hardware threads of one
/// core) from the ≈70 ns one (two cores), while the probes within a state step by a
/// few percent.
pub(crate) const STATE_GAP: f64 = 1.5;
/// Samples each variant needs in a state for its figures to come from that state alone.
pub(crate) const MIN_STATE_SAMPLES: usize = 3;

/// The samples of each variant, by variant index.
pub(crate) type Taken = [Vec<Sample>; 5];

/// The probes of each variant's samples (the groups [`states::judged`] compares).
pub(crate) fn probe_groups(taken: &Taken) -> Vec<Vec<f64>> {
    taken
        .iter()
        .map(|samples| samples.iter().map(|s| s.probe).collect())
        .collect()
}

/// The states whose figures the driver reports and judges, fastest first (see the
/// module docs); the first is the reference state of the table.
pub(crate) fn judged_states(taken: &Taken) -> Vec<State> {
    states::judged(&probe_groups(taken), STATE_GAP, MIN_STATE_SAMPLES)
}

/// The clusters faster than the reference state that hold too few samples of some
/// variant to be judged.
pub(crate) fn unjudged_states(taken: &Taken, judged: &[State]) -> Vec<State> {
    let all: Vec<f64> = probe_groups(taken).concat();
    judged
        .first()
        .map(|reference| states::unjudged_faster(&all, STATE_GAP, reference))
        .unwrap_or_default()
}

/// Whether a state faster than the reference one recurs (it holds
/// [`MIN_STATE_SAMPLES`] samples in all) but is short of samples of some variant: more
/// rounds may fill it.
pub(crate) fn faster_state_short(taken: &Taken) -> bool {
    let all: Vec<f64> = probe_groups(taken).concat();
    unjudged_states(taken, &judged_states(taken))
        .iter()
        .any(|s| s.count(&all) >= MIN_STATE_SAMPLES)
}

/// The samples of each variant (by index) and operation (in [`OPS`] order) taken in
/// `state`.
pub(crate) fn samples_in(taken: &Taken, state: &State) -> [[Vec<f64>; 2]; 5] {
    let mut out: [[Vec<f64>; 2]; 5] = Default::default();
    for (v_samples, out) in taken.iter().zip(out.iter_mut()) {
        for s in v_samples.iter().filter(|s| state.contains(s.probe)) {
            for (op_samples, ns) in out.iter_mut().zip(s.ns) {
                op_samples.push(ns);
            }
        }
    }
    out
}

/// The targets of operation `op_i` for `notool`, `profile` and `trace` (in that order)
/// against its `off` median (module docs). The rput targets are per event: without the
/// events per call they are not judged.
pub(crate) fn targets(
    op_i: usize,
    off: f64,
    per_call: Option<f64>,
) -> [Option<(f64, TargetIs)>; 4] {
    let max = |t: f64| Some((t, TargetIs::Max));
    if op_i == 1 {
        return [max(1.05), max(1.3), max(1.4), max(1.5)];
    }
    // The `tracing` forwarder has a target for the RPC round trip only.
    match per_call {
        Some(n) => [
            max(1.05),
            max((off + n * 50.0) / off),
            max((off + n * 100.0) / off),
            None,
        ],
        None => [max(1.05), None, None, None],
    }
}

/// How many samples of each variant lie in `state`, as `off 3, notool 2, ...`.
pub(crate) fn counts_in(taken: &Taken, state: &State) -> String {
    let counts: Vec<String> = Variant::ALL
        .iter()
        .zip(probe_groups(taken))
        .map(|(v, probes)| format!("{} {}", v.name(), state.count(&probes)))
        .collect();
    counts.join(", ")
}

/// The note on a judged state other than the reference: its ratios and whether each
/// meets its target; `met` counts `(met, judged)` over all such notes.
pub(crate) fn state_note(
    taken: &Taken,
    state: &State,
    per_call: impl Fn(usize) -> Option<f64>,
    met: &mut (usize, usize),
) -> String {
    let samples = samples_in(taken, state);
    let mut ops = Vec::new();
    for (op_i, op) in OPS.iter().enumerate() {
        let off = median(&samples[Variant::Off.index()][op_i]);
        if !off.is_finite() || off <= 0.0 {
            continue;
        }
        let figures: Vec<String> = Variant::ALL[1..]
            .iter()
            .zip(targets(op_i, off, per_call(op_i)))
            .map(|(&v, target)| {
                let ratio = median(&samples[v.index()][op_i]) / off;
                match target {
                    Some((t, is)) => {
                        let ok = is.holds(ratio, t);
                        met.0 += usize::from(ok);
                        met.1 += 1;
                        let status = if ok { "PASS" } else { "MISS" };
                        format!("{} {ratio:.3}x (<={t:.2}x {status})", v.name())
                    }
                    None => format!("{} {ratio:.3}x", v.name()),
                }
            })
            .collect();
        ops.push(format!(
            "{op} off {} ns, {}",
            fmt_value(off),
            figures.join(", ")
        ));
    }
    format!(
        "also judged, the state of probes {} to {} ns (samples {}): {}",
        fmt_value(state.lo),
        fmt_value(state.hi),
        counts_in(taken, state),
        ops.join("; ")
    )
}
