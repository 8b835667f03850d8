//! The checks every remote atomic makes before it runs ("Semantics of
//! gex_AD_Op*()"), and their messages.

use std::sync::atomic::Ordering;

use crate::conduit::{AddressError, Conduit, Rank};
use crate::context;
use crate::ops::{Dt, Op, OpSet};
use crate::rma::address_error;
use crate::runtime::runtime;
use crate::Flags;

use super::{AtomicDomain, AtomicType, State, OP_FLAGS};

impl AtomicDomain {
    /// The domain's state, or a panic naming `call` if it was destroyed.
    #[inline]
    #[track_caller]
    pub(super) fn live(&self, call: &str) -> &State {
        let st = &*self.state;
        if st.destroyed.load(Ordering::Acquire) {
            destroyed(call);
        }
        st
    }

    /// Every check of an operation, before it happens; where the target is.
    #[inline]
    #[track_caller]
    pub(super) fn check<T: AtomicType>(
        &self,
        call: &'static str,
        result: *mut T,
        tgt_rank: Rank,
        tgt_addr: usize,
        opcode: Op,
        flags: Flags,
    ) -> Target {
        let rt = runtime(call);
        context::check_may_communicate(call);
        let st = self.live(call);
        if T::DT != st.dt {
            type_mismatch(call, T::DT, st.dt);
        }
        if !st.ops.contains(opcode) {
            not_in_set(call, opcode, st.ops);
        }
        if flags.without(OP_FLAGS) != Flags::NONE
            || flags.contains(Flags::AD_MY_RANK | Flags::AD_MY_NBRHD)
        {
            bad_flags(call, flags);
        }
        let rank = st.job_rank(call, tgt_rank, flags);
        if flags.contains(Flags::AD_MY_RANK) && rank != st.me {
            false_assertion(call, "GEX_FLAG_AD_MY_RANK", tgt_rank);
        }
        if flags.contains(Flags::AD_MY_NBRHD) && rt.conduit.nbrhd().0.binary_search(&rank).is_err()
        {
            false_assertion(call, "GEX_FLAG_AD_MY_NBRHD", tgt_rank);
        }
        let size = std::mem::size_of::<T>();
        if tgt_addr & (size - 1) != 0 {
            misaligned(call, "target", tgt_addr, T::DT);
        }
        if opcode.is_fetching() {
            if result.is_null() {
                panic!(
                    "gex::{call}: {} fetches, but the result location is null",
                    opcode.name()
                );
            }
            if !result.is_aligned() {
                misaligned(call, "result", result as usize, T::DT);
            }
        }
        // `translate` checks the range first, so `NotMapped` (another host) means it is
        // inside the target's segment (`Conduit::check_range`).
        let local = match rt.conduit.translate(rank, tgt_addr, size) {
            Ok(local) => (!st.messages).then_some(local),
            Err(AddressError::NotMapped) => None,
            Err(e) => address_error(call, tgt_rank, tgt_addr, size, e),
        };
        Target { rank, local }
    }
}

impl State {
    /// The job rank of the target `rank`, or a panic naming `call`.
    #[inline]
    #[track_caller]
    fn job_rank(&self, call: &str, rank: Rank, flags: Flags) -> Rank {
        if flags.contains(Flags::RANK_IS_JOBRANK) {
            let member = match &self.members {
                None => rank < self.team.size(),
                Some(members) => members.contains(&rank),
            };
            if !member {
                panic!(
                    "gex::{call}: job rank {rank} (GEX_FLAG_RANK_IS_JOBRANK) is not a member \
                     of the domain's team"
                );
            }
            return rank;
        }
        match &self.members {
            None if rank < self.team.size() => rank,
            Some(members) if (rank as usize) < members.len() => members[rank as usize],
            _ => panic!(
                "gex::{call}: rank {rank} is not in the domain's team (size {})",
                self.team.size()
            ),
        }
    }
}

/// A checked target: its job rank and its address in this process, if this process
/// maps it (`None`: the owner is on another host).
pub(super) struct Target {
    pub(super) rank: Rank,
    pub(super) local: Option<usize>,
}

#[cold]
#[track_caller]
fn destroyed(call: &str) -> ! {
    panic!("gex::{call}: the atomic domain was destroyed (gex_AD_Destroy)")
}

#[cold]
#[track_caller]
fn type_mismatch(call: &str, got: Dt, domain: Dt) -> ! {
    panic!(
        "gex::{call}: the operation's type {} is not the domain's {} (they must be equal)",
        got.name(),
        domain.name()
    )
}

#[cold]
#[track_caller]
fn not_in_set(call: &str, op: Op, ops: OpSet) -> ! {
    let names: Vec<&str> = ops.iter().map(Op::name).collect();
    panic!(
        "gex::{call}: {} is not in the domain's set of operations ({})",
        op.name(),
        names.join(" | ")
    )
}

#[cold]
#[track_caller]
fn bad_flags(call: &str, flags: Flags) -> ! {
    panic!(
        "gex::{call}: flags {:#x} are not IMMEDIATE, AD_ACQ, AD_REL, RANK_IS_JOBRANK and at \
         most one of AD_MY_RANK and AD_MY_NBRHD",
        flags.bits()
    )
}

#[cold]
#[track_caller]
fn false_assertion(call: &str, flag: &str, rank: Rank) -> ! {
    panic!("gex::{call}: {flag} asserts where the target is, but rank {rank} is not there")
}

#[cold]
#[track_caller]
fn misaligned(call: &str, what: &str, addr: usize, dt: Dt) -> ! {
    panic!(
        "gex::{call}: the {what} address {addr:#x} is not aligned for {} ({} bytes)",
        dt.name(),
        dt.size().unwrap_or(0)
    )
}
