//! The shared-memory method of SINGLE-addressed collectives: when every segment of the
//! team is mapped in this process (one host), a rank copies each block it receives
//! straight from the source segment into its destination, one copy per byte and no
//! message carrying data.
//!
//! Each rank *pulls* the blocks bound for its own destination, so it never writes memory
//! of a rank that has not entered. Messages carry only synchronization, as the sync
//! modes need it (`super` has the rules):
//! * IN_MYSYNC: a rank sends `ENTERED` to every rank that reads its source, and a
//!   reader copies a block only after its owner's `ENTERED`. (IN_NOSYNC copies at once;
//!   IN_ALLSYNC runs after the entry synchronization.)
//! * OUT_MYSYNC: a reader sends `DONE` to each owner it read from, and a rank completes
//!   only when every reader of its source said `DONE`: then no movement to or from its
//!   areas remains. OUT_NOSYNC and OUT_ALLSYNC need neither: see `super`.

use super::super::engine::{Collective, Msg, Outbox};
use crate::conduit::Rank;

const ENTERED: u32 = 0;
const DONE: u32 = 1;

/// One block to copy into this rank's destination.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pull {
    /// The team rank owning the source.
    pub(crate) owner: Rank,
    /// The source and destination, as addresses in this process.
    pub(crate) src: usize,
    pub(crate) dst: usize,
    pub(crate) len: usize,
}

/// A shared-memory collective in flight at this rank.
pub(crate) struct Shared {
    pulls: Vec<Pull>,
    copied: Vec<bool>,
    /// Whether each pull's owner entered (IN_MYSYNC), by team rank.
    entered: Vec<bool>,
    wait_entered: bool,
    /// The ranks that read this rank's source, still to be told `ENTERED`.
    readers: Vec<Rank>,
    told: usize,
    /// OUT_MYSYNC: `DONE` to each owner read from, and how many readers said it.
    report_done: bool,
    owners: Vec<Rank>,
    reported: usize,
    done_heard: usize,
}

impl Shared {
    /// Copies `pulls`; `readers` are the other ranks that read this rank's source.
    /// `in_mysync`: wait for each owner's entry; `out_mysync`: complete only when the
    /// readers are done. The ranges of `pulls` must stay valid until completion (the
    /// initiating call's contract).
    pub(crate) fn new(
        me: Rank,
        n: Rank,
        pulls: Vec<Pull>,
        readers: Vec<Rank>,
        in_mysync: bool,
        out_mysync: bool,
    ) -> Shared {
        let mut entered = vec![!in_mysync; n as usize];
        entered[me as usize] = true;
        let mut owners: Vec<Rank> = pulls.iter().map(|p| p.owner).filter(|&o| o != me).collect();
        owners.sort_unstable();
        owners.dedup();
        Shared {
            copied: vec![false; pulls.len()],
            pulls,
            entered,
            wait_entered: in_mysync,
            readers,
            told: 0,
            report_done: out_mysync,
            owners,
            reported: 0,
            done_heard: 0,
        }
    }
}

impl Collective for Shared {
    fn deliver(&mut self, msg: Msg) {
        match msg.tag {
            ENTERED => self.entered[msg.src as usize] = true,
            DONE => self.done_heard += 1,
            tag => panic!("gex: a shared-memory collective message with tag {tag}"),
        }
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        if self.wait_entered {
            while self.told < self.readers.len() {
                if !out.send(self.readers[self.told], ENTERED, 0, &[]) {
                    return false;
                }
                self.told += 1;
            }
        }
        for (pull, copied) in self.pulls.iter().zip(&mut self.copied) {
            if !*copied && self.entered[pull.owner as usize] {
                // SAFETY: both ranges are valid until completion and mapped here (the
                // initiating call translated them); `copy` allows overlap.
                unsafe { std::ptr::copy(pull.src as *const u8, pull.dst as *mut u8, pull.len) };
                *copied = true;
            }
        }
        if !self.copied.iter().all(|&c| c) {
            return false;
        }
        if !self.report_done {
            return true;
        }
        while self.reported < self.owners.len() {
            if !out.send(self.owners[self.reported], DONE, 0, &[]) {
                return false;
            }
            self.reported += 1;
        }
        self.done_heard == self.readers.len()
    }
}
