//! The images of the design document's "i" interfaces ("Current proposal"):
//! `gasnet_coll_init(images)` declares how many images each rank holds, once per team,
//! and the "i" calls then take one address per image ([`AddrList`]).
//!
//! Images are node-major: image `i` of the team is image `i - first[r]` of the rank `r`
//! with `first[r] <= i < first[r + 1]`, so the blocks of a gather hold every image of
//! rank 0, then every image of rank 1, and so on. A rank's images' blocks are therefore
//! one contiguous range, and each "i" call runs the same call's algorithms with
//! per-rank block counts (`images[r]` blocks for rank `r`), packing and unpacking its
//! images' addresses around them ([`Fanout`]); with SINGLE addresses that every rank
//! maps, the shared method pulls every block straight to its image.

use std::sync::{Arc, Mutex, Weak};

use super::super::barrier::Barrier;
use super::super::engine::{self, Collective, Msg, Outbox};
use super::super::{event_of, initiation};
use super::flags::Modes;
use crate::conduit::{Conduit, Rank};
use crate::runtime::Runtime;
use crate::team::{Team, TeamData};

/// The images of one team, as `coll_init` declared them.
#[derive(Debug)]
pub(crate) struct Images {
    /// `first[r]`: the team index of rank `r`'s first image (`n + 1` entries, the last
    /// being the number of images).
    first: Vec<usize>,
}

impl Images {
    /// One image on each of `n` ranks: the plain calls' blocks, as images.
    pub(crate) fn one_each(n: Rank) -> Images {
        Images {
            first: (0..=n as usize).collect(),
        }
    }

    /// How many images the team has (the document's `NImages`).
    pub(crate) fn total(&self) -> usize {
        self.first[self.first.len() - 1]
    }

    /// How many ranks the team has.
    pub(crate) fn ranks(&self) -> Rank {
        (self.first.len() - 1) as Rank
    }

    /// How many images rank `r` has.
    pub(crate) fn of(&self, r: Rank) -> usize {
        self.first[r as usize + 1] - self.first[r as usize]
    }

    /// The team index of rank `r`'s first image.
    pub(crate) fn first(&self, r: Rank) -> usize {
        self.first[r as usize]
    }

    /// The rank that owns image `i`.
    pub(crate) fn owner(&self, i: usize) -> Rank {
        (self.first.partition_point(|&f| f <= i) - 1) as Rank
    }

    /// The bytes of `count(r)` blocks of `nbytes` for every rank `r`, or a panic naming
    /// `call` if they overflow.
    #[track_caller]
    pub(crate) fn sizes(&self, call: &str, nbytes: usize) -> Vec<usize> {
        super::total(call, nbytes, self.total() as Rank);
        (0..self.ranks()).map(|r| self.of(r) * nbytes).collect()
    }
}

/// The teams whose images were declared at this rank (a team's entry dies with it).
static DECLARED: Mutex<Vec<(Weak<TeamData>, Arc<Images>)>> = Mutex::new(Vec::new());

fn declared(data: &Arc<TeamData>) -> Option<Arc<Images>> {
    let mut all = DECLARED.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(team, _)| team.strong_count() > 0);
    all.iter()
        .find(|(team, _)| std::ptr::eq(team.as_ptr(), Arc::as_ptr(data)))
        .map(|(_, images)| Arc::clone(images))
}

/// The images of `team`, or a panic naming `call` if `coll_init` was not called on it.
#[track_caller]
pub(crate) fn images_of(team: &Team, call: &str) -> Arc<Images> {
    declared(&team.data(call)).unwrap_or_else(|| {
        panic!(
            "gex::{call}: Team::coll_init was not called on this team (the design document's \
             gasnet_coll_init declares the images before any \"i\" call)"
        )
    })
}

impl Team {
    /// The design document's `gasnet_coll_init`: declares that team rank `r` holds
    /// `images[r]` images, for the "i" calls ([`broadcasti_nb`](Team::broadcasti_nb),
    /// [`scatteri_nb`](Team::scatteri_nb), [`gatheri_nb`](Team::gatheri_nb),
    /// [`gather_alli_nb`](Team::gather_alli_nb), [`exchangei_nb`](Team::exchangei_nb)).
    /// Images are node-major: the blocks of those calls hold every image of rank 0,
    /// then every image of rank 1, and so on.
    ///
    /// A blocking collective over the team, called at most once on it, with the same
    /// `images` on every rank (checked).
    ///
    /// # Panics
    /// If it was called on this team before, or inside an open aggregate, or `images`
    /// does not hold one non-zero count per team rank, or their sum exceeds
    /// `isize::MAX`.
    #[track_caller]
    pub fn coll_init(&self, images: &[usize]) {
        const CALL: &str = "Team::coll_init";
        let rt: &Runtime = initiation(self, CALL);
        // A blocking collective initiation: not between an aggregate's first and last
        // members (the design's AGGREGATE), as the blocking forms.
        super::blocking::check_blocking(CALL, super::CollFlags::IN_NOSYNC);
        let data = self.data(CALL);
        if declared(&data).is_some() {
            panic!("gex::{CALL}: called twice on this team (at most once, as gasnet_coll_init)");
        }
        if images.len() != self.size as usize {
            panic!(
                "gex::{CALL}: `images` holds {} counts for a team of {}",
                images.len(),
                self.size
            );
        }
        if let Some(r) = images.iter().position(|&c| c == 0) {
            panic!("gex::{CALL}: team rank {r} has no image (every count must be non-zero)");
        }
        let mut first = vec![0usize];
        for &c in images {
            let next = first[first.len() - 1]
                .checked_add(c)
                .filter(|&t| t <= isize::MAX as usize)
                .unwrap_or_else(|| panic!("gex::{CALL}: the images number more than isize::MAX"));
            first.push(next);
        }
        let mut words = vec![0x200u64];
        words.extend(images.iter().map(|&c| c as u64));
        let op = Box::new(Barrier::new(self.size));
        event_of(engine::start(rt, self, CALL, engine::digest(&words), op)).wait();
        DECLARED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((Arc::downgrade(&data), Arc::new(Images { first })));
    }
}

/// An address list argument of an "i" call: this rank's images' addresses (with
/// [`CollFlags::LOCAL`](super::CollFlags::LOCAL)), or every image's (with
/// [`CollFlags::SINGLE`](super::CollFlags::SINGLE)).
///
/// As with [`Addr`](super::Addr), a SINGLE list holds owner-space addresses (as RMA
/// takes them), one per image of the team in node-major order, identical on every rank.
#[derive(Debug, Clone, Copy)]
pub enum AddrList<'a> {
    /// This rank's images' addresses, in image order (LOCAL).
    Local(&'a [*mut u8]),
    /// Every image's address, node-major, in its owner's address space (SINGLE).
    Single(&'a [usize]),
}

impl<'a> From<&'a [*mut u8]> for AddrList<'a> {
    fn from(list: &'a [*mut u8]) -> Self {
        AddrList::Local(list)
    }
}

impl<'a> From<&'a [usize]> for AddrList<'a> {
    fn from(list: &'a [usize]) -> Self {
        AddrList::Single(list)
    }
}

impl AddrList<'_> {
    /// This rank's images' addresses, after checking the argument against the flags
    /// (null ones, for no bytes, as dangling pointers: see `coll::or_dangling`).
    #[track_caller]
    pub(crate) fn mine(
        &self,
        call: &str,
        what: &str,
        modes: Modes,
        images: &Images,
        me: Rank,
    ) -> Vec<*mut u8> {
        match (self, modes.single) {
            (AddrList::Local(list), false) => {
                if list.len() != images.of(me) {
                    panic!(
                        "gex::{call}: a LOCAL `{what}` lists this rank's {} images' addresses, \
                         not {}",
                        images.of(me),
                        list.len()
                    );
                }
                list.iter().map(|&p| crate::coll::or_dangling(p)).collect()
            }
            (AddrList::Single(list), true) => {
                if list.len() != images.total() {
                    panic!(
                        "gex::{call}: a SINGLE `{what}` lists the team's {} images' addresses, \
                         not {}",
                        images.total(),
                        list.len()
                    );
                }
                let first = images.first(me);
                list[first..first + images.of(me)]
                    .iter()
                    .map(|&a| a as *mut u8)
                    .collect()
            }
            (AddrList::Local(_), true) => panic!(
                "gex::{call}: with SINGLE, `{what}` must be AddrList::Single (every image's \
                 address)"
            ),
            (AddrList::Single(_), false) => panic!(
                "gex::{call}: with LOCAL, `{what}` must be AddrList::Local (this rank's images' \
                 addresses)"
            ),
        }
    }

    /// The SINGLE list (empty for LOCAL).
    pub(crate) fn list(&self) -> &[usize] {
        match self {
            AddrList::Local(_) => &[],
            AddrList::Single(list) => list,
        }
    }
}

/// The addresses in this process of every image's `len` bytes at `list[i]` (an
/// owner-space address), if the team is on one neighbourhood (see
/// [`on_one_nbrhd`](super::on_one_nbrhd): the same answer on every member) and all are
/// inside their segments.
pub(crate) fn mapped_images(
    rt: &Runtime,
    team: &Team,
    call: &str,
    images: &Images,
    list: &[usize],
    len: usize,
) -> Option<Vec<usize>> {
    if list.is_empty() || !super::on_one_nbrhd(rt, team, call) {
        return None;
    }
    (0..images.total())
        .map(|i| {
            if len == 0 {
                return Some(0);
            }
            let owner = team.job_rank_of(call, images.owner(i));
            rt.conduit.translate(owner, list[i], len).ok()
        })
        .collect()
}

/// An operation on this rank's images packed together, then unpacked: runs `inner`,
/// then makes `copies` (`(from, to, len)`, addresses in this process). It owns the
/// buffers `inner` reads or writes, so they live until it completes.
pub(crate) struct Fanout {
    inner: Box<dyn Collective>,
    _buffers: Vec<Vec<u8>>,
    copies: Vec<(usize, usize, usize)>,
    unpacked: bool,
}

impl Fanout {
    /// `inner`, then `copies`. The copies' sources are in `buffers` or in areas `inner`
    /// writes; their destinations must be writable until completion (the initiating
    /// call's contract).
    pub(crate) fn new(
        inner: Box<dyn Collective>,
        buffers: Vec<Vec<u8>>,
        copies: Vec<(usize, usize, usize)>,
    ) -> Fanout {
        Fanout {
            inner,
            _buffers: buffers,
            copies,
            unpacked: false,
        }
    }
}

impl Collective for Fanout {
    fn deliver(&mut self, msg: Msg) {
        self.inner.deliver(msg);
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        if !self.unpacked {
            if !self.inner.advance(out) {
                return false;
            }
            for &(from, to, len) in &self.copies {
                // SAFETY: see `new`: the source holds what `inner` left there, the
                // destination is writable until completion; `copy` allows overlap.
                unsafe { std::ptr::copy(from as *const u8, to as *mut u8, len) };
            }
            self.unpacked = true;
        }
        true
    }
}
