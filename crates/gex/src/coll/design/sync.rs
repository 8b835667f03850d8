//! The synchronization around a collective's data movement: the entry synchronization
//! of IN_ALLSYNC, the exit synchronization of OUT_ALLSYNC, and the members of an
//! aggregate whose completion the last member's event stands for.
//!
//! Both synchronizations are dissemination barriers run in the operation's own messages
//! (tags above [`INNER_TAGS`]), so they cost `ceil(log2 n)` rounds of empty messages
//! and nothing outside the operation waits for them.
//!
//! Under IN_ALLSYNC the data movement is not even built before the entry rounds end:
//! building it reads this rank's sources (the root's copy into its own destination, a
//! rank's own block, the snapshots and packing of the message methods), and any rank
//! may still write them, through RMA, until it has entered itself.

use std::sync::Arc;

use super::super::engine::{Collective, Msg, Outbox};
use crate::conduit::{OpHandle, Rank};

/// The tags below this are the data movement's; the entry and exit rounds use the two
/// ranges above it.
pub(crate) const INNER_TAGS: u32 = 1 << 28;
const ENTRY: u32 = 1;
const EXIT: u32 = 2;

/// A dissemination barrier inside an operation: in round `k`, signal `r + 2^k` and wait
/// for `r - 2^k`.
struct Rounds {
    base: u32,
    rounds: usize,
    round: usize,
    sent: bool,
    arrived: Vec<u32>,
}

impl Rounds {
    fn new(which: u32, n: Rank) -> Rounds {
        let rounds = (32 - (n.max(1) - 1).leading_zeros()) as usize;
        Rounds {
            base: which * INNER_TAGS,
            rounds,
            round: 0,
            sent: false,
            arrived: vec![0; rounds],
        }
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        let (me, n) = (u64::from(out.rank()), u64::from(out.size()));
        while self.round < self.rounds {
            if !self.sent {
                let peer = ((me + (1u64 << self.round)) % n) as Rank;
                if !out.send(peer, self.base + self.round as u32, 0, &[]) {
                    return false;
                }
                self.sent = true;
            }
            if self.arrived[self.round] == 0 {
                return false;
            }
            self.arrived[self.round] -= 1;
            self.round += 1;
            self.sent = false;
        }
        true
    }
}

/// How to build a call's data movement: at once, or after the entry synchronization.
pub(crate) struct Build(Box<dyn FnOnce() -> Box<dyn Collective>>);

// SAFETY: `Build::new`'s contract: what the closure captures may move to another thread.
unsafe impl Send for Build {}

impl Build {
    /// # Safety
    /// `build` may run on another thread than the caller's (whichever completes the
    /// entry synchronization), at any time until the operation completes: what it
    /// captures must be fit to move there, raw pointers included (the call's buffers,
    /// which its contract keeps valid until completion).
    pub(crate) unsafe fn new(build: impl FnOnce() -> Box<dyn Collective> + 'static) -> Build {
        Build(Box::new(build))
    }
}

/// A collective with its synchronizations.
pub(crate) struct Synced {
    entry: Option<Rounds>,
    /// The data movement, once built.
    inner: Option<Box<dyn Collective>>,
    /// Until then: how to build it, and its messages that came first (from ranks whose
    /// entry rounds ended before this rank's).
    build: Option<Build>,
    early: Vec<Msg>,
    inner_done: bool,
    exit: Option<Rounds>,
    /// The earlier members of an aggregate this operation is the last of.
    members: Vec<Arc<OpHandle>>,
}

impl Synced {
    /// The data movement of `build` after an entry synchronization (`entry`; built only
    /// then, else at once), followed by an exit one (`exit`), complete only once
    /// `members` are.
    pub(crate) fn new(
        n: Rank,
        entry: bool,
        build: Build,
        exit: bool,
        members: Vec<Arc<OpHandle>>,
    ) -> Synced {
        let (inner, build) = if entry {
            (None, Some(build))
        } else {
            (Some((build.0)()), None)
        };
        Synced {
            entry: entry.then(|| Rounds::new(ENTRY, n)),
            inner,
            build,
            early: Vec::new(),
            inner_done: false,
            exit: exit.then(|| Rounds::new(EXIT, n)),
            members,
        }
    }
}

impl Collective for Synced {
    fn deliver(&mut self, msg: Msg) {
        let (which, round) = (msg.tag / INNER_TAGS, (msg.tag % INNER_TAGS) as usize);
        let rounds = match which {
            0 => {
                return match &mut self.inner {
                    Some(inner) => inner.deliver(msg),
                    None => self.early.push(msg),
                }
            }
            ENTRY => self.entry.as_mut(),
            EXIT => self.exit.as_mut(),
            _ => None,
        };
        match rounds {
            Some(r) if round < r.rounds => r.arrived[round] += 1,
            _ => panic!(
                "gex: a collective synchronization message (tag {:#x}) from team rank {} \
                 that this operation does not expect: the ranks disagree on the sync flags",
                msg.tag, msg.src
            ),
        }
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        if let Some(entry) = &mut self.entry {
            if !entry.advance(out) {
                return false;
            }
        }
        let inner = self.inner.get_or_insert_with(|| {
            let build = self.build.take().expect("a data movement to build");
            let mut inner = (build.0)();
            for msg in self.early.drain(..) {
                inner.deliver(msg);
            }
            inner
        });
        if !self.inner_done {
            if !inner.advance(out) {
                return false;
            }
            self.inner_done = true;
        }
        if let Some(exit) = &mut self.exit {
            if !exit.advance(out) {
                return false;
            }
        }
        self.members.iter().all(|m| m.is_done())
    }
}
