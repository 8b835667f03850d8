//! Vector and Indexed put and get (GASNet-EX `gex_VIS_{Vector,Indexed}{Put,Get}*`).
//!
//! Both sides are lists of contiguous pieces; the transfer treats each list as one
//! stream of bytes in list order (as GASNet-1's `gasnet_putv`/`puti` did), so the lists
//! may cut it differently but must hold the same total. The remote side is a
//! [`Memvec`] list (Vector) or addresses of one length (Indexed); the local side is a
//! list of slices (for Indexed, all of one length).

use super::{check_flags, peer, Dir, Form, Kind, Memvec, Mover, Target};
use crate::conduit::Rank;
use crate::event::Event;
use crate::team::Team;
use crate::{Flags, NoOp};

/// The remote side of a list call.
#[derive(Clone, Copy)]
enum Remote<'a> {
    Vector(&'a [Memvec]),
    Indexed(&'a [usize], usize),
}

impl<'a> Remote<'a> {
    fn kind(self) -> Kind {
        match self {
            Remote::Vector(_) => Kind::Vector,
            Remote::Indexed(..) => Kind::Indexed,
        }
    }

    fn entries(self) -> usize {
        match self {
            Remote::Vector(v) => v.len(),
            Remote::Indexed(a, _) => a.len(),
        }
    }

    /// The non-empty ranges, in list order.
    fn ranges(self) -> impl Iterator<Item = (usize, usize)> + Clone + 'a {
        let (vector, indexed, len) = match self {
            Remote::Vector(v) => (v, &[][..], 0),
            Remote::Indexed(a, len) => (&[][..], a, len),
        };
        let v = vector.iter().map(|m| (m.addr, m.len));
        let i = indexed.iter().map(move |&a| (a, len));
        v.chain(i).filter(|&(_, n)| n > 0)
    }
}

/// Checks a list call and moves its data: `local` are the local pieces (address,
/// length) in list order, `local_entries` their number.
#[track_caller]
#[allow(clippy::too_many_arguments)]
fn run(
    call: &'static str,
    team: &Team,
    dir: Dir,
    form: Form,
    rank: Rank,
    remote: Remote<'_>,
    local: impl Iterator<Item = (usize, usize)> + Clone,
    local_entries: usize,
    local_bytes: Option<usize>,
    flags: Flags,
) -> Event {
    check_flags(call, dir, form, flags);
    let target = Target::new(call, team, rank);
    let (remote_bytes, in_order) = check_remote(call, &target, remote);
    let local_bytes = local_bytes.unwrap_or_else(|| {
        local
            .clone()
            .try_fold(0usize, |n, (_, len)| n.checked_add(len))
            .unwrap_or_else(|| panic!("gex::{call}: the local list's total size overflows"))
    });
    if local_bytes != remote_bytes {
        let (src, dst) = match dir {
            Dir::Put => (local_bytes, remote_bytes),
            Dir::Get => (remote_bytes, local_bytes),
        };
        panic!("gex::{call}: the source lists {src} bytes and the destination {dst}");
    }
    if dir == Dir::Put && !in_order {
        check_disjoint(call, remote.ranges());
    }
    let peer = peer::take(call, dir);
    let runs = remote.entries() + local_entries;
    super::reported(target.job, dir, remote.kind(), runs, remote_bytes, || {
        let mut mover = Mover::new(&target, dir, form, flags);
        let pairs = match remote {
            // One local piece per entry, of its length (`check_uniform` and the equal
            // totals make it so): a copy per pair, with no stream to cut.
            Remote::Indexed(addrs, len) if local_entries == addrs.len() && len > 0 => {
                Some((addrs, len))
            }
            _ => None,
        };
        let mut step = |l: usize, r: usize, n: usize| {
            // SAFETY: `l` is inside a local piece the caller lent (valid for reads to
            // put, writes to get, for as long as the call's contract says), `r` inside
            // a remote range checked above.
            unsafe {
                match dir {
                    Dir::Put => mover.put(r, l as *const u8, n),
                    Dir::Get => mover.get(l as *mut u8, r, n),
                }
            }
        };
        match pairs {
            Some((addrs, len)) => local.zip(addrs).for_each(|((l, n), &r)| {
                // The pieces were measured by an earlier walk of the list: a piece
                // whose `AsRef` now answers another length would be read past its end.
                if n != len {
                    changed_length(call, n, len);
                }
                step(l, r, len)
            }),
            None => walk(local, remote.ranges(), step),
        }
        mover.finish(dir, form, peer)
    })
}

/// Fails `call` for a local piece that measured `len` bytes when the call checked the
/// list and `n` when it moved it (a safe `AsRef` may answer differently each time).
#[cold]
#[inline(never)]
#[track_caller]
fn changed_length(call: &str, n: usize, len: usize) -> ! {
    panic!("gex::{call}: a local piece of {len} bytes had {n} when it was moved")
}

/// Checks every remote range of `call` against the target's segment; returns their
/// total and whether they are in increasing order without overlap (the common case,
/// which needs no other overlap check). One loop per kind, so that the common lists
/// are checked at a few instructions per entry.
#[track_caller]
fn check_remote(call: &str, target: &Target, remote: Remote<'_>) -> (usize, bool) {
    let (mut total, mut end, mut in_order) = (0usize, 0usize, true);
    let mut entry = |addr: usize, len: usize| {
        if len > 0 {
            target.check(addr, len);
            total = total
                .checked_add(len)
                .unwrap_or_else(|| panic!("gex::{call}: the remote list's total size overflows"));
            in_order &= addr >= end;
            end = addr + len;
        }
    };
    match remote {
        Remote::Vector(v) => v.iter().for_each(|m| entry(m.addr, m.len)),
        Remote::Indexed(addrs, len) => addrs.iter().for_each(|&a| entry(a, len)),
    }
    (total, in_order)
}

/// Drops the event of a Blocking or NBI call: always invalid, there is nothing to sync.
fn complete(e: Event) {
    debug_assert!(e.is_invalid());
}

/// Calls `f(local, remote, len)` for the pieces where the two streams of ranges (of
/// equal totals) line up.
#[inline]
fn walk(
    local: impl Iterator<Item = (usize, usize)>,
    remote: impl Iterator<Item = (usize, usize)>,
    mut f: impl FnMut(usize, usize, usize),
) {
    let mut local = local.filter(|&(_, n)| n > 0);
    let mut remote = remote;
    let (Some(mut l), Some(mut r)) = (local.next(), remote.next()) else {
        return;
    };
    loop {
        let n = l.1.min(r.1);
        f(l.0, r.0, n);
        l = (l.0 + n, l.1 - n);
        r = (r.0 + n, r.1 - n);
        if l.1 == 0 {
            match local.next() {
                Some(next) => l = next,
                None => return,
            }
        }
        if r.1 == 0 {
            match remote.next() {
                Some(next) => r = next,
                None => return,
            }
        }
    }
}

/// Panics naming `call` if two destination ranges, not in increasing order, overlap
/// (spec "Restrictions": the result would be undefined).
#[track_caller]
fn check_disjoint(call: &str, ranges: impl Iterator<Item = (usize, usize)>) {
    let mut sorted: Vec<(usize, usize)> = ranges.collect();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0].0 + w[0].1 > w[1].0) {
        panic!(
            "gex::{call}: destination ranges [{:#x}, +{}) and [{:#x}, +{}) overlap; the \
             spec leaves the result undefined",
            w[0].0, w[0].1, w[1].0, w[1].1
        );
    }
}

/// The local pieces of a put, as (address, length).
fn sources<S: AsRef<[u8]>>(src: &[S]) -> impl Iterator<Item = (usize, usize)> + Clone + '_ {
    src.iter().map(|s| {
        let s = s.as_ref();
        (s.as_ptr() as usize, s.len())
    })
}

/// The local pieces of a get, as (address, length).
fn destinations<D: AsMut<[u8]>>(dst: &mut [D]) -> Vec<(usize, usize)> {
    dst.iter_mut()
        .map(|d| {
            let d = d.as_mut();
            (d.as_mut_ptr() as usize, d.len())
        })
        .collect()
}

/// Checks that every local piece of an Indexed call has the same length; returns their
/// total.
#[track_caller]
fn check_uniform(call: &str, lens: impl ExactSizeIterator<Item = usize>) -> usize {
    let count = lens.len();
    let mut lens = lens;
    let Some(first) = lens.next() else { return 0 };
    if let Some(other) = lens.find(|&n| n != first) {
        panic!(
            "gex::{call}: the local pieces of an indexed transfer must have one length \
             ({first} and {other} bytes given)"
        );
    }
    count * first // the pieces are in memory: their total fits
}

impl Team {
    /// GASNet-EX `gex_VIS_VectorPutBlocking`: writes the bytes of the pieces of `src`,
    /// in order, to the ranges of `dst` in `rank`'s segment, in order; the two lists
    /// must hold the same number of bytes. Returns when the data are there.
    #[track_caller]
    pub fn vector_put_blocking<S: AsRef<[u8]>>(
        &self,
        rank: Rank,
        dst: &[Memvec],
        src: &[S],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::vector_put_blocking";
        let remote = Remote::Vector(dst);
        complete(run(
            CALL,
            self,
            Dir::Put,
            Form::Blocking,
            rank,
            remote,
            sources(src),
            src.len(),
            None,
            flags,
        ));
        Ok(())
    }

    /// GASNet-EX `gex_VIS_VectorPutNBI`: [`Team::vector_put_blocking`] whose completion
    /// joins this thread's NBI puts. With [`Flags::ENABLE_LEAF_LC`], local completion is
    /// tracked as for `GEX_EVENT_GROUP`.
    ///
    /// # Safety
    /// The pieces of `src` must stay valid and unmodified until local completion:
    /// with [`Flags::ENABLE_LEAF_LC`], until [`EventCategory::LC`](crate::EventCategory::LC)
    /// is synchronized; otherwise until the operation is.
    #[track_caller]
    pub unsafe fn vector_put_nbi<S: AsRef<[u8]>>(
        &self,
        rank: Rank,
        dst: &[Memvec],
        src: &[S],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::vector_put_nbi";
        let remote = Remote::Vector(dst);
        complete(run(
            CALL,
            self,
            Dir::Put,
            Form::Nbi,
            rank,
            remote,
            sources(src),
            src.len(),
            None,
            flags,
        ));
        Ok(())
    }

    /// GASNet-EX `gex_VIS_VectorPutNB`: [`Team::vector_put_blocking`] returning the event
    /// of its completion; with [`Flags::ENABLE_LEAF_LC`] its `LC` leaf
    /// ([`Event::query_leaf`]) is the local completion.
    ///
    /// # Safety
    /// The pieces of `src` must stay valid and unmodified until local completion:
    /// with [`Flags::ENABLE_LEAF_LC`], until the event's `LC` leaf is synchronized;
    /// otherwise until the event is.
    #[track_caller]
    pub unsafe fn vector_put_nb<S: AsRef<[u8]>>(
        &self,
        rank: Rank,
        dst: &[Memvec],
        src: &[S],
        flags: Flags,
    ) -> Result<Event, NoOp> {
        const CALL: &str = "Team::vector_put_nb";
        let remote = Remote::Vector(dst);
        Ok(run(
            CALL,
            self,
            Dir::Put,
            Form::Nb,
            rank,
            remote,
            sources(src),
            src.len(),
            None,
            flags,
        ))
    }

    /// GASNet-EX `gex_VIS_VectorGetBlocking`: fills the pieces of `dst`, in order, from
    /// the ranges of `src` in `rank`'s segment, in order; the two lists must hold the
    /// same number of bytes.
    #[track_caller]
    pub fn vector_get_blocking<D: AsMut<[u8]>>(
        &self,
        dst: &mut [D],
        rank: Rank,
        src: &[Memvec],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::vector_get_blocking";
        let local = destinations(dst);
        let (n, remote) = (local.len(), Remote::Vector(src));
        complete(run(
            CALL,
            self,
            Dir::Get,
            Form::Blocking,
            rank,
            remote,
            local.into_iter(),
            n,
            None,
            flags,
        ));
        Ok(())
    }

    /// GASNet-EX `gex_VIS_VectorGetNBI`: [`Team::vector_get_blocking`] whose completion
    /// joins this thread's NBI gets.
    ///
    /// # Safety
    /// The pieces of `dst` must not be accessed until the operation is synchronized.
    #[track_caller]
    pub unsafe fn vector_get_nbi<D: AsMut<[u8]>>(
        &self,
        dst: &mut [D],
        rank: Rank,
        src: &[Memvec],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::vector_get_nbi";
        let local = destinations(dst);
        let (n, remote) = (local.len(), Remote::Vector(src));
        complete(run(
            CALL,
            self,
            Dir::Get,
            Form::Nbi,
            rank,
            remote,
            local.into_iter(),
            n,
            None,
            flags,
        ));
        Ok(())
    }

    /// GASNet-EX `gex_VIS_VectorGetNB`: [`Team::vector_get_blocking`] returning the
    /// event of its completion.
    ///
    /// # Safety
    /// The pieces of `dst` must not be accessed until the event is synchronized.
    #[track_caller]
    pub unsafe fn vector_get_nb<D: AsMut<[u8]>>(
        &self,
        dst: &mut [D],
        rank: Rank,
        src: &[Memvec],
        flags: Flags,
    ) -> Result<Event, NoOp> {
        const CALL: &str = "Team::vector_get_nb";
        let local = destinations(dst);
        let (n, remote) = (local.len(), Remote::Vector(src));
        Ok(run(
            CALL,
            self,
            Dir::Get,
            Form::Nb,
            rank,
            remote,
            local.into_iter(),
            n,
            None,
            flags,
        ))
    }

    /// GASNet-EX `gex_VIS_IndexedPutBlocking`: writes the pieces of `src` (all of one
    /// length), in order, to the `dst_len`-byte ranges at the addresses `dst` in
    /// `rank`'s segment; both sides must hold the same number of bytes.
    #[track_caller]
    pub fn indexed_put_blocking<S: AsRef<[u8]>>(
        &self,
        rank: Rank,
        dst: &[usize],
        dst_len: usize,
        src: &[S],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::indexed_put_blocking";
        let total = check_uniform(CALL, src.iter().map(|s| s.as_ref().len()));
        let remote = Remote::Indexed(dst, dst_len);
        complete(run(
            CALL,
            self,
            Dir::Put,
            Form::Blocking,
            rank,
            remote,
            sources(src),
            src.len(),
            Some(total),
            flags,
        ));
        Ok(())
    }

    /// GASNet-EX `gex_VIS_IndexedPutNBI`: [`Team::indexed_put_blocking`] whose
    /// completion joins this thread's NBI puts.
    ///
    /// # Safety
    /// The pieces of `src` must stay valid and unmodified until local completion:
    /// with [`Flags::ENABLE_LEAF_LC`], until [`EventCategory::LC`](crate::EventCategory::LC)
    /// is synchronized; otherwise until the operation is.
    #[track_caller]
    pub unsafe fn indexed_put_nbi<S: AsRef<[u8]>>(
        &self,
        rank: Rank,
        dst: &[usize],
        dst_len: usize,
        src: &[S],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::indexed_put_nbi";
        let total = check_uniform(CALL, src.iter().map(|s| s.as_ref().len()));
        let remote = Remote::Indexed(dst, dst_len);
        complete(run(
            CALL,
            self,
            Dir::Put,
            Form::Nbi,
            rank,
            remote,
            sources(src),
            src.len(),
            Some(total),
            flags,
        ));
        Ok(())
    }

    /// GASNet-EX `gex_VIS_IndexedPutNB`: [`Team::indexed_put_blocking`] returning the
    /// event of its completion.
    ///
    /// # Safety
    /// The pieces of `src` must stay valid and unmodified until local completion:
    /// with [`Flags::ENABLE_LEAF_LC`], until the event's `LC` leaf is synchronized;
    /// otherwise until the event is.
    #[track_caller]
    pub unsafe fn indexed_put_nb<S: AsRef<[u8]>>(
        &self,
        rank: Rank,
        dst: &[usize],
        dst_len: usize,
        src: &[S],
        flags: Flags,
    ) -> Result<Event, NoOp> {
        const CALL: &str = "Team::indexed_put_nb";
        let total = check_uniform(CALL, src.iter().map(|s| s.as_ref().len()));
        let remote = Remote::Indexed(dst, dst_len);
        Ok(run(
            CALL,
            self,
            Dir::Put,
            Form::Nb,
            rank,
            remote,
            sources(src),
            src.len(),
            Some(total),
            flags,
        ))
    }

    /// GASNet-EX `gex_VIS_IndexedGetBlocking`: fills the pieces of `dst` (all of one
    /// length), in order, from the `src_len`-byte ranges at the addresses `src` in
    /// `rank`'s segment; both sides must hold the same number of bytes.
    #[track_caller]
    pub fn indexed_get_blocking<D: AsMut<[u8]>>(
        &self,
        dst: &mut [D],
        rank: Rank,
        src: &[usize],
        src_len: usize,
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::indexed_get_blocking";
        let local = destinations(dst);
        let total = check_uniform(CALL, local.iter().map(|p| p.1));
        let (n, remote) = (local.len(), Remote::Indexed(src, src_len));
        complete(run(
            CALL,
            self,
            Dir::Get,
            Form::Blocking,
            rank,
            remote,
            local.into_iter(),
            n,
            Some(total),
            flags,
        ));
        Ok(())
    }

    /// GASNet-EX `gex_VIS_IndexedGetNBI`: [`Team::indexed_get_blocking`] whose
    /// completion joins this thread's NBI gets.
    ///
    /// # Safety
    /// The pieces of `dst` must not be accessed until the operation is synchronized.
    #[track_caller]
    pub unsafe fn indexed_get_nbi<D: AsMut<[u8]>>(
        &self,
        dst: &mut [D],
        rank: Rank,
        src: &[usize],
        src_len: usize,
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::indexed_get_nbi";
        let local = destinations(dst);
        let total = check_uniform(CALL, local.iter().map(|p| p.1));
        let (n, remote) = (local.len(), Remote::Indexed(src, src_len));
        complete(run(
            CALL,
            self,
            Dir::Get,
            Form::Nbi,
            rank,
            remote,
            local.into_iter(),
            n,
            Some(total),
            flags,
        ));
        Ok(())
    }

    /// GASNet-EX `gex_VIS_IndexedGetNB`: [`Team::indexed_get_blocking`] returning the
    /// event of its completion.
    ///
    /// # Safety
    /// The pieces of `dst` must not be accessed until the event is synchronized.
    #[track_caller]
    pub unsafe fn indexed_get_nb<D: AsMut<[u8]>>(
        &self,
        dst: &mut [D],
        rank: Rank,
        src: &[usize],
        src_len: usize,
        flags: Flags,
    ) -> Result<Event, NoOp> {
        const CALL: &str = "Team::indexed_get_nb";
        let local = destinations(dst);
        let total = check_uniform(CALL, local.iter().map(|p| p.1));
        let (n, remote) = (local.len(), Remote::Indexed(src, src_len));
        Ok(run(
            CALL,
            self,
            Dir::Get,
            Form::Nb,
            rank,
            remote,
            local.into_iter(),
            n,
            Some(total),
            flags,
        ))
    }
}
