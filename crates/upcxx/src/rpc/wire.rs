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
//! A message to this rank takes no AM: [`send`] hands it to `delivery`, which queues it
//! as the handler would have.
//!
//! The wire sits on `delivery`: its handlers hand each message to the queue or reply
//! path there.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};

use super::batch;
use super::delivery;
use super::inbox::{Head, Page, KIND_REPLY, KIND_REPLY_UNIT, KIND_RPC};
use crate::runtime::state::{Rank, Setup};
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
            "upcxx::rpc (batch)",
            gex::AmCategory::Medium,
            gex::AmRole::Request,
            batch::NARGS,
            batch::handler,
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
    batch::configure(table[2].index, send_one, gex::am::lub_request_medium());
    FRAGMENT_HANDLER.store(table[3].index, Ordering::Relaxed);
    MEDIUM_MAX.store(gex::am::lub_request_medium(), Ordering::Relaxed);
}

/// Sends one message (`kind`: its [`first_arg`]), serialized by `encode` straight into
/// the network's message slot: a negotiated-payload Medium AM
/// ([`gex::Team::request_medium_in_place`], GASNet-EX `gex_AM_PrepareRequestMedium`
/// then `CommitRequestMedium`), so the bytes are written once, where the target reads
/// them. A message that outgrows the slot continues in a vector (see `Writer`) and is
/// sent as fragments, the slot given back unsent, as it is when `encode` fails (nothing
/// is sent then). `empty`: the caller knows `encode` writes nothing (a Short AM is sent,
/// no slot is prepared). A message to this rank is queued without an AM (see
/// `send_to_self`). Returns the size of the serialized message.
///
/// Between Prepare and Commit the thread may not communicate; serialization may not
/// either (UPC++ spec §6.1 ¶5: no UPC++ call with a progress level other than none), so
/// `encode` runs there. A `Serialize` implementation that communicates anyway fails
/// with gex's panic naming the restriction.
#[inline(always)]
pub(super) fn send(
    rt: &Setup,
    dest: Rank,
    kind: u32,
    entry: [u32; 2],
    cookie: [u32; 4],
    empty: bool,
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
) -> Result<usize, Error> {
    if dest == rt.rank {
        return send_to_self(dest, kind, entry, cookie, empty, encode);
    }
    let team = &rt.team;
    let args = [
        kind, entry[0], entry[1], cookie[0], cookie[1], cookie[2], cookie[3],
    ];
    if batch::batching() {
        let (k, seq) = split_first_arg(kind);
        let head = Head::new(rt.rank, k, seq, entry, cookie, 0);
        return batch::push(
            rt,
            dest,
            head,
            || Encoding::enter("rpc"),
            encode,
            |msg| send_alone(team, dest, &args, msg),
        );
    }
    if empty {
        send_short(team, dest, &args);
        return Ok(0);
    }
    let handler = HANDLER.load(Ordering::Relaxed);
    // Allocated only if the message outgrows the slot.
    let mut spill = Vec::new();
    let mut encoded = Ok(());
    let mut len = 0;
    let sent = team
        .request_medium_in_place(dest, handler, &args, gex::Flags::NONE, |slot| {
            let mut w = Writer::new(slot, Some(&mut spill));
            encoded = encode(&mut w);
            len = w.pos();
            (encoded.is_ok() && !w.spilled()).then_some(len)
        })
        .expect("a blocking Request always succeeds");
    if !sent && encoded.is_ok() {
        let max = MEDIUM_MAX.load(Ordering::Relaxed);
        send_fragments(team, dest, &args, &spill[..len], max);
    }
    encoded.map(|()| len)
}

/// Sends a message to this rank without an AM: an RPC is serialized straight into the
/// master persona's queue, a reply delivered as its handler would deliver it (see
/// `delivery.rs`). What the target sees is what an AM would have brought: the same
/// header and payload, in the same queue, run by the same user-level progress.
#[cold]
#[inline(never)]
fn send_to_self(
    me: Rank,
    kind: u32,
    entry: [u32; 2],
    cookie: [u32; 4],
    empty: bool,
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
) -> Result<usize, Error> {
    let _encoding = Encoding::enter("Team::request_medium_in_place (an RPC to this rank)");
    let (kind, seq) = split_first_arg(kind);
    let head = Head::new(me, kind, seq, entry, cookie, 0);
    if empty {
        // Nothing to serialize (as `send_short`): the message is its header.
        match kind {
            KIND_RPC => delivery::queue_rpc(&head, &[]),
            _ => delivery::deliver_reply(&head, &[]),
        }
        return Ok(0);
    }
    match kind {
        KIND_RPC => delivery::queue_rpc_from_self(&head, encode),
        _ => delivery::deliver_reply_from_self(&head, encode),
    }
}

/// The serialization of a message to this rank, or into a batch. A serializer may not
/// communicate (UPC++ spec §6.1 ¶5): gex counts the thread as between an AM's Prepare
/// and its Commit meanwhile (as while serializing into a network slot), so progress or
/// a gex call from the serializer fails there, and an RPC fails here, naming the rule. `call` names the send in the
/// message of a send from where none may be made (an AM handler).
struct Encoding {
    _scope: gex::layered::PrepareScope,
}

thread_local! {
    /// This thread is serializing a message to this rank or into a batch.
    static ENCODING: Cell<bool> = const { Cell::new(false) };
}

impl Encoding {
    #[inline(always)]
    fn enter(call: &str) -> Encoding {
        if ENCODING.get() {
            serializer_communicates();
        }
        // Where the AM a message stands for could not be sent (in a handler, or
        // serializing another call's arguments into a network slot), it fails as that
        // send would.
        gex::layered::check_may_communicate(call);
        ENCODING.set(true);
        Encoding {
            _scope: gex::layered::PrepareScope::enter("rpc"),
        }
    }
}

impl Drop for Encoding {
    #[inline(always)]
    fn drop(&mut self) {
        ENCODING.set(false);
    }
}

#[cold]
#[track_caller]
fn serializer_communicates() -> ! {
    panic!(
        "upcxx::rpc: an RPC was sent while serializing another; serialization may not \
         communicate (UPC++ spec §6.1 ¶5)"
    )
}

/// Sends one message of a batch (`head` and its payload) as its own AM, as [`send`]
/// does without batches: a Short without payload, otherwise a Medium whose payload is
/// copied into the network's slot.
fn send_one(team: &gex::Team, dest: Rank, head: &Head, payload: &[u8]) {
    let args = [
        first_arg(head.kind, head.seq),
        head.func[0],
        head.func[1],
        head.cookie[0],
        head.cookie[1],
        head.cookie[2],
        head.cookie[3],
    ];
    if payload.is_empty() {
        return send_short(team, dest, &args);
    }
    let handler = HANDLER.load(Ordering::Relaxed);
    team.request_medium_in_place(dest, handler, &args, gex::Flags::NONE, |slot| {
        slot[..payload.len()].copy_from_slice(payload);
        Some(payload.len())
    })
    .expect("a blocking Request always succeeds");
}

/// Sends a message that bypasses the batches (too large for one) as one Medium AM, or
/// as fragments.
#[cold]
fn send_alone(team: &gex::Team, dest: Rank, args: &[u32; NARGS], msg: &[u8]) {
    let max = MEDIUM_MAX.load(Ordering::Relaxed);
    if msg.len() > max {
        return send_fragments(team, dest, args, msg, max);
    }
    let handler = HANDLER.load(Ordering::Relaxed);
    team.request_medium(dest, handler, msg, gex::Lc::Now, gex::Flags::NONE, args)
        .expect("a blocking Request always succeeds");
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
///
/// The fragments of one message come from one thread of one rank, which sends them in
/// order; the network delivers one sender's messages to a queue in order (the smp
/// queues are FIFO per producer, see `gex::conduit::smp::queue`), so each fragment
/// continues where the previous one ended. A fragment that does not (a gap, an overlap,
/// a different total, more bytes than announced) cannot come from a correct sender, and
/// [`Partial::add`] says what is wrong with it instead of writing out of bounds.
struct Partial {
    page: Page,
    total: u32,
    received: usize,
}

impl Partial {
    /// The message whose header (with `len` its total length) is `head`.
    fn new(head: &Head) -> Partial {
        Partial {
            page: Page::for_message(head),
            total: head.len,
            received: 0,
        }
    }

    /// Adds the fragment at `offset` of a message of `total` bytes. True when the
    /// message is complete.
    fn add(&mut self, total: u32, offset: usize, payload: &[u8]) -> Result<bool, String> {
        if total != self.total {
            return Err(format!(
                "a fragment of a {total}-byte message continues a {}-byte one",
                self.total
            ));
        }
        if offset != self.received {
            return Err(format!(
                "a fragment at offset {offset}, expected at {}",
                self.received
            ));
        }
        let left = self.total as usize - self.received;
        if payload.len() > left {
            return Err(format!(
                "a fragment of {} bytes at offset {offset}, past the end of a {total}-byte message",
                payload.len()
            ));
        }
        self.page.write_payload(offset, payload);
        self.received += payload.len();
        Ok(self.received == self.total as usize)
    }
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
    let p = partial.entry(key).or_insert_with(|| Partial::new(&head));
    let complete = p.add(total, offset, payload).unwrap_or_else(|why| {
        panic!(
            "upcxx::rpc: a corrupt fragment {id} from rank {}: {why}",
            head.src
        )
    });
    if complete {
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

#[cfg(test)]
mod tests {
    //! Property tests of fragment reassembly: the fragments of a message, in order,
    //! rebuild it exactly; mutated sequences (dropped, repeated, reordered, resized or
    //! re-totalled fragments) are rejected with a reason or, where the mutation leaves a
    //! valid sequence, rebuild what was sent; never an out-of-bounds write or a panic.
    //! Cases: `PROPTEST_CASES`.
    use super::*;
    use proptest::prelude::*;

    /// One fragment as it arrives: `[total, offset]` and its payload.
    type Fragment = (u32, usize, Vec<u8>);

    fn fragments(msg: &[u8], max: usize) -> Vec<Fragment> {
        msg.chunks(max)
            .enumerate()
            .map(|(i, c)| (msg.len() as u32, i * max, c.to_vec()))
            .collect()
    }

    /// Feeds `frags` to a fresh reassembly: the complete payload, or None.
    fn reassemble(frags: &[Fragment]) -> Result<Option<Vec<u8>>, String> {
        let Some((total, _, _)) = frags.first() else {
            return Ok(None);
        };
        let head = Head::new(1, KIND_RPC, 0, [0; 2], [0; 4], *total);
        let mut p = Partial::new(&head);
        for (i, (total, offset, payload)) in frags.iter().enumerate() {
            if p.add(*total, *offset, payload)? {
                let mut msgs = p.page.messages();
                let (h, bytes) = msgs.next().expect("one message");
                assert!(msgs.next().is_none());
                assert_eq!(h.len, p.total);
                // The rest of the sequence would start a new message.
                return Ok(Some(bytes.to_vec()).filter(|_| i + 1 == frags.len()));
            }
        }
        Ok(None)
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        Drop(usize),
        Repeat(usize),
        Swap(usize, usize),
        Offset(usize, usize),
        Total(usize, u32),
        Grow(usize, usize),
        Shrink(usize, usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            any::<usize>().prop_map(Mutation::Drop),
            any::<usize>().prop_map(Mutation::Repeat),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Offset(a, b)),
            (any::<usize>(), any::<u32>()).prop_map(|(a, b)| Mutation::Total(a, b)),
            (any::<usize>(), 1usize..64).prop_map(|(a, b)| Mutation::Grow(a, b)),
            (any::<usize>(), 1usize..64).prop_map(|(a, b)| Mutation::Shrink(a, b)),
        ]
    }

    fn apply(frags: &mut Vec<Fragment>, m: &Mutation) {
        let n = frags.len();
        match *m {
            Mutation::Drop(i) => {
                frags.remove(i % n);
            }
            Mutation::Repeat(i) => frags.insert(i % n, frags[i % n].clone()),
            Mutation::Swap(i, j) => frags.swap(i % n, j % n),
            Mutation::Offset(i, o) => frags[i % n].1 = o % (2 * frags[0].0 as usize + 2),
            Mutation::Total(i, t) => frags[i % n].0 = t % (2 * frags[0].0 + 2),
            Mutation::Grow(i, k) => {
                let f = &mut frags[i % n].2;
                f.resize(f.len() + k, 0xee);
            }
            Mutation::Shrink(i, k) => {
                let f = &mut frags[i % n].2;
                f.truncate(f.len().saturating_sub(k));
            }
        }
    }

    proptest! {
        #[test]
        fn fragments_rebuild_the_message(msg in prop::collection::vec(any::<u8>(), 1..3000),
                                         max in 1usize..700) {
            let frags = fragments(&msg, max);
            prop_assert_eq!(reassemble(&frags), Ok(Some(msg)));
        }

        #[test]
        fn mutated_fragments_are_rejected_or_rebuild(
            msg in prop::collection::vec(any::<u8>(), 1..2000),
            max in 1usize..500,
            muts in prop::collection::vec(mutation(), 1..4),
        ) {
            let mut frags = fragments(&msg, max);
            for m in &muts {
                if frags.is_empty() {
                    break;
                }
                apply(&mut frags, m);
            }
            match reassemble(&frags) {
                // Complete: every byte was received exactly once, in order, so the
                // fragments were a valid sequence of some message of this length.
                Ok(Some(bytes)) => {
                    let total = frags[0].0 as usize;
                    prop_assert_eq!(bytes.len(), total);
                    let rebuilt: Vec<u8> = frags.iter().flat_map(|f| f.2.iter().copied()).collect();
                    prop_assert_eq!(bytes, rebuilt);
                }
                Ok(None) => {}
                Err(why) => prop_assert!(why.starts_with("a fragment"), "{why}"),
            }
        }
    }

    #[test]
    fn each_inconsistency_is_named() {
        let frags = fragments(&[7; 10], 4);
        let mut gap = frags.clone();
        gap.remove(1);
        assert!(reassemble(&gap).unwrap_err().contains("expected at 4"));
        let mut total = frags.clone();
        total[1].0 = 11;
        assert!(reassemble(&total)
            .unwrap_err()
            .contains("11-byte message continues a 10-byte one"));
        let mut long = frags.clone();
        long[2].2.push(0);
        assert!(reassemble(&long).unwrap_err().contains("past the end"));
    }
}
