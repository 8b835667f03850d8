//! The collective engine: how a collective operation runs over a team.
//!
//! * **Matching by call order.** Each team counts the collectives this process
//!   initiates on it; the n-th collective on a team is the same operation on every
//!   member (GASNet-EX: collectives on one team match by call order). Its number, the
//!   sequence, travels in every message of the operation, so any number may be in flight
//!   on one team and across teams, completing in any order.
//! * **Messages.** An operation's messages are AM Mediums on the Request network to one
//!   library handler, naming the receiver's id of the team, the sequence, a tag the
//!   operation defines (a round, a phase), the sender's team rank and a byte offset.
//!   The handler only files the message with its operation (or, for an operation this
//!   process has not initiated yet, keeps it until it does); handlers may not send.
//! * **Progress.** The engine registers with the runtime to be advanced by progress
//!   while any operation is in flight. Advancing an operation sends what it can with
//!   `IMMEDIATE` (a full queue is retried at the next poll, so progress never blocks)
//!   and completes its event when the operation is done at this rank.
//! * **Agreement.** Every message carries a digest of the operation's single-valued
//!   arguments (kind, root, sizes, data type, operation) and of how many barriers its
//!   sender started on the team before it outside the engine (the primordial team's
//!   and a split team's through signal words, which take no sequence). A message whose
//!   digest differs from the receiver's operation of the same sequence means the ranks
//!   called different collectives, or the same one with different arguments, or a
//!   barrier at different points: the job fails with a message saying so, instead of
//!   computing a wrong result. Where a member placed a barrier outside the engine
//!   where this rank placed an operation, and the operation waits for that member's
//!   data, no message of either crosses; the barrier's signal words carry how many
//!   operations their sender started before the barrier, and an operation that
//!   still waits after [`SUSPECT_FOR`] with such a signal in the words fails the job
//!   too (`barrier::out_of_order`).
//!
//! Operations are written against [`Collective`] and see the team through
//! [`Outbox`]; they know nothing of AMs or of the table of operations.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::am::{AmCategory, AmEntry, AmIndex, AmRole, Token};
use crate::conduit::Conduit;
use crate::conduit::{AddressError, Completion, OpHandle, Rank};
use crate::runtime::Runtime;
use crate::team::{Team, TeamData, TeamId};
use crate::Flags;

/// How long an operation waits with a barrier placed where it is in the signal words
/// before the job fails (see the module documentation): a member that started the
/// engine's operations far ahead (2^16 of them) could show the same words for a while.
const SUSPECT_FOR: Duration = Duration::from_secs(1);
/// An operation still waiting looks at the barrier's words at every this many
/// advances.
const CHECK_EVERY: u32 = 64;

/// Internal handler index of collective messages.
pub(crate) const COLL_HANDLER: AmIndex = 2;

/// Number of arguments of a collective message.
const NARGS: usize = 7;

/// The bytes of a message, and of a reduction's elements, kept inline: a small
/// collective's messages and its element or two of data need no allocation.
pub(crate) const INLINE_BYTES: usize = 16;

/// One message of a collective operation, as the operation receives it.
#[derive(Debug)]
pub(crate) struct Msg {
    /// The sender's rank in the team.
    pub(crate) src: Rank,
    /// What the message is to the operation (a round, a phase).
    pub(crate) tag: u32,
    /// Where its bytes go in the operation's data.
    pub(crate) offset: usize,
    /// The bytes (inline up to [`INLINE_BYTES`]).
    pub(crate) data: SmallVec<[u8; INLINE_BYTES]>,
}

/// A collective operation in flight at this rank.
pub(crate) trait Collective: Send {
    /// Files a message of this operation (runs in handler context: no sending).
    fn deliver(&mut self, msg: Msg);
    /// Sends what can be sent and consumes what arrived; true once the operation is
    /// complete at this rank (its event may then complete).
    fn advance(&mut self, out: &mut Outbox<'_>) -> bool;
}

/// The team as an operation sees it: its size, this rank, and sending to a member.
pub(crate) struct Outbox<'a> {
    rt: &'a Runtime,
    team: &'a TeamData,
    seq: u32,
    digest: u32,
    max_payload: usize,
}

impl Outbox<'_> {
    /// This process's rank in the team.
    pub(crate) fn rank(&self) -> Rank {
        self.team.rank
    }

    /// The team's size.
    pub(crate) fn size(&self) -> Rank {
        self.team.members.len() as Rank
    }

    /// The largest payload of one message.
    pub(crate) fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// The address in this process of `[addr, addr + len)` of team rank `rank`'s
    /// segment (`addr` in that rank's address space), if this process maps it.
    pub(crate) fn translate(&self, rank: Rank, addr: usize, len: usize) -> Option<usize> {
        self.rt
            .conduit
            .translate(self.team.members[rank as usize], addr, len)
            .ok()
    }

    /// Puts `data` at `addr` (in that rank's address space, inside its segment) of
    /// team rank `rank`: a memory copy where this process maps the segment, RMA
    /// otherwise. The conduit's completion (`data` has been read at return), or its
    /// error for a range outside the segment.
    pub(crate) fn put(
        &self,
        rank: Rank,
        addr: usize,
        data: &[u8],
    ) -> Result<Completion, AddressError> {
        self.rt
            .conduit
            .put(self.team.members[rank as usize], addr, data, false)
    }

    /// Copies `len` bytes at `addr` of team rank `rank`'s segment (in that rank's
    /// address space) into `dst`: a memory copy where this process maps the segment,
    /// RMA otherwise. The conduit's completion, or its error for a range outside the
    /// segment.
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes of writes until the completion.
    pub(crate) unsafe fn get(
        &self,
        rank: Rank,
        dst: *mut u8,
        addr: usize,
        len: usize,
    ) -> Result<Completion, AddressError> {
        // SAFETY: the caller's guarantee.
        unsafe {
            self.rt
                .conduit
                .get(dst, self.team.members[rank as usize], addr, len)
        }
    }

    /// Sends `data` (at most [`max_payload`](Self::max_payload) bytes) to team rank
    /// `to`; false if its queue is full (the caller retries at its next advance).
    pub(crate) fn send(&mut self, to: Rank, tag: u32, offset: usize, data: &[u8]) -> bool {
        debug_assert!(data.len() <= self.max_payload);
        let args = [
            self.team.peer_ids[to as usize],
            self.seq,
            tag,
            self.team.rank,
            offset as u32,
            (offset as u64 >> 32) as u32,
            self.digest,
        ];
        crate::am::try_send_internal_medium(
            self.rt,
            "Team collective",
            self.team.members[to as usize],
            COLL_HANDLER,
            &args,
            data,
            Flags::IMMEDIATE,
        )
        .is_ok()
    }
}

/// An operation in flight, with what it needs to run.
struct Running {
    op: Box<dyn Collective>,
    handle: Arc<OpHandle>,
    digest: u32,
    /// The name of the call that started it, for error messages.
    call: &'static str,
    /// The barriers outside the engine this rank started on the team before it.
    barriers: u64,
    /// Advances that left it waiting, up to [`CHECK_EVERY`].
    waits: u32,
    /// Since when its rank's barrier words show a barrier placed where it is.
    suspect: Option<Instant>,
}

/// The collectives of one team at this rank.
#[derive(Default)]
struct TeamOps {
    /// The sequence the next collective initiated here gets.
    next_seq: u32,
    /// The team, once this process initiated a collective on it.
    data: Option<Arc<TeamData>>,
    /// The operations of sequences `first..next_seq`, by sequence: each in flight, or
    /// `None` once complete. The front is kept in flight (complete operations leave
    /// from the front), so the sequences of a message and of the operation it belongs
    /// to find each other by one subtraction, however many are in flight.
    running: VecDeque<Option<Running>>,
    /// The sequence of `running[0]`.
    first: u32,
    /// Messages of operations not initiated here yet, by sequence.
    early: FxHashMap<u32, Vec<(u32, Msg)>>,
}

impl TeamOps {
    /// The operation of sequence `seq`, if it is in flight.
    fn running_mut(&mut self, seq: u32) -> Option<&mut Running> {
        let i = seq.wrapping_sub(self.first) as usize;
        self.running.get_mut(i)?.as_mut()
    }

    /// How many operations are in flight.
    fn in_flight(&self) -> usize {
        self.running.iter().filter(|r| r.is_some()).count()
    }
}

/// Every team's collectives at this rank, by the team's id here (ids are indices,
/// handed out in order: see `team.rs`).
#[derive(Default)]
struct Engine {
    teams: Vec<TeamOps>,
}

impl Engine {
    /// Team `id`'s collectives, made empty if none were seen yet.
    fn team(&mut self, id: TeamId) -> &mut TeamOps {
        let i = id as usize;
        if i >= self.teams.len() {
            self.teams.resize_with(i + 1, TeamOps::default);
        }
        &mut self.teams[i]
    }
}

static ENGINE: Mutex<Option<Engine>> = Mutex::new(None);

fn lock() -> std::sync::MutexGuard<'static, Option<Engine>> {
    ENGINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The entry of the collective message handler (registered by client initialization).
pub(crate) fn handler_entry() -> AmEntry {
    AmEntry::payload(
        "gex collective message",
        AmCategory::Medium,
        AmRole::Request,
        NARGS,
        on_message,
    )
    .at(COLL_HANDLER)
}

fn on_message(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
    let (team, seq, digest) = (args[0], args[1], args[6]);
    let msg = Msg {
        src: args[3],
        tag: args[2],
        offset: (args[4] as u64 | (args[5] as u64) << 32) as usize,
        data: SmallVec::from_slice(payload),
    };
    let mut engine = lock();
    let ops = engine.get_or_insert_with(Engine::default).team(team);
    match ops.running_mut(seq) {
        Some(running) => {
            check_digest(running.call, running.digest, digest, msg.src);
            running.op.deliver(msg);
        }
        None => ops.early.entry(seq).or_default().push((digest, msg)),
    }
}

#[track_caller]
fn check_digest(call: &str, mine: u32, theirs: u32, src: Rank) {
    if mine != theirs {
        panic!(
            "gex::{call}: team rank {src} called a different collective, or the same one \
             with different single-valued arguments (root, size, data type or operation), \
             or a different number of barriers before it, at this point of the team's \
             call order"
        );
    }
}

/// Starts `op` on `team` as the team's next collective; returns the handle that
/// completes when the operation is complete at this rank.
#[track_caller]
pub(crate) fn start(
    rt: &Runtime,
    team: &Team,
    call: &'static str,
    digest: u32,
    op: Box<dyn Collective>,
) -> Arc<OpHandle> {
    let handle = OpHandle::new();
    {
        let mut engine = lock();
        let ops = engine.get_or_insert_with(Engine::default).team(team.id);
        let data = ops.data.get_or_insert_with(|| team.data(call));
        let barriers = crate::barrier::started_outside_engine(team, data);
        let digest = self::digest(&[u64::from(digest), barriers]);
        let seq = ops.next_seq;
        ops.next_seq = seq.wrapping_add(1);
        crate::barrier::note_engine_started(team, data, ops.next_seq);
        let mut running = Running {
            op,
            handle: Arc::clone(&handle),
            digest,
            call,
            barriers,
            waits: 0,
            suspect: None,
        };
        if !ops.early.is_empty() {
            for (theirs, msg) in ops.early.remove(&seq).unwrap_or_default() {
                check_digest(call, digest, theirs, msg.src);
                running.op.deliver(msg);
            }
        }
        if ops.running.is_empty() {
            ops.first = seq;
        }
        ops.running.push_back(Some(running));
        rt.start_advancing(advance);
    }
    advance(rt);
    handle
}

/// Advances every operation in flight (registered with the runtime as work progress
/// must advance).
pub(crate) fn advance(rt: &Runtime) {
    let Ok(mut guard) = ENGINE.try_lock() else {
        return; // another thread is advancing
    };
    let Some(engine) = guard.as_mut() else {
        return;
    };
    let max_payload = rt.conduit.am_max_medium();
    let mut misplaced = None;
    for (id, ops) in engine.teams.iter_mut().enumerate() {
        let (Some(data), false) = (&ops.data, ops.running.is_empty()) else {
            continue;
        };
        let mut seq = ops.first.wrapping_sub(1);
        for slot in &mut ops.running {
            seq = seq.wrapping_add(1);
            let Some(running) = slot else {
                continue;
            };
            let mut out = Outbox {
                rt,
                team: data,
                seq,
                digest: running.digest,
                max_payload,
            };
            if running.op.advance(&mut out) {
                running.handle.complete();
                *slot = None;
                rt.stop_advancing(advance);
            } else if misplaced.is_none() && waited_out(rt, id as TeamId, data, seq, running) {
                misplaced = Some(running.call);
            }
        }
        while let Some(None) = ops.running.front() {
            ops.running.pop_front();
            ops.first = ops.first.wrapping_add(1);
        }
    }
    // Unlocked first: the panic fails the job, and the other ranks' messages still
    // find the engine meanwhile.
    drop(guard);
    if let Some(call) = misplaced {
        panic!(
            "gex::{call}: a member of the team started a barrier where this rank started \
             this collective (a different collective, or a different number of barriers \
             before it, at this point of the team's call order), and this collective waits \
             for that member"
        );
    }
}

/// Whether `running`, the operation of sequence `seq` on team `id` (whose data is
/// `data`), still waiting, has been waiting [`SUSPECT_FOR`] with a barrier placed
/// where it is in this rank's barrier words (looked at every [`CHECK_EVERY`] waits).
fn waited_out(rt: &Runtime, id: TeamId, data: &TeamData, seq: u32, running: &mut Running) -> bool {
    running.waits += 1;
    if running.waits < CHECK_EVERY {
        return false;
    }
    running.waits = 0;
    if !crate::barrier::out_of_order(rt, id, data, seq, running.barriers) {
        running.suspect = None;
        return false;
    }
    let since = *running.suspect.get_or_insert_with(Instant::now);
    since.elapsed() >= SUSPECT_FOR
}

/// Forgets a destroyed team's state (its operations are all complete: destroy is a
/// collective that completes after every earlier one).
pub(crate) fn forget(id: TeamId) {
    if let Some(ops) = lock().as_mut().and_then(|e| e.teams.get_mut(id as usize)) {
        *ops = TeamOps::default();
    }
}

/// A digest of an operation's single-valued arguments (FNV-1a over 64-bit words).
pub(crate) fn digest(words: &[u64]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    (h ^ (h >> 32)) as u32
}

/// How many operations on team `id` are in flight at this rank.
pub(crate) fn running(id: TeamId) -> usize {
    lock()
        .as_ref()
        .and_then(|e| e.teams.get(id as usize))
        .map_or(0, TeamOps::in_flight)
}
