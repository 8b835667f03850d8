//! Workspace-level package: it owns the examples (`examples/`), the multi-rank
//! benchmarks (`benches/`) and the integration tests (`tests/`) of the PGAS stack.
//! The libraries themselves live in `crates/`.
pub use gex;
pub use upcxx;
