//! The run-time choice between the smp and mpi conduits, in a build with the `mpi`
//! feature: an enum rather than a trait object, so each call is one predictable branch
//! and both arms stay inlinable. A build without the feature has no such branch
//! ([`Selected`](super::Selected) is then the smp conduit).

use super::mpi::{self, MpiConduit};
use super::smp::{self, SmpConduit};
use super::{AddressError, AmHeader, BoundSegment, Completion, Conduit, Inbound, Network, Rank};

/// The conduit of this process: mpi when an MPI launcher started it, smp otherwise.
// One value per process, held by the runtime for its life: its size does not matter,
// and a box would add a load to every call of the mpi arm.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Selected {
    Smp(SmpConduit),
    Mpi(MpiConduit),
}

/// A send buffer of the selected conduit: a slot of a shared-memory queue (the smp
/// conduit's, or the mpi conduit's to a rank of this host: the same queues driven by
/// the same code, so one variant serves both and a message within a host costs the
/// same under either conduit), or the mpi conduit's to another host.
pub(crate) enum Outbound {
    Queue(smp::Outbound),
    Mpi(mpi::Outbound),
}

/// Runs `$body` on the selected conduit bound to `$c`.
macro_rules! each {
    ($self:expr, $c:ident => $body:expr) => {
        match $self {
            Selected::Smp($c) => $body,
            Selected::Mpi($c) => $body,
        }
    };
}

fn mismatch() -> ! {
    unreachable!("gex: a send buffer of one conduit handed to the other")
}

impl Conduit for Selected {
    type Outbound = Outbound;

    fn bootstrap() -> Selected {
        if mpi::launched() {
            Selected::Mpi(MpiConduit::bootstrap())
        } else {
            Selected::Smp(SmpConduit::bootstrap())
        }
    }
    #[inline]
    fn rank(&self) -> Rank {
        each!(self, c => c.rank())
    }
    #[inline]
    fn size(&self) -> Rank {
        each!(self, c => c.size())
    }
    fn nbrhd(&self) -> (&[Rank], Rank) {
        each!(self, c => c.nbrhd())
    }
    fn host(&self) -> (&[Rank], Rank) {
        each!(self, c => c.host())
    }
    fn nbrhd_set(&self) -> (Rank, Rank, Rank, Rank) {
        each!(self, c => c.nbrhd_set())
    }
    fn host_leaders(&self) -> &[Rank] {
        each!(self, c => c.host_leaders())
    }
    fn max_segment_size(&self) -> usize {
        each!(self, c => c.max_segment_size())
    }
    fn attach_segment(&self, size: usize) -> usize {
        each!(self, c => c.attach_segment(size))
    }
    fn segments_attached(&self) {
        each!(self, c => c.segments_attached())
    }
    fn bound_segment(&self, rank: Rank) -> Option<BoundSegment> {
        each!(self, c => c.bound_segment(rank))
    }
    #[inline]
    fn translate(&self, rank: Rank, addr: usize, len: usize) -> Result<usize, AddressError> {
        each!(self, c => c.translate(rank, addr, len))
    }
    #[inline]
    fn check_range(&self, rank: Rank, addr: usize, len: usize) -> Result<(), AddressError> {
        each!(self, c => c.check_range(rank, addr, len))
    }
    #[inline]
    fn am_max_medium(&self) -> usize {
        each!(self, c => c.am_max_medium())
    }
    fn am_max_long(&self) -> usize {
        each!(self, c => c.am_max_long())
    }
    #[inline]
    fn am_reserve(&self, dest: Rank, network: Network) -> Option<Outbound> {
        match self {
            Selected::Smp(c) => c.am_reserve(dest, network).map(Outbound::Queue),
            Selected::Mpi(c) => match c.host_queue(dest, network) {
                Some(queue) => smp::Outbound::reserve(queue).map(Outbound::Queue),
                None => c
                    .net_reserve(dest, network)
                    .map(|o| Outbound::Mpi(mpi::Outbound::Net(o))),
            },
        }
    }
    #[inline]
    fn am_buffer(&self, out: &Outbound) -> *mut u8 {
        match (self, out) {
            (_, Outbound::Queue(o)) => o.buffer(),
            (Selected::Mpi(c), Outbound::Mpi(o)) => c.am_buffer(o),
            _ => mismatch(),
        }
    }
    #[inline]
    fn am_commit(&self, out: Outbound, header: &AmHeader<'_>) {
        match (self, out) {
            (_, Outbound::Queue(o)) => o.commit(self.rank(), header),
            (Selected::Mpi(c), Outbound::Mpi(o)) => c.am_commit(o, header),
            _ => mismatch(),
        }
    }
    #[inline]
    fn am_long_inline(&self, out: &Outbound, len: usize) -> bool {
        match (self, out) {
            (Selected::Mpi(c), Outbound::Mpi(o)) => c.am_long_inline(o, len),
            _ => false,
        }
    }
    #[inline]
    fn am_rma_max(&self) -> usize {
        each!(self, c => c.am_rma_max())
    }
    #[inline]
    fn am_rma_blocking_max(&self) -> usize {
        each!(self, c => c.am_rma_blocking_max())
    }
    fn am_rma_probe(&self) -> bool {
        each!(self, c => c.am_rma_probe())
    }
    fn set_am_rma_blocking_max(&self, max: usize, measured: Option<&str>) {
        each!(self, c => c.set_am_rma_blocking_max(max, measured))
    }
    #[cfg(feature = "testing")]
    fn am_handled_over_network(&self) -> u64 {
        each!(self, c => c.am_handled_over_network())
    }
    fn long_payload(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
    ) -> Result<Completion, AddressError> {
        each!(self, c => c.long_payload(dest, dest_addr, src))
    }
    #[inline]
    fn poll(&self, requests: bool, dispatch: fn(&Inbound<'_>)) -> usize {
        each!(self, c => c.poll(requests, dispatch))
    }
    #[inline]
    fn put(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
        blocking: bool,
    ) -> Result<Completion, AddressError> {
        each!(self, c => c.put(dest, dest_addr, src, blocking))
    }
    #[inline]
    unsafe fn put_held(
        &self,
        dest: Rank,
        dest_addr: usize,
        src: &[u8],
    ) -> Result<Completion, AddressError> {
        // SAFETY: the caller's guarantee on `src` is passed on.
        each!(self, c => unsafe { c.put_held(dest, dest_addr, src) })
    }
    #[inline]
    unsafe fn get(
        &self,
        dest: *mut u8,
        src: Rank,
        src_addr: usize,
        len: usize,
    ) -> Result<Completion, AddressError> {
        // SAFETY: the caller's guarantee on `dest` is passed on.
        each!(self, c => unsafe { c.get(dest, src, src_addr, len) })
    }
    #[inline]
    fn signal(&self, dest: Rank, slot: usize, value: u64) {
        each!(self, c => c.signal(dest, slot, value))
    }
    #[inline]
    fn signal_value(&self, slot: usize) -> u64 {
        each!(self, c => c.signal_value(slot))
    }
    #[inline]
    fn signal_slots(&self) -> usize {
        each!(self, c => c.signal_slots())
    }
    fn finalize(&self) {
        each!(self, c => c.finalize())
    }
    fn end_job(&self) {
        each!(self, c => c.end_job())
    }
    fn record_failure(&self, message: &str) {
        each!(self, c => c.record_failure(message))
    }
    #[inline]
    fn ending(&self) -> Option<i32> {
        each!(self, c => c.ending())
    }
}
