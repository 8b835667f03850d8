//! The data-movement calls of the design document on [`Team`]: broadcast, scatter,
//! gather, gather-all, exchange and permute. Each resolves its addresses, picks its method
//! (`select`) and starts the operation of that method under the synchronizations of its
//! flags (`sync`).

use super::flags::{Addr, Modes};
use super::images::Images;
use super::select::{forced, method, Method, Operation};
use super::shared::Pull;
use super::CollFlags;
use super::{gather_all, launch, mapped, pulls, rooted, shared_op, total, tree_of, words, Build};
use crate::coll::broadcast::Broadcast;
use crate::coll::engine::Collective;
use crate::coll::{check_root, direct_possible, initiation, with_rma};
use crate::conduit::{Conduit, Rank};
use crate::event::Event;
use crate::runtime::Runtime;
use crate::team::Team;

/// The broadcast in messages of `nbytes` from the root's `src` into `dst`: the
/// GASNet-EX broadcast along the tree of `m`, or, when the method is the automatic
/// choice (`automatic`, read when the call was made: a build deferred by the input
/// sync must not see a method set since, which the other ranks' builds may not), by
/// its direct copies where the root's source allows them, or by RMA along the tree
/// where the team spans neighbourhoods.
///
/// # Safety
/// At the root `src` must be readable for `nbytes` bytes until completion; `dst`
/// writable for `nbytes` until completion; at the root they may only overlap by being
/// equal.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn broadcast_messages(
    rt: &Runtime,
    team: &Team,
    m: Method,
    automatic: bool,
    root: Rank,
    dst: *mut u8,
    src: *const u8,
    nbytes: usize,
) -> Broadcast {
    let (me, n) = (team.rank, team.size);
    let chunk = rt.conduit.am_max_medium();
    let mut op = Broadcast::new(tree_of(m), me, n, root, dst, nbytes, 0, chunk);
    if me == root {
        if !std::ptr::eq(dst, src) && nbytes > 0 {
            // SAFETY: the caller's contract: both are valid for `nbytes` bytes and do
            // not overlap unless equal (excluded here).
            unsafe { std::ptr::copy_nonoverlapping(src, dst, nbytes) };
        }
        op.root_ready();
        // A forced method is run as named; the direct copies are the automatic
        // choice's.
        if automatic && direct_possible(rt, team, src, nbytes) {
            op.root_direct(src, n);
        }
    }
    if automatic {
        // The root's data is in its `dst` (copied above).
        let call = "Team::coll_broadcast_nb";
        with_rma(rt, team, &mut op, root, dst, dst as usize, nbytes, call);
    }
    op
}

/// The opening of a data-movement call named `call`: the runtime and the checked
/// flags, after checking `root` (for the calls that have one).
#[track_caller]
pub(super) fn opening(
    team: &Team,
    call: &str,
    root: Option<Rank>,
    flags: CollFlags,
) -> (&'static Runtime, Modes) {
    let rt = initiation(team, call);
    if let Some(root) = root {
        check_root(call, root, team.size);
    }
    (rt, flags.check(call))
}

/// The digest words of a data-movement call: its kind, flags and method, its root (for
/// the calls that have one), `nbytes` and the SINGLE lists of `dst` and `src`.
pub(super) fn movement_words(
    kind: u64,
    flags: CollFlags,
    m: Method,
    root: Option<Rank>,
    nbytes: usize,
    lists: [&[usize]; 2],
) -> Vec<u64> {
    let args: Vec<u64> = root
        .map(u64::from)
        .into_iter()
        .chain([nbytes as u64])
        .collect();
    words(kind, flags, m, &args, &lists)
}

/// The rooted operations' layout for method `m` from `root`, with `sizes[r]` bytes for
/// rank `r`.
pub(super) fn layout<'a>(
    rt: &Runtime,
    team: &Team,
    m: Method,
    root: Rank,
    sizes: &'a [usize],
) -> rooted::Layout<'a> {
    rooted::Layout {
        tree: tree_of(m),
        me: team.rank,
        n: team.size,
        root,
        sizes,
        chunk: rt.conduit.am_max_medium(),
    }
}

/// The staggered gather-all into `dst`, which holds rank `r`'s images' blocks of
/// `nbytes` at `images.first(r) * nbytes`: this rank's (at `mine`) are copied into
/// place now and sent to every other rank.
///
/// # Safety
/// `mine` must be readable for this rank's images' blocks until completion, `dst`
/// writable for every block until completion.
pub(in crate::coll) unsafe fn gather_all_staggered(
    call: &'static str,
    team: &Team,
    images: &Images,
    dst: *mut u8,
    mine: *const u8,
    nbytes: usize,
) -> gather_all::Staggered {
    let (me, n) = (team.rank, team.size);
    let len = images.of(me) * nbytes;
    // SAFETY: the caller's contract: `dst` is writable for every block.
    unsafe { std::ptr::copy(mine, dst.add(images.first(me) * nbytes), len) };
    let order = gather_all::Staggered::staggered(me, n);
    gather_all::Staggered::new(
        call,
        dst,
        order.clone().map(|to| (to, mine, len)).collect(),
        order
            .map(|from| (from, images.first(from) * nbytes, images.of(from) * nbytes))
            .collect(),
    )
}

impl Team {
    /// The design document's `gasnet_coll_broadcast_nb`: `nbytes` at the root's `src`
    /// to `dst` of every rank.
    ///
    /// With LOCAL addressing (or a message method forced) this is the GASNet-EX
    /// broadcast's machinery ([`broadcast_nb`](Team::broadcast_nb)) under the flags'
    /// sync modes: along a tree, or, left to the automatic choice, by direct copies
    /// from the root's source when it lies in the root's segment and the team shares
    /// memory. With SINGLE addresses that every rank maps, the shared method: each rank
    /// copies straight from the root's segment, one copy per byte.
    ///
    /// # Safety
    /// The root's `src` must be readable for `nbytes` bytes and every rank's `dst`
    /// writable for `nbytes`, and not otherwise accessed (except reading `src`), until
    /// the event completes on the owner (bulk lifetime; with OUT_NOSYNC, until it
    /// completes on every rank); at the root they may only overlap by being equal.
    /// SINGLE addresses must lie in the owners' segments.
    #[track_caller]
    pub unsafe fn coll_broadcast_nb(
        &self,
        root: Rank,
        dst: Addr<'_>,
        src: Addr<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::coll_broadcast_nb";
        let (rt, modes) = opening(self, CALL, Some(root), flags);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, me, n);
        let s = src.mine(CALL, "src", modes, me, n);
        let srcs = mapped(rt, self, CALL, src.list(), |r| {
            if r == root {
                nbytes
            } else {
                0
            }
        });
        let m = method(Operation::Broadcast, n, nbytes, srcs.is_some());
        let automatic = forced(Operation::Broadcast).is_none();
        let w = movement_words(6, flags, m, Some(root), nbytes, [dst.list(), src.list()]);
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let from = (srcs[root as usize], 0);
                    let all = pulls::scatter(&Images::one_each(n), me, root, from, &[d], nbytes);
                    shared_op(&team, modes, all)
                }
                // SAFETY: the caller's contract, passed on.
                _ => Box::new(unsafe {
                    broadcast_messages(rt, &team, m, automatic, root, d, s, nbytes)
                }),
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_BROADCAST,
            d,
            s,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// The design document's `gasnet_coll_scatter_nb`: block `r` (`nbytes` at
    /// `src + r * nbytes`) of the root's `src` to `dst` of every rank `r`.
    ///
    /// # Safety
    /// The root's `src` must be readable for `size() * nbytes` bytes and every rank's
    /// `dst` writable for `nbytes`, and not otherwise accessed (except reading `src`),
    /// until the event completes on the owner (bulk lifetime; with OUT_NOSYNC, until it
    /// completes on every rank). SINGLE addresses must lie in the owners' segments.
    #[track_caller]
    pub unsafe fn scatter_nb(
        &self,
        root: Rank,
        dst: Addr<'_>,
        src: Addr<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::scatter_nb";
        let (rt, modes) = opening(self, CALL, Some(root), flags);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, me, n);
        let s = src.mine(CALL, "src", modes, me, n);
        let all = total(CALL, nbytes, n);
        let srcs = mapped(
            rt,
            self,
            CALL,
            src.list(),
            |r| if r == root { all } else { 0 },
        );
        let m = method(Operation::Scatter, n, nbytes, srcs.is_some());
        let w = movement_words(0, flags, m, Some(root), nbytes, [dst.list(), src.list()]);
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let from = (srcs[root as usize], nbytes);
                    let all = pulls::scatter(&Images::one_each(n), me, root, from, &[d], nbytes);
                    shared_op(&team, modes, all)
                }
                _ => {
                    let sizes = vec![nbytes; n as usize];
                    let at = layout(rt, &team, m, root, &sizes);
                    // SAFETY: the caller's contract, passed on.
                    Box::new(unsafe { rooted::Scatter::new(at, d, s) })
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_SCATTER,
            d,
            s,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// The design document's `gasnet_coll_gather_nb`: every rank's `src` (`nbytes`) to
    /// block `r` of the root's `dst`.
    ///
    /// # Safety
    /// Every rank's `src` must be readable for `nbytes` bytes and the root's `dst`
    /// writable for `size() * nbytes`, as for [`scatter_nb`](Team::scatter_nb).
    #[track_caller]
    pub unsafe fn gather_nb(
        &self,
        root: Rank,
        dst: Addr<'_>,
        src: Addr<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::gather_nb";
        let (rt, modes) = opening(self, CALL, Some(root), flags);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, me, n);
        let s = src.mine(CALL, "src", modes, me, n);
        total(CALL, nbytes, n);
        let srcs = mapped(rt, self, CALL, src.list(), |_| nbytes);
        let m = method(Operation::Gather, n, nbytes, srcs.is_some());
        let w = movement_words(1, flags, m, Some(root), nbytes, [dst.list(), src.list()]);
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let all = pulls::gather(&Images::one_each(n), me, root, &srcs, d, nbytes);
                    shared_op(&team, modes, all)
                }
                _ => {
                    let sizes = vec![nbytes; n as usize];
                    let at = layout(rt, &team, m, root, &sizes);
                    // SAFETY: the caller's contract, passed on.
                    Box::new(unsafe { rooted::Gather::new(at, d, s) })
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_GATHER,
            d,
            s,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// The design document's `gasnet_coll_gather_all_nb`: every rank's `src` (`nbytes`)
    /// to block `r` of every rank's `dst`.
    ///
    /// # Safety
    /// Every rank's `src` must be readable for `nbytes` bytes and its `dst` writable for
    /// `size() * nbytes`, as for [`scatter_nb`](Team::scatter_nb).
    #[track_caller]
    pub unsafe fn gather_all_nb(
        &self,
        dst: Addr<'_>,
        src: Addr<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::gather_all_nb";
        let (rt, modes) = opening(self, CALL, None, flags);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, me, n);
        let s = src.mine(CALL, "src", modes, me, n);
        total(CALL, nbytes, n);
        let srcs = mapped(rt, self, CALL, src.list(), |_| nbytes);
        let m = method(Operation::GatherAll, n, nbytes, srcs.is_some());
        let w = movement_words(2, flags, m, None, nbytes, [dst.list(), src.list()]);
        let chunk = rt.conduit.am_max_medium();
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let all = pulls::all_to_all(&Images::one_each(n), me, &srcs, 0, &[d], nbytes);
                    shared_op(&team, modes, all)
                }
                (Method::Staggered, _) => Box::new(
                    // SAFETY: the caller's contract, passed on.
                    unsafe {
                        gather_all_staggered(CALL, &team, &Images::one_each(n), d, s, nbytes)
                    },
                ),
                // SAFETY: the caller's contract, passed on.
                _ => Box::new(unsafe {
                    gather_all::Dissemination::new(me, n, &vec![nbytes; n as usize], d, s, chunk)
                }),
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_GATHER_ALL,
            d,
            s,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// The design document's `gasnet_coll_exchange_nb` (all-to-all): block `j` of rank
    /// `i`'s `src` to block `i` of rank `j`'s `dst`.
    ///
    /// # Safety
    /// Every rank's `src` must be readable, and its `dst` writable, for
    /// `size() * nbytes` bytes, as for [`scatter_nb`](Team::scatter_nb).
    #[track_caller]
    pub unsafe fn exchange_nb(
        &self,
        dst: Addr<'_>,
        src: Addr<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::exchange_nb";
        let (rt, modes) = opening(self, CALL, None, flags);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, me, n);
        let s = src.mine(CALL, "src", modes, me, n);
        let all = total(CALL, nbytes, n);
        let srcs = mapped(rt, self, CALL, src.list(), |_| all);
        let m = method(Operation::Exchange, n, nbytes, srcs.is_some());
        let w = movement_words(3, flags, m, None, nbytes, [dst.list(), src.list()]);
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let one = Images::one_each(n);
                    let all = pulls::all_to_all(&one, me, &srcs, nbytes, &[d], nbytes);
                    shared_op(&team, modes, all)
                }
                _ => {
                    let at = me as usize * nbytes;
                    // SAFETY: the caller's contract: both hold every block.
                    unsafe { std::ptr::copy(s.add(at), d.add(at), nbytes) };
                    let order = gather_all::Staggered::staggered(me, n);
                    Box::new(gather_all::Staggered::new(
                        CALL,
                        d,
                        order
                            .clone()
                            .map(|to| {
                                (
                                    to,
                                    s.wrapping_add(to as usize * nbytes).cast_const(),
                                    nbytes,
                                )
                            })
                            .collect(),
                        order
                            .map(|from| (from, from as usize * nbytes, nbytes))
                            .collect(),
                    ))
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_EXCHANGE,
            d,
            s,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// UPC's `upc_all_permute` over a team: rank `r`'s `src` (`nbytes`) to `dst` of rank
    /// `perm[r]`. `perm` is single-valued and must be a permutation of the team's ranks.
    ///
    /// # Safety
    /// Every rank's `src` must be readable, and its `dst` writable, for `nbytes` bytes,
    /// as for [`scatter_nb`](Team::scatter_nb).
    #[track_caller]
    pub unsafe fn permute_nb(
        &self,
        perm: &[Rank],
        dst: Addr<'_>,
        src: Addr<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::permute_nb";
        let (rt, modes) = opening(self, CALL, None, flags);
        let (me, n) = (self.rank, self.size);
        let mut inverse = vec![Rank::MAX; n as usize];
        if perm.len() != n as usize {
            panic!(
                "gex::{CALL}: `perm` has {} entries for a team of {n}",
                perm.len()
            );
        }
        for (r, &p) in perm.iter().enumerate() {
            if p >= n || inverse[p as usize] != Rank::MAX {
                panic!("gex::{CALL}: `perm` is not a permutation of the team's ranks: {perm:?}");
            }
            inverse[p as usize] = r as Rank;
        }
        let d = dst.mine(CALL, "dst", modes, me, n);
        let s = src.mine(CALL, "src", modes, me, n);
        let srcs = mapped(rt, self, CALL, src.list(), |_| nbytes);
        let m = method(Operation::Permute, n, nbytes, srcs.is_some());
        let perm64: Vec<u64> = perm.iter().map(|&p| u64::from(p)).collect();
        let mut args = vec![nbytes as u64];
        args.extend(perm64);
        let w = words(4, flags, m, &args, &[dst.list(), src.list()]);
        let from = inverse[me as usize];
        let targets = perm.to_vec();
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => shared_op(
                    &team,
                    modes,
                    (0..n)
                        .map(|owner| {
                            let reader = targets[owner as usize];
                            let dst = if reader == me { d as usize } else { 0 };
                            (
                                reader,
                                Pull {
                                    owner,
                                    src: srcs[owner as usize],
                                    dst,
                                    len: nbytes,
                                },
                            )
                        })
                        .collect(),
                ),
                _ => {
                    let to = targets[me as usize];
                    if to == me {
                        // SAFETY: the caller's contract.
                        unsafe { std::ptr::copy(s, d, nbytes) };
                    }
                    let sends = if to == me {
                        Vec::new()
                    } else {
                        vec![(to, s.cast_const(), nbytes)]
                    };
                    let blocks = if from == me {
                        Vec::new()
                    } else {
                        vec![(from, 0, nbytes)]
                    };
                    Box::new(gather_all::Staggered::new(CALL, d, sends, blocks))
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        let (dd, ss, pp, fl) = (
            d as usize,
            s as usize,
            perm.as_ptr() as usize,
            flags.bits() as i32,
        );
        let span = gasp::span!(GASP_UPC_ALL_PERMUTE, dd, ss, pp, nbytes, fl);
        let event = launch(rt, self, CALL, modes, &w, inner);
        gasp::end!(span, dd, ss, pp, nbytes, fl, event.gasp_handle());
        event
    }
}
