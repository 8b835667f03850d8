//! How the library's messages name the completion of the operation they carry (a
//! put or get by messages, a remote atomic): the address of its [`OpHandle`], which
//! the answer to the operation's last message completes. An NB or NBI operation's
//! handle outlives the call, so it is on the heap and the messages hold a reference
//! to it ([`OpName::counted`]); a blocking call waits on its thread's own handle,
//! reused from call to call ([`blocking`]), which saves an allocation and its free per
//! operation.

use std::cell::Cell;
use std::sync::Arc;

use super::{join_u64, split_u64};
use crate::conduit::OpHandle;
use crate::runtime::Runtime;

/// How the messages of an operation name its completion, as two arguments: the
/// address of its [`OpHandle`] (aligned to 8), with the low bit set when the messages
/// hold a reference to it (an `Arc` of an NB or NBI operation, [`OpName::counted`])
/// that the last answer releases, clear for a thread's own handle, which lives as long
/// as the process ([`blocking`]).
#[derive(Clone, Copy)]
pub(crate) struct OpName(pub(crate) [u32; 2]);

impl OpName {
    /// The completion of an operation of `parts` messages that outlives the call: its
    /// handle, and its name, which holds a reference.
    pub(crate) fn counted(parts: usize) -> (Arc<OpHandle>, OpName) {
        let op = Arc::new(OpHandle::awaiting(parts));
        let raw = Arc::into_raw(op.clone()) as usize as u64;
        (op, OpName(split_u64(raw | 1)))
    }

    /// Marks one message of the operation named by `args[0..2]` answered; the last
    /// answer completes the operation and releases the messages' reference if they
    /// hold one.
    pub(crate) fn answered(args: &[u32]) {
        let name = join_u64(args[0], args[1]);
        let op = (name & !1) as usize as *const OpHandle;
        // SAFETY: a handle named in this process, which travelled to the owner and back
        // unchanged; it lives until its last message is answered (by the messages'
        // reference, or forever), which is this one at the earliest.
        // `part_done` touches it no more after the completion.
        if unsafe { (*op).part_done() } && name & 1 != 0 {
            // SAFETY: the reference `counted` gave the messages, released once: by the
            // last answer.
            drop(unsafe { Arc::from_raw(op) });
        }
    }

    /// Releases the reference a [`counted`](OpName::counted) name holds, for an
    /// operation whose messages were not sent.
    pub(crate) fn unsent(self) {
        let name = join_u64(self.0[0], self.0[1]);
        debug_assert!(name & 1 != 0, "only a counted name holds a reference");
        // SAFETY: the reference `counted` gave the messages, none of which was sent.
        drop(unsafe { Arc::from_raw((name & !1) as usize as *const OpHandle) });
    }
}

/// The messages of an operation being sent: the name they carry, and how many have
/// been handed to the conduit, which a blocking call that unwinds part-way still
/// waits for (see [`blocking`]).
pub(crate) struct Sending {
    name: OpName,
    sent: Cell<usize>,
}

impl Sending {
    pub(crate) fn new(name: OpName) -> Sending {
        Sending {
            name,
            sent: Cell::new(0),
        }
    }

    /// The name, as the two arguments each message carries.
    pub(crate) fn name(&self) -> [u32; 2] {
        self.name.0
    }

    /// One more message sent.
    pub(crate) fn one(&self) {
        self.sent.set(self.sent.get() + 1);
    }
}

/// Runs `send` with the messages of a blocking operation awaiting `parts` answers,
/// then waits until it completes. The completion is this thread's own handle,
/// allocated once and never freed, unless that one is in use (a blocking call made
/// while another waits, from a callback it runs): then a counted one, as an NB
/// operation's.
///
/// The wait happens also when the call unwinds (a handler run while it waits
/// panicked, or one run while a send waited for room): the answers to the messages
/// sent still name the handle, and a get's still write into the caller's buffer,
/// which the unwinding would free. Messages `send` did not count as sent are counted
/// done, so that no wait outlasts its answers.
pub(crate) fn blocking(rt: &Runtime, parts: usize, send: impl FnOnce(&Sending)) {
    thread_local! {
        static OWN: &'static OpHandle = Box::leak(Box::new(OpHandle::idle()));
    }
    let own = OWN.with(|own| *own);
    if own.restart(parts) {
        let name = OpName(split_u64(own as *const OpHandle as usize as u64));
        Wait::new(rt, own, parts, name).run(send);
    } else {
        let (op, name) = OpName::counted(parts);
        Wait::new(rt, &op, parts, name).run(send);
    }
}

/// Sends a blocking operation and waits until it completes ([`Wait::run`]); when
/// dropped (the call unwinding: a panic cannot leave `run` through its wait without
/// dropping the guard), waits again, after counting done the parts that were never
/// sent (see [`blocking`]).
struct Wait<'a> {
    rt: &'a Runtime,
    op: &'a OpHandle,
    parts: usize,
    sending: Sending,
}

impl<'a> Wait<'a> {
    fn new(rt: &'a Runtime, op: &'a OpHandle, parts: usize, name: OpName) -> Wait<'a> {
        Wait {
            rt,
            op,
            parts,
            sending: Sending::new(name),
        }
    }

    fn run(self, send: impl FnOnce(&Sending)) {
        send(&self.sending);
        // Here, not in the drop: a panic of a handler run by a wait in `drop` would
        // leave the drop, and the wait, at once.
        self.rt.wait_until(|| self.op.is_done());
    }

    /// Sends the messages of an operation that outlives the call, leaving their answers
    /// to its handle; the wait happens only if the sending unwinds part-way (the call
    /// then returns no event, and the answers to what was sent still write into the
    /// caller's buffers).
    fn send_only(self, send: impl FnOnce(&Sending)) {
        send(&self.sending);
        // Everything is sent: nothing to count done or wait for here (and the guard
        // owns nothing to free).
        std::mem::forget(self);
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        // As their answers would: the last one completes the operation and releases the
        // messages' reference to a counted handle.
        for _ in self.sending.sent.get()..self.parts {
            OpName::answered(&self.sending.name());
        }
        self.rt.wait_until(|| self.op.is_done());
    }
}

/// Sends the messages of an operation that outlives the call (an NB or NBI one) with
/// `send`, named by a counted handle awaiting `parts` answers, which it returns. If
/// the sending unwinds part-way, the messages not sent are counted answered and the
/// call waits for the answers to those sent before it unwinds on.
pub(crate) fn outliving(rt: &Runtime, parts: usize, send: impl FnOnce(&Sending)) -> Arc<OpHandle> {
    let (op, name) = OpName::counted(parts);
    Wait::new(rt, &op, parts, name).send_only(send);
    op
}
