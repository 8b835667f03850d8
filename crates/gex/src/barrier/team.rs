//! The barrier of a split team through signal words, as the primordial team's: a
//! dissemination barrier whose rounds are stores into the members' signal words (the
//! conduit's `signal`: shared memory within a host, a control message between hosts)
//! instead of the collective engine's Active Messages.
//!
//! * **Blocks.** After the primordial team's words, each rank has [`TEAM_BLOCKS`]
//!   blocks of [`TEAM_ROUNDS`] words, one block per team that uses them (teams of up
//!   to `2^TEAM_ROUNDS` members). A split's exchange carries each member's bitmap of
//!   free blocks ([`offer`]); every member of a new team takes the lowest block free at
//!   all of them ([`claim`]), so they agree without another message. A team that gets
//!   none (every block taken at some member, a concurrent split, more members than a
//!   block has rounds, `GEX_COLL_BARRIER=am`) barriers through the engine as before.
//! * **Marks.** Barrier `e` of a team stores its mark `e + 1` into each round's word
//!   (with the engine's count, `super::signal_word`); a signal of a later barrier also
//!   satisfies an earlier one's round, and the team's barriers run one after another.
//! * **Reuse.** Each round's word of a rank has exactly one sender per barrier, and the
//!   rank waits for it; so once a rank has completed the last barrier of a team (the
//!   one `destroy` runs), no signal of that team is still to land in its words. It then
//!   clears them and frees the block ([`release`]), and a later team that takes the
//!   block starts from zero: members offer a block only once they have released it.
//! * **Agreement.** As the primordial team's barrier, it carries no digest of the
//!   call. Each of the engine's operations carries the number of barriers its member
//!   started on the team before it ([`started`]), so members that disagree on where a
//!   barrier falls among the team's other collectives fail with the engine's
//!   "different collective" message once an operation's message reaches a member
//!   that counts otherwise. A barrier whose peer waits in another collective for data
//!   that only this member's next collective would send reaches that peer as a signal
//!   carrying the collectives its sender started (`super::out_of_order`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use spin::mutex::SpinMutex;

use super::{reached, rounds, signal_word, signal_words, MAX_ROUNDS};
use crate::conduit::{Conduit, Rank};
use crate::runtime::Runtime;
use crate::team::TeamData;

/// Blocks of signal words for split teams, after the primordial team's words.
pub(crate) const TEAM_BLOCKS: usize = 8;
/// Words (rounds) per block.
pub(crate) const TEAM_ROUNDS: usize = 8;

/// This process's free blocks, one bit each.
static FREE: AtomicU8 = AtomicU8::new(u8::MAX);
/// A split is between its [`offer`] and its [`claim`]: a concurrent split offers
/// nothing, so that two splits never take the same block.
static SPLITTING: AtomicBool = AtomicBool::new(false);

/// The teams with barriers in flight, for [`advance`].
static ACTIVE: SpinMutex<Vec<Arc<TeamData>>> = SpinMutex::new(Vec::new());

/// What a split offers: the blocks this rank offers the new team, and whether this
/// split holds [`SPLITTING`] (and must clear it in [`claim`]).
#[derive(Clone, Copy)]
pub(crate) struct Offer {
    pub(crate) blocks: u8,
    owns: bool,
}

/// The blocks this rank offers to a split it starts: its free ones, or none while
/// another split of this process is under way (or if signal words are not used, or
/// the conduit has no room for them). Every `offer` is followed by one [`claim`].
pub(crate) fn offer(rt: &Runtime) -> Offer {
    let room = rt.conduit.signal_slots() >= MAX_ROUNDS + TEAM_BLOCKS * TEAM_ROUNDS;
    if !room || !signal_words() || SPLITTING.swap(true, Ordering::Acquire) {
        return Offer {
            blocks: 0,
            owns: false,
        };
    }
    Offer {
        blocks: FREE.load(Ordering::Relaxed),
        owns: true,
    }
}

/// Ends a split that made `mine` with [`offer`]: the block the new team of `size`
/// members takes, the lowest one every member offered (`offers`, this rank's among
/// them), or none. A rank that gets no team passes no offers and a size of 0.
pub(crate) fn claim(mine: Offer, offers: impl Iterator<Item = u8>, size: usize) -> Option<u8> {
    let common = offers.fold(u8::MAX, |all, o| all & o);
    let block = (size >= 2 && rounds(size as u32) <= TEAM_ROUNDS && common != 0)
        .then(|| common.trailing_zeros() as u8);
    if let Some(b) = block {
        debug_assert!(mine.blocks & (1 << b) != 0, "a block this rank offered");
        FREE.fetch_and(!(1 << b), Ordering::Relaxed);
    }
    if mine.owns {
        SPLITTING.store(false, Ordering::Release);
    }
    block
}

/// Frees `block` once this rank completed the team's last barrier: clears its words
/// (no signal of the team is still to land in them, see the module documentation).
pub(crate) fn release(rt: &Runtime, block: u8) {
    let me = rt.conduit.rank();
    for j in 0..TEAM_ROUNDS {
        rt.conduit.signal(me, slot(block, j), 0);
    }
    FREE.fetch_or(1 << block, Ordering::Release);
}

fn slot(block: u8, round: usize) -> usize {
    MAX_ROUNDS + usize::from(block) * TEAM_ROUNDS + round
}

/// The barriers of one team at this rank. They are numbered in the order this rank
/// starts them (their epochs) and run one after another, so barrier `e` is complete
/// once `completed > e`: its event is the team and the epoch, with nothing to
/// allocate (as the primordial team's).
#[derive(Debug, Default)]
pub(crate) struct TeamBarriers {
    /// How many this rank started, and completed: changed under `state`'s lock, read
    /// without it ([`started`], [`is_complete`]).
    started: AtomicU64,
    completed: AtomicU64,
    /// How many collectives this rank started on the team through the engine (set by
    /// the engine, [`note_engine_started`]).
    engine_started: AtomicU32,
    state: SpinMutex<TeamBarrier>,
}

/// The barrier of one team under way at this rank.
#[derive(Debug, Default)]
struct TeamBarrier {
    /// The round of barrier `completed` under way, and whether its signal is sent.
    round: usize,
    sent: bool,
    /// The team is in [`ACTIVE`].
    active: bool,
}

/// How many barriers of `team` this rank has started.
pub(crate) fn started(team: &TeamData) -> u64 {
    team.barrier.started.load(Ordering::Relaxed)
}

/// Records that this rank has started `n` collectives on `team` through the engine.
pub(crate) fn note_engine_started(team: &TeamData, n: u32) {
    team.barrier.engine_started.store(n, Ordering::Relaxed);
}

/// [`super::out_of_order`] for a split team: read in the words of the team's block
/// this rank waits on (none if it has no block).
pub(crate) fn out_of_order(rt: &Runtime, team: &TeamData, seq: u32, barriers: u64) -> bool {
    let Some(block) = team.signal_block else {
        return false;
    };
    (0..rounds(team.members.len() as u32))
        .any(|j| super::contradicts(rt, slot(block, j), seq, barriers))
}

/// Whether barrier `epoch` of `team` is complete at this rank.
#[inline]
pub(crate) fn is_complete(team: &TeamData, epoch: u64) -> bool {
    team.barrier.completed.load(Ordering::Acquire) > epoch
}

/// [`is_complete`] for the barrier whose epoch has the low 32 bits `low` (what an
/// event keeps): the latest barrier started with those bits, exact while fewer than
/// 2^32 barriers of the team were started after it.
#[inline]
pub(crate) fn is_complete_low(team: &TeamData, low: u32) -> bool {
    is_complete(team, epoch_of(started(team), low))
}

/// The latest epoch below `started` whose low 32 bits are `low`.
fn epoch_of(started: u64, low: u32) -> u64 {
    let behind = (started as u32).wrapping_sub(low);
    let behind = if behind == 0 {
        1 << 32
    } else {
        u64::from(behind)
    };
    started.wrapping_sub(behind)
}

/// Starts a barrier of `team`, whose block is `block`; returns its epoch.
pub(crate) fn start(rt: &Runtime, team: &Arc<TeamData>, block: u8) -> u64 {
    let mut st = team.barrier.state.lock();
    let epoch = started(team);
    team.barrier.started.store(epoch + 1, Ordering::Relaxed);
    advance_team(rt, team, block, &mut st);
    // A barrier whose peers all arrived first is complete already: progress need not
    // look at the team.
    if !st.active && !is_complete(team, epoch) {
        st.active = true;
        ACTIVE.lock().push(Arc::clone(team));
        rt.start_advancing(advance);
    }
    epoch
}

/// Moves the barriers of every team with barriers in flight as far as arrived
/// signals allow (registered with the runtime; called by progress while any is).
pub(crate) fn advance(rt: &Runtime) {
    let Some(mut active) = ACTIVE.try_lock() else {
        return; // another thread is advancing
    };
    active.retain(|team| {
        let block = team
            .signal_block
            .expect("a team with barriers here has a block");
        let Some(mut st) = team.barrier.state.try_lock() else {
            return true;
        };
        advance_team(rt, team, block, &mut st);
        if team.barrier.completed.load(Ordering::Relaxed) == started(team) {
            st.active = false;
            rt.stop_advancing(advance);
            return false;
        }
        true
    });
}

/// Advances `team`'s barriers, its state `st` held. Does not touch [`ACTIVE`].
fn advance_team(rt: &Runtime, team: &TeamData, block: u8, st: &mut TeamBarrier) {
    let n = team.members.len();
    let me = team.rank as usize;
    let rounds = rounds(n as u32);
    // Only the thread holding `st` changes `completed`.
    let mut completed = team.barrier.completed.load(Ordering::Relaxed);
    while completed < started(team) {
        if st.round == rounds {
            completed += 1;
            st.round = 0;
            st.sent = false;
            team.barrier.completed.store(completed, Ordering::Release);
            continue;
        }
        let word = slot(block, st.round);
        if !st.sent {
            let peer: Rank = team.members[(me + (1 << st.round)) % n];
            let engine = team.barrier.engine_started.load(Ordering::Relaxed);
            rt.conduit
                .signal(peer, word, signal_word(completed, engine));
            st.sent = true;
        }
        if !reached(rt.conduit.signal_value(word), completed) {
            return;
        }
        st.round += 1;
        st.sent = false;
    }
}

#[cfg(test)]
mod tests {
    use super::epoch_of;

    #[test]
    fn an_epochs_low_bits_name_the_latest_barrier_started_with_them() {
        assert_eq!(epoch_of(1, 0), 0);
        assert_eq!(epoch_of(10, 3), 3);
        assert_eq!(epoch_of(10, 9), 9);
        // Across the 2^32 boundary, both ways.
        let s = (1u64 << 32) + 5;
        assert_eq!(epoch_of(s, 4), (1 << 32) + 4);
        assert_eq!(epoch_of(s, u32::MAX), (1 << 32) - 1);
        assert_eq!(epoch_of(s, 5), 5, "2^32 barriers behind");
        assert_eq!(epoch_of(s, 6), 6);
    }
}
