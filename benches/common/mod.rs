//! The harness shared by the multi-rank benchmarks (`benches/*.rs`, `harness = false`).
//!
//! A benchmark binary plays two parts:
//!
//! * **Driver** (started by `cargo bench --bench NAME`, no `UPCXX_RANK` in the
//!   environment): it launches one or more jobs of its own executable with
//!   [`run_job`], collects what rank 0 of each job measured, relates results to their
//!   baselines and targets in a [`Report`], prints the table and writes
//!   `<target>/bench-results/NAME.json`.
//! * **Rank** (started by the driver's job, [`rank_job`] returns `Some`): it runs the
//!   measurements of the job named in [`BENCH_JOB`] and rank 0 hands them back with
//!   [`write_rank_results`].
//!
//! Measurements use [`Sampler`]: calibrate an iteration count so that one sample lasts
//! about [`Sampler::sample_time`], run a few warm-up samples, then
//! [`Sampler::samples`] measured samples; the reported value is the median. On a busy
//! machine, interleave the measurements that are compared with each other (one sample of
//! each per round, [`Sampler::rounds`]) so that a slow stretch hits all of them alike.
//!
//! Benchmarks report, they do not assert: a missed target is printed as `MISS` and
//! recorded in the JSON, and the run still succeeds. A rank that finds wrong data
//! (a broken communication path) panics, which fails its job.
//!
//! The harness is `measure.rs` (samples and medians), `jobs.rs` (driver and ranks) and
//! `report.rs` (baselines, targets, table, JSON), re-exported here; `am.rs`, `figures.rs`,
//! `atomics.rs`, `rpc.rs` and `states.rs` hold what several benches measure and how they
//! judge it.
#![allow(dead_code)]

pub(crate) mod am;
pub(crate) mod atomics;
pub(crate) mod figures;
mod jobs;
mod measure;
mod report;
pub(crate) mod rpc;
pub(crate) mod states;

pub(crate) use jobs::*;
pub(crate) use measure::*;
pub(crate) use report::*;
