//! A thread's profile: one row per (event, call site), found through a small cache on
//! the hot path, and the thread's row of the communication matrix.

use std::panic::Location;

use rustc_hash::FxHashMap;

use crate::events;
use crate::timer::Ticks;
use crate::tool::{Arg, Event, EventType};

#[derive(Clone, Copy)]
/// A row: what the events of one (tag, call site) added up to.
pub(super) struct Stats {
    pub(super) location: &'static Location<'static>,
    pub(super) atomic: bool,
    /// Where the event's arguments hold its bytes ([`arg_bytes`]).
    bytes_at: u8,
    /// Where they hold its peer, for a communication event ([`arg_peer`]); else
    /// [`NO_ARG`].
    peer_at: u8,
    pub(super) count: u64,
    pub(super) total: Ticks,
    pub(super) min: Ticks,
    pub(super) max: Ticks,
    pub(super) bytes: u64,
}

/// An argument position: none.
const NO_ARG: u8 = u8::MAX;
/// An argument position: not fixed, look at every argument (user events).
const SCAN: u8 = u8::MAX - 1;

struct Open {
    start: Ticks,
    location: &'static Location<'static>,
    tag: u32,
    /// The bytes the START named: only a user event's (a system event's END repeats
    /// its START's arguments and adds those known only at the end).
    bytes: u64,
}

/// Entries of the direct-mapped row cache (a power of two).
const CACHE: usize = 64;

/// A library interval whose END named no arguments, not yet counted in its row.
#[derive(Clone, Copy)]
struct Deferred {
    location: &'static Location<'static>,
    tag: u32,
    ticks: Ticks,
}

/// Deferred intervals a thread holds at most; one more counts them all first.
const DEFERRED: usize = 32;

/// A row of the cache: the key (tag, call-site address) and the row's index.
#[derive(Clone, Copy)]
struct Cached {
    location: usize,
    tag: u32,
    row: u32,
}

/// One thread's rows and its row of the communication matrix.
pub(super) struct ThreadProfile {
    open: Vec<Open>,
    /// The rows, in order of first appearance.
    pub(super) rows: Vec<Stats>,
    /// Row by (tag, call-site address).
    pub(super) index: FxHashMap<(u32, usize), u32>,
    cache: [Cached; CACHE],
    /// Per destination rank: (bytes, messages).
    pub(super) sent: Vec<(u64, u64)>,
    /// Intervals to count later ([`ThreadProfile::defer`]); the first
    /// `deferred_len` are set.
    deferred: [Deferred; DEFERRED],
    pub(super) deferred_len: usize,
}

impl ThreadProfile {
    pub(super) fn new(ranks: u32) -> ThreadProfile {
        ThreadProfile {
            open: Vec::with_capacity(16),
            rows: Vec::new(),
            index: FxHashMap::default(),
            cache: [Cached {
                location: 0,
                tag: 0,
                row: 0,
            }; CACHE],
            sent: vec![(0, 0); ranks as usize],
            deferred: [Deferred {
                location: Location::caller(),
                tag: 0,
                ticks: 0,
            }; DEFERRED],
            deferred_len: 0,
        }
    }

    #[inline(always)]
    pub(super) fn start(
        &mut self,
        now: Ticks,
        tag: u32,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
    ) {
        let bytes = if crate::events::is_user_event(tag) {
            bytes_of(args)
        } else {
            0
        };
        self.open.push(Open {
            start: now,
            location,
            tag,
            bytes,
        });
    }

    #[inline(always)]
    pub(super) fn end(&mut self, now: Ticks, tag: u32, args: &[Arg<'_>]) {
        // The innermost open event, almost always the top of the stack.
        let open = match self.open.pop() {
            Some(o) if o.tag == tag => Some(o),
            Some(o) => {
                self.open.push(o);
                self.take_open(tag)
            }
            None => None,
        };
        if let Some(o) = open {
            let elapsed = now.saturating_sub(o.start);
            self.record(o.tag, o.location, false, elapsed, args, o.bytes);
        }
    }

    /// Queues a library interval whose END named no arguments (a wait's, typically):
    /// its row is found and updated later, at the thread's next END with arguments
    /// (see [`ThreadProfile::catch_up`]), when the queue is full, or at the end of
    /// the run. Such an END is where the program resumes after waiting, the part of a
    /// round trip where every instruction counts.
    #[inline(always)]
    pub(super) fn defer(&mut self, tag: u32, location: &'static Location<'static>, ticks: Ticks) {
        if self.deferred_len == DEFERRED {
            self.count_deferred();
        }
        if let Some(d) = self.deferred.get_mut(self.deferred_len) {
            *d = Deferred {
                location,
                tag,
                ticks,
            };
            self.deferred_len += 1;
        }
    }

    /// Counts the deferred intervals, if any: called after an END with arguments is
    /// counted, and at finish. That END is usually past the latency path (an RPC's or a
    /// put's, after its message left), and the thread's buffer is open already. In a
    /// loop of `rpc(..).wait()` the wait deferred in one turn is counted after the next
    /// RPC left, with the RPC's own END.
    #[inline(always)]
    pub(super) fn catch_up(&mut self) {
        if self.deferred_len > 0 {
            self.count_deferred();
        }
    }

    /// Counts every deferred interval in its row (latest first: a row's figures do not
    /// depend on the order).
    #[cold]
    #[inline(never)]
    fn count_deferred(&mut self) {
        while self.deferred_len > 0 {
            self.deferred_len -= 1;
            let d = self.deferred[self.deferred_len];
            self.record(d.tag, d.location, false, d.ticks, &[], 0);
        }
    }

    /// Counts one event in its row, and its message in the matrix if it is a
    /// communication event. `args` are the END's (or the ATOMIC's); `start_bytes` the
    /// bytes its START named.
    #[inline(always)]
    pub(super) fn record(
        &mut self,
        tag: u32,
        location: &'static Location<'static>,
        atomic: bool,
        ticks: Ticks,
        args: &[Arg<'_>],
        start_bytes: u64,
    ) {
        let key = location as *const Location<'static> as usize;
        let slot = (key >> 3 ^ tag as usize).wrapping_mul(0x9e37_79b9) >> 8 & (CACHE - 1);
        let c = self.cache[slot];
        let row = if c.location == key && c.tag == tag {
            c.row
        } else {
            self.row_slow(slot, tag, location, atomic, args)
        };
        let stats = &mut self.rows[row as usize];
        // Some sizes are known only at the END (a serialized RPC's).
        let bytes = arg_bytes(args, stats.bytes_at).max(start_bytes);
        stats.count += 1;
        stats.total += ticks;
        stats.min = stats.min.min(ticks);
        stats.max = stats.max.max(ticks);
        stats.bytes += bytes;
        if stats.peer_at != NO_ARG {
            let cell = arg_peer(args, stats.peer_at).and_then(|p| self.sent.get_mut(p as usize));
            if let Some(cell) = cell {
                cell.0 += bytes;
                cell.1 += 1;
            }
        }
    }

    /// The row of (tag, location), found in or added to the map, and cached at `slot`.
    /// A new row learns where `args` hold the bytes and the peer: a system event's
    /// call site always passes the same kinds of arguments.
    #[cold]
    #[inline(never)]
    fn row_slow(
        &mut self,
        slot: usize,
        tag: u32,
        location: &'static Location<'static>,
        atomic: bool,
        args: &[Arg<'_>],
    ) -> u32 {
        let key = location as *const Location<'static> as usize;
        let rows = &mut self.rows;
        let row = *self.index.entry((tag, key)).or_insert_with(|| {
            let (bytes_at, peer_at) = arg_positions(tag, args);
            rows.push(Stats {
                location,
                atomic,
                bytes_at,
                peer_at,
                count: 0,
                total: 0,
                min: Ticks::MAX,
                max: 0,
                bytes: 0,
            });
            rows.len() as u32 - 1
        });
        self.cache[slot] = Cached {
            location: key,
            tag,
            row,
        };
        row
    }

    /// The open START of `tag` below the top of the stack (an END out of order: user
    /// events may interleave), removed.
    #[cold]
    #[inline(never)]
    fn take_open(&mut self, tag: u32) -> Option<Open> {
        let i = self.open.iter().rposition(|o| o.tag == tag)?;
        Some(self.open.remove(i))
    }
}

/// The bytes an event moves ([`Event::bytes`](crate::Event::bytes)), in one pass over
/// short argument lists.
#[inline(always)]
fn bytes_of(args: &[Arg<'_>]) -> u64 {
    let mut bytes = 0;
    for a in args {
        if let Arg::Bytes(n) = a {
            bytes += *n as u64;
        }
    }
    bytes
}

/// Where the arguments of a (tag, call site) hold the bytes and the peer:
/// ([`bytes_at`](Stats::bytes_at), [`peer_at`](Stats::peer_at)).
fn arg_positions(tag: u32, args: &[Arg<'_>]) -> (u8, u8) {
    let position = |f: fn(&Arg<'_>) -> bool| {
        args.iter()
            .position(f)
            .and_then(|i| u8::try_from(i).ok())
            .filter(|&i| i < SCAN)
    };
    let sized = args.iter().filter(|a| matches!(a, Arg::Bytes(_))).count();
    let bytes_at = match sized {
        _ if crate::events::is_user_event(tag) => SCAN,
        0 => NO_ARG,
        1 => position(|a| matches!(a, Arg::Bytes(_))).unwrap_or(SCAN),
        _ => SCAN,
    };
    let peer_at = if events::is_communication(tag) {
        position(|a| matches!(a, Arg::Rank(_)))
            .or_else(|| position(|a| matches!(a, Arg::GPtr(_))))
            .unwrap_or(NO_ARG)
    } else {
        NO_ARG
    };
    (bytes_at, peer_at)
}

/// The bytes of `args`, read at `at` ([`arg_positions`]); a list that does not have
/// them there is summed.
#[inline(always)]
fn arg_bytes(args: &[Arg<'_>], at: u8) -> u64 {
    match at {
        NO_ARG => 0,
        at => match args.get(usize::from(at)) {
            Some(&Arg::Bytes(n)) => n as u64,
            _ => bytes_of(args),
        },
    }
}

/// The peer of `args`, read at `at` ([`arg_positions`]), else found as
/// [`Event::peer`](crate::Event::peer) finds it.
#[inline(always)]
fn arg_peer(args: &[Arg<'_>], at: u8) -> Option<u32> {
    match args.get(usize::from(at)) {
        Some(&Arg::Rank(r)) => Some(r),
        Some(&Arg::GPtr(g)) => Some(g.rank),
        _ => peer_of(args),
    }
}

#[cold]
fn peer_of(args: &[Arg<'_>]) -> Option<u32> {
    let event = Event {
        tag: 0,
        ty: EventType::Atomic,
        location: Location::caller(),
        args,
    };
    event.peer()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: &ThreadProfile, tag: u32) -> Stats {
        let rows: Vec<&Stats> = t
            .index
            .iter()
            .filter(|((k, _), _)| *k == tag)
            .map(|(_, &r)| &t.rows[r as usize])
            .collect();
        assert_eq!(rows.len(), 1, "one row of {tag:#x}");
        *rows[0]
    }

    #[test]
    fn an_interval_counts_the_bytes_and_the_message_its_end_names() {
        let mut t = ThreadProfile::new(2);
        let here = Location::caller();
        for (i, len) in [(0u64, 24usize), (1, 40)] {
            let start = [Arg::Rank(1), Arg::Bytes(0), Arg::U64(i)];
            let end = [Arg::Rank(1), Arg::Bytes(len), Arg::U64(i)];
            t.start(100 * i, events::GASP_UPCXX_RPC_SEND, here, &start);
            t.end(100 * i + 30 + i, events::GASP_UPCXX_RPC_SEND, &end);
        }
        let s = row(&t, events::GASP_UPCXX_RPC_SEND);
        assert_eq!((s.count, s.total, s.min, s.max), (2, 61, 30, 31));
        assert_eq!(s.bytes, 64);
        assert_eq!(t.sent, vec![(0, 0), (64, 2)]);
        assert!(t.open.is_empty());
    }

    #[test]
    fn user_intervals_keep_their_start_bytes_and_may_end_out_of_order() {
        let mut t = ThreadProfile::new(1);
        let (a, b) = (crate::USEREVT_START, crate::USEREVT_START + 1);
        t.start(10, a, Location::caller(), &[Arg::Bytes(8), Arg::Int(1)]);
        t.start(20, b, Location::caller(), &[]);
        t.end(50, a, &[]);
        t.end(60, b, &[Arg::Int(0), Arg::Bytes(3), Arg::Bytes(4)]);
        let (ra, rb) = (row(&t, a), row(&t, b));
        assert_eq!((ra.count, ra.total, ra.bytes), (1, 40, 8));
        assert_eq!((rb.count, rb.total, rb.bytes), (1, 40, 7));
        // User events are no communication.
        assert_eq!(t.sent, vec![(0, 0)]);
        assert!(t.open.is_empty());
    }

    #[test]
    fn deferred_intervals_are_counted_when_caught_up_or_when_the_queue_is_full() {
        let mut t = ThreadProfile::new(1);
        let wait = events::GASP_UPCXX_FUTURE_WAIT;
        let n = DEFERRED as u64 + 5;
        for i in 0..n {
            t.defer(wait, Location::caller(), 10 + i);
        }
        // The queue filled once, and was counted to make room.
        assert_eq!(row(&t, wait).count, DEFERRED as u64);
        assert_eq!(t.deferred_len, 5);
        t.catch_up();
        let s = row(&t, wait);
        assert_eq!((s.count, s.min, s.max), (n, 10, 10 + n - 1));
        assert_eq!(s.total, (10..10 + n).sum::<u64>());
        assert_eq!((s.bytes, t.deferred_len), (0, 0));
    }

    #[test]
    fn an_end_without_its_start_is_ignored() {
        let mut t = ThreadProfile::new(1);
        t.start(10, events::GASP_UPC_BARRIER, Location::caller(), &[]);
        t.end(20, events::GASP_UPCXX_FUTURE_WAIT, &[]);
        assert!(t.rows.is_empty());
        assert_eq!(t.open.len(), 1);
    }
}
