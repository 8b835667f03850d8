//! Scatter and gather (`gasnet_coll_scatter_nb`, `gasnet_coll_gather_nb`) in messages,
//! along a tree ([`Tree`]) rooted at the root.
//!
//! A binomial subtree is a contiguous range of *virtual* ranks (`(r - root) mod n`), so
//! each rank holds the blocks of its subtree as one buffer in virtual order: the root
//! rotates its source into that order once, a scatter forwards each child the sub-range
//! of its subtree (chunk by chunk, as soon as it has it), and a gather collects its
//! children's ranges after its own block before sending the whole up. Blocks may
//! differ in size by rank (`sizes`), which the multi-image variants use.

use super::super::chunks::{Receiving, Sending};
use super::super::engine::{Collective, Msg, Outbox};
use super::super::tree::Tree;
use crate::conduit::Rank;

/// The tag of the data messages.
const DATA: u32 = 0;

/// The tree positions of one rank and the byte layout of the blocks in virtual order.
struct Shape {
    root: Rank,
    n: Rank,
    /// This rank's virtual rank.
    v: u32,
    /// `voff[v]`: where virtual rank `v`'s block starts in the virtual order (`n + 1`
    /// entries).
    voff: Vec<usize>,
}

impl Shape {
    fn new(me: Rank, n: Rank, root: Rank, sizes: &[usize]) -> Shape {
        let mut voff = Vec::with_capacity(n as usize + 1);
        let mut at = 0;
        voff.push(0);
        for v in 0..n {
            at += sizes[((v + root) % n) as usize];
            voff.push(at);
        }
        Shape {
            root,
            n,
            v: (me + n - root) % n,
            voff,
        }
    }

    fn team_rank(&self, v: u32) -> Rank {
        (v + self.root) % self.n
    }

    /// The end of virtual rank `v`'s subtree.
    fn subtree_end(&self, tree: Tree, v: u32) -> u32 {
        match (tree, v) {
            (_, 0) => self.n,
            (Tree::Flat, v) => v + 1,
            (Tree::Binomial, v) => {
                (u64::from(v) + u64::from(v & v.wrapping_neg())).min(u64::from(self.n)) as u32
            }
        }
    }

    /// The bytes of `v`'s subtree: (start in the virtual order, length).
    fn range(&self, tree: Tree, v: u32) -> (usize, usize) {
        let end = self.subtree_end(tree, v) as usize;
        (
            self.voff[v as usize],
            self.voff[end] - self.voff[v as usize],
        )
    }

    /// Team rank `t`'s block in team-rank order (the user's buffers).
    fn team_offset(sizes: &[usize], t: Rank) -> usize {
        sizes[..t as usize].iter().sum()
    }
}

/// Where a rooted operation runs: along `tree` over a team of `n` from `root`, at team
/// rank `me`, with `sizes[r]` bytes for rank `r`, in messages of at most `chunk` bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout<'a> {
    pub(crate) tree: Tree,
    pub(crate) me: Rank,
    pub(crate) n: Rank,
    pub(crate) root: Rank,
    pub(crate) sizes: &'a [usize],
    pub(crate) chunk: usize,
}

/// A scatter in flight at this rank.
pub(crate) struct Scatter {
    dst: usize,
    /// My subtree's blocks in virtual order (the root: all of them).
    buf: Vec<u8>,
    /// My own block's size (the first of `buf`).
    mine: usize,
    is_root: bool,
    chunk: usize,
    received: Receiving,
    /// Each child: team rank, start and length of its range in `buf`, how far sent.
    children: Vec<(Rank, usize, usize, Sending)>,
    placed: bool,
}

impl Scatter {
    /// A scatter of the root's `src` (the blocks of `sizes` in team-rank order) into
    /// `dst` (`sizes[me]` bytes) of every rank.
    ///
    /// # Safety
    /// At the root `src` must be readable for the sum of `sizes` during this call;
    /// `dst` writable for `sizes[me]` bytes until the operation completes.
    pub(crate) unsafe fn new(at: Layout<'_>, dst: *mut u8, src: *const u8) -> Scatter {
        let Layout {
            tree,
            me,
            n,
            root,
            sizes,
            chunk,
        } = at;
        let shape = Shape::new(me, n, root, sizes);
        let (start, len) = shape.range(tree, shape.v);
        let buf = if me == root {
            let mut buf = Vec::with_capacity(len);
            for v in 0..n {
                let t = shape.team_rank(v);
                let at = Shape::team_offset(sizes, t);
                // SAFETY: the caller's contract: `src` holds every block at the root.
                buf.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(src.add(at), sizes[t as usize])
                });
            }
            buf
        } else {
            vec![0; len]
        };
        let children = tree
            .children(shape.v, n)
            .into_iter()
            .rev()
            .map(|c| {
                let (s, l) = shape.range(tree, c);
                (shape.team_rank(c), s - start, l, Sending::default())
            })
            .collect();
        Scatter {
            dst: dst as usize,
            mine: sizes[me as usize],
            buf,
            is_root: me == root,
            chunk,
            received: Receiving::new(if me == root { 0 } else { len }),
            children,
            placed: false,
        }
    }
}

impl Collective for Scatter {
    fn deliver(&mut self, msg: Msg) {
        assert!(
            msg.tag == DATA
                && msg
                    .offset
                    .checked_add(msg.data.len())
                    .is_some_and(|end| end <= self.buf.len()),
            "gex::Team::scatter_nb: team rank {} sent bytes past this rank's blocks",
            msg.src
        );
        self.buf[msg.offset..msg.offset + msg.data.len()].copy_from_slice(&msg.data);
        self.received
            .arrived(msg.offset, msg.data.len(), self.chunk);
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        let available = if self.is_root {
            self.buf.len()
        } else {
            self.received.prefix()
        };
        if !self.placed && available >= self.mine {
            // SAFETY: `dst` is writable for `mine` bytes until completion (the
            // initiating call's contract); `buf` starts with this rank's block.
            unsafe {
                std::ptr::copy_nonoverlapping(self.buf.as_ptr(), self.dst as *mut u8, self.mine)
            };
            self.placed = true;
        }
        let mut all_sent = true;
        for (child, start, len, sending) in &mut self.children {
            let ready = available.saturating_sub(*start).min(*len);
            all_sent &= sending.send(out, *child, DATA, &self.buf[*start..*start + *len], ready);
        }
        all_sent && self.placed
    }
}

/// A gather in flight at this rank.
pub(crate) struct Gather {
    dst: usize,
    /// My subtree's blocks in virtual order, mine first.
    buf: Vec<u8>,
    /// Each child: team rank, start of its range in `buf`, what arrived.
    children: Vec<(Rank, usize, Receiving)>,
    parent: Option<Rank>,
    up: Sending,
    chunk: usize,
    /// At the root: the team-order destination of each virtual block (offset, size).
    unrotate: Vec<(usize, usize)>,
    placed: bool,
}

impl Gather {
    /// A gather of `src` (`sizes[me]` bytes) of every rank into the root's `dst`
    /// (every block, in team-rank order).
    ///
    /// # Safety
    /// `src` must be readable for `sizes[me]` bytes during this call; at the root `dst`
    /// writable for the sum of `sizes` until the operation completes.
    pub(crate) unsafe fn new(at: Layout<'_>, dst: *mut u8, src: *const u8) -> Gather {
        let Layout {
            tree,
            me,
            n,
            root,
            sizes,
            chunk,
        } = at;
        let shape = Shape::new(me, n, root, sizes);
        let (start, len) = shape.range(tree, shape.v);
        let mut buf = vec![0; len];
        let mine = sizes[me as usize];
        // SAFETY: the caller's contract: `src` is readable for this rank's block now.
        buf[..mine].copy_from_slice(unsafe { std::slice::from_raw_parts(src, mine) });
        let children = tree
            .children(shape.v, n)
            .into_iter()
            .map(|c| {
                let (s, l) = shape.range(tree, c);
                (shape.team_rank(c), s - start, Receiving::new(l))
            })
            .collect();
        let unrotate = if me == root {
            (0..n)
                .map(|v| {
                    let t = shape.team_rank(v);
                    (Shape::team_offset(sizes, t), sizes[t as usize])
                })
                .collect()
        } else {
            Vec::new()
        };
        Gather {
            dst: dst as usize,
            buf,
            children,
            parent: tree.parent(shape.v).map(|p| shape.team_rank(p)),
            up: Sending::default(),
            chunk,
            unrotate,
            placed: false,
        }
    }
}

impl Collective for Gather {
    fn deliver(&mut self, msg: Msg) {
        let (start, receiving) = self
            .children
            .iter_mut()
            .find(|(c, _, _)| *c == msg.src)
            .map(|(_, s, r)| (*s, r))
            .unwrap_or_else(|| {
                panic!(
                    "gex::Team::gather_nb: blocks from team rank {}, not a child",
                    msg.src
                )
            });
        let at = start + msg.offset;
        assert!(
            msg.tag == DATA && at + msg.data.len() <= self.buf.len(),
            "gex::Team::gather_nb: team rank {} sent bytes past its subtree's blocks",
            msg.src
        );
        self.buf[at..at + msg.data.len()].copy_from_slice(&msg.data);
        receiving.arrived(msg.offset, msg.data.len(), self.chunk);
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        if !self.children.iter().all(|(_, _, r)| r.complete()) {
            return false;
        }
        match self.parent {
            Some(parent) => self.up.send(out, parent, DATA, &self.buf, self.buf.len()),
            None => {
                if !self.placed {
                    let mut at = 0;
                    for &(offset, size) in &self.unrotate {
                        // SAFETY: `dst` is writable for every block until completion
                        // (the initiating call's contract); `offset + size` is within it.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                self.buf.as_ptr().add(at),
                                (self.dst as *mut u8).add(offset),
                                size,
                            )
                        };
                        at += size;
                    }
                    self.placed = true;
                }
                true
            }
        }
    }
}
