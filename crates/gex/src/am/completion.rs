//! How the library's messages name the completion of the operation they carry (a
//! put or get by messages, a remote atomic): the address of its [`OpHandle`], which
//! the answer to the operation's last message completes. An NB or NBI operation's
//! handle outlives the call, so it is on the heap and the messages hold a reference
//! to it ([`OpName::counted`]); a blocking call keeps it on its stack and waits there
//! ([`Blocking`]), which saves an allocation and its free per operation.

use std::sync::Arc;

use super::{join_u64, split_u64};
use crate::conduit::OpHandle;
use crate::runtime::Runtime;

/// How the messages of an operation name its completion, as two arguments: the
/// address of its [`OpHandle`] (aligned to 8), with the low bit set when the messages
/// hold a reference to it (an `Arc` of an NB or NBI operation, [`OpName::counted`])
/// that the last answer releases, clear when a blocking call waits for it on its
/// stack ([`Blocking`]).
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
        // reference, or the blocking call's wait), which is this one at the earliest.
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

/// The completion of a blocking operation, on the caller's stack: dropping it waits
/// until the operation completes, both when the call returns and when it unwinds (a
/// handler run while it waits panicked), since the answers still name it.
pub(crate) struct Blocking<'a> {
    rt: &'a Runtime,
    op: OpHandle,
}

impl<'a> Blocking<'a> {
    pub(crate) fn new(rt: &'a Runtime, parts: usize) -> Blocking<'a> {
        Blocking {
            rt,
            op: OpHandle::awaiting(parts),
        }
    }

    pub(crate) fn name(&self) -> OpName {
        OpName(split_u64(&self.op as *const OpHandle as usize as u64))
    }
}

impl Drop for Blocking<'_> {
    fn drop(&mut self) {
        self.rt.wait_until(|| self.op.is_done());
    }
}
