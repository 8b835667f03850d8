//! The rank's context: what every rank allocates in its shared segment and exchanges
//! with the other rank, and the team and sampler the figures use.

use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

use gex::Team;
use upcxx::GlobalPtr;

use crate::common::Sampler;

/// The size of the bandwidth figures.
pub(crate) const BW: usize = 4 << 20;
/// The u64 rank 1 writes and rank 0 gets.
pub(crate) const GET_VALUE: u64 = 0x0123_4567_89ab_cdef;

/// What every rank allocates in its shared segment; rank 0 uses rank 1's, rank 1 uses
/// rank 0's flags. Each word has a cache line of its own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ptrs {
    /// The line of the raw ping-pong.
    pub(crate) raw_line: GlobalPtr<u64>,
    /// The flag of the gex put ping-pong.
    pub(crate) gex_flag: GlobalPtr<u64>,
    /// The flag of the UPC++ rput ping-pong.
    pub(crate) upc_flag: GlobalPtr<u64>,
    /// `GET_VALUE`, which both get figures read.
    pub(crate) get_word: GlobalPtr<u64>,
    /// Where `gex.put_bw_4MiB` puts (page-aligned).
    pub(crate) gex_bw: GlobalPtr<u8>,
    /// Where `upcxx.rput_bw_4MiB` puts (page-aligned).
    pub(crate) upc_bw: GlobalPtr<u8>,
    /// The control words of the collective figures (rank 0's are used; see `coll.rs`).
    pub(crate) coll_ctrl: GlobalPtr<u64>,
}

/// `Ptrs` as an RPC result.
pub(crate) type PtrsWire = (
    GlobalPtr<u64>,
    GlobalPtr<u64>,
    GlobalPtr<u64>,
    GlobalPtr<u64>,
    GlobalPtr<u8>,
    GlobalPtr<u8>,
    GlobalPtr<u64>,
);

impl Ptrs {
    /// Allocates and initializes this rank's.
    pub(crate) fn allocate() -> Ptrs {
        let line = || {
            let gp = upcxx::allocate(64, 64)
                .expect("segment space for a cache line")
                .cast::<u64>();
            // SAFETY: a fresh 64-byte block of our segment that nobody else knows yet.
            unsafe { gp.local().write(0) };
            gp
        };
        let area = || {
            let gp = upcxx::allocate(BW, 4096).expect("segment space for 4 MiB");
            // SAFETY: as above, BW bytes (this also faults the pages in).
            unsafe { std::ptr::write_bytes(gp.local(), 0, BW) };
            gp
        };
        let p = Ptrs {
            raw_line: line(),
            gex_flag: line(),
            upc_flag: line(),
            get_word: line(),
            gex_bw: area(),
            upc_bw: area(),
            coll_ctrl: crate::coll::control_words(),
        };
        // SAFETY: our own word; rank 0 only reads it.
        unsafe { p.get_word.local().write(GET_VALUE) };
        p
    }

    pub(crate) fn wire(self) -> PtrsWire {
        (
            self.raw_line,
            self.gex_flag,
            self.upc_flag,
            self.get_word,
            self.gex_bw,
            self.upc_bw,
            self.coll_ctrl,
        )
    }

    pub(crate) fn from_wire(w: PtrsWire) -> Ptrs {
        Ptrs {
            raw_line: w.0,
            gex_flag: w.1,
            upc_flag: w.2,
            get_word: w.3,
            gex_bw: w.4,
            upc_bw: w.5,
            coll_ctrl: w.6,
        }
    }
}

/// This rank's `Ptrs`, for the peer's RPC.
pub(crate) static MINE: OnceLock<Ptrs> = OnceLock::new();

pub(crate) fn my_ptrs() -> PtrsWire {
    MINE.get().expect("allocated before the exchange").wire()
}

/// A u64 of some rank's segment as an atomic, through this process's mapping.
pub(crate) fn word(gp: GlobalPtr<u64>) -> &'static AtomicU64 {
    let p = gp.local();
    assert!(!p.is_null() && p as usize & 7 == 0);
    // SAFETY: an 8-byte aligned word of a segment (mapped for the life of the process)
    // that the benchmarks only access through atomics.
    unsafe { &*(p as *const AtomicU64) }
}

/// The owner-space address of `gp` for gex RMA.
pub(crate) fn owner_addr<T>(team: Team, gp: GlobalPtr<T>) -> usize {
    let b = team.segment_bound(gp.where_()).expect("segments attached");
    let local = b.local_addr.expect("smp maps every segment");
    b.owner_addr + (gp.local() as usize - local)
}

pub(crate) struct Ctx {
    pub(crate) team: Team,
    pub(crate) rank: u32,
    pub(crate) sampler: Sampler,
    /// This rank's allocations.
    pub(crate) me: Ptrs,
    /// The other rank's (rank 1's for rank 0, rank 0's for rank 1).
    pub(crate) peer: Ptrs,
}

impl Ctx {
    /// Rank 1's allocations, as either rank sees them.
    pub(crate) fn rank1(&self) -> Ptrs {
        if self.rank == 1 {
            self.me
        } else {
            self.peer
        }
    }
}
