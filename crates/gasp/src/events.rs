//! The event table: every event tag this implementation reports, in one place.
//!
//! GASP §3.5 asks for macros mapping symbolic event names to 32-bit tags, and §5.4 lists
//! the UPC system events with their argument lists. This module is the single source of
//! those facts: the Rust constants, the table the tools read ([`EVENTS`]), and the C
//! header `include/gasp_upcxx.h` (rendered by [`crate::header::render_events_header`];
//! a test fails if the checked-in header differs) all come from the one `events!` list
//! below, so they cannot drift.
//!
//! Where a UPC event has the meaning of one of our operations, we report that event with
//! the spec's argument list, mapping types as follows: a pointer-to-shared is a
//! `const gasp_upcxx_gptr_t *` (rank and owner-space address, §5.4's "extra level of
//! indirection"), a lock is the `Hsl`'s address, `upc_flag_t`/`upc_op_t` would be `int`.
//! What UPC has no name for is named `GASP_UPCXX_*` (UPC++ operations) or `GASP_GEX_*`
//! (GASNet-EX operations), as §5.5 recommends for implementation-specific events.

/// The C header's `GASP_UPC_VERSION`-style number of this event list; bump it when an
/// event is added (GASP §5.5).
pub const EVENTS_VERSION: u32 = 1;

/// First and last tag returned by `create_event` for user events (GASP §5.3's
/// `GASP_UPC_USEREVT_START` / `_END`).
pub const USEREVT_START: u32 = 0x1_0000;
pub const USEREVT_END: u32 = 0x1_FFFF;

/// The handle reported for a non-blocking operation that completed during its
/// initiation (GASP §5.4.6 `GASP_NB_TRIVIAL`).
pub const NB_TRIVIAL: u64 = 0;
/// The handle of implicit-handle (NBI) operations: one NBI sync retires them all.
pub const NB_IMPLICIT: u64 = 1;

/// Which layer reports an event; the trace's `cat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    Gex,
    Upcxx,
    User,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Gex => "gex",
            Layer::Upcxx => "upcxx",
            Layer::User => "user",
        }
    }
}

/// The event types an event is reported with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// START and END around the operation.
    Interval,
    /// One ATOMIC event.
    Atomic,
}

/// How the tools treat an interval event in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// The interval is the whole operation (a complete event).
    Blocking,
    /// The interval initiates an operation that completes later (an async begin; the
    /// END's handle argument names the operation, [`NB_TRIVIAL`] if it is already done).
    Initiate,
    /// The interval waits for operations named by its handle argument (an async end).
    Sync,
    /// The interval runs user code on behalf of a message (the target of a flow).
    Execute,
}

/// One event of the table.
#[derive(Clone, Copy, Debug)]
pub struct EventDef {
    /// The symbolic name (`GASP_UPC_PUT`).
    pub name: &'static str,
    pub tag: u32,
    pub layer: Layer,
    pub shape: Shape,
    pub timing: Timing,
    /// The C argument list of the START (or ATOMIC) event, e.g. `"int named, int expr"`.
    pub start_args: &'static str,
    /// The C argument list of the END event (empty for atomic events).
    pub end_args: &'static str,
    /// What reports it.
    pub doc: &'static str,
}

impl EventDef {
    /// The names of the START (or ATOMIC) arguments, in order.
    pub fn start_arg_names(&self) -> impl Iterator<Item = &'static str> {
        arg_names(self.start_args)
    }

    /// The names of the END arguments, in order.
    pub fn end_arg_names(&self) -> impl Iterator<Item = &'static str> {
        arg_names(self.end_args)
    }
}

/// The argument names of a C argument list such as `"int named, int expr"`.
pub fn arg_names(list: &'static str) -> impl Iterator<Item = &'static str> {
    list.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "(none)")
        .map(|a| a.rsplit([' ', '*']).next().unwrap_or(a))
}

/// The position of argument `name` in a C argument list.
pub fn arg_position(list: &'static str, name: &str) -> Option<usize> {
    arg_names(list).position(|n| n == name)
}

macro_rules! events {
    ($(
        $(#[doc = $doc:literal])+
        $name:ident = $tag:literal, $layer:ident, $shape:ident, $timing:ident,
            start: $start:literal, end: $end:literal;
    )*) => {
        $( $(#[doc = $doc])+ pub const $name: u32 = $tag; )*

        /// Every event this implementation reports, in tag order.
        pub static EVENTS: &[EventDef] = &[$(
            EventDef {
                name: stringify!($name),
                tag: $tag,
                layer: Layer::$layer,
                shape: Shape::$shape,
                timing: Timing::$timing,
                start_args: $start,
                end_args: $end,
                doc: concat!($($doc),+),
            },
        )*];
    };
}

events! {
    /// UPC §5.4.1: the collective end of the program (`upcxx::finalize`,
    /// `gex::Client::finalize`), around its final barrier.
    GASP_UPC_COLLECTIVE_EXIT = 1, Upcxx, Interval, Blocking,
        start: "int status", end: "int status";
    /// UPC §5.4.1: a non-collective exit (`gex::exit`).
    GASP_UPC_NONCOLLECTIVE_EXIT = 2, Upcxx, Atomic, Blocking,
        start: "int status", end: "";
    /// UPC §5.4.2: the notify half of a split-phase barrier (`gex::Team::barrier_nb`).
    GASP_UPC_NOTIFY = 3, Upcxx, Interval, Blocking,
        start: "int named, int expr", end: "int named, int expr";
    /// UPC §5.4.2: the wait half of a split-phase barrier: the sync of the event of
    /// `gex::Team::barrier_nb` (`gex::Event::wait`, or a test or wait of several that
    /// retires it).
    GASP_UPC_WAIT = 4, Upcxx, Interval, Blocking,
        start: "int named, int expr", end: "int named, int expr";
    /// UPC §5.4.2: a blocking barrier (`upcxx::barrier`, `gex::Team::barrier`).
    GASP_UPC_BARRIER = 5, Upcxx, Interval, Blocking,
        start: "int named, int expr", end: "int named, int expr";
    /// UPC §5.4.4: allocation in the calling rank's shared segment (`upcxx::allocate`,
    /// `new_`, `new_array`).
    GASP_UPC_ALLOC = 20, Upcxx, Interval, Blocking,
        start: "size_t nbytes", end: "size_t nbytes, gasp_upcxx_gptr_t *newshrd_ptr";
    /// UPC §5.4.4: freeing shared memory (`upcxx::deallocate`, `delete_`, `delete_array`).
    GASP_UPC_FREE = 21, Upcxx, Interval, Blocking,
        start: "gasp_upcxx_gptr_t *shrd_ptr", end: "gasp_upcxx_gptr_t *shrd_ptr";
    /// UPC §5.4.4: acquiring a lock (`gex::Hsl::lock`; `lck` is the lock's address).
    GASP_UPC_LOCK = 22, Gex, Interval, Blocking,
        start: "void *lck", end: "void *lck";
    /// UPC §5.4.4: trying a lock (`gex::Hsl::try_lock`); `result` is nonzero on success.
    GASP_UPC_LOCK_ATTEMPT = 23, Gex, Interval, Blocking,
        start: "void *lck", end: "void *lck, int result";
    /// UPC §5.4.4: releasing a lock (`gex::Hsl::unlock`).
    GASP_UPC_UNLOCK = 24, Gex, Interval, Blocking,
        start: "void *lck", end: "void *lck";
    /// UPC §5.4.5: a blocking get (`gex::Team::get_blocking`, `get_val`).
    GASP_UPC_GET = 30, Gex, Interval, Blocking,
        start: "int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n",
        end: "int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n";
    /// UPC §5.4.5: a blocking put (`gex::Team::put_blocking`, `put_val`).
    GASP_UPC_PUT = 31, Gex, Interval, Blocking,
        start: "int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n",
        end: "int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n";
    /// UPC §5.4.6: initiating a non-blocking get (`upcxx::rget*`, `gex::Team::get_nb`,
    /// `get_nbi`). The END's handle is `GASP_NB_TRIVIAL` when the data had arrived
    /// before the call returned.
    GASP_UPC_NB_GET_INIT = 40, Upcxx, Interval, Initiate,
        start: "int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n",
        end: "int is_relaxed, void *dst, gasp_upcxx_gptr_t *src, size_t n, gasp_upc_nb_handle_t handle";
    /// UPC §5.4.6: initiating a non-blocking put (`upcxx::rput*`, `gex::Team::put_nb`,
    /// `put_nbi`).
    GASP_UPC_NB_PUT_INIT = 41, Upcxx, Interval, Initiate,
        start: "int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n",
        end: "int is_relaxed, gasp_upcxx_gptr_t *dst, void *src, size_t n, gasp_upc_nb_handle_t handle";
    /// UPC §5.4.6: the sync that retires non-blocking operations: waiting for them
    /// (`gex::Event::wait`, `wait_all`, `gex::nbi_wait`; `GASP_NB_IMPLICIT` names all
    /// implicit-handle operations), or a test (`Event::test`, `test_some`, `test_all`,
    /// `gex::nbi_test`) or `Event::wait_some` that found them complete.
    GASP_UPC_NB_SYNC = 42, Gex, Interval, Sync,
        start: "gasp_upc_nb_handle_t handle", end: "gasp_upc_nb_handle_t handle";
    /// Sending a remote procedure call (`upcxx::rpc`, `rpc_ff`, `as_rpc` completions):
    /// `nbytes` is the size of the serialized call (0 at the START: the call is
    /// serialized inside the interval, straight into the message), `msgid` pairs it with
    /// its `GASP_UPCXX_RPC_EXECUTE` on the target.
    GASP_UPCXX_RPC_SEND = 0x100, Upcxx, Interval, Blocking,
        start: "int target, size_t nbytes, uint64_t msgid",
        end: "int target, size_t nbytes, uint64_t msgid";
    /// Running a remote procedure call on its target (user code; events inside it are
    /// reported), up to sending its reply (or, if its result is a future not yet ready,
    /// up to arranging for the reply).
    GASP_UPCXX_RPC_EXECUTE = 0x101, Upcxx, Interval, Execute,
        start: "int source, size_t nbytes, uint64_t msgid",
        end: "int source, size_t nbytes, uint64_t msgid";
    /// Waiting for a future that is not ready (`upcxx::Future::wait`): the progress the
    /// wait makes until it is. A wait on a ready future takes no time and reports nothing.
    GASP_UPCXX_FUTURE_WAIT = 0x102, Upcxx, Interval, Blocking,
        start: "(none)", end: "(none)";
    /// Fulfilling a promise (`upcxx::Promise::fulfill_result`, `fulfill_anonymous`):
    /// `count` dependencies are satisfied.
    GASP_UPCXX_PROMISE_FULFILL = 0x103, Upcxx, Atomic, Blocking,
        start: "size_t count", end: "";
    /// An explicit progress call (`upcxx::progress`): `level` is 0 for internal, 1 for user.
    GASP_UPCXX_PROGRESS = 0x104, Upcxx, Interval, Blocking,
        start: "int level", end: "int level";
    /// Sending an Active Message Request (`gex::Team::am_request_*`): `category` is
    /// 0 Short, 1 Medium, 2 Long; `nbytes` the payload.
    GASP_GEX_AM_REQUEST = 0x200, Gex, Interval, Blocking,
        start: "int target, int handler, int category, size_t nbytes",
        end: "int target, int handler, int category, size_t nbytes";
    /// Sending an Active Message Reply (`gex::Token::am_reply_*`).
    GASP_GEX_AM_REPLY = 0x201, Gex, Interval, Blocking,
        start: "int target, int handler, int category, size_t nbytes",
        end: "int target, int handler, int category, size_t nbytes";
    /// Running a client's Active Message handler (user code).
    GASP_GEX_AM_HANDLER = 0x202, Gex, Interval, Execute,
        start: "int source, int handler, int category, size_t nbytes",
        end: "int source, int handler, int category, size_t nbytes";
    /// An explicit poll (`gex::poll`).
    GASP_GEX_POLL = 0x203, Gex, Interval, Blocking,
        start: "(none)", end: "(none)";
    /// Waiting until at least one of `count` pending events is complete
    /// (`gex::Event::wait_some`). UPC syncs one handle at a time, so the wait is an event
    /// of its own; each event it finds complete is then reported retired by a
    /// `GASP_UPC_NB_SYNC` (or, for a barrier's, `GASP_UPC_WAIT`) of no duration.
    GASP_GEX_WAIT_SOME = 0x204, Gex, Interval, Blocking,
        start: "int count", end: "int count";
}

/// The table entry of `tag`, if it is a system event.
pub fn by_tag(tag: u32) -> Option<&'static EventDef> {
    EVENTS
        .binary_search_by_key(&tag, |e| e.tag)
        .ok()
        .map(|i| &EVENTS[i])
}

/// Whether `tag`'s interval runs user code ([`Timing::Execute`]); a match rather than a
/// table search because every reported span asks (the test below keeps it in step).
#[inline]
pub fn runs_user_code(tag: u32) -> bool {
    matches!(tag, GASP_UPCXX_RPC_EXECUTE | GASP_GEX_AM_HANDLER)
}

/// Whether `tag` is an operation one rank directs at another (a put, get, RPC or AM
/// send): these fill the communication matrix, counted at the initiator.
pub fn is_communication(tag: u32) -> bool {
    matches!(
        tag,
        GASP_UPC_GET
            | GASP_UPC_PUT
            | GASP_UPC_NB_GET_INIT
            | GASP_UPC_NB_PUT_INIT
            | GASP_UPCXX_RPC_SEND
            | GASP_GEX_AM_REQUEST
            | GASP_GEX_AM_REPLY
    )
}

/// The table entry named `name`.
pub fn by_name(name: &str) -> Option<&'static EventDef> {
    EVENTS.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_sorted_unique_and_below_user_events() {
        for pair in EVENTS.windows(2) {
            assert!(
                pair[0].tag < pair[1].tag,
                "{} / {}",
                pair[0].name,
                pair[1].name
            );
        }
        assert!(EVENTS.iter().all(|e| e.tag < USEREVT_START && e.tag != 0));
        assert_eq!(by_tag(GASP_UPC_PUT).unwrap().name, "GASP_UPC_PUT");
        assert_eq!(
            by_name("GASP_UPCXX_RPC_SEND").unwrap().tag,
            GASP_UPCXX_RPC_SEND
        );
        assert!(by_tag(USEREVT_START).is_none());
    }

    #[test]
    fn argument_names() {
        let put = by_tag(GASP_UPC_NB_PUT_INIT).unwrap();
        assert_eq!(
            put.start_arg_names().collect::<Vec<_>>(),
            ["is_relaxed", "dst", "src", "n"]
        );
        assert_eq!(put.end_arg_names().last(), Some("handle"));
        assert_eq!(
            by_tag(GASP_UPCXX_FUTURE_WAIT)
                .unwrap()
                .start_arg_names()
                .count(),
            0
        );
    }

    #[test]
    fn runs_user_code_matches_the_table() {
        for e in EVENTS {
            assert_eq!(
                runs_user_code(e.tag),
                e.timing == Timing::Execute,
                "{}",
                e.name
            );
        }
    }

    #[test]
    fn shapes_are_consistent() {
        for e in EVENTS {
            match e.shape {
                Shape::Atomic => assert!(e.end_args.is_empty(), "{}", e.name),
                Shape::Interval => assert!(!e.end_args.is_empty(), "{}", e.name),
            }
        }
    }
}
