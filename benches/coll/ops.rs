//! What each rank does in one operation of a collective figure, and the data checks.
//!
//! Data is checked in the first operation of each figure on every rank (for a
//! broadcast, the first `n`, one from each root), in a destination poisoned beforehand,
//! so that a broken path fails the job instead of reporting a great number.
//!
//! Sources: a broadcast with the automatic selection reads the root's pattern from its
//! segment, as a PGAS program's broadcast of shared data does (so a large one takes the
//! direct path, each rank copying from the root's segment); one with a tree forced reads
//! a private copy of it, since from the segment a large broadcast copies directly
//! whatever the tree. Gather-all and exchange read and write their areas of each rank's
//! segment, with LOCAL addressing, or SINGLE (every rank's addresses) for the shared
//! method; both with `IN_MYSYNC | OUT_MYSYNC`.

use crate::collectives::{
    area, Alternative, Ctx, BCAST_DST, BCAST_SEED, BCAST_SRC, MAX_BYTES, MOVE_BYTES, MOVE_DST,
    MOVE_SEED, MOVE_SRC, RED_DST, RED_SRC,
};
use crate::common::am::{check_pattern, pattern_byte};
use gex::coll::{Addr, CollFlags};
use gex::ops::{Dt, Op};
use gex::{Flags, Rank};

/// What a rank does in operation `j` of a figure.
pub(crate) type RankOp = Box<dyn FnMut(u64)>;

/// Fills a destination before the operations whose data is checked.
const POISON: u8 = 0xee;

/// A broadcast of `nbytes` into every rank's destination, operation `j` rooted at team
/// rank `j mod n`, from the root's segment with the automatic selection (`alt` `None`),
/// else from private memory; the first `n` (one from each root) are checked on every
/// rank.
pub(crate) fn broadcast(
    ctx: &Ctx,
    name: String,
    nbytes: usize,
    alt: Option<Alternative>,
) -> RankOp {
    assert!(nbytes <= MAX_BYTES);
    let team = ctx.world;
    let n = u64::from(team.size());
    let src = match alt {
        None => ctx.own(BCAST_SRC, nbytes).cast_const(),
        Some(_) => ctx.private_pattern.as_ptr(),
    };
    let dst = ctx.own(BCAST_DST, nbytes);
    Box::new(move |j| {
        let root = (j % n) as Rank;
        let check = j < n;
        if check {
            // SAFETY: the destination, between two operations (the last one completed).
            unsafe { area(dst, nbytes) }.fill(POISON);
        }
        // SAFETY: `src` (this rank's segment or private pattern, never written after
        // setup) and `dst` (its segment) are distinct, valid for `nbytes` bytes and used
        // by nothing else until the event completes below.
        unsafe { team.broadcast_nb(root, dst, src, nbytes, Flags::NONE) }.wait();
        if check {
            let what = format!("{name}: rank {} receiving from rank {root}", team.rank());
            // SAFETY: as above, after the operation completed.
            check_pattern(
                unsafe { area(dst, nbytes) },
                BCAST_SEED + u64::from(root),
                &what,
            );
        }
    })
}

/// Element `i` of rank `rank`'s reduction input: small integers, so that every sum is
/// exact in any order.
pub(crate) fn reduce_input(rank: Rank, i: usize) -> f64 {
    f64::from(rank + 1) * ((i % 1000) + 1) as f64
}

/// A reduction to all of `count` f64 with `Op::Add`; the first is checked on every rank.
pub(crate) fn reduce_all(ctx: &Ctx, name: String, count: usize) -> RankOp {
    let team = ctx.world;
    let src = ctx.own(RED_SRC, count * 8);
    let dst = ctx.own(RED_DST, count * 8);
    let n = team.size();
    Box::new(move |j| {
        if j == 0 {
            // SAFETY: the destination, before the figure's first operation.
            unsafe { area(dst, count * 8) }.fill(POISON);
        }
        // SAFETY: `src` and `dst` are distinct ranges of this rank's segment, valid for
        // `count` f64 and used by nothing else until the event completes below.
        unsafe { team.reduce_to_all_nb(dst, src, Dt::Dbl, 8, count, Op::Add, None, Flags::NONE) }
            .wait();
        if j == 0 {
            // SAFETY: as above, after the operation completed.
            let result = unsafe { area(dst, count * 8) };
            for (i, x) in result.chunks_exact(8).enumerate() {
                let got = f64::from_ne_bytes(x.try_into().expect("8 bytes"));
                let want: f64 = (0..n).map(|r| reduce_input(r, i)).sum();
                assert!(
                    got == want,
                    "{name}: rank {} got {got} in element {i} of the sum, expected {want}",
                    team.rank()
                );
            }
        }
    })
}

/// A gather-all of `nbytes` per rank: block `r` of every destination is the start of
/// rank `r`'s source.
pub(crate) fn gather_all(
    ctx: &Ctx,
    name: String,
    nbytes: usize,
    alt: Option<Alternative>,
) -> RankOp {
    movement(ctx, name, nbytes, alt, Movement::GatherAll)
}

/// An exchange of `nbytes` per pair of ranks: block `r` of rank `i`'s destination is
/// block `i` of rank `r`'s source.
pub(crate) fn exchange(ctx: &Ctx, name: String, nbytes: usize, alt: Option<Alternative>) -> RankOp {
    movement(ctx, name, nbytes, alt, Movement::Exchange)
}

/// The areas [`MOVE_SRC`] and [`MOVE_DST`] of a data-movement figure, with
/// `IN_MYSYNC | OUT_MYSYNC` and SINGLE addressing when `alt` is the shared method
/// (LOCAL otherwise).
struct Areas {
    src: *const u8,
    dst: *mut u8,
    /// Every rank's areas in its owner's address space (SINGLE).
    srcs: Vec<usize>,
    dsts: Vec<usize>,
    single: bool,
    flags: CollFlags,
}

impl Areas {
    /// This rank's `src_len` bytes of source and `dst_len` of destination.
    fn new(ctx: &Ctx, alt: Option<Alternative>, src_len: usize, dst_len: usize) -> Areas {
        let single = alt.is_some_and(Alternative::single);
        let scope = if single {
            CollFlags::SINGLE
        } else {
            CollFlags::LOCAL
        };
        Areas {
            src: ctx.own(MOVE_SRC, src_len).cast_const(),
            dst: ctx.own(MOVE_DST, dst_len),
            srcs: ctx.every(MOVE_SRC),
            dsts: ctx.every(MOVE_DST),
            single,
            flags: CollFlags::IN_MYSYNC | CollFlags::OUT_MYSYNC | scope,
        }
    }

    /// The destination and source arguments of the operation.
    fn addrs(&self) -> (Addr<'_>, Addr<'_>) {
        if self.single {
            (Addr::Single(&self.dsts), Addr::Single(&self.srcs))
        } else {
            (Addr::Local(self.dst), Addr::Local(self.src.cast_mut()))
        }
    }
}

/// A scatter of `nbytes` per rank from the root's [`MOVE_SRC`] (its pattern) to every
/// rank's [`MOVE_DST`], operation `j` rooted at team rank `j mod n`, with
/// `IN_MYSYNC | OUT_MYSYNC` and SINGLE addressing when `alt` is the shared method
/// (LOCAL otherwise); the first `n` (one from each root) are checked on every rank.
pub(crate) fn scatter(ctx: &Ctx, name: String, nbytes: usize, alt: Option<Alternative>) -> RankOp {
    rooted(ctx, name, nbytes, alt, Rooted::Scatter)
}

/// A gather of `nbytes` per rank from every rank's [`MOVE_SRC`] into block `r` of the
/// root's [`MOVE_DST`], the root rotating as for [`scatter`]; checked at each root.
pub(crate) fn gather(ctx: &Ctx, name: String, nbytes: usize, alt: Option<Alternative>) -> RankOp {
    rooted(ctx, name, nbytes, alt, Rooted::Gather)
}

/// The rooted collectives of the design document that move a block per rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rooted {
    Scatter,
    Gather,
}

fn rooted(
    ctx: &Ctx,
    name: String,
    nbytes: usize,
    alt: Option<Alternative>,
    what: Rooted,
) -> RankOp {
    let team = ctx.world;
    let (me, n) = (team.rank() as usize, team.size() as usize);
    let all = n * nbytes;
    assert!(
        all <= MOVE_BYTES,
        "{name}: {n} blocks of {nbytes} bytes do not fit in the bench's areas"
    );
    let areas = Areas::new(ctx, alt, all, all);
    let (dst, flags) = (areas.dst, areas.flags);
    Box::new(move |j| {
        let root = (j % n as u64) as Rank;
        let check = j < n as u64;
        if check {
            // SAFETY: the destination, between two operations (the last one completed).
            unsafe { area(dst, all) }.fill(POISON);
        }
        let (d, s) = areas.addrs();
        // SAFETY: every rank's source and destination are distinct areas of its segment
        // of `all` bytes (so SINGLE addresses lie in the owners' segments); the sources
        // are never written after setup, and a destination is used by nothing else until
        // the event completes below: with OUT_MYSYNC, every movement into it is done.
        let event = unsafe {
            match what {
                Rooted::Scatter => team.scatter_nb(root, d, s, nbytes, flags),
                Rooted::Gather => team.gather_nb(root, d, s, nbytes, flags),
            }
        };
        event.wait();
        if check {
            // SAFETY: as above, after the operation completed.
            let got = unsafe { area(dst, all) };
            let seed = |r: usize| MOVE_SEED + r as u64;
            match what {
                Rooted::Scatter => check_block(
                    &got[..nbytes],
                    seed(root as usize),
                    me * nbytes,
                    &format!("{name}: rank {me} receiving from rank {root}"),
                ),
                Rooted::Gather if me == root as usize => {
                    for (r, block) in got.chunks_exact(nbytes.max(1)).enumerate() {
                        check_block(block, seed(r), 0, &format!("{name}: root {me}, block {r}"));
                    }
                }
                Rooted::Gather => {}
            }
        }
    })
}

/// A prefix reduction of `count` f64 with `Op::Add` from every rank's [`RED_SRC`] to
/// its [`RED_DST`] (rank `r` gets the sum over ranks `0..=r`), with
/// `IN_MYSYNC | OUT_MYSYNC` and LOCAL addressing; the first is checked on every rank.
pub(crate) fn prefix_reduce(ctx: &Ctx, name: String, count: usize) -> RankOp {
    let team = ctx.world;
    let me = team.rank();
    let src = ctx.own(RED_SRC, count * 8).cast_const();
    let dst = ctx.own(RED_DST, count * 8);
    let flags = CollFlags::IN_MYSYNC | CollFlags::OUT_MYSYNC | CollFlags::LOCAL;
    Box::new(move |j| {
        if j == 0 {
            // SAFETY: the destination, before the figure's first operation.
            unsafe { area(dst, count * 8) }.fill(POISON);
        }
        // SAFETY: `src` and `dst` are distinct ranges of this rank's segment, valid for
        // `count` f64 and used by nothing else until the event completes below.
        unsafe {
            team.prefix_reduce_nb(
                Addr::Local(dst),
                Addr::Local(src.cast_mut()),
                Dt::Dbl,
                8,
                count,
                Op::Add,
                None,
                flags,
            )
        }
        .wait();
        if j == 0 {
            // SAFETY: as above, after the operation completed.
            let result = unsafe { area(dst, count * 8) };
            for (i, x) in result.chunks_exact(8).enumerate() {
                let got = f64::from_ne_bytes(x.try_into().expect("8 bytes"));
                let want: f64 = (0..=me).map(|r| reduce_input(r, i)).sum();
                assert!(
                    got == want,
                    "{name}: rank {me} got {got} in element {i} of the prefix sum, \
                     expected {want}"
                );
            }
        }
    })
}

/// The collectives that fill a block of every rank's destination from each rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Movement {
    GatherAll,
    Exchange,
}

/// A gather-all or exchange of `nbytes` per block between the areas [`MOVE_SRC`] and
/// [`MOVE_DST`] of every rank, with `IN_MYSYNC | OUT_MYSYNC` and SINGLE addressing when
/// `alt` is the shared method (LOCAL otherwise); the first is checked on every rank.
fn movement(
    ctx: &Ctx,
    name: String,
    nbytes: usize,
    alt: Option<Alternative>,
    what: Movement,
) -> RankOp {
    let team = ctx.world;
    let (me, n) = (team.rank() as usize, team.size() as usize);
    let all = n * nbytes;
    assert!(
        all <= MOVE_BYTES,
        "{name}: {n} blocks of {nbytes} bytes do not fit in the bench's areas"
    );
    let src_len = match what {
        Movement::GatherAll => nbytes,
        Movement::Exchange => all,
    };
    let areas = Areas::new(ctx, alt, src_len, all);
    let (dst, flags) = (areas.dst, areas.flags);
    Box::new(move |j| {
        if j == 0 {
            // SAFETY: the destination, before the figure's first operation.
            unsafe { area(dst, all) }.fill(POISON);
        }
        let (d, s) = areas.addrs();
        // SAFETY: every rank's source holds `src_len` bytes and its destination `all`,
        // distinct areas of its segment (so SINGLE addresses lie in the owners'
        // segments); the sources are never written after setup, and a destination is
        // used by nothing else until the event completes below: with OUT_MYSYNC, every
        // movement into it is done by then.
        let event = unsafe {
            match what {
                Movement::GatherAll => team.gather_all_nb(d, s, nbytes, flags),
                Movement::Exchange => team.exchange_nb(d, s, nbytes, flags),
            }
        };
        event.wait();
        if j == 0 {
            // SAFETY: as above, after the operation completed.
            let got = unsafe { area(dst, all) };
            for (r, block) in got.chunks_exact(nbytes.max(1)).enumerate() {
                let from = match what {
                    Movement::GatherAll => 0,
                    Movement::Exchange => me * nbytes,
                };
                check_block(
                    block,
                    MOVE_SEED + r as u64,
                    from,
                    &format!("{name}: rank {me}, block {r}"),
                );
            }
        }
    })
}

/// Checks that `buf` holds bytes `from..` of the pattern of `seed`.
fn check_block(buf: &[u8], seed: u64, from: usize, what: &str) {
    if let Some(i) = (0..buf.len()).find(|&i| buf[i] != pattern_byte(seed, from + i)) {
        panic!(
            "{what}: wrong data at byte {i} of {}: {:#04x}, expected {:#04x}",
            buf.len(),
            buf[i],
            pattern_byte(seed, from + i)
        );
    }
}
