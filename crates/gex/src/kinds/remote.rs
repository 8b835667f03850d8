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
//! once every piece has been answered. At most [`WINDOW`] pieces are in flight, and
//! the initiator polls while it waits, so the owner's handlers need the owner's
//! attentiveness as every AM does. The record lives on the initiator's stack: every
//! call returns only after every piece has been answered, also when it unwinds (a
//! handler run while it waits panicked: [`Answers`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

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

/// Pieces of one transfer in flight at most.
const WINDOW: usize = 16;

const OK: u32 = 0;
/// The owner has no device segment holding the piece.
const NOT_FOUND: u32 = 1;
/// The owner's driver failed the copy.
const FAILED: u32 = 2;

/// What the initiator keeps of a transfer until every piece is answered.
struct Pending {
    /// Pieces sent and not yet answered.
    left: AtomicUsize,
    /// The worst status of the answers so far.
    status: AtomicU32,
    /// A get's destination (null for a put).
    dst: *mut u8,
}

/// Waits, when dropped, until every piece sent has been answered: the answers name the
/// record on the caller's stack, and a get's write into the caller's buffer, both of
/// which a call that unwinds (a handler run while it waits panicked) would free. A
/// piece counted whose send unwound is uncounted first, so that the wait ends.
struct Answers<'a> {
    rt: &'a Runtime,
    pending: &'a Pending,
    /// A piece is counted and its send has not returned.
    sending: Cell<bool>,
}

impl<'a> Answers<'a> {
    fn new(rt: &'a Runtime, pending: &'a Pending) -> Answers<'a> {
        Answers {
            rt,
            pending,
            sending: Cell::new(false),
        }
    }

    /// Counts a piece, then sends it with `send`.
    fn send(&self, send: impl FnOnce()) {
        self.rt
            .wait_until(|| self.pending.left.load(Ordering::Acquire) < WINDOW);
        self.pending.left.fetch_add(1, Ordering::Relaxed);
        self.sending.set(true);
        send();
        self.sending.set(false);
    }
}

impl Drop for Answers<'_> {
    fn drop(&mut self) {
        if self.sending.get() {
            self.pending.left.fetch_sub(1, Ordering::Relaxed);
        }
        self.rt
            .wait_until(|| self.pending.left.load(Ordering::Acquire) == 0);
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
            4,
            on_put,
        )
        .unreported()
        .at(PUT_HANDLER),
        AmEntry::short("gex device put reply", AmRole::Reply, 3, on_ack)
            .unreported()
            .at(ACK_HANDLER),
        AmEntry::short("gex device get", AmRole::Request, 7, on_get)
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

/// Puts `src` at device address `dst` of job rank `rank` (not this one).
pub(super) fn put(
    rt: &Runtime,
    call: &'static str,
    rank: Rank,
    dst: DeviceAddr,
    src: &[u8],
) -> Result<(), KindError> {
    let pending = Pending {
        left: AtomicUsize::new(0),
        status: AtomicU32::new(OK),
        dst: std::ptr::null_mut(),
    };
    let [r0, r1] = split_u64(&pending as *const Pending as u64);
    let answers = Answers::new(rt, &pending);
    for (i, bytes) in src.chunks(piece(rt)).enumerate() {
        let [a0, a1] = split_u64(dst + (i * piece(rt)) as u64);
        answers.send(|| {
            crate::am::send_internal_medium(rt, call, rank, PUT_HANDLER, &[r0, r1, a0, a1], bytes)
        });
    }
    finish(rt, call, rank, dst, &pending)
}

/// Gets the bytes at device address `src` of job rank `rank` (not this one) into
/// `dst`.
pub(super) fn get(
    rt: &Runtime,
    call: &'static str,
    rank: Rank,
    src: DeviceAddr,
    dst: &mut [u8],
) -> Result<(), KindError> {
    let pending = Pending {
        left: AtomicUsize::new(0),
        status: AtomicU32::new(OK),
        dst: dst.as_mut_ptr(),
    };
    let [r0, r1] = split_u64(&pending as *const Pending as u64);
    let answers = Answers::new(rt, &pending);
    let step = piece(rt);
    let mut at = 0;
    while at < dst.len() {
        let len = step.min(dst.len() - at);
        let [a0, a1] = split_u64(src + at as u64);
        let [o0, o1] = split_u64(at as u64);
        let args = [r0, r1, a0, a1, len as u32, o0, o1];
        answers.send(|| {
            crate::am::send_internal(rt, call, rank, GET_HANDLER, &args, Flags::NONE)
                .expect("a send without Flags::IMMEDIATE waits for room");
        });
        at += len;
    }
    finish(rt, call, rank, src, &pending)
}

/// Waits until every piece is answered, then reports the worst answer.
fn finish(
    rt: &Runtime,
    call: &'static str,
    rank: Rank,
    addr: DeviceAddr,
    pending: &Pending,
) -> Result<(), KindError> {
    rt.wait_until(|| pending.left.load(Ordering::Acquire) == 0);
    match pending.status.load(Ordering::Acquire) {
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
    }
}

/// The record named by a message's first two arguments.
///
/// # Safety
/// The arguments came back unchanged from a message that `put` or `get` sent, whose
/// record is alive until this piece is counted answered.
unsafe fn record<'a>(args: &[u32]) -> &'a Pending {
    // SAFETY: the caller's guarantee.
    unsafe { &*(join_u64(args[0], args[1]) as usize as *const Pending) }
}

/// Marks one piece answered with `status` (after its bytes were stored).
fn answered(pending: &Pending, status: u32) {
    if status != OK {
        pending.status.fetch_max(status, Ordering::Relaxed);
    }
    pending.left.fetch_sub(1, Ordering::Release);
}

/// The owner's put handler: copies the piece into its device, answers.
fn on_put(token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let addr = join_u64(args[2], args[3]);
    let status = registry::with(addr, payload.len(), |mk, _| {
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
    // SAFETY: an answer to a piece `put` sent; its record waits for it.
    answered(unsafe { record(args) }, args[2]);
}

/// The owner's get handler: copies the piece out of its device into the Reply.
fn on_get(token: &Token<'_>, args: &[u32]) {
    let addr = join_u64(args[2], args[3]);
    let len = args[4] as usize;
    let mut buf = vec![0u8; len];
    let status = registry::with(addr, len, |mk, _| {
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
    // SAFETY: an answer to a piece `get` sent; its record waits for it.
    let pending = unsafe { record(args) };
    let status = args[2];
    if status == OK {
        let at = join_u64(args[3], args[4]) as usize;
        // SAFETY: `get` asked for this piece at offset `at` of its destination, which
        // holds it; the owner sent exactly the piece's length.
        unsafe {
            std::ptr::copy_nonoverlapping(payload.as_ptr(), pending.dst.add(at), payload.len())
        };
    }
    answered(pending, status);
}
