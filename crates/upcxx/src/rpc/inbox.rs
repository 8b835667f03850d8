//! Receive buffers for RPC messages: where the AM handler leaves a message for user-level
//! progress to run later.
//!
//! An AM handler runs in the network layer's restricted context and its payload is only
//! valid during the handler, so it copies the message into an [`Inbox`] and returns.
//! The inbox appends messages to *pages*: 16-byte-aligned buffers (64 KiB, or one
//! exactly sized for a message that does not fit), each message at a 16-byte-aligned
//! offset, so aligned views can be read in place. The consumer takes all filled pages
//! at once under the lock and runs their messages without it, so handlers that run
//! meanwhile (a running RPC may communicate, which polls) fill a fresh page.
//!
//! Pages are reference counted: an RPC whose function returned a future that is not yet
//! ready keeps its page alive until that future is ready (the view lifetime rule of
//! UPC++ §6.5 ¶6). A page comes back to the pool for reuse only when nothing holds it
//! any longer; so the steady state allocates nothing per message.
//!
//! Producers (handlers) may run on any thread, hence the mutex; it is held only to copy
//! one message. `push` reports whether the consumer must be scheduled (the inbox went
//! from idle to non-empty), so a burst of messages schedules one drain.

use std::sync::{Arc, Mutex, MutexGuard};

use bytemuck::{Pod, Zeroable};

/// Size of an ordinary page.
const PAGE: usize = 64 << 10;
/// Pages kept for reuse.
const POOL: usize = 4;

/// One 16-byte unit of a page: gives pages their alignment without `unsafe`.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(16))]
struct Chunk([u8; 16]);

/// The header of a message in a page (the AM's arguments, decoded).
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct Head {
    /// Job rank of the sender.
    pub src: u32,
    pub kind: u32,
    /// Offset of the function to run from the anchor (see `rpc::function_offset`).
    pub func: [u32; 2],
    /// For a round-trip RPC: where the reply goes (opaque to the receiver).
    pub cookie: [u32; 4],
    /// Payload length in bytes.
    pub len: u32,
    _pad: [u32; 3],
}

/// Bytes a header occupies; payloads start 16-byte aligned after it.
pub(crate) const HEAD: usize = std::mem::size_of::<Head>();
const _: () = assert!(HEAD == HEAD.next_multiple_of(16));

impl Head {
    pub fn new(src: u32, kind: u32, func: [u32; 2], cookie: [u32; 4], len: u32) -> Head {
        Head {
            src,
            kind,
            func,
            cookie,
            len,
            _pad: [0; 3],
        }
    }
}

/// Bytes a message of `len` payload bytes occupies in a page.
fn footprint(len: usize) -> usize {
    (HEAD + len).next_multiple_of(16)
}

/// An aligned buffer of messages.
pub(crate) struct Page {
    buf: Box<[Chunk]>,
    len: usize,
}

impl Page {
    fn new(cap: usize) -> Page {
        Page {
            buf: vec![Chunk([0; 16]); cap.div_ceil(16)].into_boxed_slice(),
            len: 0,
        }
    }

    fn empty() -> Page {
        Page {
            buf: Box::new([]),
            len: 0,
        }
    }

    fn cap(&self) -> usize {
        self.buf.len() * 16
    }

    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.buf)
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.buf)
    }

    /// Appends a message; the caller checked that it fits.
    fn append(&mut self, head: &Head, payload: &[u8]) {
        let at = self.len;
        let b = self.bytes_mut();
        b[at..at + HEAD].copy_from_slice(bytemuck::bytes_of(head));
        b[at + HEAD..at + HEAD + payload.len()].copy_from_slice(payload);
        self.len = at + footprint(payload.len());
    }

    /// A page holding one message of `len` payload bytes, to be filled in pieces with
    /// [`Page::write_payload`] (reassembly of a fragmented message).
    pub fn for_message(head: &Head) -> Page {
        let len = head.len as usize;
        let mut p = Page::new(footprint(len));
        p.bytes_mut()[..HEAD].copy_from_slice(bytemuck::bytes_of(head));
        p.len = footprint(len);
        p
    }

    /// Writes part of the payload of a page made by [`Page::for_message`].
    pub fn write_payload(&mut self, offset: usize, data: &[u8]) {
        let at = HEAD + offset;
        self.bytes_mut()[at..at + data.len()].copy_from_slice(data);
    }

    /// The messages in this page, in arrival order.
    pub fn messages(&self) -> Messages<'_> {
        Messages {
            bytes: &self.bytes()[..self.len],
        }
    }
}

/// Iterator over the messages of a page.
pub(crate) struct Messages<'a> {
    bytes: &'a [u8],
}

impl<'a> Iterator for Messages<'a> {
    type Item = (Head, &'a [u8]);

    fn next(&mut self) -> Option<(Head, &'a [u8])> {
        if self.bytes.is_empty() {
            return None;
        }
        let head: Head = *bytemuck::from_bytes(&self.bytes[..HEAD]);
        let len = head.len as usize;
        let payload = &self.bytes[HEAD..HEAD + len];
        self.bytes = &self.bytes[footprint(len).min(self.bytes.len())..];
        Some((head, payload))
    }
}

struct State {
    /// The page being filled; never shared (its `Arc` is unique).
    current: Arc<Page>,
    /// Filled pages waiting for the consumer, in order.
    full: Vec<Arc<Page>>,
    pool: Vec<Arc<Page>>,
    /// An empty vector with capacity, reused to hand batches to the consumer.
    spare: Vec<Arc<Page>>,
    /// A drain is scheduled and has not yet taken the messages.
    scheduled: bool,
}

/// A multi-producer, single-consumer queue of messages.
pub(crate) struct Inbox {
    state: Mutex<State>,
}

impl Inbox {
    pub fn new() -> Inbox {
        Inbox {
            state: Mutex::new(State {
                current: Arc::new(Page::empty()),
                full: Vec::new(),
                pool: Vec::new(),
                spare: Vec::new(),
                scheduled: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copies a message in. Returns true if the caller must schedule a drain.
    pub fn push(&self, head: &Head, payload: &[u8]) -> bool {
        let need = footprint(payload.len());
        let mut s = self.lock();
        if s.current.cap() - s.current.len < need {
            let fresh = if need <= PAGE {
                s.pool.pop().unwrap_or_else(|| Arc::new(Page::new(PAGE)))
            } else {
                Arc::new(Page::new(need))
            };
            let old = std::mem::replace(&mut s.current, fresh);
            if old.len > 0 {
                s.full.push(old);
            } else if old.cap() == PAGE && s.pool.len() < POOL {
                s.pool.push(old);
            }
        }
        Arc::get_mut(&mut s.current)
            .expect("the page being filled is never shared")
            .append(head, payload);
        !std::mem::replace(&mut s.scheduled, true)
    }

    /// Queues a complete page (a reassembled message). Returns true if the caller must
    /// schedule a drain.
    pub fn push_page(&self, page: Page) -> bool {
        let mut s = self.lock();
        if s.current.len > 0 {
            let fresh = s.pool.pop().unwrap_or_else(|| Arc::new(Page::empty()));
            let old = std::mem::replace(&mut s.current, fresh);
            s.full.push(old);
        }
        s.full.push(Arc::new(page));
        !std::mem::replace(&mut s.scheduled, true)
    }

    /// Takes every queued page; the next `push` schedules a new drain.
    pub fn take(&self) -> Vec<Arc<Page>> {
        let mut s = self.lock();
        s.scheduled = false;
        let mut batch = std::mem::take(&mut s.spare);
        batch.append(&mut s.full);
        if s.current.len > 0 {
            let fresh = s.pool.pop().unwrap_or_else(|| Arc::new(Page::empty()));
            batch.push(std::mem::replace(&mut s.current, fresh));
        }
        batch
    }

    /// Gives back a batch from [`Inbox::take`] once its messages ran: pages that nothing
    /// else holds are reused.
    pub fn recycle(&self, mut batch: Vec<Arc<Page>>) {
        let mut s = self.lock();
        for mut page in batch.drain(..) {
            if let Some(p) = Arc::get_mut(&mut page) {
                if p.cap() == PAGE && s.pool.len() < POOL {
                    p.len = 0;
                    s.pool.push(page);
                }
            }
        }
        if s.spare.capacity() < batch.capacity() {
            s.spare = batch;
        }
    }
}
