//! Batches: the RPCs and replies a thread sends to one rank, gathered into one Active
//! Message.
//!
//! An AM costs its sender and its target far more than a small RPC's own work (the
//! slot, the queue's synchronization, the dispatch), so each thread gathers its
//! messages to another rank in a *batch* and sends the batch as one Medium AM when it
//! is full, or when the thread next makes progress (internal or user-level, including
//! every wait), or when it exits. A message in a batch is an operation that still
//! needs its initiator's internal progress to reach its target: `progress_required()`
//! is true meanwhile, and `discharge()` sends it (UPC++ spec §10.3 ¶1–¶7: "a
//! well-behaved UPC++ application is encouraged to call discharge before any long
//! lapse of attentiveness to progress"). The first message after a progress goes out
//! at once, alone ([`batching`]), so a lone call pays nothing for the batches.
//!
//! A batch is a run of *records* in the receive queue's page format (`inbox`: a
//! 48-byte header, then the payload, padded to 16 bytes), so the target's handler
//! checks the headers and copies a batch of RPCs into the master persona's queue with
//! one copy, and delivers replies one by one as their own handler would.
//!
//! Order: the messages a thread sends to a rank travel in one batch, in order, and a
//! message too large for a batch first sends the batch before it, so RPCs from one
//! thread run in the order they were sent, as without batches.
//!
//! Attentiveness: a thread that sends many RPCs before its next progress (thousands of
//! calls, then one `when_all`) sends a batch every few dozen calls (one that filled),
//! or more often when it sends to more ranks than it keeps batches for (one taken
//! over), and polls the network after every [`SENT_PER_POLL`]th batch its calls send
//! ([`flush_from_call`]), taking in what other ranks send it meanwhile: otherwise a
//! rank whose queue to it filled would wait for room until this thread's flood ended.
//! With batches off (`UPCXX_RPC_BATCH_BYTES=0`) every call is its own AM and polls
//! only when its send waits for room.
//!
//! Bounds: a thread keeps at most [`OPEN`] batches, of at most the network's largest
//! Medium payload each (`UPCXX_RPC_BATCH_BYTES` lowers it; 0 sends every message as an
//! AM of its own, serialized in place as `wire::send` does). A message to an eighth
//! other rank sends the fullest batch first. So the memory stays a few pages per
//! sending thread whatever the job's size.
//!
//! Sits on `inbox` (the record format) and `delivery` (where received messages go);
//! `wire` sends through it and registers its handler.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::delivery;
use super::inbox::{footprint, Head, HEAD, KIND_REPLY, KIND_REPLY_UNIT, KIND_RPC};
use crate::runtime::state::{try_rt, Rank, Setup};
use crate::serialization::{Error, Writer};

/// Batches a thread keeps open at once (to as many ranks).
const OPEN: usize = 8;

/// Arguments of a batch AM: none; the records say everything.
pub(super) const NARGS: usize = 0;

/// The batch handler's index.
static HANDLER: AtomicU8 = AtomicU8::new(0);
/// Bytes of records a batch holds at most; 0 when batching is off.
static CAP: AtomicUsize = AtomicUsize::new(0);

/// The smallest batch worth having: a batch smaller than a header and a short payload
/// would send most messages alone.
const MIN_CAP: usize = 256;

/// Sends one message, its header and payload, as the plain AM of `wire` (which sits
/// on this module, so it hands the function over at init).
pub(super) type SendOne = fn(&gex::Team, Rank, &Head, &[u8]);
static SEND_ONE: OnceLock<SendOne> = OnceLock::new();

/// Records the batch handler's index and how to send a lone message, and sizes batches
/// from the network's largest Medium payload `max_medium` and `UPCXX_RPC_BATCH_BYTES`
/// (called by `init`).
pub(super) fn configure(handler: u8, send_one: SendOne, max_medium: usize) {
    HANDLER.store(handler, Ordering::Relaxed);
    let _ = SEND_ONE.set(send_one);
    let cap = cap_from(
        std::env::var("UPCXX_RPC_BATCH_BYTES").ok().as_deref(),
        max_medium,
    );
    CAP.store(cap, Ordering::Relaxed);
}

/// The batch size that `UPCXX_RPC_BATCH_BYTES` (`setting`) asks for, with `max_medium` the
/// network's largest Medium payload: a whole number of 16-byte units, at most
/// `max_medium`, at least [`MIN_CAP`], or 0 (batching off) if asked for 0.
fn cap_from(setting: Option<&str>, max_medium: usize) -> usize {
    let max = max_medium / 16 * 16;
    let asked = match setting.map(str::trim) {
        None | Some("") => max,
        Some(s) => s.parse::<usize>().unwrap_or_else(|_| {
            panic!("upcxx::init: UPCXX_RPC_BATCH_BYTES={s:?} is not a number of bytes")
        }),
    };
    if asked == 0 || max < MIN_CAP {
        return 0;
    }
    (asked / 16 * 16).clamp(MIN_CAP, max)
}

/// True if messages travel in batches (see [`configure`]).
#[inline(always)]
fn enabled() -> bool {
    CAP.load(Ordering::Relaxed) != 0
}

// ---------------------------------------------------------------------------------------
// Sending

/// A batch being filled.
struct Batch {
    /// The rank it goes to; [`NOBODY`] while unassigned.
    dest: Rank,
    /// Bytes of whole records in `buf`.
    len: usize,
    /// Records in `buf`.
    count: u32,
    /// Every record is an RPC (the target can queue the batch in one copy).
    rpcs_only: bool,
    /// `CAP` bytes once assigned.
    buf: Vec<u8>,
}

const NOBODY: Rank = Rank::MAX;

impl Batch {
    const fn new() -> Batch {
        Batch {
            dest: NOBODY,
            len: 0,
            count: 0,
            rpcs_only: true,
            buf: Vec::new(),
        }
    }
}

/// A thread's batches.
struct Outbox {
    batches: [Batch; OPEN],
    /// The batch the last message went to (checked first).
    last: usize,
    /// Where a message that outgrows its batch's room continues (kept for reuse).
    spill: Vec<u8>,
}

impl Drop for Outbox {
    /// A thread that exits sends what it batched, if the runtime still runs.
    fn drop(&mut self) {
        if let Some(rt) = try_rt() {
            if !gex::layered::in_handler() {
                for b in &mut self.batches {
                    flush(rt, b);
                }
            }
        }
    }
}

thread_local! {
    static OUTBOX: RefCell<Outbox> = const {
        RefCell::new(Outbox {
            batches: [const { Batch::new() }; OPEN],
            last: 0,
            spill: Vec::new(),
        })
    };
    /// Where this thread stands since its last progress: [`IDLE`], [`SENT_ALONE`] or
    /// [`UNSENT`].
    static STATE: Cell<u8> = const { Cell::new(IDLE) };
    /// Batches this thread's calls sent since the last poll of [`flush_from_call`].
    static SENT_BY_CALLS: Cell<u8> = const { Cell::new(0) };
}

/// Batches a thread's calls send between two polls of [`flush_from_call`].
const SENT_PER_POLL: u8 = 8;

/// [`STATE`]: the thread sent nothing since its last progress; its next message goes
/// out at once, alone.
const IDLE: u8 = 0;
/// [`STATE`]: the thread sent a message alone since its last progress, and its batches
/// are empty.
const SENT_ALONE: u8 = 1;
/// [`STATE`]: some batch of this thread holds records.
const UNSENT: u8 = 2;

/// Whether a message to another rank goes into a batch ([`push`]) rather than out at
/// once as its own AM. The first message a thread sends after its progress goes out
/// at once: a lone call (a round trip, an `rpc_ff` followed by a wait) then costs what
/// it costs without batches, the work of a batch and its flush saved. Those that
/// follow it before the next progress gather in batches. As every batch is empty when
/// a message goes alone, none overtakes one sent before it.
#[inline(always)]
pub(super) fn batching() -> bool {
    if !enabled() {
        return false;
    }
    let s = STATE.get();
    if s == IDLE {
        STATE.set(SENT_ALONE);
    }
    s != IDLE
}

/// True while this thread has batched messages it has not sent.
#[inline(always)]
pub(crate) fn unsent() -> bool {
    STATE.get() == UNSENT
}

/// Sends this thread's batches, if it has any records (progress of any level); its
/// next message goes out at once.
#[inline(always)]
pub(crate) fn send_unsent() {
    match STATE.get() {
        IDLE => {}
        SENT_ALONE => STATE.set(IDLE),
        _ => send_all(),
    }
}

#[cold]
#[inline(never)]
fn send_all() {
    // Serialization may not make progress (§6.1 ¶5); fail as the poll would.
    gex::layered::check_may_communicate("progress (sending batched RPCs)");
    let Some(rt) = try_rt() else { return };
    STATE.set(IDLE);
    OUTBOX.with(|o| {
        for b in &mut o.borrow_mut().batches {
            flush(rt, b);
        }
    });
}

/// Sends the records of `b`, if any, as one AM, copied into the network's slot: a
/// batch of one record as the plain message it holds (`send_one`: the target's
/// handler then has no batch to walk, which keeps a lone round trip as fast as
/// without batches).
#[inline(always)]
fn flush(rt: &Setup, b: &mut Batch) {
    if b.len != 0 {
        flush_now(rt, b);
    }
}

#[inline(never)]
fn flush_now(rt: &Setup, b: &mut Batch) {
    let records = &b.buf[..b.len];
    if b.count == 1 {
        let head: Head = bytemuck::pod_read_unaligned(&records[..HEAD]);
        let send_one = SEND_ONE.get().expect("configured at init");
        send_one(
            &rt.team,
            b.dest,
            &head,
            &records[HEAD..HEAD + head.len as usize],
        );
    } else {
        rt.team
            .request_medium_in_place(
                b.dest,
                HANDLER.load(Ordering::Relaxed),
                &[],
                gex::Flags::NONE,
                |slot| {
                    slot[..records.len()].copy_from_slice(records);
                    Some(records.len())
                },
            )
            .expect("a blocking Request always succeeds");
    }
    b.len = 0;
    b.count = 0;
    b.rpcs_only = true;
}

/// Sends `b` from a call (the batch filled, or a message to another rank takes it
/// over), and after every [`SENT_PER_POLL`]th batch so sent polls the network once:
/// internal progress, which an RPC's initiation may make (UPC++ spec §9.3, "progress
/// level: internal"). So a thread that floods other ranks with RPCs still takes in what
/// they send it. A rank whose queue to this one is full waits for room, polling, and
/// takes in this thread's batches, so this thread's sends never wait (the waits poll)
/// and, without this poll, that rank would wait until the flood ended.
#[inline(never)]
fn flush_from_call(rt: &Setup, b: &mut Batch) {
    if b.len == 0 {
        return;
    }
    flush_now(rt, b);
    let sent = SENT_BY_CALLS.get() + 1;
    if sent < SENT_PER_POLL {
        SENT_BY_CALLS.set(sent);
    } else {
        // The send above already failed in a context that may not communicate (an AM
        // handler, a handler-safe lock), so the poll may run here.
        SENT_BY_CALLS.set(0);
        gex::layered::poll_unreported();
    }
}

/// Adds a message to `dest` (not this rank) to this thread's batch for `dest`: `head`
/// is its header (its `len` is set here), `encode` writes its payload. A message larger
/// than a batch goes by `alone`, after the batch before it. Returns the payload's
/// length; if `encode` fails, nothing is added. `encode` runs inside `scope`'s guard
/// (the rule that serialization may not communicate).
#[inline(always)]
pub(super) fn push<G>(
    rt: &Setup,
    dest: Rank,
    head: Head,
    scope: impl FnOnce() -> G,
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    alone: impl FnOnce(&[u8]),
) -> Result<usize, Error> {
    OUTBOX.with(|o| {
        let o = &mut *o.borrow_mut();
        let i = batch_for(rt, o, dest);
        let b = &mut o.batches[i];
        let start = b.len + HEAD;
        let (len, spilled) = {
            let _scope = scope();
            let mut w = Writer::new(&mut b.buf[start..], Some(&mut o.spill));
            encode(&mut w)?;
            (w.pos(), w.spilled())
        };
        if spilled {
            spill(rt, b, head, &o.spill[..len], alone);
        } else {
            put_head(b, head, len);
        }
        STATE.set(UNSENT);
        Ok(len)
    })
}

/// Writes the header of the record that starts at `b.len`, with `len` payload bytes
/// already written after it, and counts the record.
#[inline(always)]
fn put_head(b: &mut Batch, mut head: Head, len: usize) {
    head.len = len as u32;
    b.rpcs_only &= head.kind == KIND_RPC;
    b.buf[b.len..b.len + HEAD].copy_from_slice(bytemuck::bytes_of(&head));
    b.len += footprint(len);
    b.count += 1;
}

/// A message (`msg`, its whole payload) that did not fit the room left in `b`: `b`
/// is sent, and the message starts the next batch if it fits one, or goes by `alone`.
#[cold]
#[inline(never)]
fn spill(rt: &Setup, b: &mut Batch, head: Head, msg: &[u8], alone: impl FnOnce(&[u8])) {
    flush_from_call(rt, b);
    if HEAD + msg.len() <= b.buf.len() {
        b.buf[HEAD..HEAD + msg.len()].copy_from_slice(msg);
        put_head(b, head, msg.len());
    } else {
        alone(msg);
    }
}

/// The index of the batch for `dest`, assigning one if there is none: a free one, or
/// the fullest, which is sent first. The batch returned has room for a header and 16
/// payload bytes.
#[inline(always)]
fn batch_for(rt: &Setup, o: &mut Outbox, dest: Rank) -> usize {
    let cap = CAP.load(Ordering::Relaxed);
    let i = o.last;
    let b = &o.batches[i];
    if b.dest == dest && b.len + HEAD + 16 <= cap {
        return i;
    }
    find_batch(rt, o, dest, cap)
}

#[cold]
#[inline(never)]
fn find_batch(rt: &Setup, o: &mut Outbox, dest: Rank, cap: usize) -> usize {
    let i = o
        .batches
        .iter()
        .position(|b| b.dest == dest)
        .or_else(|| o.batches.iter().position(|b| b.dest == NOBODY))
        .unwrap_or_else(|| {
            (0..OPEN)
                .max_by_key(|&i| o.batches[i].len)
                .expect("OPEN > 0")
        });
    let b = &mut o.batches[i];
    if b.dest != dest {
        flush_from_call(rt, b);
        b.dest = dest;
    }
    if b.buf.len() != cap {
        b.buf = vec![0; cap];
    }
    if b.len + HEAD + 16 > cap {
        flush_from_call(rt, b);
    }
    o.last = i;
    i
}

// ---------------------------------------------------------------------------------------
// Receiving

/// The AM handler of a batch (restricted context): queues its RPCs for the master
/// persona and delivers its replies, in order.
pub(super) fn handler(token: &gex::Token<'_>, payload: &[u8], _args: &[u32]) {
    let src = token.src_rank();
    if all_rpcs(payload, src) {
        delivery::queue_rpc_records(payload);
        return;
    }
    for (head, body) in records(payload, src) {
        match head.kind {
            KIND_RPC => delivery::queue_rpc(&head, body),
            KIND_REPLY | KIND_REPLY_UNIT => delivery::deliver_reply(&head, body),
            kind => panic!("upcxx: an RPC message of unknown kind {kind} arrived from rank {src}"),
        }
    }
}

/// True if `batch` is a run of whole records from rank `src`, all of them RPCs (the
/// batch can be queued as it is). Stops at the first record that is not an RPC: the
/// caller then walks the batch record by record, and [`records`] checks the rest as
/// it goes, so a batch of replies (thousands of round trips in flight) is walked once.
///
/// # Panics
/// If a record it reads runs past the batch, or names another sender.
fn all_rpcs(batch: &[u8], src: Rank) -> bool {
    records(batch, src).all(|(head, _)| head.kind == KIND_RPC)
}

/// The records of `batch`, from rank `src`, each checked before it is yielded.
///
/// # Panics
/// If a record's length runs past the batch, or names another sender.
fn records(batch: &[u8], src: Rank) -> impl Iterator<Item = (Head, &[u8])> {
    let mut rest = batch;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let head: Head = match rest.get(..HEAD) {
            Some(bytes) => bytemuck::pod_read_unaligned(bytes),
            None => corrupt(src, "a header cut short"),
        };
        let len = head.len as usize;
        let (Some(body), Some(next)) = (rest.get(HEAD..HEAD + len), rest.get(footprint(len)..))
        else {
            corrupt(src, "a record longer than the batch")
        };
        if head.src != src {
            corrupt(src, "a record from another rank");
        }
        rest = next;
        Some((head, body))
    })
}

#[cold]
fn corrupt(src: Rank, why: &str) -> ! {
    panic!("upcxx::rpc: a corrupt batch of messages from rank {src}: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_size_follows_the_setting_within_bounds() {
        assert_eq!(cap_from(None, 3968), 3968);
        assert_eq!(cap_from(Some(""), 3970), 3968);
        assert_eq!(cap_from(Some("0"), 3968), 0);
        assert_eq!(cap_from(Some("1000"), 3968), 992);
        assert_eq!(cap_from(Some("10"), 3968), MIN_CAP);
        assert_eq!(cap_from(Some("1000000"), 3968), 3968);
        assert_eq!(cap_from(None, 100), 0);
    }

    #[test]
    #[should_panic(expected = "UPCXX_RPC_BATCH_BYTES=\"lots\" is not a number")]
    fn a_bad_setting_is_named() {
        cap_from(Some("lots"), 3968);
    }

    fn record(src: Rank, kind: u32, payload: &[u8]) -> Vec<u8> {
        let head = Head::new(src, kind, 0, [1, 2], [3, 4, 5, 6], payload.len() as u32);
        let mut r = bytemuck::bytes_of(&head).to_vec();
        r.extend_from_slice(payload);
        r.resize(footprint(payload.len()), 0);
        r
    }

    #[test]
    fn records_come_back_in_order_with_their_payloads() {
        let mut batch = record(3, KIND_RPC, b"abc");
        batch.extend(record(3, KIND_REPLY, &[7; 40]));
        batch.extend(record(3, KIND_RPC, b""));
        let got: Vec<(u32, Vec<u8>)> = records(&batch, 3)
            .map(|(h, b)| (h.kind, b.to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                (KIND_RPC, b"abc".to_vec()),
                (KIND_REPLY, vec![7; 40]),
                (KIND_RPC, vec![])
            ]
        );
        assert!(!all_rpcs(&batch, 3));
        let rpcs = [record(3, KIND_RPC, b"x"), record(3, KIND_RPC, &[1; 17])].concat();
        assert!(all_rpcs(&rpcs, 3));
    }

    #[test]
    #[should_panic(expected = "a record longer than the batch")]
    fn a_record_past_the_end_is_refused() {
        let mut batch = record(1, KIND_RPC, &[1; 20]);
        batch.truncate(HEAD + 10);
        all_rpcs(&batch, 1);
    }

    #[test]
    #[should_panic(expected = "a record longer than the batch")]
    fn a_record_past_the_end_after_a_reply_is_refused_by_the_walk() {
        // `all_rpcs` stops at the reply; the handler's walk of the records checks the
        // rest.
        let mut batch = record(1, KIND_REPLY, b"r");
        batch.extend(record(1, KIND_RPC, &[1; 20]));
        batch.truncate(batch.len() - 10);
        assert!(!all_rpcs(&batch, 1));
        records(&batch, 1).for_each(drop);
    }

    #[test]
    #[should_panic(expected = "a header cut short")]
    fn a_cut_header_is_refused() {
        let batch = record(1, KIND_RPC, b"");
        all_rpcs(&batch[..HEAD - 1], 1);
    }

    #[test]
    #[should_panic(expected = "a record from another rank")]
    fn a_record_naming_another_sender_is_refused() {
        all_rpcs(&record(2, KIND_RPC, b"ab"), 1);
    }
}
