//! Remote atomics on a target this process does not map: an Active Message round trip
//! to the target's owner, which runs the operation on its own mapping of the word.
//!
//! The initiator sends a Short Request to [`REQUEST_HANDLER`] carrying the operation,
//! the data type, the ordering flags, the target address, both operands, the name of
//! the operation's completion ([`OpName`]) and where a fetched value goes. The owner's
//! handler computes the operation with the same [`AtomicType::apply`] every other path
//! uses, on its local address of the word, and replies to [`REPLY_HANDLER`] with the
//! name, the result location, the value's size and the fetched value. The Reply
//! handler writes the value to the caller's result location and then completes the
//! named [`OpHandle`](crate::conduit::OpHandle), which is the completion of the
//! operation's event or NBI category.
//!
//! The owner's handler runs only when the owner makes progress (polls, waits, or makes
//! any call that polls), so these operations need the target's attentiveness. The spec
//! allows it: it requires no particular implementation of remote atomics ("Remote
//! Atomics": a domain lets the implementation pick the best one for its operations and
//! type, NIC offload or CPU), and Active Messages, the mechanism GASNet-EX itself falls
//! back on where no offload exists, make progress only inside library calls
//! ("explicit polling and test/wait operations"). A Request handler may send its one
//! Reply ("Calls from restricted context"), which is all the owner's handler does.

use crate::am::{join_u64, split_u64, AmEntry, AmIndex, AmRole, OpName, Token};
use crate::conduit::{Completion, Conduit, Rank};
use crate::ops::{Dt, Op};
use crate::runtime::Runtime;
use crate::{Flags, NoOp};

use super::{AtomicType, MemOrder};

/// The library's handler index of an atomic's Request (run by the target's owner).
pub(crate) const REQUEST_HANDLER: AmIndex = 3;
/// The library's handler index of its Reply (run by the initiator).
pub(crate) const REPLY_HANDLER: AmIndex = 4;

/// Arguments of the Request: completion (2), address (2), op, type, order, operands
/// (2 + 2), result location (2, null for a non-fetching operation).
const REQUEST_ARGS: usize = 13;
/// Arguments of the Reply: completion (2), result location (2), the value's size,
/// fetched value (2).
const REPLY_ARGS: usize = 7;

const ACQUIRE: u32 = 1;
const RELEASE: u32 = 2;

/// The environment variable that chooses the path of operations on mapped targets:
/// `auto` (the default: the mapping) or `am` (messages, for tests and benchmarks).
pub(crate) const GEX_AD_PATH: &str = "GEX_AD_PATH";

/// Whether `GEX_AD_PATH` asks for messages on every path (read once).
///
/// # Panics
/// If the variable holds anything but `auto` or `am`.
pub(super) fn forced() -> bool {
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| match std::env::var(GEX_AD_PATH) {
        Err(_) => false,
        Ok(v) if v.trim().is_empty() || v.trim() == "auto" => false,
        Ok(v) if v.trim() == "am" => true,
        Ok(v) => panic!("gex: {GEX_AD_PATH}={v} is not a path of remote atomics (auto, am)"),
    })
}

/// The entries of the two handlers (registered by client initialization). Unreported:
/// the operation is reported as itself (`GASP_GEX_AD_OP`), not as its messages.
pub(crate) fn handler_entries() -> [AmEntry; 2] {
    [
        AmEntry::short(
            "gex remote atomic",
            AmRole::Request,
            REQUEST_ARGS,
            on_request,
        )
        .unreported()
        .at(REQUEST_HANDLER),
        AmEntry::short(
            "gex remote atomic reply",
            AmRole::Reply,
            REPLY_ARGS,
            on_reply,
        )
        .unreported()
        .at(REPLY_HANDLER),
    ]
}

/// An operation on a target this process does not map, for its owner.
pub(super) struct Request<T> {
    /// The owner of the target.
    pub(super) rank: Rank,
    /// The target: an aligned `T` inside the owner's segment (checked by the caller).
    pub(super) addr: usize,
    /// Where a fetching operation's value goes (unused by the others).
    pub(super) result: *mut T,
    pub(super) opcode: Op,
    pub(super) operand1: T,
    pub(super) operand2: T,
    pub(super) order: MemOrder,
}

impl<T: AtomicType> Request<T> {
    /// The Request's arguments, naming the completion `name`.
    fn args(&self, name: [u32; 2]) -> [u32; REQUEST_ARGS] {
        let result = if self.opcode.is_fetching() {
            self.result
        } else {
            std::ptr::null_mut()
        };
        let order = self.order;
        let bits = u32::from(order.acquire) * ACQUIRE + u32::from(order.release) * RELEASE;
        let [p0, p1] = split_u64(result as usize as u64);
        let [a0, a1] = split_u64(self.addr as u64);
        let [x0, x1] = split_u64(self.operand1.to_bits());
        let [y0, y1] = split_u64(self.operand2.to_bits());
        [
            name[0],
            name[1],
            a0,
            a1,
            self.opcode.bit(),
            T::DT.bit(),
            bits,
            x0,
            x1,
            y0,
            y1,
            p0,
            p1,
        ]
    }
}

/// Sends the operation to the owner of its target and returns its pending completion;
/// or `NoOp`, having done nothing, if `flags` has `IMMEDIATE` and the owner's queue is
/// full. The request is ordered after every access this thread made before (a release
/// needs nothing more: the message carries them); the owner's handler orders the
/// operation itself.
///
/// # Safety
/// For a fetching operation `req.result` must be valid for writes of a `T` until the
/// completion is done.
#[inline(never)]
pub(super) unsafe fn send<T: AtomicType>(
    rt: &Runtime,
    call: &str,
    req: &Request<T>,
    flags: Flags,
) -> Result<Completion, NoOp> {
    let (done, name) = OpName::counted(1);
    let immediate = if flags.contains(Flags::IMMEDIATE) {
        Flags::IMMEDIATE
    } else {
        Flags::NONE
    };
    let args = req.args(name.0);
    match crate::am::send_internal(rt, call, req.rank, REQUEST_HANDLER, &args, immediate) {
        Ok(()) => Ok(Completion::Pending(done)),
        Err(NoOp) => {
            name.unsent();
            Err(NoOp)
        }
    }
}

/// [`send`] for a blocking call (no `IMMEDIATE`): the operation has completed when this
/// returns, its completion the thread's own (`am::blocking`).
///
/// # Safety
/// For a fetching operation `req.result` must be valid for writes of a `T`.
#[inline(never)]
pub(super) unsafe fn send_blocking<T: AtomicType>(rt: &Runtime, call: &str, req: &Request<T>) {
    crate::am::blocking(rt, 1, |sending| {
        let args = req.args(sending.name());
        crate::am::send_internal(rt, call, req.rank, REQUEST_HANDLER, &args, Flags::NONE)
            .expect("a send without IMMEDIATE waits for room");
        sending.one();
    });
}

/// The owner's handler: runs the operation on its mapping and replies with `op0`.
fn on_request(token: &Token<'_>, args: &[u32]) {
    let addr = join_u64(args[2], args[3]) as usize;
    let op = *Op::ALL
        .iter()
        .find(|o| o.bit() == args[4])
        .expect("a remote atomic names an operation code");
    let dt = *Dt::ALL
        .iter()
        .find(|d| d.bit() == args[5])
        .expect("a remote atomic names a data type");
    let order = MemOrder {
        acquire: args[6] & ACQUIRE != 0,
        release: args[6] & RELEASE != 0,
    };
    let (op1, op2) = (join_u64(args[7], args[8]), join_u64(args[9], args[10]));
    let rt = token.runtime();
    let size = dt.size().expect("atomics are on built-in types");
    // The initiator checked the range against this segment, this rank's own, so it is
    // mapped here.
    let local = rt
        .conduit
        .translate(rt.conduit.rank(), addr, size)
        .unwrap_or_else(|e| {
            panic!(
                "gex: a remote atomic from rank {} names {addr:#x}, not in this segment ({e:?})",
                token.src_rank()
            )
        });
    // SAFETY: `local` is an aligned word of this rank's segment (checked by the
    // initiator against this segment), mapped for the life of the job and, in an
    // atomic access phase, accessed only by atomics; `op` is valid for `dt` (checked at
    // the domain's creation by the initiator).
    let op0 = unsafe {
        match dt {
            Dt::I32 => apply::<i32>(local, op, op1, op2, order),
            Dt::U32 => apply::<u32>(local, op, op1, op2, order),
            Dt::I64 => apply::<i64>(local, op, op1, op2, order),
            Dt::U64 => apply::<u64>(local, op, op1, op2, order),
            Dt::Flt => apply::<f32>(local, op, op1, op2, order),
            Dt::Dbl => apply::<f64>(local, op, op1, op2, order),
            Dt::User => unreachable!("atomics are on built-in types"),
        }
    };
    let [v0, v1] = split_u64(op0);
    let reply = [args[0], args[1], args[11], args[12], size as u32, v0, v1];
    token
        .reply_short(REPLY_HANDLER, &reply, Flags::NONE)
        .expect("a Reply without IMMEDIATE waits for room");
}

/// [`AtomicType::apply`] on bits.
///
/// # Safety
/// As for [`AtomicType::apply`], `local` holding a `T`.
unsafe fn apply<T: AtomicType>(local: usize, op: Op, op1: u64, op2: u64, order: MemOrder) -> u64 {
    let (a, b) = (T::from_bits(op1), T::from_bits(op2));
    // SAFETY: the caller's contract.
    unsafe { T::apply(local as *mut T, op, a, b, order) }.to_bits()
}

/// The initiator's handler: stores the fetched value, then completes the operation.
fn on_reply(_token: &Token<'_>, args: &[u32]) {
    let result = join_u64(args[2], args[3]) as usize as *mut u8;
    if !result.is_null() {
        let value = join_u64(args[5], args[6]);
        // SAFETY: the result location `send` sent, which travelled to the owner and
        // back unchanged with the size of its data type: valid for writes of the
        // value's type, aligned for it (checked at initiation), until completion
        // (`send`'s contract), which follows.
        unsafe { write_value(result, args[4] as usize, value) };
    }
    OpName::answered(args);
}

/// Writes the low `size` bytes of `value` as a native integer of that size.
///
/// # Safety
/// `dest` is valid for writes of `size` bytes, aligned for them.
unsafe fn write_value(dest: *mut u8, size: usize, value: u64) {
    // SAFETY: the caller's contract.
    unsafe {
        match size {
            4 => dest.cast::<u32>().write(value as u32),
            8 => dest.cast::<u64>().write(value),
            _ => unreachable!("atomic types are 4 or 8 bytes"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_bits_through_the_arguments() {
        for v in [0u64, 1, u64::MAX, 0x8000_0000_0000_0001, 0xdead_beef] {
            let [lo, hi] = split_u64(v);
            assert_eq!(join_u64(lo, hi), v);
        }
        assert_eq!(f32::from_bits((-1.5f32).to_bits()), -1.5);
        assert_eq!(<f64 as AtomicType>::from_bits((-2.5f64).to_bits()), -2.5);
        assert_eq!(<i32 as AtomicType>::from_bits((-7i32).to_bits()), -7);
        let mut out = 0u32;
        // SAFETY: a live, aligned u32.
        unsafe { write_value((&mut out as *mut u32).cast(), 4, (-7i32).to_bits()) };
        assert_eq!(out as i32, -7);
    }
}
