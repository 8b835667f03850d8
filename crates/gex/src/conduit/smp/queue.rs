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
//! Why hand-written: the queue lives in memory shared between processes, holds
//! variable-length messages in place and must be reservable before the payload is
//! written (negotiated-payload AMs); the crates we know (crossbeam's `ArrayQueue`,
//! `heapless::mpmc`) own their storage in one process's heap.

use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::{QUEUE_HEADER, SLOT_SIZE};

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

const _: () = assert!(std::mem::size_of::<SlotHeader>() <= super::layout::SLOT_HEADER);

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
        std::sync::atomic::fence(Ordering::Release);
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
                pos = tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Makes a filled slot visible to the consumer.
    ///
    /// Then asks for the next slot's header line in exclusive state: the consumer wrote
    /// it when it freed that slot, so the next `reserve` would otherwise start with a
    /// cross-core miss on the critical path of the next message.
    #[inline]
    pub(crate) fn publish(&self, reserved: Reserved) {
        self.header(reserved.pos)
            .seq
            .store(reserved.pos + 1, Ordering::Release);
        prefetch_for_write(self.slot(reserved.pos + 1));
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
fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, even for an invalid address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(p as *const i8);
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
}
