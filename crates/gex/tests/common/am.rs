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

/// A Reply whose handler panics, asked for ahead of an operation under test so that
/// the panic comes out of that operation's wait ([`PanickingReply::ask`]).
pub(crate) struct PanickingReply {
    go: gex::AmIndex,
    boom: gex::AmIndex,
}

impl PanickingReply {
    /// Registers the two handlers (collective, as every registration).
    pub(crate) fn register(ep: &gex::Endpoint) -> PanickingReply {
        let mut t = [
            gex::AmEntry::short("go", gex::AmRole::Request, 1, go),
            gex::AmEntry::short("boom", gex::AmRole::Reply, 0, boom),
        ];
        ep.register_handlers(&mut t).unwrap();
        PanickingReply {
            go: t[0].index,
            boom: t[1].index,
        }
    }

    /// Asks `rank` for the panicking Reply: it comes before the answer to any message
    /// this rank sends `rank` next.
    pub(crate) fn ask(&self, team: &Team, rank: u32) {
        team.request_short(rank, self.go, &[u32::from(self.boom)], gex::Flags::NONE)
            .unwrap();
    }
}

/// The message of the panicking Reply's handler.
pub(crate) const BOOM: &str = "boom in a reply";

/// The go-ahead's handler: answers with the Reply whose handler panics (its index in
/// `args[0]`).
fn go(token: &gex::Token<'_>, args: &[u32]) {
    token
        .reply_short(args[0] as u8, &[], gex::Flags::NONE)
        .unwrap();
}

fn boom(_token: &gex::Token<'_>, _args: &[u32]) {
    panic!("{BOOM}");
}
