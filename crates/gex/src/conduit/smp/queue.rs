//! A bounded multi-producer, single-consumer queue of fixed-size slots in shared memory.
//!
//! This is Dmitry Vyukov's bounded queue specialised for one consumer. Every slot starts
//! with a sequence number; for the slot at ring position `pos`:
//!
//! * `seq == pos`: the slot is free for the producer that claims position `pos`;
//! * `seq == pos + 1`: the message at `pos` is published and may be consumed;
//! * `seq == pos + capacity`: the consumer released it, free for position `pos + capacity`.
//!
//! A producer claims a position with one compare-and-swap on the shared `tail`, fills the
//! slot in place, and publishes it with a Release store of `seq`. The consumer (the
//! owning rank) reads `seq` with Acquire, runs the handler on the slot in place (Medium
//! payloads are never copied twice) and frees the slot with a Release store. The queue
//! holds only offsets, never pointers, so it works whatever address each process maps
//! the region at.
//!
//! The algorithm is model-checked with loom (the `loom` tests below, under `cfg(loom)`;
//! see `crate::sync`): producers racing for slots and the consumer freeing them, under
//! every interleaving up to the preemption bound. Loom cannot model memory shared
//! between processes, so the queue is checked there in one process's allocation; the
//! cross-process case is covered by the multi-rank floods of the fault tests.
//!
//! Why hand-written: the queue lives in memory shared between processes, holds
//! variable-length messages in place and must be reservable before the payload is
//! written (negotiated-payload AMs); the crates we know (crossbeam's `ArrayQueue`,
//! `heapless::mpmc`) own their storage in one process's heap.
//!
//! Over 600 lines with its tests: the unit tests and loom models (about half of the
//! file) check the ordering argument above line by line, so they stay beside it.

use crate::sync::{fence, spin_loop, AtomicU64, Ordering};

use super::layout::{QUEUE_HEADER, SLOT_HEADER, SLOT_SIZE};
use crate::conduit::Category;

/// The first bytes of every slot.
#[repr(C)]
pub(crate) struct SlotHeader {
    pub seq: AtomicU64,
    pub src: u32,
    pub handler: u8,
    /// `MessageKind` bits.
    pub kind: u8,
    pub nargs: u8,
    _pad0: u8,
    pub nbytes: u32,
    _pad1: u32,
    /// Destination address of a Long payload, in the receiver's address space.
    pub dest_addr: u64,
    pub args: [u32; 16],
}

/// The arguments that lie in a slot's first cache line, with `seq`.
pub(crate) const FIRST_LINE_ARGS: usize = 8;

/// The fields of a [`SlotHeader`] after `seq` up to the end of the slot's first cache
/// line (its first [`FIRST_LINE_ARGS`] arguments included), as a producer writes them:
/// assembled first, then stored in one copy ([`SlotHeader::write_first_line`]).
///
/// Why in one copy: the consumer spins on `seq`, in that same line, so the line can
/// leave the producer's cache between two of its stores. Written field by field, each
/// store followed by loads of the caller's header and arguments, a message took about
/// one cross-core miss more in some builds and not in others (a Medium round trip with
/// 7 arguments 20-50 ns slower between cores that share a cache, up to 250 ns slower
/// between cores that do not, depending only on where the callers' stack frames lay: a
/// load the store buffer cannot answer, one spanning two pending stores or matching a
/// pending store's address in its low 12 bits, waits until the older stores reach the
/// cache, and so for the line). Assembled first, the line is written by stores alone.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct FirstLine {
    pub src: u32,
    pub handler: u8,
    pub kind: u8,
    pub nargs: u8,
    pub pad0: u8,
    pub nbytes: u32,
    pub pad1: u32,
    pub dest_addr: u64,
    pub args: [u32; FIRST_LINE_ARGS],
}

// Every field of `FirstLine` lies where `SlotHeader` has it, 8 bytes (`seq`) earlier,
// and the two end together at the line's end.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(SlotHeader, src) == 8 + offset_of!(FirstLine, src));
    assert!(offset_of!(SlotHeader, handler) == 8 + offset_of!(FirstLine, handler));
    assert!(offset_of!(SlotHeader, kind) == 8 + offset_of!(FirstLine, kind));
    assert!(offset_of!(SlotHeader, nargs) == 8 + offset_of!(FirstLine, nargs));
    assert!(offset_of!(SlotHeader, nbytes) == 8 + offset_of!(FirstLine, nbytes));
    assert!(offset_of!(SlotHeader, dest_addr) == 8 + offset_of!(FirstLine, dest_addr));
    assert!(offset_of!(SlotHeader, args) == 8 + offset_of!(FirstLine, args));
    assert!(8 + size_of::<FirstLine>() == 64);
};

impl SlotHeader {
    /// Writes every field of the first cache line but `seq` (the producer's, until it
    /// publishes the slot).
    #[inline(always)]
    pub(crate) fn write_first_line(&mut self, line: FirstLine) {
        // Whatever `line` was assembled from is read before the first store below.
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: `FirstLine` has the layout of the fields from `src` to the end of the
        // line (asserted field by field above), all plain integers; `self` is exclusive.
        unsafe { std::ptr::write((&raw mut self.src).cast::<FirstLine>(), line) };
    }
}

const _: () = assert!(std::mem::size_of::<SlotHeader>() <= SLOT_HEADER);
// A Medium payload follows the header at once (16-byte aligned), so that a small one lies
// in the header's pair of cache lines (see `SLOT_HEADER`): no room is left unused.
const _: () = assert!(SLOT_HEADER == std::mem::size_of::<SlotHeader>().next_multiple_of(16));

/// The largest Medium payload a slot holds: what follows the header.
pub(crate) const SLOT_PAYLOAD: usize = SLOT_SIZE - SLOT_HEADER;

/// Where a message's payload is, once its header was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotPayload {
    /// A Short message, or a Long one of no bytes.
    None,
    /// A Medium payload of this many bytes right after the header.
    Inline(usize),
    /// A Long payload already delivered at this address of the receiver's segment.
    At { addr: usize, len: usize },
}

/// A published slot's header, checked: what `drain` hands to the dispatcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotMessage {
    pub src: u32,
    /// 0: an abandoned negotiated-payload slot, nothing else of it is read.
    pub handler: u8,
    pub category: Category,
    pub nargs: usize,
    pub payload: SlotPayload,
}

/// What the receiver knows that bounds a slot's fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotBounds {
    /// Ranks of the job: a sender's rank is below.
    pub ranks: u32,
    /// The receiver's own segment area, `(base, size)` in its address space.
    pub segment: (usize, usize),
}

/// Checks the header of a published slot against `bounds` before any field of it is
/// used as an index, a length or an address.
///
/// A slot is written by another process of the job; a header that fails these checks
/// cannot come from a correct sender (memory corruption, a rank of another build), and
/// the error names the field that is wrong so the receiver can fail saying so rather
/// than read out of bounds.
#[inline]
pub(crate) fn decode(h: &SlotHeader, bounds: &SlotBounds) -> Result<SlotMessage, String> {
    // The messages of every poll, a Short or a Medium that fits its slot from a rank of
    // the job, are checked inline; the rest, and every error, out of line.
    let (nargs, nbytes) = (usize::from(h.nargs), h.nbytes as usize);
    if h.handler != 0 && h.src < bounds.ranks && nargs <= h.args.len() {
        let common = match h.kind {
            0 if nbytes == 0 => Some((Category::Short, SlotPayload::None)),
            1 if nbytes <= SLOT_PAYLOAD => Some((Category::Medium, SlotPayload::Inline(nbytes))),
            _ => None,
        };
        if let Some((category, payload)) = common {
            return Ok(SlotMessage {
                src: h.src,
                handler: h.handler,
                category,
                nargs,
                payload,
            });
        }
    }
    decode_any(h, bounds)
}

/// [`decode`] of any header: a Long, an abandoned slot, or a corrupt one.
#[inline(never)]
fn decode_any(h: &SlotHeader, bounds: &SlotBounds) -> Result<SlotMessage, String> {
    if h.handler == 0 {
        // An abandoned negotiated-payload slot: the sender wrote only the handler.
        return Ok(SlotMessage {
            src: h.src,
            handler: 0,
            category: Category::Short,
            nargs: 0,
            payload: SlotPayload::None,
        });
    }
    if h.src >= bounds.ranks {
        return Err(format!(
            "sender rank {} is not a rank of this {}-rank job",
            h.src, bounds.ranks
        ));
    }
    let nargs = usize::from(h.nargs);
    if nargs > h.args.len() {
        return Err(format!(
            "{nargs} arguments, more than the {} a slot holds",
            h.args.len()
        ));
    }
    let nbytes = h.nbytes as usize;
    let (category, payload) = match h.kind {
        0 if nbytes == 0 => (Category::Short, SlotPayload::None),
        0 => return Err(format!("a Short message with {nbytes} payload bytes")),
        1 if nbytes <= SLOT_PAYLOAD => (Category::Medium, SlotPayload::Inline(nbytes)),
        1 => {
            return Err(format!(
                "a Medium payload of {nbytes} bytes, more than the {SLOT_PAYLOAD} a slot holds"
            ))
        }
        2 if nbytes == 0 => (Category::Long, SlotPayload::None),
        2 => {
            let (base, size) = bounds.segment;
            let addr = usize::try_from(h.dest_addr).unwrap_or(usize::MAX);
            let inside = addr
                .checked_sub(base)
                .and_then(|off| off.checked_add(nbytes))
                .is_some_and(|end| end <= size);
            if !inside {
                return Err(format!(
                    "a Long payload of {nbytes} bytes at {addr:#x}, outside this rank's \
                     segment [{base:#x}, +{size:#x})"
                ));
            }
            (Category::Long, SlotPayload::At { addr, len: nbytes })
        }
        k => return Err(format!("unknown message category {k}")),
    };
    Ok(SlotMessage {
        src: h.src,
        handler: h.handler,
        category,
        nargs,
        payload,
    })
}

/// One queue as seen from this process.
#[derive(Clone, Copy)]
pub(crate) struct Queue {
    /// Producers' claim counter, at the start of the queue's area.
    tail: *const AtomicU64,
    slots: *mut u8,
    capacity: u64,
}

// SAFETY: all state shared through these pointers is either atomic or published through
// the slot sequence numbers with Release/Acquire ordering.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

/// A claimed slot that the producer fills and then publishes.
pub(crate) struct Reserved {
    pub slot: *mut u8,
    pub pos: u64,
}

impl Queue {
    /// Views the queue whose area starts at `area`.
    ///
    /// # Safety
    /// `area` must point to `QUEUE_HEADER + capacity * SLOT_SIZE` bytes of shared memory,
    /// 128-byte aligned, that outlive the returned value.
    pub(crate) unsafe fn at(area: *mut u8, capacity: usize) -> Queue {
        debug_assert!(capacity.is_power_of_two());
        Queue {
            tail: area as *const AtomicU64,
            // SAFETY: the slots follow the queue header, inside the area.
            slots: unsafe { area.add(QUEUE_HEADER) },
            capacity: capacity as u64,
        }
    }

    /// Sets every slot free. Only the owner calls this, before any producer may use it.
    pub(crate) fn initialize(&self) {
        self.tail_counter().store(0, Ordering::Relaxed);
        for pos in 0..self.capacity {
            self.header(pos).seq.store(pos, Ordering::Relaxed);
        }
        fence(Ordering::Release);
    }

    fn tail_counter(&self) -> &AtomicU64 {
        // SAFETY: `tail` points into the live shared area (see `at`).
        unsafe { &*self.tail }
    }

    fn slot(&self, pos: u64) -> *mut u8 {
        let index = (pos & (self.capacity - 1)) as usize;
        // SAFETY: index < capacity, so the slot lies inside the area.
        unsafe { self.slots.add(index * SLOT_SIZE) }
    }

    pub(crate) fn header(&self, pos: u64) -> &SlotHeader {
        // SAFETY: every slot starts with a SlotHeader; its fields other than `seq` are
        // only accessed by the party that owns the slot according to `seq`.
        unsafe { &*(self.slot(pos) as *const SlotHeader) }
    }

    /// Claims the next slot, or returns `None` if the queue is full.
    pub(crate) fn reserve(&self) -> Option<Reserved> {
        let tail = self.tail_counter();
        let mut pos = tail.load(Ordering::Relaxed);
        loop {
            let seq = self.header(pos).seq.load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos) as i64;
            if diff == 0 {
                match tail.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => {
                        return Some(Reserved {
                            slot: self.slot(pos),
                            pos,
                        })
                    }
                    Err(current) => pos = current,
                }
            } else if diff < 0 {
                return None;
            } else {
                // Another producer claimed `pos` and this one's view of the tail is
                // stale: wait for the newer value (under loom, let the others run).
                spin_loop();
                pos = tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Makes a filled slot visible to the consumer.
    ///
    /// Then prefetches the next slot's header line: the consumer wrote it when it freed
    /// that slot, so the next `reserve` would otherwise start with a cross-core miss on
    /// the critical path of the next message. A read prefetch: a `prefetchw` (the line
    /// in exclusive state) measured no better, and no prefetch worse (a Medium round
    /// trip of 7 arguments 207-238 ns with it, 210-240 with `prefetchw`, 240-262
    /// without, on a 2-core EPYC whose cores share a cache).
    #[inline]
    pub(crate) fn publish(&self, reserved: Reserved) {
        self.header(reserved.pos)
            .seq
            .store(reserved.pos + 1, Ordering::Release);
        prefetch(self.slot(reserved.pos + 1));
    }

    /// The published message at the consumer's position `head`, if there is one.
    pub(crate) fn peek(&self, head: u64) -> Option<*mut u8> {
        let seq = self.header(head).seq.load(Ordering::Acquire);
        (seq == head + 1).then(|| self.slot(head))
    }

    /// Frees the slot at `head` after its message was handled.
    pub(crate) fn release(&self, head: u64) {
        self.header(head)
            .seq
            .store(head + self.capacity, Ordering::Release);
    }
}

#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, even for an invalid address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[repr(C, align(4096))]
    struct Page([u8; 4096]);

    fn area(capacity: usize) -> Vec<Page> {
        let bytes = QUEUE_HEADER + capacity * SLOT_SIZE;
        (0..bytes.div_ceil(4096)).map(|_| Page([0; 4096])).collect()
    }

    #[test]
    fn fills_up_then_drains_in_order() {
        let mut mem = area(4);
        // SAFETY: `mem` is large enough and outlives `q`.
        let q = unsafe { Queue::at(mem.as_mut_ptr() as *mut u8, 4) };
        q.initialize();
        for i in 0..4u64 {
            let r = q.reserve().expect("slot");
            // SAFETY: the reserved slot belongs to this producer until published.
            unsafe { (*(r.slot as *mut SlotHeader)).dest_addr = i };
            q.publish(r);
        }
        assert!(q.reserve().is_none(), "a full queue refuses");
        for head in 0..4u64 {
            assert!(q.peek(head).is_some());
            assert_eq!(q.header(head).dest_addr, head);
            q.release(head);
        }
        assert!(q.peek(4).is_none());
        assert!(q.reserve().is_some(), "released slots are reused");
    }

    #[test]
    fn concurrent_producers_lose_nothing() {
        let mut mem = area(8);
        let base = mem.as_mut_ptr() as usize;
        // SAFETY: `mem` outlives every thread (they are joined below).
        let q = unsafe { Queue::at(base as *mut u8, 8) };
        q.initialize();
        let q = Arc::new(q);
        let producers: Vec<_> = (0..3u64)
            .map(|t| {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        let r = loop {
                            if let Some(r) = q.reserve() {
                                break r;
                            }
                            std::thread::yield_now();
                        };
                        // SAFETY: the reserved slot belongs to this producer.
                        unsafe { (*(r.slot as *mut SlotHeader)).dest_addr = t * 10_000 + i };
                        q.publish(r);
                    }
                })
            })
            .collect();
        let mut next = [0u64; 3];
        let mut head = 0;
        while head < 3000 {
            if q.peek(head).is_some() {
                let v = q.header(head).dest_addr;
                let (t, i) = ((v / 10_000) as usize, v % 10_000);
                assert_eq!(i, next[t], "per-producer FIFO order");
                next[t] += 1;
                q.release(head);
                head += 1;
            } else {
                std::thread::yield_now();
            }
        }
        producers.into_iter().for_each(|p| p.join().unwrap());
        assert_eq!(next, [1000; 3]);
    }

    mod fuzz {
        //! Property tests of [`decode`]: random and mutated slot headers are accepted
        //! only with fields that index, size and address inside their bounds, or
        //! rejected with a reason; never a panic. Cases: `PROPTEST_CASES` (default 256
        //! per test).
        use super::super::*;
        use proptest::prelude::*;

        /// Bytes of a header that `decode` reads (the rest of the slot is payload).
        const HEADER_BYTES: usize = std::mem::size_of::<SlotHeader>();

        /// A header with these raw bytes, in an aligned buffer.
        fn header_from(bytes: &[u8]) -> Box<[u64; HEADER_BYTES / 8]> {
            let mut words = Box::new([0u64; HEADER_BYTES / 8]);
            for (i, b) in bytes.iter().take(HEADER_BYTES).enumerate() {
                words[i / 8] |= u64::from(*b) << (8 * (i % 8));
            }
            words
        }

        fn check(
            words: &[u64; HEADER_BYTES / 8],
            bounds: &SlotBounds,
        ) -> Result<(), TestCaseError> {
            // SAFETY: the buffer is a SlotHeader's size and 8-byte aligned, and every bit
            // pattern is a valid SlotHeader (integers only).
            let h = unsafe { &*(words.as_ptr() as *const SlotHeader) };
            match decode(h, bounds) {
                Ok(m) if m.handler == 0 => prop_assert_eq!(m.payload, SlotPayload::None),
                Ok(m) => {
                    prop_assert!(m.src < bounds.ranks);
                    prop_assert!(m.nargs <= h.args.len());
                    match m.payload {
                        SlotPayload::None => prop_assert_ne!(m.category, Category::Medium),
                        SlotPayload::Inline(n) => prop_assert!(n <= SLOT_PAYLOAD),
                        SlotPayload::At { addr, len } => {
                            let (base, size) = bounds.segment;
                            prop_assert!(addr >= base && addr - base + len <= size);
                        }
                    }
                }
                Err(why) => prop_assert!(!why.is_empty()),
            }
            Ok(())
        }

        /// A header a correct sender writes.
        fn valid(kind: u8, nargs: u8, nbytes: u32, dest: u64) -> Vec<u8> {
            let mut b = vec![0u8; HEADER_BYTES];
            b[8..12].copy_from_slice(&1u32.to_le_bytes()); // src
            b[12] = 7; // handler
            b[13] = kind;
            b[14] = nargs;
            b[16..20].copy_from_slice(&nbytes.to_le_bytes());
            b[24..32].copy_from_slice(&dest.to_le_bytes());
            b
        }

        fn bounds() -> impl Strategy<Value = SlotBounds> {
            (
                1u32..8,
                0usize..1 << 40,
                prop_oneof![Just(0usize), 1usize..1 << 30],
            )
                .prop_map(|(ranks, base, size)| SlotBounds {
                    ranks,
                    segment: (base, size),
                })
        }

        proptest! {
            #[test]
            fn random_headers(bytes in proptest::collection::vec(any::<u8>(), 0..=HEADER_BYTES),
                              bounds in bounds()) {
                check(&header_from(&bytes), &bounds)?;
            }

            #[test]
            fn mutated_headers(kind in 0u8..3, nargs in 0u8..=16, nbytes in 0u32..=SLOT_PAYLOAD as u32,
                               flips in proptest::collection::vec((8usize..HEADER_BYTES, any::<u8>()), 1..4),
                               bounds in bounds()) {
                let base = bounds.segment.0 as u64;
                let mut bytes = valid(kind, nargs, if kind == 0 { 0 } else { nbytes }, base);
                let unmutated = header_from(&bytes);
                check(&unmutated, &bounds)?;
                for (at, x) in flips {
                    bytes[at] ^= x;
                }
                check(&header_from(&bytes), &bounds)?;
            }
        }

        #[test]
        fn each_field_is_checked() {
            let segment = SlotBounds {
                ranks: 2,
                segment: (1 << 20, 4096),
            };
            let reason = |b: Vec<u8>| {
                let w = header_from(&b);
                // SAFETY: as in `check`.
                decode(unsafe { &*(w.as_ptr() as *const SlotHeader) }, &segment).unwrap_err()
            };
            let mut b = valid(1, 2, 8, 0);
            b[8] = 2;
            assert!(reason(b).contains("sender rank 2"));
            assert!(reason(valid(1, 17, 8, 0)).contains("17 arguments"));
            assert!(reason(valid(1, 0, SLOT_PAYLOAD as u32 + 1, 0)).contains("Medium payload"));
            assert!(reason(valid(0, 0, 1, 0)).contains("Short message"));
            assert!(reason(valid(2, 0, 8, (1 << 20) + 4090)).contains("outside"));
            assert!(reason(valid(3, 0, 0, 0)).contains("unknown message category 3"));
        }
    }
}

/// Every interleaving (up to `LOOM_MAX_PREEMPTIONS` preemptions) of producers and the
/// consumer through the real queue code, with the queue in an ordinary allocation.
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p gex --release --lib loom`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::thread;
    use std::sync::atomic::AtomicUsize;

    /// A queue of `capacity` slots whose atomics are loom's, constructed in place as
    /// the shared region would hold them, with one more atomic per slot after the
    /// header standing for the payload (written Relaxed, so only `seq`'s
    /// Release/Acquire can make it visible).
    struct Area {
        mem: Vec<u64>,
        capacity: usize,
    }

    impl Area {
        fn new(capacity: usize) -> Area {
            let mut mem = vec![0u64; (QUEUE_HEADER + capacity * SLOT_SIZE) / 8];
            let base = mem.as_mut_ptr() as *mut u8;
            // SAFETY: every object written lies inside `mem`, 8-byte aligned, and is
            // dropped in `drop` before `mem` is.
            unsafe {
                (base as *mut AtomicU64).write(AtomicU64::new(0));
                for i in 0..capacity {
                    let slot = base.add(QUEUE_HEADER + i * SLOT_SIZE);
                    (slot as *mut SlotHeader).write(SlotHeader {
                        seq: AtomicU64::new(0),
                        src: 0,
                        handler: 0,
                        kind: 0,
                        nargs: 0,
                        _pad0: 0,
                        nbytes: 0,
                        _pad1: 0,
                        dest_addr: 0,
                        args: [0; 16],
                    });
                    (slot.add(SLOT_HEADER) as *mut AtomicU64).write(AtomicU64::new(0));
                }
            }
            Area { mem, capacity }
        }

        fn queue(&self) -> Queue {
            // SAFETY: the area is laid out as `at` requires and outlives the model run.
            let q = unsafe { Queue::at(self.mem.as_ptr() as *mut u8, self.capacity) };
            q.initialize();
            q
        }
    }

    impl Drop for Area {
        fn drop(&mut self) {
            let base = self.mem.as_mut_ptr() as *mut u8;
            // SAFETY: the objects written in `new`, dropped once.
            unsafe {
                std::ptr::drop_in_place(base as *mut AtomicU64);
                for i in 0..self.capacity {
                    let slot = base.add(QUEUE_HEADER + i * SLOT_SIZE);
                    std::ptr::drop_in_place(slot as *mut SlotHeader);
                    std::ptr::drop_in_place(slot.add(SLOT_HEADER) as *mut AtomicU64);
                }
            }
        }
    }

    fn payload(slot: *mut u8) -> &'static AtomicU64 {
        // SAFETY: `Area::new` put an AtomicU64 after every slot's header.
        unsafe { &*(slot.add(SLOT_HEADER) as *const AtomicU64) }
    }

    /// Sends `values` in order, retrying while the queue is full.
    fn produce(q: Queue, values: impl Iterator<Item = u64>) {
        for v in values {
            let r = loop {
                match q.reserve() {
                    Some(r) => break r,
                    None => thread::yield_now(),
                }
            };
            payload(r.slot).store(v, Ordering::Relaxed);
            q.publish(r);
        }
    }

    /// Receives `n` messages in queue order.
    fn consume(q: Queue, n: u64) -> Vec<u64> {
        let mut got = Vec::new();
        let mut head = 0;
        while head < n {
            match q.peek(head) {
                Some(slot) => {
                    got.push(payload(slot).load(Ordering::Relaxed));
                    q.release(head);
                    head += 1;
                }
                None => thread::yield_now(),
            }
        }
        got
    }

    /// Runs `f` under loom and prints how many interleavings it explored.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let explored = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&explored);
        loom::model(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            f();
        });
        let n = explored.load(std::sync::atomic::Ordering::Relaxed);
        println!("loom: {n} interleavings explored");
    }

    /// Two producers race for the slots (one claims a slot whose position the other
    /// saw as free, or reads a stale tail). The queue does not fill up: a producer that
    /// polls a full queue may, in the model, read a stale sequence number forever (no
    /// fairness), which loom reports as a livelock; filling up and wrapping around is
    /// the next test's, with one producer.
    #[test]
    fn loom_two_producers_lose_nothing_and_keep_their_order() {
        model(|| {
            let area = Area::new(4);
            let q = area.queue();
            let a = thread::spawn(move || produce(q, [10, 11].into_iter()));
            let b = thread::spawn(move || produce(q, [20].into_iter()));
            let got = consume(q, 3);
            a.join().unwrap();
            b.join().unwrap();
            let from = |p: u64| {
                got.iter()
                    .filter(|&&v| v / 10 == p)
                    .copied()
                    .collect::<Vec<_>>()
            };
            assert_eq!(from(1), [10, 11], "{got:?}");
            assert_eq!(from(2), [20], "{got:?}");
        });
    }

    #[test]
    fn loom_a_full_queue_wraps_around() {
        model(|| {
            let area = Area::new(2);
            let q = area.queue();
            let p = thread::spawn(move || produce(q, 1..=5));
            let got = consume(q, 5);
            p.join().unwrap();
            assert_eq!(got, [1, 2, 3, 4, 5]);
            assert!(q.peek(5).is_none());
        });
    }
}
