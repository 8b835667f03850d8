//! The benches' states of the machine (`benches/common/states.rs`): how probes are
//! clustered and which states a bench judges its targets in.
#[path = "../benches/common/states.rs"]
mod states;

use states::{clusters, judged, unjudged_faster, State};

const GAP: f64 = 1.5;

fn state(lo: f64, hi: f64) -> State {
    State { lo, hi }
}

#[test]
fn probes_a_gap_apart_start_a_new_cluster() {
    // Unsorted, with the ≈30 ns (one core) and ≈70 ns (two cores) states and a
    // time-shared outlier.
    let probes = [72.0, 31.0, 2500.0, 29.5, 68.0, 33.0, 80.0];
    assert_eq!(
        clusters(&probes, GAP),
        vec![state(29.5, 33.0), state(68.0, 80.0), state(2500.0, 2500.0)]
    );
}

#[test]
fn probes_that_step_by_less_than_the_gap_stay_one_cluster() {
    // 46 to 77 ns is 1.67x end to end, but no step is 1.5x: one state.
    let probes = [46.0, 50.0, 60.0, 66.0, 77.0];
    assert_eq!(clusters(&probes, GAP), vec![state(46.0, 77.0)]);
    // A step of exactly the gap stays in; just over it starts a new cluster.
    assert_eq!(clusters(&[10.0, 15.0], GAP), vec![state(10.0, 15.0)]);
    assert_eq!(
        clusters(&[10.0, 15.01], GAP),
        vec![state(10.0, 10.0), state(15.01, 15.01)]
    );
}

#[test]
fn no_probe_makes_no_cluster_and_nan_is_ignored() {
    assert!(clusters(&[], GAP).is_empty());
    assert_eq!(clusters(&[f64::NAN, 5.0], GAP), vec![state(5.0, 5.0)]);
    assert!(judged(&[Vec::new(), Vec::new()], GAP, 3).is_empty());
}

#[test]
fn every_cluster_with_enough_samples_of_every_group_is_judged_fastest_first() {
    let groups = vec![
        vec![30.0, 31.0, 32.0, 70.0, 71.0, 72.0, 73.0],
        vec![30.5, 31.5, 32.5, 70.5, 71.5, 72.5],
        // An empty group (a variant whose jobs all failed) asks for nothing.
        Vec::new(),
    ];
    assert_eq!(
        judged(&groups, GAP, 3),
        vec![state(30.0, 32.5), state(70.0, 73.0)]
    );
}

#[test]
fn a_fast_cluster_short_of_samples_in_one_group_is_not_judged() {
    let groups = vec![
        vec![30.0, 31.0, 32.0, 70.0, 71.0, 72.0],
        vec![30.5, 31.5, 70.5, 71.5, 72.5],
    ];
    let reference = judged(&groups, GAP, 3);
    assert_eq!(reference, vec![state(70.0, 72.5)]);
    let all: Vec<f64> = groups.iter().flatten().copied().collect();
    assert_eq!(
        unjudged_faster(&all, GAP, &reference[0]),
        vec![state(30.0, 32.0)]
    );
}

#[test]
fn without_a_cluster_of_enough_samples_the_fastest_clusters_are_merged() {
    // Each state holds too few samples of one group alone; the two fastest together
    // hold enough of both.
    let groups = vec![
        vec![30.0, 31.0, 70.0, 1000.0],
        vec![30.5, 70.5, 71.5, 1000.5],
    ];
    let merged = judged(&groups, GAP, 3);
    assert_eq!(merged, vec![state(30.0, 71.5)]);
    let all: Vec<f64> = groups.iter().flatten().copied().collect();
    assert!(unjudged_faster(&all, GAP, &merged[0]).is_empty());
    // Not enough samples even in all clusters together: all of them.
    let few = vec![vec![30.0, 1000.0], vec![70.0]];
    assert_eq!(judged(&few, GAP, 3), vec![state(30.0, 1000.0)]);
}
