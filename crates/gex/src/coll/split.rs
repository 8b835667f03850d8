//! Team split and destroy (GASNet-EX `gex_TM_Split`, `gex_TM_Destroy`), collective over
//! the parent team and the team.
//!
//! A split exchanges one record per parent member, (color, key, the id the new team
//! will have in that member's process), with the staggered gather-all of the design
//! document's collectives. Each member then computes its team alone: the members of its color,
//! ordered by key, ties broken by parent rank.

use super::engine;
use crate::conduit::Rank;
use crate::context::check_may_communicate;
use crate::event::Event;
use crate::runtime::runtime;
use crate::team::{self, Team, TeamId, WORLD};

/// The recommended scratch space of a team (`Team::split_scratch_size`).
const SCRATCH_RECOMMENDED: usize = 1 << 20;

/// The size of one member's record in a split's exchange: its color (8 bytes), key
/// (4), the new team's id in its process (4) and the blocks of signal words it offers
/// the new team's barriers (1, `barrier::team::offer`), padded to 8.
const RECORD: usize = 24;

/// What a scratch-size query of [`Team::split_scratch_size`] asks for
/// (`GEX_FLAG_TM_SCRATCH_SIZE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScratchQuery {
    /// `GEX_FLAG_TM_SCRATCH_SIZE_MIN`: the least scratch space a split accepts.
    Min,
    /// `GEX_FLAG_TM_SCRATCH_SIZE_RECOMMENDED`: the scratch space that serves best.
    Recommended,
}

impl Team {
    /// GASNet-EX `gex_TM_Split`: collective over this team. The members that pass the
    /// same `color` form one new team, ranked by increasing `key`, ties broken by rank
    /// in this team; a member that passes no color gets no team (`None`). `scratch`
    /// is memory of this rank's segment (checked: a range outside it panics, naming the
    /// call) granted to the new team until it is destroyed
    /// (optional here: a broadcast between hosts stages its data there when this rank's
    /// destination lies outside its segment, `coll::broadcast`); it is returned by
    /// [`destroy`](Team::destroy).
    #[track_caller]
    pub fn split(
        &self,
        color: Option<u32>,
        key: i32,
        scratch: Option<(*mut u8, usize)>,
    ) -> Option<Team> {
        const CALL: &str = "Team::split";
        let rt = runtime(CALL);
        check_may_communicate(CALL);
        let parent = self.data(CALL);
        if let Some((addr, size)) = scratch {
            // The spec's scratch is "within the bound segment": a broadcast lands in it
            // by RMA.
            let (at, len) = (addr as usize, size);
            let inside = self.segment_bound(self.rank).is_some_and(|seg| {
                at >= seg.owner_addr
                    && at
                        .checked_add(len)
                        .is_some_and(|end| end <= seg.owner_addr + seg.size)
            });
            if !inside {
                panic!(
                    "gex::{CALL}: the scratch space [{at:#x}, {at:#x}+{len}) is not inside this \
                     rank's bound segment"
                );
            }
        }
        if let Some(c) = color {
            if c > i32::MAX as u32 {
                panic!("gex::{CALL}: color {c} is not a non-negative int");
            }
        }
        let gasp_team = parent.shared_name();
        let gasp_color = color.map_or(-1, |c| c as i32);
        let span = gasp::span!(
            GASP_GEX_TM_SPLIT,
            gasp_team,
            self.size as i32,
            gasp_color,
            key
        );
        let new_id: TeamId = if color.is_some() {
            team::reserve_id()
        } else {
            TeamId::MAX
        };
        let offer = crate::barrier::team::offer(rt);
        let mut record = [0u8; RECORD];
        record[..8].copy_from_slice(&color.map_or(-1i64, i64::from).to_le_bytes());
        record[8..12].copy_from_slice(&key.to_le_bytes());
        record[12..16].copy_from_slice(&new_id.to_le_bytes());
        record[16] = offer.blocks;

        let mut table = vec![0u8; RECORD * self.size as usize];
        // SAFETY: `record` and `table` outlive the wait below.
        let exchange = unsafe {
            super::design::all_gather(CALL, self, table.as_mut_ptr(), record.as_ptr(), RECORD)
        };
        Event::from_completion(crate::conduit::Completion::Pending(engine::start(
            rt,
            self,
            CALL,
            engine::digest(&[5]),
            Box::new(exchange),
        )))
        .wait();

        let new_team = color.map(|c| {
            let of_color = || {
                table.chunks_exact(RECORD).enumerate().filter(|(_, r)| {
                    i64::from_le_bytes(r[..8].try_into().expect("8 bytes")) == i64::from(c)
                })
            };
            let mut mine: Vec<(i32, Rank, TeamId)> = of_color()
                .map(|(p, r)| {
                    let key = i32::from_le_bytes(r[8..12].try_into().expect("4 bytes"));
                    let id = TeamId::from_le_bytes(r[12..16].try_into().expect("4 bytes"));
                    (key, p as Rank, id)
                })
                .collect();
            let block =
                crate::barrier::team::claim(offer, of_color().map(|(_, r)| r[16]), mine.len());
            mine.sort_by_key(|&(key, p, _)| (key, p));
            let rank = mine
                .iter()
                .position(|&(_, p, _)| p == self.rank)
                .expect("this rank passed this color") as Rank;
            let members = mine
                .iter()
                .map(|&(_, p, _)| parent.members[p as usize])
                .collect();
            let peer_ids = mine.iter().map(|&(_, _, id)| id).collect();
            team::install(
                new_id,
                members,
                peer_ids,
                rank,
                scratch.map(|(a, s)| (a as usize, s)),
                block,
                team::world(rt).size,
            )
        });
        if color.is_none() {
            crate::barrier::team::claim(offer, std::iter::empty(), 0);
        }
        let (new_gasp_team, new_size) = match &new_team {
            Some(t) => (t.data(CALL).shared_name(), t.size as i32),
            None => (-1, 0),
        };
        gasp::end!(
            span,
            gasp_team,
            self.size as i32,
            gasp_color,
            key,
            new_gasp_team,
            new_size
        );
        new_team
    }

    /// GASNet-EX `gex_TM_Split` with a `GEX_FLAG_TM_SCRATCH_SIZE_*` flag: the scratch
    /// size to pass to a split with the same arguments. The collectives keep their
    /// state in private memory, so none is needed (the minimum is 0, as is every answer
    /// for a member that gets no team); the recommended size, 1 MiB, lets a broadcast
    /// of up to that many bytes between hosts land by RMA even where this rank's
    /// destination lies outside its segment.
    #[track_caller]
    pub fn split_scratch_size(&self, color: Option<u32>, _key: i32, query: ScratchQuery) -> usize {
        const CALL: &str = "Team::split_scratch_size";
        runtime(CALL);
        check_may_communicate(CALL);
        self.data(CALL);
        match (color, query) {
            (Some(_), ScratchQuery::Recommended) => SCRATCH_RECOMMENDED,
            _ => 0,
        }
    }

    /// GASNet-EX `gex_TM_Destroy`: collective over the team. Waits for this rank's
    /// collectives on the team to complete, synchronizes the members, and frees what
    /// the team holds; returns the scratch space granted at the split. Using the team
    /// afterwards fails naming the call. The primordial team cannot be destroyed.
    #[track_caller]
    pub fn destroy(self) -> Option<(*mut u8, usize)> {
        const CALL: &str = "Team::destroy";
        let rt = runtime(CALL);
        check_may_communicate(CALL);
        if self.id == WORLD {
            panic!("gex::{CALL}: the primordial team cannot be destroyed");
        }
        let data = self.data(CALL);
        let gasp_team = data.shared_name();
        let span = gasp::span!(GASP_GEX_TM_DESTROY, gasp_team, self.size as i32);
        rt.wait_until(|| engine::running(self.id) == 0);
        // Completes after every barrier of the team this rank started: then no signal
        // of the team is still to land in this rank's words (`barrier::team`).
        self.team_barrier_nb().wait();
        if let Some(block) = data.signal_block {
            crate::barrier::team::release(rt, block);
        }
        engine::forget(self.id);
        let scratch = team::remove(self.id).and_then(|d| d.scratch);
        gasp::end!(span, gasp_team, self.size as i32);
        scratch.map(|(a, s)| (a as *mut u8, s))
    }
}
