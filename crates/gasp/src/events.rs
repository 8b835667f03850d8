//! The event table: every event tag this implementation reports, in one place.
//!
//! One file on purpose: the table is one list, read top to bottom, and it is the single
//! source of the constants, the tools' lookups, the C header and the typed builders.
//!
//! GASP §3.5 asks for macros mapping symbolic event names to 32-bit tags, and §5.4 lists
//! the UPC system events with their argument lists. This module is the single source of
//! those facts: the Rust constants, the table the tools read ([`EVENTS`]), the C header
//! `include/gasp_upcxx.h` (rendered by [`crate::header::render_events_header`]; a test
//! fails if the checked-in header differs) and the typed argument builders the runtime
//! crates report events with ([`args`]) all come from the one `events!` list below, so
//! they cannot drift.
//!
//! Each argument of the list is `name: Kind`, `Kind` an [`Arg`](crate::Arg) variant: it
//! gives the C type of the header's list (`Int` and `Rank` are `int`, `Size` and `Bytes`
//! `size_t`, `Ptr` `void *`, `GPtr` `gasp_upcxx_gptr_t *`, `Handle`
//! `gasp_upc_nb_handle_t`, `U64` `uint64_t`), the builder's parameter type, and the
//! variant the tool receives (which tells the tools the bytes moved and the peer).
//!
//! Where a UPC event has the meaning of one of our operations, we report that event with
//! the spec's argument list, mapping types as follows: a pointer-to-shared is a
//! `const gasp_upcxx_gptr_t *` (rank and owner-space address, §5.4's "extra level of
//! indirection"), a lock is the `Hsl`'s address, `upc_flag_t`/`upc_op_t` are `int`.
//! What UPC has no name for is named `GASP_UPCXX_*` (UPC++ operations) or `GASP_GEX_*`
//! (GASNet-EX operations), as §5.5 recommends for implementation-specific events.
//!
//! # Collectives
//!
//! The collectives of `gex` (GASNet-EX's `gex_Coll_*NB` and those of the collectives
//! design document) report §5.4.8's `GASP_UPC_ALL_*` events where UPC has the operation,
//! with the spec's argument list, and `GASP_GEX_COLL_*` events where it has none. Every
//! collective is non-blocking: its event is an interval around the initiation
//! ([`Timing::Initiate`]) whose END adds the operation's handle, so a trace draws one
//! async slice per rank from the initiation to the `GASP_UPC_NB_SYNC` of that handle. The
//! UPC arguments map as follows:
//!
//! * `dst`, `src` (pointers-to-shared in UPC): the calling rank's local buffers, as
//!   `void *` (GASNet-EX collectives take local addresses); a buffer a rank does not use
//!   (the source of a broadcast off the root) is reported as the rank passed it.
//! * `perm` (a pointer-to-shared `int` array in UPC): the address of the permutation
//!   the caller passed.
//! * `nbytes`: the bytes of one rank's block, as UPC defines it per collective.
//! * `upc_flags` (`upc_flag_t`, an `int` by §5.4): the operation's flags (`gex_Flags_t`,
//!   or the sync-mode and addressing flags of the design document) as an `int`.
//! * `upc_op` (`upc_op_t`, an `int` by §5.4): the operation (`gex_OP_t`) as an `int`.
//! * `nelems`: the elements of each rank's `src` (`dt_cnt`).
//! * `elem_size`, in the place of UPC's `blk_size`: the size of one element in bytes
//!   (`dt_sz`). Local buffers have no blocking; the element size is what a user type
//!   adds.
//! * `func`: the address of the user's reduction function, 0 for a built-in operation.
//! * `reduction_type` (`gasp_upc_reduction_t`): the element type as the spec's
//!   enumeration numbers it ([`reduction`]), `GASP_GEX_REDUCTION_USER` for a user type.
//!
//! Teams are GASNet-EX's: the events of our own name the team by its id (`team`, an
//! `int` that the team's members agree on), which UPC's, over all threads, do not.

/// The C header's `GASP_UPC_VERSION`-style number of this event list; bump it when an
/// event is added (GASP §5.5).
pub const EVENTS_VERSION: u32 = 7;

/// The first tag returned by `create_event` for user events (GASP §5.3's
/// `GASP_UPC_USEREVT_START`).
pub const USEREVT_START: u32 = 0x1_0000;
/// The last tag returned by `create_event` for user events, inclusive (GASP §5.3's
/// `GASP_UPC_USEREVT_END`).
pub const USEREVT_END: u32 = 0x1_FFFF;

/// Whether `tag` is a user event's (GASP §5.3).
pub fn is_user_event(tag: u32) -> bool {
    (USEREVT_START..=USEREVT_END).contains(&tag)
}

/// The handle reported for a non-blocking operation that completed during its
/// initiation (GASP §5.4.6 `GASP_NB_TRIVIAL`).
pub const NB_TRIVIAL: u64 = 0;
/// The handle of implicit-handle (NBI) operations: one NBI sync retires them all.
pub const NB_IMPLICIT: u64 = 1;

pub mod reduction;

/// Which layer reports an event; the trace's `cat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// A GASNet-EX operation of `gex` (the `GASP_GEX_*` events and the UPC events `gex`
    /// reports).
    Gex,
    /// A UPC++ operation of `upcxx` (the `GASP_UPCXX_*` events and the UPC events
    /// `upcxx` reports).
    Upcxx,
    /// A user event of the program (GASP §5.3).
    User,
}

impl Layer {
    /// The layer's name as a trace category: `gex`, `upcxx` or `user`.
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
    /// The 32-bit tag the symbolic name maps to (GASP §3.5), `evttag` of the events.
    pub tag: u32,
    /// The layer that reports it.
    pub layer: Layer,
    /// Whether it is reported as a START/END pair or as one ATOMIC event.
    pub shape: Shape,
    /// How a trace draws its interval.
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

/// The C type of an argument kind (an [`Arg`](crate::Arg) variant), written as it
/// precedes the argument's name in a C argument list.
macro_rules! c_type {
    (Int) => {
        "int "
    };
    (Rank) => {
        "int "
    };
    (Size) => {
        "size_t "
    };
    (Bytes) => {
        "size_t "
    };
    (Ptr) => {
        "void *"
    };
    (GPtr) => {
        "gasp_upcxx_gptr_t *"
    };
    (Handle) => {
        "gasp_upc_nb_handle_t "
    };
    (U64) => {
        "uint64_t "
    };
}

/// The Rust type of an argument kind: what its [`Arg`](crate::Arg) variant holds.
macro_rules! rust_type {
    (Int) => {
        i32
    };
    (Rank) => {
        u32
    };
    (Size) => {
        usize
    };
    (Bytes) => {
        usize
    };
    (Ptr) => {
        usize
    };
    (GPtr) => {
        crate::GPtr
    };
    (Handle) => {
        u64
    };
    (U64) => {
        u64
    };
}

/// The C argument list of typed arguments, `"int named, int expr"`; `"(none)"` if empty.
macro_rules! c_list {
    () => { "(none)" };
    ($n:ident: $k:ident) => { concat!(c_type!($k), stringify!($n)) };
    ($n:ident: $k:ident, $($rest:tt)+) => {
        concat!(c_type!($k), stringify!($n), ", ", c_list!($($rest)+))
    };
}

/// The number of identifiers given.
macro_rules! count {
    () => { 0 };
    ($head:ident $($tail:ident)*) => { 1 + count!($($tail)*) };
}

/// The argument builders of one event (see [`args`]).
macro_rules! builders {
    (
        $(#[doc = $doc:literal])+
        $name:ident, $shape:ident,
        start($($sa:ident: $sk:ident),*) $(, end($($ea:ident: $ek:ident),*))?
    ) => {
        $(#[doc = $doc])+
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug)]
        pub struct $name;

        impl crate::typed::Tagged for $name {
            const TAG: u32 = super::$name;
        }

        impl crate::typed::$shape for $name {}

        // The builders take the C list's arguments one by one, and §5.4.8's reductions
        // have eight.
        #[allow(clippy::too_many_arguments)]
        impl $name {
            #[doc = concat!("The arguments of its START (or ATOMIC) event: `",
                c_list!($($sa: $sk),*), "`.")]
            #[inline(always)]
            pub fn start(
                self,
                $($sa: rust_type!($sk)),*
            ) -> crate::typed::Start<Self, { count!($($sa)*) }> {
                crate::typed::Start::new(self, [$(crate::Arg::$sk($sa)),*])
            }

            $(
                #[doc = concat!("The arguments of its END event: `",
                    c_list!($($ea: $ek),*), "`.")]
                #[inline(always)]
                pub fn end(
                    self,
                    $($ea: rust_type!($ek)),*
                ) -> crate::typed::End<Self, { count!($($ea)*) }> {
                    crate::typed::End::new(self, [$(crate::Arg::$ek($ea)),*])
                }
            )?
        }
    };
}

/// For the test that the builders agree with the C lists: each event's builders called
/// with default values, and the names of their parameters.
#[cfg(test)]
pub(crate) struct Built {
    pub(crate) tag: u32,
    pub(crate) start: Vec<crate::Arg<'static>>,
    pub(crate) start_names: &'static [&'static str],
    pub(crate) end: Option<(Vec<crate::Arg<'static>>, &'static [&'static str])>,
}

macro_rules! events {
    ($(
        $(#[doc = $doc:literal])+
        $name:ident = $tag:literal, $layer:ident, $shape:ident, $timing:ident,
            start($($sa:ident: $sk:ident),*) $(, end($($ea:ident: $ek:ident),*))?;
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
                start_args: c_list!($($sa: $sk),*),
                end_args: concat!("" $(, c_list!($($ea: $ek),*))?),
                doc: concat!($($doc),+),
            },
        )*];

        /// The typed argument builders of the events, one type per event, named after
        /// its tag: `start` takes the arguments of its START (or ATOMIC) list and
        /// `end` those of its END list, each with the Rust type of its C type (an
        /// `int` is an `i32`, or a `u32` for a rank; a `size_t` a `usize`; a pointer a
        /// `usize` address; a pointer-to-shared a [`GPtr`](crate::GPtr); a handle a
        /// `u64`), and returns the array of [`Arg`](crate::Arg)s the tool receives,
        /// typed by its event. They are generated from the table above, as the C
        /// lists are, and the macros of [`instrument`](crate::instrument) report an
        /// event only with its own builders' arrays.
        pub mod args {
            $(
                builders! {
                    $(#[doc = $doc])+
                    $name, $shape, start($($sa: $sk),*) $(, end($($ea: $ek),*))?
                }
            )*
        }

        /// Every event's builders, called with default values.
        #[cfg(test)]
        pub(crate) fn built() -> Vec<Built> {
            vec![$(
                Built {
                    tag: $tag,
                    start: args::$name
                        .start($({ let $sa = Default::default(); $sa }),*)
                        .args()
                        .to_vec(),
                    start_names: &[$(stringify!($sa)),*],
                    end: None $(.or(Some((
                        args::$name
                            .end($({ let $ea = Default::default(); $ea }),*)
                            .args()
                            .to_vec(),
                        &[$(stringify!($ea)),*][..],
                    ))))?,
                },
            )*]
        }
    };
}

events! {
    /// UPC §5.4.1: the collective end of the program (`upcxx::finalize`,
    /// `gex::Client::finalize`), around its final barrier.
    GASP_UPC_COLLECTIVE_EXIT = 1, Upcxx, Interval, Blocking,
        start(status: Int), end(status: Int);
    /// UPC §5.4.1: a non-collective exit (`gex::exit`).
    GASP_UPC_NONCOLLECTIVE_EXIT = 2, Upcxx, Atomic, Blocking,
        start(status: Int);
    /// UPC §5.4.2: the notify half of a split-phase barrier (`gex::Team::barrier_nb`).
    GASP_UPC_NOTIFY = 3, Upcxx, Interval, Blocking,
        start(named: Int, expr: Int), end(named: Int, expr: Int);
    /// UPC §5.4.2: the wait half of a split-phase barrier: the sync of the event of
    /// `gex::Team::barrier_nb` (`gex::Event::wait`, or a test or wait of several that
    /// retires it).
    GASP_UPC_WAIT = 4, Upcxx, Interval, Blocking,
        start(named: Int, expr: Int), end(named: Int, expr: Int);
    /// UPC §5.4.2: a blocking barrier (`upcxx::barrier`, `gex::Team::barrier`).
    GASP_UPC_BARRIER = 5, Upcxx, Interval, Blocking,
        start(named: Int, expr: Int), end(named: Int, expr: Int);
    /// UPC §5.4.4: allocation in the calling rank's shared segment (`upcxx::allocate`,
    /// `new_`, `new_array`).
    GASP_UPC_ALLOC = 20, Upcxx, Interval, Blocking,
        start(nbytes: Size), end(nbytes: Size, newshrd_ptr: GPtr);
    /// UPC §5.4.4: freeing shared memory (`upcxx::deallocate`, `delete_`, `delete_array`).
    GASP_UPC_FREE = 21, Upcxx, Interval, Blocking,
        start(shrd_ptr: GPtr), end(shrd_ptr: GPtr);
    /// UPC §5.4.4: acquiring a lock (`gex::Hsl::lock`; `lck` is the lock's address).
    GASP_UPC_LOCK = 22, Gex, Interval, Blocking,
        start(lck: Ptr), end(lck: Ptr);
    /// UPC §5.4.4: trying a lock (`gex::Hsl::try_lock`); `result` is nonzero on success.
    GASP_UPC_LOCK_ATTEMPT = 23, Gex, Interval, Blocking,
        start(lck: Ptr), end(lck: Ptr, result: Int);
    /// UPC §5.4.4: releasing a lock (`gex::Hsl::unlock`).
    GASP_UPC_UNLOCK = 24, Gex, Interval, Blocking,
        start(lck: Ptr), end(lck: Ptr);
    /// UPC §5.4.5: a blocking get (`gex::Team::get_blocking`, `get_val`).
    GASP_UPC_GET = 30, Gex, Interval, Blocking,
        start(is_relaxed: Int, dst: Ptr, src: GPtr, n: Bytes),
        end(is_relaxed: Int, dst: Ptr, src: GPtr, n: Bytes);
    /// UPC §5.4.5: a blocking put (`gex::Team::put_blocking`, `put_val`).
    GASP_UPC_PUT = 31, Gex, Interval, Blocking,
        start(is_relaxed: Int, dst: GPtr, src: Ptr, n: Bytes),
        end(is_relaxed: Int, dst: GPtr, src: Ptr, n: Bytes);
    /// UPC §5.4.6: initiating a non-blocking get (`upcxx::rget*`, `gex::Team::get_nb`,
    /// `get_nbi`). The END's handle is `GASP_NB_TRIVIAL` when the data had arrived
    /// before the call returned.
    GASP_UPC_NB_GET_INIT = 40, Upcxx, Interval, Initiate,
        start(is_relaxed: Int, dst: Ptr, src: GPtr, n: Bytes),
        end(is_relaxed: Int, dst: Ptr, src: GPtr, n: Bytes, handle: Handle);
    /// UPC §5.4.6: initiating a non-blocking put (`upcxx::rput*`, `gex::Team::put_nb`,
    /// `put_nbi`).
    GASP_UPC_NB_PUT_INIT = 41, Upcxx, Interval, Initiate,
        start(is_relaxed: Int, dst: GPtr, src: Ptr, n: Bytes),
        end(is_relaxed: Int, dst: GPtr, src: Ptr, n: Bytes, handle: Handle);
    /// UPC §5.4.6: the sync that retires non-blocking operations: waiting for them
    /// (`gex::Event::wait`, `wait_all`, `gex::nbi_wait`; `GASP_NB_IMPLICIT` names all
    /// implicit-handle operations), or a test (`Event::test`, `test_some`, `test_all`,
    /// `gex::nbi_test`) or `Event::wait_some` that found them complete.
    GASP_UPC_NB_SYNC = 42, Gex, Interval, Sync,
        start(handle: Handle), end(handle: Handle);
    /// UPC §5.4.8: initiating a broadcast from the root's `src` to every rank's `dst`
    /// (`gex_Coll_BroadcastNB`, `gasnet_coll_broadcast_nb`).
    GASP_UPC_ALL_BROADCAST = 50, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int),
        end(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int, handle: Handle);
    /// UPC §5.4.8: initiating a scatter of the root's `src`, one `nbytes` block to each
    /// rank's `dst` (`gasnet_coll_scatter_nb`).
    GASP_UPC_ALL_SCATTER = 51, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int),
        end(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int, handle: Handle);
    /// UPC §5.4.8: initiating a gather of every rank's `nbytes` block into the root's
    /// `dst` (`gasnet_coll_gather_nb`).
    GASP_UPC_ALL_GATHER = 52, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int),
        end(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int, handle: Handle);
    /// UPC §5.4.8: initiating a gather of every rank's block into every rank's `dst`
    /// (`gasnet_coll_gather_all_nb`).
    GASP_UPC_ALL_GATHER_ALL = 53, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int),
        end(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int, handle: Handle);
    /// UPC §5.4.8: initiating an exchange, block `j` of rank `i`'s `src` to block `i` of
    /// rank `j`'s `dst` (`gasnet_coll_exchange_nb`).
    GASP_UPC_ALL_EXCHANGE = 54, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int),
        end(dst: Ptr, src: Ptr, nbytes: Bytes, upc_flags: Int, handle: Handle);
    /// UPC §5.4.8: initiating a permute, each rank's block to the `dst` of the rank its
    /// entry of `perm` names.
    GASP_UPC_ALL_PERMUTE = 55, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, perm: Ptr, nbytes: Bytes, upc_flags: Int),
        end(dst: Ptr, src: Ptr, perm: Ptr, nbytes: Bytes, upc_flags: Int, handle: Handle);
    /// UPC §5.4.8: initiating a reduction to one rank, element-wise over the ranks' `src`
    /// into the root's `dst` (`gex_Coll_ReduceToOneNB`).
    GASP_UPC_ALL_REDUCE = 56, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, upc_op: Int, nelems: Size, elem_size: Size, func: Ptr,
            upc_flags: Int, reduction_type: Int),
        end(dst: Ptr, src: Ptr, upc_op: Int, nelems: Size, elem_size: Size, func: Ptr,
            upc_flags: Int, reduction_type: Int, handle: Handle);
    /// UPC §5.4.8: initiating a prefix reduction (scan): rank `i`'s `dst` gets the
    /// reduction of the `src` of ranks `0..=i`.
    GASP_UPC_ALL_PREFIX_REDUCE = 57, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, upc_op: Int, nelems: Size, elem_size: Size, func: Ptr,
            upc_flags: Int, reduction_type: Int),
        end(dst: Ptr, src: Ptr, upc_op: Int, nelems: Size, elem_size: Size, func: Ptr,
            upc_flags: Int, reduction_type: Int, handle: Handle);
    /// Sending a remote procedure call (`upcxx::rpc`, `rpc_ff`, `as_rpc` completions):
    /// `nbytes` is the size of the serialized call (0 at the START: the call is
    /// serialized inside the interval, straight into the message), `msgid` pairs it with
    /// its `GASP_UPCXX_RPC_EXECUTE` on the target.
    GASP_UPCXX_RPC_SEND = 0x100, Upcxx, Interval, Blocking,
        start(target: Rank, nbytes: Bytes, msgid: U64),
        end(target: Rank, nbytes: Bytes, msgid: U64);
    /// Running a remote procedure call on its target (user code; events inside it are
    /// reported), up to sending its reply (or, if its result is a future not yet ready,
    /// up to arranging for the reply).
    GASP_UPCXX_RPC_EXECUTE = 0x101, Upcxx, Interval, Execute,
        start(source: Rank, nbytes: Bytes, msgid: U64),
        end(source: Rank, nbytes: Bytes, msgid: U64);
    /// Waiting for a future that is not ready (`upcxx::Future::wait`): the progress the
    /// wait makes until it is. A wait on a ready future takes no time and reports nothing.
    GASP_UPCXX_FUTURE_WAIT = 0x102, Upcxx, Interval, Blocking,
        start(), end();
    /// Fulfilling a promise (`upcxx::Promise::fulfill_result`, `fulfill_anonymous`):
    /// `count` dependencies are satisfied.
    GASP_UPCXX_PROMISE_FULFILL = 0x103, Upcxx, Atomic, Blocking,
        start(count: Size);
    /// An explicit progress call (`upcxx::progress`): `level` is 0 for internal, 1 for user.
    GASP_UPCXX_PROGRESS = 0x104, Upcxx, Interval, Blocking,
        start(level: Int), end(level: Int);
    /// A barrier over team `team` (`upcxx::coll::barrier`; `upcxx::barrier`, over the
    /// world, reports `GASP_UPC_BARRIER`): the whole wait.
    GASP_UPCXX_BARRIER = 0x110, Upcxx, Interval, Blocking,
        start(team: U64), end(team: U64);
    /// Initiating a barrier over team `team` (`upcxx::barrier_async`). As for every
    /// UPC++ collective, the interval is the initiating call; the wait for its
    /// completion is the future's (`GASP_UPCXX_FUTURE_WAIT`).
    GASP_UPCXX_BARRIER_ASYNC = 0x111, Upcxx, Interval, Blocking,
        start(team: U64), end(team: U64);
    /// Initiating a broadcast of `nbytes` bytes from team rank `root` of team `team`
    /// (`upcxx::broadcast`, `broadcast_buffer`).
    GASP_UPCXX_BROADCAST = 0x112, Upcxx, Interval, Blocking,
        start(team: U64, root: Int, nbytes: Bytes), end(team: U64, root: Int, nbytes: Bytes);
    /// Initiating a reduction of `nelems` elements of `elem_size` bytes to team rank
    /// `root` of team `team` (`upcxx::reduce_one`, `reduce_one_buffer`); `upc_op` is the
    /// `gex` operation (`GEX_OP_USER`/`USER_NC` for a closure).
    GASP_UPCXX_REDUCE_ONE = 0x113, Upcxx, Interval, Blocking,
        start(team: U64, root: Int, nelems: Size, elem_size: Size, upc_op: Int),
        end(team: U64, root: Int, nelems: Size, elem_size: Size, upc_op: Int);
    /// Initiating a reduction to every rank of team `team` (`upcxx::reduce_all`,
    /// `reduce_all_buffer`); the arguments as for `GASP_UPCXX_REDUCE_ONE`.
    GASP_UPCXX_REDUCE_ALL = 0x114, Upcxx, Interval, Blocking,
        start(team: U64, nelems: Size, elem_size: Size, upc_op: Int),
        end(team: U64, nelems: Size, elem_size: Size, upc_op: Int);
    /// Splitting team `team` (`upcxx::Team::split`, collective and blocking) with this
    /// rank's `color` (negative for `color_none`) and `key`; the END adds the new team's
    /// id (`u64::MAX` for the invalid team of `color_none`).
    GASP_UPCXX_TEAM_SPLIT = 0x115, Upcxx, Interval, Blocking,
        start(team: U64, color: Int, key: Int), end(team: U64, color: Int, key: Int, new_team: U64);
    /// Destroying team `team` (`upcxx::Team::destroy`, collective), entry barrier included.
    GASP_UPCXX_TEAM_DESTROY = 0x116, Upcxx, Interval, Blocking,
        start(team: U64), end(team: U64);
    /// Building this rank's member of a distributed object over team `team`
    /// (`upcxx::DistObject::new`, collective, without communication); the END adds the
    /// object's number among the team's distributed objects (its id is the pair). The
    /// futures of `DistId::when_here` waiting for it are readied inside.
    GASP_UPCXX_DIST_OBJECT_CONSTRUCT = 0x120, Upcxx, Interval, Blocking,
        start(team: U64), end(team: U64, object: U64);
    /// Initiating a fetch of the value of distributed object `object` of team `team` at
    /// team rank `rank` (`upcxx::DistObject::fetch`); the RPC it sends is reported
    /// inside, the wait for its value is the future's.
    GASP_UPCXX_DIST_OBJECT_FETCH = 0x121, Upcxx, Interval, Blocking,
        start(team: U64, object: U64, rank: Rank), end(team: U64, object: U64, rank: Rank);
    /// Destroying this rank's member of distributed object `object` of team `team`
    /// (dropping the `upcxx::DistObject` that `new` returned). A drop has no caller's
    /// line, so the event is reported at the line that built the object.
    GASP_UPCXX_DIST_OBJECT_DESTROY = 0x122, Upcxx, Atomic, Blocking,
        start(team: U64, object: U64);
    /// Initiating a non-contiguous put of `n` bytes to rank `target` (`upcxx::rput_irregular`,
    /// `rput_regular`, `rput_strided`; UPC++ ch. 15): `shape` is 0 irregular, 1 regular,
    /// 2 strided, `runs` the contiguous runs of the description (the sum over both
    /// sides for irregular and regular, the elements for strided). GASP has no
    /// non-contiguous events.
    GASP_UPCXX_VIS_PUT = 0x130, Upcxx, Interval, Initiate,
        start(target: Rank, shape: Int, runs: Size, n: Bytes),
        end(target: Rank, shape: Int, runs: Size, n: Bytes, handle: Handle);
    /// Initiating a non-contiguous get of `n` bytes from rank `target`
    /// (`upcxx::rget_irregular`, `rget_regular`, `rget_strided`); the arguments as for
    /// `GASP_UPCXX_VIS_PUT`.
    GASP_UPCXX_VIS_GET = 0x131, Upcxx, Interval, Initiate,
        start(target: Rank, shape: Int, runs: Size, n: Bytes),
        end(target: Rank, shape: Int, runs: Size, n: Bytes, handle: Handle);
    /// Initiating an atomic operation of an atomic domain (`upcxx::AtomicDomain::load`,
    /// `store`, `compare_exchange`, `fetch_add`, ...; UPC++ ch. 13) on the `nbytes`-byte
    /// object at `target`: `op` is the `gex` operation code (`gex_OP_t`), `dt` the data
    /// type (`gex_DT_t`), `operand1` and `operand2` the operands' bits (0 where the
    /// operation takes fewer). The wait for its value is the future's.
    GASP_UPCXX_ATOMIC_OP = 0x140, Upcxx, Interval, Blocking,
        start(target: GPtr, op: Int, dt: Int, operand1: U64, operand2: U64, nbytes: Bytes),
        end(target: GPtr, op: Int, dt: Int, operand1: U64, operand2: U64, nbytes: Bytes);
    /// Constructing this rank's representative of an atomic domain over team `team`
    /// (`upcxx::AtomicDomain::new`, collective) for the operations `ops` (a bit set of
    /// `gex_OP_t`) on data type `dt`.
    GASP_UPCXX_ATOMIC_DOMAIN_CONSTRUCT = 0x141, Upcxx, Interval, Blocking,
        start(team: U64, dt: Int, ops: Int), end(team: U64, dt: Int, ops: Int);
    /// Destroying an atomic domain over team `team` (`upcxx::AtomicDomain::destroy`,
    /// collective), entry barrier included.
    GASP_UPCXX_ATOMIC_DOMAIN_DESTROY = 0x142, Upcxx, Interval, Blocking,
        start(team: U64), end(team: U64);
    /// Copying `n` bytes between memory of any kinds (`upcxx::copy`, `copy_from_host`,
    /// `copy_to_host`; UPC++ ch. 16): `peer` is the rank at the other end (the
    /// destination's, unless it is this rank's and the source's is not), `dst` and
    /// `src` the ends (a host slice as this rank's pointer), `dst_kind` and `src_kind`
    /// their memory kinds (`upcxx::KindId`: 1 host, 2 cuda_device). Complete inside
    /// the call; its notifications are the futures'.
    GASP_UPCXX_COPY = 0x150, Upcxx, Interval, Blocking,
        start(peer: Rank, dst: GPtr, src: GPtr, dst_kind: Int, src_kind: Int, n: Bytes),
        end(peer: Rank, dst: GPtr, src: GPtr, dst_kind: Int, src_kind: Int, n: Bytes);
    /// Creating this rank's representative of a collective device of memory kind
    /// `kind` (`upcxx::CudaDevice::new`, collective over the world): `device` is its id,
    /// -1 for an inactive device.
    GASP_UPCXX_DEVICE_CONSTRUCT = 0x151, Upcxx, Interval, Blocking,
        start(kind: Int, device: Int), end(kind: Int, device: Int);
    /// Destroying a collective device (`upcxx::CudaDevice::destroy`), entry barrier
    /// included.
    GASP_UPCXX_DEVICE_DESTROY = 0x152, Upcxx, Interval, Blocking,
        start(kind: Int, device: Int), end(kind: Int, device: Int);
    /// Allocating the `nbytes`-byte segment of a device allocator on device `device`
    /// (`upcxx::DeviceAllocator::new`).
    GASP_UPCXX_DEVICE_SEGMENT = 0x153, Upcxx, Interval, Blocking,
        start(device: Int, nbytes: Size), end(device: Int, nbytes: Size);
    /// Allocating `nbytes` in a device segment (`upcxx::DeviceAllocator::allocate`); the
    /// END adds the pointer (null when the segment had no room).
    GASP_UPCXX_DEVICE_ALLOC = 0x154, Upcxx, Interval, Blocking,
        start(device: Int, nbytes: Size), end(device: Int, nbytes: Size, ptr: GPtr);
    /// Freeing device memory (`upcxx::DeviceAllocator::deallocate`).
    GASP_UPCXX_DEVICE_FREE = 0x155, Upcxx, Interval, Blocking,
        start(device: Int, ptr: GPtr), end(device: Int, ptr: GPtr);
    /// Sending an Active Message Request (`gex::Team::am_request_*`): `category` is
    /// 0 Short, 1 Medium, 2 Long; `nbytes` the payload.
    GASP_GEX_AM_REQUEST = 0x200, Gex, Interval, Blocking,
        start(target: Rank, handler: Int, category: Int, nbytes: Bytes),
        end(target: Rank, handler: Int, category: Int, nbytes: Bytes);
    /// Sending an Active Message Reply (`gex::Token::am_reply_*`).
    GASP_GEX_AM_REPLY = 0x201, Gex, Interval, Blocking,
        start(target: Rank, handler: Int, category: Int, nbytes: Bytes),
        end(target: Rank, handler: Int, category: Int, nbytes: Bytes);
    /// Running a client's Active Message handler (user code).
    GASP_GEX_AM_HANDLER = 0x202, Gex, Interval, Execute,
        start(source: Rank, handler: Int, category: Int, nbytes: Bytes),
        end(source: Rank, handler: Int, category: Int, nbytes: Bytes);
    /// An explicit poll (`gex::poll`).
    GASP_GEX_POLL = 0x203, Gex, Interval, Blocking,
        start(), end();
    /// Waiting until at least one of `count` pending events is complete
    /// (`gex::Event::wait_some`). UPC syncs one handle at a time, so the wait is an event
    /// of its own; each event it finds complete is then reported retired by a
    /// `GASP_UPC_NB_SYNC` (or, for a barrier's, `GASP_UPC_WAIT`) of no duration.
    GASP_GEX_WAIT_SOME = 0x204, Gex, Interval, Blocking,
        start(count: Int), end(count: Int);
    /// Initiating a barrier over team `team` (`gex_Coll_BarrierNB`). UPC's split-phase
    /// events cannot tell which of several barriers in flight a `GASP_UPC_WAIT`
    /// completes; this one is synced as a non-blocking operation, by the
    /// `GASP_UPC_NB_SYNC` of its END's handle.
    GASP_GEX_COLL_BARRIER = 0x205, Gex, Interval, Initiate,
        start(team: Int), end(team: Int, handle: Handle);
    /// Initiating a reduction to all ranks, element-wise over the ranks' `src` into every
    /// rank's `dst` (`gex_Coll_ReduceToAllNB`): the list of `GASP_UPC_ALL_REDUCE`.
    GASP_GEX_COLL_REDUCE_TO_ALL = 0x206, Gex, Interval, Initiate,
        start(dst: Ptr, src: Ptr, upc_op: Int, nelems: Size, elem_size: Size, func: Ptr,
            upc_flags: Int, reduction_type: Int),
        end(dst: Ptr, src: Ptr, upc_op: Int, nelems: Size, elem_size: Size, func: Ptr,
            upc_flags: Int, reduction_type: Int, handle: Handle);
    /// Splitting team `team` of `size` ranks (`gex_TM_Split`, collective and blocking):
    /// this rank's `color` (-1 for none) and `key`; the END adds the new team's id and
    /// size (-1 and 0 for a rank that gets no team).
    GASP_GEX_TM_SPLIT = 0x207, Gex, Interval, Blocking,
        start(team: Int, size: Int, color: Int, key: Int),
        end(team: Int, size: Int, color: Int, key: Int, new_team: Int, new_size: Int);
    /// Destroying team `team` of `size` ranks (`gex_TM_Destroy`, collective).
    GASP_GEX_TM_DESTROY = 0x208, Gex, Interval, Blocking,
        start(team: Int, size: Int), end(team: Int, size: Int);
    /// Initiating a VIS put of `n` bytes to rank `target` (`gex::Team::vector_put_*`,
    /// `indexed_put_*`, `strided_put_*`, every completion form; GASNet-EX
    /// `gex_VIS_*Put*`): `shape` is 0 vector, 1 indexed, 2 strided; `runs` the entries
    /// of both lists (vector, indexed) or the elements (strided). The END's handle is
    /// `GASP_NB_TRIVIAL` when the operation completed inside the call (always for the
    /// Blocking forms), `GASP_NB_IMPLICIT` for a pending NBI one.
    GASP_GEX_VIS_PUT = 0x220, Gex, Interval, Initiate,
        start(target: Rank, shape: Int, runs: Size, n: Bytes),
        end(target: Rank, shape: Int, runs: Size, n: Bytes, handle: Handle);
    /// Initiating a VIS get of `n` bytes from rank `target` (`gex::Team::vector_get_*`,
    /// `indexed_get_*`, `strided_get_*`); the arguments as for `GASP_GEX_VIS_PUT`.
    GASP_GEX_VIS_GET = 0x221, Gex, Interval, Initiate,
        start(target: Rank, shape: Int, runs: Size, n: Bytes),
        end(target: Rank, shape: Int, runs: Size, n: Bytes, handle: Handle);
    /// Initiating a remote atomic operation (`gex_AD_OpNB_*`, `gex_AD_OpNBI_*`) on the
    /// `nbytes`-byte object at `target`: `result` is the initiator's output location of
    /// a fetching operation (0 for none), `op` the operation (`gex_OP_t`), `dt` the data
    /// type (`gex_DT_t`), `operand1` and `operand2` the operands' bits (0 where the
    /// operation takes fewer). The END's handle is `GASP_NB_TRIVIAL` when the operation
    /// was complete at return.
    GASP_GEX_AD_OP = 0x230, Gex, Interval, Initiate,
        start(target: GPtr, result: Ptr, op: Int, dt: Int, operand1: U64, operand2: U64,
            nbytes: Bytes),
        end(target: GPtr, result: Ptr, op: Int, dt: Int, operand1: U64, operand2: U64,
            nbytes: Bytes, handle: Handle);
    /// Creating an atomic domain over team `team` (`gex_AD_Create`, collective) for the
    /// operations `ops` (a bit set of `gex_OP_t`) on data type `dt`, with `flags`.
    GASP_GEX_AD_CREATE = 0x231, Gex, Interval, Blocking,
        start(team: Int, dt: Int, ops: Int, flags: Int),
        end(team: Int, dt: Int, ops: Int, flags: Int);
    /// Destroying an atomic domain over team `team` (`gex_AD_Destroy`, collective).
    GASP_GEX_AD_DESTROY = 0x232, Gex, Interval, Blocking,
        start(team: Int), end(team: Int);
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

/// Whether `tag` is an operation one rank directs at another (a put, get, RPC, AM send
/// or remote atomic): these fill the communication matrix, counted at the initiator.
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
            | GASP_GEX_VIS_PUT
            | GASP_GEX_VIS_GET
            | GASP_UPCXX_VIS_PUT
            | GASP_UPCXX_VIS_GET
            | GASP_GEX_AD_OP
            | GASP_UPCXX_ATOMIC_OP
            | GASP_UPCXX_COPY
    )
}

/// The table entry named `name`.
pub fn by_name(name: &str) -> Option<&'static EventDef> {
    EVENTS.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests;
