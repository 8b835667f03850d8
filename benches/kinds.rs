//! Copies between memory kinds (UPC++ ch. 16) against the raw driver copies of the same
//! sizes, measured in the same job: `cargo bench --bench kinds`.
//!
//! The driver runs one 2-rank job of this executable on one host; rank `r` opens CUDA
//! device `r % devices` and a device allocator of its own, and rank 0 measures:
//!
//! | result                        | what                                                    | baseline (target) |
//! |-------------------------------|---------------------------------------------------------|-------------------|
//! | `kinds.copy_h2d_4MiB`         | `upcxx::copy_from_host` of 4 MiB into rank 0's device memory | `raw.memcpy_h2d_4MiB` (≥ 0.9×) |
//! | `kinds.copy_d2h_4MiB`         | `upcxx::copy_to_host` of 4 MiB of rank 0's device memory | `raw.memcpy_d2h_4MiB` (≥ 0.9×) |
//! | `kinds.copy_d2d_peer_4MiB`    | `upcxx::copy` of 4 MiB from rank 0's device memory to rank 1's (mapped here by IPC) | `raw.memcpy_d2d_4MiB` (≥ 0.9×) |
//! | `kinds.copy_d2d_8B`           | the same with 8 bytes, as latency                       | `raw.memcpy_d2d_8B` (≤ 1.3×) |
//!
//! The raw baselines are the driver's own copies (`cuMemcpyHtoD`, `cuMemcpyDtoH`,
//! `cuMemcpyDtoD`, each followed by a synchronization of the stream, as `copy` makes
//! them) between the same host buffer and device memory of rank 0, through `cudarc`.
//! Every copy's data is checked once.
//!
//! Without a CUDA device the bench says so, writes a JSON whose `skipped` names the
//! reason, and succeeds. `PGAS_BENCH_KINDS_DEVICE=emulated` runs the same figures on
//! emulated devices (`gex::kinds::Mk::emulated`, the raw copies then `memcpy`), which
//! checks the bench itself on any machine; its figures say nothing of a GPU.
//!
//! Measured on one NVIDIA H200 (driver 580.159.04, 16 CPUs, both ranks on the one
//! device, the peer's segment mapped by CUDA IPC; medians of 9 samples):
//!
//! | result                     | ours        | driver's own | ratio  | target  |
//! |----------------------------|-------------|--------------|--------|---------|
//! | `kinds.copy_h2d_4MiB`      | 12.56 GB/s  | 13.14 GB/s   | 0.956x | ≥ 0.9x  |
//! | `kinds.copy_d2h_4MiB`      | 13.04 GB/s  | 12.93 GB/s   | 1.009x | ≥ 0.9x  |
//! | `kinds.copy_d2d_peer_4MiB` | 370.0 GB/s  | 377.8 GB/s   | 0.979x | ≥ 0.9x  |
//! | `kinds.copy_d2d_8B`        | 10.24 µs    | 9.83 µs      | 1.041x | ≤ 1.3x  |
//!
//! The host buffer is pageable memory, which the driver stages through buffers of its
//! own in both columns; the 8-byte time is, in both columns, mostly the driver's copy
//! and the synchronization of its stream.

mod common;

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Duration;

use common::figures::{self, page_aligned, Bench, Unit};
use common::{time_iters, RankJob, Report, Sampler, TargetIs};
use cudarc::driver::sys;
use gex::kinds::Mk;
use serde_json::json;
use upcxx::{
    copy, copy_from_host, copy_to_host, CudaDevice, CudaDeviceKind, DeviceAllocator, EntryBarrier,
    GlobalPtr,
};

const BENCH: &str = "kinds";
const JOB: &str = "kinds";
const BIG: usize = 4 << 20;
/// The environment variable that runs the bench on emulated devices.
const DEVICE_VAR: &str = "PGAS_BENCH_KINDS_DEVICE";

/// This rank's device memory that the others copy into, for them to ask for.
static MINE: OnceLock<GlobalPtr<u8, CudaDeviceKind>> = OnceLock::new();

fn mine() -> GlobalPtr<u8, CudaDeviceKind> {
    *MINE.get().expect("set before the barrier")
}

fn emulated() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(DEVICE_VAR).is_ok_and(|v| v == "emulated"))
}

/// A raw copy of `len` bytes by the driver (or `memcpy` on an emulated device).
#[derive(Clone, Copy)]
enum Raw {
    HtoD,
    DtoH,
    DtoD,
}

/// Copies `len` bytes with the driver: `host` ↔ `dev`, or `dev` → `dev2`.
fn raw_copy(kind: Raw, host: *mut u8, dev: u64, dev2: u64, len: usize) {
    if emulated() {
        let (from, to) = match kind {
            Raw::HtoD => (host as *const u8, dev as *mut u8),
            Raw::DtoH => (dev as *const u8, host),
            Raw::DtoD => (dev as *const u8, dev2 as *mut u8),
        };
        // SAFETY: emulated device memory is host memory of this process (mapped by
        // its allocator), `len` bytes at each end, the ends disjoint.
        unsafe { std::ptr::copy_nonoverlapping(black_box(from), black_box(to), len) };
        return;
    }
    // SAFETY: `dev` and `dev2` are `len` bytes of rank 0's device memory and `host` a
    // live host buffer of `len` bytes; the copies are waited for before returning.
    let r = unsafe {
        match kind {
            Raw::HtoD => sys::cuMemcpyHtoD_v2(dev, host as *const _, len),
            Raw::DtoH => sys::cuMemcpyDtoH_v2(host as *mut _, dev, len),
            Raw::DtoD => sys::cuMemcpyDtoD_v2(dev2, dev, len),
        }
    };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "raw copy");
    // SAFETY: the null stream of the current context ([`bind_primary_context`]).
    let r = unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "raw copy's synchronization");
}

/// Makes device `id`'s primary context (the one the kind allocates in) current on this
/// thread for the raw copies: the kind leaves the thread's current context as it was.
fn bind_primary_context(id: i32) {
    let (mut dev, mut ctx): (sys::CUdevice, sys::CUcontext) = (0, std::ptr::null_mut());
    // SAFETY: out-pointers; `id` is a device the kind opened, so the driver is
    // initialized. The context stays retained for the process.
    let r = unsafe {
        match sys::cuDeviceGet(&mut dev, id) {
            sys::CUresult::CUDA_SUCCESS => match sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) {
                sys::CUresult::CUDA_SUCCESS => sys::cuCtxSetCurrent(ctx),
                e => e,
            },
            e => e,
        }
    };
    assert_eq!(
        r,
        sys::CUresult::CUDA_SUCCESS,
        "the device's primary context"
    );
}

fn rank_main(job: RankJob) {
    upcxx::init();
    let me = upcxx::rank_me();
    let mut dev = if emulated() {
        CudaDevice::with_kind(Mk::emulated(0, 256 << 20))
    } else {
        let id = me as i32 % CudaDevice::device_count();
        let dev = CudaDevice::new(id).expect("the CUDA device");
        bind_primary_context(id);
        dev
    };
    let alloc = DeviceAllocator::new(&mut dev, 64 << 20).expect("the device segment");
    let mine = alloc.allocate::<u8>(BIG);
    let scratch = alloc.allocate::<u8>(BIG);
    MINE.set(mine).expect("one job per process");
    upcxx::barrier();
    let peer = upcxx::rpc(1, self::mine, ()).wait();
    let host = page_aligned(BIG, 0x3c);
    let host_ptr = host.as_mut_ptr();
    let (d0, d1) = (
        DeviceAllocator::<CudaDevice>::local(mine),
        DeviceAllocator::<CudaDevice>::local(scratch),
    );
    let sampler = Sampler::from_env();
    let figure = |name: &str, unit: Unit, mut op: Box<dyn FnMut()>| {
        Bench::solo(name.to_string(), unit, move |iters| {
            time_iters(iters, &mut op)
        })
    };
    // Every rank builds the figures (the phases must match); rank 0 alone runs them.
    let src: &'static [u8] = &*page_aligned(BIG, 0x5a);
    let benches = vec![
        figure(
            "kinds.copy_h2d_4MiB",
            Unit::Bandwidth(BIG),
            Box::new(move || copy_from_host(src, mine).wait()),
        ),
        figure(
            "raw.memcpy_h2d_4MiB",
            Unit::Bandwidth(BIG),
            Box::new(move || raw_copy(Raw::HtoD, src.as_ptr() as *mut u8, d0, 0, BIG)),
        ),
        figure(
            "kinds.copy_d2h_4MiB",
            Unit::Bandwidth(BIG),
            Box::new(move || {
                // SAFETY: the page-aligned buffer lives for the process; this rank
                // alone uses it, one copy at a time.
                let h = unsafe { std::slice::from_raw_parts_mut(host_ptr, BIG) };
                copy_to_host(mine, h).wait()
            }),
        ),
        figure(
            "raw.memcpy_d2h_4MiB",
            Unit::Bandwidth(BIG),
            Box::new(move || raw_copy(Raw::DtoH, host_ptr, d0, 0, BIG)),
        ),
        figure(
            "kinds.copy_d2d_peer_4MiB",
            Unit::Bandwidth(BIG),
            Box::new(move || copy(mine, peer, BIG).wait()),
        ),
        figure(
            "raw.memcpy_d2d_4MiB",
            Unit::Bandwidth(BIG),
            Box::new(move || raw_copy(Raw::DtoD, host_ptr, d0, d1, BIG)),
        ),
        figure(
            "kinds.copy_d2d_8B",
            Unit::Latency,
            Box::new(move || copy(mine, peer, 8).wait()),
        ),
        figure(
            "raw.memcpy_d2d_8B",
            Unit::Latency,
            Box::new(move || raw_copy(Raw::DtoD, host_ptr, d0, d1, 8)),
        ),
    ];
    let results = figures::measure(me, sampler, upcxx::barrier, benches);
    // The data of each path, checked once: what rank 0 last put into rank 1's memory
    // is its own device memory, which holds the host source.
    if me == 0 {
        let mut back = vec![0u8; BIG];
        copy_to_host(peer, &mut back).wait();
        assert!(
            back.iter().all(|&b| b == 0x5a),
            "the peer copy moved wrong data"
        );
        common::write_rank_results(&job, &results);
    }
    upcxx::barrier();
    alloc.deallocate(mine);
    alloc.deallocate(scratch);
    drop(alloc);
    dev.destroy(EntryBarrier::User);
    upcxx::finalize();
}

fn driver() -> i32 {
    let machine = common::machine_note();
    let mut report = Report::new(BENCH, 2);
    if !emulated() && Mk::cuda_device_count() == 0 {
        let why = match Mk::cuda(0) {
            Err(e) => e.to_string(),
            Ok(_) => "no CUDA device".into(),
        };
        eprintln!("kinds bench: skipped: no CUDA device ({why})");
        report.section("skipped", json!(why));
        return report.finish("kinds benchmarks: skipped (no CUDA device)", &[]);
    }
    let sampler = Sampler::from_env();
    let on = if emulated() {
        "emulated devices"
    } else {
        "CUDA devices"
    };
    eprintln!(
        "kinds bench: a 2-rank job on {on}; {} samples of ~{} ms per figure; {machine}",
        sampler.samples,
        sampler.sample_time.as_millis()
    );
    match common::run_job(BENCH, JOB, 2, 64 << 20, Duration::from_secs(600)) {
        Ok(results) => report.add(results),
        Err(e) => report.errors.push(e),
    }
    let min = Some((0.9, TargetIs::Min));
    report.relate("kinds.copy_h2d_4MiB", "raw.memcpy_h2d_4MiB", min);
    report.relate("kinds.copy_d2h_4MiB", "raw.memcpy_d2h_4MiB", min);
    report.relate("kinds.copy_d2d_peer_4MiB", "raw.memcpy_d2d_4MiB", min);
    report.relate(
        "kinds.copy_d2d_8B",
        "raw.memcpy_d2d_8B",
        Some((1.3, TargetIs::Max)),
    );
    let mut notes = Vec::new();
    if emulated() {
        notes.push(format!(
            "{DEVICE_VAR}=emulated: emulated devices, raw copies by memcpy; these figures \
             check the bench, not a GPU"
        ));
    }
    report.finish(&format!("kinds benchmarks: 2 ranks on {on}"), &notes)
}

fn main() {
    if let Some(job) = common::rank_job(JOB) {
        rank_main(job);
        return;
    }
    std::process::exit(driver());
}
