//! Gather-all (`gasnet_coll_gather_all_nb`) in messages, two ways:
//!
//! * **Dissemination** (Bruck's recursive doubling, any team size): each rank keeps the
//!   blocks in the order that starts at itself. In round `k` (`d = 2^k`) rank `r` sends
//!   the first `min(d, n - d)` blocks it holds to `r - d` and receives as many from
//!   `r + d`, which are its blocks `d..`; after `ceil(log2 n)` rounds it holds all of
//!   them and rotates them into rank order. Few messages, each byte forwarded up to
//!   `log2 n` times: for small blocks.
//! * **Staggered**: every rank sends its block straight to every other rank, to
//!   `r + 1, r + 2, …` in turn, so that the ranks do not all send to the same rank at
//!   once. `n - 1` messages per rank, each byte sent once: for large blocks.

use super::super::chunks::{Receiving, Sending};
use super::super::engine::{Collective, Msg, Outbox};
use crate::conduit::Rank;

/// A dissemination gather-all in flight at this rank.
pub(crate) struct Dissemination {
    dst: usize,
    me: Rank,
    n: Rank,
    sizes: Vec<usize>,
    /// `roff[j]`: where the block of rank `me + j` starts in `buf` (`n + 1` entries).
    roff: Vec<usize>,
    buf: Vec<u8>,
    rounds: usize,
    /// The round whose send is under way (or next).
    round: usize,
    sending: Sending,
    /// What arrived, by round.
    received: Vec<Receiving>,
    chunk: usize,
    placed: bool,
}

impl Dissemination {
    /// # Safety
    /// `src` must be readable for `sizes[me]` bytes during this call; `dst` writable for
    /// the sum of `sizes` until the operation completes.
    pub(crate) unsafe fn new(
        me: Rank,
        n: Rank,
        sizes: &[usize],
        dst: *mut u8,
        src: *const u8,
        chunk: usize,
    ) -> Dissemination {
        let mut roff = vec![0];
        for j in 0..n {
            roff.push(roff[j as usize] + sizes[((me + j) % n) as usize]);
        }
        let mut buf = vec![0; roff[n as usize]];
        let mine = sizes[me as usize];
        // SAFETY: the caller's contract: `src` is readable for this rank's block now.
        buf[..mine].copy_from_slice(unsafe { std::slice::from_raw_parts(src, mine) });
        let rounds = (32 - (n.max(1) - 1).leading_zeros()) as usize;
        let received = (0..rounds)
            .map(|k| {
                let d = 1usize << k;
                let cnt = d.min(n as usize - d);
                Receiving::new(roff[d + cnt] - roff[d])
            })
            .collect();
        Dissemination {
            dst: dst as usize,
            me,
            n,
            sizes: sizes.to_vec(),
            roff,
            buf,
            rounds,
            round: 0,
            sending: Sending::default(),
            received,
            chunk,
            placed: false,
        }
    }
}

impl Collective for Dissemination {
    fn deliver(&mut self, msg: Msg) {
        let k = msg.tag as usize;
        assert!(
            k < self.rounds,
            "gex::Team::gather_all_nb: round {k} from team rank {}",
            msg.src
        );
        let at = self.roff[1 << k] + msg.offset;
        self.buf[at..at + msg.data.len()].copy_from_slice(&msg.data);
        self.received[k].arrived(msg.offset, msg.data.len(), self.chunk);
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        let n = self.n as usize;
        while self.round < self.rounds {
            let d = 1usize << self.round;
            // Round k sends blocks 0..cnt, which rounds before it brought in.
            if self.round > 0 && !self.received[self.round - 1].complete() {
                return false;
            }
            let cnt = d.min(n - d);
            let to = ((self.me as usize + n - d) % n) as Rank;
            let len = self.roff[cnt];
            if !self
                .sending
                .send(out, to, self.round as u32, &self.buf[..len], len)
            {
                return false;
            }
            self.sending = Sending::default();
            self.round += 1;
        }
        if !self.received.iter().all(Receiving::complete) {
            return false;
        }
        if !self.placed {
            for j in 0..self.n {
                let t = (self.me + j) % self.n;
                let at: usize = self.sizes[..t as usize].iter().sum();
                let (from, len) = (self.roff[j as usize], self.sizes[t as usize]);
                // SAFETY: `dst` is writable for every block until completion (the
                // initiating call's contract); `at + len` is within it.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.buf.as_ptr().add(from),
                        (self.dst as *mut u8).add(at),
                        len,
                    )
                };
            }
            self.placed = true;
        }
        true
    }
}

/// A staggered gather-all, exchange or permute in flight at this rank: this rank sends
/// one buffer to each of a list of ranks, in the list's order, and receives one block
/// from each of another list straight into its destination.
pub(crate) struct Staggered {
    dst: usize,
    /// Each send: the team rank, the source range (address, length), how far sent.
    sends: Vec<(Rank, usize, usize, Sending)>,
    next: usize,
    /// Each expected block: the sending team rank, its offset in `dst`, its length.
    blocks: Vec<(Rank, usize, usize)>,
    /// Bytes still to arrive.
    missing: usize,
    call: &'static str,
}

impl Staggered {
    /// Sends `(to, src, len)` in order, and expects `(from, dst offset, len)`; the
    /// source ranges must stay readable, and `dst` writable at the expected ranges,
    /// until the operation completes (the initiating call's contract).
    pub(crate) fn new(
        call: &'static str,
        dst: *mut u8,
        sends: Vec<(Rank, *const u8, usize)>,
        blocks: Vec<(Rank, usize, usize)>,
    ) -> Staggered {
        let missing = blocks.iter().map(|b| b.2).sum();
        Staggered {
            dst: dst as usize,
            sends: sends
                .into_iter()
                .map(|(to, p, l)| (to, p as usize, l, Sending::default()))
                .collect(),
            next: 0,
            blocks,
            missing,
            call,
        }
    }

    /// The staggered order: the ranks `me + 1, me + 2, …` of a team of `n`, without `me`.
    pub(crate) fn staggered(me: Rank, n: Rank) -> impl Iterator<Item = Rank> + Clone {
        (1..n).map(move |j| (me + j) % n)
    }
}

impl Collective for Staggered {
    fn deliver(&mut self, msg: Msg) {
        let &(_, at, len) = self
            .blocks
            .iter()
            .find(|b| b.0 == msg.src)
            .unwrap_or_else(|| panic!("gex::{}: a block from team rank {}", self.call, msg.src));
        assert!(
            msg.offset
                .checked_add(msg.data.len())
                .is_some_and(|end| end <= len),
            "gex::{}: team rank {} sent bytes past its block",
            self.call,
            msg.src
        );
        // SAFETY: `dst` is writable at this block until completion (the initiating
        // call's contract); the range was checked above.
        unsafe {
            std::ptr::copy_nonoverlapping(
                msg.data.as_ptr(),
                (self.dst as *mut u8).add(at + msg.offset),
                msg.data.len(),
            )
        };
        self.missing -= msg.data.len();
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        while self.next < self.sends.len() {
            let (to, addr, len, sending) = &mut self.sends[self.next];
            // SAFETY: the source range is readable until completion (see `new`).
            let data = unsafe { std::slice::from_raw_parts(*addr as *const u8, *len) };
            if !sending.send(out, *to, 0, data, *len) {
                return false;
            }
            self.next += 1;
        }
        self.missing == 0
    }
}
