//! Reductions (GASNet-EX `gex_Coll_ReduceToOneNB`, `gex_Coll_ReduceToAllNB`).
//!
//! The contributions are combined up a tree rooted at team rank 0 ([`Tree`]: every
//! subtree is a contiguous range of ranks, and a rank combines its children in
//! increasing rank order, `acc = acc (+) child`). The result is therefore
//! `src[0] (+) src[1] ... (+) src[n-1]` applied in rank order: right for
//! non-commutative operations (`GEX_OP_USER_NC`), and the same bits on every run for a
//! given team size and algorithm, floating point included. Rank 0 then sends the result
//! to the root (reduce to one) or broadcasts it down the same tree (reduce to all), so
//! every rank gets the identical bytes.

use smallvec::SmallVec;

use super::broadcast::Broadcast;
use super::chunks::{Receiving, Sending};
use super::engine::{Collective, Msg, Outbox, INLINE_BYTES};
use super::reduce::Reduction;
use super::tree::{Children, Tree};
use crate::conduit::Rank;

/// A contribution or partial result: inline for an element or two.
type Bytes = SmallVec<[u8; INLINE_BYTES]>;

/// Message tags of a reduction.
const UP: u32 = 0;
const DOWN: u32 = 1;
const TO_ROOT: u32 = 2;

/// Where a reduction's result goes.
pub(crate) enum Target {
    /// To `dst` on `root` only.
    One { root: Rank },
    /// To `dst` on every rank (the down phase's broadcast).
    All(Box<Broadcast>),
}

/// A reduction in flight at this rank.
pub(crate) struct Reduce {
    reduction: Reduction,
    target: Target,
    dst: usize,
    len: usize,
    chunk: usize,
    /// This rank's partial result: its own contribution, then combined with its
    /// children's in order.
    acc: Bytes,
    children: Children,
    /// Each child's contribution and how much of it arrived.
    from_children: SmallVec<[(Bytes, Receiving); 2]>,
    /// How many children are combined into `acc`.
    combined: usize,
    parent: Option<Rank>,
    up: Sending,
    /// At rank 0 of a reduction to another root: the result sent there.
    to_root: Sending,
    /// At the root of a reduction to one (not rank 0): the result arriving.
    at_root: Receiving,
    /// At rank 0: the result is placed (in `dst`, or handed to the down phase).
    placed: bool,
}

impl Reduce {
    /// A reduction of `len` bytes at `src` into `dst`.
    ///
    /// # Safety
    /// `src` must be valid for `len` bytes of reads during this call; `dst` valid for
    /// `len` bytes of writes until the operation completes (where this rank receives
    /// the result).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn new(
        tree: Tree,
        me: Rank,
        n: Rank,
        reduction: Reduction,
        root: Option<Rank>,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        chunk: usize,
    ) -> Reduce {
        // SAFETY: the caller's contract: `src` is readable for `len` bytes now. The
        // contribution is copied at initiation, so `src` may be reused at once.
        let acc = Bytes::from_slice(unsafe { std::slice::from_raw_parts(src, len) });
        let children = tree.children(me, n);
        let from_children = children
            .iter()
            .map(|_| (smallvec::smallvec![0; len], Receiving::new(len)))
            .collect();
        let target = match root {
            Some(root) => Target::One { root },
            None => Target::All(Box::new(Broadcast::new(
                tree, me, n, 0, dst, len, DOWN, chunk,
            ))),
        };
        Reduce {
            reduction,
            target,
            dst: dst as usize,
            len,
            chunk,
            acc,
            children,
            from_children,
            combined: 0,
            parent: tree.parent(me),
            up: Sending::default(),
            to_root: Sending::default(),
            at_root: Receiving::new(len),
            placed: false,
        }
    }

    fn write_dst(&self, offset: usize, data: &[u8]) {
        assert!(
            offset
                .checked_add(data.len())
                .is_some_and(|end| end <= self.len),
            "a reduction's result past its size"
        );
        // SAFETY: `dst` is valid for `len` bytes of writes until completion (the
        // initiating call's contract); the range was checked above.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (self.dst as *mut u8).add(offset),
                data.len(),
            )
        };
    }
}

impl Collective for Reduce {
    fn deliver(&mut self, msg: Msg) {
        match msg.tag {
            UP => {
                let i = self
                    .children
                    .iter()
                    .position(|&c| c == msg.src)
                    .unwrap_or_else(|| {
                        panic!(
                            "gex: a reduction contribution from team rank {}, not a child",
                            msg.src
                        )
                    });
                let (buf, receiving) = &mut self.from_children[i];
                buf[msg.offset..msg.offset + msg.data.len()].copy_from_slice(&msg.data);
                receiving.arrived(msg.offset, msg.data.len(), self.chunk);
            }
            DOWN => match &mut self.target {
                Target::All(down) => down.deliver(msg),
                Target::One { .. } => panic!("gex: a reduction to one received a broadcast"),
            },
            TO_ROOT => {
                self.write_dst(msg.offset, &msg.data);
                self.at_root.arrived(msg.offset, msg.data.len(), self.chunk);
            }
            tag => panic!("gex: a reduction message with tag {tag}"),
        }
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        let me = out.rank();
        // Combine the children that arrived, in order.
        while self.combined < self.children.len() && self.from_children[self.combined].1.complete()
        {
            let (child, _) = &mut self.from_children[self.combined];
            self.reduction.combine(&self.acc, child);
            std::mem::swap(&mut self.acc, child);
            *child = Bytes::new();
            self.combined += 1;
        }
        let combined = self.combined == self.children.len();
        let up_done = match self.parent {
            Some(parent) => combined && self.up.send(out, parent, UP, &self.acc, self.acc.len()),
            None => true,
        };
        if combined && me == 0 && !self.placed {
            match &mut self.target {
                Target::One { root: 0 } | Target::All(_) => {
                    let acc = std::mem::take(&mut self.acc);
                    self.write_dst(0, &acc);
                    self.acc = acc;
                    if let Target::All(down) = &mut self.target {
                        down.root_ready();
                    }
                }
                Target::One { .. } => {}
            }
            self.placed = true;
        }
        match &mut self.target {
            Target::One { root } => {
                let root = *root;
                let sent = if me == 0 && root != 0 {
                    combined
                        && self
                            .to_root
                            .send(out, root, TO_ROOT, &self.acc, self.acc.len())
                } else {
                    true
                };
                let received = me != root || root == 0 || self.at_root.complete();
                up_done && sent && received && (me != 0 || self.placed)
            }
            Target::All(down) => up_done && (me != 0 || self.placed) && down.advance(out),
        }
    }
}
