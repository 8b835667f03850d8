//! The atomic figures of the UPC++ bench: `upcxx.atomic_fetch_add_i64` against
//! `atomic.fetch_add_i64`, the gex figure of `gex.rs` re-measured in the same job on
//! the same cache line (`common/atomics.rs`).

use std::sync::atomic::Ordering;

use gex::ops::{Dt, Op};
use upcxx::{AtomicDomain, AtomicOp, DistObject, EntryBarrier, GlobalPtr};

use crate::common::atomics::{self, Line};
use crate::common::figures::Bench;
use crate::ctx::{owner_addr, word, Ctx};

/// The domains and rank 1's line, alive from before the figures to after them.
pub(crate) struct Atomics {
    gex: gex::AtomicDomain,
    upcxx: AtomicDomain<i64>,
    /// This rank's line (two cache lines: target words, then the stop flag).
    own: GlobalPtr<u64>,
    /// Rank 1's.
    line: GlobalPtr<u64>,
}

impl Atomics {
    /// Collective: creates both domains, then finds rank 1's line (the fetch comes
    /// after the constructions, which make only internal progress and so would not
    /// answer it).
    pub(crate) fn new(ctx: &Ctx) -> Atomics {
        let gex = gex::AtomicDomain::create(&ctx.team, Dt::I64, Op::FAdd, gex::Flags::NONE);
        let upcxx = AtomicDomain::new(&[AtomicOp::FetchAdd]);
        let own = upcxx::allocate(128, 64)
            .expect("segment space for two cache lines")
            .cast::<u64>();
        for i in 0..16 {
            // SAFETY: our fresh block, which no other rank knows yet.
            unsafe { own.add(i).local().write(0) };
        }
        let lines = DistObject::new(own);
        let line = lines.fetch(1).wait();
        upcxx::barrier();
        Atomics {
            gex,
            upcxx,
            own,
            line,
        }
    }

    fn line(&self, target: usize) -> Line {
        Line {
            target: word(self.line.add(target)),
            touched: word(self.line.add(2)),
            stop: word(self.line.add(8)),
        }
    }

    pub(crate) fn figures(&self, ctx: &Ctx) -> Vec<Bench<'_>> {
        let target = self.line.add(1).cast::<i64>();
        vec![
            atomics::gex_fetch_add(
                "atomic.fetch_add_i64",
                self.gex.clone(),
                owner_addr(ctx.team, self.line),
                self.line(0),
            ),
            atomics::fetch_add_latency("upcxx.atomic_fetch_add_i64", self.line(1), move || {
                self.upcxx.fetch_add(target, 1, Ordering::Relaxed).wait() as u64
            }),
        ]
    }

    /// Destroys both domains (collective) and frees this rank's line.
    pub(crate) fn destroy(mut self) {
        self.upcxx.destroy(EntryBarrier::User);
        self.gex.destroy();
        upcxx::deallocate(self.own);
    }
}
