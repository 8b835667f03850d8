//! Injecting Active Messages: the checks, claiming a slot (waiting under back-pressure),
//! writing the payload and committing; the Request calls of a team and the payload
//! limits (GASNet-EX `gex_AM_Request*`, `gex_AM_Max*`, `gex_AM_LUB*`).

#[cfg(feature = "gasp")]
use std::panic::Location;

use super::handler::{max_args, AmIndex, AM_INDEX_BASE};
#[cfg(feature = "gasp")]
use super::reported::SendSpan;
#[cfg(feature = "gasp")]
use super::table::HANDLERS;
use crate::backoff::Backoff;
use crate::conduit::{AmHeader, Category, Conduit, Network, Rank, Selected};
use crate::context;
use crate::event::Lc;
use crate::runtime::{runtime, Runtime};
use crate::team::Team;
use crate::{Flags, NoOp};

/// Which kind of local-completion option a max-payload query is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LcKind {
    /// The call will pass `GEX_EVENT_NOW`.
    Now,
    /// The call will pass `GEX_EVENT_GROUP`.
    Group,
    /// The call will pass a pointer to a `gex_Event_t` (any one).
    Event,
}

/// The payload of a message being injected.
#[derive(Clone, Copy)]
pub(super) enum Payload<'a> {
    None,
    Medium(&'a [u8]),
    Long(&'a [u8], usize),
}

#[cfg(feature = "gasp")]
impl<'a> Payload<'a> {
    /// The payload as scalars (kind, bytes, destination address), for an out-of-line
    /// call: an enum of three words passed to a call is passed by reference, which keeps
    /// it in memory on the caller's other paths too.
    #[inline(always)]
    pub(super) fn parts(self) -> (u8, &'a [u8], usize) {
        match self {
            Payload::None => (0, &[], 0),
            Payload::Medium(p) => (1, p, 0),
            Payload::Long(p, addr) => (2, p, addr),
        }
    }

    /// The payload of [`Payload::parts`].
    #[inline(always)]
    pub(super) fn from_parts(kind: u8, data: &'a [u8], dest_addr: usize) -> Payload<'a> {
        match kind {
            0 => Payload::None,
            1 => Payload::Medium(data),
            _ => Payload::Long(data, dest_addr),
        }
    }
}

#[track_caller]
pub(super) fn check_lc(call: &str, lc: &Lc<'_>, group_allowed: bool) {
    match lc {
        Lc::Defer => panic!("gex::{call}: Lc::Defer is not allowed for Active Messages"),
        Lc::Group if !group_allowed => panic!("gex::{call}: Lc::Group is not allowed for Replies"),
        _ => {}
    }
}

/// Checks an AM's destination, argument count and handler index, which must be at
/// least `first`: [`AM_INDEX_BASE`] for a client's message, whose handlers are
/// registered there (the library's own, below it, trust their arguments), 1 for the
/// library's. Inline: three compares on every message; the panics are out of line.
#[inline(always)]
#[track_caller]
pub(super) fn check_args(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    handler: AmIndex,
    args: &[u32],
    first: AmIndex,
) {
    if dest >= rt.conduit.size() || args.len() > max_args() || handler < first {
        bad_args(rt, call, dest, handler, args);
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn bad_args(rt: &Runtime, call: &str, dest: Rank, handler: AmIndex, args: &[u32]) -> ! {
    if dest >= rt.conduit.size() {
        panic!(
            "gex::{call}: rank {dest} is not in the team (size {})",
            rt.conduit.size()
        );
    }
    if args.len() > max_args() {
        panic!(
            "gex::{call}: {} arguments, more than max_args() = {}",
            args.len(),
            max_args()
        );
    }
    if handler == 0 {
        panic!("gex::{call}: handler index 0 is not a handler");
    }
    if handler < AM_INDEX_BASE {
        panic!(
            "gex::{call}: handler index {handler} is one of the library's own; a client's \
             handlers are registered at {AM_INDEX_BASE} to 255"
        );
    }
    unreachable!("gex::{call}: the arguments were found bad but are not")
}

/// The flags that make a payload query answer for Prepare calls.
const PREPARE_LEAST: Flags = Flags::AM_PREPARE_LEAST_CLIENT.or(Flags::AM_PREPARE_LEAST_ALLOC);

/// GASNet-EX: the `AM_PREPARE_LEAST_*` flags are "invalid in gex_AM_{Request,Reply}
/// {Medium,Long}*() calls".
#[cold]
#[inline(never)]
#[track_caller]
fn prepare_least_flag(call: &str) -> ! {
    panic!(
        "gex::{call}: Flags::AM_PREPARE_LEAST_CLIENT and AM_PREPARE_LEAST_ALLOC are for \
         payload queries, not fixed-payload Requests and Replies"
    )
}

/// The answer of a payload query with `flags`: `max`, the largest payload of the
/// fixed-payload call and the largest `least_payload` of the Prepare call alike (a
/// Prepare accepts any `least_payload` up to the fixed-payload maximum, with a buffer
/// of either origin).
#[track_caller]
pub(super) fn payload_query(call: &str, flags: Flags, nargs: usize, max: usize) -> usize {
    if nargs > max_args() {
        panic!(
            "gex::{call}: {nargs} arguments, more than max_args() = {} (numargs must be \
             between 0 and gex_AM_MaxArgs())",
            max_args()
        );
    }
    if flags.contains(PREPARE_LEAST) {
        panic!(
            "gex::{call}: Flags::AM_PREPARE_LEAST_CLIENT and AM_PREPARE_LEAST_ALLOC are \
             mutually exclusive"
        );
    }
    max
}

#[track_caller]
pub(super) fn check_long(rt: &Runtime, call: &str, dest: Rank, payload: &[u8], dest_addr: usize) {
    // A Long of no bytes writes nothing: its `dest_addr` goes to the handler as the
    // initiator gave it, whatever it is (GASNet-EX, "Misc semantic strengthening").
    if payload.is_empty() {
        return;
    }
    let max = rt.conduit.am_max_long();
    if payload.len() > max {
        panic!(
            "gex::{call}: a Long payload of {} bytes is larger than the most a Long carries, \
             {max} bytes (gex_AM_MaxRequestLong)",
            payload.len()
        );
    }
    if let Err(e) = rt.conduit.check_range(dest, dest_addr, payload.len()) {
        crate::rma::address_error(call, dest, dest_addr, payload.len(), e);
    }
}

/// Claims a slot on `network` of `dest`, polling while the queue is full, or `NoOp`
/// with [`Flags::IMMEDIATE`].
#[inline]
pub(super) fn reserve(
    rt: &Runtime,
    dest: Rank,
    network: Network,
    flags: Flags,
) -> Result<<Selected as Conduit>::Outbound, NoOp> {
    if let Some(out) = rt.conduit.am_reserve(dest, network) {
        return Ok(out);
    }
    reserve_waiting(rt, dest, network, flags)
}

/// [`reserve`] once the queue was found full: out of line, so that the common case is
/// inlined into every send.
#[cold]
#[inline(never)]
fn reserve_waiting(
    rt: &Runtime,
    dest: Rank,
    network: Network,
    flags: Flags,
) -> Result<<Selected as Conduit>::Outbound, NoOp> {
    if flags.contains(Flags::IMMEDIATE) {
        return Err(NoOp);
    }
    let mut backoff = Backoff::new();
    loop {
        // A Reply (sent from a Request handler) may only wait for Replies to drain;
        // anything else may run every kind of handler while it waits.
        let n = if network == Network::Reply && context::in_handler() {
            rt.progress_replies()
        } else {
            rt.progress()
        };
        if let Some(out) = rt.conduit.am_reserve(dest, network) {
            return Ok(out);
        }
        if n > 0 {
            backoff.reset();
        } else {
            rt.idle(&mut backoff);
        }
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
#[track_caller]
pub(super) fn send(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    network: Network,
    handler: AmIndex,
    args: &[u32],
    payload: Payload<'_>,
    flags: Flags,
    first: AmIndex,
) -> Result<(), NoOp> {
    check_args(rt, call, dest, handler, args, first);
    #[cfg(feature = "gasp")]
    if gasp::enabled() && HANDLERS.reported(handler) {
        let (kind, data, dest_addr) = payload.parts();
        return send_reported(
            rt, call, dest, network, handler, args, kind, data, dest_addr, flags,
        );
    }
    send_as::<false>(rt, call, dest, network, handler, args, payload, flags)
}

/// The reported instance of [`send`]: see [the reported instance](gasp::instrument#the-reported-instance-of-an-operation). The payload
/// arrives as scalars ([`Payload::parts`]).
#[cfg(feature = "gasp")]
#[allow(clippy::too_many_arguments)]
#[cold]
#[inline(never)]
#[track_caller]
fn send_reported(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    network: Network,
    handler: AmIndex,
    args: &[u32],
    kind: u8,
    data: &[u8],
    dest_addr: usize,
    flags: Flags,
) -> Result<(), NoOp> {
    let payload = Payload::from_parts(kind, data, dest_addr);
    send_as::<true>(rt, call, dest, network, handler, args, payload, flags)
}

/// [`send`], reporting its GASP event if `REPORT`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
#[track_caller]
fn send_as<const REPORT: bool>(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    network: Network,
    handler: AmIndex,
    args: &[u32],
    payload: Payload<'_>,
    flags: Flags,
) -> Result<(), NoOp> {
    if flags.intersects(PREPARE_LEAST) {
        prepare_least_flag(call);
    }
    let (category, nbytes, dest_addr) = match payload {
        Payload::None => (Category::Short, 0, 0),
        Payload::Medium(p) => {
            let max = rt.conduit.am_max_medium();
            if p.len() > max {
                panic!(
                    "gex::{call}: payload of {} bytes exceeds the Medium maximum of {max} bytes",
                    p.len()
                );
            }
            (Category::Medium, p.len(), 0)
        }
        Payload::Long(p, addr) => {
            check_long(rt, call, dest, p, addr);
            (Category::Long, p.len(), addr)
        }
    };
    #[cfg(feature = "gasp")]
    let site = Location::caller();
    #[cfg(feature = "gasp")]
    let span =
        REPORT.then(|| SendSpan::new::<true>(network, site, dest, handler, category, nbytes));
    let out = reserve(rt, dest, network, flags)?;
    match payload {
        Payload::None => {}
        Payload::Medium(p) => {
            // SAFETY: the claimed slot's payload area holds am_max_medium() bytes and
            // p.len() was checked against it; the slot is ours until commit.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), rt.conduit.am_buffer(&out), p.len())
            };
        }
        Payload::Long(p, addr) => long_payload(rt, &out, dest, addr, p),
    }
    rt.conduit.am_commit(
        out,
        &AmHeader {
            handler,
            category,
            network,
            args,
            nbytes,
            dest_addr,
        },
    );
    #[cfg(feature = "gasp")]
    if let Some(span) = span {
        span.end(dest, handler, category, nbytes);
    }
    Ok(())
}

/// Delivers a Long's checked payload `src` for the claimed buffer `out`: into the
/// buffer, where the conduit carries it in the message (`am_long_inline`), else to
/// `dest_addr` of `dest` before the header is sent. Out of line: the other categories'
/// sends do not need it.
#[inline(never)]
pub(super) fn long_payload(
    rt: &Runtime,
    out: &<Selected as Conduit>::Outbound,
    dest: Rank,
    dest_addr: usize,
    src: &[u8],
) {
    if src.is_empty() {
        return; // nothing to deliver; `dest_addr` travels in the header alone
    }
    if rt.conduit.am_long_inline(out, src.len()) {
        // SAFETY: the claimed buffer's payload area holds the bytes (am_long_inline)
        // and is ours until commit.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), rt.conduit.am_buffer(out), src.len())
        };
        return;
    }
    let c = rt
        .conduit
        .long_payload(dest, dest_addr, src)
        .expect("the destination was checked before the slot was claimed");
    crate::event::complete_blocking(rt, c);
}

impl Team {
    #[inline]
    #[track_caller]
    pub(super) fn am_runtime(&self, call: &str) -> &'static Runtime {
        let rt = runtime(call);
        context::check_may_communicate(call);
        rt
    }

    /// GASNet-EX `gex_AM_RequestShort`: runs `handler(token, args)` on `rank`.
    #[inline]
    #[track_caller]
    pub fn request_short(
        &self,
        rank: Rank,
        handler: AmIndex,
        args: &[u32],
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::request_short";
        let rt = self.am_runtime(CALL);
        let dest = self.job_rank_of(CALL, rank);
        send(
            rt,
            CALL,
            dest,
            Network::Request,
            handler,
            args,
            Payload::None,
            flags,
            AM_INDEX_BASE,
        )
    }

    /// GASNet-EX `gex_AM_RequestMedium`: runs `handler(token, payload, args)` on `rank`,
    /// the payload in a library buffer valid during the handler.
    #[inline]
    #[track_caller]
    pub fn request_medium(
        &self,
        rank: Rank,
        handler: AmIndex,
        payload: &[u8],
        lc: Lc<'_>,
        flags: Flags,
        args: &[u32],
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::request_medium";
        let rt = self.am_runtime(CALL);
        check_lc(CALL, &lc, true);
        let dest = self.job_rank_of(CALL, rank);
        send(
            rt,
            CALL,
            dest,
            Network::Request,
            handler,
            args,
            Payload::Medium(payload),
            flags,
            AM_INDEX_BASE,
        )?;
        lc.complete_now();
        Ok(())
    }

    /// GASNet-EX `gex_AM_RequestLong`: writes `payload` to `dest_addr` in `rank`'s
    /// segment, then runs `handler(token, payload_at_dest, args)` there. A payload of
    /// no bytes writes nothing and `dest_addr` reaches the handler
    /// ([`Token::dest_addr`](crate::Token::dest_addr)) as given, whatever it is, as
    /// the spec guarantees "even for the degenerate case when nbytes==0".
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[track_caller]
    pub fn request_long(
        &self,
        rank: Rank,
        handler: AmIndex,
        payload: &[u8],
        dest_addr: usize,
        lc: Lc<'_>,
        flags: Flags,
        args: &[u32],
    ) -> Result<(), NoOp> {
        const CALL: &str = "Team::request_long";
        let rt = self.am_runtime(CALL);
        check_lc(CALL, &lc, true);
        let dest = self.job_rank_of(CALL, rank);
        send(
            rt,
            CALL,
            dest,
            Network::Request,
            handler,
            args,
            Payload::Long(payload, dest_addr),
            flags,
            AM_INDEX_BASE,
        )?;
        lc.complete_now();
        Ok(())
    }

    /// GASNet-EX `gex_AM_MaxRequestMedium` (`other_rank` None: over all team members).
    /// With [`Flags::AM_PREPARE_LEAST_CLIENT`] or [`Flags::AM_PREPARE_LEAST_ALLOC`], the
    /// largest `least_payload` of the Prepare call: the same value (so for the three
    /// other queries).
    #[track_caller]
    pub fn max_request_medium(
        &self,
        other_rank: Option<Rank>,
        _lc: LcKind,
        flags: Flags,
        nargs: usize,
    ) -> usize {
        self.payload_query("Team::max_request_medium", other_rank, flags, nargs, false)
    }

    /// GASNet-EX `gex_AM_MaxReplyMedium`.
    #[track_caller]
    pub fn max_reply_medium(
        &self,
        other_rank: Option<Rank>,
        _lc: LcKind,
        flags: Flags,
        nargs: usize,
    ) -> usize {
        self.payload_query("Team::max_reply_medium", other_rank, flags, nargs, false)
    }

    /// GASNet-EX `gex_AM_MaxRequestLong`.
    #[track_caller]
    pub fn max_request_long(
        &self,
        other_rank: Option<Rank>,
        _lc: LcKind,
        flags: Flags,
        nargs: usize,
    ) -> usize {
        self.payload_query("Team::max_request_long", other_rank, flags, nargs, true)
    }

    /// GASNet-EX `gex_AM_MaxReplyLong`.
    #[track_caller]
    pub fn max_reply_long(
        &self,
        other_rank: Option<Rank>,
        _lc: LcKind,
        flags: Flags,
        nargs: usize,
    ) -> usize {
        self.payload_query("Team::max_reply_long", other_rank, flags, nargs, true)
    }
}

impl Team {
    /// A payload query of this team named `call`, of a Long's payload if `long`, else
    /// a Medium's: `other_rank` must be a member (its value changes nothing: the
    /// limits are the same for every rank).
    #[track_caller]
    fn payload_query(
        &self,
        call: &str,
        other_rank: Option<Rank>,
        flags: Flags,
        nargs: usize,
        long: bool,
    ) -> usize {
        let rt = runtime(call);
        if let Some(rank) = other_rank {
            self.job_rank_of(call, rank);
        }
        let max = if long {
            rt.conduit.am_max_long()
        } else {
            rt.conduit.am_max_medium()
        };
        payload_query(call, flags, nargs, max)
    }
}

/// The least upper bounds of the payload queries (GASNet-EX `gex_AM_LUB*`).
#[track_caller]
pub fn lub_request_medium() -> usize {
    runtime("lub_request_medium").conduit.am_max_medium()
}
/// GASNet-EX `gex_AM_LUBReplyMedium`.
#[track_caller]
pub fn lub_reply_medium() -> usize {
    runtime("lub_reply_medium").conduit.am_max_medium()
}
/// GASNet-EX `gex_AM_LUBRequestLong`.
#[track_caller]
pub fn lub_request_long() -> usize {
    runtime("lub_request_long").conduit.am_max_long()
}
/// GASNet-EX `gex_AM_LUBReplyLong`.
#[track_caller]
pub fn lub_reply_long() -> usize {
    runtime("lub_reply_long").conduit.am_max_long()
}

/// Checks that `handler` is registered here as a 0-argument Medium Reply handler, as a
/// VIS peer completion handler must be (`gex_VIS_SetPeerCompletionHandler`).
#[track_caller]
pub(crate) fn check_peer_completion_handler(call: &str, handler: AmIndex) {
    use super::handler::{AmCategory, AmRole};
    let Some(entry) = super::table::HANDLERS.get(handler) else {
        panic!("gex::{call}: no handler is registered at index {handler}");
    };
    let medium = matches!(entry.category, AmCategory::Medium | AmCategory::MedLong);
    let reply = matches!(entry.role, AmRole::Reply | AmRole::ReqRep);
    if !medium || !reply || entry.nargs != 0 {
        panic!(
            "gex::{call}: handler {handler} ({}) must be registered as a 0-argument \
             Medium Reply handler",
            entry.name
        );
    }
}

/// Sends a Short Request of one of the library's own handlers to job rank `dest`
/// (waiting for room unless `flags` has `IMMEDIATE`).
#[track_caller]
pub(crate) fn send_internal(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    handler: AmIndex,
    args: &[u32],
    flags: Flags,
) -> Result<(), NoOp> {
    send(
        rt,
        call,
        dest,
        Network::Request,
        handler,
        args,
        Payload::None,
        flags,
        1,
    )
}

/// Sends a Medium Request of one of the library's own handlers to job rank `dest`,
/// waiting for room; `payload` is copied before the call returns.
#[track_caller]
pub(crate) fn send_internal_medium(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    handler: AmIndex,
    args: &[u32],
    payload: &[u8],
) {
    let sent = try_send_internal_medium(rt, call, dest, handler, args, payload, Flags::NONE);
    sent.expect("a send without Flags::IMMEDIATE waits for room");
}

/// [`send_internal_medium`], waiting for room unless `flags` has `IMMEDIATE`.
#[track_caller]
pub(crate) fn try_send_internal_medium(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    handler: AmIndex,
    args: &[u32],
    payload: &[u8],
    flags: Flags,
) -> Result<(), NoOp> {
    send(
        rt,
        call,
        dest,
        Network::Request,
        handler,
        args,
        Payload::Medium(payload),
        flags,
        1,
    )
}

/// Sends a VIS peer completion: `handler` as a 0-argument Medium on the Reply network
/// of job rank `dest`, with `payload`. Sent from outside any handler, it waits for room
/// as a Request would.
#[track_caller]
pub(crate) fn send_peer_completion(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    handler: AmIndex,
    payload: &[u8],
) {
    let sent = send(
        rt,
        call,
        dest,
        Network::Reply,
        handler,
        &[],
        Payload::Medium(payload),
        Flags::NONE,
        AM_INDEX_BASE,
    );
    sent.expect("a send without Flags::IMMEDIATE waits for room");
}
