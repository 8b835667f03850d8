//! Receive buffers for RPC messages: where an AM handler leaves a message for
//! user-level progress to run later.
//!
//! An AM handler runs in the network layer's restricted context and its payload is only
//! valid during the handler, so it copies the message into a [`Queue`] and returns.
//! A queue appends messages to *pages*: 16-byte-aligned buffers (64 KiB, or one exactly
//! sized for a message that does not fit), each message at a 16-byte-aligned offset, so
//! aligned views can be read in place. The consumer takes one page at a time and runs its
//! messages with the queue free again, so handlers that run meanwhile (a running RPC
//! may communicate, which polls) fill another page.
//!
//! A taken page is the consumer's: it gives it back for reuse when its messages ran, and
//! the steady state allocates nothing. No reference counting is involved: the rare
//! message that must outlive its run (an RPC whose function returned a future that is
//! not ready keeps its arguments' buffer until then, §6.5 ¶6) makes the consumer give
//! its page away instead (see `delivery.rs`).
//!
//! A [`Queue`] is not synchronized: the thread that owns it (the holder of the master
//! persona, or the thread an RPC reply is for) fills and drains it. An [`Inbox`] is a
//! queue behind a lock for messages received by the polls of other threads, with a
//! count that lets the owner see it is empty without locking.
//!
//! A leaf of `rpc`; the message kinds live here, beside the header that carries them.

use std::collections::VecDeque;

use crate::serialization::copy;
use crate::sync::{AtomicBool, Mutex, Ordering};

use bytemuck::{Pod, Zeroable};

/// Size of an ordinary page.
const PAGE: usize = 64 << 10;
/// Empty pages a queue keeps for reuse.
const POOL: usize = 4;

/// One 16-byte unit of a page: gives pages their alignment without `unsafe`.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(16))]
struct Chunk([u8; 16]);

/// [`Head::kind`] of an RPC: runs on the target's master persona.
pub(super) const KIND_RPC: u32 = 1;
/// [`Head::kind`] of the reply to a round-trip RPC: completes the caller's future.
pub(super) const KIND_REPLY: u32 = 2;
/// A reply whose value is `()`: on the calling thread it is completed without running
/// its entry (`reply::complete_unit`); forwarded to another thread, it runs as a reply.
pub(super) const KIND_REPLY_UNIT: u32 = 3;

/// The header of a message in a page (the AM's arguments, decoded).
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct Head {
    /// Job rank of the sender.
    pub src: u32,
    /// What the message is: [`KIND_RPC`], [`KIND_REPLY`] or [`KIND_REPLY_UNIT`].
    pub kind: u32,
    /// Offset of the function to run from the anchor (see `function::function_offset`).
    pub func: [u32; 2],
    /// For a round-trip RPC: where the reply goes (opaque to the receiver).
    pub cookie: [u32; 4],
    /// Payload length in bytes.
    pub len: u32,
    /// The sender's sequence number of an RPC, which makes its GASP message id; 0 when
    /// the sender had no tool attached (see `wire::first_arg`).
    pub seq: u32,
    _pad: [u32; 2],
}

/// Bytes a header occupies; payloads start 16-byte aligned after it.
pub(crate) const HEAD: usize = std::mem::size_of::<Head>();
const _: () = assert!(HEAD == HEAD.next_multiple_of(16));

impl Head {
    pub(super) fn new(
        src: u32,
        kind: u32,
        seq: u32,
        func: [u32; 2],
        cookie: [u32; 4],
        len: u32,
    ) -> Head {
        Head {
            src,
            kind,
            func,
            cookie,
            len,
            seq,
            _pad: [0; 2],
        }
    }
}

/// Bytes a message of `len` payload bytes occupies in a page.
pub(super) fn footprint(len: usize) -> usize {
    (HEAD + len).next_multiple_of(16)
}

/// An aligned buffer of messages.
pub(crate) struct Page {
    buf: Vec<Chunk>,
    len: usize,
}

impl Page {
    /// A page without a buffer (allocates nothing).
    pub(super) const fn empty() -> Page {
        Page {
            buf: Vec::new(),
            len: 0,
        }
    }

    fn new(cap: usize) -> Page {
        Page {
            buf: vec![Chunk([0; 16]); cap.div_ceil(16)],
            len: 0,
        }
    }

    fn cap(&self) -> usize {
        self.buf.len() * 16
    }

    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.buf)
    }

    /// Appends a message; the caller checked that it fits.
    fn append(&mut self, head: &Head, payload: &[u8]) {
        let at = self.len / 16;
        write_head(&mut self.buf[at..at + HEAD_CHUNKS], head);
        if !payload.is_empty() {
            let start = self.len + HEAD;
            copy(&mut self.bytes_mut()[start..start + payload.len()], payload);
        }
        self.len += footprint(payload.len());
    }

    /// A page holding one message of `head.len` payload bytes, to be filled in pieces
    /// with [`Page::write_payload`] (reassembly of a fragmented message).
    pub(super) fn for_message(head: &Head) -> Page {
        let len = head.len as usize;
        let mut p = Page::new(footprint(len));
        write_head(&mut p.buf[..HEAD_CHUNKS], head);
        p.len = footprint(len);
        p
    }

    /// Writes part of the payload of a page made by [`Page::for_message`].
    pub(super) fn write_payload(&mut self, offset: usize, data: &[u8]) {
        let at = HEAD + offset;
        self.bytes_mut()[at..at + data.len()].copy_from_slice(data);
    }

    /// Forgets the messages of a page whose messages ran; a page of the ordinary size
    /// keeps its buffer for reuse, a larger one frees it.
    pub(super) fn clear(&mut self) {
        if self.cap() == PAGE {
            self.len = 0;
        } else {
            *self = Page::empty();
        }
    }

    /// The messages in this page, in arrival order.
    pub(super) fn messages(&self) -> Messages<'_> {
        Messages {
            chunks: &self.buf[..self.len / 16],
        }
    }
}

/// Chunks a [`Head`] occupies: messages start at chunk boundaries, so a header is read
/// and written as whole chunks, with aligned moves.
const HEAD_CHUNKS: usize = HEAD / 16;

#[inline]
fn write_head(chunks: &mut [Chunk], head: &Head) {
    let chunks: &mut [Chunk; HEAD_CHUNKS] = chunks.try_into().expect("HEAD_CHUNKS chunks");
    *chunks = bytemuck::cast(*head);
}

/// Iterator over the messages of a page.
#[derive(Clone, Copy, Default)]
pub(crate) struct Messages<'a> {
    chunks: &'a [Chunk],
}

impl<'a> Iterator for Messages<'a> {
    type Item = (&'a Head, &'a [u8]);

    /// The header is read where it lies, not copied.
    #[inline]
    fn next(&mut self) -> Option<(&'a Head, &'a [u8])> {
        let (head, rest) = self.chunks.split_first_chunk::<HEAD_CHUNKS>()?;
        let head: &Head = bytemuck::from_bytes(bytemuck::cast_slice::<Chunk, u8>(head));
        let len = head.len as usize;
        let payload = &bytemuck::cast_slice::<Chunk, u8>(rest)[..len];
        self.chunks = &rest[len.div_ceil(16)..];
        Some((head, payload))
    }
}

/// A queue of messages, owned by one thread at a time (see the module documentation).
pub(crate) struct Queue {
    /// The page being filled.
    current: Page,
    /// Filled pages, oldest first; all older than `current`.
    full: VecDeque<Page>,
    pool: Vec<Page>,
}

impl Queue {
    pub(super) const fn new() -> Queue {
        Queue {
            current: Page::empty(),
            full: VecDeque::new(),
            pool: Vec::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.current.len == 0 && self.full.is_empty()
    }

    /// Pages holding messages (what a drain that started now would take).
    pub(super) fn pages(&self) -> usize {
        self.full.len() + usize::from(self.current.len > 0)
    }

    /// Moves the page being filled to the filled ones, and starts an empty one.
    fn close_current(&mut self) {
        if self.current.len > 0 {
            let fresh = self.pool.pop().unwrap_or(Page::empty());
            self.full
                .push_back(std::mem::replace(&mut self.current, fresh));
        }
    }

    /// Copies a message in. Not inlined: inlined into its caller, it takes the
    /// thread-local accesses of `delivery::queue_rpc` out of line, which costs more
    /// than the call.
    #[inline(never)]
    pub(super) fn push(&mut self, head: &Head, payload: &[u8]) {
        let need = footprint(payload.len());
        // The page being filled is empty (no buffer) or of the ordinary size, so a
        // message that fits in its room is no larger than a page.
        if need <= self.current.cap() - self.current.len {
            self.current.append(head, payload);
        } else {
            self.push_new_page(head, payload);
        }
    }

    /// [`Queue::push`] of a message that does not fit in the page being filled.
    #[cold]
    #[inline(never)]
    fn push_new_page(&mut self, head: &Head, payload: &[u8]) {
        let need = footprint(payload.len());
        if need > PAGE {
            let mut page = Page::new(need);
            page.append(head, payload);
            self.push_page(page);
            return;
        }
        self.close_current();
        if self.current.cap() < need {
            self.current = Page::new(PAGE);
        }
        self.current.append(head, payload);
    }

    /// Appends messages already in the page format (a run of whole records, each
    /// header followed by its payload padded to 16 bytes, as `batch` sends them): one
    /// copy when they fit in the page being filled. The caller checked the records.
    pub(super) fn push_records(&mut self, records: &[u8]) {
        debug_assert_eq!(records.len() % 16, 0);
        let at = self.current.len;
        if records.len() <= self.current.cap() - at {
            copy(
                &mut self.current.bytes_mut()[at..at + records.len()],
                records,
            );
            self.current.len += records.len();
        } else {
            self.push_records_one_by_one(records);
        }
    }

    /// [`Queue::push_records`] of records that do not fit in the page being filled.
    #[cold]
    #[inline(never)]
    fn push_records_one_by_one(&mut self, mut records: &[u8]) {
        while !records.is_empty() {
            let head: Head = bytemuck::pod_read_unaligned(&records[..HEAD]);
            let len = head.len as usize;
            self.push(&head, &records[HEAD..HEAD + len]);
            records = &records[footprint(len)..];
        }
    }

    /// Appends a message whose payload `fill` writes in place: `fill` gets the free room
    /// of the page being filled, after the header (16-byte aligned), writes the payload
    /// at its start and returns its length, or `None` if it did not fit, or failed
    /// (nothing is queued then). Returns whether a message was queued. `head.len` is set
    /// to the length written.
    ///
    /// # Panics
    /// If `fill` returns more bytes than it was given.
    pub(super) fn push_in_place(
        &mut self,
        head: &Head,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        if self.current.cap() - self.current.len < HEAD + 16 {
            self.close_current();
            if self.current.cap() < PAGE {
                self.current = Page::new(PAGE);
            }
        }
        let start = self.current.len + HEAD;
        let Some(len) = fill(&mut self.current.bytes_mut()[start..]) else {
            return false;
        };
        assert!(
            start + len <= self.current.cap(),
            "upcxx::rpc: a message written in place outgrew its room"
        );
        let at = self.current.len / 16;
        let mut head = *head;
        head.len = len as u32;
        write_head(&mut self.current.buf[at..at + HEAD_CHUNKS], &head);
        self.current.len += footprint(len);
        true
    }

    /// Queues a complete page (a reassembled message).
    pub(super) fn push_page(&mut self, page: Page) {
        self.close_current();
        self.full.push_back(page);
    }

    /// Takes the oldest page of messages; give it back with [`Queue::recycle`].
    #[inline]
    pub(super) fn take(&mut self) -> Option<Page> {
        if !self.full.is_empty() {
            return self.full.pop_front();
        }
        if self.current.len == 0 {
            return None;
        }
        // The next message allocates a page if the pool has none, unless this one is
        // back by then (the common case: one page goes back and forth).
        let fresh = self.pool.pop().unwrap_or(Page::empty());
        Some(std::mem::replace(&mut self.current, fresh))
    }

    /// Swaps the oldest page of messages into `page`, which holds none; the buffer it
    /// had stays with the queue for reuse. Returns false if no message is queued. (The
    /// consumer of a queue it owns keeps one page for this, so that taking a page moves
    /// nothing.)
    #[inline]
    pub(super) fn take_into(&mut self, page: &mut Page) -> bool {
        debug_assert_eq!(page.len, 0);
        if !self.full.is_empty() {
            let oldest = self.full.pop_front().expect("not empty");
            self.recycle(std::mem::replace(page, oldest));
            return true;
        }
        if self.current.len == 0 {
            return false;
        }
        std::mem::swap(&mut self.current, page);
        if self.current.cap() == 0 {
            if let Some(spare) = self.pool.pop() {
                self.current = spare;
            }
        }
        true
    }

    /// Takes back a page from [`Queue::take`] whose messages ran, for reuse.
    #[inline]
    pub(super) fn recycle(&mut self, mut page: Page) {
        if page.cap() == PAGE {
            page.len = 0;
            if self.current.cap() == 0 {
                self.current = page;
            } else if self.pool.len() < POOL {
                self.pool.push(page);
            }
        }
    }

    /// Moves every message of `older` in front of this queue's.
    pub(super) fn prepend(&mut self, older: &mut Queue) {
        older.close_current();
        self.close_current();
        let mut full = std::mem::take(&mut older.full);
        full.append(&mut self.full);
        self.full = full;
    }
}

/// A [`Queue`] that other threads fill (see the module documentation).
pub(crate) struct Inbox {
    queue: Mutex<Queue>,
    /// Messages are queued and not yet taken (written under the lock).
    nonempty: AtomicBool,
}

impl Inbox {
    #[cfg(not(loom))]
    pub(super) const fn new() -> Inbox {
        Inbox {
            queue: Mutex::new(Queue::new()),
            nonempty: AtomicBool::new(false),
        }
    }

    /// Loom's primitives are not `const`.
    #[cfg(loom)]
    pub(super) fn new() -> Inbox {
        Inbox {
            queue: Mutex::new(Queue::new()),
            nonempty: AtomicBool::new(false),
        }
    }

    /// Runs `f` on the queue under the lock, and updates the emptiness flag.
    fn with<R>(&self, f: impl FnOnce(&mut Queue) -> R) -> R {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let r = f(&mut q);
        self.nonempty.store(!q.is_empty(), Ordering::Release);
        r
    }

    /// True if nothing is queued (no lock taken).
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        !self.nonempty.load(Ordering::Acquire)
    }

    pub(super) fn push(&self, head: &Head, payload: &[u8]) {
        self.with(|q| q.push(head, payload));
    }

    pub(super) fn push_records(&self, records: &[u8]) {
        self.with(|q| q.push_records(records));
    }

    pub(super) fn push_page(&self, page: Page) {
        self.with(|q| q.push_page(page));
    }

    /// Moves every message of `older` in front of this inbox's.
    pub(super) fn prepend(&self, older: &mut Queue) {
        if !older.is_empty() {
            self.with(|q| q.prepend(older));
        }
    }

    pub(super) fn pages(&self) -> usize {
        self.with(|q| q.pages())
    }

    /// Takes the oldest page of messages; give it back with [`Inbox::recycle`].
    pub(super) fn take(&self) -> Option<Page> {
        self.with(Queue::take)
    }

    pub(super) fn recycle(&self, page: Page) {
        self.with(|q| q.recycle(page));
    }
}

#[cfg(test)]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
