//! A 1-D heat-equation stencil (Jacobi iteration) with halo exchange by one-sided puts.
//!
//! Run it with `UPCXX_RANKS=4 cargo run --release --example stencil [STEPS]` (default
//! 1000 time steps).
//!
//! The rod and its steps are in `stencil/rod.rs` (shared with the `app` bench): each
//! rank updates its block of the rod and puts its edge values into its neighbours'
//! ghost cells, each put with a `remote_cx::as_rpc` completion that counts the arrival,
//! so no barrier is needed per step.
//!
//! At the end rank 0 fetches every block with `rget_into` and compares the result with
//! the same iteration run serially on the whole rod, printing `verified` last.

#[path = "stencil/rod.rs"]
mod rod;

use rod::{Rod, LOCAL};

/// Time steps, unless the first argument says otherwise.
const STEPS: usize = 1000;

fn main() {
    let steps = std::env::args().nth(1).map_or(STEPS, |s| {
        s.trim()
            .parse()
            .expect("stencil: STEPS must be a number of time steps")
    });
    upcxx::init();
    let mut rod = Rod::new();
    rod.steps(steps);
    upcxx::barrier();
    if upcxx::rank_me() == 0 {
        let ranks = upcxx::rank_n();
        let [q1, q2, q3] = rod.verify();
        println!(
            "stencil: {ranks} ranks x {LOCAL} points ({} in all), {steps} steps; the parallel \
             result equals the serial one; temperature at the rod's quarter points: \
             {q1:.3} {q2:.3} {q3:.3}",
            Rod::points()
        );
        println!("verified");
    }
    rod.free();
    upcxx::finalize();
}
