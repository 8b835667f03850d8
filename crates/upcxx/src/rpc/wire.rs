//! The wire: AM handlers with `NARGS` arguments, `[kind | seq, entry lo, entry hi, cookie
//! x4]`, the payload being the serialized arguments (or result): a Medium AM, or a Short
//! AM when there is no payload (no arguments, a `()` result). Seven arguments keep a
//! message's header in the first cache line of the network's message slot. Messages
//! too large for one Medium AM travel as fragments, Mediums with three more arguments
//! `[fragment id, total length, fragment offset]`, which the handler reassembles.
//!
//! The first argument's low [`KIND_BITS`] bits are the kind; the others carry the RPC's
//! sequence number on its sender when a GASP tool is attached there (0 otherwise): with
//! the sender's rank it makes the message id that pairs `GASP_UPCXX_RPC_SEND` with its
//! `GASP_UPCXX_RPC_EXECUTE` (see `rpc::msgid`). The id costs no word of the header.
//!
//! The wire sits on `delivery`: its handlers hand each message to the queue or reply
//! path there.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};

use super::delivery;
use super::inbox::{Head, Page, KIND_REPLY, KIND_REPLY_UNIT, KIND_RPC};
use crate::runtime::state::Rank;
use crate::serialization::{Error, Writer};

/// Bits of the first argument that hold the kind.
pub(super) const KIND_BITS: u32 = 4;
/// The largest sequence number the first argument carries.
pub(super) const SEQ_MAX: u32 = u32::MAX >> KIND_BITS;

/// The first argument of a message of `kind` with sequence number `seq` (≤ [`SEQ_MAX`]).
#[inline(always)]
pub(super) fn first_arg(kind: u32, seq: u32) -> u32 {
    kind | seq << KIND_BITS
}

/// The kind and the sequence number a [`first_arg`] carries.
#[inline(always)]
fn split_first_arg(arg: u32) -> (u32, u32) {
    (arg & ((1 << KIND_BITS) - 1), arg >> KIND_BITS)
}
const NARGS: usize = 7;
/// The arguments of a fragment: `NARGS` and the fragment's three.
const FRAGMENT_NARGS: usize = NARGS + 3;

static HANDLER: AtomicU8 = AtomicU8::new(0);
/// The handler of messages without payload, sent as Short AMs (cheaper than Mediums).
static SHORT_HANDLER: AtomicU8 = AtomicU8::new(0);
static FRAGMENT_HANDLER: AtomicU8 = AtomicU8::new(0);
static MEDIUM_MAX: AtomicUsize = AtomicUsize::new(0);
static NEXT_FRAGMENTED: AtomicU32 = AtomicU32::new(0);

/// Registers the AM handlers RPC uses (called by `init`, before the segment attach
/// barrier, so every rank has them before any rank can send).
pub(crate) fn register_handlers(endpoint: &gex::Endpoint) {
    let mut table = [
        gex::AmEntry::payload(
            "upcxx::rpc",
            gex::AmCategory::Medium,
            gex::AmRole::Request,
            NARGS,
            am_handler,
        )
        // RPCs are reported as GASP_UPCXX_RPC_* events, not as the AMs that carry them.
        .unreported(),
        gex::AmEntry::short(
            "upcxx::rpc (no payload)",
            gex::AmRole::Request,
            NARGS,
            am_handler_short,
        )
        .unreported(),
        gex::AmEntry::payload(
            "upcxx::rpc (fragment)",
            gex::AmCategory::Medium,
            gex::AmRole::Request,
            FRAGMENT_NARGS,
            fragment_handler,
        )
        .unreported(),
    ];
    endpoint
        .register_handlers(&mut table)
        .unwrap_or_else(|e| panic!("upcxx::init: registering the RPC handler: {e}"));
    HANDLER.store(table[0].index, Ordering::Relaxed);
    SHORT_HANDLER.store(table[1].index, Ordering::Relaxed);
    FRAGMENT_HANDLER.store(table[2].index, Ordering::Relaxed);
    MEDIUM_MAX.store(gex::am::lub_request_medium(), Ordering::Relaxed);
}

/// A thread's send buffers, reused from call to call.
#[derive(Default)]
struct SendBuffers {
    /// Where a message is serialized: as large as a Medium AM's payload.
    scratch: Vec<u8>,
    /// Where a message that outgrows `scratch` continues (see `Writer`).
    spill: Vec<u8>,
}

thread_local! {
    /// This thread's send buffers (a send that runs inside another, from a `Serialize`
    /// implementation, uses fresh ones).
    static BUFFERS: RefCell<SendBuffers> = RefCell::default();
}

/// Spill buffers larger than this are freed after use rather than kept.
const SPILL_KEEP: usize = 4 << 20;

/// Sends one message (`kind`: its [`first_arg`]): serializes it with `encode` into the
/// thread's scratch buffer, sent as one Medium AM, or, if it outgrows that, into the
/// spill buffer, sent as fragments. (Serializing into the network's own buffer with a
/// negotiated-payload AM would save the copy, but costs more than copying a small
/// message does.) Nothing is
/// sent if `encode` fails. `empty`: the caller knows `encode` writes nothing (a Short AM
/// is sent without touching the buffers). Returns the size of the serialized message.
pub(super) fn send(
    team: &gex::Team,
    dest: Rank,
    kind: u32,
    entry: [u32; 2],
    cookie: [u32; 4],
    empty: bool,
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
) -> Result<usize, Error> {
    let args = [
        kind, entry[0], entry[1], cookie[0], cookie[1], cookie[2], cookie[3],
    ];
    if empty {
        send_short(team, dest, &args);
        return Ok(0);
    }
    BUFFERS.with(|b| match b.try_borrow_mut() {
        Ok(mut bufs) => send_with(&mut bufs, team, dest, args, encode),
        Err(_) => send_with(&mut SendBuffers::default(), team, dest, args, encode),
    })
}

fn send_with(
    bufs: &mut SendBuffers,
    team: &gex::Team,
    dest: Rank,
    args: [u32; NARGS],
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
) -> Result<usize, Error> {
    let handler = HANDLER.load(Ordering::Relaxed);
    let max = MEDIUM_MAX.load(Ordering::Relaxed);
    if bufs.scratch.len() < max {
        bufs.scratch.resize(max, 0);
    }
    let SendBuffers { scratch, spill } = bufs;
    let mut w = Writer::new(&mut scratch[..max], Some(spill));
    let encoded = encode(&mut w);
    let (len, spilled) = (w.pos(), w.spilled());
    if encoded.is_ok() {
        if spilled {
            send_fragments(team, dest, &args, &spill[..len], max);
        } else if len == 0 {
            send_short(team, dest, &args);
        } else {
            team.request_medium(
                dest,
                handler,
                &scratch[..len],
                gex::Lc::Now,
                gex::Flags::NONE,
                &args,
            )
            .expect("a blocking Request always succeeds");
        }
    }
    if spilled {
        spill.clear();
        if spill.capacity() > SPILL_KEEP {
            *spill = Vec::new();
        }
    }
    encoded.map(|()| len)
}

/// Sends a message without payload.
fn send_short(team: &gex::Team, dest: Rank, args: &[u32; NARGS]) {
    let short = SHORT_HANDLER.load(Ordering::Relaxed);
    team.request_short(dest, short, args, gex::Flags::NONE)
        .expect("a blocking Request always succeeds");
}

/// Sends `msg` as fragments of at most `max` bytes, which the target reassembles.
#[cold]
fn send_fragments(team: &gex::Team, dest: Rank, args: &[u32; NARGS], msg: &[u8], max: usize) {
    let len = msg.len();
    let total = u32::try_from(len).unwrap_or_else(|_| {
        panic!("upcxx::rpc: a message of {len} bytes is larger than the 4 GiB limit")
    });
    let handler = FRAGMENT_HANDLER.load(Ordering::Relaxed);
    let mut fragment = [0; FRAGMENT_NARGS];
    fragment[..NARGS].copy_from_slice(args);
    fragment[NARGS] = NEXT_FRAGMENTED.fetch_add(1, Ordering::Relaxed);
    fragment[NARGS + 1] = total;
    for (i, piece) in msg.chunks(max).enumerate() {
        fragment[NARGS + 2] = (i * max) as u32;
        team.request_medium(
            dest,
            handler,
            piece,
            gex::Lc::Now,
            gex::Flags::NONE,
            &fragment,
        )
        .expect("a blocking Request always succeeds");
    }
}

/// A fragmented message being reassembled.
struct Partial {
    page: Page,
    left: usize,
}

static PARTIAL: LazyLock<Mutex<HashMap<(Rank, u32), Partial>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The header of a message with arguments `args` and `len` payload bytes.
fn head(token: &gex::Token<'_>, args: &[u32], len: usize) -> Head {
    let (kind, seq) = split_first_arg(args[0]);
    Head::new(
        token.src_rank(),
        kind,
        seq,
        [args[1], args[2]],
        [args[3], args[4], args[5], args[6]],
        len as u32,
    )
}

/// The AM handler (restricted context): queues an RPC for the master persona, or
/// delivers a reply (see `delivery.rs`). Never runs user code.
fn am_handler(token: &gex::Token<'_>, payload: &[u8], args: &[u32]) {
    let args: &[u32; NARGS] = args
        .try_into()
        .expect("the RPC handler is registered with NARGS arguments");
    let head = head(token, args, payload.len());
    match head.kind {
        KIND_RPC => delivery::queue_rpc(&head, payload),
        KIND_REPLY | KIND_REPLY_UNIT => delivery::deliver_reply(&head, payload),
        kind => unknown_kind(kind, head.src),
    }
}

/// The AM handler of messages without payload.
fn am_handler_short(token: &gex::Token<'_>, args: &[u32]) {
    am_handler(token, &[], args);
}

/// The AM handler of fragments: adds one to its message, and delivers the message
/// once complete.
fn fragment_handler(token: &gex::Token<'_>, payload: &[u8], args: &[u32]) {
    let args: &[u32; FRAGMENT_NARGS] = args
        .try_into()
        .expect("the fragment handler is registered with FRAGMENT_NARGS arguments");
    let (id, total, offset) = (args[NARGS], args[NARGS + 1], args[NARGS + 2] as usize);
    let mut head = head(token, args, payload.len());
    head.len = total;
    let key = (head.src, id);
    let mut partial = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = partial.entry(key).or_insert_with(|| Partial {
        page: Page::for_message(&head),
        left: total as usize,
    });
    p.page.write_payload(offset, payload);
    p.left -= payload.len();
    if p.left == 0 {
        let done = partial.remove(&key).expect("present");
        drop(partial);
        match head.kind {
            KIND_RPC => delivery::queue_rpc_page(done.page),
            KIND_REPLY | KIND_REPLY_UNIT => delivery::deliver_reply_page(&head, done.page),
            k => unknown_kind(k, head.src),
        }
    }
}

#[cold]
fn unknown_kind(kind: u32, src: Rank) -> ! {
    panic!("upcxx: an RPC message of unknown kind {kind} arrived from rank {src}")
}
