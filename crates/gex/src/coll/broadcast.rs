//! Broadcast (GASNet-EX `gex_Coll_BroadcastNB`): `nbytes` from `src` on the root to
//! `dst` on every rank, along a tree ([`Tree`]) rooted at the root. A rank forwards each
//! chunk to its children as soon as it has it, so a large broadcast is pipelined down
//! the tree.

use super::chunks::{Receiving, Sending};
use super::engine::{Collective, Msg, Outbox};
use super::tree::Tree;
use crate::conduit::Rank;

/// A broadcast in flight at this rank.
pub(crate) struct Broadcast {
    tree: Tree,
    root: Rank,
    /// The destination (valid until completion: the caller's promise).
    dst: usize,
    nbytes: usize,
    /// The tag of this broadcast's messages (a reduction's down phase uses its own).
    tag: u32,
    chunk: usize,
    /// What arrived in `dst` (the root has it all once it is [`ready`](Self::ready)).
    received: Receiving,
    /// The children (team ranks) and how far each was sent.
    children: Vec<(Rank, Sending)>,
    /// The root's data is in `dst`.
    ready: bool,
}

impl Broadcast {
    /// A broadcast of `nbytes` into `dst` from `root` (at the root, the data must be put
    /// in `dst` and [`root_ready`](Self::root_ready) called).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        tree: Tree,
        me: Rank,
        n: Rank,
        root: Rank,
        dst: *mut u8,
        nbytes: usize,
        tag: u32,
        chunk: usize,
    ) -> Broadcast {
        let v = (me + n - root) % n;
        let children = tree
            .children(v, n)
            .into_iter()
            .rev() // the largest subtree first: it has the longest way to go
            .map(|c| ((c + root) % n, Sending::default()))
            .collect();
        Broadcast {
            tree,
            root,
            dst: dst as usize,
            nbytes,
            tag,
            chunk,
            received: Receiving::new(nbytes),
            children,
            ready: false,
        }
    }

    /// At the root: the data is in `dst`.
    pub(crate) fn root_ready(&mut self) {
        self.ready = true;
    }

    /// The tree this broadcast runs along.
    #[allow(dead_code)]
    pub(crate) fn tree(&self) -> Tree {
        self.tree
    }

    fn available(&self, me: Rank) -> usize {
        if me == self.root {
            if self.ready {
                self.nbytes
            } else {
                0
            }
        } else {
            self.received.prefix()
        }
    }
}

impl Collective for Broadcast {
    fn deliver(&mut self, msg: Msg) {
        debug_assert_eq!(msg.tag, self.tag);
        assert!(
            msg.offset + msg.data.len() <= self.nbytes,
            "gex::Team::broadcast_nb: team rank {} sent bytes past the broadcast's size",
            msg.src
        );
        // SAFETY: `dst` is valid for `nbytes` bytes of writes until the operation
        // completes (the initiating call's contract), the range was checked above, and
        // the engine's lock serializes every access to it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                msg.data.as_ptr(),
                (self.dst as *mut u8).add(msg.offset),
                msg.data.len(),
            )
        };
        self.received
            .arrived(msg.offset, msg.data.len(), self.chunk);
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        let me = out.rank();
        let available = self.available(me);
        // SAFETY: as in `deliver`; only the bytes already in `dst` are read.
        let data = unsafe { std::slice::from_raw_parts(self.dst as *const u8, self.nbytes) };
        let mut all_sent = true;
        for (child, sending) in &mut self.children {
            all_sent &= sending.send(out, *child, self.tag, data, available);
        }
        all_sent && available == self.nbytes
    }
}
