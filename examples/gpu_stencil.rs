//! The 1-D heat-equation stencil of `stencil.rs` with the rod in device memory (UPC++
//! ch. 16): each rank keeps its block on a GPU, updates it there with a kernel, and
//! moves its edge values into its neighbours' ghost cells on their GPUs with
//! `upcxx::copy`, device to device, each with a `remote_cx::as_rpc` completion that
//! counts the arrival (so no barrier per step). A copy to another host's device is in
//! flight when `copy` returns: the two of a step go on together, and the step ends when
//! both are complete (their operation completions, conjoined), as a copy must be before
//! its destination's owner may free the memory.
//!
//! Run it with `UPCXX_RANKS=4 cargo run --release --example gpu_stencil [STEPS]`
//! (default 200 steps): rank `r` uses CUDA device `r % devices`. Without a CUDA device
//! on every rank it prints why and `skipped`. With `GPU_STENCIL_DEVICE=emulated` (read
//! by rank 0) it runs on emulated devices (`gex::kinds::Mk::emulated`), each step's update made on the
//! host between two copies, so the data movement is checked anywhere.
//!
//! At the end rank 0 copies every block to the host and compares it with the same
//! iteration run serially on the host (to 1e-9: a GPU's fused multiply-add rounds
//! differently), printing `verified` last.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use gex::kinds::Mk;
use upcxx::{
    copy_from_host, copy_to_host, copy_with, operation_cx, remote_cx, CudaDevice, CudaDeviceKind,
    DeviceAllocator, EntryBarrier, Future, GlobalPtr, ProgressLevel,
};

/// Points per rank.
const LOCAL: usize = 4096;
/// Time steps, unless the first argument says otherwise.
const STEPS: usize = 200;
/// Diffusion number (stable for ≤ 0.5).
const ALPHA: f64 = 0.25;
const LEFT_END: f64 = 100.0;
const RIGHT_END: f64 = -20.0;

/// The kernel: `out[i + 1] = c + alpha * (l - 2c + r)` for `i < n`, with `l, c, r` =
/// `inp[i], inp[i + 1], inp[i + 2]` (both arrays have a ghost cell at either end).
/// PTX, loaded by the driver: no CUDA compiler is needed to build or run.
const PTX: &str = r#"
.version 6.0
.target sm_50
.address_size 64

.visible .entry jacobi(
    .param .u64 out_p,
    .param .u64 in_p,
    .param .u32 n_p,
    .param .f64 alpha_p
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    .reg .f64 %fd<8>;

    ld.param.u64 %rd1, [out_p];
    ld.param.u64 %rd2, [in_p];
    ld.param.u32 %r1, [n_p];
    ld.param.f64 %fd1, [alpha_p];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd2;
    cvta.to.global.u64 %rd4, %rd1;
    mul.wide.u32 %rd5, %r5, 8;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f64 %fd2, [%rd6];
    ld.global.f64 %fd3, [%rd6+8];
    ld.global.f64 %fd4, [%rd6+16];
    add.f64 %fd5, %fd2, %fd4;
    fma.rn.f64 %fd6, %fd3, 0dC000000000000000, %fd5;
    fma.rn.f64 %fd7, %fd1, %fd6, %fd3;
    add.s64 %rd7, %rd4, %rd5;
    st.global.f64 [%rd7+8], %fd7;
DONE:
    ret;
}
"#;

/// This rank's two device buffers, for the other ranks to ask for.
static BUFFERS: OnceLock<[GlobalPtr<f64, CudaDeviceKind>; 2]> = OnceLock::new();

fn buffers() -> [GlobalPtr<f64, CudaDeviceKind>; 2] {
    *BUFFERS.get().expect("set before the barrier")
}

/// Ghost values received from the left and the right neighbour.
static FROM_LEFT: AtomicU64 = AtomicU64::new(0);
static FROM_RIGHT: AtomicU64 = AtomicU64::new(0);

fn ghost_arrived(from_left: bool) {
    let counter = if from_left { &FROM_LEFT } else { &FROM_RIGHT };
    counter.fetch_add(1, Ordering::Release);
}

fn wait_for(counter: &AtomicU64, n: usize) {
    while counter.load(Ordering::Acquire) < n as u64 {
        upcxx::progress(ProgressLevel::User);
    }
}

fn initial(i: usize) -> f64 {
    ((i * 37) % 101) as f64 - 50.0
}

/// How a block's step is computed: a kernel on the GPU, or on the host for an
/// emulated device (whose memory only copies reach).
enum Stepper {
    Cuda {
        stream: Arc<CudaStream>,
        kernel: CudaFunction,
    },
    Host,
}

impl Stepper {
    /// `next[1..=LOCAL]` from `cur[0..LOCAL + 2]`, both this rank's device arrays.
    fn step(&self, cur: GlobalPtr<f64, CudaDeviceKind>, next: GlobalPtr<f64, CudaDeviceKind>) {
        match self {
            Stepper::Cuda { stream, kernel } => {
                let (out, inp) = (
                    DeviceAllocator::<CudaDevice>::local(next),
                    DeviceAllocator::<CudaDevice>::local(cur),
                );
                let (n, alpha) = (LOCAL as u32, ALPHA);
                let mut launch = stream.launch_builder(kernel);
                launch.arg(&out).arg(&inp).arg(&n).arg(&alpha);
                let cfg = LaunchConfig {
                    grid_dim: (LOCAL.div_ceil(256) as u32, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: the kernel reads LOCAL + 2 and writes LOCAL values of arrays
                // of LOCAL + 2 f64 in this rank's device segment, as its parameters say.
                unsafe { launch.launch(cfg) }.expect("gpu_stencil: the kernel's launch");
                stream.synchronize().expect("gpu_stencil: the kernel");
            }
            Stepper::Host => {
                let mut c = vec![0.0; LOCAL + 2];
                copy_to_host(cur, &mut c).wait();
                let n: Vec<f64> = (0..LOCAL)
                    .map(|i| c[i + 1] + ALPHA * (c[i] - 2.0 * c[i + 1] + c[i + 2]))
                    .collect();
                copy_from_host(&n, next.add(1)).wait();
            }
        }
    }
}

/// The serial iteration on the host: the rod after `steps` steps.
fn serial(points: usize, steps: usize) -> Vec<f64> {
    let mut cur: Vec<f64> = std::iter::once(LEFT_END)
        .chain((0..points).map(initial))
        .chain(std::iter::once(RIGHT_END))
        .collect();
    let mut next = cur.clone();
    for _ in 0..steps {
        for i in 1..=points {
            next[i] = cur[i] + ALPHA * (cur[i - 1] - 2.0 * cur[i] + cur[i + 1]);
        }
        std::mem::swap(&mut cur, &mut next);
    }
    cur[1..=points].to_vec()
}

fn main() {
    let steps = std::env::args().nth(1).map_or(STEPS, |s| {
        s.trim()
            .parse()
            .expect("gpu_stencil: STEPS must be a number of time steps")
    });
    upcxx::init();
    // Rank 0's environment decides for all: a launcher need not pass it to every host.
    let asked = std::env::var("GPU_STENCIL_DEVICE").is_ok_and(|v| v == "emulated");
    let emulated = upcxx::broadcast(u8::from(asked), 0, upcxx::world()).wait() != 0;
    let me = upcxx::rank_me();
    let ranks = upcxx::rank_n();
    let count = CudaDevice::device_count();
    // Every rank must have a device: agree on it before the collective calls.
    let fewest = upcxx::reduce_all(count, upcxx::op_fast_min, upcxx::world()).wait();
    if !emulated && fewest == 0 {
        if me == 0 {
            let why = match CudaDevice::new(0) {
                Err(e) => e.to_string(),
                Ok(mut d) => {
                    d.destroy(EntryBarrier::None);
                    "a rank sees no CUDA device".into()
                }
            };
            println!("gpu_stencil: no CUDA device on every rank ({why})");
            println!("skipped");
        } else {
            let _ = CudaDevice::new(CudaDevice::INVALID_DEVICE_ID);
        }
        upcxx::finalize();
        return;
    }
    let (mut dev, stepper) = if emulated {
        let dev = CudaDevice::with_kind(Mk::emulated(0, 64 << 20));
        (dev, Stepper::Host)
    } else {
        let id = me as i32 % count;
        let dev = CudaDevice::new(id).expect("gpu_stencil: open the CUDA device");
        let ctx = CudaContext::new(id as usize).expect("gpu_stencil: the device's context");
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(PTX))
            .expect("gpu_stencil: load the kernel");
        let kernel = module
            .load_function("jacobi")
            .expect("gpu_stencil: the kernel");
        let stream = ctx.default_stream();
        (dev, Stepper::Cuda { stream, kernel })
    };
    let alloc = DeviceAllocator::new(&mut dev, 4 * (LOCAL + 2) * 8 + (1 << 16))
        .expect("gpu_stencil: the device segment");
    let bufs = [
        alloc.allocate::<f64>(LOCAL + 2),
        alloc.allocate::<f64>(LOCAL + 2),
    ];
    // The block at time 0 and its ghost cells (the rod's ends, or the neighbours'
    // first values), in both buffers.
    let base = me as usize * LOCAL;
    let mut start = vec![0.0; LOCAL + 2];
    start[0] = if me == 0 { LEFT_END } else { initial(base - 1) };
    start[LOCAL + 1] = if me + 1 == ranks {
        RIGHT_END
    } else {
        initial(base + LOCAL)
    };
    for (i, x) in start[1..=LOCAL].iter_mut().enumerate() {
        *x = initial(base + i);
    }
    for b in bufs {
        copy_from_host(&start, b).wait();
    }
    BUFFERS.set(bufs).expect("one rod per process");
    upcxx::barrier();
    let all: Vec<[GlobalPtr<f64, CudaDeviceKind>; 2]> = (0..ranks)
        .map(|r| upcxx::rpc(r, buffers, ()).wait())
        .collect();
    upcxx::barrier();
    for t in 0..steps {
        let (cur, next) = (bufs[t % 2], bufs[(t + 1) % 2]);
        if me > 0 {
            wait_for(&FROM_LEFT, t);
        }
        if me + 1 < ranks {
            wait_for(&FROM_RIGHT, t);
        }
        stepper.step(cur, next);
        // Edge values of step t + 1 into the neighbours' ghost cells of their buffer
        // for it, device to device.
        let mut copies: Vec<Future<()>> = Vec::with_capacity(2);
        if me > 0 {
            let theirs = all[me as usize - 1][(t + 1) % 2].add(LOCAL + 1);
            copies.push(copy_with(
                next.add(1),
                theirs,
                1,
                remote_cx::as_rpc(ghost_arrived, (false,)) | operation_cx::as_future(),
            ));
        }
        if me + 1 < ranks {
            let theirs = all[me as usize + 1][(t + 1) % 2];
            copies.push(copy_with(
                next.add(LOCAL),
                theirs,
                1,
                remote_cx::as_rpc(ghost_arrived, (true,)) | operation_cx::as_future(),
            ));
        }
        upcxx::when_all(copies).wait();
    }
    upcxx::barrier();
    if me == 0 {
        let mut rod = Vec::with_capacity(ranks as usize * LOCAL);
        for b in &all {
            let mut block = vec![0.0; LOCAL + 2];
            copy_to_host(b[steps % 2], &mut block).wait();
            rod.extend_from_slice(&block[1..=LOCAL]);
        }
        let want = serial(rod.len(), steps);
        let worst = rod
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= 1e-9,
            "gpu_stencil: the rod differs from the serial result by {worst}"
        );
        let kind = if emulated {
            "emulated devices"
        } else {
            "CUDA devices"
        };
        println!(
            "gpu_stencil: {ranks} ranks x {LOCAL} points on {kind}, {steps} steps; the \
             result equals the serial one (largest difference {worst:.1e})"
        );
        println!("verified");
    }
    upcxx::barrier();
    for b in bufs {
        alloc.deallocate(b);
    }
    drop(alloc);
    dev.destroy(EntryBarrier::User);
    upcxx::finalize();
}
