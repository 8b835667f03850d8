//! Broadcast (GASNet-EX `gex_Coll_BroadcastNB`): `nbytes` from `src` on the root to
//! `dst` on every rank. The root sends from `src` and copies it into its own `dst`
//! only once the others need nothing more from it than to read `src`, so they do not
//! wait for that copy.
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
//! * **Along the tree by RMA** (a rendezvous): when the team spans neighbourhoods (so
//!   the direct copies are impossible) and the broadcast is at least [`RMA_MIN`] bytes,
//!   every rank but the root first tells its parent where to put the data: its `dst`
//!   when that lies in its own segment; else its team's scratch space (granted at a
//!   split, `Team::split`) when it is large enough and no other broadcast at this rank
//!   is using it, each piece then copied to `dst` as its notice arrives; else nothing.
//!   The parent then moves the data by one of three means, its choice for that edge:
//!   - **Reads**, when the parent's own copy of the data lies in its segment (at the
//!     root the `src` it sends from, elsewhere its `dst`): the parent notices the
//!     child the address of each run of pieces as they are in that copy, and the
//!     child reads them with gets of [`RMA_PIECE`] bytes straight into its `dst`
//!     (wherever that lies), forwards each to its own children, and acknowledges once
//!     it has read them all; the parent completes only after every such
//!     acknowledgement, so its copy stays unchanged while it is read. Each child's
//!     reads run on its own core, beside its siblings' and beside the root's copy of
//!     `src` into its own `dst`, which the root makes meanwhile, a piece per step.
//!   - **Puts** into the child's offered `dst` or scratch space, when the parent's
//!     copy does not lie in its segment: each piece of [`RMA_PIECE`] bytes (a memory
//!     copy within a host, `MPI_Put` + flush between hosts on the mpi conduit) once
//!     the piece is in the parent's copy, then one small notice naming it.
//!   - **Messages** (as along the tree above) when neither is possible.
//!
//!   A child forwards a piece as soon as it has it, so a large broadcast is pipelined
//!   down the tree. Each byte crosses each edge once, without the per-message costs of
//!   a payload split into AM Mediums. Every member makes the same choice of method
//!   (the size and the team's placement are the same everywhere), and each parent its
//!   own for each edge.
//!
//!   The GASNet collectives design document asks for in-segment and out-of-segment
//!   data alike (requirement 13, "Data segment"); only in-segment memory can be
//!   reached by RMA, so the rendezvous lets each side say which it has. A put lands
//!   only after the receiver's own call sent its offer, a read only after the parent
//!   noticed it, and the receiver's operation completes only after the last piece, so
//!   back-to-back broadcasts into the same `dst` (or through the same scratch space,
//!   leased to one broadcast at a time) cannot overlap. Between hosts an RMA may need
//!   the target's progress (Open MPI's `osc pt2pt`); the target is then inside a call
//!   that waits, and every wait polls.
//!
//!   Measured with the mpi bench's network job (2 ranks, each its own host, Open
//!   MPI's shared-memory transport): a 1 MiB broadcast took 2.4-2.6x `MPI_Bcast` with
//!   puts in runs where a raw ping-pong took about 900 ns, about 1.45x where it took
//!   about 450 ns; with a build that skipped the root's copy into its own `dst`,
//!   1.06-1.15x. That copy, which `MPI_Bcast` (one buffer) does not make, was the
//!   difference: with puts the root made it after its puts, the other rank idle.
//!   With reads: 1.06x in the first kind of run, 1.14-1.20x in the second.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;

use super::chunks::{Receiving, Sending};
use super::engine::{Collective, Msg, Outbox};
use super::tree::Tree;
use crate::conduit::{Completion, OpHandle, Rank};
use crate::team::TeamData;

/// The smallest broadcast the root moves by direct copies.
pub(crate) const DIRECT_MIN: usize = 16 << 10;

/// The smallest broadcast over a team spanning neighbourhoods that moves by RMA along
/// the tree: below it, the rendezvous's extra message before the first byte moves
/// costs more than the few Medium messages it saves.
pub const RMA_MIN: usize = 32 << 10;

/// The pieces a broadcast moves in by RMA, each followed by one notice: large enough
/// that the notice is cheap beside the piece, small enough that a tree's inner ranks
/// forward the first piece while later ones arrive.
pub const RMA_PIECE: usize = 256 << 10;

/// Tags of the direct protocol (the tree uses the broadcast's own tag).
const DIRECT_NOTICE: u32 = 10;
const DIRECT_ACK: u32 = 11;
/// Tags of the rendezvous: a child's offer (its `dst`, or nothing for messages) and a
/// parent's notice of a piece put (at the message's offset; its length as the data).
const RMA_OFFER: u32 = 12;
const RMA_NOTICE: u32 = 13;
/// Tags of the reads: a parent's notice that a piece may be read from its segment (at
/// the message's offset; its length and the data's address as the data), and a
/// child's acknowledgement that it read everything.
const RMA_READ: u32 = 14;
const RMA_READ_DONE: u32 = 15;

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

/// How a rank sends the broadcast to one child.
enum Edge {
    /// In messages of one AM payload each.
    Messages(Sending),
    /// By RMA if the child offers it: its offer has not arrived yet.
    Awaiting,
    /// By RMA into the child's `dst`.
    Rma(Puts),
    /// By RMA, read by the child from this rank's segment.
    Read(Reads),
}

/// An edge whose child reads the data from this rank's segment: the bytes before
/// `noticed` are noticed; `done` once the child acknowledged reading them all.
struct Reads {
    noticed: usize,
    done: bool,
}

/// A receiver's reads from its parent's segment: the data is at `addr` there, the
/// bytes before `noticed` may be read, those before `read` are read (the last piece
/// complete once `pending` is), and the parent was told once all were (`acked`).
struct Reading {
    addr: usize,
    noticed: usize,
    read: usize,
    pending: Option<(Arc<OpHandle>, usize)>,
    acked: bool,
}

/// The RMA edge to one child: its `dst` at `addr` (its address space); the bytes
/// before `put` are put (the last piece complete once `pending` is), those before
/// `noticed` noticed.
struct Puts {
    addr: usize,
    put: usize,
    noticed: usize,
    pending: Option<Arc<OpHandle>>,
}

/// A receiver's side of the rendezvous.
struct Offer {
    /// The team rank of the parent.
    parent: Rank,
    /// Where the parent may put the data (`None`: send messages).
    addr: Option<usize>,
    /// The scratch space at `addr`, if the data lands there (then each piece is copied
    /// to `dst` as its notice arrives).
    scratch: Option<Scratch>,
    /// The offer is sent.
    sent: bool,
}

/// Where a receiver of a broadcast by RMA has its parent put the data.
pub(crate) enum Landing {
    /// Into its `dst`, which lies in its segment.
    Dst,
    /// Into its team's scratch space (in its segment), copied to `dst` piece by piece.
    Scratch(Scratch),
    /// Nowhere: the parent sends messages.
    Messages,
}

/// A team's scratch space leased to one broadcast until it is dropped (complete): one
/// broadcast at a time stages its data in a team's scratch space, so that no put of
/// another can overwrite bytes not yet copied out.
pub(crate) struct Scratch {
    team: Arc<TeamData>,
    /// This rank's address of the space.
    addr: usize,
}

impl Scratch {
    /// `team`'s scratch space, if it has one and no broadcast uses it.
    pub(crate) fn lease(team: &Arc<TeamData>) -> Option<Scratch> {
        let (addr, _) = team.scratch?;
        let leased = team.scratch_leased.swap(true, Ordering::Acquire);
        (!leased).then(|| Scratch {
            team: Arc::clone(team),
            addr,
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.team.scratch_leased.store(false, Ordering::Release);
    }
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
    /// The children (team ranks) and how far each was sent: inline for a binomial
    /// tree's inner ranks of small teams.
    children: SmallVec<[(Rank, Edge); 2]>,
    /// At a receiver of a broadcast by RMA: its offer to its parent.
    offer: Option<Offer>,
    /// The root's data is in `dst`, or in `root_src`.
    ready: bool,
    /// At the root, where the data is read from until the broadcast is sent (the
    /// caller's `src`, valid until completion), when it is not `dst`: the root copies it
    /// into its own `dst` only after sending, so the other ranks need not wait for
    /// that copy.
    root_src: Option<usize>,
    /// At the root, the bytes of `root_src` copied into `dst` so far.
    root_copied: usize,
    /// Where this rank's copy of the data lies in its own segment, if it does (at the
    /// root `src` or `dst`, elsewhere `dst`): its children read it from there.
    exposed: Option<usize>,
    /// At a receiver reading from its parent's segment: how far.
    reading: Option<Reading>,
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
            .map(|c| ((c + root) % n, Edge::Messages(Sending::default())))
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
            offer: None,
            ready: false,
            root_src: None,
            root_copied: 0,
            exposed: None,
            reading: None,
        }
    }

    /// On every rank, when the broadcast moves by RMA along the tree (the same choice
    /// everywhere): wait for each child's offer, and offer the parent (if any) where
    /// to put the data, as `landing` says.
    pub(crate) fn rendezvous(&mut self, me: Rank, n: Rank, landing: Landing) {
        for (_, edge) in &mut self.children {
            *edge = Edge::Awaiting;
        }
        let v = (me + n - self.root) % n;
        let (addr, scratch) = match landing {
            Landing::Dst => (Some(self.dst), None),
            Landing::Scratch(s) => (Some(s.addr), Some(s)),
            Landing::Messages => (None, None),
        };
        self.offer = self.tree.parent(v).map(|p| Offer {
            parent: (p + self.root) % n,
            addr,
            scratch,
            sent: false,
        });
    }

    /// With [`rendezvous`](Self::rendezvous): this rank's copy of the data (at the root
    /// where it sends from, elsewhere `dst`) lies at `addr` of its own segment, so its
    /// children read it from there.
    pub(crate) fn expose(&mut self, addr: usize) {
        self.exposed = Some(addr);
    }

    /// At the root: the data is in `dst`.
    pub(crate) fn root_ready(&mut self) {
        self.ready = true;
    }

    /// At the root: the data is in `src` (valid for reads until completion, not
    /// overlapping `dst`), sent from there and copied into `dst` last.
    pub(crate) fn root_from(&mut self, src: *const u8) {
        self.ready = true;
        self.root_src = Some(src as usize);
    }

    /// At the root, once every other rank has what it needs from it, or reads it
    /// itself: copies up to `limit` more bytes from `src` into this rank's `dst`, if
    /// it was sent from `src`; true once all are copied.
    fn root_copy(&mut self, limit: usize) -> bool {
        let Some(src) = self.root_src else {
            return true;
        };
        let (at, len) = (self.root_copied, limit.min(self.nbytes - self.root_copied));
        // SAFETY: `root_from`'s contract: `src` is valid for `nbytes` bytes of reads
        // and `dst` for writes until completion, and they do not overlap; `at + len`
        // is at most `nbytes`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (src as *const u8).add(at),
                (self.dst as *mut u8).add(at),
                len,
            )
        };
        self.root_copied += len;
        self.root_copied == self.nbytes
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
        match msg.tag {
            RMA_OFFER => return self.offered(msg),
            RMA_NOTICE => return self.noticed(msg),
            RMA_READ => return self.read_noticed(msg),
            RMA_READ_DONE => return self.read_done(msg),
            _ => {}
        }
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
            msg.offset
                .checked_add(msg.data.len())
                .is_some_and(|end| end <= self.nbytes),
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
                let done = *acks == others
                    && noticed
                        .iter()
                        .enumerate()
                        .all(|(r, &s)| s || r as Rank == me);
                return done && self.root_copy(usize::MAX);
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
        if let Some(offer) = &mut self.offer {
            if !offer.sent {
                let addr = offer.addr.map(usize::to_le_bytes);
                offer.sent = out.send(offer.parent, RMA_OFFER, 0, addr.as_ref().map_or(&[], |a| a));
                if !offer.sent {
                    return false;
                }
            }
        }
        let read = match &mut self.reading {
            Some(reading) => {
                let parent = self.offer.as_ref().expect("a reader's parent").parent;
                let dst = self.dst;
                reading.advance(out, parent, dst, self.nbytes, &mut self.received)
            }
            None => true,
        };
        let available = self.available(me);
        let from = self.root_src.unwrap_or(self.dst);
        // SAFETY: as in `deliver`; only the bytes already in `dst` are read, or at the
        // root its `src` (see `root_from`).
        let data = unsafe { std::slice::from_raw_parts(from as *const u8, self.nbytes) };
        let (mut all_sent, mut all_read) = (true, true);
        for (child, edge) in &mut self.children {
            all_sent &= match edge {
                Edge::Messages(sending) => sending.send(out, *child, self.tag, data, available),
                Edge::Awaiting => false,
                Edge::Rma(puts) => puts.forward(out, *child, data, available),
                Edge::Read(reads) => {
                    let addr = self.exposed.expect("an edge read from an exposed copy");
                    let noticed = reads.notice(out, *child, addr, available, self.nbytes);
                    all_read &= reads.done;
                    noticed
                }
            };
        }
        // The root copies into its own `dst` once the others need nothing more from it
        // but their reads, a piece per step: while they read, and answering their
        // reads between pieces where those need this rank's progress.
        let copied = !all_sent || self.root_copy(RMA_PIECE);
        all_sent && all_read && copied && read && available == self.nbytes
    }
}

impl Broadcast {
    /// A child's offer: put into its `dst`, or send it messages.
    fn offered(&mut self, msg: Msg) {
        let edge = self
            .children
            .iter_mut()
            .find(|(c, _)| *c == msg.src)
            .map(|(_, e)| e);
        let Some(edge @ Edge::Awaiting) = edge else {
            panic!(
                "gex::Team::broadcast_nb: team rank {} offered a destination to a rank that \
                 is not its parent, or twice",
                msg.src
            );
        };
        *edge = match msg.data.get(..8) {
            _ if self.exposed.is_some() => Edge::Read(Reads {
                noticed: 0,
                done: false,
            }),
            Some(a) => Edge::Rma(Puts {
                addr: usize::from_le_bytes(a.try_into().expect("an address")),
                put: 0,
                noticed: 0,
                pending: None,
            }),
            None => Edge::Messages(Sending::default()),
        };
    }

    /// The parent's notice: a piece is in `dst`, or in the scratch space, from where
    /// it is copied to `dst`.
    fn noticed(&mut self, msg: Msg) {
        let len = u64::from_le_bytes(msg.data[..8].try_into().expect("a length")) as usize;
        let offer = self.offer.as_ref().filter(|o| o.addr.is_some());
        assert!(
            offer.is_some()
                && msg
                    .offset
                    .checked_add(len)
                    .is_some_and(|end| end <= self.nbytes),
            "gex::Team::broadcast_nb: team rank {} put bytes this rank did not offer",
            msg.src
        );
        if let Some(scratch) = offer.and_then(|o| o.scratch.as_ref()) {
            // SAFETY: the scratch space holds at least `nbytes` bytes of this rank's
            // segment (checked when it was leased), leased to this broadcast, and the
            // piece was put there before its notice; `dst` is valid for `nbytes` bytes
            // of writes until completion (the initiating call's contract) and is not
            // in the scratch space (granted to the team, not the client's to pass).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (scratch.addr as *const u8).add(msg.offset),
                    (self.dst as *mut u8).add(msg.offset),
                    len,
                )
            };
        }
        self.received.arrived(msg.offset, len, RMA_PIECE);
    }

    /// The parent's notice: the bytes up to a new end may be read from its segment.
    fn read_noticed(&mut self, msg: Msg) {
        let word = |i: usize| {
            let w = msg
                .data
                .get(8 * i..8 * i + 8)
                .expect("a read notice's words");
            u64::from_le_bytes(w.try_into().expect("8 bytes")) as usize
        };
        let (len, addr) = (word(0), word(1));
        let from_parent = self.offer.as_ref().is_some_and(|o| o.parent == msg.src);
        let end = msg
            .offset
            .checked_add(len)
            .filter(|&end| end <= self.nbytes);
        let reading = self.reading.get_or_insert(Reading {
            addr,
            noticed: 0,
            read: 0,
            pending: None,
            acked: false,
        });
        let Some(end) = end.filter(|_| from_parent && reading.addr == addr) else {
            panic!(
                "gex::Team::broadcast_nb: team rank {} offered bytes to read that this rank \
                 does not expect",
                msg.src
            );
        };
        reading.noticed = reading.noticed.max(end);
    }

    /// A child's acknowledgement: it read every byte from this rank's segment.
    fn read_done(&mut self, msg: Msg) {
        let edge = self.children.iter_mut().find(|(c, _)| *c == msg.src);
        let Some((_, Edge::Read(reads))) = edge else {
            panic!(
                "gex::Team::broadcast_nb: team rank {} acknowledged reads it was not offered",
                msg.src
            );
        };
        reads.done = true;
    }
}

impl Reads {
    /// Notices to `child` the bytes of `[0, available)` not yet noticed, which lie at
    /// `addr` of this rank's segment: once [`RMA_PIECE`] of them or all are there, so
    /// that a child reads in whole pieces; true once every byte is noticed.
    fn notice(
        &mut self,
        out: &mut Outbox<'_>,
        child: Rank,
        addr: usize,
        available: usize,
        nbytes: usize,
    ) -> bool {
        let len = available - self.noticed;
        if len >= RMA_PIECE || (len > 0 && available == nbytes) {
            let words = [len as u64, addr as u64].map(u64::to_le_bytes).concat();
            if out.send(child, RMA_READ, self.noticed, &words) {
                self.noticed = available;
            }
        }
        self.noticed == nbytes
    }
}

impl Reading {
    /// Reads from the parent's segment the next noticed piece into `dst`, one per step
    /// (so that this rank forwards a piece to its children between reads), and tells
    /// the parent once all are read; true once told.
    fn advance(
        &mut self,
        out: &mut Outbox<'_>,
        parent: Rank,
        dst: usize,
        nbytes: usize,
        received: &mut Receiving,
    ) -> bool {
        if let Some((handle, len)) = &self.pending {
            if !handle.is_done() {
                return false;
            }
            received.arrived(self.read, *len, RMA_PIECE);
            self.read += *len;
            self.pending = None;
        }
        if self.read < self.noticed {
            let len = (self.noticed - self.read).min(RMA_PIECE);
            // SAFETY: `dst` is valid for the broadcast's bytes of writes until
            // completion (the initiating call's contract) and `read + len` lies within
            // them (checked against the size when noticed); the engine's lock
            // serializes every access to it.
            let got = unsafe {
                out.get(
                    parent,
                    (dst as *mut u8).add(self.read),
                    self.addr + self.read,
                    len,
                )
            };
            match got {
                Ok(Completion::Done) => {
                    received.arrived(self.read, len, RMA_PIECE);
                    self.read += len;
                }
                Ok(Completion::Pending(handle)) => self.pending = Some((handle, len)),
                Err(e) => panic!(
                    "gex::Team::broadcast_nb: team rank {parent} offered bytes to read \
                     outside its segment ({e:?})"
                ),
            }
        }
        if self.read == nbytes && !self.acked {
            self.acked = out.send(parent, RMA_READ_DONE, 0, &[]);
        }
        self.acked
    }
}

impl Puts {
    /// Puts and notices every piece of `data[..available]` not yet put to `child`, each
    /// once its put completed; true once all of `data` is put and noticed.
    fn forward(
        &mut self,
        out: &mut Outbox<'_>,
        child: Rank,
        data: &[u8],
        available: usize,
    ) -> bool {
        loop {
            if let Some(handle) = &self.pending {
                if !handle.is_done() {
                    return false;
                }
                self.pending = None;
            }
            if self.noticed < self.put {
                let len = (self.put - self.noticed) as u64;
                if !out.send(child, RMA_NOTICE, self.noticed, &len.to_le_bytes()) {
                    return false;
                }
                self.noticed = self.put;
            }
            if self.put == data.len() {
                return true;
            }
            let end = (self.put + RMA_PIECE).min(data.len());
            if end > available {
                return false;
            }
            match out.put(child, self.addr + self.put, &data[self.put..end]) {
                Ok(Completion::Done) => {}
                Ok(Completion::Pending(handle)) => self.pending = Some(handle),
                Err(e) => panic!(
                    "gex::Team::broadcast_nb: team rank {child} offered a destination outside \
                     its segment ({e:?})"
                ),
            }
            self.put = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message whose offset and length add past `usize::MAX` is refused, not wrapped
    /// into a write before the buffer.
    #[test]
    #[should_panic(expected = "sent bytes past the broadcast's size")]
    fn an_offset_that_wraps_is_refused() {
        let mut dst = [0u8; 8];
        let mut op = Broadcast::new(Tree::Flat, 1, 2, 0, dst.as_mut_ptr(), 8, 0, 64);
        op.deliver(Msg {
            src: 0,
            tag: 0,
            offset: usize::MAX - 2,
            data: smallvec::smallvec![1; 4],
        });
    }
}
