//! Gathering one fixed-size record from every rank at team rank 0 (flat): the first
//! half of a team split's exchange.

use super::chunks::Sending;
use super::engine::{Collective, Msg, Outbox};

/// A gather in flight at this rank.
pub(crate) struct Gather {
    record: Vec<u8>,
    /// At rank 0: every rank's record, by team rank.
    pub(crate) table: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    got: usize,
    /// At rank 0: its own record is in the table.
    own: bool,
    sending: Sending,
    n: usize,
}

impl Gather {
    /// Gathers `record` (the same length on every rank) into `table` at rank 0.
    pub(crate) fn new(
        record: Vec<u8>,
        n: usize,
        table: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    ) -> Gather {
        Gather {
            record,
            table,
            got: 0,
            own: false,
            sending: Sending::default(),
            n,
        }
    }
}

impl Collective for Gather {
    fn deliver(&mut self, msg: Msg) {
        let len = self.record.len();
        let at = msg.src as usize * len + msg.offset;
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table[at..at + msg.data.len()].copy_from_slice(&msg.data);
        self.got += msg.data.len();
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        let len = self.record.len();
        if out.rank() == 0 {
            if !self.own {
                let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
                table[..len].copy_from_slice(&self.record);
                self.own = true;
                self.got += len;
            }
            self.got == len * self.n
        } else {
            let record = std::mem::take(&mut self.record);
            let done = self.sending.send(out, 0, 0, &record, record.len());
            self.record = record;
            done
        }
    }
}
