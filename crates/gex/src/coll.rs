//! Collectives over teams (GASNet-EX "Collectives (Coll)"): barrier, broadcast, reduce
//! to one and reduce to all, each non-blocking with an [`Event`]; and team split and
//! destroy, which are collective too.
//!
//! * Any number of collectives may be in flight, on one team and across teams, and
//!   they complete in any order. Collectives on one team match by call order: every
//!   member must initiate the same collectives on it in the same order (checked where
//!   the mismatched collectives exchange a message: a mismatch of kind or single-valued
//!   arguments then fails the job with a message; two that only wait for each other's
//!   data, a rank in a reduction's root waiting for its children while they wait in a
//!   broadcast for that rank's data, hang as in GASNet-EX).
//! * The buffers of the non-blocking calls are the caller's until the event completes
//!   (`src` of a reduction is read at initiation; `src` of a broadcast at the root until
//!   completion), hence `unsafe`; [`Team::broadcast`] and [`Team::reduce_to_all`] are
//!   blocking and safe.
//! * Data moves in AM Medium messages (`engine.rs`), so the same code runs on any
//!   conduit. The rooted collectives run along a tree chosen by [`Algorithm`].
//!
//! Algorithm selection: `Flat` for teams of at most two ranks (where the trees are the
//! same), `Binomial` above, and for a broadcast whose source lies in the root's
//! segment, direct copies from `DIRECT_MIN` (16 KiB) up; over a team spanning
//! neighbourhoods, RMA into the receivers' segments from `RMA_MIN` (32 KiB) up. Measured with the `coll`
//! bench's sweep (2 and 4 ranks of a 2-core host): on 4 ranks the binomial broadcast
//! beat the flat one by 1.05x to 1.25x up to 512 B and the binomial reduction the flat
//! one by up to 1.19x from 128 KiB (elsewhere within noise); on 2 ranks they are the
//! same tree; the direct broadcast beat both trees by 1.6x to 2.8x from 32 KiB and tied
//! them at 8 KiB. `GEX_COLL_BROADCAST` and `GEX_COLL_REDUCE` (`flat`,
//! `binomial`) force one for a whole job, and [`set_algorithm`] does the same from a
//! program; every rank must make the same choice.
//!
//! The files: `tree` (the shapes), `chunks` (buffers in messages), `engine` (matching,
//! messages, progress), `barrier`, `broadcast`, `reduce` (data types and operations),
//! `reduction` (the reductions) and `split` (teams).
//!
//! The collectives of the GASNet collectives design document (broadcast, scatter,
//! gather, gather-all, exchange, permute, prefix reduction, with its sync modes, SINGLE and
//! LOCAL addressing and AGGREGATE) are in [`design`], on the same engine.

mod barrier;
mod broadcast;
mod chunks;
pub mod design;
mod engine;
pub mod reduce;
mod reduction;
mod split;
mod tree;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::conduit::{Completion, Conduit, OpHandle, Rank};
use crate::context::check_may_communicate;
use crate::event::Event;
use crate::ops::{Dt, Op};
use crate::runtime::{runtime, Runtime};
use crate::team::{Team, TeamData};
use crate::Flags;
pub use broadcast::{RMA_MIN as BROADCAST_RMA_MIN, RMA_PIECE as BROADCAST_RMA_PIECE};
pub use design::select::{
    method, set_method, Method, Operation, GATHER_ALL_DISSEMINATION_MIN_RANKS,
    GATHER_ALL_STAGGERED_MIN_BYTES, ROOTED_BINOMIAL_MIN_RANKS, ROOTED_FLAT_MIN_BYTES,
    SCAN_CHAIN_MIN_BYTES, SCAN_DOUBLING_MIN_RANKS, SCATTER_GATHER_BINOMIAL_MIN_RANKS,
    SHARED_MIN_BYTES,
};
pub use design::{Addr, AddrList, CollFlags};
pub(crate) use engine::{advance, handler_entry};
pub use reduce::{ReduceFn, Reduction};
pub use split::ScratchQuery;
use tree::Tree;

/// The element types of the built-in data types (GASNet-EX `GEX_DT_*`), for
/// [`Team::reduce_to_all`].
pub trait Builtin: Copy + 'static {
    /// The data type of `Self`.
    const DT: Dt;
}

macro_rules! builtin {
    ($($t:ty => $dt:ident),*) => {
        $(impl Builtin for $t {
            const DT: Dt = Dt::$dt;
        })*
    };
}
builtin!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => Flt, f64 => Dbl);

/// How a rooted collective spreads over the team.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// The root exchanges data with every other rank directly.
    Flat,
    /// A binomial tree: `ceil(log2 n)` levels, each rank forwarding to its subtree.
    Binomial,
}

impl Algorithm {
    /// The algorithm's name (`flat`, `binomial`), as the environment variables take it.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Flat => "flat",
            Algorithm::Binomial => "binomial",
        }
    }

    /// The algorithm named `name`.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        match name.trim() {
            "flat" => Some(Algorithm::Flat),
            "binomial" => Some(Algorithm::Binomial),
            _ => None,
        }
    }

    fn tree(self) -> Tree {
        match self {
            Algorithm::Flat => Tree::Flat,
            Algorithm::Binomial => Tree::Binomial,
        }
    }
}

/// The collectives an algorithm choice applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// [`Team::broadcast_nb`].
    Broadcast,
    /// [`Team::reduce_to_one_nb`] and [`Team::reduce_to_all_nb`].
    Reduce,
}

impl Kind {
    fn variable(self) -> &'static str {
        match self {
            Kind::Broadcast => "GEX_COLL_BROADCAST",
            Kind::Reduce => "GEX_COLL_REDUCE",
        }
    }

    fn slot(self) -> &'static AtomicU8 {
        static BROADCAST: AtomicU8 = AtomicU8::new(UNSET);
        static REDUCE: AtomicU8 = AtomicU8::new(UNSET);
        match self {
            Kind::Broadcast => &BROADCAST,
            Kind::Reduce => &REDUCE,
        }
    }
}

const UNSET: u8 = 0;
const AUTO: u8 = 1;
const FLAT: u8 = 2;
const BINOMIAL: u8 = 3;

/// Forces `algorithm` for `kind` in this process (`None`: the automatic choice). Every
/// rank of a team must have made the same choice when it initiates a collective.
pub fn set_algorithm(kind: Kind, algorithm: Option<Algorithm>) {
    let v = match algorithm {
        None => AUTO,
        Some(Algorithm::Flat) => FLAT,
        Some(Algorithm::Binomial) => BINOMIAL,
    };
    kind.slot().store(v, Ordering::Relaxed);
}

/// The algorithm `kind` uses on a team of `n` ranks.
pub fn algorithm(kind: Kind, n: Rank) -> Algorithm {
    let slot = kind.slot();
    let mut v = slot.load(Ordering::Relaxed);
    if v == UNSET {
        v = match std::env::var(kind.variable()) {
            Err(_) => AUTO,
            Ok(name) if name.trim().is_empty() || name.trim() == "auto" => AUTO,
            Ok(name) => match Algorithm::from_name(&name) {
                Some(Algorithm::Flat) => FLAT,
                Some(Algorithm::Binomial) => BINOMIAL,
                None => panic!(
                    "gex: {}={name} is not an algorithm (flat, binomial, auto)",
                    kind.variable()
                ),
            },
        };
        slot.store(v, Ordering::Relaxed);
    }
    match v {
        FLAT => Algorithm::Flat,
        BINOMIAL => Algorithm::Binomial,
        _ if n <= 2 => Algorithm::Flat,
        _ => Algorithm::Binomial,
    }
}

/// The common checks of an initiation; the runtime.
#[track_caller]
/// `p`, or for null a dangling pointer: a caller may pass null for a buffer of no bytes
/// (as C callers of GASNet-EX do), and the slices and copies inside a collective take
/// only non-null pointers, even for no bytes. A transfer of some bytes from null fails
/// as it would have.
pub(crate) fn or_dangling(p: *mut u8) -> *mut u8 {
    if p.is_null() {
        std::ptr::NonNull::dangling().as_ptr()
    } else {
        p
    }
}

fn initiation(team: &Team, call: &str) -> &'static Runtime {
    initiation_data(team, call).0
}

/// [`initiation`], with the team's data.
#[track_caller]
fn initiation_data(team: &Team, call: &str) -> (&'static Runtime, Arc<TeamData>) {
    let rt = runtime(call);
    check_may_communicate(call);
    (rt, team.data(call))
}

#[track_caller]
fn check_root(call: &str, root: Rank, n: Rank) {
    if root >= n {
        panic!("gex::{call}: root {root} is not in the team (size {n})");
    }
}

/// Whether the root may broadcast `src` by direct copies: large enough, in its own
/// segment (always mapped here: `translate` checks only the range), and every member of
/// the team shares memory with it (so every member maps the root's segment; a team
/// spanning hosts on the mpi conduit takes the message path).
fn direct_possible(rt: &Runtime, team: &Team, src: *const u8, nbytes: usize) -> bool {
    if nbytes < broadcast::DIRECT_MIN || team.size < 2 {
        return false;
    }
    if rt
        .conduit
        .translate(rt.conduit.rank(), src as usize, nbytes)
        .is_err()
    {
        return false;
    }
    let (nbrhd, _) = rt.conduit.nbrhd();
    let data = team.data("Team::broadcast_nb");
    data.members.iter().all(|m| nbrhd.binary_search(m).is_ok())
}

/// Whether a broadcast of `nbytes` over `team` moves by RMA along the tree where the
/// receivers offer their destinations (`coll::broadcast`): large enough, and the team
/// spans neighbourhoods (on one, the direct copies serve). The same answer on every
/// member.
fn rma_possible(rt: &Runtime, team: &Team, nbytes: usize, call: &str) -> bool {
    nbytes >= broadcast::RMA_MIN && team.size >= 2 && !design::on_one_nbrhd(rt, team, call)
}

/// Sets `op` up for the RMA method if [`rma_possible`]: a receiver offers its `dst` when
/// it lies in its own segment, else the team's scratch space when it is in the segment,
/// large enough and free, else asks for messages; a rank whose copy of the data (at
/// the `root`, `src`; elsewhere `dst`) lies in its segment has its children read it
/// from there.
#[allow(clippy::too_many_arguments)]
fn with_rma(
    rt: &Runtime,
    team: &Team,
    op: &mut broadcast::Broadcast,
    root: Rank,
    dst: *mut u8,
    src: usize,
    nbytes: usize,
    call: &str,
) {
    if !rma_possible(rt, team, nbytes, call) {
        return;
    }
    let me = rt.conduit.rank();
    let in_segment = |addr: usize| rt.conduit.translate(me, addr, nbytes).is_ok();
    let landing = if in_segment(dst as usize) {
        broadcast::Landing::Dst
    } else {
        let data = team.data(call);
        data.scratch
            .filter(|&(addr, len)| len >= nbytes && in_segment(addr))
            .and_then(|_| broadcast::Scratch::lease(&data))
            .map_or(broadcast::Landing::Messages, broadcast::Landing::Scratch)
    };
    op.rendezvous(team.rank, team.size, landing);
    // This rank's copy of the data, which its children read where it lies in the
    // segment: at the root where it sends from.
    let copy = if team.rank == root { src } else { dst as usize };
    if in_segment(copy) {
        op.expose(copy);
    }
}

fn event_of(handle: Arc<OpHandle>) -> Event {
    Event::from_completion(Completion::Pending(handle))
}

impl Team {
    /// Starts a barrier over any team (the primordial one included) on which the
    /// members check that they agree on `words`, the single-valued arguments of the
    /// collective call `call` it is part of: ranks that disagree fail the job with a
    /// message naming the call. For collectives outside this module that move no data
    /// (`gex_AD_Create`); `words[0]` should name the call, so that no other
    /// collective's digest matches.
    #[track_caller]
    pub(crate) fn agreement_nb(&self, call: &'static str, words: &[u64]) -> Event {
        let rt = initiation(self, call);
        let op = Box::new(barrier::Barrier::new(self.size));
        event_of(engine::start(rt, self, call, engine::digest(words), op))
    }

    /// Starts a barrier over a team that is not the primordial one (GASNet-EX
    /// `gex_Coll_BarrierNB`): a dissemination barrier through the team's block of
    /// signal words if it got one at the split (`barrier::team`), else through the
    /// collective engine. Polls once either way, as the primordial team's barrier
    /// does, so that a barrier complete at once (a team of one) still runs what
    /// arrived.
    #[track_caller]
    pub(crate) fn team_barrier_nb(&self) -> Event {
        const CALL: &str = "Team::barrier_nb";
        let (rt, data) = initiation_data(self, CALL);
        let team = data.shared_name();
        let span = gasp::span!(GASP_GEX_COLL_BARRIER, team);
        // The epoch of a barrier through the team's block, or the engine's handle.
        let started = match data.signal_block {
            Some(block) => Ok(crate::barrier::team::start(rt, &data, block)),
            None => {
                let op = Box::new(barrier::Barrier::new(self.size));
                Err(engine::start(rt, self, CALL, engine::digest(&[1]), op))
            }
        };
        rt.progress();
        let event = match started {
            Ok(epoch) => Event::team_barrier(data, epoch),
            Err(handle) => event_of(handle),
        };
        gasp::end!(span, team, event.gasp_handle());
        event
    }

    /// GASNet-EX `gex_Coll_BroadcastNB`: copies `nbytes` bytes at `src` on `root` to
    /// `dst` on every rank of the team (the root copies unless `src == dst`).
    ///
    /// # Safety
    /// On the root, `src` must be valid for `nbytes` bytes of reads, and on every rank
    /// `dst` for `nbytes` bytes of writes, until the event completes; neither may be
    /// otherwise accessed meanwhile (except reading `src`), and on the root they may
    /// only overlap by being equal.
    #[track_caller]
    pub unsafe fn broadcast_nb(
        &self,
        root: Rank,
        dst: *mut u8,
        src: *const u8,
        nbytes: usize,
        flags: Flags,
    ) -> Event {
        const CALL: &str = "Team::broadcast_nb";
        let rt = initiation(self, CALL);
        check_root(CALL, root, self.size);
        let span = gasp::span!(
            GASP_UPC_ALL_BROADCAST,
            dst as usize,
            src as usize,
            nbytes,
            flags.bits() as i32
        );
        let (dst, src) = (or_dangling(dst), or_dangling(src.cast_mut()).cast_const());
        let tree = algorithm(Kind::Broadcast, self.size).tree();
        let chunk = rt.conduit.am_max_medium();
        let mut op =
            broadcast::Broadcast::new(tree, self.rank, self.size, root, dst, nbytes, 0, chunk);
        if self.rank == root {
            if !std::ptr::eq(dst, src) && nbytes > 0 {
                // The caller's contract: both are valid for `nbytes` bytes until
                // completion and do not overlap unless equal (excluded here).
                op.root_from(src);
            } else {
                op.root_ready();
            }
            if direct_possible(rt, self, src, nbytes) {
                op.root_direct(src, self.size);
            }
        }
        with_rma(rt, self, &mut op, root, dst, src as usize, nbytes, CALL);
        let digest = engine::digest(&[2, u64::from(root), nbytes as u64, tree as u64]);
        let event = event_of(engine::start(rt, self, CALL, digest, Box::new(op)));
        gasp::end!(
            span,
            dst as usize,
            src as usize,
            nbytes,
            flags.bits() as i32,
            event.gasp_handle()
        );
        event
    }

    /// Blocking, safe broadcast: `buf` of the root is copied into `buf` of every rank
    /// (the same length everywhere).
    #[track_caller]
    pub fn broadcast(&self, root: Rank, buf: &mut [u8]) {
        // SAFETY: `buf` is borrowed exclusively until the event completes below; at the
        // root `src == dst`.
        unsafe { self.broadcast_nb(root, buf.as_mut_ptr(), buf.as_ptr(), buf.len(), Flags::NONE) }
            .wait();
    }

    /// GASNet-EX `gex_Coll_ReduceToOneNB`: reduces the `dt_count` elements of
    /// `dt_size` bytes at `src` on every rank, element-wise with `op`, into `dst` on
    /// `root`. `user` is the function and client data of `Op::User` / `Op::UserNc`.
    ///
    /// # Safety
    /// `src` must be valid for `dt_size * dt_count` bytes of reads during the call; on
    /// the root, `dst` valid for as many bytes of writes, and not otherwise accessed,
    /// until the event completes.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub unsafe fn reduce_to_one_nb(
        &self,
        root: Rank,
        dst: *mut u8,
        src: *const u8,
        dt: Dt,
        dt_size: usize,
        dt_count: usize,
        op: Op,
        user: Option<(ReduceFn, usize)>,
        flags: Flags,
    ) -> Event {
        const CALL: &str = "Team::reduce_to_one_nb";
        check_root(CALL, root, self.size);
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.reduce_nb(
                CALL,
                Some(root),
                dst,
                src,
                dt,
                dt_size,
                dt_count,
                op,
                user,
                flags,
            )
        }
    }

    /// GASNet-EX `gex_Coll_ReduceToAllNB`: as [`reduce_to_one_nb`](Team::reduce_to_one_nb),
    /// with the result in `dst` on every rank (the same bytes everywhere).
    ///
    /// # Safety
    /// `src` must be valid for `dt_size * dt_count` bytes of reads during the call, and
    /// `dst` for as many bytes of writes, not otherwise accessed, until the event
    /// completes.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub unsafe fn reduce_to_all_nb(
        &self,
        dst: *mut u8,
        src: *const u8,
        dt: Dt,
        dt_size: usize,
        dt_count: usize,
        op: Op,
        user: Option<(ReduceFn, usize)>,
        flags: Flags,
    ) -> Event {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.reduce_nb(
                "Team::reduce_to_all_nb",
                None,
                dst,
                src,
                dt,
                dt_size,
                dt_count,
                op,
                user,
                flags,
            )
        }
    }

    /// Blocking, safe reduction to all of `data` (built-in types only: `T` is one of
    /// `i32`, `u32`, `i64`, `u64`, `f32`, `f64`): each element becomes the reduction of
    /// that element over the team.
    #[track_caller]
    pub fn reduce_to_all<T: Builtin>(&self, data: &mut [T], op: Op) {
        let src = data.to_vec();
        let size = std::mem::size_of::<T>();
        // SAFETY: `src` lives until the end of this call, `data` is borrowed
        // exclusively until the event completes below.
        unsafe {
            self.reduce_to_all_nb(
                data.as_mut_ptr().cast(),
                src.as_ptr().cast(),
                T::DT,
                size,
                data.len(),
                op,
                None,
                Flags::NONE,
            )
        }
        .wait();
    }

    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    unsafe fn reduce_nb(
        &self,
        call: &'static str,
        root: Option<Rank>,
        dst: *mut u8,
        src: *const u8,
        dt: Dt,
        dt_size: usize,
        dt_count: usize,
        op: Op,
        user: Option<(ReduceFn, usize)>,
        flags: Flags,
    ) -> Event {
        let rt = initiation(self, call);
        let (dst, src) = (or_dangling(dst), or_dangling(src.cast_mut()).cast_const());
        let reduction = Reduction::new(call, dt, dt_size, op, user);
        let len = dt_size.checked_mul(dt_count).unwrap_or_else(|| {
            panic!("gex::{call}: {dt_count} elements of {dt_size} bytes overflow the address space")
        });
        let func = user.map_or(0, |(f, _)| f as usize);
        let rtype = reduction_type(dt);
        let fl = flags.bits() as i32;
        let tree = algorithm(Kind::Reduce, self.size).tree();
        let chunk = rt.conduit.am_max_medium();
        let digest = engine::digest(&[
            3 + u64::from(root.is_none()),
            root.map_or(u64::MAX, u64::from),
            dt as u64,
            dt_size as u64,
            dt_count as u64,
            op as u64,
            tree as u64,
        ]);
        macro_rules! run {
            ($tag:ident) => {{
                let span = gasp::span!(
                    $tag,
                    dst as usize,
                    src as usize,
                    op as i32,
                    dt_count,
                    dt_size,
                    func,
                    fl,
                    rtype
                );
                // SAFETY: the caller's contract: `src` readable now, `dst` writable
                // until completion.
                let op_state = unsafe {
                    reduction::Reduce::new(
                        tree, self.rank, self.size, reduction, root, dst, src, len, chunk,
                    )
                };
                let event = event_of(engine::start(rt, self, call, digest, Box::new(op_state)));
                gasp::end!(
                    span,
                    dst as usize,
                    src as usize,
                    op as i32,
                    dt_count,
                    dt_size,
                    func,
                    fl,
                    rtype,
                    event.gasp_handle()
                );
                event
            }};
        }
        match root {
            Some(_) => run!(GASP_UPC_ALL_REDUCE),
            None => run!(GASP_GEX_COLL_REDUCE_TO_ALL),
        }
    }
}

/// The GASP reduction type of `dt` (gasp-1.4 §5.4.8 `gasp_upc_reduction_t`).
fn reduction_type(dt: Dt) -> i32 {
    use gasp::events::reduction as r;
    match dt {
        Dt::I32 => r::I,
        Dt::U32 => r::UI,
        Dt::I64 => r::L,
        Dt::U64 => r::UL,
        Dt::Flt => r::F,
        Dt::Dbl => r::D,
        Dt::User => r::USER,
    }
}
