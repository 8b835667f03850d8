//! Transfers to and from the device memory of other ranks: Active Messages to the
//! owner, which copies between the message and its device (a pipelined bounce through
//! host memory, the path GASNet-EX takes for a device it cannot reach by RDMA).
//!
//! * A put sends the bytes in Medium Requests to [`PUT_HANDLER`], each carrying the
//!   device address of its piece and the address of the initiator's [`Pending`]
//!   record; the owner copies the piece into its device and answers with a Short Reply
//!   to [`ACK_HANDLER`] saying whether it could.
//! * A get sends Short Requests to [`GET_HANDLER`] naming a piece (device address,
//!   length, offset in the destination); the owner copies the piece out of its device
//!   and answers with a Medium Reply to [`DATA_HANDLER`], whose handler stores it.
//!
//! The owner finds the segment of an address in its registry (`registry`), which
//! also keeps it alive during the copy; an address in no segment of the owner is
//! answered with a failure, reported by the initiator as [`KindError::NotDeviceMemory`]
//! once every piece has been answered. Every piece is sent when the transfer starts
//! (a send waits only for the conduit's flow control), and the transfer completes with
//! the last answer, in whatever progress the initiator makes then: the owner's handlers
//! need the owner's attentiveness, as every AM does. A put's pieces are copies made by
//! the sends, so its source is free at return; a get's destination is written until
//! the last answer.
//!
//! The record is shared ([`Arc`]): the initiator holds one reference, and the pieces in
//! flight one more, taken when they are sent and released by the last answer, so an
//! answer never finds the record freed, also when the initiator has stopped waiting (a
//! handler run while it waited panicked, or it dropped the transfer).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::am::{join_u64, split_u64, AmCategory, AmEntry, AmIndex, AmRole, Token};
use crate::conduit::{Conduit, Rank};
use crate::runtime::Runtime;
use crate::{Flags, Lc};

use super::{registry, DeviceAddr, End, KindError};

/// The library's handler index of a put's piece (run by the owner).
pub(crate) const PUT_HANDLER: AmIndex = 5;
/// Its Reply (run by the initiator).
pub(crate) const ACK_HANDLER: AmIndex = 6;
/// The library's handler index of a get's piece (run by the owner).
pub(crate) const GET_HANDLER: AmIndex = 7;
/// Its Reply, carrying the bytes (run by the initiator).
pub(crate) const DATA_HANDLER: AmIndex = 8;

const OK: u32 = 0;
/// The owner has no device segment holding the piece.
const NOT_FOUND: u32 = 1;
/// The owner's driver failed the copy.
const FAILED: u32 = 2;

/// What the initiator keeps of a transfer until every piece is answered.
pub(super) struct Pending {
    /// Pieces not yet answered: all of them from the start, so that an answer that
    /// comes while later pieces are being sent does not end the transfer.
    left: AtomicUsize,
    /// The worst status of the answers so far.
    status: AtomicU32,
    /// A get's destination address (0 for a put).
    dst: usize,
}

impl Pending {
    /// A transfer of `pieces` pieces (at least one), into `dst` for a get.
    fn new(pieces: usize, dst: usize) -> Arc<Pending> {
        debug_assert!(pieces > 0, "a transfer of no pieces sends nothing");
        Arc::new(Pending {
            left: AtomicUsize::new(pieces),
            status: AtomicU32::new(OK),
            dst,
        })
    }

    /// The reference the pieces in flight hold, as their messages' first two
    /// arguments; the last answer releases it ([`answered`]).
    fn lend(self: &Arc<Pending>) -> [u32; 2] {
        split_u64(Arc::into_raw(self.clone()) as u64)
    }

    /// Whether every piece has been answered.
    pub(super) fn is_done(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }

    /// The transfer's outcome once every piece is answered (the worst answer), as an
    /// error of `call` at `addr` of job rank `rank`.
    pub(super) fn outcome(
        &self,
        call: &'static str,
        rank: Rank,
        addr: DeviceAddr,
    ) -> Option<Result<(), KindError>> {
        if !self.is_done() {
            return None;
        }
        Some(match self.status.load(Ordering::Acquire) {
            OK => Ok(()),
            NOT_FOUND => Err(KindError::NotDeviceMemory {
                call,
                addr,
                kind: format!("a device segment of rank {rank}"),
            }),
            _ => Err(KindError::Driver {
                call,
                function: "the owner's device copy",
                error: format!("rank {rank}'s driver failed a copy at {addr:#x}"),
            }),
        })
    }
}

/// The entries of the four handlers (registered by client initialization). Unreported:
/// a transfer is reported as itself, not as its messages.
pub(crate) fn handler_entries() -> [AmEntry; 4] {
    [
        AmEntry::payload(
            "gex device put",
            AmCategory::Medium,
            AmRole::Request,
            8,
            on_put,
        )
        .unreported()
        .at(PUT_HANDLER),
        AmEntry::short("gex device put reply", AmRole::Reply, 3, on_ack)
            .unreported()
            .at(ACK_HANDLER),
        AmEntry::short("gex device get", AmRole::Request, 9, on_get)
            .unreported()
            .at(GET_HANDLER),
        AmEntry::payload(
            "gex device get reply",
            AmCategory::Medium,
            AmRole::Reply,
            5,
            on_data,
        )
        .unreported()
        .at(DATA_HANDLER),
    ]
}

/// The bytes of one piece: what one Medium carries either way.
fn piece(rt: &Runtime) -> usize {
    rt.conduit.am_max_medium()
}

/// Starts putting `src` at device address `dst` of job rank `rank` (not this one):
/// every piece is sent (copied into its message) before this returns.
pub(super) fn put(
    rt: &Runtime,
    call: &'static str,
    rank: Rank,
    dst: DeviceAddr,
    src: &[u8],
) -> Arc<Pending> {
    let step = piece(rt);
    let pending = Pending::new(src.len().div_ceil(step), 0);
    let [r0, r1] = pending.lend();
    let mut sending = Sending::new(rt, &pending);
    let [t0, t1] = split_u64(src.len() as u64);
    for (i, bytes) in src.chunks(step).enumerate() {
        let at = (i * step) as u64;
        let [a0, a1] = split_u64(dst + at);
        let [o0, o1] = split_u64(at);
        let args = [r0, r1, a0, a1, o0, o1, t0, t1];
        crate::am::send_internal_medium(rt, call, rank, PUT_HANDLER, &args, bytes);
        sending.sent();
    }
    drop(sending);
    pending
}

/// Starts getting the `len` bytes at device address `src` of job rank `rank` (not this
/// one) into `dst`.
///
/// # Safety
/// `dst` is valid for writes of `len` bytes, and nothing else accesses them, until the
/// record says every piece is answered, whether or not the caller still holds it.
pub(super) unsafe fn get(
    rt: &Runtime,
    call: &'static str,
    rank: Rank,
    src: DeviceAddr,
    dst: *mut u8,
    len: usize,
) -> Arc<Pending> {
    let step = piece(rt);
    let pending = Pending::new(len.div_ceil(step), dst as usize);
    let [r0, r1] = pending.lend();
    let mut sending = Sending::new(rt, &pending);
    let mut at = 0;
    while at < len {
        let n = step.min(len - at);
        let [a0, a1] = split_u64(src + at as u64);
        let [o0, o1] = split_u64(at as u64);
        let [t0, t1] = split_u64(len as u64);
        let args = [r0, r1, a0, a1, n as u32, o0, o1, t0, t1];
        crate::am::send_internal(rt, call, rank, GET_HANDLER, &args, Flags::NONE)
            .expect("a send without Flags::IMMEDIATE waits for room");
        sending.sent();
        at += n;
    }
    drop(sending);
    pending
}

/// The pieces of a transfer not sent yet, while its sends run. A send may poll while it
/// waits for room, and a handler it runs may panic: unwinding, the pieces never sent are
/// counted answered (they never will be), and the sent ones are waited for, since a
/// get's answers write into memory the unwinding may free (`Transfer::wait` does the
/// same once every piece is sent).
struct Sending<'a> {
    rt: &'a Runtime,
    pending: &'a Arc<Pending>,
    unsent: usize,
}

impl<'a> Sending<'a> {
    fn new(rt: &'a Runtime, pending: &'a Arc<Pending>) -> Sending<'a> {
        let unsent = pending.left.load(Ordering::Relaxed);
        Sending {
            rt,
            pending,
            unsent,
        }
    }

    /// One more piece sent.
    fn sent(&mut self) {
        self.unsent -= 1;
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        if self.unsent == 0 {
            return;
        }
        let at = Arc::as_ptr(self.pending);
        // SAFETY: the record the pieces' reference names (`lend`), whose unsent pieces
        // are counted answered here, as their answers would.
        unsafe { count_answered(at, self.unsent) };
        self.rt.wait_until(|| self.pending.is_done());
    }
}

/// Marks the piece of the record the message's first two arguments name answered with
/// `status` (after its bytes were stored); the last answer releases the reference of
/// the pieces in flight.
///
/// # Safety
/// The arguments came back unchanged from a message that `put` or `get` sent, not yet
/// counted answered.
unsafe fn answered(args: &[u32], status: u32) {
    let at = join_u64(args[0], args[1]) as usize as *const Pending;
    if status != OK {
        // SAFETY: the pieces' reference keeps the record alive until the last answer.
        unsafe { &*at }.status.fetch_max(status, Ordering::Relaxed);
    }
    // SAFETY: as above; this piece is not counted yet.
    unsafe { count_answered(at, 1) };
}

/// Counts `n` pieces of the record at `at` answered; the last releases the reference
/// of the pieces in flight.
///
/// # Safety
/// `at` is a record `put` or `get` lent to its pieces, at least `n` of them not yet
/// counted.
unsafe fn count_answered(at: *const Pending, n: usize) {
    // SAFETY: the pieces' reference keeps the record alive until the last answer.
    if unsafe { &*at }.left.fetch_sub(n, Ordering::AcqRel) == n {
        // SAFETY: the reference `lend` took for the pieces; these were the last.
        drop(unsafe { Arc::from_raw(at) });
    }
}

/// Whether the whole transfer whose piece at `addr` lies `offset` bytes into it, of
/// `total` bytes, is in one segment of this process: each piece checks that, not only
/// itself, so that a transfer the local path would refuse (running past its segment's
/// end, into the next one or out of all) copies none of its pieces.
fn whole_in_a_segment(addr: DeviceAddr, offset: u64, total: u64) -> bool {
    match (addr.checked_sub(offset), usize::try_from(total)) {
        (Some(start), Ok(total)) => registry::with(start, total, |_, _| ()).is_some(),
        _ => false,
    }
}

/// The owner's put handler: copies the piece into its device, answers.
fn on_put(token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let addr = join_u64(args[2], args[3]);
    let (offset, total) = (join_u64(args[4], args[5]), join_u64(args[6], args[7]));
    let whole = whole_in_a_segment(addr, offset, total);
    let status = registry::with(addr, payload.len(), |mk, _| {
        if !whole {
            return NOT_FOUND;
        }
        // SAFETY: the registry found the range in a live segment of `mk`'s device,
        // kept alive during the copy; the payload is host memory of that length.
        let r = unsafe {
            mk.0.dev.copy(
                "gex::kinds::put (at the owner)",
                End::Device(addr),
                End::Host(payload),
                payload.len(),
            )
        };
        if r.is_ok() {
            OK
        } else {
            FAILED
        }
    })
    .unwrap_or(NOT_FOUND);
    token
        .reply_short(ACK_HANDLER, &[args[0], args[1], status], Flags::NONE)
        .expect("a Reply without IMMEDIATE waits for room");
}

fn on_ack(_token: &Token<'_>, args: &[u32]) {
    // SAFETY: the answer to a piece `put` sent.
    unsafe { answered(args, args[2]) };
}

/// The owner's get handler: copies the piece out of its device into the Reply.
fn on_get(token: &Token<'_>, args: &[u32]) {
    let addr = join_u64(args[2], args[3]);
    let len = args[4] as usize;
    let (offset, total) = (join_u64(args[5], args[6]), join_u64(args[7], args[8]));
    let whole = whole_in_a_segment(addr, offset, total);
    let mut buf = vec![0u8; len];
    let status = registry::with(addr, len, |mk, _| {
        if !whole {
            return NOT_FOUND;
        }
        // SAFETY: as in `on_put`, the buffer holding `len` bytes.
        let r = unsafe {
            mk.0.dev.copy(
                "gex::kinds::get (at the owner)",
                End::HostMut(&mut buf),
                End::Device(addr),
                len,
            )
        };
        if r.is_ok() {
            OK
        } else {
            FAILED
        }
    })
    .unwrap_or(NOT_FOUND);
    let payload = if status == OK { &buf[..] } else { &[][..] };
    token
        .reply_medium(
            DATA_HANDLER,
            payload,
            Lc::Now,
            Flags::NONE,
            &[args[0], args[1], status, args[5], args[6]],
        )
        .expect("a Reply without IMMEDIATE waits for room");
}

fn on_data(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let status = args[2];
    if status == OK {
        // SAFETY: the answer to a piece `get` sent, not yet counted, so its record is
        // alive.
        let pending = unsafe { &*(join_u64(args[0], args[1]) as usize as *const Pending) };
        let at = join_u64(args[3], args[4]) as usize;
        // SAFETY: `get` asked for this piece at offset `at` of its destination, valid
        // until the last answer (its caller's guarantee); the owner sent exactly the
        // piece's length.
        unsafe {
            std::ptr::copy_nonoverlapping(
                payload.as_ptr(),
                (pending.dst as *mut u8).add(at),
                payload.len(),
            )
        };
    }
    // SAFETY: as above.
    unsafe { answered(args, status) };
}
