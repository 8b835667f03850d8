//! Prefix reduction (`upc_all_prefix_reduce`, the design document's scan): rank `r`'s
//! `dst` gets `src[0] (+) src[1] (+) … (+) src[r]`, the operands in rank order, so that
//! non-commutative operations are right. Two ways:
//!
//! * **Chain**: rank `r` waits for the prefix of `r - 1`, combines its own contribution
//!   on the right and passes the result to `r + 1`: `n - 1` steps, one message per
//!   rank, and the left-to-right association of a sequential fold.
//! * **Doubling** (Hillis and Steele): in round `k` (`d = 2^k`) rank `r` sends its
//!   partial result, which covers the ranks `[r - 2d + 1 .. r]` clipped at 0, to
//!   `r + d`, and combines the one of `r - d` on its left: `ceil(log2 n)` rounds. Every
//!   combination joins two adjacent ranges, left before right, so the order is kept
//!   (associativity is all a reduction may assume); the association differs from the
//!   chain's, but is fixed for a given team size.

use super::super::chunks::{Receiving, Sending};
use super::super::engine::{Collective, Msg, Outbox};
use super::super::reduce::{ReduceFn, Reduction};
use super::flags::Addr;
use super::select::{method, Method, Operation};
use super::{launch, words, Build, CollFlags};
use crate::coll::{initiation, reduction_type};
use crate::conduit::{Conduit, Rank};
use crate::event::Event;
use crate::ops::{Dt, Op};
use crate::team::Team;

/// How a prefix reduction runs (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Chain,
    Doubling,
}

/// A prefix reduction in flight at this rank.
pub(crate) struct Scan {
    shape: Shape,
    reduction: Reduction,
    dst: usize,
    me: Rank,
    n: Rank,
    chunk: usize,
    /// This rank's partial result.
    acc: Vec<u8>,
    /// The contributions from the left, by round (the chain has one round).
    from_left: Vec<(Vec<u8>, Receiving)>,
    /// The rounds combined into `acc`.
    round: usize,
    /// Sends under way: the receiving rank, the tag, the snapshot of `acc`, progress.
    sends: Vec<(Rank, u32, Vec<u8>, Sending)>,
    placed: bool,
}

impl Scan {
    /// # Safety
    /// `src` must be readable for `len` bytes during this call; `dst` writable for
    /// `len` bytes until the operation completes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn new(
        shape: Shape,
        me: Rank,
        n: Rank,
        reduction: Reduction,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        chunk: usize,
    ) -> Scan {
        // SAFETY: the caller's contract: `src` is readable now; it is copied, so the
        // caller may reuse it at once.
        let acc = unsafe { std::slice::from_raw_parts(src, len) }.to_vec();
        let rounds = match shape {
            Shape::Chain => 1,
            Shape::Doubling => (32 - (n.max(1) - 1).leading_zeros()) as usize,
        };
        Scan {
            shape,
            reduction,
            dst: dst as usize,
            me,
            n,
            chunk,
            acc,
            from_left: (0..rounds)
                .map(|_| (Vec::new(), Receiving::new(len)))
                .collect(),
            round: 0,
            sends: Vec::new(),
            placed: false,
        }
    }

    /// The rank round `k` receives from, if any.
    fn left(&self, k: usize) -> Option<Rank> {
        let d = match self.shape {
            Shape::Chain => 1,
            Shape::Doubling => 1u64 << k,
        };
        (u64::from(self.me) >= d).then(|| self.me - d as Rank)
    }

    /// The rank round `k` sends to, if any.
    fn right(&self, k: usize) -> Option<Rank> {
        let d = match self.shape {
            Shape::Chain => 1,
            Shape::Doubling => 1u64 << k,
        };
        (u64::from(self.me) + d < u64::from(self.n)).then(|| self.me + d as Rank)
    }
}

impl Collective for Scan {
    fn deliver(&mut self, msg: Msg) {
        let k = msg.tag as usize;
        assert!(
            k < self.from_left.len()
                && msg
                    .offset
                    .checked_add(msg.data.len())
                    .is_some_and(|end| end <= self.acc.len()),
            "gex::Team::prefix_reduce_nb: a bad partial result from team rank {}",
            msg.src
        );
        let len = self.acc.len();
        let (buf, receiving) = &mut self.from_left[k];
        if buf.is_empty() {
            buf.resize(len, 0);
        }
        buf[msg.offset..msg.offset + msg.data.len()].copy_from_slice(&msg.data);
        receiving.arrived(msg.offset, msg.data.len(), self.chunk);
    }

    fn advance(&mut self, out: &mut Outbox<'_>) -> bool {
        let rounds = self.from_left.len();
        while self.round < rounds {
            let k = self.round;
            // The chain sends its result after combining; doubling sends what it has
            // before combining round k.
            if self.shape == Shape::Doubling && self.sends.len() == k {
                let to = self.right(k);
                self.sends.push((
                    to.unwrap_or(Rank::MAX),
                    k as u32,
                    self.acc.clone(),
                    Sending::default(),
                ));
            }
            if self.left(k).is_some() {
                if !self.from_left[k].1.complete() {
                    break;
                }
                let (left, _) = &mut self.from_left[k];
                left.resize(self.acc.len(), 0);
                self.reduction.combine(left, &mut self.acc);
                *left = Vec::new();
            }
            self.round += 1;
        }
        if self.round == rounds && !self.placed {
            // SAFETY: `dst` is writable for `len` bytes until completion (the
            // initiating call's contract).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.acc.as_ptr(),
                    self.dst as *mut u8,
                    self.acc.len(),
                )
            };
            if self.shape == Shape::Chain {
                let to = self.right(0);
                self.sends.push((
                    to.unwrap_or(Rank::MAX),
                    0,
                    self.acc.clone(),
                    Sending::default(),
                ));
            }
            self.placed = true;
        }
        let mut all_sent = true;
        for (to, tag, data, sending) in &mut self.sends {
            if *to != Rank::MAX {
                all_sent &= sending.send(out, *to, *tag, data, data.len());
            }
        }
        all_sent && self.placed
    }
}

impl Team {
    /// UPC's `upc_all_prefix_reduce` over a team (the design document's prefix
    /// reduction): `dst` of rank `r` gets `src[0] (+) src[1] (+) … (+) src[r]`
    /// element-wise, the operands in rank order, for `dt_count` elements of `dt_size`
    /// bytes; `op`, `dt` and `user` as for
    /// [`reduce_to_all_nb`](Team::reduce_to_all_nb).
    ///
    /// # Safety
    /// `src` must be readable for `dt_size * dt_count` bytes during the call (with
    /// IN_ALLSYNC, until the event completes: it is read once every rank entered), `dst`
    /// writable for as many until the event completes (SINGLE: this rank's entries are
    /// used; they are read and written here only).
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub unsafe fn prefix_reduce_nb(
        &self,
        dst: Addr<'_>,
        src: Addr<'_>,
        dt: Dt,
        dt_size: usize,
        dt_count: usize,
        op: Op,
        user: Option<(ReduceFn, usize)>,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::prefix_reduce_nb";
        let rt = initiation(self, CALL);
        let modes = flags.check(CALL);
        let (me, n) = (self.rank, self.size);
        let reduction = Reduction::new(CALL, dt, dt_size, op, user);
        let len = dt_size.checked_mul(dt_count).unwrap_or_else(|| {
            panic!("gex::{CALL}: {dt_count} elements of {dt_size} bytes overflow the address space")
        });
        let d = dst.mine(CALL, "dst", modes, me, n);
        let s = src.mine(CALL, "src", modes, me, n);
        let m = method(Operation::PrefixReduce, n, len, false);
        let w = words(
            5,
            flags,
            m,
            &[dt as u64, dt_size as u64, dt_count as u64, op as u64],
            &[dst.list(), src.list()],
        );
        let shape = if m == Method::Doubling {
            Shape::Doubling
        } else {
            Shape::Chain
        };
        let chunk = rt.conduit.am_max_medium();
        let build = move || -> Box<dyn Collective> {
            // SAFETY: the caller's contract, passed on.
            Box::new(unsafe { Scan::new(shape, me, n, reduction, d, s, len, chunk) })
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        let func = user.map_or(0, |(f, _)| f as usize);
        let (dd, ss, opi, fl, rtype) = (
            d as usize,
            s as usize,
            op as i32,
            flags.bits() as i32,
            reduction_type(dt),
        );
        let span = gasp::span!(
            GASP_UPC_ALL_PREFIX_REDUCE,
            dd,
            ss,
            opi,
            dt_count,
            dt_size,
            func,
            fl,
            rtype
        );
        let event = launch(rt, self, CALL, modes, &w, inner);
        gasp::end!(
            span,
            dd,
            ss,
            opi,
            dt_count,
            dt_size,
            func,
            fl,
            rtype,
            event.gasp_handle()
        );
        event
    }
}
