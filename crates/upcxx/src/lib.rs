//! UPC++ v1.0 for Rust, over the `gex` communication layer.
//!
//! ```
//! use upcxx::GlobalPtr;
//!
//! upcxx::init();
//! let me = upcxx::rank_me();
//! println!("Hello from rank {me} of {}", upcxx::rank_n());
//!
//! // An object in this rank's shared segment, which every rank can reach through a
//! // global pointer (ch. 3, 4).
//! let counter: GlobalPtr<u64> = upcxx::new_(0);
//!
//! // One-sided communication (ch. 8) returns a future, ready at operation completion;
//! // `wait` makes user-level progress until it is (ch. 5).
//! upcxx::rput(41, counter).wait();
//! assert_eq!(upcxx::rget(counter).wait(), 41);
//!
//! // A remote procedure call (ch. 9), here to this rank: the function runs during the
//! // target's user-level progress, and its result (the value of the future it returns)
//! // comes back through a future, to which `then` chains a callback.
//! let read_there = upcxx::rpc(me, |gp: GlobalPtr<u64>| upcxx::rget(gp), (counter,));
//! assert_eq!(read_there.then(|v| v + 1).wait(), 42);
//!
//! upcxx::delete_(counter);
//! upcxx::finalize();
//! ```
//!
//! Started plainly, as here, a program is a job of one rank; `upcxx-run -n N PROGRAM`
//! starts N ranks.
//!
//! Modules follow the chapters of the UPC++ v1.0 specification (draft 10):
//! [`runtime`] (ch. 2), [`global_ptr`] (ch. 3), [`alloc`] (ch. 4), [`future`] (ch. 5),
//! [`serialization`] (ch. 6), [`completion`] (ch. 7), [`rma`] (ch. 8), [`rpc`](mod@rpc) (ch. 9),
//! [`persona`] (ch. 10), [`team`] (ch. 11), [`coll`] (ch. 12), [`atomic`] (ch. 13),
//! [`dist_object`] (ch. 14), [`vis`] (ch. 15), [`device`] (ch. 16). [`porting`] maps
//! the constructs of C++ UPC++ to these, and says where the two differ.
//!
//! Imports point down these layers, lowest first: the runtime state and the per-thread
//! state; global pointers, allocation and serialization; futures; RPC; personas;
//! completions; RMA and non-contiguous RMA; user-level progress; teams and collectives;
//! atomics; distributed objects; memory kinds;
//! and `init`/`finalize`, which compose them.
//! The one exception is futures ↔ progress: waiting on a future makes progress (see
//! [`future`]).

pub mod alloc;
pub mod atomic;
pub mod coll;
pub mod completion;
pub mod device;
pub mod dist_object;
pub mod future;
pub mod global_ptr;
pub mod persona;
#[doc = include_str!("porting.md")]
pub mod porting {}
mod progress;
mod reported;
pub mod rma;
pub mod rpc;
pub mod runtime;
pub mod serialization;
mod sync;
pub mod team;
mod thread;
pub mod vis;

pub use alloc::{
    allocate, allocate_typed, allocate_typed_aligned, deallocate, delete_, delete_array,
    delete_array_unchecked, delete_unchecked, new_, new_array, new_array_with, shared_segment_size,
    shared_segment_used, try_new_, try_new_array, try_new_array_with,
};
pub use atomic::{AtomicDomain, AtomicOp};
pub use coll::{
    barrier_async, barrier_async_with, broadcast, broadcast_buffer, broadcast_buffer_with,
    broadcast_vec, broadcast_vec_with, broadcast_with, op_fast_add, op_fast_bit_and,
    op_fast_bit_or, op_fast_bit_xor, op_fast_max, op_fast_min, op_fast_mul, reduce_all,
    reduce_all_buffer, reduce_all_buffer_with, reduce_all_vec, reduce_all_vec_with,
    reduce_all_with, reduce_one, reduce_one_buffer, reduce_one_buffer_with, reduce_one_vec,
    reduce_one_vec_with, reduce_one_with, ReduceOp,
};
pub use completion::{operation_cx, remote_cx, source_cx};
pub use device::{
    copy, copy_from_host, copy_from_host_with, copy_to_host, copy_to_host_with, copy_with,
    CudaDevice, Device, DeviceAddr, DeviceAllocator, KindError,
};
pub use dist_object::{DistId, DistObject};
pub use future::{make_future, to_future, when_all, Future, FutureValue, Promise};
pub use global_ptr::{
    to_global_ptr, try_global_ptr, AnyKind, CudaDeviceKind, GlobalPtr, Host, KindId, MemoryKind,
};
pub use persona::{
    current_persona, default_persona, default_persona_scope, in_restricted_context,
    liberate_master_persona, lpc, lpc_ff, master_persona, top_persona_scope, Persona, PersonaScope,
    PersonaScopeRef,
};
pub use progress::{
    discharge, discharge_for, progress, progress_required, progress_required_for, ProgressLevel,
};
pub use rma::{
    rget, rget_into, rget_into_raw, rget_into_raw_with, rget_into_vec, rget_into_vec_with,
    rget_into_with, rget_vec, rget_vec_with, rget_with, rput, rput_raw, rput_raw_with, rput_slice,
    rput_slice_with, rput_vec, rput_vec_with, rput_with,
};
pub use rpc::{rpc, rpc_ff, rpc_ff_with, rpc_with};
pub use runtime::{backend, barrier, finalize, init, initialized, rank_me, rank_n, Rank};
pub use serialization::{
    by_ref, make_seq_view, make_view, make_view_iter, ByRef, SeqView, Trivial, View, ViewIter,
};
pub use team::{local_team, local_team_contains, world, EntryBarrier, Team, TeamId, COLOR_NONE};
pub use team::{rpc_ff_in, rpc_ff_in_with, rpc_in, rpc_in_with};
pub use vis::{
    rget_irregular, rget_irregular_lent, rget_irregular_lent_with, rget_irregular_with,
    rget_regular, rget_regular_lent, rget_regular_lent_with, rget_regular_with, rget_strided,
    rget_strided_lent, rget_strided_lent_with, rget_strided_with, rput_irregular,
    rput_irregular_lent, rput_irregular_lent_with, rput_irregular_with, rput_regular,
    rput_regular_lent, rput_regular_lent_with, rput_regular_with, rput_strided, rput_strided_lent,
    rput_strided_lent_with, rput_strided_with,
};

/// Drives a `std::future::Future` to completion on this thread, making user-level
/// progress between polls, so `async` code can `.await` UPC++ futures.
#[track_caller]
pub fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::Release);
        }
    }
    thread::check_not_restricted("block_on");
    let flag = Arc::new(Flag(AtomicBool::new(true)));
    let waker = Waker::from(Arc::clone(&flag));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if flag.0.swap(false, Ordering::AcqRel) {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
        }
        // At least one user-level progress between two polls: a future that becomes
        // ready only by progress (an RPC's reply cell, an operation complete at
        // initiation) wakes its task at once when polled, and the wait below would then
        // return without making any.
        progress(ProgressLevel::User);
        progress::wait_until(|| flag.0.load(Ordering::Acquire));
    }
}
