//! Non-contiguous one-sided communication (UPC++ spec ch. 15): `rput_irregular`,
//! `rget_irregular`, `rput_regular`, `rget_regular`, `rput_strided`, `rget_strided`.
//!
//! ```
//! use upcxx::{operation_cx, source_cx, GlobalPtr};
//!
//! fn scatter(rows: &[[f64; 3]; 2], dest: GlobalPtr<f64>) {
//!     // Irregular (§15.2.2): runs of (local slice) and (global pointer, length).
//!     let src = rows.iter().map(|r| &r[..]);
//!     let dst = [(dest, 2usize), (dest.add(10), 4)];
//!     let (sent, done) = upcxx::rput_irregular_with(
//!         src,
//!         dst,
//!         source_cx::as_future() | operation_cx::as_future(),
//!     );
//!     sent.wait();
//!     done.wait();
//! }
//! # upcxx::init();
//! # let dest = upcxx::new_array::<f64>(16);
//! # scatter(&[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dest);
//! // Strided (§15.2.7): read back a 2×2 block of the 16 doubles, transposed.
//! let mut block = [0.0f64; 4];
//! upcxx::rget_strided::<2, f64>(dest, [8, 80], &mut block, 0, [16, 8], [2, 2]).wait();
//! assert_eq!(block, [1.0, 3.0, 2.0, 4.0]);
//! # upcxx::delete_array(dest);
//! # upcxx::finalize();
//! ```
//!
//! # Mapping the C++ signatures
//!
//! * **Iterators** (§15.2.1): a sequence of runs is any [`IntoIterator`], consumed
//!   during the call. Local runs are slices (`&[T]` to put from, `&mut [T]` to get
//!   into, or anything [`AsRef`]/[`AsMut`] of them); remote runs of the irregular calls
//!   are `(GlobalPtr<T>, n)` pairs with `n` of any primitive integer type
//!   ([`RunLength`]), by value or by reference (§15.2.2 ¶11); the regular calls take
//!   global pointers and one run length per side.
//! * **Strided** (§15.2.6–7): `Dim` is a const generic and the metadata are arrays of
//!   `Dim` entries, consumed before the call returns. The local base is a slice and
//!   the index of the base element in it; strides are in bytes, as in the spec, and
//!   must be multiples of `T`'s alignment. `Dim == 0` moves one element.
//! * **Completions** (ch. 7): puts provide source, remote and operation completion,
//!   gets operation completion; each call has a `_with` form taking completion objects
//!   and a plain form with the default, `operation_cx::as_future()`. A request a call
//!   cannot honour does not compile:
//!
//!   ```compile_fail,E0277
//!   # use upcxx::{operation_cx, remote_cx, GlobalPtr};
//!   # fn f(gp: GlobalPtr<u64>, d: &mut [u64]) {
//!   // A get has no remote completion (§15.2.7 ¶8).
//!   let cxs = remote_cx::as_rpc(|| (), ()) | operation_cx::as_future();
//!   upcxx::rget_strided_with(gp, [8], d, 0, [8], [1], cxs);
//!   # }
//!   ```
//!
//! # How transfers happen
//!
//! Every call is one `gex` VIS operation (`gex::vis`): irregular transfers are vector
//! transfers, regular ones indexed transfers, strided ones strided transfers. As for
//! `rput` and `rget_into` (see [`crate::rma`]), a put is locally complete when the call
//! returns (source completion at initiation; the put asks for its local-completion
//! leaf and waits for it), and a get, whose destinations the caller lends, is complete
//! when it returns. The `_lent` forms (`lent.rs`) lend their local runs beyond the
//! call instead, and may return with the transfer in flight. Notifications then follow
//! [`crate::rma`]'s path (`finish_put`): queued for this thread's next user-level
//! progress, a remote RPC sent once the data are at the target.
//!
//! # Errors
//!
//! Destination (put) or source (get) runs with affinity to more than one process, a
//! null global pointer in a run that moves data, sequences of different totals and
//! strides that break `T`'s alignment fail with a panic naming the call; what `gex`
//! checks (ranges outside the segment, overlapping destinations but in interleaved
//! strided shapes of more than 2^22 runs, shapes whose size overflows, a local shape
//! outside its slice) fails there with a message naming the
//! `gex` call and the range. Both report the caller's location, before any byte moves.
//! A call whose runs move nothing (all of length zero) completes at once, its target
//! (where a remote completion runs) the owner of its first non-null run; a call with no
//! run at all has no target, and its remote completion runs on the calling rank.
//!
//! # GASP
//!
//! Each call reports one `GASP_UPCXX_VIS_PUT` or `GASP_UPCXX_VIS_GET` (events of our
//! own: GASP has none for non-contiguous transfers) with the caller's location; the
//! `gex` operation inside is not reported.

mod irregular;
mod lent;
mod regular;
mod strided;

pub use irregular::{rget_irregular, rget_irregular_with, rput_irregular, rput_irregular_with};
pub use lent::{
    rget_irregular_lent, rget_irregular_lent_with, rget_regular_lent, rget_regular_lent_with,
    rget_strided_lent, rget_strided_lent_with, rput_irregular_lent, rput_irregular_lent_with,
    rput_regular_lent, rput_regular_lent_with, rput_strided_lent, rput_strided_lent_with,
};
pub use regular::{rget_regular, rget_regular_with, rput_regular, rput_regular_with};
pub use strided::{rget_strided, rget_strided_with, rput_strided, rput_strided_with};

use crate::completion::{CompletionEvents, HasOperation, HasRemote, HasSource};
use crate::global_ptr::GlobalPtr;
use crate::runtime::state::{rt, Rank};

macro_rules! put_events {
    ($name:ident, $call:literal, $section:literal) => {
        #[doc = concat!("The completion events of [`", $call, "_with`]")]
        #[doc = concat!("(", $section, "): source, remote and operation, no values.")]
        #[derive(Debug)]
        pub enum $name {}

        impl CompletionEvents for $name {
            const NAME: &'static str = $call;
            type OpValues = ();
        }
        impl HasSource for $name {}
        impl HasRemote for $name {}
        impl HasOperation for $name {}
    };
}

macro_rules! get_events {
    ($name:ident, $call:literal, $section:literal) => {
        #[doc = concat!("The completion events of [`", $call, "_with`]")]
        #[doc = concat!("(", $section, "): operation, no values.")]
        #[derive(Debug)]
        pub enum $name {}

        impl CompletionEvents for $name {
            const NAME: &'static str = $call;
            type OpValues = ();
        }
        impl HasOperation for $name {}
    };
}

put_events!(RputIrregular, "rput_irregular", "§15.2.2 ¶15");
get_events!(RgetIrregular, "rget_irregular", "§15.2.3 ¶15");
put_events!(RputRegular, "rput_regular", "§15.2.4 ¶10");
get_events!(RgetRegular, "rget_regular", "§15.2.5 ¶10");
put_events!(RputStrided, "rput_strided", "§15.2.6 ¶10–12");
get_events!(RgetStrided, "rget_strided", "§15.2.7 ¶8");
put_events!(RputIrregularLent, "rput_irregular_lent", "§15.2.2 ¶15");
get_events!(RgetIrregularLent, "rget_irregular_lent", "§15.2.3 ¶15");
put_events!(RputRegularLent, "rput_regular_lent", "§15.2.4 ¶10");
get_events!(RgetRegularLent, "rget_regular_lent", "§15.2.5 ¶10");
put_events!(RputStridedLent, "rput_strided_lent", "§15.2.6 ¶10–12");
get_events!(RgetStridedLent, "rget_strided_lent", "§15.2.7 ¶8");

/// The length of a run: any primitive integer type (§15.2.2 ¶11, "size_t with other
/// primitive integral types"). A negative length is refused.
pub trait RunLength: Copy {
    /// The length as a `usize`, `None` if it is negative or does not fit.
    fn to_len(self) -> Option<usize>;
}

macro_rules! run_lengths {
    ($($t:ty),*) => {$(
        impl RunLength for $t {
            #[inline]
            fn to_len(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
        }
    )*};
}
run_lengths!(usize, u8, u16, u32, u64, isize, i8, i16, i32, i64);

/// A run of a remote address sequence of the irregular calls: a global pointer and a
/// number of elements (§15.2.2 ¶10), as a pair by value or by reference.
pub trait RemoteRun<T> {
    /// The run's start and length (`None`: negative or too large).
    fn run(&self) -> (GlobalPtr<T>, Option<usize>);
}

impl<T, L: RunLength> RemoteRun<T> for (GlobalPtr<T>, L) {
    #[inline]
    fn run(&self) -> (GlobalPtr<T>, Option<usize>) {
        (self.0, self.1.to_len())
    }
}

impl<T, R: RemoteRun<T>> RemoteRun<T> for &R {
    #[inline]
    fn run(&self) -> (GlobalPtr<T>, Option<usize>) {
        (**self).run()
    }
}

/// The shape of a call, as reported to GASP (the `shape` argument).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Irregular = 0,
    Regular = 1,
    Strided = 2,
}

/// The one process that the remote runs of `call` have affinity to (§15.2.2 ¶7), from
/// the runs that move data (`0`); if none does, the owner of the first non-null run
/// (`1`: where a remote completion goes, as for runs that move data).
#[derive(Debug, Default)]
struct Affinity(Option<Rank>, Option<Rank>);

impl Affinity {
    /// A run of `len` elements at `gp`.
    #[track_caller]
    fn run<T>(&mut self, call: &str, gp: GlobalPtr<T>, len: usize) {
        if len > 0 {
            self.add(call, gp);
        } else if self.1.is_none() && !gp.is_null() {
            self.1 = Some(gp.where_());
        }
    }

    #[track_caller]
    fn add<T>(&mut self, call: &str, gp: GlobalPtr<T>) {
        if gp.is_null() {
            panic!("upcxx::{call}: a run of the remote sequence starts at a null global pointer");
        }
        match self.0 {
            None => self.0 = Some(gp.where_()),
            Some(r) if r == gp.where_() => {}
            Some(r) => panic!(
                "upcxx::{call}: the remote runs have affinity to ranks {r} and {}; they must \
                 all be on one process",
                gp.where_()
            ),
        }
    }

    /// The target; when no run moves data (nothing is transferred), the owner of the
    /// first run named, or the calling rank if there is none.
    fn rank(&self, call: &str) -> Rank {
        self.0.or(self.1).unwrap_or_else(|| rt(call).rank)
    }
}

/// The byte size of `n` elements of `T`, or a panic naming `call`.
#[track_caller]
fn bytes_of<T>(call: &str, n: usize) -> usize {
    n.checked_mul(std::mem::size_of::<T>()).unwrap_or_else(|| {
        panic!("upcxx::{call}: a run of {n} elements overflows the address space")
    })
}

/// Panics naming `call` when the two sequences hold different numbers of elements
/// (§15.2.2 ¶8).
#[track_caller]
fn check_totals(call: &str, src: usize, dest: usize) {
    if src != dest {
        panic!(
            "upcxx::{call}: the source runs hold {src} elements and the destination runs \
             {dest}; the totals must be equal"
        );
    }
}

/// Runs `op` (the `gex` transfer, returning its event) inside the call's GASP interval.
#[track_caller]
fn reported_put(
    rank: Rank,
    kind: Kind,
    runs: usize,
    bytes: usize,
    op: impl FnOnce() -> gex::Event,
) -> gex::Event {
    let shape = kind as i32;
    let span = gasp::span!(GASP_UPCXX_VIS_PUT, rank, shape, runs, bytes);
    let event = op();
    let handle = crate::reported::nb_handle(&event);
    gasp::end!(span, rank, shape, runs, bytes, handle);
    event
}

/// Runs `op` (the `gex` get, returning its event) inside the call's GASP interval.
#[track_caller]
fn reported_get(
    rank: Rank,
    kind: Kind,
    runs: usize,
    bytes: usize,
    op: impl FnOnce() -> gex::Event,
) -> gex::Event {
    let shape = kind as i32;
    let span = gasp::span!(GASP_UPCXX_VIS_GET, rank, shape, runs, bytes);
    let event = op();
    let handle = crate::reported::nb_handle(&event);
    gasp::end!(span, rank, shape, runs, bytes, handle);
    event
}

/// How long a call lends its local runs to its transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lend {
    /// For the call only: a put has read them, and a get filled them, when it returns.
    Call,
    /// Until the completions say so (the calls of `lent.rs`).
    Beyond,
}

impl Lend {
    /// The flags of a put: with [`Lend::Call`], the leaf of its local completion, which
    /// [`put_started`] waits for; with [`Lend::Beyond`], none, so that `gex` may read the
    /// runs until the operation completes (neither copying them nor waiting for them to
    /// be read), which is then the put's source completion too.
    fn put_flags(self) -> gex::Flags {
        match self {
            Lend::Call => gex::Flags::ENABLE_LEAF_LC,
            Lend::Beyond => gex::Flags::NONE,
        }
    }
}

/// The operation event of a put started with [`Lend::put_flags`]; with [`Lend::Call`],
/// once its local completion has happened, so that source completion happens at
/// initiation.
fn put_started(lend: Lend, started: Result<gex::Event, gex::NoOp>) -> gex::Event {
    let event = started.unwrap_or_else(|_| unreachable!("gex returns NoOp only for IMMEDIATE"));
    if lend == Lend::Call {
        event.query_leaf(gex::EventCategory::LC).wait();
    }
    event
}
