//! The barrier of the primordial team: a dissemination barrier over Active Messages.
//!
//! In round `k` of `ceil(log2 N)` rounds, rank `r` signals rank `(r + 2^k) mod N` and
//! waits for the signal of `(r - 2^k) mod N`. Arrivals are counted per round in two
//! buckets by barrier parity: a rank can run at most one barrier ahead of any other
//! (finishing barrier `e + 1` needs everyone to have finished `e`), so two suffice.
//!
//! The barrier is split-phase: [`Team::barrier_nb`] starts it and returns an event
//! (any number may be in flight; they run one after another);
//! the rounds advance inside progress (sends use `IMMEDIATE` and are retried, so the
//! barrier never blocks the poll that drives it).
//!
//! A round's signal is a store into the peer's signal word for that round (the
//! conduit's `signal`) when the conduit can make one (the peer shares memory with this
//! rank, or the mpi conduit carries the value to another host), else an AM; the
//! receiver accepts either. Within a host a round is one cache-line transfer, between
//! hosts one small MPI message.
//! `GEX_COLL_BARRIER=am` forces messages everywhere.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spin::mutex::SpinMutex;

use crate::am::{AmEntry, AmIndex, AmRole, Token};
use crate::conduit::{Conduit, Network};
use crate::context::check_may_communicate;
use crate::event::Event;
use crate::runtime::{runtime, Runtime};
use crate::team::Team;

/// Internal handler index of barrier signals.
pub(crate) const BARRIER_HANDLER: AmIndex = 1;
const MAX_ROUNDS: usize = 32;
const ROUND_BITS: u32 = 6;

/// The barrier's state in this process (one primordial team).
static STATE: BarrierState = BarrierState {
    arrivals: [const { [const { AtomicU32::new(0) }; MAX_ROUNDS] }; 2],
    completed: AtomicU64::new(0),
    awaiting: AtomicU64::new(0),
    inner: SpinMutex::new(Inner {
        started: 0,
        round: 0,
        sent: false,
    }),
};

/// Barriers are numbered in the order this rank initiates them (their epochs): they run
/// one after another, so no rank is more than one barrier ahead of another in its
/// rounds, and barrier `e` is complete once `completed > e`. An event of a barrier is
/// its epoch, with nothing to allocate.
struct BarrierState {
    arrivals: [[AtomicU32; MAX_ROUNDS]; 2],
    /// How many barriers of this rank are complete: the epoch of the one under way, if
    /// any.
    completed: AtomicU64,
    /// What the rounds wait for, when it is a signal: the round in the low
    /// [`ROUND_BITS`] bits and the mark above, else 0. Read without `inner`, so a poll
    /// that finds nothing arrived takes no lock.
    awaiting: AtomicU64,
    /// The rounds of barrier `completed`, advanced by one thread at a time. A spin lock
    /// rather than `std::sync::Mutex`, whose unlock is a locked swap: on x86 that waits
    /// until the round's signal, just stored into another rank's line, has left the
    /// store buffer, putting a cache-line transfer on the barrier's critical path. A
    /// spin lock is released with a plain store. Threads of one process contend for it
    /// only when several start or advance barriers at once, for a few instructions.
    inner: SpinMutex<Inner>,
}

struct Inner {
    /// How many barriers this rank has initiated.
    started: u64,
    round: usize,
    sent: bool,
}

/// Whether barrier `epoch` of this rank is complete.
#[inline]
pub(crate) fn is_complete(epoch: u64) -> bool {
    STATE.completed.load(Ordering::Acquire) > epoch
}

fn signal(_token: &Token<'_>, args: &[u32]) {
    STATE.arrivals[args[0] as usize & 1][args[1] as usize].fetch_add(1, Ordering::AcqRel);
}

pub(crate) fn handler_entry() -> AmEntry {
    AmEntry::short("gex barrier signal", AmRole::Request, 2, signal).at(BARRIER_HANDLER)
}

fn rounds(n: u32) -> usize {
    (32 - (n.max(1) - 1).leading_zeros()) as usize
}

/// Whether rounds may signal through shared words (`GEX_COLL_BARRIER=am` forces
/// messages, for tests and benchmarks of that path).
fn signal_words() -> bool {
    static WORDS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORDS.get_or_init(|| match std::env::var("GEX_COLL_BARRIER") {
        Err(_) => true,
        Ok(v) if v.trim().is_empty() || v.trim() == "auto" || v.trim() == "signal" => true,
        Ok(v) if v.trim() == "am" => false,
        Ok(v) => panic!("gex: GEX_COLL_BARRIER={v} is not a barrier algorithm (signal, am, auto)"),
    })
}

/// Moves the barrier in progress as far as arrived signals allow: registered with the
/// runtime by client initialization, and called by progress while a barrier is under
/// way (between `barrier_nb` and the completion of its rounds).
pub(crate) fn advance(rt: &Runtime) {
    let awaiting = STATE.awaiting.load(Ordering::Acquire);
    if awaiting != 0 {
        let (round, mark) = (
            (awaiting & ((1 << ROUND_BITS) - 1)) as usize,
            awaiting >> ROUND_BITS,
        );
        if rt.conduit.signal_value(round) < mark
            && STATE.arrivals[((mark - 1) & 1) as usize][round].load(Ordering::Acquire) == 0
        {
            return; // nothing arrived
        }
    }
    if let Some(mut st) = STATE.inner.try_lock() {
        advance_locked(rt, &mut st);
    } // else another thread is advancing it
}

/// [`advance`] by the thread holding `inner`.
fn advance_locked(rt: &Runtime, st: &mut Inner) {
    let (me, n) = (rt.conduit.rank(), rt.conduit.size());
    // Only the thread holding `inner` changes `completed`.
    let mut epoch = STATE.completed.load(Ordering::Relaxed);
    while epoch < st.started {
        let parity = (epoch & 1) as usize;
        if st.round == rounds(n) {
            epoch += 1;
            st.round = 0;
            st.sent = false;
            if epoch == st.started {
                rt.set_advancing(advance, false);
            }
            STATE.completed.store(epoch, Ordering::Release);
            continue;
        }
        // Barrier `epoch` marks its rounds' signal words with `epoch + 1`: the words
        // only grow, so a signal of a later barrier also satisfies this one's round.
        let mark = epoch + 1;
        let word = st.round < rt.conduit.signal_slots() && signal_words();
        if !st.sent {
            let peer = ((me as u64 + (1u64 << st.round)) % n as u64) as u32;
            if word {
                rt.conduit.signal(peer, st.round, mark);
                st.sent = true;
            }
        }
        if !st.sent {
            let peer = ((me as u64 + (1u64 << st.round)) % n as u64) as u32;
            let Some(out) = rt.conduit.am_reserve(peer, Network::Request) else {
                return; // queue full: try again on the next poll
            };
            rt.conduit.am_commit(
                out,
                &crate::conduit::AmHeader {
                    handler: BARRIER_HANDLER,
                    category: crate::conduit::Category::Short,
                    network: Network::Request,
                    args: &[parity as u32, st.round as u32],
                    nbytes: 0,
                    dest_addr: 0,
                },
            );
            st.sent = true;
        }
        if !(word && rt.conduit.signal_value(st.round) >= mark) {
            let arrived = &STATE.arrivals[parity][st.round];
            if arrived.load(Ordering::Acquire) == 0 {
                if word {
                    let awaiting = mark << ROUND_BITS | st.round as u64;
                    STATE.awaiting.store(awaiting, Ordering::Release);
                }
                return;
            }
            arrived.fetch_sub(1, Ordering::AcqRel);
        }
        STATE.awaiting.store(0, Ordering::Relaxed);
        st.round += 1;
        st.sent = false;
    }
}

impl Team {
    /// Starts a barrier over the team and returns its event (split-phase barrier, as
    /// GASNet-EX `gex_Coll_BarrierNB`). Collective; one barrier at a time.
    #[track_caller]
    pub fn barrier_nb(&self) -> Event {
        const CALL: &str = "Team::barrier_nb";
        let rt = runtime(CALL);
        check_may_communicate(CALL);
        if self.id != crate::team::WORLD {
            return self.team_barrier_nb();
        }
        let span = gasp::span!(GASP_UPC_NOTIFY, 0, 0);
        let epoch = {
            let mut st = STATE.inner.lock();
            let epoch = st.started;
            st.started += 1;
            rt.set_advancing(advance, true);
            // Signal the first round now if the barriers before it are done.
            advance_locked(rt, &mut st);
            epoch
        };
        // Poll once even when the barrier needs no signal (one rank), so a program
        // that only synchronizes still runs the handlers of messages sent to it.
        rt.progress();
        gasp::end!(span, 0, 0);
        Event::barrier(epoch)
    }

    /// Blocks until every rank of the team has entered the barrier.
    #[track_caller]
    pub fn barrier(&self) {
        let span = gasp::span!(GASP_UPC_BARRIER, 0, 0);
        self.barrier_nb().wait();
        gasp::end!(span, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rounds_is_ceil_log2() {
        let r: Vec<usize> = (1..=9).map(super::rounds).collect();
        assert_eq!(r, [0, 1, 2, 2, 3, 3, 3, 3, 4]);
    }
}
