//! The barrier of the primordial team: a dissemination barrier, within each host and
//! then between hosts.
//!
//! A barrier is a fixed plan of steps per rank (`plan`): in each, the rank signals
//! some ranks, then waits for the one signal of that step addressed to it (each step
//! has its own signal word, `Step::slot`). On one host, or with every rank its own
//! host, the plan is a dissemination barrier over the job: in round `k` of
//! `ceil(log2 N)` rounds, rank `r` signals rank `(r + 2^k) mod N` and waits for the
//! signal of `(r - 2^k) mod N`. Across hosts of several ranks it is hierarchical, so
//! that only one rank per host sends over the network, `ceil(log2 H)` messages for `H`
//! hosts, where a dissemination over all ranks would have every rank send about one
//! per round:
//! 1. a dissemination barrier among the ranks of each host (shared memory);
//! 2. a dissemination barrier among the hosts' leaders (their lowest ranks), which each
//!    joins once its host's members have all arrived;
//! 3. each leader releases its host's other members, one signal each.
//!
//! Arrivals by Active Message are counted per step in two buckets by barrier parity: a
//! rank can run at most one barrier ahead of any other (finishing barrier `e + 1`
//! needs everyone to have started it, so to have finished `e`), so two suffice.
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
//!
//! A team split from another runs the same kind of barrier in a block of signal words
//! of its own when it got one at the split (`team`).
//!
//! A signal word holds `signal_word`: the barrier's mark (its epoch + 1) in its low
//! 16 bits, compared modulo 2^16 (`reached`; a word is never more than a barrier or
//! two from the one its rank waits for), and above them the number of collectives
//! its sender had started on the team through the engine when it sent the signal.
//! Ranks that agree on the order of the team's calls have by then started every
//! collective placed before the barrier, so a signal of barrier `b` carrying `s` read
//! by a member waiting in the engine's collective `s` after `b` barriers shows a
//! barrier placed where that member placed its collective. The engine then fails the
//! job (`out_of_order`), where both would otherwise wait for each other without a
//! message crossing.

pub(crate) mod team;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spin::mutex::SpinMutex;

use crate::am::{AmEntry, AmIndex, AmRole, Token};
use crate::conduit::{Conduit, Network, Rank};
use crate::context::check_may_communicate;
use crate::event::Event;
use crate::runtime::{runtime, Runtime};
use crate::team::{Team, TeamData, TeamId, WORLD};

/// Internal handler index of barrier signals.
pub(crate) const BARRIER_HANDLER: AmIndex = 1;
/// Signal words (and AM arrival counters) per rank: one per step of the plan. The
/// release of a hierarchical barrier uses the last, the rounds between hosts those
/// before it, the rounds within a host the first.
const MAX_ROUNDS: usize = 32;
const ROUND_BITS: u32 = 6;

/// The barrier's state in this process (one primordial team).
static STATE: BarrierState = BarrierState {
    arrivals: [const { [const { AtomicU32::new(0) }; MAX_ROUNDS] }; 2],
    started: AtomicU64::new(0),
    completed: AtomicU64::new(0),
    awaiting: AtomicU64::new(0),
    engine_started: AtomicU32::new(0),
    inner: SpinMutex::new(Inner {
        plan: None,
        step: 0,
        sent: 0,
    }),
};

/// Barriers are numbered in the order this rank initiates them (their epochs): they run
/// one after another, so no rank is more than one barrier ahead of another in its
/// rounds, and barrier `e` is complete once `completed > e`. An event of a barrier is
/// its epoch, with nothing to allocate.
struct BarrierState {
    arrivals: [[AtomicU32; MAX_ROUNDS]; 2],
    /// How many barriers this rank has initiated: changed under `inner`, read without
    /// it ([`started_outside_engine`]).
    started: AtomicU64,
    /// How many barriers of this rank are complete: the epoch of the one under way, if
    /// any.
    completed: AtomicU64,
    /// What the rounds wait for, when it is a signal: the round in the low
    /// [`ROUND_BITS`] bits and the mark above, else 0. Read without `inner`, so a poll
    /// that finds nothing arrived takes no lock.
    awaiting: AtomicU64,
    /// How many collectives this rank started on the primordial team through the engine
    /// (set by the engine, [`note_engine_started`]).
    engine_started: AtomicU32,
    /// The rounds of barrier `completed`, advanced by one thread at a time. A spin lock
    /// rather than `std::sync::Mutex`, whose unlock is a locked swap: on x86 that waits
    /// until the round's signal, just stored into another rank's line, has left the
    /// store buffer, putting a cache-line transfer on the barrier's critical path. A
    /// spin lock is released with a plain store. Threads of one process contend for it
    /// only when several start or advance barriers at once, for a few instructions.
    inner: SpinMutex<Inner>,
}

struct Inner {
    /// This rank's steps (see [`plan`]), made by its first barrier (none for a job of
    /// one rank).
    plan: Option<Vec<Step>>,
    /// The step of barrier `completed` under way, and how many of its signals are sent.
    step: usize,
    sent: usize,
}

/// One step of this rank's barrier: signal each rank of `to` in its signal word `slot`
/// (or by AM), then, if `wait`, wait for the one signal of this step sent to this rank.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    slot: usize,
    to: Vec<Rank>,
    wait: bool,
}

/// The steps of rank `me` of `n`, whose host holds the job ranks `host` (sorted, `me`
/// among them), the hosts being led by `leaders` (the lowest job rank of each host):
/// a dissemination barrier over the job when there is one host or one rank per host,
/// else the hierarchical barrier of the module documentation. Every rank's plan
/// matches every other's: each waiting step has exactly one sender, using the same
/// word.
fn plan(me: Rank, n: Rank, host: &[Rank], leaders: &[Rank]) -> Vec<Step> {
    /// The rounds of a dissemination barrier over `group` at its member `i`, in the
    /// words from `slot0` on.
    fn dissemination(slot0: usize, group: &[Rank], i: usize) -> Vec<Step> {
        let k = group.len();
        (0..rounds(k as u32))
            .map(|j| Step {
                slot: slot0 + j,
                to: vec![group[(i + (1 << j)) % k]],
                wait: true,
            })
            .collect()
    }
    let h = leaders.len();
    let between = rounds(h as u32);
    let within = rounds(host.len() as u32);
    if h <= 1 || h == n as usize || within + between + 1 > MAX_ROUNDS {
        let all: Vec<Rank> = (0..n).collect();
        return dissemination(0, &all, me as usize);
    }
    let i = host.binary_search(&me).expect("a rank is on its own host");
    let release = MAX_ROUNDS - 1;
    let mut steps = dissemination(0, host, i);
    if i == 0 {
        let x = leaders
            .binary_search(&me)
            .expect("a host's lowest rank leads it");
        steps.extend(dissemination(release - between, leaders, x));
        steps.push(Step {
            slot: release,
            to: host[1..].to_vec(),
            wait: false,
        });
    } else {
        steps.push(Step {
            slot: release,
            to: Vec::new(),
            wait: true,
        });
    }
    steps
}

/// How many barriers this rank has started on `team` (whose data is `data`) outside
/// the collective engine: the primordial team's, or a split team's through its block
/// of signal words; 0 for a team whose barriers are engine operations, which the
/// engine numbers with the rest. The engine folds it into each operation's digest
/// (`coll::engine`).
pub(crate) fn started_outside_engine(team: &Team, data: &TeamData) -> u64 {
    if team.id == WORLD {
        STATE.started.load(Ordering::Relaxed)
    } else if data.signal_block.is_some() {
        team::started(data)
    } else {
        0
    }
}

/// Records that this rank has started `n` collectives on `team` (whose data is
/// `data`) through the engine, for the signals of the barriers it starts next.
pub(crate) fn note_engine_started(team: &Team, data: &TeamData, n: u32) {
    if team.id == WORLD {
        STATE.engine_started.store(n, Ordering::Relaxed);
    } else {
        team::note_engine_started(data, n);
    }
}

/// What barrier `epoch` stores into a signal word, its sender having started
/// `engine_started` collectives on the team through the engine when it sends it (see
/// the module documentation).
#[inline]
pub(crate) fn signal_word(epoch: u64, engine_started: u32) -> u64 {
    u64::from((epoch as u16).wrapping_add(1)) | u64::from(engine_started as u16) << 16
}

/// Whether signal word `word` holds the mark of barrier `epoch` or of a later one.
#[inline]
pub(crate) fn reached(word: u64, epoch: u64) -> bool {
    (word as u16).wrapping_sub((epoch as u16).wrapping_add(1)) < 0x8000
}

/// Whether the word of `slot` shows a barrier that a member placed where this rank
/// placed the engine's collective of sequence `seq`, having started `barriers`
/// barriers on the team before it: a signal of barrier `barriers` (or a later one)
/// whose sender had started `seq` collectives through the engine, so that no more of
/// them came before its barrier (modulo 2^16).
fn contradicts(rt: &Runtime, slot: usize, seq: u32, barriers: u64) -> bool {
    if slot >= rt.conduit.signal_slots() {
        return false;
    }
    let word = rt.conduit.signal_value(slot);
    reached(word, barriers) && (word >> 16) as u16 == seq as u16
}

/// Whether a member of `team` (whose id here is `id`, whose data is `data`) started a
/// barrier outside the engine where this rank started the engine's collective of
/// sequence `seq` after `barriers` barriers (see the module documentation): read in
/// the words this rank's barriers of the team wait on. False when they are not in use,
/// or while another thread advances the primordial team's barrier.
pub(crate) fn out_of_order(
    rt: &Runtime,
    id: TeamId,
    data: &TeamData,
    seq: u32,
    barriers: u64,
) -> bool {
    if !signal_words() {
        return false;
    }
    if id == WORLD {
        let Some(mut st) = STATE.inner.try_lock() else {
            return false;
        };
        plan_of(rt, &mut st.plan)
            .iter()
            .any(|s| s.wait && contradicts(rt, s.slot, seq, barriers))
    } else {
        team::out_of_order(rt, data, seq, barriers)
    }
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
        let (slot, mark) = (
            (awaiting & ((1 << ROUND_BITS) - 1)) as usize,
            awaiting >> ROUND_BITS,
        );
        if !reached(rt.conduit.signal_value(slot), mark - 1)
            && STATE.arrivals[((mark - 1) & 1) as usize][slot].load(Ordering::Acquire) == 0
        {
            return; // nothing arrived
        }
    }
    if let Some(mut st) = STATE.inner.try_lock() {
        advance_locked(rt, &mut st);
    } // else another thread is advancing it
}

/// This rank's plan (`Inner::plan`), made at the first call.
fn plan_of<'a>(rt: &Runtime, made: &'a mut Option<Vec<Step>>) -> &'a [Step] {
    made.get_or_insert_with(|| {
        let (me, n) = (rt.conduit.rank(), rt.conduit.size());
        let (host, _) = rt.conduit.host();
        plan(me, n, host, rt.conduit.host_leaders())
    })
}

/// [`advance`] by the thread holding `inner`.
fn advance_locked(rt: &Runtime, st: &mut Inner) {
    let steps = plan_of(rt, &mut st.plan);
    // Only the thread holding `inner` changes `completed`.
    let mut epoch = STATE.completed.load(Ordering::Relaxed);
    let started = STATE.started.load(Ordering::Relaxed);
    while epoch < started {
        let parity = (epoch & 1) as usize;
        if st.step == steps.len() {
            epoch += 1;
            st.step = 0;
            st.sent = 0;
            if epoch == started {
                rt.set_advancing(advance, false);
            }
            STATE.completed.store(epoch, Ordering::Release);
            continue;
        }
        let step = &steps[st.step];
        // Barrier `epoch` marks its steps' signal words with `epoch + 1`, and a signal
        // of a later barrier also satisfies this one's step.
        let mark = epoch + 1;
        let word = step.slot < rt.conduit.signal_slots() && signal_words();
        while let Some(&peer) = step.to.get(st.sent) {
            if word {
                let engine = STATE.engine_started.load(Ordering::Relaxed);
                rt.conduit
                    .signal(peer, step.slot, signal_word(epoch, engine));
            } else {
                let Some(out) = rt.conduit.am_reserve(peer, Network::Request) else {
                    return; // queue full: try again on the next poll
                };
                rt.conduit.am_commit(
                    out,
                    &crate::conduit::AmHeader {
                        handler: BARRIER_HANDLER,
                        category: crate::conduit::Category::Short,
                        network: Network::Request,
                        args: &[parity as u32, step.slot as u32],
                        nbytes: 0,
                        dest_addr: 0,
                    },
                );
            }
            st.sent += 1;
        }
        if step.wait && !(word && reached(rt.conduit.signal_value(step.slot), epoch)) {
            let arrived = &STATE.arrivals[parity][step.slot];
            if arrived.load(Ordering::Acquire) == 0 {
                if word {
                    let awaiting = mark << ROUND_BITS | step.slot as u64;
                    STATE.awaiting.store(awaiting, Ordering::Release);
                }
                return;
            }
            arrived.fetch_sub(1, Ordering::AcqRel);
        }
        STATE.awaiting.store(0, Ordering::Relaxed);
        st.step += 1;
        st.sent = 0;
    }
}

impl Team {
    /// Starts a barrier over the team and returns its event (split-phase barrier, as
    /// GASNet-EX `gex_Coll_BarrierNB`). Collective; any number may be in flight.
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
            let epoch = STATE.started.load(Ordering::Relaxed);
            STATE.started.store(epoch + 1, Ordering::Relaxed);
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
    use super::{plan, Step, MAX_ROUNDS};
    use crate::conduit::Rank;
    use std::collections::HashMap;

    /// A word reaches the barrier whose mark it holds and every earlier one, across
    /// the 2^16 wrap of the marks, and carries the engine's count beside the mark.
    #[test]
    fn signal_words_compare_their_marks_modulo_2_16() {
        use super::{reached, signal_word};
        assert!(!reached(0, 0), "a word never signalled");
        for e in [
            0u64,
            7,
            0xfffe,
            0xffff,
            0x1_0000,
            0x3_ffff,
            u64::from(u32::MAX),
        ] {
            let w = signal_word(e, 0x1234_5678);
            assert!(reached(w, e), "barrier {e}");
            assert!(reached(w, e.wrapping_sub(1)), "barrier {e} - 1");
            assert!(!reached(w, e + 1), "barrier {e} + 1");
            assert!(!reached(w, e + 2), "barrier {e} + 2");
            assert_eq!(w >> 16, 0x5678, "the engine's count, modulo 2^16");
        }
    }

    #[test]
    fn rounds_is_ceil_log2() {
        let r: Vec<usize> = (1..=9).map(super::rounds).collect();
        assert_eq!(r, [0, 1, 2, 2, 3, 3, 3, 3, 4]);
    }

    /// Every rank's plan, for `n` ranks placed on hosts by `host_of`.
    fn plans(n: Rank, host_of: impl Fn(Rank) -> Rank) -> Vec<Vec<Step>> {
        let host =
            |r: Rank| -> Vec<Rank> { (0..n).filter(|&q| host_of(q) == host_of(r)).collect() };
        let mut leaders: Vec<Rank> = (0..n).map(|r| host(r)[0]).collect();
        leaders.sort_unstable();
        leaders.dedup();
        (0..n).map(|r| plan(r, n, &host(r), &leaders)).collect()
    }

    /// The plans form a barrier: each waiting step has exactly one signal sent to it
    /// and no signal goes elsewhere, each rank uses a word at most once, and run
    /// together, every rank leaves knowing that every rank arrived.
    fn check(n: Rank, plans: &[Vec<Step>], what: &str) {
        let mut sends: HashMap<(Rank, usize), u32> = HashMap::new();
        for steps in plans {
            for s in steps {
                assert!(s.slot < MAX_ROUNDS, "{what}: slot {}", s.slot);
                for &to in &s.to {
                    *sends.entry((to, s.slot)).or_default() += 1;
                }
            }
        }
        let mut waits = HashMap::new();
        for (r, steps) in plans.iter().enumerate() {
            let mut slots: Vec<usize> = steps.iter().map(|s| s.slot).collect();
            slots.sort_unstable();
            slots.dedup();
            assert_eq!(slots.len(), steps.len(), "{what}: rank {r} reuses a word");
            for s in steps.iter().filter(|s| s.wait) {
                waits.insert((r as Rank, s.slot), 1);
            }
        }
        assert_eq!(sends, waits, "{what}: signals and waits differ");
        // Run the plans: a signal carries what its sender knows has arrived.
        let all = (1u64 << n) - 1;
        let mut known: Vec<u64> = (0..n).map(|r| 1 << r).collect();
        let mut at = vec![0; n as usize];
        let mut sent = vec![false; n as usize];
        let mut mail: HashMap<(Rank, usize), u64> = HashMap::new();
        let mut moved = true;
        while moved {
            moved = false;
            for r in 0..n as usize {
                while let Some(s) = plans[r].get(at[r]) {
                    if !sent[r] {
                        for &to in &s.to {
                            mail.insert((to, s.slot), known[r]);
                        }
                        sent[r] = true;
                        moved = true;
                    }
                    if s.wait {
                        let Some(&got) = mail.get(&(r as Rank, s.slot)) else {
                            break;
                        };
                        known[r] |= got;
                    }
                    at[r] += 1;
                    sent[r] = false;
                }
            }
        }
        for r in 0..n as usize {
            assert_eq!(at[r], plans[r].len(), "{what}: rank {r} is stuck");
            assert_eq!(known[r], all, "{what}: rank {r} left early");
        }
    }

    #[test]
    fn the_plans_are_barriers_for_every_placement() {
        for n in 1..=24 {
            for cap in 1..=n {
                let p = plans(n, |r| r / cap);
                check(n, &p, &format!("{n} ranks, hosts of {cap}"));
            }
            for h in 1..=n {
                let p = plans(n, |r| r % h);
                check(n, &p, &format!("{n} ranks round robin over {h} hosts"));
            }
        }
    }

    /// Across hosts of several ranks only the leaders signal other hosts, one per
    /// round between hosts; on one host, or one rank per host, it is the
    /// dissemination barrier over the job.
    #[test]
    fn only_leaders_signal_between_hosts() {
        let (n, cap) = (12, 4);
        let p = plans(n, |r| r / cap);
        for (r, steps) in p.iter().enumerate() {
            let across: Vec<Rank> = steps
                .iter()
                .flat_map(|s| s.to.iter().copied())
                .filter(|&to| to / cap != r as Rank / cap)
                .collect();
            let want = if (r as Rank).is_multiple_of(cap) {
                2
            } else {
                0
            };
            assert_eq!(across.len(), want, "rank {r}: {steps:?}");
        }
        for cap in [1, n] {
            let p = plans(n, |r| r / cap);
            for (r, steps) in p.iter().enumerate() {
                let to: Vec<Rank> = steps.iter().map(|s| s.to[0]).collect();
                assert_eq!(
                    to,
                    [1, 2, 4, 8].map(|d| (r as Rank + d) % n),
                    "hosts of {cap}"
                );
            }
        }
    }
}
