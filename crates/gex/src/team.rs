//! Teams (GASNet-EX `gex_TM_t`): ordered sets of the job's ranks, and the queries and
//! translations on them ("Operations on gex_TM_t").
//!
//! A [`Team`] is a small `Copy` handle: the team's id in this process, this process's
//! rank in it and its size. The primordial team (id 0) holds every rank of the job in
//! job-rank order, so its ranks are job ranks and translating them costs nothing. Any
//! other team was made by a split (`Team::split`, in the collectives) and is described
//! by a `TeamData` in this process's team table: the job rank of each member, and the
//! id the same team has in each member's process (ids are local: each process numbers
//! the teams it belongs to itself, and a message names the team by the receiver's id).
//!
//! A destroyed team's slot stays empty; a handle to it fails with a message naming the
//! call. Ids are never reused, so a stale handle can never reach another team.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use crate::barrier::team::TeamBarriers;
use crate::client::{CData, CDataSlot, Client, Endpoint};
use crate::conduit::{BoundSegment, Conduit, Rank};
use crate::context::check_may_communicate;
use crate::runtime::{runtime, Runtime};
use crate::Flags;

/// A team's id in this process (an index into the team table).
pub(crate) type TeamId = u32;

/// The id of the primordial team.
pub(crate) const WORLD: TeamId = 0;

/// A team: an ordered set of endpoints (GASNet-EX `gex_TM_t`). The primordial team
/// holds one endpoint per rank of the job, in job-rank order; other teams come from
/// splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Team {
    pub(crate) id: TeamId,
    pub(crate) rank: Rank,
    pub(crate) size: Rank,
}

/// What this process knows of one team it belongs to.
#[derive(Debug)]
pub(crate) struct TeamData {
    /// The job rank of each member, by team rank.
    pub(crate) members: Box<[Rank]>,
    /// The id of this team in each member's process, by team rank.
    pub(crate) peer_ids: Box<[TeamId]>,
    /// This process's rank in the team.
    pub(crate) rank: Rank,
    /// The client's data on the team (`gex_TM_SetCData`).
    cdata: CDataSlot,
    /// The scratch space the client granted at the split, returned at destroy.
    pub(crate) scratch: Option<(usize, usize)>,
    /// A broadcast stages its data in `scratch` (see `coll::broadcast::Scratch`).
    pub(crate) scratch_leased: AtomicBool,
    /// The block of signal words the team's barriers use, if it got one at the split
    /// (`barrier::team`); else they go through the collective engine.
    pub(crate) signal_block: Option<u8>,
    /// Those barriers at this rank.
    pub(crate) barrier: TeamBarriers,
    /// See [`TeamData::shared_name`].
    name: i32,
}

impl TeamData {
    /// A name of the team that all its members agree on (ids are local), as one number
    /// for tools (GASP's `team` arguments): see [`shared_name`]. The primordial team is 0.
    pub(crate) fn shared_name(&self) -> i32 {
        self.name
    }
}

/// The name of a team whose rank 0 is job rank `leader`, where the team has id `id`,
/// in a job of `job_size` ranks: `id * job_size + leader`, distinct for every team of
/// the job as long as that stays below 2^30 (a job of 1,024 ranks: a million splits
/// in one process; ids are never reused), and kept to 30 bits beyond, where event
/// handles carry it (`Event::gasp_handle`).
pub(crate) fn shared_name(leader: Rank, id: TeamId, job_size: Rank) -> i32 {
    let name = u64::from(id) * u64::from(job_size) + u64::from(leader);
    (name & 0x3fff_ffff) as i32
}

/// The teams this process belongs to, by id; `None` for a destroyed team or an id
/// reserved by a split still under way.
static TEAMS: RwLock<Vec<Option<Arc<TeamData>>>> = RwLock::new(Vec::new());

fn teams_read() -> std::sync::RwLockReadGuard<'static, Vec<Option<Arc<TeamData>>>> {
    TEAMS.read().unwrap_or_else(|e| e.into_inner())
}

fn teams_write() -> std::sync::RwLockWriteGuard<'static, Vec<Option<Arc<TeamData>>>> {
    TEAMS.write().unwrap_or_else(|e| e.into_inner())
}

/// Creates the primordial team of a job of `size` ranks (from `Client::init`).
pub(crate) fn install_world(rank: Rank, size: Rank) -> Team {
    let mut teams = teams_write();
    assert!(teams.is_empty(), "the primordial team is created once");
    teams.push(Some(Arc::new(TeamData {
        members: (0..size).collect(),
        peer_ids: vec![WORLD; size as usize].into_boxed_slice(),
        rank,
        cdata: CDataSlot::default(),
        scratch: None,
        scratch_leased: AtomicBool::new(false),
        signal_block: None,
        barrier: TeamBarriers::default(),
        name: shared_name(0, WORLD, size),
    })));
    Team {
        id: WORLD,
        rank,
        size,
    }
}

/// The primordial team's handle, for the layers inside gex that address job ranks
/// (finalization, the collective engine's sends).
pub(crate) fn world(rt: &Runtime) -> Team {
    Team {
        id: WORLD,
        rank: rt.conduit.rank(),
        size: rt.conduit.size(),
    }
}

/// Reserves the id of a team this process is about to join (the split tells the other
/// members before the team exists).
pub(crate) fn reserve_id() -> TeamId {
    let mut teams = teams_write();
    teams.push(None);
    (teams.len() - 1) as TeamId
}

/// Installs a team at an id from [`reserve_id`].
pub(crate) fn install(
    id: TeamId,
    members: Box<[Rank]>,
    peer_ids: Box<[TeamId]>,
    rank: Rank,
    scratch: Option<(usize, usize)>,
    signal_block: Option<u8>,
    job_size: Rank,
) -> Team {
    let size = members.len() as Rank;
    let name = shared_name(members[0], peer_ids[0], job_size);
    teams_write()[id as usize] = Some(Arc::new(TeamData {
        members,
        peer_ids,
        rank,
        cdata: CDataSlot::default(),
        scratch,
        scratch_leased: AtomicBool::new(false),
        signal_block,
        barrier: TeamBarriers::default(),
        name,
    }));
    Team { id, rank, size }
}

/// Removes a team from the table; returns what it held.
pub(crate) fn remove(id: TeamId) -> Option<Arc<TeamData>> {
    teams_write().get_mut(id as usize).and_then(Option::take)
}

/// The data of team `id`, if this process belongs to it (and it is not destroyed).
pub(crate) fn lookup(id: TeamId) -> Option<Arc<TeamData>> {
    teams_read().get(id as usize).and_then(Clone::clone)
}

impl Team {
    /// This process's rank in the team (GASNet-EX `gex_TM_QueryRank`).
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Number of ranks in the team (GASNet-EX `gex_TM_QuerySize`).
    pub fn size(&self) -> Rank {
        self.size
    }

    /// GASNet-EX `gex_TM_QueryClient`.
    pub fn client(&self) -> Client {
        Client(())
    }

    /// GASNet-EX `gex_TM_QueryEP`.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint(())
    }

    /// GASNet-EX `gex_TM_QueryFlags`: no team flags are defined.
    pub fn flags(&self) -> Flags {
        Flags::NONE
    }

    /// Whether this is the primordial team (every rank of the job, in job-rank order).
    pub fn is_primordial(&self) -> bool {
        self.id == WORLD
    }

    /// An identifier of the team that every member agrees on (the handle's own id is
    /// local to this process): the job rank of team rank 0 in the high half, the
    /// team's id in that process in the low half. The primordial team's is 0; ids are
    /// never reused, so no two teams of a job share one.
    #[track_caller]
    pub fn shared_id(&self) -> u64 {
        let data = self.data("Team::shared_id");
        u64::from(data.members[0]) << 32 | u64::from(data.peer_ids[0])
    }

    /// The team's data, or a panic naming `call` if the team was destroyed.
    #[track_caller]
    pub(crate) fn data(&self, call: &str) -> Arc<TeamData> {
        runtime(call);
        lookup(self.id).unwrap_or_else(|| destroyed(call))
    }

    /// GASNet-EX `gex_TM_SetCData`.
    #[track_caller]
    pub fn set_cdata(&self, data: Option<CData>) {
        self.data("Team::set_cdata").cdata.set(data)
    }

    /// GASNet-EX `gex_TM_QueryCData`.
    #[track_caller]
    pub fn cdata(&self) -> Option<CData> {
        self.data("Team::cdata").cdata.get()
    }

    /// The job rank of team member `rank`, or a panic naming `call`.
    #[inline]
    #[track_caller]
    pub(crate) fn job_rank_of(&self, call: &str, rank: Rank) -> Rank {
        if rank >= self.size {
            invalid_rank(call, rank, self.size);
        }
        if self.id == WORLD {
            rank
        } else {
            self.member_job_rank(call, rank)
        }
    }

    /// [`Team::job_rank_of`] for a team other than the world (out of line: the world's
    /// case is the one inlined into every AM and RMA call).
    #[inline(never)]
    #[track_caller]
    fn member_job_rank(&self, call: &str, rank: Rank) -> Rank {
        self.data(call).members[rank as usize]
    }

    /// GASNet-EX `gex_TM_TranslateRankToJobrank`. Requires `rank < size()`.
    #[track_caller]
    pub fn translate_rank_to_jobrank(&self, rank: Rank) -> Rank {
        const CALL: &str = "Team::translate_rank_to_jobrank";
        check_may_communicate(CALL);
        self.job_rank_of(CALL, rank)
    }

    /// GASNet-EX `gex_TM_TranslateJobrankToRank`: the rank in this team of the process
    /// with job rank `jobrank`, or `None` (the spec's `GEX_RANK_INVALID`) if it is not
    /// a member, or not a rank of the job at all.
    #[track_caller]
    pub fn translate_jobrank_to_rank(&self, jobrank: Rank) -> Option<Rank> {
        const CALL: &str = "Team::translate_jobrank_to_rank";
        let rt = runtime(CALL);
        check_may_communicate(CALL);
        if jobrank >= rt.conduit.size() {
            return None;
        }
        if self.id == WORLD {
            return Some(jobrank);
        }
        self.data(CALL)
            .members
            .iter()
            .position(|&m| m == jobrank)
            .map(|r| r as Rank)
    }

    /// GASNet-EX `gex_Segment_QueryBound`: the segment bound to team member `rank`,
    /// with its address at the owner and here.
    #[track_caller]
    pub fn segment_bound(&self, rank: Rank) -> Option<BoundSegment> {
        const CALL: &str = "Team::segment_bound";
        let rt = runtime(CALL);
        check_may_communicate(CALL);
        rt.conduit.bound_segment(self.job_rank_of(CALL, rank))
    }
}

#[cold]
#[track_caller]
fn invalid_rank(call: &str, rank: Rank, size: Rank) -> ! {
    panic!("gex::{call}: rank {rank} is not in the team (size {size})")
}

#[cold]
#[track_caller]
fn destroyed(call: &str) -> ! {
    panic!("gex::{call}: the team was destroyed (GASNet-EX gex_TM_Destroy)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_names_stay_distinct_past_thousands_of_splits() {
        // 5 ranks, each leading 10,000 teams: every name differs, the primordial team's
        // included (the old layout, rank * 4096 + id, repeated from id 4,096 on).
        let mut seen = std::collections::HashSet::new();
        assert!(seen.insert(shared_name(0, WORLD, 5)));
        for leader in 0..5 {
            for id in 1..10_000 {
                assert!(seen.insert(shared_name(leader, id, 5)), "{leader} {id}");
            }
        }
        assert_eq!(shared_name(0, WORLD, 5), 0);
        assert!(seen.iter().all(|&n| (0..1 << 30).contains(&n)));
    }
}
