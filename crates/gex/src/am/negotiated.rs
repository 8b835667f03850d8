//! Negotiated-payload Active Messages (GASNet-EX spec, "Negotiated-payload AM APIs").
//!
//! A Prepare call claims the injection resources up front and returns a [`SrcDesc`]:
//! either the client's own buffer (copied at Commit; it must hold `least_payload` bytes,
//! and the size offered is at most its length) or, without one, a place the payload is
//! assembled in, aligned for any data type, and never copied from where it can be: for
//! a Medium, the claimed slot of the target's queue itself; for a Long given its
//! `dest_addr` at Prepare, the destination itself when this process maps the target's
//! segment and the destination is so aligned; else a library allocation. Until the
//! Commit consumes the `SrcDesc` the thread may not communicate; a `SrcDesc` dropped
//! without Commit frees its slot and panics.
//!
//! Prepare and Commit are inlined into their callers, their failures out of line: for a
//! caller's constant arguments (a Medium into the slot, `Lc::Now`, a fixed argument
//! count) the checks and the `SrcDesc` fold away, and a Prepare/Commit pair costs what a
//! Request does, minus its copy.

use super::handler::{max_args, AmIndex, Token, AM_INDEX_BASE};
#[cfg(feature = "gasp")]
use super::reported::SendSpan;
use super::send::{check_args, check_lc, check_long, long_payload, reserve};
#[cfg(feature = "gasp")]
use super::table::HANDLERS;
use crate::conduit::{AmHeader, Category, Conduit, Network, Rank, Selected};
use crate::context;
use crate::event::Lc;
use crate::runtime::Runtime;
use crate::team::Team;
use crate::{Flags, NoOp};

impl Token<'_> {
    /// GASNet-EX `gex_AM_PrepareReplyMedium`.
    #[track_caller]
    pub fn prepare_reply_medium<'b>(
        &self,
        client_buf: Option<&'b [u8]>,
        least_payload: usize,
        most_payload: usize,
        lc: Lc<'b>,
        flags: Flags,
        nargs: usize,
    ) -> Result<SrcDesc<'b>, NoOp> {
        const CALL: &str = "Token::prepare_reply_medium";
        self.claim_reply(CALL);
        let r = prepare(
            self.rt,
            CALL,
            self.msg.src,
            Network::Reply,
            Category::Medium,
            client_buf,
            least_payload,
            most_payload,
            None,
            lc,
            flags,
            nargs,
        );
        self.mark_replied(r)
    }

    /// GASNet-EX `gex_AM_PrepareReplyLong`; `dest_addr` as for
    /// [`Team::prepare_request_long`].
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn prepare_reply_long<'b>(
        &self,
        client_buf: Option<&'b [u8]>,
        least_payload: usize,
        most_payload: usize,
        dest_addr: Option<usize>,
        lc: Lc<'b>,
        flags: Flags,
        nargs: usize,
    ) -> Result<SrcDesc<'b>, NoOp> {
        const CALL: &str = "Token::prepare_reply_long";
        self.claim_reply(CALL);
        let r = prepare(
            self.rt,
            CALL,
            self.msg.src,
            Network::Reply,
            Category::Long,
            client_buf,
            least_payload,
            most_payload,
            dest_addr,
            lc,
            flags,
            nargs,
        );
        self.mark_replied(r)
    }
}

impl Team {
    /// GASNet-EX `gex_AM_PrepareRequestMedium`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    #[track_caller]
    pub fn prepare_request_medium<'b>(
        &self,
        rank: Rank,
        client_buf: Option<&'b [u8]>,
        least_payload: usize,
        most_payload: usize,
        lc: Lc<'b>,
        flags: Flags,
        nargs: usize,
    ) -> Result<SrcDesc<'b>, NoOp> {
        const CALL: &str = "Team::prepare_request_medium";
        let rt = self.am_runtime(CALL);
        let dest = self.job_rank_of(CALL, rank);
        prepare(
            rt,
            CALL,
            dest,
            Network::Request,
            Category::Medium,
            client_buf,
            least_payload,
            most_payload,
            None,
            lc,
            flags,
            nargs,
        )
    }

    /// GASNet-EX `gex_AM_PrepareRequestLong`.
    ///
    /// `dest_addr` is the spec's hint: `Some` address in the target's segment, which
    /// Commit must then be given again, lets the library choose its buffer for it. For
    /// a target whose segment this process maps (every rank on shared memory), no
    /// client buffer and a `dest_addr` aligned for any data type (16 bytes), the buffer
    /// is the destination itself, up to `most_payload` bytes or the segment's end: the
    /// payload is assembled where the handler will find it, and Commit copies nothing.
    /// `None` (the spec's NULL) asks for the conservative choice: a library allocation,
    /// copied at Commit.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn prepare_request_long<'b>(
        &self,
        rank: Rank,
        client_buf: Option<&'b [u8]>,
        least_payload: usize,
        most_payload: usize,
        dest_addr: Option<usize>,
        lc: Lc<'b>,
        flags: Flags,
        nargs: usize,
    ) -> Result<SrcDesc<'b>, NoOp> {
        const CALL: &str = "Team::prepare_request_long";
        let rt = self.am_runtime(CALL);
        let dest = self.job_rank_of(CALL, rank);
        prepare(
            rt,
            CALL,
            dest,
            Network::Request,
            Category::Long,
            client_buf,
            least_payload,
            most_payload,
            dest_addr,
            lc,
            flags,
            nargs,
        )
    }
}

/// Where a negotiated payload is assembled.
enum Buffer<'a> {
    /// The client's own buffer; copied into the message at commit.
    Client(&'a [u8]),
    /// A slot of the target's queue (Medium): the payload is written in place.
    Slot,
    /// A library allocation (Long without a client buffer).
    Owned(Owned),
    /// The Long's destination in the target's segment, mapped here at this address
    /// (a Prepare given `dest_addr`): the payload is written in place.
    Destination(*mut u8),
}

/// The alignment of a buffer the library provides: "suitably aligned to hold any data
/// type" (GASNet-EX spec, "Negotiated-payload AM APIs"), C's `max_align_t` on the
/// platforms we run on.
const MAX_ALIGN: usize = 16;

/// One [`MAX_ALIGN`]-aligned unit of an [`Owned`] buffer.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Unit([u8; MAX_ALIGN]);

/// A library allocation for a payload, aligned to [`MAX_ALIGN`] (a `Box<[u8]>`'s
/// alignment is 1).
struct Owned(Box<[Unit]>);

impl Owned {
    /// A zeroed buffer of at least `size` bytes.
    fn zeroed(size: usize) -> Owned {
        Owned(vec![Unit([0; MAX_ALIGN]); size.div_ceil(MAX_ALIGN)].into_boxed_slice())
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the units are plain bytes, contiguous and initialized.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.0.len() * MAX_ALIGN) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.0.len() * MAX_ALIGN;
        // SAFETY: as in `bytes`, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), len) }
    }
}

/// A prepared negotiated-payload AM (GASNet-EX `gex_AM_SrcDesc_t`), consumed by
/// `commit_medium` / `commit_long`. Until then the thread may not communicate.
pub struct SrcDesc<'a> {
    rt: &'static Runtime,
    dest: Rank,
    network: Network,
    category: Category,
    nargs: usize,
    size: usize,
    buffer: Buffer<'a>,
    /// The `dest_addr` given to Prepare, which Commit must be given again.
    dest_addr: Option<usize>,
    out: Option<<Selected as Conduit>::Outbound>,
    lc: Option<Lc<'a>>,
}

/// The largest buffer the library provides for a negotiated-payload Long whose
/// `least_payload` is smaller: a Prepare may offer any size from `least_payload` to
/// `most_payload`, and a Long's limit is the whole segment, so a client asking for up
/// to "as much as possible" would get (and the library allocate) that much.
const OWNED_LONG: usize = 64 << 10;

#[allow(clippy::too_many_arguments)]
#[inline(always)]
#[track_caller]
fn prepare<'b>(
    rt: &'static Runtime,
    call: &str,
    dest: Rank,
    network: Network,
    category: Category,
    client_buf: Option<&'b [u8]>,
    least: usize,
    most: usize,
    dest_addr: Option<usize>,
    lc: Lc<'b>,
    flags: Flags,
    nargs: usize,
) -> Result<SrcDesc<'b>, NoOp> {
    let max = match category {
        Category::Medium => rt.conduit.am_max_medium(),
        _ => rt.conduit.am_max_long(),
    };
    let lc_ok = match lc {
        Lc::Now => true,
        Lc::Defer => false,
        Lc::Group => client_buf.is_some() && network == Network::Request,
        _ => client_buf.is_some(),
    };
    let short_buf = client_buf.is_some_and(|b| b.len() < least);
    if nargs > max_args() || most < least || least > max || !lc_ok || short_buf {
        bad_prepare(
            call,
            client_buf.map(<[u8]>::len),
            network,
            &lc,
            nargs,
            least,
            most,
            max,
        );
    }
    let size = most.min(max);
    // A Long's destination mapped here, when the client leaves the buffer to us.
    let in_place = match (client_buf, dest_addr) {
        (None, Some(at)) => destination(rt, dest, at, least, size),
        _ => None,
    };
    let size = match (client_buf, category, in_place) {
        (Some(b), _, _) => size.min(b.len()),
        (None, Category::Long, Some((_, fits))) => fits,
        (None, Category::Long, None) => size.min(least.max(OWNED_LONG)),
        (None, _, _) => size,
    };
    let out = reserve(rt, dest, network, flags)?;
    let buffer = match (client_buf, category, in_place) {
        (Some(b), _, _) => Buffer::Client(b),
        (None, Category::Medium, _) => Buffer::Slot,
        (None, _, Some((at, _))) => Buffer::Destination(at),
        (None, _, None) => Buffer::Owned(Owned::zeroed(size)),
    };
    context::enter_prepare(call);
    Ok(SrcDesc {
        rt,
        dest,
        network,
        category,
        nargs,
        size,
        buffer,
        dest_addr,
        out: Some(out),
        lc: Some(lc),
    })
}

/// Where `dest`'s segment at `at` is mapped here, and how many bytes from there (at
/// most `size`, at least `least`) the segment holds; `None` if it is not mapped, holds
/// fewer than `least` bytes from `at` (Commit will then refuse the address), or is not
/// [`MAX_ALIGN`]-aligned there: a buffer the library provides holds any data type.
fn destination(
    rt: &Runtime,
    dest: Rank,
    at: usize,
    least: usize,
    size: usize,
) -> Option<(*mut u8, usize)> {
    let seg = rt.conduit.bound_segment(dest)?;
    let local = seg.local_addr?;
    let offset = at.checked_sub(seg.owner_addr)?;
    let fits = seg.size.checked_sub(offset)?.min(size);
    let here = local + offset;
    (fits >= least && here.is_multiple_of(MAX_ALIGN)).then_some((here as *mut u8, fits))
}

/// Fails a Prepare whose arguments [`prepare`] found bad, saying which one.
#[allow(clippy::too_many_arguments)]
#[cold]
#[inline(never)]
#[track_caller]
fn bad_prepare(
    call: &str,
    client_len: Option<usize>,
    network: Network,
    lc: &Lc<'_>,
    nargs: usize,
    least: usize,
    most: usize,
    max: usize,
) -> ! {
    if nargs > max_args() {
        panic!(
            "gex::{call}: {nargs} arguments, more than max_args() = {}",
            max_args()
        );
    }
    if most < least {
        panic!("gex::{call}: most_payload {most} is less than least_payload {least}");
    }
    if client_len.is_none() && !matches!(lc, Lc::Now) {
        panic!("gex::{call}: without a client buffer the local-completion option must be Lc::Now (the spec's NULL)");
    }
    check_lc(call, lc, network == Network::Request);
    if least > max {
        panic!("gex::{call}: least_payload {least} exceeds the maximum of {max} bytes");
    }
    if let Some(len) = client_len.filter(|&len| len < least) {
        panic!(
            "gex::{call}: the client buffer of {len} bytes is shorter than least_payload {least}"
        );
    }
    unreachable!("gex::{call}: the arguments were found bad but are not")
}

impl<'a> SrcDesc<'a> {
    /// GASNet-EX `gex_AM_SrcDescAddr`: where the payload is (to be) assembled.
    #[inline]
    pub fn addr(&self) -> *mut u8 {
        match &self.buffer {
            Buffer::Client(b) => b.as_ptr() as *mut u8,
            Buffer::Slot => self
                .rt
                .conduit
                .am_buffer(self.out.as_ref().expect("not committed")),
            Buffer::Owned(b) => b.bytes().as_ptr() as *mut u8,
            Buffer::Destination(at) => *at,
        }
    }

    /// GASNet-EX `gex_AM_SrcDescSize`: how many bytes may be sent.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The library-provided buffer to assemble the payload in, or `None` when the
    /// client offered its own buffer.
    #[inline]
    pub fn buffer_mut(&mut self) -> Option<&mut [u8]> {
        let size = self.size;
        match &mut self.buffer {
            Buffer::Client(_) => None,
            Buffer::Owned(b) => Some(&mut b.bytes_mut()[..size]),
            // SAFETY: `size` bytes of the target's segment from `at`, mapped for the
            // life of the job (`destination`); the target reads them only once the
            // Commit's handler runs.
            Buffer::Destination(at) => Some(unsafe { std::slice::from_raw_parts_mut(*at, size) }),
            Buffer::Slot => {
                let p = self
                    .rt
                    .conduit
                    .am_buffer(self.out.as_ref().expect("not committed"));
                // SAFETY: the slot is claimed by this SrcDesc and its payload area holds
                // am_max_medium() >= size bytes.
                Some(unsafe { std::slice::from_raw_parts_mut(p, size) })
            }
        }
    }

    /// GASNet-EX `gex_AM_Commit{Request,Reply}Medium`.
    #[inline(always)]
    #[track_caller]
    pub fn commit_medium(self, handler: AmIndex, nbytes: usize, args: &[u32]) {
        self.commit(
            "SrcDesc::commit_medium",
            Category::Medium,
            handler,
            nbytes,
            0,
            args,
        )
    }

    /// GASNet-EX `gex_AM_Commit{Request,Reply}Long`.
    #[track_caller]
    pub fn commit_long(self, handler: AmIndex, nbytes: usize, dest_addr: usize, args: &[u32]) {
        self.commit(
            "SrcDesc::commit_long",
            Category::Long,
            handler,
            nbytes,
            dest_addr,
            args,
        )
    }

    #[inline(always)]
    #[track_caller]
    fn commit(
        mut self,
        call: &str,
        category: Category,
        handler: AmIndex,
        nbytes: usize,
        dest_addr: usize,
        args: &[u32],
    ) {
        context::leave_prepare();
        if context::holding_hsl() {
            // The slot is released as `self` drops.
            panic!("gex::{call}: a Commit may not be made while holding a handler-safe lock (GASNet-EX spec, \"Calls from restricted context\")");
        }
        if category != self.category || args.len() != self.nargs || nbytes > self.size {
            self.bad_commit(call, category, nbytes, args.len());
        }
        check_args(self.rt, call, self.dest, handler, args, AM_INDEX_BASE);
        if self.dest_addr.is_some_and(|at| at != dest_addr) {
            self.bad_commit_dest(call, dest_addr);
        }
        let src: &[u8] = match &self.buffer {
            Buffer::Client(b) => &b[..nbytes],
            Buffer::Owned(b) => &b.bytes()[..nbytes],
            // SAFETY: as in `buffer_mut`; nothing else writes the range meanwhile.
            Buffer::Destination(at) => unsafe { std::slice::from_raw_parts(*at, nbytes) },
            Buffer::Slot => &[],
        };
        if category == Category::Long {
            // Before taking the slot: a refused Commit leaves the SrcDesc to free it.
            check_long(self.rt, call, self.dest, src, dest_addr);
        }
        #[cfg(feature = "gasp")]
        let site = std::panic::Location::caller();
        #[cfg(feature = "gasp")]
        let span = (gasp::enabled() && HANDLERS.reported(handler)).then(|| {
            SendSpan::new::<false>(self.network, site, self.dest, handler, category, nbytes)
        });
        let out = self.out.take().expect("committed once");
        match category {
            Category::Medium => {
                if !src.is_empty() {
                    // SAFETY: the slot holds am_max_medium() >= size >= nbytes bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            src.as_ptr(),
                            self.rt.conduit.am_buffer(&out),
                            nbytes,
                        )
                    };
                }
            }
            // Already at its destination.
            _ if matches!(self.buffer, Buffer::Destination(_)) => {}
            _ => long_payload(self.rt, &out, self.dest, dest_addr, src),
        }
        self.rt.conduit.am_commit(
            out,
            &AmHeader {
                handler,
                category,
                network: self.network,
                args,
                nbytes,
                dest_addr,
            },
        );
        if let Some(lc) = self.lc.take() {
            lc.complete_now();
        }
        #[cfg(feature = "gasp")]
        if let Some(span) = span {
            span.end(self.dest, handler, category, nbytes);
        }
    }
    /// Fails a Commit whose `dest_addr` is not the one given to Prepare.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn bad_commit_dest(&self, call: &str, dest_addr: usize) -> ! {
        panic!(
            "gex::{call}: dest_addr {dest_addr:#x} is not the {:#x} given to Prepare (the spec \
             asks for the same value)",
            self.dest_addr.unwrap_or_default()
        );
    }

    /// Fails a Commit that does not match its Prepare, saying how.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn bad_commit(&self, call: &str, category: Category, nbytes: usize, nargs: usize) -> ! {
        if category != self.category {
            panic!(
                "gex::{call}: the SrcDesc was prepared for a {:?}",
                self.category
            );
        }
        if nargs != self.nargs {
            panic!(
                "gex::{call}: {nargs} arguments, but Prepare was told {}",
                self.nargs
            );
        }
        panic!(
            "gex::{call}: nbytes {nbytes} exceeds gex_AM_SrcDescSize {}",
            self.size
        );
    }
}

impl Drop for SrcDesc<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(out) = self.out.take() {
            abandon(self.rt, self.network, out);
        }
    }
}

/// Frees the slot of a SrcDesc dropped without Commit, and fails unless the drop is
/// part of a panic already.
#[cold]
#[inline(never)]
fn abandon(rt: &Runtime, network: Network, out: <Selected as Conduit>::Outbound) {
    context::leave_prepare();
    release(rt, network, out);
    if !std::thread::panicking() {
        panic!("gex: a SrcDesc from an AM Prepare was dropped without Commit (it must be consumed exactly once)");
    }
}

/// Publishes a claimed slot as a message the receiver skips (handler index 0).
#[cold]
#[inline(never)]
pub(super) fn release(rt: &Runtime, network: Network, out: <Selected as Conduit>::Outbound) {
    rt.conduit.am_commit(
        out,
        &AmHeader {
            handler: 0,
            category: Category::Short,
            network,
            args: &[],
            nbytes: 0,
            dest_addr: 0,
        },
    );
}
