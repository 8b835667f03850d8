//! Moving a buffer in messages of at most one AM payload: sending it in order with
//! retries, and receiving it in any order.

use smallvec::SmallVec;

use super::engine::Outbox;
use crate::conduit::Rank;

/// Sends a buffer to one rank, chunk by chunk, resuming after a full queue.
#[derive(Debug, Default)]
pub(crate) struct Sending {
    /// Bytes sent so far (a prefix of the buffer).
    pub(crate) sent: usize,
}

impl Sending {
    /// Sends the bytes of `buf[..ready]` not sent yet to `to` with `tag`, in chunks
    /// ending on chunk boundaries or at `buf.len()`; true once all of `buf` is sent.
    pub(crate) fn send(
        &mut self,
        out: &mut Outbox<'_>,
        to: Rank,
        tag: u32,
        buf: &[u8],
        ready: usize,
    ) -> bool {
        let chunk = out.max_payload();
        while self.sent < buf.len() {
            let end = (self.sent + chunk).min(buf.len());
            if end > ready || !out.send(to, tag, self.sent, &buf[self.sent..end]) {
                return false;
            }
            self.sent = end;
        }
        true
    }
}

/// Receives a buffer of known length in chunks that may arrive in any order.
#[derive(Debug)]
pub(crate) struct Receiving {
    /// Bytes received so far.
    pub(crate) got: usize,
    /// Which chunks arrived (by `offset / chunk`), to find the received prefix: inline
    /// for a buffer of up to 8 chunks.
    arrived: SmallVec<[bool; 8]>,
    /// The length of the received prefix.
    prefix: usize,
    len: usize,
}

impl Receiving {
    /// Expects `len` bytes.
    pub(crate) fn new(len: usize) -> Receiving {
        Receiving {
            got: 0,
            arrived: SmallVec::new(),
            prefix: 0,
            len,
        }
    }

    /// Notes that `[offset, offset + n)` arrived (chunks of `chunk` bytes).
    pub(crate) fn arrived(&mut self, offset: usize, n: usize, chunk: usize) {
        self.got += n;
        let index = offset / chunk.max(1);
        if self.arrived.len() <= index {
            self.arrived.resize(index + 1, false);
        }
        self.arrived[index] = true;
        while self.prefix < self.len {
            let i = self.prefix / chunk.max(1);
            if !self.arrived.get(i).copied().unwrap_or(false) {
                break;
            }
            self.prefix = (self.prefix + chunk).min(self.len);
        }
    }

    /// The bytes received from the start without a gap.
    pub(crate) fn prefix(&self) -> usize {
        self.prefix
    }

    /// Whether every byte arrived.
    pub(crate) fn complete(&self) -> bool {
        self.got >= self.len
    }
}
