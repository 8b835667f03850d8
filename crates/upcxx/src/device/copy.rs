//! `copy` between memory of any kinds on any ranks (UPC++ spec §16.1.3); see the parent
//! module, "Copies". A leaf of `device`.

use std::rc::Rc;

use bytemuck::Pod;
use gex::kinds::{DeviceAddr, KindError, Transfer};

use crate::completion::{
    operation_cx, CompletionEvents, Completions, FutureList, HasOperation, HasRemote, HasSource,
    Returned,
};
use crate::global_ptr::{GlobalPtr, KindId, MemoryKind};
use crate::runtime::state::{rt, Rank, Setup};

/// The completion events of [`copy_with`] and its host forms (§16.1.3 ¶5–¶7): source,
/// remote and operation, no values.
#[derive(Debug)]
pub enum CopyEvents {}

impl CompletionEvents for CopyEvents {
    const NAME: &'static str = "copy";
    type OpValues = ();
}
impl HasSource for CopyEvents {}
impl HasRemote for CopyEvents {}
impl HasOperation for CopyEvents {}

/// Copies `count` values from `src` to `dest`, memory of any kinds on any ranks
/// (UPC++ `copy(global_ptr src, global_ptr dest, count)`, §16.1.3), with the default
/// completion: a future of operation completion.
///
/// # Panics
/// If either pointer is null while `count` is not 0, if a range is not memory of its
/// kind on its rank (outside every segment), if the ranges overlap, or before `init`.
#[track_caller]
pub fn copy<T: Pod, Ks: MemoryKind, Kd: MemoryKind>(
    src: GlobalPtr<T, Ks>,
    dest: GlobalPtr<T, Kd>,
    count: usize,
) -> crate::Future<()> {
    copy_with(src, dest, count, operation_cx::as_future())
}

/// [`copy`] with completions (§16.1.3): `source_cx`, `remote_cx` (run by `dest`'s
/// owner, ¶4) and `operation_cx` requests, with operation or remote completion among
/// them (§7.2.1 ¶2).
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_with<T: Pod, Ks: MemoryKind, Kd: MemoryKind, C: Completions<CopyEvents>>(
    src: GlobalPtr<T, Ks>,
    dest: GlobalPtr<T, Kd>,
    count: usize,
    cxs: C,
) -> Returned<C, CopyEvents> {
    const CALL: &str = "copy";
    const {
        assert!(
            crate::completion::requests_op_or_remote::<CopyEvents, C>(),
            "copy needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let rt = start(CALL);
    let len = bytes::<T>(CALL, count);
    if len > 0 {
        let (s, d) = (end(CALL, src), end(CALL, dest));
        if s.rank == d.rank && s.kind == d.kind && s.addr < d.addr + len && d.addr < s.addr + len {
            panic!("upcxx::{CALL}: the {len}-byte ranges at {src} and {dest} overlap");
        }
        if let Some(lent) = Lent::of(rt, d, s, len) {
            // Armed first, so that a request that fails leaves nothing in flight.
            let (futures, armed) = cxs.arm();
            let (mut lc, mut op) = reported(rt, d, s, len, || lent.start(rt, d, s, len));
            if C::SOURCE_AT_RETURN {
                // Source completion before return (§7.1 ¶11–¶12): a put's local
                // completion, a get's whole transfer (it reads its source until then).
                let read = lc.as_mut().unwrap_or(&mut op);
                crate::progress::wait_internal(std::mem::take(read));
            }
            let target = dest.where_();
            match lc {
                Some(mut lc) => crate::completion::notify_when_outgoing_from_source(
                    move || lc.test(),
                    move || op.test(),
                    target,
                    armed,
                    || (),
                ),
                // A get reads its source until it completes: source completion is
                // operation completion.
                None => crate::completion::notify_when_outgoing_from_source(
                    move || op.test(),
                    || true,
                    target,
                    armed,
                    || (),
                ),
            }
            return futures.into_return();
        }
        if let Some(device) = Device::of(rt, d, s, len) {
            // Checked first, so that a request that fails moves nothing.
            cxs.check_armable();
            let started = reported(rt, d, s, len, || device.start(CALL, rt, d, s, len));
            return finish(CALL, started, dest.where_(), cxs);
        }
        reported(rt, d, s, len, || between(CALL, rt, d, s, len));
    }
    cxs.completed_at_initiation(dest.where_(), ()).into_return()
}

/// A copy with a device end that gex may leave in flight (`gex::kinds::put_nb`,
/// `get_nb`, `copy_nb`): when the device end's rank is reached by messages (another
/// host, or a segment this process does not map), the copy completes with the owner's
/// answers, after the call returns (§16.1.3 ¶3: `copy` initiates). Its other end is
/// memory this process reaches: device memory it reaches, or host memory it maps
/// (segment memory, mapped for the job, lent to the transfer meanwhile as `Lent`'s).
enum Device {
    /// Host memory mapped here at this address, to a device.
    Put(usize),
    /// From a device, into host memory mapped here at this address.
    Get(usize),
    /// Between devices.
    Copy,
}

impl Device {
    fn of(rt: &Setup, dst: End, src: End, len: usize) -> Option<Device> {
        match (dst.kind == KindId::Host, src.kind == KindId::Host) {
            (false, true) => rt.local_range(src.rank, src.addr, len).map(Device::Put),
            (true, false) => rt.local_range(dst.rank, dst.addr, len).map(Device::Get),
            (false, false) => Some(Device::Copy),
            (true, true) => None,
        }
    }

    /// Starts the transfer; whether it has read its source when it returns (a put's
    /// messages copy it), and the transfer.
    #[track_caller]
    fn start(self, call: &str, rt: &Setup, dst: End, src: End, len: usize) -> (bool, Transfer) {
        let (dev, team) = (|a: usize| a as DeviceAddr, &rt.team);
        let started = match self {
            Device::Put(from) => {
                // SAFETY: inside a mapped segment (`local_range`), mapped for the job.
                let bytes = unsafe { std::slice::from_raw_parts(from as *const u8, len) };
                return put_started(call, rt, dst, bytes);
            }
            // SAFETY: as above; the mapped end is lent to the transfer until its
            // completions say it is done with it.
            Device::Get(to) => unsafe {
                gex::kinds::get_nb(team, src.rank, dev(src.addr), to as *mut u8, len)
                    .map(|t| (false, t))
            },
            Device::Copy => {
                gex::kinds::copy_nb(team, dst.rank, dev(dst.addr), src.rank, dev(src.addr), len)
                    .map(|t| (true, t))
            }
        };
        started.unwrap_or_else(|e| failed(call, e))
    }
}

/// Starts putting `bytes` to `to`, device memory: the put's messages copy them, so its
/// source is read at return (`Device`).
#[track_caller]
fn put_started(call: &str, rt: &Setup, to: End, bytes: &[u8]) -> (bool, Transfer) {
    let t = gex::kinds::put_nb(&rt.team, to.rank, to.addr as DeviceAddr, bytes);
    (true, t.unwrap_or_else(|e| failed(call, e)))
}

/// The completions of a device transfer gex started, whose requests were checked
/// (`check_armable`): at initiation if it was complete then, else armed now and notified
/// by progress once it is (source completion at once if the transfer read its source
/// during the call, else with operation completion). An error the owner reports then
/// fails the call there, as it would have here.
#[track_caller]
fn finish<C: Completions<CopyEvents>>(
    call: &'static str,
    (source_read, transfer): (bool, Transfer),
    target: Rank,
    cxs: C,
) -> Returned<C, CopyEvents> {
    if transfer.completed_at_initiation() {
        return cxs.completed_at_initiation(target, ()).into_return();
    }
    if C::SOURCE_AT_RETURN && !source_read {
        // Source completion before return (§7.1 ¶11–¶12): the transfer reads its source
        // until it completes.
        crate::rpc::send_unsent();
        if let Err(e) = transfer.wait() {
            failed(call, e);
        }
        return cxs.completed_at_initiation(target, ()).into_return();
    }
    let (futures, armed) = cxs.arm();
    let transfer = Rc::new(transfer);
    let read = transfer.clone();
    crate::completion::notify_when_outgoing_from_source(
        move || source_read || read.test().is_some(),
        move || match transfer.test() {
            None => false,
            Some(Ok(())) => true,
            Some(Err(e)) => failed(call, e),
        },
        target,
        armed,
        || (),
    );
    futures.into_return()
}

/// A copy between host memory that this process maps and host memory it does not (of
/// another host): one put or get through gex, which may complete after the call
/// returns, as any copy may (§16.1.3 ¶3), the mapped end lent to it meanwhile. It is
/// segment memory, mapped for the life of the job; what the program does with it
/// before the completions say so is the program's to order, as for memory other
/// ranks' transfers reach.
enum Lent {
    /// From the source, mapped here at this address.
    Put(usize),
    /// Into the destination, mapped here at this address.
    Get(usize),
}

impl Lent {
    fn of(rt: &Setup, dst: End, src: End, len: usize) -> Option<Lent> {
        if dst.kind != KindId::Host || src.kind != KindId::Host {
            return None;
        }
        let from = rt.local_range(src.rank, src.addr, len);
        let to = rt.local_range(dst.rank, dst.addr, len);
        match (from, to) {
            (Some(from), None) => Some(Lent::Put(from)),
            (None, Some(to)) => Some(Lent::Get(to)),
            _ => None,
        }
    }

    /// Starts the transfer: its local-completion event (a put's; none for a get, whose
    /// source is read until it completes) and its operation event.
    #[track_caller]
    fn start(self, rt: &Setup, dst: End, src: End, len: usize) -> (Option<gex::Event>, gex::Event) {
        let mut lc = gex::Event::invalid();
        let reads_until_done = matches!(self, Lent::Get(_));
        // SAFETY: (both arms) the mapped end is segment memory, mapped for the job
        // (`local_range`), valid until the events say the transfer is done with it.
        let started = unsafe {
            match self {
                Lent::Put(from) => {
                    let bytes = std::slice::from_raw_parts(from as *const u8, len);
                    let lc = gex::Lc::Event(&mut lc);
                    rt.team
                        .put_nb(dst.rank, dst.addr, bytes, lc, gex::Flags::NONE)
                }
                Lent::Get(to) => {
                    rt.team
                        .get_nb(to as *mut u8, src.rank, src.addr, len, gex::Flags::NONE)
                }
            }
        };
        let op = started.unwrap_or_else(|_| unreachable!("gex returns NoOp only for IMMEDIATE"));
        ((!reads_until_done).then_some(lc), op)
    }
}

/// Copies `src`, host memory of this process, to `dest`, memory of any kind on any
/// rank (UPC++ `copy(T const *src, global_ptr dest, count)`, §16.1.3), with the default
/// completion. `src` is borrowed only for the call.
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_from_host<T: Pod, Kd: MemoryKind>(
    src: &[T],
    dest: GlobalPtr<T, Kd>,
) -> crate::Future<()> {
    copy_from_host_with(src, dest, operation_cx::as_future())
}

/// [`copy_from_host`] with completions, as [`copy_with`].
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_from_host_with<T: Pod, Kd: MemoryKind, C: Completions<CopyEvents>>(
    src: &[T],
    dest: GlobalPtr<T, Kd>,
    cxs: C,
) -> Returned<C, CopyEvents> {
    const CALL: &str = "copy";
    const {
        assert!(
            crate::completion::requests_op_or_remote::<CopyEvents, C>(),
            "copy needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let rt = start(CALL);
    let bytes: &[u8] = bytemuck::cast_slice(src);
    if !bytes.is_empty() {
        let (d, s) = (end(CALL, dest), End::slice(rt, bytes));
        if d.kind != KindId::Host {
            // A put's messages copy `src`: it is free at return, and the put may be in
            // flight (`Device`).
            cxs.check_armable();
            let started = reported(rt, d, s, bytes.len(), || put_started(CALL, rt, d, bytes));
            return finish(CALL, started, dest.where_(), cxs);
        }
        reported(rt, d, s, bytes.len(), || write(CALL, rt, d, bytes));
    }
    cxs.completed_at_initiation(dest.where_(), ()).into_return()
}

/// Copies `src`, memory of any kind on any rank, into `dest`, host memory of this
/// process (UPC++ `copy(global_ptr src, T *dest, count)`, §16.1.3), with the default
/// completion. `dest` is written before the call returns.
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_to_host<T: Pod, Ks: MemoryKind>(
    src: GlobalPtr<T, Ks>,
    dest: &mut [T],
) -> crate::Future<()> {
    copy_to_host_with(src, dest, operation_cx::as_future())
}

/// [`copy_to_host`] with completions, as [`copy_with`]; a remote-completion RPC runs
/// on this process (¶4).
///
/// # Panics
/// As [`copy`].
#[track_caller]
pub fn copy_to_host_with<T: Pod, Ks: MemoryKind, C: Completions<CopyEvents>>(
    src: GlobalPtr<T, Ks>,
    dest: &mut [T],
    cxs: C,
) -> Returned<C, CopyEvents> {
    const CALL: &str = "copy";
    const {
        assert!(
            crate::completion::requests_op_or_remote::<CopyEvents, C>(),
            "copy needs an operation_cx or remote_cx request (UPC++ spec §7.2.1)"
        )
    };
    let rt = start(CALL);
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(dest);
    if !bytes.is_empty() {
        let (d, s) = (End::slice(rt, bytes), end(CALL, src));
        let n = bytes.len();
        reported(rt, d, s, n, || read(CALL, rt, s, bytes));
    }
    cxs.completed_at_initiation(rt.rank, ()).into_return()
}

/// Pieces of a copy that bounces through this process's memory.
const BOUNCE: usize = 4 << 20;

/// One end of a copy: memory of `kind` at `addr` (owner space) of `rank`.
#[derive(Clone, Copy)]
struct End {
    rank: Rank,
    addr: usize,
    kind: KindId,
}

impl End {
    /// A host slice of this process, as an end.
    fn slice(rt: &Setup, bytes: &[u8]) -> End {
        End {
            rank: rt.rank,
            addr: bytes.as_ptr() as usize,
            kind: KindId::Host,
        }
    }

    /// The end as a GASP pointer (rank and owner-space address).
    fn gasp(self) -> gasp::GPtr {
        gasp::GPtr::new(self.rank, self.addr)
    }
}

/// Runs `transfer`, the copy of `n` bytes from `src` to `dst`, inside its
/// `GASP_UPCXX_COPY` event, whose peer is the rank at the other end: the
/// destination's, unless that is this rank and the source's is not.
#[track_caller]
fn reported<R>(rt: &Setup, dst: End, src: End, n: usize, transfer: impl FnOnce() -> R) -> R {
    let peer = if dst.rank == rt.rank {
        src.rank
    } else {
        dst.rank
    };
    let (d, s, dk, sk) = (dst.gasp(), src.gasp(), dst.kind as i32, src.kind as i32);
    let span = gasp::span!(GASP_UPCXX_COPY, peer, d, s, dk, sk, n);
    let r = transfer();
    gasp::end!(span, peer, d, s, dk, sk, n);
    r
}

/// The runtime. A copy may start in the restricted context (§10.2), as an `rput` may:
/// it waits with internal progress only, which the restricted context does not make a
/// no-op.
#[track_caller]
fn start(call: &str) -> &'static Setup {
    rt(call)
}

#[track_caller]
fn bytes<T>(call: &str, count: usize) -> usize {
    count
        .checked_mul(std::mem::size_of::<T>())
        .unwrap_or_else(|| panic!("upcxx::{call}: {count} values overflow the address space"))
}

#[track_caller]
fn end<T, K: MemoryKind>(call: &str, gp: GlobalPtr<T, K>) -> End {
    if gp.is_null() {
        panic!("upcxx::{call}: the global pointer is null");
    }
    End {
        rank: gp.where_(),
        addr: gp.owner_addr(),
        kind: gp.dynamic_kind(),
    }
}

/// What a device transfer failed with, as a panic naming the call.
#[track_caller]
fn failed(call: &str, e: KindError) -> ! {
    panic!("upcxx::{call}: {e}")
}

/// Writes `bytes` to `to`.
#[track_caller]
fn write(call: &str, rt: &Setup, to: End, bytes: &[u8]) {
    if to.kind != KindId::Host {
        gex::kinds::put(&rt.team, to.rank, to.addr as DeviceAddr, bytes)
            .unwrap_or_else(|e| failed(call, e));
    } else if let Some(local) = rt.local_range(to.rank, to.addr, bytes.len()) {
        // SAFETY: inside the mapping of `to.rank`'s segment (`local_range`), mapped for
        // the job; concurrent access is the program's to order, as for any put.
        unsafe { std::ptr::copy(bytes.as_ptr(), local as *mut u8, bytes.len()) };
    } else {
        rt.team
            .put_blocking(to.rank, to.addr, bytes, gex::Flags::NONE)
            .expect("a put without IMMEDIATE does it");
    }
}

/// Reads `from` into `buf`.
#[track_caller]
fn read(call: &str, rt: &Setup, from: End, buf: &mut [u8]) {
    if from.kind != KindId::Host {
        gex::kinds::get(&rt.team, from.rank, from.addr as DeviceAddr, buf)
            .unwrap_or_else(|e| failed(call, e));
    } else if let Some(local) = rt.local_range(from.rank, from.addr, buf.len()) {
        // SAFETY: as in `write`; `buf` is a live exclusive borrow.
        unsafe { std::ptr::copy(local as *const u8, buf.as_mut_ptr(), buf.len()) };
    } else {
        rt.team
            .get_blocking(buf, from.rank, from.addr, gex::Flags::NONE)
            .expect("a get without IMMEDIATE does it");
    }
}

/// Copies `len` bytes from `src` to `dst`: one device transfer when both are device
/// memory, in place when this process maps either host end, else in pieces through a
/// buffer of this process.
#[track_caller]
fn between(call: &str, rt: &Setup, dst: End, src: End, len: usize) {
    if dst.kind != KindId::Host && src.kind != KindId::Host {
        gex::kinds::copy(
            &rt.team,
            dst.rank,
            dst.addr as DeviceAddr,
            src.rank,
            src.addr as DeviceAddr,
            len,
        )
        .unwrap_or_else(|e| failed(call, e));
        return;
    }
    if src.kind == KindId::Host {
        if let Some(local) = rt.local_range(src.rank, src.addr, len) {
            // SAFETY: inside a mapped segment (`local_range`), mapped for the job.
            let from = unsafe { std::slice::from_raw_parts(local as *const u8, len) };
            return write(call, rt, dst, from);
        }
    }
    if dst.kind == KindId::Host {
        if let Some(local) = rt.local_range(dst.rank, dst.addr, len) {
            // SAFETY: as above; the ranges do not overlap (checked by the caller).
            let to = unsafe { std::slice::from_raw_parts_mut(local as *mut u8, len) };
            return read(call, rt, src, to);
        }
    }
    let mut buf = vec![0u8; len.min(BOUNCE)];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(BOUNCE);
        let piece = &mut buf[..n];
        read(
            call,
            rt,
            End {
                addr: src.addr + done,
                ..src
            },
            piece,
        );
        write(
            call,
            rt,
            End {
                addr: dst.addr + done,
                ..dst
            },
            piece,
        );
        done += n;
    }
}
