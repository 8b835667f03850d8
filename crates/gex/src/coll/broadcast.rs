//! Broadcast (GASNet-EX `gex_Coll_BroadcastNB`): `nbytes` from `src` on the root to
//! `dst` on every rank.
//!
//! * **Along a tree** ([`Tree`]) rooted at the root: a rank forwards each chunk to its
//!   children as soon as it has it, so a large broadcast is pipelined down the tree.
//!   This works between any ranks, on any conduit.
//! * **Direct**: when the root's `src` lies in its segment, every member maps that
//!   segment (they share memory) and the broadcast is at least [`DIRECT_MIN`] bytes,
//!   the root only tells every rank where the data is; each rank copies it straight
//!   from the root's segment into its `dst` (each byte moves once, the ranks copy in
//!   parallel) and acknowledges, and the root's event completes once all did (its
//!   `src` is read until then). Receivers follow whichever the root chose.

use super::chunks::{Receiving, Sending};
use super::engine::{Collective, Msg, Outbox};
use super::tree::Tree;
use crate::conduit::Rank;

/// The smallest broadcast the root moves by direct copies.
pub(crate) const DIRECT_MIN: usize = 16 << 10;

/// Tags of the direct protocol (the tree uses the broadcast's own tag).
const DIRECT_NOTICE: u32 = 10;
const DIRECT_ACK: u32 = 11;

/// How a direct broadcast is going at this rank.
enum Direct {
    /// Not direct (or, at a receiver, no notice yet).
    No,
    /// At the root: where the data is (its own address), notices sent, acks received.
    Root {
        src: usize,
        noticed: Vec<bool>,
        acks: Rank,
    },
    /// At a receiver: the root's address of the data; copied; acknowledged.
    Receiver {
        src: usize,
        copied: bool,
        acked: bool,
    },
}

/// A broadcast in flight at this rank.
pub(crate) struct Broadcast {
    direct: Direct,
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
            direct: Direct::No,
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

    /// At the root: move the data by direct copies from `src` (an address of this
    /// rank's segment, valid until completion) instead of along the tree.
    pub(crate) fn root_direct(&mut self, src: *const u8, n: Rank) {
        self.direct = Direct::Root {
            src: src as usize,
            noticed: vec![false; n as usize],
            acks: 0,
        };
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
        match (msg.tag, &mut self.direct) {
            (DIRECT_NOTICE, direct) => {
                let src = usize::from_le_bytes(msg.data[..8].try_into().expect("an address"));
                *direct = Direct::Receiver {
                    src,
                    copied: false,
                    acked: false,
                };
                return;
            }
            (DIRECT_ACK, Direct::Root { acks, .. }) => {
                *acks += 1;
                return;
            }
            _ => {}
        }
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
        match &mut self.direct {
            Direct::No => {}
            Direct::Root { src, noticed, acks } => {
                for (r, sent) in noticed.iter_mut().enumerate() {
                    if r as Rank != me && !*sent {
                        *sent = out.send(r as Rank, DIRECT_NOTICE, 0, &src.to_le_bytes());
                    }
                }
                let others = noticed.len() as Rank - 1;
                return *acks == others
                    && noticed
                        .iter()
                        .enumerate()
                        .all(|(r, &s)| s || r as Rank == me);
            }
            Direct::Receiver { src, copied, acked } => {
                if !*copied {
                    // The root chose the direct method only if every member shares
                    // memory with it (`coll::direct_possible`), so this rank maps the
                    // root's segment, on the mpi conduit too.
                    let from = out
                        .translate(self.root, *src, self.nbytes)
                        .unwrap_or_else(|| {
                            panic!("gex::Team::broadcast_nb: the root's data is not mapped here")
                        });
                    // SAFETY: `from` is the root's segment range, mapped here, which the
                    // root keeps unchanged until every rank acknowledged; `dst` is
                    // valid for `nbytes` bytes of writes until completion (the
                    // initiating call's contract), and the two cannot overlap (the
                    // root's segment is not this rank's destination).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            from as *const u8,
                            self.dst as *mut u8,
                            self.nbytes,
                        )
                    };
                    *copied = true;
                }
                if !*acked {
                    *acked = out.send(self.root, DIRECT_ACK, 0, &[]);
                }
                return *acked;
            }
        }
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
