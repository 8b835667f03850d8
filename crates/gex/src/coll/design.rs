//! The collectives of the GASNet collectives design document
//! (`gasnet-collectives-design.txt`, "Current proposal"): broadcast, scatter, gather,
//! gather-all, exchange, permute and prefix reduction over any team, each non-blocking with an
//! [`Event`] (the document's handle; `Event::test`/`wait` and
//! `Event::test_some`/`wait_some`/`test_all`/`wait_all` are its try and wait syncs for
//! one, some and all handles), and each also blocking (the same name without `_nb`;
//! [`Team::coll_broadcast`] for the broadcast, as [`Team::broadcast`] is GASNet-EX's),
//! which refuses `AGGREGATE` and a call inside an aggregate, as the document does.
//!
//! **Flags** ([`CollFlags`]): exactly one input sync mode, one output sync mode and one
//! addressing scope, checked at every call; they are single-valued (in the digest that
//! every message carries, so ranks that disagree fail with a message).
//!
//! **Addressing.** LOCAL: each rank passes its own addresses ([`Addr::Local`]), which
//! may be anywhere in its memory. SINGLE: every rank passes every rank's addresses,
//! identically; our segments are not aligned, so a SINGLE argument is a list of one
//! owner-space address per team rank ([`Addr::Single`]). When every source the call
//! reads is mapped in this process (one host), the [`Method::Shared`] method copies each
//! byte once, straight from the source segment to the destination; otherwise (or when
//! another method is forced) the call runs the LOCAL algorithms with this rank's
//! entries.
//!
//! **Sync modes**, exactly as the document defines them:
//! * IN_ALLSYNC: an entry synchronization (a dissemination barrier inside the
//!   operation, `sync`) runs before any data moves; the data movement is only built
//!   then, so not even this rank's own blocks are read or copied before.
//! * IN_MYSYNC: with messages, a block reaches a rank's destination only after that
//!   rank's call (a message for an operation not initiated here waits in the engine)
//!   and leaves a source only from inside its owner's call, so nothing more is needed;
//!   the shared method waits for each owner's "entered" message before reading.
//! * IN_NOSYNC: as IN_MYSYNC with messages; the shared method reads at once.
//! * OUT_ALLSYNC: an exit synchronization after this rank's part is done, so the event
//!   completes only once every rank's data movement has.
//! * OUT_MYSYNC: the event completes when the data movement to and from this rank's
//!   areas is done (its destination written, its source sent or read by every reader:
//!   the shared method waits for the readers' "done" messages).
//! * OUT_NOSYNC: local completion as well (with the shared method, only this rank's
//!   own copies). That satisfies the document's rule: every movement ends in some
//!   rank's destination, or in one of its internal buffers that the rank consumes before
//!   it completes, so by the time the last rank syncs, every rank has completed and all
//!   data movement is over.
//!
//! **Images** (the "i" calls: [`Team::broadcasti_nb`], [`Team::scatteri_nb`],
//! [`Team::gatheri_nb`], [`Team::gather_alli_nb`], [`Team::exchangei_nb`]): after
//! [`Team::coll_init`] declared how many images each rank holds, these take one address
//! per image ([`AddrList`]: LOCAL, this rank's images'; SINGLE, every image's), with the
//! blocks in node-major image order. They run the plain calls' methods with per-rank
//! block counts (`images`). The document has no "i" permute or prefix reduction.
//!
//! **AGGREGATE**: a call with [`CollFlags::AGGREGATE`] starts at once (the document's
//! "nbi access region" reading) and returns [`Event::invalid`], which stands for
//! nothing: it must not be synchronized (its wait returns at once and says nothing about
//! the aggregate). The next call without the flag is the aggregate's last member; its
//! event completes only when every member has completed at this rank.
//!
//! **Methods** ([`Method`], forced with [`set_method`](crate::coll::set_method) or the
//! variables `GEX_COLL_DESIGN_BROADCAST`, `GEX_COLL_SCATTER`, `GEX_COLL_GATHER`,
//! `GEX_COLL_GATHER_ALL`, `GEX_COLL_EXCHANGE`, `GEX_COLL_PERMUTE`,
//! `GEX_COLL_PREFIX_REDUCE`): flat and binomial trees for broadcast (the GASNet-EX
//! broadcast's, `coll::broadcast`), scatter and gather (`rooted`), dissemination and
//! staggered gather-all (`gather_all`), staggered exchange, chain and doubling prefix
//! reduction (`scan`), and the shared method (`shared`); every one works on any team
//! size. The automatic choice is in `select`.
//!
//! The files: `flags`, `select`, `movement` (the data-movement calls), `images` (the
//! images and their address lists), `movement_images` (the "i" calls), `blocking` (the
//! blocking forms of them all), `sync` (entry,
//! exit, aggregates), `rooted`, `gather_all` (also the staggered exchange and permute),
//! `scan`, `shared`, `pulls` (the shared method's pulls of the data-movement calls).

/// Runs `$body` (the event of a call) inside the call's GASP interval.
macro_rules! reported {
    ($tag:ident, $dst:expr, $src:expr, $nbytes:expr, $flags:expr, $body:expr) => {{
        let (d, s, nb, fl) = ($dst as usize, $src as usize, $nbytes, $flags.bits() as i32);
        let span = gasp::span!($tag, d, s, nb, fl);
        let event: Event = $body;
        gasp::end!(span, d, s, nb, fl, event.gasp_handle());
        event
    }};
}

mod blocking;
mod flags;
mod gather_all;
mod images;
mod movement;
mod movement_images;
mod pulls;
mod rooted;
mod scan;
pub(crate) mod select;
mod shared;
mod sync;

use std::cell::RefCell;
use std::sync::Arc;

pub use flags::{Addr, CollFlags};
use flags::{Modes, Sync};
pub use images::AddrList;
use select::Method;
use shared::Pull;
use sync::Build;

use super::engine::{self, Collective};
use super::event_of;
use super::tree::Tree;
use crate::conduit::{Conduit, OpHandle, Rank};
use crate::event::Event;
use crate::runtime::Runtime;
use crate::team::Team;

thread_local! {
    /// The members of the aggregate this thread has under way (handles of its calls
    /// with AGGREGATE since its last call without it). Per thread: another thread's
    /// calls, on any team, neither join nor end it.
    static AGGREGATE: RefCell<Vec<Arc<OpHandle>>> = const { RefCell::new(Vec::new()) };
}

/// What kind of collective a digest stands for (distinct from the GASNet-EX ones').
const DIGEST_BASE: u64 = 0x100;

/// Starts the data movement of `inner` with the synchronizations `modes` asks for; the
/// event of the call.
#[track_caller]
fn launch(
    rt: &Runtime,
    team: &Team,
    call: &'static str,
    modes: Modes,
    words: &[u64],
    inner: Build,
) -> Event {
    let members = if modes.aggregate {
        Vec::new()
    } else {
        AGGREGATE.with_borrow_mut(std::mem::take)
    };
    let op = sync::Synced::new(
        team.size,
        modes.input == Sync::All,
        inner,
        modes.output == Sync::All,
        members,
    );
    let handle = engine::start(rt, team, call, engine::digest(words), Box::new(op));
    if modes.aggregate {
        AGGREGATE.with_borrow_mut(|members| members.push(handle));
        Event::invalid()
    } else {
        event_of(handle)
    }
}

/// The digest words of a call's single-valued arguments.
fn words(
    kind: u64,
    flags: CollFlags,
    method: Method,
    args: &[u64],
    lists: &[&[usize]],
) -> Vec<u64> {
    let mut w = vec![DIGEST_BASE + kind, u64::from(flags.bits()), method as u64];
    w.extend_from_slice(args);
    for list in lists {
        w.extend(list.iter().map(|&a| a as u64));
    }
    w
}

/// Whether every member of `team` shares memory with this rank (then every member
/// maps every member's segment, as neighbourhoods are symmetric, and all of them make
/// the same choice of a method that reads through the mappings). On a team spanning
/// hosts (the mpi conduit) it is false on every member, even where some sources happen
/// to be mapped, so no member picks a shared-memory method the others cannot follow.
pub(crate) fn on_one_nbrhd(rt: &Runtime, team: &Team, call: &str) -> bool {
    let (nbrhd, _) = rt.conduit.nbrhd();
    (0..team.size).all(|r| nbrhd.binary_search(&team.job_rank_of(call, r)).is_ok())
}

/// The addresses in this process of every rank's source, `len(r)` bytes at `list[r]`
/// (an owner-space address), if the team is on one neighbourhood ([`on_one_nbrhd`])
/// and all are inside their segments (ranks with `len(r) == 0` need nothing).
fn mapped(
    rt: &Runtime,
    team: &Team,
    call: &str,
    list: &[usize],
    len: impl Fn(Rank) -> usize,
) -> Option<Vec<usize>> {
    if list.is_empty() || !on_one_nbrhd(rt, team, call) {
        return None;
    }
    (0..team.size)
        .map(|r| {
            let l = len(r);
            if l == 0 {
                return Some(0);
            }
            rt.conduit
                .translate(team.job_rank_of(call, r), list[r as usize], l)
                .ok()
        })
        .collect()
}

/// The shared method: the pulls of the whole operation as `(reader, pull)`, filtered
/// for this rank.
fn shared_op(team: &Team, modes: Modes, all: Vec<(Rank, Pull)>) -> Box<dyn Collective> {
    let me = team.rank;
    let mut readers: Vec<Rank> = all
        .iter()
        .filter(|(reader, p)| p.owner == me && *reader != me)
        .map(|(reader, _)| *reader)
        .collect();
    readers.sort_unstable();
    readers.dedup();
    let pulls = all
        .into_iter()
        .filter(|(reader, _)| *reader == me)
        .map(|(_, p)| p)
        .collect();
    Box::new(shared::Shared::new(
        me,
        team.size,
        pulls,
        readers,
        modes.input == Sync::My,
        modes.output == Sync::My,
    ))
}

fn tree_of(m: Method) -> Tree {
    if m == Method::Binomial {
        Tree::Binomial
    } else {
        Tree::Flat
    }
}

#[track_caller]
fn total(call: &str, nbytes: usize, n: Rank) -> usize {
    nbytes.checked_mul(n as usize).unwrap_or_else(|| {
        panic!("gex::{call}: {n} blocks of {nbytes} bytes overflow the address space")
    })
}

/// Gathers `nbytes` at `mine` from every rank into `dst` (rank `r`'s block at
/// `r * nbytes`), staggered: the exchange of a team split.
///
/// # Safety
/// `mine` must be readable for `nbytes` and `dst` writable for `size() * nbytes` bytes
/// until the operation completes.
pub(in crate::coll) unsafe fn all_gather(
    call: &'static str,
    team: &crate::team::Team,
    dst: *mut u8,
    mine: *const u8,
    nbytes: usize,
) -> impl super::engine::Collective {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        movement::gather_all_staggered(
            call,
            team,
            &images::Images::one_each(team.size),
            dst,
            mine,
            nbytes,
        )
    }
}
