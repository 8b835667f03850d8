//! What Active Message handlers need to know of their job: they may not query bound
//! segments, so a rank publishes its team and every rank's segment base here first.

use std::sync::OnceLock;

use gex::Team;

/// Team handle and segment bases for handlers (which may not query bound segments).
pub(crate) static TEAM: OnceLock<Team> = OnceLock::new();
pub(crate) static BASES: OnceLock<Vec<usize>> = OnceLock::new();

pub(crate) fn team() -> Team {
    *TEAM.get().expect("team set")
}

pub(crate) fn base(rank: u32) -> usize {
    BASES.get().expect("bases set")[rank as usize]
}
