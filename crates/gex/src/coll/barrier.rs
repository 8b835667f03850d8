//! The dissemination barrier over a team (GASNet-EX `gex_Coll_BarrierNB`): in round `k`
//! of `ceil(log2 n)`, rank `r` signals `(r + 2^k) mod n` and waits for the signal of
//! `(r - 2^k) mod n`. After the last round every rank has heard, through some chain,
//! from every other.

use super::engine::{Collective, Msg, Outbox};
use crate::conduit::Rank;

/// A barrier in flight at this rank.
pub(crate) struct Barrier {
    rounds: usize,
    round: usize,
    sent: bool,
    /// Signals received, by round (a team of at most `2^32` ranks has at most 32
    /// rounds): inline, so that a barrier allocates nothing of its own.
    arrived: [u32; 32],
}

impl Barrier {
    /// A barrier over a team of `n`.
    pub(crate) fn new(n: Rank) -> Barrier {
        let rounds = (32 - (n.max(1) - 1).leading_zeros()) as usize;
        Barrier {
            rounds,
            round: 0,
            sent: false,
            arrived: [0; 32],
        }
    }
}

impl Collective for Barrier {
    fn deliver(&mut self, msg: Msg) {
        let round = msg.tag as usize;
        assert!(
            round < self.rounds,
            "gex::Team::barrier_nb: a barrier signal of round {round} from team rank {} (this barrier has {})",
            msg.src,
            self.rounds
        );
        self.arrived[round] += 1;
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        let (me, n) = (out.rank(), out.size());
        while self.round < self.rounds {
            if !self.sent {
                let peer = ((u64::from(me) + (1u64 << self.round)) % u64::from(n)) as Rank;
                if !out.send(peer, self.round as u32, 0, &[]) {
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
