//! The opening and closing of the collectives' tests, their usual flags and their
//! segments.

use gex::coll::CollFlags;
use gex::{Client, Flags, Segment, Team};

/// Starts the client named `name`; its team.
pub(crate) fn init(name: &str) -> Team {
    let (_client, _ep, team) = Client::init(name, Flags::NONE).unwrap();
    team
}

/// Waits for every rank, then finalizes the client.
pub(crate) fn finalize(team: &Team) {
    team.barrier();
    team.client().finalize();
}

/// One flag of each category.
pub(crate) fn flags(input: CollFlags, output: CollFlags, scope: CollFlags) -> CollFlags {
    input | output | scope
}

/// MYSYNC in and out, LOCAL addresses.
pub(crate) fn local() -> CollFlags {
    flags(
        CollFlags::IN_MYSYNC,
        CollFlags::OUT_MYSYNC,
        CollFlags::LOCAL,
    )
}

/// A segment of at least `bytes` (whole pages) on every rank, and every rank's base.
pub(crate) fn attach(team: &Team, bytes: usize) -> (Segment, Vec<usize>) {
    let size = bytes.div_ceil(gex::PAGE_SIZE) * gex::PAGE_SIZE;
    let seg = Segment::attach(team, size).unwrap();
    let bases = super::segment_bases(team);
    (seg, bases)
}
