//! Strided put and get (GASNet-EX `gex_VIS_Strided{Put,Get}{NB,NBI,Blocking}`).
//!
//! `count` has one entry per stride level (the spec's `count[0..stridelevels-1]`, with
//! the element size apart as `elemsz`), and each strides slice at least as many. The
//! local side is a slice holding the whole local shape and the offset of the shape's
//! base element in it (see the [module documentation](super)).

use super::shape::{self, Checked, Shape};
use super::{check_flags, peer, Dir, Form, Kind, Mover, Target};
use crate::conduit::Rank;
use crate::event::Event;
use crate::team::Team;
use crate::{Flags, NoOp};

/// The arguments of one strided call, checked together.
struct Strided<'a> {
    call: &'static str,
    rank: Rank,
    remote: usize,
    remote_strides: &'a [isize],
    local_len: usize,
    local_base: usize,
    local_strides: &'a [isize],
    elemsz: usize,
    count: &'a [usize],
}

impl Strided<'_> {
    /// Runs the checks and the transfer; `local` is the local slice's start.
    #[track_caller]
    fn run(&self, team: &Team, dir: Dir, form: Form, local: *mut u8, flags: Flags) -> Event {
        let call = self.call;
        check_flags(call, dir, form, flags);
        let (src_strides, dst_strides) = match dir {
            Dir::Put => (self.local_strides, self.remote_strides),
            Dir::Get => (self.remote_strides, self.local_strides),
        };
        let checked = shape::check(call, self.elemsz, self.count, src_strides, dst_strides);
        let peer = peer::take(call, dir);
        let Checked::Moves(shape) = checked else {
            // The spec ignores the rank and addresses of a no-op; a peer completion
            // still goes to the rank named.
            if let Some(armed) = peer {
                let target = Target::new(call, team, self.rank);
                return reported(target.job, dir, 0, 0, || {
                    Mover::new(&target, dir, form, flags).finish(dir, form, Some(armed))
                });
            }
            let shown = match self.rank < team.size() {
                true => team.job_rank_of(call, self.rank),
                false => self.rank,
            };
            let none = (Event::invalid(), gasp::events::NB_TRIVIAL);
            return reported(shown, dir, 0, 0, || none);
        };
        let target = Target::new(call, team, self.rank);
        let (local_extent, remote_extent) = match dir {
            Dir::Put => (shape.src, shape.dst),
            Dir::Get => (shape.dst, shape.src),
        };
        self.check_local(local_extent);
        self.check_remote(&target, remote_extent);
        reported(target.job, dir, shape.elems, shape.bytes, || {
            // SAFETY: `local_base` is inside the slice (`check_local`).
            let base = unsafe { local.add(self.local_base) };
            let mut mover = Mover::new(&target, dir, form, flags);
            // SAFETY: both extents were checked: the local one against the slice, the
            // remote one against the segment, which `target.local` maps here.
            unsafe { transfer(&shape, dir, base, self.remote, &target, &mut mover) };
            mover.finish(dir, form, peer)
        })
    }

    #[track_caller]
    fn check_local(&self, (lo, hi): (isize, isize)) {
        let start = self.local_base.checked_add_signed(lo);
        let end = self.local_base.checked_add_signed(hi);
        match (start, end) {
            (Some(_), Some(end)) if self.local_base < self.local_len && end <= self.local_len => {}
            _ => panic!(
                "gex::{}: the local shape spans offsets [{lo}, {hi}) from its base at \
                 {} of a slice of {} bytes",
                self.call, self.local_base, self.local_len
            ),
        }
    }

    #[track_caller]
    fn check_remote(&self, target: &Target, (lo, hi): (isize, isize)) {
        let start = self.remote.checked_add_signed(lo);
        let Some(start) = start.filter(|s| s.checked_add((hi - lo) as usize).is_some()) else {
            panic!(
                "gex::{}: the remote shape at {:#x} spans offsets [{lo}, {hi}), outside the \
                 address space",
                self.call, self.remote
            );
        };
        target.check(start, (hi - lo) as usize);
    }
}

/// Moves every run of `shape` between the local base and the remote base.
///
/// # Safety
/// The local extent from `local` is valid (for reads to put, writes to get), and the
/// remote extent from `remote` was checked against `target`'s segment.
unsafe fn transfer(
    shape: &Shape,
    dir: Dir,
    local: *mut u8,
    remote: usize,
    target: &Target,
    mover: &mut Mover<'_>,
) {
    // SAFETY: (every arm) the caller's contract; `remote` is the base element, inside the
    // checked extent, so it is mapped wherever the segment is.
    unsafe {
        match (target.local(remote), dir) {
            (Some(r), Dir::Put) => shape.copy(local, r),
            (Some(r), Dir::Get) => shape.copy(r, local),
            (None, Dir::Put) => shape.for_each_run(|s, d| {
                mover.put(remote.wrapping_add_signed(d), local.offset(s), shape.elem)
            }),
            (None, Dir::Get) => shape.for_each_run(|s, d| {
                mover.get(local.offset(d), remote.wrapping_add_signed(s), shape.elem)
            }),
        }
    }
}

/// Runs `op` inside the GASP interval of a strided transfer.
#[track_caller]
fn reported(
    r: Rank,
    dir: Dir,
    runs: usize,
    bytes: usize,
    op: impl FnOnce() -> (Event, u64),
) -> Event {
    super::reported(r, dir, Kind::Strided, runs, bytes, op)
}

impl<'a> Strided<'a> {
    #[allow(clippy::too_many_arguments)]
    fn put(
        call: &'static str,
        rank: Rank,
        dst_addr: usize,
        dst_strides: &'a [isize],
        src: &[u8],
        src_base: usize,
        src_strides: &'a [isize],
        elemsz: usize,
        count: &'a [usize],
    ) -> Strided<'a> {
        Strided {
            call,
            rank,
            remote: dst_addr,
            remote_strides: dst_strides,
            local_len: src.len(),
            local_base: src_base,
            local_strides: src_strides,
            elemsz,
            count,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn get(
        call: &'static str,
        dst: &[u8],
        dst_base: usize,
        dst_strides: &'a [isize],
        rank: Rank,
        src_addr: usize,
        src_strides: &'a [isize],
        elemsz: usize,
        count: &'a [usize],
    ) -> Strided<'a> {
        Strided {
            call,
            rank,
            remote: src_addr,
            remote_strides: src_strides,
            local_len: dst.len(),
            local_base: dst_base,
            local_strides: dst_strides,
            elemsz,
            count,
        }
    }
}

impl Team {
    /// GASNet-EX `gex_VIS_StridedPutBlocking`: for every index `(i_0, ..)` with
    /// `i_k < count[k]`, copies the `elemsz` bytes at `src[src_base + Σ i_k *
    /// src_strides[k]]` to `dst_addr + Σ i_k * dst_strides[k]` in `rank`'s segment;
    /// returns when the data are there. See the [module documentation](crate::vis) for
    /// the checks and the degenerate cases.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn strided_put_blocking(
        &self,
        rank: Rank,
        dst_addr: usize,
        dst_strides: &[isize],
        src: &[u8],
        src_base: usize,
        src_strides: &[isize],
        elemsz: usize,
        count: &[usize],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::strided_put_blocking";
        let args = Strided::put(
            CALL,
            rank,
            dst_addr,
            dst_strides,
            src,
            src_base,
            src_strides,
            elemsz,
            count,
        );
        let e = args.run(
            self,
            Dir::Put,
            Form::Blocking,
            src.as_ptr().cast_mut(),
            flags,
        );
        debug_assert!(e.is_invalid());
        Ok(())
    }

    /// GASNet-EX `gex_VIS_StridedPutNBI`: [`Team::strided_put_blocking`] whose
    /// completion joins this thread's NBI puts (or its access region). With
    /// [`Flags::ENABLE_LEAF_LC`], local completion is tracked as for `GEX_EVENT_GROUP`.
    ///
    /// # Safety
    /// `src` must stay valid and unmodified until local completion: with
    /// [`Flags::ENABLE_LEAF_LC`], until [`EventCategory::LC`](crate::EventCategory::LC) is
    /// synchronized; otherwise until the operation is.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub unsafe fn strided_put_nbi(
        &self,
        rank: Rank,
        dst_addr: usize,
        dst_strides: &[isize],
        src: &[u8],
        src_base: usize,
        src_strides: &[isize],
        elemsz: usize,
        count: &[usize],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::strided_put_nbi";
        let args = Strided::put(
            CALL,
            rank,
            dst_addr,
            dst_strides,
            src,
            src_base,
            src_strides,
            elemsz,
            count,
        );
        let e = args.run(self, Dir::Put, Form::Nbi, src.as_ptr().cast_mut(), flags);
        debug_assert!(e.is_invalid());
        Ok(())
    }

    /// GASNet-EX `gex_VIS_StridedPutNB`: [`Team::strided_put_blocking`] returning the
    /// event of its completion. With [`Flags::ENABLE_LEAF_LC`], the event's
    /// [`EventCategory::LC`](crate::EventCategory::LC) leaf
    /// ([`Event::query_leaf`]) is its local completion.
    ///
    /// # Safety
    /// `src` must stay valid and unmodified until local completion: with
    /// [`Flags::ENABLE_LEAF_LC`], until the event's `LC` leaf is synchronized;
    /// otherwise until the event is.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub unsafe fn strided_put_nb(
        &self,
        rank: Rank,
        dst_addr: usize,
        dst_strides: &[isize],
        src: &[u8],
        src_base: usize,
        src_strides: &[isize],
        elemsz: usize,
        count: &[usize],
        flags: Flags,
    ) -> Result<Event, NoOp> {
        const CALL: &str = "Team::strided_put_nb";
        let args = Strided::put(
            CALL,
            rank,
            dst_addr,
            dst_strides,
            src,
            src_base,
            src_strides,
            elemsz,
            count,
        );
        Ok(args.run(self, Dir::Put, Form::Nb, src.as_ptr().cast_mut(), flags))
    }

    /// GASNet-EX `gex_VIS_StridedGetBlocking`: for every index `(i_0, ..)` with
    /// `i_k < count[k]`, copies the `elemsz` bytes at `src_addr + Σ i_k *
    /// src_strides[k]` in `rank`'s segment to `dst[dst_base + Σ i_k * dst_strides[k]]`;
    /// returns when the data are there.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn strided_get_blocking(
        &self,
        dst: &mut [u8],
        dst_base: usize,
        dst_strides: &[isize],
        rank: Rank,
        src_addr: usize,
        src_strides: &[isize],
        elemsz: usize,
        count: &[usize],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::strided_get_blocking";
        let args = Strided::get(
            CALL,
            dst,
            dst_base,
            dst_strides,
            rank,
            src_addr,
            src_strides,
            elemsz,
            count,
        );
        let e = args.run(self, Dir::Get, Form::Blocking, dst.as_mut_ptr(), flags);
        debug_assert!(e.is_invalid());
        Ok(())
    }

    /// GASNet-EX `gex_VIS_StridedGetNBI`: [`Team::strided_get_blocking`] whose
    /// completion joins this thread's NBI gets (or its access region).
    ///
    /// # Safety
    /// `dst` must not be accessed until the operation is synchronized.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub unsafe fn strided_get_nbi(
        &self,
        dst: &mut [u8],
        dst_base: usize,
        dst_strides: &[isize],
        rank: Rank,
        src_addr: usize,
        src_strides: &[isize],
        elemsz: usize,
        count: &[usize],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::strided_get_nbi";
        let args = Strided::get(
            CALL,
            dst,
            dst_base,
            dst_strides,
            rank,
            src_addr,
            src_strides,
            elemsz,
            count,
        );
        let e = args.run(self, Dir::Get, Form::Nbi, dst.as_mut_ptr(), flags);
        debug_assert!(e.is_invalid());
        Ok(())
    }

    /// GASNet-EX `gex_VIS_StridedGetNB`: [`Team::strided_get_blocking`] returning the
    /// event of its completion.
    ///
    /// # Safety
    /// `dst` must not be accessed until the event is synchronized.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub unsafe fn strided_get_nb(
        &self,
        dst: &mut [u8],
        dst_base: usize,
        dst_strides: &[isize],
        rank: Rank,
        src_addr: usize,
        src_strides: &[isize],
        elemsz: usize,
        count: &[usize],
        flags: Flags,
    ) -> Result<Event, NoOp> {
        const CALL: &str = "Team::strided_get_nb";
        let args = Strided::get(
            CALL,
            dst,
            dst_base,
            dst_strides,
            rank,
            src_addr,
            src_strides,
            elemsz,
            count,
        );
        Ok(args.run(self, Dir::Get, Form::Nb, dst.as_mut_ptr(), flags))
    }
}
