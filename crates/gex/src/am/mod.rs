//! Active Messages (GASNet-EX spec, "Active Message (AM)" sections).
//!
//! An Active Message names a handler, registered at the same index on every rank, that
//! runs at the target with up to [`max_args`] 32-bit arguments and, for Medium and Long,
//! a payload: a Medium's payload lands in a library buffer that is valid during the
//! handler; a Long's payload is written to an address in the target's segment before
//! the handler runs. A Request handler may send at most one Reply to its sender.
//!
//! * Registration ([`Endpoint::register_handlers`]): fixed indices in
//!   `[AM_INDEX_BASE, 255]`; index 0 means "don't care" and is replaced, in table order,
//!   by the highest index still free. Indices below `AM_INDEX_BASE` are the library's.
//! * Injection: `Team::request_{short,medium,long}` and `Token::reply_*`. With
//!   [`Flags::IMMEDIATE`] an injection that would block returns `Err(NoOp)` and does
//!   nothing; otherwise it polls until the target's queue has room.
//! * Negotiated payload: `Team::prepare_request_{medium,long}` /
//!   `Token::prepare_reply_*` return a [`SrcDesc`] whose buffer is either the client's
//!   or a slot of the target's queue (no copy at all), consumed by `commit` (in
//!   `am/negotiated.rs`).

use std::cell::Cell;
use std::panic::Location;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use crate::client::{Endpoint, Team};
use crate::conduit::{Active, AmHeader, Category, Conduit, Inbound, Network, Rank};
use crate::event::Lc;
use crate::progress::{self, runtime, HandlerScope, Runtime};
use crate::{Flags, NoOp};

mod negotiated;

pub use negotiated::SrcDesc;

/// Handler index (GASNet-EX `gex_AM_Index_t`).
pub type AmIndex = u8;

/// Smallest index a client may register at (GASNet-EX `GEX_AM_INDEX_BASE`).
pub const AM_INDEX_BASE: AmIndex = 128;

/// Largest number of handler arguments (GASNet-EX `gex_AM_MaxArgs`).
pub const fn max_args() -> usize {
    16
}

/// The handler function of an [`AmEntry`]. Short handlers get the arguments; Medium and
/// Long handlers also get the payload.
#[derive(Clone, Copy)]
pub enum HandlerFn {
    Short(fn(&Token<'_>, &[u32])),
    Payload(fn(&Token<'_>, &[u8], &[u32])),
}

/// The AM categories a handler accepts (GASNet-EX `GEX_FLAG_AM_{SHORT,MEDIUM,LONG,MEDLONG}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmCategory {
    Short,
    Medium,
    Long,
    MedLong,
}

/// Whether a handler runs as Request, Reply or both (`GEX_FLAG_AM_{REQUEST,REPLY,REQREP}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmRole {
    Request,
    Reply,
    ReqRep,
}

/// One handler to register (GASNet-EX `gex_AM_Entry_t`).
#[derive(Clone, Copy)]
pub struct AmEntry {
    /// 0 ("don't care") or in `[AM_INDEX_BASE, 255]`; set by registration when 0.
    pub index: AmIndex,
    pub handler: HandlerFn,
    pub category: AmCategory,
    pub role: AmRole,
    /// Number of arguments every invocation passes.
    pub nargs: usize,
    /// Client data available to the handler through [`TokenInfo::entry`].
    pub cdata: usize,
    /// Used in error messages.
    pub name: &'static str,
    /// Whether this handler's messages are reported to a GASP tool
    /// (`GASP_GEX_AM_REQUEST`/`_REPLY`/`_HANDLER`); true unless [`AmEntry::unreported`]
    /// is used by a runtime layered on gex that reports its own events instead.
    pub reported: bool,
}

impl AmEntry {
    /// A Short handler taking `nargs` arguments.
    pub fn short(
        name: &'static str,
        role: AmRole,
        nargs: usize,
        f: fn(&Token<'_>, &[u32]),
    ) -> AmEntry {
        AmEntry {
            index: 0,
            handler: HandlerFn::Short(f),
            category: AmCategory::Short,
            role,
            nargs,
            cdata: 0,
            name,
            reported: true,
        }
    }

    /// A Medium, Long or MedLong handler taking `nargs` arguments.
    pub fn payload(
        name: &'static str,
        category: AmCategory,
        role: AmRole,
        nargs: usize,
        f: fn(&Token<'_>, &[u8], &[u32]),
    ) -> AmEntry {
        AmEntry {
            index: 0,
            handler: HandlerFn::Payload(f),
            category,
            role,
            nargs,
            cdata: 0,
            name,
            reported: true,
        }
    }

    /// Keeps this handler's messages out of GASP events (see [`AmEntry::reported`]).
    pub fn unreported(mut self) -> AmEntry {
        self.reported = false;
        self
    }

    /// Sets the fixed index to register at.
    pub fn at(mut self, index: AmIndex) -> AmEntry {
        self.index = index;
        self
    }

    fn accepts(&self, category: Category, network: Network) -> bool {
        let cat = matches!(
            (self.category, category),
            (AmCategory::Short, Category::Short)
                | (AmCategory::Medium, Category::Medium)
                | (AmCategory::Long, Category::Long)
                | (AmCategory::MedLong, Category::Medium | Category::Long)
        );
        let role = matches!(
            (self.role, network),
            (AmRole::ReqRep, _)
                | (AmRole::Request, Network::Request)
                | (AmRole::Reply, Network::Reply)
        );
        cat && role
    }
}

/// Why a handler table could not be registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    IndexReserved(AmIndex),
    IndexTaken(AmIndex),
    TableFull,
    TooManyArgs { name: &'static str, nargs: usize },
    WrongFunction { name: &'static str },
}

impl std::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegisterError::IndexReserved(i) => write!(
                f,
                "handler index {i} is reserved for the library (client indices are {AM_INDEX_BASE}..=255 or 0)"
            ),
            RegisterError::IndexTaken(i) => write!(f, "handler index {i} is already registered"),
            RegisterError::TableFull => write!(f, "no free handler index is left"),
            RegisterError::TooManyArgs { name, nargs } => write!(
                f,
                "handler {name} takes {nargs} arguments, more than max_args() = {}",
                max_args()
            ),
            RegisterError::WrongFunction { name } => write!(
                f,
                "handler {name}: a Short handler needs HandlerFn::Short, others HandlerFn::Payload"
            ),
        }
    }
}

impl std::error::Error for RegisterError {}

/// The per-endpoint table of 256 handlers. Entries are written once and never freed, so
/// dispatch reads them without a lock.
pub(crate) struct HandlerTable {
    entries: [AtomicPtr<AmEntry>; 256],
    /// Where each handler was registered: the call site GASP reports for its runs.
    sites: [AtomicPtr<Location<'static>>; 256],
    register: Mutex<()>,
}

impl HandlerTable {
    pub fn new() -> HandlerTable {
        HandlerTable {
            entries: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            sites: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            register: Mutex::new(()),
        }
    }

    #[inline]
    fn get(&self, index: AmIndex) -> Option<&'static AmEntry> {
        let p = self.entries[index as usize].load(Ordering::Acquire);
        // SAFETY: non-null entries are leaked boxes that are never freed or modified.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Whether messages to handler `index` are reported to GASP.
    #[cfg(feature = "gasp")]
    #[inline]
    fn reported(&self, index: AmIndex) -> bool {
        index >= AM_INDEX_BASE && self.get(index).is_some_and(|e| e.reported)
    }

    /// Where handler `index` was registered.
    #[cfg(feature = "gasp")]
    fn site(&self, index: AmIndex) -> &'static Location<'static> {
        let p = self.sites[index as usize].load(Ordering::Acquire);
        // SAFETY: non-null sites are `&'static Location`s stored by `register`.
        if p.is_null() {
            Location::caller()
        } else {
            unsafe { &*p }
        }
    }

    /// Registers `table`, assigning "don't care" indices from the top of `range`.
    #[track_caller]
    pub fn register(
        &self,
        table: &mut [AmEntry],
        range: std::ops::RangeInclusive<AmIndex>,
    ) -> Result<(), RegisterError> {
        let _guard = self.register.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken: Vec<bool> = (0..256).map(|i| self.get(i as AmIndex).is_some()).collect();
        for e in table.iter() {
            if e.nargs > max_args() {
                return Err(RegisterError::TooManyArgs {
                    name: e.name,
                    nargs: e.nargs,
                });
            }
            let short_fn = matches!(e.handler, HandlerFn::Short(_));
            if short_fn != (e.category == AmCategory::Short) {
                return Err(RegisterError::WrongFunction { name: e.name });
            }
            if e.index != 0 {
                if !range.contains(&e.index) {
                    return Err(RegisterError::IndexReserved(e.index));
                }
                if taken[e.index as usize] {
                    return Err(RegisterError::IndexTaken(e.index));
                }
                taken[e.index as usize] = true;
            }
        }
        let mut assigned = Vec::with_capacity(table.len());
        for e in table.iter() {
            if e.index == 0 {
                let free = range
                    .clone()
                    .rev()
                    .find(|&i| !taken[i as usize])
                    .ok_or(RegisterError::TableFull)?;
                taken[free as usize] = true;
                assigned.push(free);
            } else {
                assigned.push(e.index);
            }
        }
        for (e, index) in table.iter_mut().zip(assigned) {
            e.index = index;
            let entry = Box::into_raw(Box::new(*e));
            let site = Location::caller() as *const Location<'static> as *mut Location<'static>;
            self.sites[index as usize].store(site, Ordering::Release);
            self.entries[index as usize].store(entry, Ordering::Release);
        }
        Ok(())
    }
}

impl Endpoint {
    /// Registers AM handlers (GASNet-EX `gex_EP_RegisterHandlers`). Entries with index 0
    /// get the highest free index, in table order, written back into `table`.
    ///
    /// Not collective: register before any rank may send to these handlers (for example
    /// before a barrier).
    #[track_caller]
    pub fn register_handlers(&self, table: &mut [AmEntry]) -> Result<(), RegisterError> {
        runtime("Endpoint::register_handlers")
            .handlers
            .register(table, AM_INDEX_BASE..=255)
    }
}

/// Registers the library's own handlers (indices below `AM_INDEX_BASE`).
pub(crate) fn register_internal(rt: &Runtime, table: &mut [AmEntry]) {
    rt.handlers
        .register(table, 1..=AM_INDEX_BASE - 1)
        .expect("internal handler indices are unique");
}

/// What a handler may learn about the message it runs for (GASNet-EX `gex_Token_Info`).
#[derive(Clone, Copy)]
pub struct TokenInfo {
    /// Job rank of the sender.
    pub src_rank: Rank,
    pub is_request: bool,
    pub is_long: bool,
    pub entry: &'static AmEntry,
}

/// Names the message a handler runs for, and the way back to its sender
/// (GASNet-EX `gex_Token_t`). Only valid during the handler.
pub struct Token<'a> {
    rt: &'static Runtime,
    msg: &'a Inbound<'a>,
    entry: &'static AmEntry,
    replied: Cell<bool>,
}

impl Token<'_> {
    /// GASNet-EX `gex_Token_Info`: all queries are supported.
    pub fn info(&self) -> TokenInfo {
        TokenInfo {
            src_rank: self.msg.src,
            is_request: self.msg.network == Network::Request,
            is_long: self.msg.category == Category::Long,
            entry: self.entry,
        }
    }

    /// Job rank of the sender.
    pub fn src_rank(&self) -> Rank {
        self.msg.src
    }

    /// For a Long, the destination address the initiator passed.
    pub fn dest_addr(&self) -> usize {
        self.msg.dest_addr
    }

    /// Checks that this handler may still send its Reply. The Reply counts as sent
    /// only once an injection succeeds (`mark_replied`), so a refused call can be
    /// corrected and retried.
    #[track_caller]
    fn claim_reply(&self, call: &str) {
        if self.msg.network != Network::Request {
            panic!("gex::{call}: a Reply may only be sent from a Request handler (handler {} runs as a Reply)", self.entry.name);
        }
        if self.replied.get() {
            panic!(
                "gex::{call}: handler {} already sent its one Reply",
                self.entry.name
            );
        }
        if progress::holding_hsl() {
            panic!("gex::{call}: a Reply may not be sent while holding a handler-safe lock (GASNet-EX spec, \"Calls from restricted context\")");
        }
    }

    fn mark_replied<T>(&self, r: Result<T, NoOp>) -> Result<T, NoOp> {
        if r.is_ok() {
            self.replied.set(true);
        }
        r
    }

    /// GASNet-EX `gex_AM_ReplyShort`.
    #[track_caller]
    pub fn reply_short(&self, handler: AmIndex, args: &[u32], flags: Flags) -> Result<(), NoOp> {
        const CALL: &str = "Token::reply_short";
        self.claim_reply(CALL);
        let r = send(
            self.rt,
            CALL,
            self.msg.src,
            Network::Reply,
            handler,
            args,
            Payload::None,
            flags,
        );
        self.mark_replied(r)
    }

    /// GASNet-EX `gex_AM_ReplyMedium`. `lc` may not be [`Lc::Group`].
    #[track_caller]
    pub fn reply_medium(
        &self,
        handler: AmIndex,
        payload: &[u8],
        lc: Lc<'_>,
        flags: Flags,
        args: &[u32],
    ) -> Result<(), NoOp> {
        const CALL: &str = "Token::reply_medium";
        self.claim_reply(CALL);
        check_lc(CALL, &lc, false);
        let r = send(
            self.rt,
            CALL,
            self.msg.src,
            Network::Reply,
            handler,
            args,
            Payload::Medium(payload),
            flags,
        );
        lc.complete_now();
        self.mark_replied(r)
    }

    /// GASNet-EX `gex_AM_ReplyLong`. `lc` may not be [`Lc::Group`].
    #[track_caller]
    pub fn reply_long(
        &self,
        handler: AmIndex,
        payload: &[u8],
        dest_addr: usize,
        lc: Lc<'_>,
        flags: Flags,
        args: &[u32],
    ) -> Result<(), NoOp> {
        const CALL: &str = "Token::reply_long";
        self.claim_reply(CALL);
        check_lc(CALL, &lc, false);
        let r = send(
            self.rt,
            CALL,
            self.msg.src,
            Network::Reply,
            handler,
            args,
            Payload::Long(payload, dest_addr),
            flags,
        );
        lc.complete_now();
        self.mark_replied(r)
    }

    /// GASNet-EX `gex_Token_MaxReplyMedium`.
    pub fn max_reply_medium(&self, _lc: LcKind, _flags: Flags, _nargs: usize) -> usize {
        self.rt.conduit.am_max_medium()
    }

    /// GASNet-EX `gex_Token_MaxReplyLong`.
    pub fn max_reply_long(&self, _lc: LcKind, _flags: Flags, _nargs: usize) -> usize {
        self.rt.conduit.am_max_long()
    }
}

/// Which kind of local-completion option a max-payload query is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LcKind {
    Now,
    Group,
    Event,
}

/// Runs one arrived message: finds its handler, checks the registration's promises,
/// and calls it in handler context.
pub(crate) fn dispatch(msg: &Inbound<'_>) {
    let rt = progress::try_runtime().expect("messages are dispatched after init");
    if msg.handler == 0 {
        return; // an abandoned negotiated-payload slot
    }
    let Some(entry) = rt.handlers.get(msg.handler) else {
        handler_error(rt, msg, "no handler is registered at this index");
    };
    if !entry.accepts(msg.category, msg.network) {
        handler_error(
            rt,
            msg,
            "the handler was not registered for this category of message",
        );
    }
    if entry.nargs != msg.args.len() {
        handler_error(
            rt,
            msg,
            "the number of arguments differs from the registration",
        );
    }
    #[cfg(feature = "gasp")]
    if gasp::enabled() && rt.handlers.reported(msg.handler) {
        return run_reported(rt, msg, entry);
    }
    run::<false>(rt, msg, entry);
}

/// [`run`] of a reported handler while a tool is attached, out of line: the common
/// path makes one flag test and holds no instrumentation.
#[cfg(feature = "gasp")]
#[cold]
#[inline(never)]
fn run_reported(rt: &'static Runtime, msg: &Inbound<'_>, entry: &'static AmEntry) {
    run::<true>(rt, msg, entry);
}

/// Calls the handler of `msg` in handler context, reporting its GASP event if `REPORT`.
#[inline(always)]
fn run<const REPORT: bool>(rt: &'static Runtime, msg: &Inbound<'_>, entry: &'static AmEntry) {
    let token = Token {
        rt,
        msg,
        entry,
        replied: Cell::new(false),
    };
    let _scope = HandlerScope::enter(msg.network == Network::Request);
    #[cfg(feature = "gasp")]
    let span = REPORT.then(|| {
        gasp::Span::open(
            gasp::events::GASP_GEX_AM_HANDLER,
            rt.handlers.site(msg.handler),
            &am_args(msg.src, msg.handler, msg.category, msg.payload.len()),
        )
    });
    match entry.handler {
        HandlerFn::Short(f) => f(&token, msg.args),
        HandlerFn::Payload(f) => f(&token, msg.payload, msg.args),
    }
    #[cfg(feature = "gasp")]
    if let Some(span) = span {
        span.end(&am_args(
            msg.src,
            msg.handler,
            msg.category,
            msg.payload.len(),
        ));
    }
}

/// The arguments of the AM events (`int rank, int handler, int category, size_t nbytes`).
#[cfg_attr(not(feature = "gasp"), allow(dead_code))]
fn am_args(
    rank: Rank,
    handler: AmIndex,
    category: Category,
    nbytes: usize,
) -> [gasp::Arg<'static>; 4] {
    let category = match category {
        Category::Short => 0,
        Category::Medium => 1,
        Category::Long => 2,
    };
    [
        gasp::Arg::Rank(rank),
        gasp::Arg::Int(i32::from(handler)),
        gasp::Arg::Int(category),
        gasp::Arg::Bytes(nbytes),
    ]
}

#[cold]
fn handler_error(rt: &Runtime, msg: &Inbound<'_>, why: &str) -> ! {
    let name = rt.handlers.get(msg.handler).map_or("?", |e| e.name);
    panic!(
        "gex: AM {:?} {:?} from rank {} for handler {} ({name}) with {} args: {why}",
        msg.category,
        msg.network,
        msg.src,
        msg.handler,
        msg.args.len()
    )
}

/// The payload of a message being injected.
#[derive(Clone, Copy)]
enum Payload<'a> {
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
    fn parts(self) -> (u8, &'a [u8], usize) {
        match self {
            Payload::None => (0, &[], 0),
            Payload::Medium(p) => (1, p, 0),
            Payload::Long(p, addr) => (2, p, addr),
        }
    }

    /// The payload of [`Payload::parts`].
    #[inline(always)]
    fn from_parts(kind: u8, data: &'a [u8], dest_addr: usize) -> Payload<'a> {
        match kind {
            0 => Payload::None,
            1 => Payload::Medium(data),
            _ => Payload::Long(data, dest_addr),
        }
    }
}

#[track_caller]
fn check_lc(call: &str, lc: &Lc<'_>, group_allowed: bool) {
    match lc {
        Lc::Defer => panic!("gex::{call}: Lc::Defer is not allowed for Active Messages"),
        Lc::Group if !group_allowed => panic!("gex::{call}: Lc::Group is not allowed for Replies"),
        _ => {}
    }
}

/// Checks an AM's destination, argument count and handler index. Inline: three
/// compares on every message; the panics are out of line.
#[inline(always)]
#[track_caller]
fn check_args(rt: &Runtime, call: &str, dest: Rank, handler: AmIndex, args: &[u32]) {
    if dest >= rt.conduit.size() || args.len() > max_args() || handler == 0 {
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
    unreachable!("gex::{call}: the arguments were found bad but are not")
}

#[track_caller]
fn check_long(rt: &Runtime, call: &str, dest: Rank, payload: &[u8], dest_addr: usize) {
    if let Err(e) = rt.conduit.translate(dest, dest_addr, payload.len()) {
        crate::rma::address_error(call, dest, dest_addr, payload.len(), e);
    }
}

/// Claims a slot on `network` of `dest`, polling while the queue is full, or `NoOp`
/// with [`Flags::IMMEDIATE`].
#[inline]
fn reserve(
    rt: &Runtime,
    dest: Rank,
    network: Network,
    flags: Flags,
) -> Result<<Active as Conduit>::Outbound, NoOp> {
    if let Some(out) = rt.conduit.am_reserve(dest, network) {
        return Ok(out);
    }
    if flags.contains(Flags::IMMEDIATE) {
        return Err(NoOp);
    }
    let mut backoff = progress::Backoff::new();
    loop {
        // A Reply (sent from a Request handler) may only wait for Replies to drain;
        // anything else may run every kind of handler while it waits.
        let n = if network == Network::Reply && progress::in_handler() {
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
fn send(
    rt: &Runtime,
    call: &str,
    dest: Rank,
    network: Network,
    handler: AmIndex,
    args: &[u32],
    payload: Payload<'_>,
    flags: Flags,
) -> Result<(), NoOp> {
    #[cfg(feature = "gasp")]
    if gasp::enabled() && rt.handlers.reported(handler) {
        let (kind, data, dest_addr) = payload.parts();
        return send_reported(
            rt, call, dest, network, handler, args, kind, data, dest_addr, flags,
        );
    }
    send_as::<false>(rt, call, dest, network, handler, args, payload, flags)
}

/// [`send`] of a reported message while a tool is attached, out of line: the common
/// path makes one flag test and holds no instrumentation. The arguments stay separate
/// scalars: a struct of them was built on the common path too (≈45 more instructions
/// a message), and the payload passed as its enum kept the
/// common path's payload in memory, its kind a load and a match rather than a constant
/// (≈10 more; see [`Payload::parts`]).
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
    check_args(rt, call, dest, handler, args);
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
    let span = REPORT.then(|| {
        let tag = match network {
            Network::Request => gasp::events::GASP_GEX_AM_REQUEST,
            Network::Reply => gasp::events::GASP_GEX_AM_REPLY,
        };
        gasp::Span::open(tag, site, &am_args(dest, handler, category, nbytes))
    });
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
        Payload::Long(p, addr) => {
            let c = rt
                .conduit
                .long_payload(dest, addr, p)
                .expect("the destination was checked before the slot was claimed");
            crate::event::complete_blocking(rt, c);
        }
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
        span.end(&am_args(dest, handler, category, nbytes));
    }
    Ok(())
}

impl Team {
    #[inline]
    #[track_caller]
    fn am_runtime(&self, call: &str) -> &'static Runtime {
        let rt = runtime(call);
        progress::check_may_communicate(call);
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
        )?;
        lc.complete_now();
        Ok(())
    }

    /// GASNet-EX `gex_AM_RequestLong`: writes `payload` to `dest_addr` in `rank`'s
    /// segment, then runs `handler(token, payload_at_dest, args)` there.
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
        )?;
        lc.complete_now();
        Ok(())
    }

    /// GASNet-EX `gex_AM_MaxRequestMedium` (`other_rank` None: over all team members).
    pub fn max_request_medium(
        &self,
        _other_rank: Option<Rank>,
        _lc: LcKind,
        _flags: Flags,
        _nargs: usize,
    ) -> usize {
        runtime("Team::max_request_medium").conduit.am_max_medium()
    }

    /// GASNet-EX `gex_AM_MaxReplyMedium`.
    pub fn max_reply_medium(
        &self,
        _other_rank: Option<Rank>,
        _lc: LcKind,
        _flags: Flags,
        _nargs: usize,
    ) -> usize {
        runtime("Team::max_reply_medium").conduit.am_max_medium()
    }

    /// GASNet-EX `gex_AM_MaxRequestLong`.
    pub fn max_request_long(
        &self,
        _other_rank: Option<Rank>,
        _lc: LcKind,
        _flags: Flags,
        _nargs: usize,
    ) -> usize {
        runtime("Team::max_request_long").conduit.am_max_long()
    }

    /// GASNet-EX `gex_AM_MaxReplyLong`.
    pub fn max_reply_long(
        &self,
        _other_rank: Option<Rank>,
        _lc: LcKind,
        _flags: Flags,
        _nargs: usize,
    ) -> usize {
        runtime("Team::max_reply_long").conduit.am_max_long()
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
