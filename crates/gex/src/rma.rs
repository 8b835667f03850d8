//! One-sided put and get (GASNet-EX spec, "Extended API": Put, Get, value-based
//! payloads), in Blocking, NB (explicit event) and NBI (implicit event) forms.
//!
//! Remote addresses are addresses in the target rank's address space, inside its bound
//! segment (see `Team::segment_bound`); every call checks the rank and the range and
//! fails with a message naming the call. Blocking calls borrow their local buffers; NB
//! and NBI calls that may finish after they return are `unsafe`, because the buffer
//! must stay valid until completion, which the borrow checker cannot see.

use gasp::GPtr;

use crate::conduit::{AddressError, Completion, Rank};
use crate::context;
use crate::event::{self, Event, EventCategory, Lc};
use crate::runtime::{runtime, Runtime};
use crate::team::Team;
use crate::{Flags, NoOp};

pub(crate) mod probe;
pub(crate) mod remote;

/// The value type of value-based RMA (GASNet-EX `gex_RMA_Value_t`).
pub type RmaValue = u64;

/// The completion of a transfer, or a panic naming `call` if the range is not in the
/// target's segment (the conduit checks the range as part of the transfer).
#[inline]
#[track_caller]
fn checked(
    call: &str,
    rank: Rank,
    addr: usize,
    len: usize,
    transfer: Result<Completion, AddressError>,
) -> Completion {
    match transfer {
        Ok(c) => c,
        Err(e) => address_error(call, rank, addr, len, e),
    }
}

/// The transfer of a non-blocking put with local completion `lc`: the conduit reads
/// `src` before returning for [`Lc::Now`], else it may until the put completes.
///
/// # Safety
/// Unless `lc` is [`Lc::Now`], `src` must stay valid and unchanged until the returned
/// completion says the put is complete.
#[inline]
unsafe fn put_nb(
    rt: &Runtime,
    call: &str,
    rank: Rank,
    addr: usize,
    src: &[u8],
    lc: &Lc<'_>,
) -> Result<Completion, AddressError> {
    match lc {
        Lc::Now => remote::put(rt, call, rank, addr, src, false),
        // SAFETY: the caller's contract.
        Lc::Defer | Lc::Group | Lc::Event(_) => unsafe {
            remote::put_held(rt, call, rank, addr, src)
        },
    }
}

#[cold]
#[track_caller]
pub(crate) fn address_error(call: &str, rank: Rank, addr: usize, len: usize, e: AddressError) -> ! {
    match e {
        AddressError::NoSegment => {
            panic!("gex::{call}: rank {rank} has no bound segment (call Segment::attach first)")
        }
        AddressError::OutOfSegment { owner_addr, size } => panic!(
            "gex::{call}: [{addr:#x}, {addr:#x}+{len}) is outside the segment of rank {rank} \
             ([{owner_addr:#x}, {owner_addr:#x}+{size}))"
        ),
        // Every operation falls back to messages for such a target; this is for one
        // that needs a local address by its nature.
        AddressError::NotMapped => panic!(
            "gex::{call}: [{addr:#x}, {addr:#x}+{len}) of rank {rank} is on another host, and \
             this operation needs it mapped here"
        ),
    }
}

impl Team {
    #[inline]
    #[track_caller]
    fn rma_check(&self, call: &str, rank: Rank) -> (&'static Runtime, Rank) {
        let rt = runtime(call);
        context::check_may_communicate(call);
        (rt, self.job_rank_of(call, rank))
    }

    /// GASNet-EX `gex_RMA_PutBlocking`: copies `src` to `dest` in `rank`'s segment and
    /// returns when the data is there.
    #[inline]
    #[track_caller]
    pub fn put_blocking(
        &self,
        rank: Rank,
        dest: usize,
        src: &[u8],
        _flags: Flags,
    ) -> Result<(), NoOp> {
        let (rt, r) = self.rma_check("Team::put_blocking", rank);
        let span = gasp::span!(
            GASP_UPC_PUT,
            1,
            GPtr::new(r, dest),
            src.as_ptr() as usize,
            src.len()
        );
        let c = checked(
            "Team::put_blocking",
            rank,
            dest,
            src.len(),
            remote::put(rt, "Team::put_blocking", r, dest, src, true),
        );
        event::complete_blocking(rt, c);
        gasp::end!(
            span,
            1,
            GPtr::new(r, dest),
            src.as_ptr() as usize,
            src.len()
        );
        Ok(())
    }

    /// GASNet-EX `gex_RMA_PutNBI`.
    ///
    /// # Safety
    /// Unless `lc` is [`Lc::Now`], `src` must stay valid and unmodified until local
    /// completion (for [`Lc::Defer`], until the operation is synchronized).
    #[inline]
    #[track_caller]
    pub unsafe fn put_nbi(
        &self,
        rank: Rank,
        dest: usize,
        src: &[u8],
        lc: Lc<'_>,
        _flags: Flags,
    ) -> Result<(), NoOp> {
        let (rt, r) = self.rma_check("Team::put_nbi", rank);
        if matches!(lc, Lc::Event(_)) {
            panic!("gex::Team::put_nbi: lc must be Now, Defer or Group");
        }
        let (s, n) = (src.as_ptr() as usize, src.len());
        let span = gasp::span!(GASP_UPC_NB_PUT_INIT, 1, GPtr::new(r, dest), s, n);
        // SAFETY: the caller keeps `src` until local completion, which for any `lc`
        // but Now is the put's completion (`complete_with`).
        let c = checked("Team::put_nbi", rank, dest, src.len(), unsafe {
            put_nb(rt, "Team::put_nbi", r, dest, src, &lc)
        });
        let handle = event::nbi_handle(&c);
        lc.complete_with(&c);
        event::track_nbi(EventCategory::PUT, c);
        gasp::end!(span, 1, GPtr::new(r, dest), s, n, handle);
        Ok(())
    }

    /// GASNet-EX `gex_RMA_PutNB`: returns the event of the put's completion.
    ///
    /// # Safety
    /// As for [`Team::put_nbi`]; `lc` may not be [`Lc::Group`].
    #[inline]
    #[track_caller]
    pub unsafe fn put_nb(
        &self,
        rank: Rank,
        dest: usize,
        src: &[u8],
        lc: Lc<'_>,
        _flags: Flags,
    ) -> Result<Event, NoOp> {
        let (rt, r) = self.rma_check("Team::put_nb", rank);
        if matches!(lc, Lc::Group) {
            panic!("gex::Team::put_nb: lc must be Now, Defer or an event");
        }
        let (s, n) = (src.as_ptr() as usize, src.len());
        let span = gasp::span!(GASP_UPC_NB_PUT_INIT, 1, GPtr::new(r, dest), s, n);
        // SAFETY: as in `put_nbi`.
        let c = checked("Team::put_nb", rank, dest, src.len(), unsafe {
            put_nb(rt, "Team::put_nb", r, dest, src, &lc)
        });
        let e = lc.put_event(c);
        gasp::end!(span, 1, GPtr::new(r, dest), s, n, e.gasp_handle());
        Ok(e)
    }

    /// GASNet-EX `gex_RMA_GetBlocking`: copies `dest.len()` bytes at `src` in `rank`'s
    /// segment into `dest`.
    #[inline]
    #[track_caller]
    pub fn get_blocking(
        &self,
        dest: &mut [u8],
        rank: Rank,
        src: usize,
        _flags: Flags,
    ) -> Result<(), NoOp> {
        let (rt, r) = self.rma_check("Team::get_blocking", rank);
        let (dst, n) = (dest.as_ptr() as usize, dest.len());
        let span = gasp::span!(GASP_UPC_GET, 1, dst, GPtr::new(r, src), n);
        // SAFETY: `dest` is a live exclusive borrow for the whole (blocking) call.
        let c = unsafe {
            checked(
                "Team::get_blocking",
                rank,
                src,
                dest.len(),
                remote::get(
                    rt,
                    "Team::get_blocking",
                    dest.as_mut_ptr(),
                    r,
                    src,
                    dest.len(),
                    true,
                ),
            )
        };
        event::complete_blocking(rt, c);
        gasp::end!(span, 1, dst, GPtr::new(r, src), n);
        Ok(())
    }

    /// GASNet-EX `gex_RMA_GetNBI`.
    ///
    /// # Safety
    /// `dest` must be valid for `len` bytes of writes, and not otherwise accessed, until
    /// the operation is synchronized (`nbi_wait(EventCategory::GET)` or the access
    /// region's event).
    #[inline]
    #[track_caller]
    pub unsafe fn get_nbi(
        &self,
        dest: *mut u8,
        rank: Rank,
        src: usize,
        len: usize,
        _flags: Flags,
    ) -> Result<(), NoOp> {
        let (rt, r) = self.rma_check("Team::get_nbi", rank);
        let span = gasp::span!(
            GASP_UPC_NB_GET_INIT,
            1,
            dest as usize,
            GPtr::new(r, src),
            len
        );
        // SAFETY: forwarded from the caller's contract.
        let c = unsafe {
            checked(
                "Team::get_nbi",
                rank,
                src,
                len,
                remote::get(rt, "Team::get_nbi", dest, r, src, len, false),
            )
        };
        let handle = event::nbi_handle(&c);
        event::track_nbi(EventCategory::GET, c);
        gasp::end!(span, 1, dest as usize, GPtr::new(r, src), len, handle);
        Ok(())
    }

    /// GASNet-EX `gex_RMA_GetNB`.
    ///
    /// # Safety
    /// As for [`Team::get_nbi`], until the returned event is synchronized.
    #[inline]
    #[track_caller]
    pub unsafe fn get_nb(
        &self,
        dest: *mut u8,
        rank: Rank,
        src: usize,
        len: usize,
        _flags: Flags,
    ) -> Result<Event, NoOp> {
        let (rt, r) = self.rma_check("Team::get_nb", rank);
        let span = gasp::span!(
            GASP_UPC_NB_GET_INIT,
            1,
            dest as usize,
            GPtr::new(r, src),
            len
        );
        // SAFETY: forwarded from the caller's contract.
        let c = unsafe {
            checked(
                "Team::get_nb",
                rank,
                src,
                len,
                remote::get(rt, "Team::get_nb", dest, r, src, len, false),
            )
        };
        let e = Event::from_completion(c);
        gasp::end!(
            span,
            1,
            dest as usize,
            GPtr::new(r, src),
            len,
            e.gasp_handle()
        );
        Ok(e)
    }

    /// GASNet-EX `gex_RMA_GetBlockingVal`: reads `nbytes` (1..=8) at `src` as an
    /// unsigned integer of that size.
    #[inline]
    #[track_caller]
    pub fn get_val(&self, rank: Rank, src: usize, nbytes: usize, _flags: Flags) -> RmaValue {
        check_val_size("Team::get_val", nbytes);
        let (rt, r) = self.rma_check("Team::get_val", rank);
        let mut bytes = [0u8; 8];
        let dst = bytes.as_ptr() as usize;
        let span = gasp::span!(GASP_UPC_GET, 1, dst, GPtr::new(r, src), nbytes);
        // SAFETY: `bytes` holds 8 >= nbytes bytes and lives through the blocking call.
        let c = unsafe {
            checked(
                "Team::get_val",
                rank,
                src,
                nbytes,
                remote::get(
                    rt,
                    "Team::get_val",
                    bytes.as_mut_ptr(),
                    r,
                    src,
                    nbytes,
                    true,
                ),
            )
        };
        event::complete_blocking(rt, c);
        gasp::end!(span, 1, dst, GPtr::new(r, src), nbytes);
        value_from_bytes(&bytes[..nbytes])
    }

    /// GASNet-EX `gex_RMA_PutBlockingVal`: writes the low `nbytes` (1..=8) of `value`.
    #[inline]
    #[track_caller]
    pub fn put_val_blocking(
        &self,
        rank: Rank,
        dest: usize,
        value: RmaValue,
        nbytes: usize,
        flags: Flags,
    ) -> Result<(), NoOp> {
        check_val_size("Team::put_val_blocking", nbytes);
        let _ = flags;
        let (rt, r) = self.rma_check("Team::put_val_blocking", rank);
        let bytes = value_to_bytes(value, nbytes);
        let src = bytes.as_ptr() as usize;
        let span = gasp::span!(GASP_UPC_PUT, 1, GPtr::new(r, dest), src, nbytes);
        let c = checked(
            "Team::put_val_blocking",
            rank,
            dest,
            nbytes,
            remote::put(
                rt,
                "Team::put_val_blocking",
                r,
                dest,
                &bytes[..nbytes],
                true,
            ),
        );
        event::complete_blocking(rt, c);
        gasp::end!(span, 1, GPtr::new(r, dest), src, nbytes);
        Ok(())
    }

    /// GASNet-EX `gex_RMA_PutNBIVal`.
    #[inline]
    #[track_caller]
    pub fn put_val_nbi(
        &self,
        rank: Rank,
        dest: usize,
        value: RmaValue,
        nbytes: usize,
        _flags: Flags,
    ) -> Result<(), NoOp> {
        check_val_size("Team::put_val_nbi", nbytes);
        let (rt, r) = self.rma_check("Team::put_val_nbi", rank);
        let bytes = value_to_bytes(value, nbytes);
        let src = bytes.as_ptr() as usize;
        let span = gasp::span!(GASP_UPC_NB_PUT_INIT, 1, GPtr::new(r, dest), src, nbytes);
        let c = checked(
            "Team::put_val_nbi",
            rank,
            dest,
            nbytes,
            remote::put(rt, "Team::put_val_nbi", r, dest, &bytes[..nbytes], false),
        );
        let handle = event::nbi_handle(&c);
        event::track_nbi(EventCategory::PUT, c);
        gasp::end!(span, 1, GPtr::new(r, dest), src, nbytes, handle);
        Ok(())
    }

    /// GASNet-EX `gex_RMA_PutNBVal`.
    #[inline]
    #[track_caller]
    pub fn put_val_nb(
        &self,
        rank: Rank,
        dest: usize,
        value: RmaValue,
        nbytes: usize,
        _flags: Flags,
    ) -> Result<Event, NoOp> {
        check_val_size("Team::put_val_nb", nbytes);
        let (rt, r) = self.rma_check("Team::put_val_nb", rank);
        let bytes = value_to_bytes(value, nbytes);
        let src = bytes.as_ptr() as usize;
        let span = gasp::span!(GASP_UPC_NB_PUT_INIT, 1, GPtr::new(r, dest), src, nbytes);
        let e = Event::from_completion(checked(
            "Team::put_val_nb",
            rank,
            dest,
            nbytes,
            remote::put(rt, "Team::put_val_nb", r, dest, &bytes[..nbytes], false),
        ));
        gasp::end!(span, 1, GPtr::new(r, dest), src, nbytes, e.gasp_handle());
        Ok(e)
    }
}

#[track_caller]
fn check_val_size(call: &str, nbytes: usize) {
    if nbytes == 0 || nbytes > std::mem::size_of::<RmaValue>() {
        panic!("gex::{call}: nbytes must be 1..=8, not {nbytes}");
    }
}

/// The bytes of `value` as an unsigned integer of `nbytes` bytes in native order.
fn value_to_bytes(value: RmaValue, nbytes: usize) -> [u8; 8] {
    let mut out = [0u8; 8];
    if cfg!(target_endian = "little") {
        out = value.to_le_bytes();
    } else {
        out[..nbytes].copy_from_slice(&value.to_be_bytes()[8 - nbytes..]);
    }
    out
}

fn value_from_bytes(bytes: &[u8]) -> RmaValue {
    let mut buf = [0u8; 8];
    if cfg!(target_endian = "little") {
        buf[..bytes.len()].copy_from_slice(bytes);
        RmaValue::from_le_bytes(buf)
    } else {
        buf[8 - bytes.len()..].copy_from_slice(bytes);
        RmaValue::from_be_bytes(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_at_every_width() {
        for n in 1..=8 {
            let v: u64 = 0x0102_0304_0506_0708 & (u64::MAX >> (64 - 8 * n));
            assert_eq!(value_from_bytes(&value_to_bytes(v, n)[..n]), v);
        }
    }
}
