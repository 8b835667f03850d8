//! Where RPC messages wait, and where and when they run.
//!
//! **RPCs** run during user-level progress of the master persona (§9.3 ¶6). The AM
//! handler that receives one copies it into a queue for the master persona:
//!
//! * if the handler runs on the thread holding the master persona (the common case: one
//!   thread, or the master's thread polling), into that thread's own queue, without any
//!   synchronization; its next user-level progress runs it;
//! * otherwise into the shared inbox behind a lock, which the holder's user-level
//!   progress checks with one load.
//!
//! Why a copy, and not a run from the network's slot: the handler may not run the RPC
//! itself. An RPC runs in the user-level progress of the master persona (§9.3 ¶6), and
//! its body may do what any code there may: communicate (`rpc`, `rput`, ...), which
//! polls. An AM handler may do neither (GASNet-EX, "Calls from restricted context":
//! only a Reply from a Request handler; gex enforces it, `gex::context`, and a poll
//! inside a handler does nothing), and the payload it gets is the network's slot,
//! valid only until the handler returns. Even in the most favourable case (the handler
//! runs inside user-level progress on the thread holding the master persona, with no
//! older RPC queued and none running), running the body there would make every RPC
//! that communicates fail. So the handler copies, and the copy is kept cheap instead:
//! the common message fits in the page being filled and is appended by a short path
//! (`inbox::Queue::push`: the header as three aligned 16-byte moves, a payload of up
//! to 32 bytes by two fixed-width moves), and the run reads the header where it lies.
//!
//! The holder runs its own queue by swapping the page being filled with an empty page
//! it keeps for this, running the messages of the swapped-out page while handlers fill
//! the other: a drain moves no page and allocates nothing. Every [`POLL_EVERY`] RPCs
//! the drain polls the network, so a long drain keeps taking in what peers send.
//!
//! RPCs from one rank run in the order they were sent (the network layer delivers them
//! in order, and runs one handler of a queue at a time). To keep that across the two
//! queues, a handler uses the thread's own queue only while the shared inbox is empty,
//! so every message of the own queue is older than every message of the shared inbox,
//! and the own queue is drained first. A thread that releases the master persona moves
//! its own queue to the front of the shared inbox.
//!
//! **Calls to this rank** travel through no AM (`wire::send_to_self`): the sender
//! puts the message where the handler would have put it, with the same header, so it
//! runs as one that arrived, in the user-level progress of the master persona, never
//! inside the call (§9.3 ¶7). On the thread holding the master persona, while the
//! shared inbox is empty, the arguments are serialized straight into the page of its
//! own queue; otherwise into a reused per-thread buffer, copied into the shared inbox.
//! The rule above keeps them in order with the rank's other calls to itself: a thread's
//! calls queue as its handlers' messages would. A reply to this rank is serialized into
//! that buffer and delivered as a reply's handler delivers one.
//!
//! **Replies** go to the thread that made the call (futures are bound to their thread;
//! see `rpc.rs`). The handler that receives one on that thread delivers it at once: it
//! decodes the value into the future's reply cell or state (this runs no user callback;
//! the future turns ready at the thread's next user-level progress). A reply received by
//! another thread's poll is copied into the calling thread's reply inbox, which that
//! thread's user-level progress delivers.
//!
//! Delivery sits on the receive buffers (`inbox`, `incoming`), function addresses, reply
//! completion and the per-thread state; user-level progress (`progress.rs`) calls it.

use std::cell::{Cell, RefCell};

use super::function::function_at;
use super::inbox::{Head, Inbox, Messages, Page, Queue, KIND_REPLY_UNIT};
use super::incoming::{Hold, Incoming};
use super::reply::{complete_unit, cookie_word};
use crate::serialization::{Error, Writer};
use crate::thread;

/// How many RPCs user-level progress runs between two polls of the network.
///
/// A drain runs every page queued when it starts, which can be thousands of RPCs when
/// the rank was busy sending (every insert of a `dht` in flight at once). Without a
/// poll meanwhile, the peers' messages wait in this rank's network queues for the
/// whole drain, and a peer that needs room there to send sits idle. With a poll every
/// 128 RPCs, the `dht` example on 2 ranks inserted and found 20-45% more keys per
/// second (alternating runs); every 32 did as well for the `dht` but cut the rate of
/// 10,000 round trips in flight (their replies, flushed by each poll, left in batches
/// of 32 instead of full ones), while 128 did not measurably.
const POLL_EVERY: usize = 128;

/// Where a page being run came from ([`run_page`]): where the messages after one whose
/// run panicked go back, in front.
#[derive(Clone, Copy)]
enum Origin<'a> {
    /// This thread's own queue of RPCs for the master persona.
    Own,
    /// The shared inbox of RPCs for the master persona.
    Shared,
    /// A reply inbox.
    Inbox(&'a Inbox),
    /// No queue: one reassembled message.
    Alone,
}

/// Runs the messages of `page` and clears it, or, if a message kept the page through
/// `hold`, gives the page to it (leaving an empty one). Returns how many ran. With
/// `master` (RPCs for the master persona), makes internal progress after every
/// [`POLL_EVERY`] messages (the messages it queues wait for the next drain, so the
/// order of the RPCs is kept), and stops at a message that released the master
/// persona, which moved the messages after it on for the persona's next holder
/// ([`master_released`], §10.5.1 ¶24).
///
/// A message whose run panics (an RPC's function, a value's `Deserialize`; the caller
/// of progress may catch the panic) has run: the messages after it go back in front of
/// the queue of `origin`, for the next progress, and the page is cleared or given to
/// its hold as at the end. So no message runs twice (a second reply to one call would
/// complete its future twice), none is lost, and no view or deferred call is left
/// pointing into a page that is reused.
fn run_page(page: &mut Page, hold: &Hold, master: bool, origin: Origin<'_>) -> usize {
    let mut n = 0;
    // The messages not yet run, in a cell that a release of the master persona by one
    // of them empties ([`master_released`]).
    let rest = Cell::new(page.messages());
    let running = master.then(|| Running::enter(&rest));
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
        let mut messages = rest.get();
        let Some((head, payload)) = messages.next() else {
            break;
        };
        rest.set(messages);
        run(&Incoming {
            head,
            payload,
            hold,
        });
        n += 1;
        if master {
            if !thread::holds_master() {
                break;
            }
            if n % POLL_EVERY == 0 {
                crate::progress::internal_progress();
            }
        }
    }));
    drop(running);
    if ran.is_err() {
        requeue(rest.get(), origin);
    }
    match hold.slot.borrow_mut().take() {
        None => page.clear(),
        Some(slot) => {
            // The page's buffer does not move: the views into it stay valid.
            let _ = slot.set(std::mem::replace(page, Page::empty()));
        }
    }
    if let Err(panic) = ran {
        std::panic::resume_unwind(panic);
    }
    n
}

thread_local! {
    /// The messages not yet run of the page of RPCs for the master persona that this
    /// thread is running (null when none): set by [`Running::enter`].
    static RUNNING: Cell<*const Cell<Messages<'static>>> = const { Cell::new(std::ptr::null()) };
}

/// Marks the page of RPCs for the master persona that this thread runs, for the span of
/// the run, so that an RPC of it that releases the persona finds the rest of the page.
struct Running;

impl Running {
    fn enter(rest: &Cell<Messages<'_>>) -> Running {
        // The lifetime is erased for the thread-local; the mark is removed (`drop`)
        // before the page's messages can go.
        let rest: *const Cell<Messages<'static>> = (rest as *const Cell<Messages<'_>>).cast();
        RUNNING.with(|r| r.set(rest));
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(std::ptr::null()));
    }
}

/// Queues `rest`, the messages of a page after one whose run panicked, in front of the
/// queue of `origin` they came from, and makes this thread's next user-level progress
/// look there.
#[cold]
#[inline(never)]
fn requeue(rest: Messages<'_>, origin: Origin<'_>) {
    let mut older = queue_of(rest);
    match origin {
        Origin::Own => OWN_RPCS.with(|own| own.queue.borrow_mut().prepend(&mut older)),
        Origin::Shared => SHARED_RPCS.prepend(&mut older),
        Origin::Inbox(inbox) => inbox.prepend(&mut older),
        Origin::Alone => {}
    }
    // The work flag of the drain was taken when it started: the pages it had yet to
    // run, and these, wait for the next progress.
    thread::note_rpcs_queued();
    thread::look_again();
}

/// A queue of copies of `messages`, the rest of a page that moves on without it.
fn queue_of(messages: Messages<'_>) -> Queue {
    let mut queue = Queue::new();
    for (head, payload) in messages {
        queue.push(head, payload);
    }
    queue
}

fn run(msg: &Incoming<'_>) {
    // SAFETY: the sender computed `head.func` with `function_offset` in this binary, for
    // the kind of message it sent.
    unsafe { function_at(msg.head.func)(msg) }
}

// ---------------------------------------------------------------------------------------
// RPCs for the master persona

/// The RPCs that this thread's handlers received while it held the master persona.
struct OwnRpcs {
    queue: RefCell<Queue>,
    /// The page of `queue` whose messages are running (handlers meanwhile fill
    /// another), empty otherwise.
    draining: RefCell<Page>,
}

thread_local! {
    static OWN_RPCS: OwnRpcs = const {
        OwnRpcs {
            queue: RefCell::new(Queue::new()),
            draining: RefCell::new(Page::empty()),
        }
    };
}

/// RPCs received by the handlers of threads that do not hold the master persona.
#[cfg(not(loom))]
static SHARED_RPCS: Inbox = Inbox::new();
/// Loom's primitives are not `const` (this inbox is not used by the loom tests).
#[cfg(loom)]
static SHARED_RPCS: std::sync::LazyLock<Inbox> = std::sync::LazyLock::new(Inbox::new);

/// Queues an RPC for the master persona (AM handler).
pub(super) fn queue_rpc(head: &Head, payload: &[u8]) {
    if thread::holds_master() && SHARED_RPCS.is_empty() {
        thread::note_rpcs_queued();
        OWN_RPCS.with(|own| own.queue.borrow_mut().push(head, payload));
    } else {
        queue_shared_rpc(head, payload);
    }
}

/// Queues the RPCs of a batch (AM handler), a run of checked records in the page
/// format, as [`queue_rpc`] queues each.
pub(super) fn queue_rpc_records(records: &[u8]) {
    if thread::holds_master() && SHARED_RPCS.is_empty() {
        thread::note_rpcs_queued();
        OWN_RPCS.with(|own| own.queue.borrow_mut().push_records(records));
    } else {
        SHARED_RPCS.push_records(records);
        thread::shared_work_queued();
    }
}

/// [`queue_rpc`] into the shared inbox.
#[cold]
#[inline(never)]
fn queue_shared_rpc(head: &Head, payload: &[u8]) {
    SHARED_RPCS.push(head, payload);
    thread::shared_work_queued();
}

/// Queues for the master persona an RPC that this rank sends to itself (no AM carries
/// it), as [`queue_rpc`] queues one that arrives: into this thread's own queue, the
/// arguments serialized by `encode` straight into its page, or, on a thread without the
/// master persona, into the shared inbox. `head.len` is set from what `encode` wrote;
/// if it fails, nothing is queued. Returns the payload's length. `encode` may not send
/// RPCs (`wire::send_to_self` checks it).
pub(super) fn queue_rpc_from_self(
    head: &Head,
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
) -> Result<usize, Error> {
    if thread::holds_master() && SHARED_RPCS.is_empty() {
        let len = OWN_RPCS.with(|own| {
            let mut queue = own.queue.borrow_mut();
            // Used only if the message outgrows the page: the thread's reused buffer.
            let mut spill = SCRATCH.take();
            let mut encoded = Ok(());
            let mut len = 0;
            let placed = queue.push_in_place(head, |room| {
                let mut w = Writer::new(room, Some(&mut spill));
                encoded = encode(&mut w);
                len = w.pos();
                (encoded.is_ok() && !w.spilled()).then_some(len)
            });
            if !placed && encoded.is_ok() {
                queue.push(&with_len(head, len), &spill[..len]);
            }
            keep_scratch(spill);
            encoded.map(|()| len)
        })?;
        thread::note_rpcs_queued();
        Ok(len)
    } else {
        let len = with_encoded(encode, |bytes| {
            SHARED_RPCS.push(&with_len(head, bytes.len()), bytes);
            bytes.len()
        })?;
        thread::shared_work_queued();
        Ok(len)
    }
}

/// `head` for a payload of `len` bytes.
fn with_len(head: &Head, len: usize) -> Head {
    let mut head = *head;
    head.len = u32::try_from(len).unwrap_or_else(|_| {
        panic!("upcxx::rpc: a message of {len} bytes is larger than the 4 GiB limit")
    });
    head
}

/// Calls `then` with what `encode` writes, in a buffer this thread reuses; returns its
/// result, or `encode`'s error.
fn with_encoded<R>(
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
    then: impl FnOnce(&[u8]) -> R,
) -> Result<R, Error> {
    let mut buf = SCRATCH.take();
    // With no slot, every byte goes to the vector.
    let mut w = Writer::new(&mut [], Some(&mut buf));
    let encoded = encode(&mut w);
    let (len, spilled) = (w.pos(), w.spilled());
    let out = encoded.map(|()| then(if spilled { &buf[..len] } else { &[] }));
    keep_scratch(buf);
    out
}

thread_local! {
    /// The buffer that messages to this rank are serialized into when they do not go
    /// straight into a page, reused from one message to the next.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The largest buffer kept in [`SCRATCH`] for the next message.
const SCRATCH_KEPT: usize = 64 << 10;

/// Gives a buffer taken from [`SCRATCH`] back, unless it grew past [`SCRATCH_KEPT`].
fn keep_scratch(buf: Vec<u8>) {
    if buf.capacity() <= SCRATCH_KEPT {
        SCRATCH.set(buf);
    }
}

/// Queues a reassembled RPC for the master persona (AM handler).
pub(super) fn queue_rpc_page(page: Page) {
    if thread::holds_master() && SHARED_RPCS.is_empty() {
        OWN_RPCS.with(|own| own.queue.borrow_mut().push_page(page));
        thread::note_rpcs_queued();
    } else {
        SHARED_RPCS.push_page(page);
        thread::shared_work_queued();
    }
}

/// Runs the RPCs queued for the master persona, which this thread holds (user-level
/// progress). `own`: this thread's handlers may have queued some since the last call;
/// `shared`: other threads may have.
#[inline]
pub(crate) fn run_master_rpcs(own: bool, shared: bool) -> usize {
    if own || (shared && !SHARED_RPCS.is_empty()) {
        run_master_rpcs_queued()
    } else {
        0
    }
}

/// Runs the pages of RPCs queued when it starts, oldest first; those that arrive
/// meanwhile wait for the next progress call.
fn run_master_rpcs_queued() -> usize {
    let n = OWN_RPCS.with(|own| {
        let shared_pages = if SHARED_RPCS.is_empty() {
            0
        } else {
            SHARED_RPCS.pages()
        };
        let pages = own.queue.borrow().pages() + shared_pages;
        // User-level progress does not nest (§10.2), so nothing else drains meanwhile.
        let mut draining = own.draining.borrow_mut();
        let hold = Hold::default();
        thread::restricted(|| {
            let mut n = 0;
            for _ in 0..pages {
                // An RPC run here may have released the master persona: the pages
                // left are its next holder's.
                if !thread::holds_master() {
                    break;
                }
                if own.queue.borrow_mut().take_into(&mut draining) {
                    n += run_page(&mut draining, &hold, true, Origin::Own);
                } else if let Some(mut page) = SHARED_RPCS.take() {
                    n += run_page(&mut page, &hold, true, Origin::Shared);
                    SHARED_RPCS.recycle(page);
                } else {
                    break;
                }
            }
            n
        })
    });
    if !SHARED_RPCS.is_empty() {
        // Newer messages of this thread's queue took the turn of older shared ones.
        thread::look_again();
    }
    n
}

/// This thread is releasing the master persona, before the store that lets another
/// thread take it: the RPCs it has yet to run go to the shared inbox, in front of the
/// (newer) ones there, for the next holder. First the rest of the page it is running,
/// when an RPC of it releases the persona (that drain then ends), then its own queue,
/// in their order.
pub(crate) fn master_released() {
    OWN_RPCS.with(|own| {
        let mut queue = own.queue.borrow_mut();
        let rest = RUNNING.with(Cell::get);
        if !rest.is_null() {
            // SAFETY: set by `Running::enter` on this thread for the run of a page that
            // lives until the mark is removed; the RPC releasing the persona runs inside
            // that run. Read and emptied through the cell, which the run reads again
            // after the RPC returns.
            queue.prepend(&mut queue_of(unsafe { &*rest }.take()));
        }
        SHARED_RPCS.prepend(&mut queue);
    });
    thread::shared_work_queued();
}

// ---------------------------------------------------------------------------------------
// Replies

thread_local! {
    /// This thread's reply inbox, once it made a round-trip RPC.
    static REPLIES: Cell<Option<&'static Inbox>> = const { Cell::new(None) };
}

/// The inbox where other threads leave the replies to this thread's RPCs; its address
/// identifies the thread in a call's cookie. Leaked: a reply may arrive after the
/// thread exited (and is then never run).
#[inline]
pub(super) fn reply_inbox() -> &'static Inbox {
    REPLIES.with(Cell::get).unwrap_or_else(new_reply_inbox)
}

#[cold]
fn new_reply_inbox() -> &'static Inbox {
    let inbox: &'static Inbox = Box::leak(Box::new(Inbox::new()));
    REPLIES.with(|r| r.set(Some(inbox)));
    inbox
}

/// The reply inbox of the thread whose RPC `head` answers, unless it is this thread's.
fn other_thread(head: &Head) -> Option<&'static Inbox> {
    let target = cookie_word(head.cookie, 0) as usize;
    let mine = REPLIES
        .with(|r| r.get())
        .map_or(0, |i| i as *const Inbox as usize);
    // SAFETY: `rpc` put the address of its thread's leaked (never freed) reply inbox in
    // the cookie, and the target sent the cookie back unchanged.
    (target != mine).then(|| unsafe { &*(target as *const Inbox) })
}

/// Delivers a reply (AM handler): at once if it is for this thread, otherwise through
/// the calling thread's reply inbox. Inlined into the handlers: a batch of replies
/// calls it once per record.
#[inline]
pub(super) fn deliver_reply(head: &Head, payload: &[u8]) {
    match other_thread(head) {
        // SAFETY: a reply of this kind to an `rpc` made on this thread.
        None if head.kind == KIND_REPLY_UNIT => unsafe { complete_unit(head.cookie) },
        None => run(&Incoming {
            head,
            payload,
            hold: &Hold::default(),
        }),
        Some(inbox) => {
            inbox.push(head, payload);
            thread::shared_work_queued();
        }
    }
}

/// Delivers the reply to an `rpc` that this rank made to itself (no AM carries it), as
/// [`deliver_reply`] delivers one that arrives, its value serialized by `encode`;
/// `head.len` is set from what `encode` wrote. If it fails, nothing is delivered.
/// Returns the payload's length.
pub(super) fn deliver_reply_from_self(
    head: &Head,
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
) -> Result<usize, Error> {
    with_encoded(encode, |bytes| {
        deliver_reply(&with_len(head, bytes.len()), bytes);
        bytes.len()
    })
}

/// Delivers a reassembled reply (AM handler), as [`deliver_reply`].
pub(super) fn deliver_reply_page(head: &Head, page: Page) {
    match other_thread(head) {
        None => {
            let mut page = page;
            run_page(&mut page, &Hold::default(), false, Origin::Alone);
        }
        Some(inbox) => {
            inbox.push_page(page);
            thread::shared_work_queued();
        }
    }
}

/// Delivers the replies to this thread's RPCs that other threads received (user-level
/// progress, before its epoch advances: as if this thread had received them).
pub(crate) fn deliver_forwarded_replies() {
    if let Some(inbox) = REPLIES.with(|r| r.get()) {
        if !inbox.is_empty() {
            deliver_inbox(inbox);
        }
    }
}

#[cold]
fn deliver_inbox(inbox: &Inbox) {
    while let Some(mut page) = inbox.take() {
        run_page(&mut page, &Hold::default(), false, Origin::Inbox(inbox));
        inbox.recycle(page);
    }
}
