//! Puts and gets sent as messages: to a segment this process does not map, where the
//! conduit says messages to the owner are faster than its own RMA
//! ([`Conduit::am_rma_max`]: the mpi conduit between hosts, up to `GEX_MPI_AM_RMA_MAX`
//! bytes; a blocking transfer up to [`Conduit::am_rma_blocking_max`], which may have
//! been measured, `probe.rs`). The owner copies between the message and its segment,
//! as GASNet-EX's AM-based conduits do for every transfer.
//!
//! * A put sends its bytes in Medium Requests to [`PUT_HANDLER`], each carrying the
//!   address of its piece and the name of its completion ([`OpName`]); the
//!   owner copies the piece into its segment and answers with a Short Reply to
//!   [`ACK_HANDLER`].
//! * A get sends a Short Request to [`GET_HANDLER`] per piece (address, length, where
//!   the piece goes); the owner answers with a Medium Reply to [`DATA_HANDLER`]
//!   carrying the bytes, which its handler stores.
//! * The small runs of one VIS operation to such a rank travel together ([`Runs`]):
//!   a Medium Request to [`PUT_RUNS_HANDLER`] holds each run's entry (address and
//!   length) followed by its bytes, answered as a put's piece; one to
//!   [`GET_RUNS_HANDLER`] holds the entries alone, and the owner answers with a Medium
//!   Reply to [`DATA_RUNS_HANDLER`] carrying the runs' bytes in order, which its handler
//!   scatters to the runs' destinations.
//!
//! The messages name the transfer's completion, an [`OpHandle`] awaiting one answer per
//! piece ([`OpName`]); the answer to the last piece completes it, as the conduit's own
//! completion would be. The handle of an NB or NBI transfer outlives the call, so it
//! is on the heap, and the messages hold a reference to it that the last answer
//! releases; a blocking call waits on its thread's own handle (`am::blocking`), which
//! saves an allocation and its free on every blocking put and get. The initiator
//! checked the range against the owner's segment before any message left; the owner
//! checks it again against its own. The owner's handlers need its attentiveness, as
//! every AM does: a transfer completes once the owner polls, and one of more pieces
//! than the flow control lets be in flight to the owner waits inside the call until
//! the owner has polled (its credits).

use std::sync::Arc;

use crate::am::{
    join_u64, split_u64, AmCategory, AmEntry, AmIndex, AmRole, OpName, Sending, Token,
};
use crate::conduit::{AddressError, Completion, Conduit, OpHandle, Rank};
use crate::runtime::Runtime;
use crate::{Flags, Lc};

/// The library's handler index of a put's piece (run by the owner).
pub(crate) const PUT_HANDLER: AmIndex = 13;
/// Its Reply (run by the initiator).
pub(crate) const ACK_HANDLER: AmIndex = 14;
/// The library's handler index of a get's piece (run by the owner).
pub(crate) const GET_HANDLER: AmIndex = 15;
/// Its Reply, carrying the bytes (run by the initiator).
pub(crate) const DATA_HANDLER: AmIndex = 16;
/// The library's handler index of a message of put runs (run by the owner; answered
/// to [`ACK_HANDLER`]).
pub(crate) const PUT_RUNS_HANDLER: AmIndex = 17;
/// The library's handler index of a message of get runs (run by the owner).
pub(crate) const GET_RUNS_HANDLER: AmIndex = 18;
/// Its Reply, carrying the runs' bytes (run by the initiator).
pub(crate) const DATA_RUNS_HANDLER: AmIndex = 19;

/// Bytes of a run's entry in a message of runs: its address (8) and length (4), read
/// byte by byte (a put's entries fall wherever the previous run's bytes end).
const ENTRY: usize = 12;

/// What the initiator keeps of a message of get runs until its answer: each run's
/// destination and length, in the message's order, and the message's completion.
struct GetRuns {
    runs: Vec<(*mut u8, usize)>,
    done: Arc<OpHandle>,
}

/// The entries of the four handlers (registered by client initialization). Unreported:
/// a transfer is reported as itself, not as its messages.
pub(crate) fn handler_entries() -> [AmEntry; 7] {
    [
        AmEntry::payload("gex put", AmCategory::Medium, AmRole::Request, 4, on_put)
            .unreported()
            .at(PUT_HANDLER),
        AmEntry::short("gex put reply", AmRole::Reply, 2, on_ack)
            .unreported()
            .at(ACK_HANDLER),
        AmEntry::short("gex get", AmRole::Request, 7, on_get)
            .unreported()
            .at(GET_HANDLER),
        AmEntry::payload(
            "gex get reply",
            AmCategory::Medium,
            AmRole::Reply,
            4,
            on_data,
        )
        .unreported()
        .at(DATA_HANDLER),
        AmEntry::payload(
            "gex put runs",
            AmCategory::Medium,
            AmRole::Request,
            3,
            on_put_runs,
        )
        .unreported()
        .at(PUT_RUNS_HANDLER),
        AmEntry::payload(
            "gex get runs",
            AmCategory::Medium,
            AmRole::Request,
            3,
            on_get_runs,
        )
        .unreported()
        .at(GET_RUNS_HANDLER),
        AmEntry::payload(
            "gex get runs reply",
            AmCategory::Medium,
            AmRole::Reply,
            2,
            on_data_runs,
        )
        .unreported()
        .at(DATA_RUNS_HANDLER),
    ]
}

/// Puts `src` at `addr` in job rank `rank`'s segment: by messages to the owner where
/// the conduit asks for them ([`by_messages`]), else through the conduit. `src` has
/// been read when this returns; a `blocking` put has completed too.
#[inline]
pub(crate) fn put(
    rt: &Runtime,
    call: &str,
    rank: Rank,
    addr: usize,
    src: &[u8],
    blocking: bool,
) -> Result<Completion, AddressError> {
    if by_messages(rt, rank, addr, src.len(), blocking) {
        return Ok(put_by_messages(rt, call, rank, addr, src, blocking));
    }
    rt.conduit.put(rank, addr, src, blocking)
}

/// [`put`] of a non-blocking call whose caller keeps `src` until the put completes: the
/// conduit may read it until then.
///
/// # Safety
/// `src` must stay valid and unchanged until the returned completion says the put is
/// complete.
#[inline]
pub(crate) unsafe fn put_held(
    rt: &Runtime,
    call: &str,
    rank: Rank,
    addr: usize,
    src: &[u8],
) -> Result<Completion, AddressError> {
    if by_messages(rt, rank, addr, src.len(), false) {
        return Ok(put_by_messages(rt, call, rank, addr, src, false));
    }
    // SAFETY: the caller's contract.
    unsafe { rt.conduit.put_held(rank, addr, src) }
}

/// Gets `len` bytes at `addr` in job rank `rank`'s segment into `dst` (the path chosen,
/// and a `blocking` call completed, as for [`put`]).
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes, and not otherwise accessed, until the
/// completion.
#[inline]
pub(crate) unsafe fn get(
    rt: &Runtime,
    call: &str,
    dst: *mut u8,
    rank: Rank,
    addr: usize,
    len: usize,
    blocking: bool,
) -> Result<Completion, AddressError> {
    if by_messages(rt, rank, addr, len, blocking) {
        // SAFETY: the caller's contract.
        return Ok(unsafe { get_by_messages(rt, call, dst, (rank, addr, len), blocking) });
    }
    // SAFETY: the caller's contract.
    unsafe { rt.conduit.get(dst, rank, addr, len) }
}

/// Whether a transfer of `len` bytes at `addr` of `rank` goes by messages: small enough
/// for the conduit ([`Conduit::am_rma_max`], or [`Conduit::am_rma_blocking_max`] if
/// `blocking`), to a range of the segment that is not mapped here (an error is left to
/// the conduit's transfer to report).
#[inline]
fn by_messages(rt: &Runtime, rank: Rank, addr: usize, len: usize, blocking: bool) -> bool {
    let max = if blocking {
        rt.conduit.am_rma_blocking_max()
    } else {
        rt.conduit.am_rma_max()
    };
    len <= max
        && matches!(
            rt.conduit.translate(rank, addr, len),
            Err(AddressError::NotMapped)
        )
}

/// The bytes of one piece: what one Medium carries either way.
fn piece(rt: &Runtime) -> usize {
    rt.conduit.am_max_medium()
}

/// The pieces of a transfer of `len` bytes. Every piece is counted before the first
/// is sent: answers may arrive while the later ones wait for room.
fn pieces(rt: &Runtime, len: usize) -> usize {
    len.div_ceil(piece(rt))
}

/// Sends the messages of a transfer of `len` bytes with `send`: named by the thread's
/// own handle and waited for here when `blocking` (`am::blocking`), else by a counted
/// handle returned pending.
fn by_messages_with(
    rt: &Runtime,
    len: usize,
    blocking: bool,
    send: impl FnOnce(&Sending),
) -> Completion {
    if len == 0 {
        return Completion::Done;
    }
    if blocking {
        crate::am::blocking(rt, pieces(rt, len), send);
        return Completion::Done;
    }
    Completion::Pending(crate::am::outliving(rt, pieces(rt, len), send))
}

#[inline(never)]
pub(super) fn put_by_messages(
    rt: &Runtime,
    call: &str,
    rank: Rank,
    addr: usize,
    src: &[u8],
    blocking: bool,
) -> Completion {
    by_messages_with(rt, src.len(), blocking, |sending| {
        send_put(rt, call, rank, addr, src, sending);
    })
}

/// # Safety
/// As for [`get`].
#[inline(never)]
unsafe fn get_by_messages(
    rt: &Runtime,
    call: &str,
    dst: *mut u8,
    (rank, addr, len): (Rank, usize, usize),
    blocking: bool,
) -> Completion {
    by_messages_with(rt, len, blocking, |sending| {
        // SAFETY: the caller's contract, until the completion (waited for here when
        // `blocking`).
        unsafe { send_get(rt, call, dst, rank, addr, len, sending) };
    })
}

/// Sends the pieces of a put, counting each as sent.
fn send_put(rt: &Runtime, call: &str, rank: Rank, addr: usize, src: &[u8], sending: &Sending) {
    let [r0, r1] = sending.name();
    for (i, bytes) in src.chunks(piece(rt)).enumerate() {
        let [a0, a1] = split_u64((addr + i * piece(rt)) as u64);
        // The bytes are copied into the message before this returns: the source is
        // free again at once, as a put's local completion may say.
        crate::am::send_internal_medium(rt, call, rank, PUT_HANDLER, &[r0, r1, a0, a1], bytes);
        sending.one();
    }
}

/// Sends the pieces of a get, each carrying where its bytes go, counting each as sent.
///
/// # Safety
/// As for [`get`], until the completion that `sending` names.
unsafe fn send_get(
    rt: &Runtime,
    call: &str,
    dst: *mut u8,
    rank: Rank,
    addr: usize,
    len: usize,
    sending: &Sending,
) {
    let [r0, r1] = sending.name();
    let step = piece(rt);
    let mut at = 0;
    while at < len {
        let n = step.min(len - at);
        let [a0, a1] = split_u64((addr + at) as u64);
        let [d0, d1] = split_u64(dst as u64 + at as u64);
        let args = [r0, r1, a0, a1, n as u32, d0, d1];
        crate::am::send_internal(rt, call, rank, GET_HANDLER, &args, Flags::NONE)
            .expect("a send without Flags::IMMEDIATE waits for room");
        sending.one();
        at += n;
    }
}

/// The owner's local address of `[addr, addr + len)` in its own segment.
fn owned(token: &Token<'_>, addr: usize, len: usize) -> *mut u8 {
    let rt = token.runtime();
    match rt.conduit.translate(rt.conduit.rank(), addr, len) {
        Ok(local) => local as *mut u8,
        // The initiator checked the range against this segment: only a corrupt message
        // gets here.
        Err(e) => panic!(
            "gex: a transfer from rank {} names [{addr:#x}, {addr:#x}+{len}), not in this \
             rank's segment ({e:?})",
            token.src_rank()
        ),
    }
}

/// The owner's put handler: copies the piece into its segment, answers.
fn on_put(token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let local = owned(token, join_u64(args[2], args[3]) as usize, payload.len());
    // SAFETY: `local` holds `payload.len()` bytes of this rank's segment (checked),
    // mapped for the life of the job.
    unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), local, payload.len()) };
    token
        .reply_short(ACK_HANDLER, &args[..2], Flags::NONE)
        .expect("a Reply without IMMEDIATE waits for room");
}

fn on_ack(_token: &Token<'_>, args: &[u32]) {
    OpName::answered(args);
}

/// The owner's get handler: answers with the piece's bytes.
fn on_get(token: &Token<'_>, args: &[u32]) {
    let len = args[4] as usize;
    let local = owned(token, join_u64(args[2], args[3]) as usize, len);
    // SAFETY: as in `on_put`; the Reply copies the bytes before it returns.
    let bytes = unsafe { std::slice::from_raw_parts(local, len) };
    token
        .reply_medium(
            DATA_HANDLER,
            bytes,
            Lc::Now,
            Flags::NONE,
            &[args[0], args[1], args[5], args[6]],
        )
        .expect("a Reply without IMMEDIATE waits for room");
}

/// The initiator's handler of a get's piece: stores the bytes, then counts the piece.
fn on_data(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let dst = join_u64(args[2], args[3]) as usize as *mut u8;
    // SAFETY: an answer to a piece `send_get` sent for `dst`, which holds it and stays
    // valid until the completion (its contract), made by this piece at the earliest;
    // the owner sent exactly the piece's length.
    unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), dst, payload.len()) };
    OpName::answered(args);
}

/// The small runs of one VIS operation to one rank this process does not map, gathered
/// into messages of runs (see the module documentation). Each message is one pending
/// completion, returned by [`put`](Runs::put) or [`get`](Runs::get) when a run does
/// not fit the message being gathered, which is then sent, and by
/// [`flush`](Runs::flush) for the last one.
pub(crate) struct Runs {
    rt: &'static Runtime,
    call: &'static str,
    rank: Rank,
    /// The payload of the message being gathered: a put's entries each followed by its
    /// run's bytes, a get's entries alone.
    msg: Vec<u8>,
    /// Runs in `msg`.
    count: u32,
    /// Bytes of the runs in `msg` (for a get, of its Reply).
    bytes: usize,
    /// A get's destinations, in the entries' order.
    dsts: Vec<(*mut u8, usize)>,
}

impl Runs {
    pub(crate) fn new(rt: &'static Runtime, call: &'static str, rank: Rank) -> Runs {
        Runs {
            rt,
            call,
            rank,
            msg: Vec::new(),
            count: 0,
            bytes: 0,
            dsts: Vec::new(),
        }
    }

    /// Whether a run of `len` bytes goes into a message of runs: not empty, as small
    /// as the conduit sends by messages, and fitting one message with its entry
    /// (larger ones go in pieces of their own).
    #[inline]
    pub(crate) fn takes(rt: &Runtime, len: usize) -> bool {
        len > 0 && len <= rt.conduit.am_rma_max() && ENTRY + len <= piece(rt)
    }

    /// Adds the entry of a run of `len` bytes at `addr`, sending the message gathered
    /// first if the run does not fit it (a put's entry and bytes share the Request; a
    /// get's entry goes in the Request, its bytes in the Reply); the completion of the
    /// message sent, if one was.
    fn add(&mut self, addr: usize, len: usize, put: bool) -> Option<Completion> {
        let max = piece(self.rt);
        let fits = if put {
            self.msg.len() + ENTRY + len <= max
        } else {
            self.msg.len() + ENTRY <= max && self.bytes + len <= max
        };
        let sent = if fits { None } else { self.flush() };
        self.msg.extend_from_slice(&(addr as u64).to_le_bytes());
        self.msg.extend_from_slice(&(len as u32).to_le_bytes());
        self.count += 1;
        self.bytes += len;
        sent
    }

    /// Gathers the put of `src` to `addr` (a run [`takes`](Runs::takes)); the
    /// completion of the message sent to make room, if one was.
    pub(crate) fn put(&mut self, addr: usize, src: &[u8]) -> Option<Completion> {
        let sent = self.add(addr, src.len(), true);
        self.msg.extend_from_slice(src);
        sent
    }

    /// Gathers the get of `len` bytes at `addr` into `dst` (a run
    /// [`takes`](Runs::takes)); the completion of the message sent to make room, if one
    /// was.
    ///
    /// # Safety
    /// `dst` must be valid for `len` bytes of writes, and not otherwise accessed, until
    /// the completion of the message that carries the run.
    pub(crate) unsafe fn get(
        &mut self,
        dst: *mut u8,
        addr: usize,
        len: usize,
    ) -> Option<Completion> {
        let sent = self.add(addr, len, false);
        self.dsts.push((dst, len));
        sent
    }

    /// Sends the message being gathered, if it holds a run; its completion.
    pub(crate) fn flush(&mut self) -> Option<Completion> {
        if self.count == 0 {
            return None;
        }
        // A get's runs each have a destination; a put's none.
        let handler = if self.dsts.is_empty() {
            PUT_RUNS_HANDLER
        } else {
            GET_RUNS_HANDLER
        };
        let (done, [r0, r1]) = if self.dsts.is_empty() {
            let (op, name) = OpName::counted(1);
            (op, name.0)
        } else {
            // A message of get runs has one answer, which scatters its bytes to the
            // runs: a record of its own names the runs and the completion.
            let op = OpHandle::new();
            let record = Box::new(GetRuns {
                runs: std::mem::take(&mut self.dsts),
                done: op.clone(),
            });
            (op, split_u64(Box::into_raw(record) as usize as u64))
        };
        crate::am::send_internal_medium(
            self.rt,
            self.call,
            self.rank,
            handler,
            &[r0, r1, self.count],
            &self.msg,
        );
        self.msg.clear();
        self.count = 0;
        self.bytes = 0;
        Some(Completion::Pending(done))
    }
}

/// Calls `f` with each run's owner address, length and, for a put (`with_bytes`), its
/// bytes (else an empty slice), for the `count` runs of a message of runs; a message
/// that ends early is corrupt.
fn each_run(
    token: &Token<'_>,
    payload: &[u8],
    count: u32,
    with_bytes: bool,
    mut f: impl FnMut(usize, usize, &[u8]),
) {
    let mut at = 0;
    for _ in 0..count {
        let run = payload.get(at..at + ENTRY).and_then(|e| {
            let addr = u64::from_le_bytes(e[..8].try_into().expect("8 bytes")) as usize;
            let len = u32::from_le_bytes(e[8..].try_into().expect("4 bytes")) as usize;
            let body = if with_bytes { len } else { 0 };
            let bytes = payload.get(at + ENTRY..at + ENTRY + body)?;
            Some((addr, len, bytes))
        });
        let Some((addr, len, bytes)) = run else {
            panic!(
                "gex: a message of {count} runs from rank {} ends early ({} bytes)",
                token.src_rank(),
                payload.len()
            );
        };
        f(addr, len, bytes);
        at += ENTRY + bytes.len();
    }
}

/// The owner's handler of put runs: copies each run's bytes into its segment, answers.
fn on_put_runs(token: &Token<'_>, payload: &[u8], args: &[u32]) {
    each_run(token, payload, args[2], true, |addr, len, bytes| {
        let local = owned(token, addr, len);
        // SAFETY: as in `on_put`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), local, len) };
    });
    token
        .reply_short(ACK_HANDLER, &args[..2], Flags::NONE)
        .expect("a Reply without IMMEDIATE waits for room");
}

/// The owner's handler of get runs: answers with the runs' bytes, in order.
fn on_get_runs(token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let mut bytes = Vec::new();
    each_run(token, payload, args[2], false, |addr, len, _| {
        let local = owned(token, addr, len);
        // SAFETY: as in `on_get`.
        bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(local, len) });
    });
    token
        .reply_medium(DATA_RUNS_HANDLER, &bytes, Lc::Now, Flags::NONE, &args[..2])
        .expect("a Reply without IMMEDIATE waits for room");
}

/// The initiator's handler of get runs' bytes: scatters them to the runs'
/// destinations, then completes the message and frees its record.
fn on_data_runs(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
    // SAFETY: the record `Runs::flush` leaked in this process, which travelled to the
    // owner and back unchanged; this is its one answer.
    let record = unsafe { Box::from_raw(join_u64(args[0], args[1]) as usize as *mut GetRuns) };
    let runs = &record.runs;
    let total: usize = runs.iter().map(|&(_, len)| len).sum();
    assert_eq!(
        payload.len(),
        total,
        "gex: get runs answered with the wrong bytes"
    );
    let mut at = 0;
    for &(dst, len) in runs {
        // SAFETY: the owner sent the runs' bytes in the order of the record's
        // destinations (checked to add up), each valid for its length until the
        // completion (`Runs::get`'s contract).
        unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr().add(at), dst, len) };
        at += len;
    }
    record.done.complete();
}
