//! Teams (UPC++ spec ch. 11): ordered sets of ranks, over which collectives run.
//!
//! ```
//! use upcxx::team::{world, Team};
//!
//! upcxx::init();
//! let me = upcxx::rank_me();
//! // Even and odd world ranks, each ordered by world rank (§11.3.1 ¶22).
//! let half: Team = world().split((me % 2) as i32, me as i32);
//! assert_eq!(half[half.rank_me()], me);
//! assert_eq!(half.from_world(me), half.rank_me());
//! let same = half.id().here();
//! assert_eq!(same.rank_n(), half.rank_n());
//! half.destroy(upcxx::EntryBarrier::User);
//! upcxx::finalize();
//! ```
//!
//! # Design
//!
//! * A [`Team`] is a handle onto this process's state of one team: the `gex` team the
//!   collectives run on, the world rank of each member, and the team's [`TeamId`]. The
//!   C++ `team` is move-only and lives where the program put it; here the state is
//!   shared by the handles, so [`TeamId::here`] can hand out a handle from anywhere
//!   and a handle cloned before [`Team::destroy`] fails, naming the call, afterwards
//!   instead of reaching freed state.
//! * The [`TeamId`] is the name `gex` gives the team at its rank 0 (that rank's job rank
//!   and the id the team has in its process), which every member learns in the split
//!   and no other team of the job ever has. The local team, when it is the whole job,
//!   runs on the world's `gex` team and is told apart by one bit.
//! * [`Team::split`] and [`Team::destroy`] (with [`EntryBarrier::User`]) first enter a
//!   barrier that makes user-level progress, as §11.3.1 ¶23 and ¶35 ask; the `gex` calls
//!   behind them make only internal progress, and a rank could otherwise wait there
//!   for an RPC that another rank, not yet in the call, waits to see answered.
//! * The world team and the local team are made by `init` (the local team is a split
//!   of the world when the job spans several neighbourhoods, so `init` is collective
//!   already).
//!
//! Teams sit on progress (their barriers) and futures ([`TeamId::when_here`]); the
//! collectives (`coll`) sit on them.

mod registry;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Serialize};

use crate::future::Future;
use crate::runtime::state::{check_init, Rank};
use crate::thread;

/// The color with which a rank takes part in [`Team::split`] without joining any new
/// team (UPC++ `team::color_none`, §11.3.1 ¶4; negative, as the spec requires).
pub const COLOR_NONE: i32 = -1;

/// The entry barrier of an operation that takes one (UPC++ `entry_barrier`, §12.2 ¶1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EntryBarrier {
    /// No barrier at entry.
    None,
    /// A barrier at entry that makes only internal-level progress.
    Internal,
    /// A barrier at entry that makes user-level progress (the default).
    #[default]
    User,
}

/// A universal name of a team, the same on every member (UPC++ `team_id`, §11.3.2).
/// Trivially serializable: send it in an RPC and look the team up with
/// [`here`](TeamId::here) or [`when_here`](TeamId::when_here) on arrival. The default
/// value is the invalid id (§11.3.2 ¶6).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Pod, Zeroable, Serialize, Deserialize,
)]
#[repr(transparent)]
pub struct TeamId(u64);

impl Default for TeamId {
    fn default() -> TeamId {
        TeamId::INVALID
    }
}

/// Marks the local team's id when it runs on the world's `gex` team.
const LOCAL_ALIAS: u64 = 1 << 63;

impl TeamId {
    const INVALID: TeamId = TeamId(u64::MAX);

    fn of_gex(team: &gex::Team) -> TeamId {
        TeamId(team.shared_id())
    }

    /// Whether this is a valid id (not the default-constructed one).
    pub fn is_valid(&self) -> bool {
        *self != TeamId::INVALID
    }

    /// The id as a number, for tools and messages.
    pub fn to_u64(self) -> u64 {
        self.0
    }

    /// The team this process knows by this name (UPC++ `team_id::here`, §11.3.2 ¶8).
    ///
    /// # Panics
    /// If the id is invalid, if this process is not a member of the team or has not
    /// finished creating it (§11.3.2 ¶9), or if the team was destroyed.
    #[track_caller]
    pub fn here(&self) -> Team {
        const CALL: &str = "team_id::here";
        check_init(CALL);
        self.check_valid(CALL);
        registry::lookup(*self).unwrap_or_else(|| registry::absent(CALL, *self))
    }

    /// A future of the team this process knows by this name, ready at once if it has
    /// created the team, else at the user-level progress of the split that creates it
    /// here (UPC++ `team_id::when_here`, §11.3.2 ¶12).
    ///
    /// An id of a team this process is not a member of never arrives: the future is
    /// never ready, and waiting on it waits forever (the spec leaves this undefined).
    /// The future is readied on the thread holding the master persona.
    ///
    /// # Panics
    /// If the id is invalid or names a team this process destroyed, or if the calling
    /// thread does not hold the master persona (§11.3.2 ¶13).
    #[track_caller]
    pub fn when_here(&self) -> Future<Team> {
        const CALL: &str = "team_id::when_here";
        check_init(CALL);
        self.check_valid(CALL);
        check_master(CALL);
        registry::when_here(CALL, *self)
    }

    #[track_caller]
    fn check_valid(&self, call: &str) {
        if !self.is_valid() {
            panic!("upcxx::{call}: the team id is invalid (default-constructed, §11.3.2 ¶9)");
        }
    }
}

impl std::fmt::Display for TeamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.is_valid() {
            return f.write_str("team#invalid");
        }
        let alias = if self.0 & LOCAL_ALIAS != 0 { "L" } else { "" };
        let raw = self.0 & !LOCAL_ALIAS;
        write!(f, "team#{alias}{}.{}", raw >> 32, raw & 0xffff_ffff)
    }
}

/// A team (UPC++ `team`, §11.3.1): a handle onto this process's state of it.
#[derive(Clone)]
pub struct Team {
    state: Arc<TeamState>,
}

struct TeamState {
    /// The `gex` team; `None` for the invalid team of a `split` with [`COLOR_NONE`].
    gex: Option<gex::Team>,
    id: TeamId,
    /// The world rank of each member, by team rank.
    members: Box<[Rank]>,
    /// `(world rank, team rank)` of each member, by world rank.
    by_world: Box<[(Rank, Rank)]>,
    rank_me: Rank,
    /// `world()` or `local_team()`, which cannot be destroyed.
    fundamental: bool,
    destroyed: AtomicBool,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.state.gex {
            None => f.write_str("Team(invalid)"),
            Some(_) => f
                .debug_struct("Team")
                .field("id", &self.state.id)
                .field("rank_me", &self.state.rank_me)
                .field("rank_n", &self.state.members.len())
                .finish(),
        }
    }
}

impl Team {
    fn new(gex: gex::Team, id: TeamId, members: Box<[Rank]>, fundamental: bool) -> Team {
        let mut by_world: Box<[(Rank, Rank)]> = members
            .iter()
            .enumerate()
            .map(|(r, &w)| (w, r as Rank))
            .collect();
        by_world.sort_unstable();
        Team {
            state: Arc::new(TeamState {
                rank_me: gex.rank(),
                gex: Some(gex),
                id,
                members,
                by_world,
                fundamental,
                destroyed: AtomicBool::new(false),
            }),
        }
    }

    fn invalid() -> Team {
        Team {
            state: Arc::new(TeamState {
                gex: None,
                id: TeamId::INVALID,
                members: Box::new([]),
                by_world: Box::new([]),
                rank_me: 0,
                fundamental: false,
                destroyed: AtomicBool::new(false),
            }),
        }
    }

    /// The `gex` team, or a panic naming `call` for an invalid or destroyed team.
    #[inline]
    #[track_caller]
    pub(crate) fn gex(&self, call: &str) -> gex::Team {
        match self.state.gex {
            Some(t) if !self.state.destroyed.load(Ordering::Acquire) => t,
            Some(_) => destroyed(call, self.state.id),
            None => invalid_team(call),
        }
    }

    /// Whether this is a team, rather than the invalid team a [`split`](Team::split)
    /// with [`COLOR_NONE`] returns.
    pub fn is_valid(&self) -> bool {
        self.state.gex.is_some()
    }

    /// The number of ranks in the team (UPC++ `team::rank_n`, §11.3.1 ¶5).
    #[track_caller]
    pub fn rank_n(&self) -> Rank {
        self.gex("team::rank_n").size()
    }

    /// The calling process's rank in the team (UPC++ `team::rank_me`, §11.3.1 ¶8).
    #[track_caller]
    pub fn rank_me(&self) -> Rank {
        self.gex("team::rank_me");
        self.state.rank_me
    }

    /// The team's universal name (UPC++ `team::id`, §11.3.1 ¶41).
    #[track_caller]
    pub fn id(&self) -> TeamId {
        self.gex("team::id");
        self.state.id
    }

    /// The rank in this team of the process with rank `world_index` in the world team
    /// (UPC++ `team::from_world`, §11.3.1 ¶15).
    ///
    /// # Panics
    /// If `world_index` is not a world rank or that process is not a member (§11.3.1 ¶16).
    #[track_caller]
    pub fn from_world(&self, world_index: Rank) -> Rank {
        const CALL: &str = "team::from_world";
        self.find_world(CALL, world_index).unwrap_or_else(|| {
            panic!(
                "upcxx::{CALL}: world rank {world_index} is not a member of {} \
                 (UPC++ spec §11.3.1 ¶16; from_world_or takes a default)",
                self.state.id
            )
        })
    }

    /// As [`from_world`](Team::from_world), with `otherwise` for a process that is not
    /// a member (UPC++ `team::from_world(world_index, otherwise)`, §11.3.1 ¶17).
    ///
    /// # Panics
    /// If `world_index` is not a world rank (§11.3.1 ¶16).
    #[track_caller]
    pub fn from_world_or(&self, world_index: Rank, otherwise: Rank) -> Rank {
        self.find_world("team::from_world", world_index)
            .unwrap_or(otherwise)
    }

    #[track_caller]
    fn find_world(&self, call: &str, world_index: Rank) -> Option<Rank> {
        self.gex(call);
        let n = crate::rank_n();
        if world_index >= n {
            panic!(
                "upcxx::{call}: {world_index} is not a world rank (the world has {n} ranks, \
                 UPC++ spec §11.3.1 ¶16)"
            );
        }
        let by_world = &self.state.by_world;
        by_world
            .binary_search_by_key(&world_index, |&(w, _)| w)
            .ok()
            .map(|i| by_world[i].1)
    }

    /// Whether the process with world rank `world_index` is a member of this team.
    #[track_caller]
    pub fn contains_world(&self, world_index: Rank) -> bool {
        self.find_world("team::contains_world", world_index)
            .is_some()
    }

    /// Splits this team into subteams (UPC++ `team::split`, §11.3.1 ¶19): collective
    /// over this team. The callers with the same `color` form one new team, ranked by
    /// `key`, ties broken by rank in this team; a caller passing [`COLOR_NONE`] gets the
    /// invalid team, usable only to be dropped ([`is_valid`](Team::is_valid) is false).
    /// Makes user-level progress.
    ///
    /// # Panics
    /// If `color` is negative but not [`COLOR_NONE`] (§11.3.1 ¶21), if the team is
    /// invalid or destroyed, if the calling thread does not hold the master persona
    /// (¶20), or in the restricted context.
    #[track_caller]
    pub fn split(&self, color: i32, key: i32) -> Team {
        const CALL: &str = "team::split";
        let parent = self.gex(CALL);
        check_collective(CALL);
        if color < 0 && color != COLOR_NONE {
            panic!(
                "upcxx::{CALL}: color {color} is negative but not team::color_none \
                 (UPC++ spec §11.3.1 ¶21)"
            );
        }
        let team_arg = self.state.id.to_u64();
        let span = gasp::span!(GASP_UPCXX_TEAM_SPLIT, team_arg, color, key);
        crate::progress::barrier_with_progress(&parent);
        let color_arg = (color >= 0).then_some(color as u32);
        let team = match parent.split(color_arg, key, None) {
            None => Team::invalid(),
            Some(t) => {
                let members = (0..t.size())
                    .map(|r| t.translate_rank_to_jobrank(r))
                    .collect();
                let team = Team::new(t, TeamId::of_gex(&t), members, false);
                registry::insert(&team);
                team
            }
        };
        crate::progress::user_progress();
        gasp::end!(span, team_arg, color, key, team.state.id.to_u64());
        team
    }

    /// Destroys this process's state of the team (UPC++ `team::destroy`, §11.3.1 ¶30):
    /// collective over the team, after the entry barrier `lev`. Waits for this rank's
    /// collectives on the team to complete. Every handle of the team fails, naming the
    /// call, afterwards; its id is no longer found by [`TeamId::here`].
    ///
    /// # Panics
    /// For `world()`, `local_team()`, the invalid team or a team already destroyed
    /// (§11.3.1 ¶32), off the master persona's thread (¶31), or in the restricted context.
    #[track_caller]
    pub fn destroy(&self, lev: EntryBarrier) {
        const CALL: &str = "team::destroy";
        let team = self.gex(CALL);
        check_collective(CALL);
        if self.state.fundamental {
            panic!(
                "upcxx::{CALL}: {} is world() or local_team(), which cannot be destroyed",
                self.state.id
            );
        }
        let team_arg = self.state.id.to_u64();
        let span = gasp::span!(GASP_UPCXX_TEAM_DESTROY, team_arg);
        match lev {
            EntryBarrier::User => crate::progress::barrier_with_progress(&team),
            EntryBarrier::Internal => crate::progress::wait_internal(team.barrier_nb()),
            // gex's destroy below waits for the other members (internal progress, ¶35):
            // this thread's batched RPCs go out first, as internal progress sends them,
            // or a member waiting for one of them before it destroys never comes.
            EntryBarrier::None => crate::rpc::send_unsent(),
        }
        self.state.destroyed.store(true, Ordering::Release);
        registry::remove(self.state.id);
        team.destroy();
        gasp::end!(span, team_arg);
    }
}

impl std::ops::Index<Rank> for Team {
    type Output = Rank;

    /// The world rank of the process with rank `peer_index` in this team (UPC++
    /// `team::operator[]`, §11.3.1 ¶11).
    ///
    /// # Panics
    /// If `peer_index` is not a rank of the team (§11.3.1 ¶12).
    #[track_caller]
    fn index(&self, peer_index: Rank) -> &Rank {
        self.gex("team::operator[]");
        // Not `unwrap_or_else`: a closure would report its own location, not the caller's.
        match self.state.members.get(peer_index as usize) {
            Some(rank) => rank,
            None => panic!(
                "upcxx::team::operator[]: rank {peer_index} is not in {} of {} ranks \
                 (UPC++ spec §11.3.1 ¶12)",
                self.state.id,
                self.state.members.len()
            ),
        }
    }
}

static WORLD: OnceLock<Team> = OnceLock::new();
static LOCAL: OnceLock<Team> = OnceLock::new();

/// The team of every rank of the job (UPC++ `world`, §11.3.3 ¶1).
#[track_caller]
pub fn world() -> &'static Team {
    check_init("world");
    WORLD.get().expect("init made the world team")
}

/// The team of the ranks whose shared segments this process maps, this one included,
/// in world-rank order (UPC++ `local_team`, §11.3.3 ¶12, §11.2). Its collectives move
/// data through shared memory.
#[track_caller]
pub fn local_team() -> &'static Team {
    check_init("local_team");
    LOCAL.get().expect("init made the local team")
}

/// Whether the process with world rank `world_index` is in the local team (UPC++
/// `local_team_contains`, §11.3.3 ¶15).
///
/// # Panics
/// If `world_index` is not a world rank (§11.3.3 ¶16).
#[track_caller]
pub fn local_team_contains(world_index: Rank) -> bool {
    check_init("local_team_contains");
    LOCAL
        .get()
        .expect("init made the local team")
        .find_world("local_team_contains", world_index)
        .is_some()
}

/// Makes the world team and the local team (from `init`, collective over the world):
/// the local team is the world's neighbourhood of this process, split off the world
/// unless it is the whole job.
pub(crate) fn init(world_gex: gex::Team) {
    let n = world_gex.size();
    let world = Team::new(
        world_gex,
        TeamId::of_gex(&world_gex),
        (0..n).collect(),
        true,
    );
    registry::insert(&world);
    let nbrhd = gex::nbrhd_info();
    let local = if nbrhd.members.len() == n as usize {
        Team::new(
            world_gex,
            TeamId(TeamId::of_gex(&world_gex).0 | LOCAL_ALIAS),
            nbrhd.members.into(),
            true,
        )
    } else {
        let color = gex::my_position().nbrhd_set_rank;
        let t = world_gex
            .split(Some(color), world_gex.rank() as i32, None)
            .expect("every rank has a neighbourhood");
        let members = (0..t.size())
            .map(|r| t.translate_rank_to_jobrank(r))
            .collect();
        Team::new(t, TeamId::of_gex(&t), members, true)
    };
    registry::insert(&local);
    let _ = WORLD.set(world);
    let _ = LOCAL.set(local);
}

/// The checks of a collective call that waits (§12.1 ¶6): the calling thread holds
/// the master persona and is not in the restricted context.
#[track_caller]
pub(crate) fn check_collective(call: &str) {
    thread::check_not_restricted(call);
    check_master(call);
}

/// The check of a collective call that only initiates (a non-blocking collective, a
/// `dist_object`'s construction): the calling thread holds the master persona (§12.1
/// ¶6). A callback or RPC may make such a call: §10.2 restricts waiting there, not
/// initiating.
#[track_caller]
pub(crate) fn check_collective_initiation(call: &str) {
    check_master(call);
}

#[track_caller]
fn check_master(call: &str) {
    if !thread::holds_master() {
        panic!(
            "upcxx::{call}: the calling thread does not hold the master persona, which \
             collectives and team operations require (UPC++ spec §12.1 ¶6)"
        );
    }
}

#[cold]
#[track_caller]
fn destroyed(call: &str, id: TeamId) -> ! {
    panic!("upcxx::{call}: {id} was destroyed (team::destroy)")
}

#[cold]
#[track_caller]
fn invalid_team(call: &str) -> ! {
    panic!(
        "upcxx::{call}: the team is the invalid team that split returns for \
         team::color_none; it can only be dropped (UPC++ spec §11.3.1 ¶22)"
    )
}

/// [`rpc_ff`](crate::rpc_ff) to the process with rank `rank` in `team` (UPC++
/// `rpc_ff(team, recipient, func, args...)`, §9.2).
///
/// # Panics
/// As [`rpc_ff`](crate::rpc_ff); if `rank` is not a rank of `team`.
#[track_caller]
pub fn rpc_ff_in<F, A>(team: &Team, rank: Rank, func: F, args: A)
where
    F: crate::rpc::RpcFn<A>,
    A: crate::rpc::RpcArgs,
{
    crate::rpc::rpc_ff(team[rank], func, args)
}

/// [`rpc`](fn@crate::rpc) to the process with rank `rank` in `team` (UPC++
/// `rpc(team, recipient, func, args...)`, §9.3).
///
/// # Panics
/// As [`rpc`](fn@crate::rpc); if `rank` is not a rank of `team`.
#[track_caller]
pub fn rpc_in<F, A>(team: &Team, rank: Rank, func: F, args: A) -> Future<crate::rpc::RpcValue<F, A>>
where
    F: crate::rpc::RpcFn<A>,
    A: crate::rpc::RpcArgs,
    crate::rpc::RpcValue<F, A>: serde::Serialize + serde::de::DeserializeOwned,
{
    crate::rpc::rpc(team[rank], func, args)
}

/// [`rpc_ff_with`](crate::rpc_ff_with) to the process with rank `rank` in `team` (UPC++
/// `rpc_ff(team, recipient, cxs, func, args...)`, §9.2).
///
/// # Panics
/// As [`rpc_ff_with`](crate::rpc_ff_with); if `rank` is not a rank of `team`.
#[track_caller]
pub fn rpc_ff_in_with<C, F, A>(
    team: &Team,
    rank: Rank,
    cxs: C,
    func: F,
    args: A,
) -> crate::completion::Returned<C, crate::rpc::RpcFfCall>
where
    C: crate::completion::Completions<crate::rpc::RpcFfCall>,
    F: crate::rpc::RpcFn<A>,
    A: crate::rpc::RpcArgs,
{
    crate::rpc::rpc_ff_with(team[rank], cxs, func, args)
}

/// [`rpc_with`](crate::rpc_with) to the process with rank `rank` in `team` (UPC++
/// `rpc(team, recipient, cxs, func, args...)`, §9.3).
///
/// # Panics
/// As [`rpc_with`](crate::rpc_with); if `rank` is not a rank of `team`.
#[track_caller]
pub fn rpc_in_with<C, F, A>(
    team: &Team,
    rank: Rank,
    cxs: C,
    func: F,
    args: A,
) -> crate::completion::Returned<C, crate::rpc::RpcCall<crate::rpc::RpcValue<F, A>>>
where
    C: crate::completion::Completions<crate::rpc::RpcCall<crate::rpc::RpcValue<F, A>>>,
    F: crate::rpc::RpcFn<A>,
    A: crate::rpc::RpcArgs,
    crate::rpc::RpcValue<F, A>:
        serde::Serialize + serde::de::DeserializeOwned + crate::future::FutureElements,
    <crate::rpc::RpcValue<F, A> as crate::future::FutureElements>::List:
        crate::completion::ValuesFromList<crate::rpc::RpcValue<F, A>>,
{
    crate::rpc::rpc_with(team[rank], cxs, func, args)
}
