//! The record format of the tracer's per-thread buffers.
//!
//! What a record costs is mostly the memory it is written to: on a virtual machine the
//! first touch of a page costs microseconds, more than all the instructions of an event. So records are small and the memory is
//! touched before it is needed:
//!
//! * a record is one header word and the arguments that changed. The header holds the
//!   *site* (an index into the thread's table of distinct (tag, type, call site,
//!   argument kinds), found through a small direct-mapped cache), a mask of the
//!   arguments equal to the same argument of the thread's previous record (left out:
//!   the END of a put repeats its START, a loop repeats its pointers), and the ticks
//!   since the previous record (a clock record carries the absolute time when the gap
//!   does not fit). An argument takes one word, a global pointer two. A library
//!   interval (a span of the dispatcher) is one record, written at its END with the
//!   END's arguments and the interval's duration, that decodes into its START and END:
//!   a `upcxx::rput(v, p).wait()` in a loop takes four words for its four events. It is
//!   written in place, into the chunk's spare room (checked once for the largest
//!   record), by code inlined into the dispatcher's span functions;
//! * an interval whose END names no arguments (a future wait's: where the program
//!   resumes after waiting, usually on a round trip's critical path) is only kept, and
//!   written before the thread's next record (which usually comes once the program has
//!   sent its next message) or at finish;
//! * each thread's first buffer, [`GASP_TRACE_BUFFER`](super::GASP_TRACE_BUFFER) MiB
//!   (default [`DEFAULT_BUFFER_MIB`](super::DEFAULT_BUFFER_MIB)), is allocated and
//!   touched when the thread registers (the initializing thread: when the tool is
//!   created), outside the measured program;
//!   further chunks of [`CHUNK_WORDS`] words are allocated as needed and touched as
//!   written.

use std::panic::Location;

use crate::timer::Ticks;
use crate::tool::{EventType, GPtr};

/// Arguments kept per record: as many as the system event with the most has (the
/// reductions' ENDs, whose handle comes ninth); a user event's further ones are dropped.
pub const MAX_ARGS: usize = 9;
/// Words of each further chunk of a thread's buffer.
pub const CHUNK_WORDS: usize = 1 << 20;

/// An argument as decoded.
#[derive(Clone, Copy, Debug)]
pub(super) enum Stored {
    I(i64),
    U(u64),
    F(f64),
    G(GPtr),
    /// Index into the thread's strings.
    S(u32),
}

/// A decoded record.
#[derive(Clone, Copy)]
pub(super) struct Record {
    pub(super) ticks: Ticks,
    pub(super) location: &'static Location<'static>,
    pub(super) tag: u32,
    pub(super) ty: EventType,
    pub(super) nargs: u8,
    pub(super) args: [Stored; MAX_ARGS],
}

// The header word of a record: site | same-mask | delta ticks.
pub(super) const SITE_BITS: u32 = 20;
pub(super) const SITE_MASK: u64 = (1 << SITE_BITS) - 1;
pub(super) const SAME_SHIFT: u32 = SITE_BITS;
pub(super) const DELTA_SHIFT: u32 = SITE_BITS + MAX_ARGS as u32;
pub(super) const DELTA_MAX: u64 = u64::MAX >> DELTA_SHIFT;
/// The site of a clock record, whose next word is the absolute tick count.
pub(super) const CLOCK: u64 = SITE_MASK;
/// Words a record may take: a clock record, the header, an interval's duration, two
/// per argument.
pub(super) const RECORD_MAX_WORDS: usize = 4 + 2 * MAX_ARGS;
/// The type field of a site whose records are whole intervals (START and END, see
/// [`ThreadTrace::push`]).
pub(super) const INTERVAL: u64 = 3;

// Argument kinds, three bits per argument in a site.
pub(super) const K_INT: u64 = 0;
pub(super) const K_UNSIGNED: u64 = 1;
pub(super) const K_FLOAT: u64 = 2;
pub(super) const K_GPTR: u64 = 3;
pub(super) const K_STR: u64 = 4;

/// Entries of the direct-mapped site cache (a power of two).
pub(super) const SITE_CACHE: usize = 256;

/// What records of one site share: the event, its call site, its argument kinds.
#[derive(Clone, Copy)]
pub(super) struct Site {
    pub(super) location: &'static Location<'static>,
    /// tag | type << [`META_TYPE`] | nargs << [`META_NARGS`] | kinds << [`META_KINDS`].
    pub(super) meta: u64,
}

/// Where the fields of a site's `meta` start: the tag (every tag, user events' included,
/// is below 2^18), the type (2 bits), the argument count (4 bits), and the argument
/// kinds (3 bits each).
pub(super) const META_TYPE: u32 = 18;
pub(super) const META_NARGS: u32 = 20;
pub(super) const META_KINDS: u32 = 24;
const _: () = assert!(crate::events::USEREVT_END < 1 << META_TYPE);
const _: () = assert!(MAX_ARGS < 16 && META_KINDS as usize + 3 * MAX_ARGS <= 64);

impl Site {
    pub(super) fn tag(&self) -> u32 {
        (self.meta & ((1 << META_TYPE) - 1)) as u32
    }

    /// The type of its records; an interval's are ENDs, each preceded by its START.
    pub(super) fn ty(&self) -> EventType {
        match self.meta >> META_TYPE & 3 {
            0 => EventType::Start,
            2 => EventType::Atomic,
            _ => EventType::End,
        }
    }

    pub(super) fn interval(&self) -> bool {
        self.meta >> META_TYPE & 3 == INTERVAL
    }

    pub(super) fn nargs(&self) -> usize {
        (self.meta >> META_NARGS & 15) as usize
    }

    pub(super) fn kind(&self, i: usize) -> u64 {
        self.meta >> (META_KINDS as usize + 3 * i) & 7
    }
}
