//! Remote procedure calls (UPC++ spec ch. 9).
//!
//! [`rpc`] runs a function on another rank (or this one) and returns a future of its
//! result; [`rpc_ff`] ("fire and forget") does the same without a result. This is
//! Figure 9.1 of the spec:
//!
//! ```
//! upcxx::init();
//! let next = (upcxx::rank_me() + 1) % upcxx::rank_n();
//! let f = upcxx::rpc(
//!     next,
//!     |from: upcxx::Rank| {
//!         println!("Rank {from} told rank {} to say Hello World", upcxx::rank_me());
//!         upcxx::rank_me()
//!     },
//!     (upcxx::rank_me(),),
//! );
//! assert_eq!(f.wait(), next);
//! upcxx::finalize();
//! ```
//!
//! # Functions travel as code addresses
//!
//! Every rank runs the same binary, so a function is sent as the offset of its code from
//! an anchor function in that binary (§6.3); in a position-independent executable the
//! offset is the same in every process. What is sent is not the user's function itself
//! but a *trampoline* monomorphized for it, `run_rpc::<F, A>`, which knows how to
//! decode the arguments, call `F` and send the result back. `F` must therefore be
//! zero-sized, a `fn` item or a closure that captures nothing, so that the target can
//! call it without any of its bytes; this is checked at compile time (in a build, not
//! in `cargo check`). Captured state travels as arguments instead:
//!
//! ```compile_fail,E0080
//! upcxx::init();
//! let n = 5u64;
//! // error: the function must not capture anything ... pass captured state as arguments
//! let f = upcxx::rpc(0, move |x: u64| x + n, (1u64,));
//! ```
//! ```
//! upcxx::init();
//! let n = 5u64;
//! let f = upcxx::rpc(0, |x: u64, n: u64| x + n, (1u64, n));
//! assert_eq!(f.wait(), 6);
//! upcxx::finalize();
//! ```
//!
//! # Arguments
//!
//! The arguments are a tuple (`()`, `(a,)`, `(a, b)`, ... up to 8 elements) of values
//! that implement [`Serialization`] (any serde type, [`View`](crate::serialization::View),
//! [`SeqView`](crate::serialization::SeqView)); the function takes them as separate
//! parameters, views with a lifetime the function must accept generically
//! (`|v: View<'_, f64>, scale: f64| ...`). They are serialized before `rpc` returns
//! (§9.3 ¶3, source completion "as buffered"): directly into the network layer's send
//! buffer when they fit in one Medium Active Message, otherwise into a reused per-thread
//! buffer sent as fragments that the target reassembles. There is no size limit besides
//! 4 GiB per message.
//!
//! # Execution and results
//!
//! The target's AM handler only copies the message into a receive buffer (see
//! `inbox.rs`); the function runs during user-level progress of the target's master
//! persona (§9.3 ¶6), never synchronously inside `rpc`, even to `rank_me()` (¶7). If it
//! returns a value, the value is serialized and sent back; if it returns a
//! [`Future`], the reply is sent when that future is ready (¶3), and the receive buffer,
//! with any views into it, stays alive until then (§6.5 ¶6). The initiator's future
//! becomes ready during a later user-level progress of the initiating thread (§9.3 ¶25
//! says "of the initiating persona"; our futures are bound to the thread that made them,
//! so the reply is queued to that thread, and runs in its next user-level progress
//! whichever personas it then holds).
//!
//! The return type `R` must implement [`FutureValue`] (done for the standard types; use
//! [`impl_future_value!`](crate::impl_future_value) for your own), and its value type must
//! be a serde type for [`rpc`].
//!
//! # Costs
//!
//! A small RPC allocates nothing on the send side besides the promise of [`rpc`]'s
//! future, and nothing on the receive side in the steady state (receive pages are
//! reused). The target is woken once per burst of messages, not once per message.
//!
//! # Trust
//!
//! The target jumps to the code address a message names. This is sound because every
//! rank runs the same binary and messages come only from ranks of the same job (as in
//! UPC++ and GASNet); the transport is not a security boundary.

mod inbox;

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::future::{fulfill_state, Future, FutureValue, State};
use crate::persona::{self, Persona};
use crate::runtime::{self, Rank};
use crate::serialization::{Error, Reader, Serialization, Writer};
use inbox::{Head, Inbox, Page};

// ---------------------------------------------------------------------------------------
// Public API

/// The argument tuple of an RPC: `()`, `(A,)`, `(A, B)`, ... up to 8 elements, each
/// [`Serialization`]. Implemented for you; you never implement it.
pub trait RpcArgs {
    /// What the target's function receives, element by element.
    type Deserialized<'de>;

    #[doc(hidden)]
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error>;

    #[doc(hidden)]
    fn decode<'de>(r: &mut Reader<'de>) -> Result<Self::Deserialized<'de>, Error>;
}

/// A function that can be called by RPC with the argument tuple `A`: any `Fn` of the
/// tuple's (deserialized) element types, for every lifetime of the receive buffer.
/// It must also be zero-sized (checked when `rpc`/`rpc_ff` is instantiated).
pub trait RpcFn<A: RpcArgs>: Sized {
    /// The function's return type: a value, or a future of one.
    type Ret: FutureValue;

    #[doc(hidden)]
    fn invoke<'de>(&self, args: A::Deserialized<'de>) -> Self::Ret;
}

/// The value an [`rpc`] of `F` with arguments `A` produces: `F`'s return type, or the
/// value type of the future it returns.
pub type RpcValue<F, A> = <<F as RpcFn<A>>::Ret as FutureValue>::Value;

macro_rules! rpc_arity {
    ($($T:ident $v:ident $i:tt),*) => {
        impl<$($T: Serialization),*> RpcArgs for ($($T,)*) {
            type Deserialized<'de> = ($($T::Deserialized<'de>,)*);

            #[inline]
            #[allow(unused_variables)]
            fn encode(&self, w: &mut Writer<'_>) -> Result<(), Error> {
                $(self.$i.encode(w)?;)*
                Ok(())
            }

            #[inline]
            #[allow(unused_variables, clippy::unused_unit)]
            fn decode<'de>(r: &mut Reader<'de>) -> Result<Self::Deserialized<'de>, Error> {
                Ok(($($T::decode(r)?,)*))
            }
        }

        impl<Func, Ret, $($T: Serialization),*> RpcFn<($($T,)*)> for Func
        where
            Func: for<'de> Fn($($T::Deserialized<'de>),*) -> Ret,
            Ret: FutureValue,
        {
            type Ret = Ret;

            #[inline]
            fn invoke<'de>(&self, args: ($($T::Deserialized<'de>,)*)) -> Ret {
                let ($($v,)*) = args;
                self($($v),*)
            }
        }
    };
}

rpc_arity!();
rpc_arity!(A a 0);
rpc_arity!(A a 0, B b 1);
rpc_arity!(A a 0, B b 1, C c 2);
rpc_arity!(A a 0, B b 1, C c 2, D d 3);
rpc_arity!(A a 0, B b 1, C c 2, D d 3, E e 4);
rpc_arity!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5);
rpc_arity!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6);
rpc_arity!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7);

/// Runs `func(args...)` on `rank` during its master persona's user-level progress, with
/// no reply (UPC++ `rpc_ff`, §9.3). The arguments are serialized before this returns.
/// Progress level: internal.
///
/// # Panics
/// Before `init`; if `rank` is not below `rank_n()`; if an argument fails to serialize.
#[track_caller]
pub fn rpc_ff<F, A>(rank: Rank, func: F, args: A)
where
    F: RpcFn<A>,
    A: RpcArgs,
{
    assert_no_captures::<F>();
    let rt = runtime::rt("rpc_ff");
    let dest = world_rank("rpc_ff", rt, rank);
    drop(func);
    let entry = function_offset(run_rpc_ff::<F, A>);
    if let Err(e) = send(&rt.team, dest, KIND_RPC, entry, [0; 4], |w| args.encode(w)) {
        panic!("upcxx::rpc_ff: the arguments could not be serialized: {e}");
    }
}

/// Runs `func(args...)` on `rank` during its master persona's user-level progress and
/// returns the future of its result (UPC++ `rpc`, §9.3): ready, during a user-level
/// progress of this thread, once the result is back. If `func` returns a future, the
/// result is that future's value, sent when it is ready. Progress level: internal.
///
/// # Panics
/// Before `init`; if `rank` is not below `rank_n()`; if an argument fails to serialize.
#[track_caller]
pub fn rpc<F, A>(rank: Rank, func: F, args: A) -> Future<RpcValue<F, A>>
where
    F: RpcFn<A>,
    A: RpcArgs,
    RpcValue<F, A>: Serialize + DeserializeOwned,
{
    assert_no_captures::<F>();
    let rt = runtime::rt("rpc");
    let dest = world_rank("rpc", rt, rank);
    drop(func);
    let state = State::<RpcValue<F, A>>::new(1);
    let fut = Future::from_state(Rc::clone(&state));
    let inbox = reply_inbox() as *const ReplyInbox as usize as u64;
    let promise = Rc::into_raw(state) as usize as u64;
    let cookie = [
        inbox as u32,
        (inbox >> 32) as u32,
        promise as u32,
        (promise >> 32) as u32,
    ];
    let entry = function_offset(run_rpc::<F, A>);
    if let Err(e) = send(&rt.team, dest, KIND_RPC, entry, cookie, |w| args.encode(w)) {
        // SAFETY: nothing was sent, so no reply will take this reference back.
        drop(unsafe { Rc::from_raw(promise as usize as *const State<RpcValue<F, A>>) });
        panic!("upcxx::rpc: the arguments could not be serialized: {e}");
    }
    fut
}

/// Fails the build for a function object that carries state.
fn assert_no_captures<F>() {
    const {
        assert!(
            std::mem::size_of::<F>() == 0,
            "upcxx::rpc: the function must not capture anything (it is sent as a code \
             address, not as data): pass captured state as RPC arguments instead, e.g. \
             upcxx::rpc(rank, |x: u64, s: String| ..., (x, s))"
        )
    };
}

#[track_caller]
fn world_rank(call: &str, rt: &runtime::Runtime, rank: Rank) -> Rank {
    // Team-relative ranks will be translated to world ranks here.
    if rank >= rt.size {
        panic!(
            "upcxx::{call}: rank {rank} is out of range (rank_n() = {})",
            rt.size
        );
    }
    rank
}

// ---------------------------------------------------------------------------------------
// Function addresses

/// What a message names: the code that runs it on arrival (a trampoline for an RPC, a
/// completion for a reply).
type Entry = unsafe fn(&Incoming<'_>);

/// The fixed point function addresses are measured from.
#[inline(never)]
extern "C" fn anchor() {}

fn anchor_addr() -> usize {
    anchor as *const () as usize
}

fn function_offset(f: Entry) -> [u32; 2] {
    let off = (f as usize).wrapping_sub(anchor_addr()) as u64;
    [off as u32, (off >> 32) as u32]
}

/// # Safety
/// `off` must come from [`function_offset`] in a process running this same binary.
unsafe fn function_at(off: [u32; 2]) -> Entry {
    let off = u64::from(off[0]) | u64::from(off[1]) << 32;
    let addr = anchor_addr().wrapping_add(off as usize);
    // SAFETY: the caller guarantees `addr` is the address of an `Entry` of this binary
    // (same code, same offset from the anchor in every process of a PIE binary).
    unsafe { std::mem::transmute::<usize, Entry>(addr) }
}

fn cookie_word(cookie: [u32; 4], i: usize) -> u64 {
    u64::from(cookie[2 * i]) | u64::from(cookie[2 * i + 1]) << 32
}

// ---------------------------------------------------------------------------------------
// Running messages

/// A message being run: its header, its payload in a receive page, and the page.
struct Incoming<'a> {
    head: Head,
    payload: &'a [u8],
    page: &'a Arc<Page>,
}

/// Decodes the arguments and calls `F`.
fn invoke<F: RpcFn<A>, A: RpcArgs>(msg: &Incoming<'_>) -> Future<RpcValue<F, A>> {
    let args = A::decode(&mut Reader::new(msg.payload)).unwrap_or_else(|e| {
        panic!(
            "upcxx::rpc: the arguments from rank {} do not deserialize: {e}",
            msg.head.src
        )
    });
    // SAFETY: `F` is zero-sized (`assert_no_captures` ran where this trampoline was
    // instantiated) and inhabited (the sender had a value), so the empty byte sequence is
    // a valid `F`. It is not dropped: the sender's value was dropped there.
    let func = std::mem::ManuallyDrop::new(unsafe { std::mem::zeroed::<F>() });
    func.invoke(args).into_future()
}

/// Trampoline of `rpc_ff::<F, A>`.
///
/// # Safety
/// `msg` must be an RPC message sent by `rpc_ff::<F, A>`.
unsafe fn run_rpc_ff<F: RpcFn<A>, A: RpcArgs>(msg: &Incoming<'_>) {
    let fut = invoke::<F, A>(msg);
    if !fut.ready() {
        let page = Arc::clone(msg.page);
        fut.on_ready(move |_| drop(page));
    }
}

/// Trampoline of `rpc::<F, A>`.
///
/// # Safety
/// `msg` must be an RPC message sent by `rpc::<F, A>`.
unsafe fn run_rpc<F, A>(msg: &Incoming<'_>)
where
    F: RpcFn<A>,
    A: RpcArgs,
    RpcValue<F, A>: Serialize + DeserializeOwned,
{
    let fut = invoke::<F, A>(msg);
    let (src, cookie) = (msg.head.src, msg.head.cookie);
    if fut.ready() {
        reply(src, cookie, &fut.into_result());
    } else {
        let page = Arc::clone(msg.page);
        fut.on_ready(move |v| {
            drop(page);
            reply(src, cookie, &v);
        });
    }
}

fn reply<V: Serialize + DeserializeOwned + 'static>(dest: Rank, cookie: [u32; 4], value: &V) {
    let rt = runtime::rt("rpc");
    let entry = function_offset(complete::<V>);
    if let Err(e) = send(&rt.team, dest, KIND_REPLY, entry, cookie, |w| {
        value.encode(w)
    }) {
        panic!("upcxx::rpc: the result of the remote function could not be serialized: {e}");
    }
}

/// Fulfils the initiator's promise with a reply.
///
/// # Safety
/// `msg` must be the reply to an `rpc` with value type `V` made on this thread.
unsafe fn complete<V: Serialize + DeserializeOwned + 'static>(msg: &Incoming<'_>) {
    let ptr = cookie_word(msg.head.cookie, 1) as usize as *const State<V>;
    // SAFETY: `rpc` made this pointer with `Rc::into_raw` on this thread (replies are
    // delivered to the inbox of the thread that made the call) and exactly one reply
    // takes it back.
    let state = unsafe { Rc::from_raw(ptr) };
    let value = <V as Serialization>::decode(&mut Reader::new(msg.payload)).unwrap_or_else(|e| {
        panic!(
            "upcxx::rpc: the result from rank {} does not deserialize: {e}",
            msg.head.src
        )
    });
    fulfill_state(&state, value, "rpc");
}

/// Runs every message queued in `inbox`.
fn run_inbox(inbox: &Inbox) {
    let batch = inbox.take();
    for page in &batch {
        for (head, payload) in page.messages() {
            // SAFETY: the sender computed `head.func` with `function_offset` in this
            // binary, for the kind of message it sent.
            unsafe {
                let entry = function_at(head.func);
                entry(&Incoming {
                    head,
                    payload,
                    page,
                });
            }
        }
    }
    inbox.recycle(batch);
}

// ---------------------------------------------------------------------------------------
// Where messages wait: the RPC inbox (run by the master persona) and one reply inbox per
// thread that makes round-trip RPCs.

static RPC_INBOX: LazyLock<Inbox> = LazyLock::new(Inbox::new);

/// The master persona, once a drain has run (it does not exist yet while `init` waits in
/// the segment attach barrier, when the first RPCs may already arrive).
static MASTER: OnceLock<Persona> = OnceLock::new();

/// Schedules [`drain_rpcs`] on the master persona (called by the AM handler).
fn schedule_rpcs() {
    match MASTER.get() {
        Some(m) if !m.active_with_caller() => m.lpc_ff(drain_rpcs),
        // On the master's thread (or before it is known: during init, on the thread
        // that will hold it) the thread's own deferred queue is cheaper than an LPC.
        _ => persona::defer(Box::new(drain_rpcs_here)),
    }
}

fn drain_rpcs_here() {
    let master = MASTER.get_or_init(persona::master_persona);
    if master.active_with_caller() {
        drain_rpcs();
    } else {
        master.lpc_ff(drain_rpcs);
    }
}

fn drain_rpcs() {
    run_inbox(&RPC_INBOX);
}

/// A thread's inbox of RPC replies, and its default persona, whose user-level progress
/// runs them. Leaked: a reply may arrive for a thread that has exited.
struct ReplyInbox {
    inbox: Inbox,
    persona: Persona,
}

thread_local! {
    static REPLY_INBOX: &'static ReplyInbox = Box::leak(Box::new(ReplyInbox {
        inbox: Inbox::new(),
        persona: persona::default_persona(),
    }));
}

fn reply_inbox() -> &'static ReplyInbox {
    REPLY_INBOX.with(|r| *r)
}

impl ReplyInbox {
    fn schedule(&self) {
        if self.persona.active_with_caller() {
            persona::defer(Box::new(drain_replies));
        } else {
            self.persona.lpc_ff(drain_replies);
        }
    }
}

fn drain_replies() {
    run_inbox(&reply_inbox().inbox);
}

// ---------------------------------------------------------------------------------------
// The wire: one Medium AM handler with NARGS arguments
//   [kind, entry lo, entry hi, cookie x4, fragment id, total length, fragment offset]

const KIND_RPC: u32 = 1;
const KIND_REPLY: u32 = 2;
/// A claimed send buffer that carries nothing (serialization failed).
const KIND_NOOP: u32 = 3;
const KIND_MASK: u32 = 0xff;
/// The message is one fragment of a larger one.
const FRAGMENT: u32 = 0x100;
const NARGS: usize = 10;

static HANDLER: AtomicU8 = AtomicU8::new(0);
static MEDIUM_MAX: AtomicUsize = AtomicUsize::new(0);
static NEXT_FRAGMENTED: AtomicU32 = AtomicU32::new(0);

/// Registers the AM handlers RPC uses (called by `init`, before the segment attach
/// barrier, so every rank has them before any rank can send).
pub(crate) fn register_handlers(endpoint: &gex::Endpoint) {
    let mut table = [gex::AmEntry::payload(
        "upcxx::rpc",
        gex::AmCategory::Medium,
        gex::AmRole::Request,
        NARGS,
        am_handler,
    )];
    endpoint
        .register_handlers(&mut table)
        .unwrap_or_else(|e| panic!("upcxx::init: registering the RPC handler: {e}"));
    HANDLER.store(table[0].index, Ordering::Relaxed);
    MEDIUM_MAX.store(gex::am::lub_request_medium(), Ordering::Relaxed);
}

thread_local! {
    /// Where messages too large for one AM are serialized; reused.
    static SPILL: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Spill buffers larger than this are freed after use rather than kept.
const SPILL_KEEP: usize = 4 << 20;

/// Sends one message: serializes it with `encode` straight into a claimed AM buffer,
/// or, if it outgrows that, into the thread's spill buffer, sent as fragments.
fn send(
    team: &gex::Team,
    dest: Rank,
    kind: u32,
    entry: [u32; 2],
    cookie: [u32; 4],
    encode: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    let handler = HANDLER.load(Ordering::Relaxed);
    let max = MEDIUM_MAX.load(Ordering::Relaxed);
    let mut args = [
        kind, entry[0], entry[1], cookie[0], cookie[1], cookie[2], cookie[3], 0, 0, 0,
    ];
    let mut sd = team
        .prepare_request_medium(dest, None, 0, max, gex::Lc::Now, gex::Flags::NONE, NARGS)
        .expect("a blocking Prepare always succeeds");
    let mut spill = SPILL.take();
    let slot = sd.buffer_mut().expect("no client buffer was given");
    let mut w = Writer::new(slot, Some(&mut spill));
    let encoded = encode(&mut w);
    let (len, spilled) = (w.pos(), w.spilled());
    if let Err(e) = encoded {
        args[0] = KIND_NOOP;
        sd.commit_medium(handler, 0, &args);
        SPILL.set(spill);
        return Err(e);
    }
    if !spilled {
        sd.commit_medium(handler, len, &args);
        SPILL.set(spill);
        return Ok(());
    }
    let total = u32::try_from(len).unwrap_or_else(|_| {
        panic!("upcxx::rpc: a message of {len} bytes is larger than the 4 GiB limit")
    });
    args[0] = kind | FRAGMENT;
    args[7] = NEXT_FRAGMENTED.fetch_add(1, Ordering::Relaxed);
    args[8] = total;
    // The slot holds a stale prefix (patches may have landed in the spill copy only).
    let first = max.min(len);
    sd.buffer_mut().expect("library buffer")[..first].copy_from_slice(&spill[..first]);
    sd.commit_medium(handler, first, &args);
    let mut off = first;
    while off < len {
        let n = max.min(len - off);
        args[9] = off as u32;
        team.request_medium(
            dest,
            handler,
            &spill[off..off + n],
            gex::Lc::Now,
            gex::Flags::NONE,
            &args,
        )
        .expect("a blocking Request always succeeds");
        off += n;
    }
    spill.clear();
    if spill.capacity() > SPILL_KEEP {
        spill = Vec::new();
    }
    SPILL.set(spill);
    Ok(())
}

/// A fragmented message being reassembled.
struct Partial {
    page: Page,
    left: usize,
}

static PARTIAL: LazyLock<Mutex<HashMap<(Rank, u32), Partial>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The AM handler (restricted context): copies the message into its inbox and, if the
/// inbox was idle, schedules the drain. Never runs user code.
fn am_handler(token: &gex::Token<'_>, payload: &[u8], args: &[u32]) {
    let kind = args[0];
    let mut head = Head::new(
        token.src_rank(),
        kind & KIND_MASK,
        [args[1], args[2]],
        [args[3], args[4], args[5], args[6]],
        payload.len() as u32,
    );
    if head.kind == KIND_NOOP {
        return;
    }
    if kind & FRAGMENT == 0 {
        deliver(&head, |inbox| inbox.push(&head, payload));
        return;
    }
    let (id, total, offset) = (args[7], args[8], args[9] as usize);
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
        deliver(&head, |inbox| inbox.push_page(done.page));
    }
}

/// Puts a message into the inbox its kind names and schedules that inbox's drain.
fn deliver(head: &Head, put: impl FnOnce(&Inbox) -> bool) {
    match head.kind {
        KIND_RPC => {
            if put(&RPC_INBOX) {
                schedule_rpcs();
            }
        }
        KIND_REPLY => {
            let ptr = cookie_word(head.cookie, 0) as usize as *const ReplyInbox;
            // SAFETY: `rpc` put the address of its thread's leaked (never freed) reply
            // inbox in the cookie, and the target sent the cookie back unchanged.
            let ri = unsafe { &*ptr };
            if put(&ri.inbox) {
                ri.schedule();
            }
        }
        k => panic!(
            "upcxx: an RPC message of unknown kind {k} arrived from rank {}",
            head.src
        ),
    }
}
