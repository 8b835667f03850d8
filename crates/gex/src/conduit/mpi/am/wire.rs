//! The wire format of the mpi conduit's Active Messages between hosts: a message is a
//! sequence of records, each an AM's header, arguments and Medium payload (see
//! [`WireHeader`]), at [`ALIGN`]-byte boundaries. A Long payload that fits a message
//! ([`long_inline`]) travels in its record as a Medium's does, and the receiver copies
//! it to its destination before the handler runs; a larger one was put there by RMA
//! before the record was sent.

use std::ptr::NonNull;

use super::super::MSG_SIZE;
use crate::conduit::{AmHeader, Category, Rank};

/// Where the Medium payload starts in a claimed send buffer: after a record header
/// with the most arguments, so that the header can be written at commit, when the
/// argument count is known.
pub(crate) const HEADER: usize = record_header(MAX_ARGS);
/// The most arguments of a message (`gex::max_args`).
const MAX_ARGS: usize = 16;
/// Bytes of the fixed part of a record header ([`WireHeader`]); the arguments follow.
const FIXED: usize = std::mem::size_of::<WireHeader>();
/// Records start at multiples of this in a message, as Medium payloads do.
const ALIGN: usize = 16;

/// Bytes of a compact message ([`compact`]): a lone Short record with at most one
/// argument, `[handler, nargs, credits[0], credits[1], arg]`. Told apart from a
/// message of records by its length (a record header is longer).
pub(super) const COMPACT: usize = 8;

/// The wire category of a Long record carrying its payload ([`long_inline`]); the
/// others are [`Category`]'s values.
const LONG_INLINE: u8 = 3;

/// Whether a Long payload of `nbytes` travels in its record (the payload area of a
/// claimed buffer holds it), not by RMA.
pub(crate) fn long_inline(nbytes: usize) -> bool {
    nbytes <= MSG_SIZE - HEADER
}

/// `n` rounded up to a record boundary.
const fn align(n: usize) -> usize {
    n.next_multiple_of(ALIGN)
}

/// Bytes of a record header with `nargs` arguments, up to the payload.
const fn record_header(nargs: usize) -> usize {
    align(FIXED + 4 * nargs)
}

/// The fixed part of a record's header. A message is a sequence of records, each at a
/// multiple of [`ALIGN`] bytes: this header, `nargs` `u32` arguments, and for a
/// Medium its payload at `payload_at` (a multiple of `ALIGN`, past the arguments);
/// the next record starts at the next multiple of `ALIGN` after the payload, or after
/// the arguments for Short and for a Long whose payload was put by RMA.
#[repr(C, align(8))]
#[derive(Clone, Copy, Default)]
struct WireHeader {
    src: u32,
    handler: u8,
    category: u8,
    nargs: u8,
    _pad: u8,
    nbytes: u32,
    payload_at: u16,
    /// In a message's first record: credits returned to the receiver, per network
    /// (messages of the receiver's that the sender has handled), piggybacked.
    credits: [u8; 2],
    dest_addr: u64,
}

/// A message buffer, 16-byte aligned. It owns its allocation as a box would, but holds
/// it by its raw pointer: the payload pointer of a claimed buffer is handed out through
/// a shared reference (`Conduit::am_buffer`) and written through, which a pointer made
/// from a `&Box` may not be.
pub(crate) struct Buf(NonNull<[u128; MSG_SIZE / 16]>);

// SAFETY: a `Buf` owns its allocation alone, as the box it was made from did.
unsafe impl Send for Buf {}

impl Buf {
    pub(crate) fn new() -> Buf {
        let b = Box::into_raw(Box::new([0u128; MSG_SIZE / 16]));
        // SAFETY: `Box::into_raw` never gives null.
        Buf(unsafe { NonNull::new_unchecked(b) })
    }
    pub(crate) fn ptr(&mut self) -> *mut u8 {
        self.0.as_ptr().cast()
    }
    pub(super) fn const_ptr(&self) -> *const u8 {
        self.0.as_ptr().cast_const().cast()
    }
    /// Where a claimed buffer's Medium payload is written.
    pub(crate) fn payload(&self) -> *mut u8 {
        self.0.as_ptr().cast::<u8>().wrapping_add(HEADER)
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` in `new`, dropped once.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A checked record of an arrived message, pointing into its receive buffer.
pub(super) struct Record {
    pub(super) src: Rank,
    pub(super) handler: u8,
    pub(super) category: Category,
    pub(super) args: *const u32,
    pub(super) nargs: usize,
    pub(super) payload: *const u8,
    pub(super) nbytes: usize,
    pub(super) dest_addr: usize,
    /// A Long record carries its payload (at `payload`), to be copied to `dest_addr`.
    pub(super) long_inline: bool,
    /// Where the next record of the message starts.
    pub(super) next: usize,
}

/// The record at offset `at` of a message of `end` bytes at `buf` from `src`, or
/// `None` if it is corrupt (it does not fit in the message, or its fields are out of
/// range).
///
/// # Safety
/// `buf` is 16-byte aligned and holds `end` received bytes, unchanged while the record
/// is used.
pub(super) unsafe fn parse(buf: *const u8, at: usize, end: usize, src: Rank) -> Option<Record> {
    if end == COMPACT {
        // SAFETY: the caller's guarantee: 8 received bytes.
        let [handler, nargs, ..] = unsafe { buf.cast::<[u8; 4]>().read() };
        return (at == 0 && nargs <= 1).then(|| Record {
            src,
            handler,
            category: Category::Short,
            // SAFETY: inside the received bytes.
            args: unsafe { buf.add(4) }.cast(),
            nargs: usize::from(nargs),
            payload: buf,
            nbytes: 0,
            dest_addr: 0,
            long_inline: false,
            next: COMPACT,
        });
    }
    if at + FIXED > end {
        return None;
    }
    // SAFETY: `at` is a multiple of ALIGN in a 16-byte aligned buffer (each record
    // ends on one), and the fixed header lies inside the received bytes; any bit
    // pattern is a valid header.
    let h = unsafe { (buf.add(at) as *const WireHeader).read() };
    let nargs = usize::from(h.nargs);
    let category = match h.category {
        0 => Category::Short,
        1 => Category::Medium,
        2 | LONG_INLINE => Category::Long,
        _ => return None,
    };
    let long_inline = h.category == LONG_INLINE;
    let payload_at = h.payload_at as usize;
    let payload_len = if category == Category::Medium || long_inline {
        h.nbytes as usize
    } else {
        0
    };
    if h.src != src
        || nargs > MAX_ARGS
        || !payload_at.is_multiple_of(ALIGN)
        || payload_at < FIXED + 4 * nargs
        || payload_len > end
        || at + payload_at + payload_len > end
    {
        return None;
    }
    Some(Record {
        src,
        handler: h.handler,
        category,
        // SAFETY: inside the received bytes (checked above).
        args: unsafe { buf.add(at + FIXED) }.cast(),
        nargs,
        // SAFETY: as for `args`.
        payload: unsafe { buf.add(at + payload_at) },
        nbytes: h.nbytes as usize,
        dest_addr: h.dest_addr as usize,
        long_inline,
        next: at + align(payload_at + payload_len),
    })
}

/// Sets the credits a message returns (in its first record).
pub(super) fn set_credits(buf: &mut Buf, credits: [u8; 2]) {
    // SAFETY: every message starts with a record header (`encode`).
    unsafe { (*(buf.ptr() as *mut WireHeader)).credits = credits };
}

/// The credits returned by a received message of `len` bytes, or `None` if it is too
/// short to hold a record header.
pub(super) fn credits(buf: &Buf, len: usize) -> Option<[u8; 2]> {
    if len == COMPACT {
        // SAFETY: the buffer holds the 8 bytes received.
        let [_, _, c0, c1] = unsafe { buf.const_ptr().cast::<[u8; 4]>().read() };
        return Some([c0, c1]);
    }
    // SAFETY: the buffer is aligned for a header, which lies in the received bytes.
    (len >= FIXED).then(|| unsafe { (*(buf.const_ptr() as *const WireHeader)).credits })
}

/// Rewrites a message of `len` bytes as a compact one ([`COMPACT`]) if it is a lone
/// Short record with at most one argument; returns the length to send. With Open MPI
/// over shared memory, a message of at most 8 bytes travels in one cache line (see
/// the conduit's documentation).
pub(super) fn compact(buf: &mut Buf, len: usize) -> usize {
    if len != record_header(1) {
        return len; // longer, or (shorter) not a record
    }
    let ptr = buf.ptr();
    // SAFETY: a message of `len` bytes starts with a record header (`encode`).
    let h = unsafe { (ptr as *const WireHeader).read() };
    if h.category != Category::Short as u8 || h.nargs > 1 {
        return len;
    }
    // SAFETY: the argument (if any) follows the fixed header, inside `len` bytes; the
    // compact form is written over the fixed header, after reading it.
    unsafe {
        let arg = ptr.add(FIXED).cast::<u32>().read();
        ptr.cast::<[u8; 4]>()
            .write([h.handler, h.nargs, h.credits[0], h.credits[1]]);
        ptr.add(4).cast::<u32>().write(arg);
    }
    COMPACT
}

/// The shape of a record written by [`encode`].
pub(super) struct Encoded {
    /// Bytes of the message holding only this record.
    pub(super) len: usize,
    /// Bytes of its header with its arguments, as [`append`] packs it.
    head: usize,
    nargs: usize,
    payload_len: usize,
}

/// A Medium payload of at most this many bytes moves next to its arguments when its
/// record starts a message ([`pack`]), so that the message does not carry the unused
/// space before [`HEADER`] (up to 64 bytes, a cache line more for MPI to move).
const PACK_MAX: usize = 256;

/// Writes the record header of `header` from `src` at the start of a claimed buffer,
/// whose Medium payload is already at [`HEADER`]: the buffer is then a message of one
/// record.
pub(super) fn encode(buf: &mut Buf, src: Rank, header: &AmHeader<'_>) -> Encoded {
    let nargs = header.args.len();
    let head = record_header(nargs);
    let inline = header.category == Category::Long && long_inline(header.nbytes);
    let (payload_at, payload_len) = if header.category == Category::Medium || inline {
        (HEADER, header.nbytes)
    } else {
        (head, 0)
    };
    let h = WireHeader {
        src,
        handler: header.handler,
        category: if inline {
            LONG_INLINE
        } else {
            header.category as u8
        },
        nargs: nargs as u8,
        nbytes: header.nbytes as u32,
        payload_at: payload_at as u16,
        dest_addr: header.dest_addr as u64,
        ..WireHeader::default()
    };
    let ptr = buf.ptr();
    // SAFETY: the buffer is aligned for and larger than a header with its arguments
    // (at most MAX_ARGS), which end before the payload at HEADER.
    unsafe {
        (ptr as *mut WireHeader).write(h);
        std::ptr::copy_nonoverlapping(header.args.as_ptr(), ptr.add(FIXED).cast(), nargs);
    }
    Encoded {
        len: payload_at + payload_len,
        head,
        nargs,
        payload_len,
    }
}

/// Moves the Medium payload of the record `rec` encoded in `buf` next to its arguments
/// if it has at most [`PACK_MAX`] bytes, for a message that starts with this record;
/// returns the message's length. A record appended to another message is copied there
/// packed anyway ([`append`]), so only a record that starts one is moved.
pub(super) fn pack(buf: &mut Buf, rec: &Encoded) -> usize {
    if rec.len == rec.head || rec.payload_len > PACK_MAX {
        return rec.len; // no Medium payload after room for more arguments, or a large one
    }
    let ptr = buf.ptr();
    // SAFETY: `encode` wrote the record's header at the start of the buffer and its
    // payload lies at HEADER; it moves (possibly overlapping itself) to where the
    // arguments end, before HEADER.
    unsafe {
        std::ptr::copy(ptr.add(HEADER), ptr.add(rec.head), rec.payload_len);
        (*(ptr as *mut WireHeader)).payload_at = rec.head as u16;
    }
    rec.head + rec.payload_len
}

/// Appends the record `rec` encoded in `from` to the message `to` of `len` bytes,
/// with its payload right after its arguments; returns the message's new length, or
/// `None` (and changes nothing) if the record does not fit.
pub(super) fn append(to: &mut Buf, len: usize, from: &Buf, rec: &Encoded) -> Option<usize> {
    let at = align(len);
    let end = at + rec.head + rec.payload_len;
    if end > MSG_SIZE {
        return None;
    }
    let (dst, src) = (to.ptr(), from.const_ptr());
    // SAFETY: both buffers hold MSG_SIZE bytes; the record ends inside `to` (checked),
    // its header, arguments and payload lie inside `from` (`encode`); `at` is a
    // multiple of ALIGN, so the header is aligned.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst.add(at), FIXED + 4 * rec.nargs);
        let h = &mut *(dst.add(at) as *mut WireHeader);
        h.payload_at = rec.head as u16;
        h.credits = [0; 2];
        std::ptr::copy_nonoverlapping(src.add(HEADER), dst.add(at + rec.head), rec.payload_len);
    }
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conduit::Network;

    fn header(category: Category, args: &[u32], nbytes: usize) -> AmHeader<'_> {
        AmHeader {
            handler: 7,
            category,
            network: Network::Reply,
            args,
            nbytes,
            dest_addr: if category == Category::Long { 4096 } else { 0 },
        }
    }

    /// Encodes `h` from rank 3 with `credits`, sends it as `send_msg` does, and parses
    /// what arrives: the length sent, the record and the credits read, and the buffer
    /// the record points into.
    fn round_trip(h: &AmHeader<'_>, credits: [u8; 2]) -> (usize, Option<Record>, [u8; 2], Buf) {
        let mut buf = Buf::new();
        // A Long payload too large for a message is not written into it.
        let payload = pattern(h.nbytes.min(MSG_SIZE - HEADER));
        // SAFETY: a claimed buffer holds MSG_SIZE - HEADER payload bytes.
        unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), buf.payload(), payload.len()) };
        let rec = encode(&mut buf, 3, h);
        let len = pack(&mut buf, &rec);
        set_credits(&mut buf, credits);
        let len = compact(&mut buf, len);
        // SAFETY: the buffer holds the `len` bytes sent.
        let record = unsafe { parse(buf.const_ptr(), 0, len, 3) };
        let credits = credits_of(&buf, len);
        (len, record, credits, buf)
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 1) as u8).collect()
    }

    fn credits_of(buf: &Buf, len: usize) -> [u8; 2] {
        credits(buf, len).expect("a message holds its credits")
    }

    fn args(r: &Record) -> Vec<u32> {
        // SAFETY: a parsed record's arguments lie in its buffer.
        unsafe { std::slice::from_raw_parts(r.args, r.nargs) }.to_vec()
    }

    #[test]
    fn a_short_with_at_most_one_argument_travels_in_eight_bytes() {
        for a in [&[][..], &[0xdead_beef]] {
            let (len, r, credits, _buf) = round_trip(&header(Category::Short, a, 0), [5, 9]);
            let r = r.expect("a compact record parses");
            assert_eq!(len, COMPACT);
            assert_eq!((r.src, r.handler, r.category), (3, 7, Category::Short));
            assert_eq!(args(&r), a);
            assert_eq!((r.nbytes, r.next), (0, COMPACT));
            assert_eq!(credits, [5, 9]);
        }
    }

    /// Other records keep their header; a Medium payload, or a Long one that fits a
    /// message, of at most [`PACK_MAX`] bytes follows the arguments, a larger one stays
    /// at [`HEADER`]; a Long payload too large for a message is not in its record.
    #[test]
    fn other_records_keep_their_header() {
        let cases = [
            (header(Category::Short, &[1, 2], 0), 32),
            (header(Category::Medium, &[], 0), 32),
            (header(Category::Medium, &[1], 16), 32 + 16),
            (header(Category::Medium, &[1; 9], 100), 64 + 100),
            (header(Category::Medium, &[1; 16], PACK_MAX), 96 + PACK_MAX),
            (
                header(Category::Medium, &[1], PACK_MAX + 1),
                HEADER + PACK_MAX + 1,
            ),
            (header(Category::Long, &[1], 64), 32 + 64),
            (header(Category::Long, &[1], MSG_SIZE - HEADER), MSG_SIZE),
            (header(Category::Long, &[1], MSG_SIZE - HEADER + 1), 32),
        ];
        for (h, want_len) in &cases {
            let (len, r, credits, _buf) = round_trip(h, [1, 2]);
            let r = r.expect("a record parses");
            let what = format!("{:?} with {} args", h.category, h.args.len());
            assert_eq!(len, *want_len, "{what}");
            assert_eq!((r.handler, r.category, r.nbytes), (7, h.category, h.nbytes));
            assert_eq!(args(&r), h.args);
            assert_eq!(credits, [1, 2]);
            let carried = h.category == Category::Medium || long_inline(h.nbytes);
            assert_eq!(
                r.long_inline,
                h.category == Category::Long && carried,
                "{what}"
            );
            if carried {
                // SAFETY: a parsed record's payload lies in its buffer.
                let got = unsafe { std::slice::from_raw_parts(r.payload, r.nbytes) };
                assert_eq!(got, pattern(h.nbytes), "{what}: payload");
            }
        }
    }

    /// Records appended to a message keep their arguments and payloads, packed or not.
    #[test]
    fn appended_records_keep_their_payloads() {
        let cases = [
            header(Category::Medium, &[5], 40),
            header(Category::Short, &[], 0),
            header(Category::Medium, &[6, 7], PACK_MAX + 9),
            header(Category::Long, &[8], 24),
            header(Category::Medium, &[], 3),
        ];
        let mut msg = Buf::new();
        let mut len = 0;
        for (i, h) in cases.iter().enumerate() {
            let mut buf = Buf::new();
            let payload = pattern(h.nbytes);
            // SAFETY: a claimed buffer holds MSG_SIZE - HEADER payload bytes.
            unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), buf.payload(), h.nbytes) };
            let rec = encode(&mut buf, 3, h);
            if i == 0 {
                len = pack(&mut buf, &rec);
                msg = buf;
            } else {
                len = append(&mut msg, len, &buf, &rec).expect("the records fit");
            }
        }
        let mut at = 0;
        for h in &cases {
            // SAFETY: the message holds `len` bytes.
            let r = unsafe { parse(msg.const_ptr(), at, len, 3) }.expect("a record parses");
            assert_eq!((r.category, r.nbytes), (h.category, h.nbytes));
            assert_eq!(args(&r), h.args);
            // SAFETY: as above.
            let got = unsafe { std::slice::from_raw_parts(r.payload, r.nbytes) };
            assert_eq!(got, pattern(h.nbytes));
            at = r.next;
        }
        assert_eq!(at, align(len));
    }

    #[test]
    fn a_compact_record_with_two_arguments_is_corrupt() {
        let mut buf = Buf::new();
        // SAFETY: the buffer holds MSG_SIZE bytes.
        unsafe { buf.ptr().cast::<[u8; 8]>().write([7, 2, 0, 0, 1, 0, 0, 0]) };
        // SAFETY: 8 bytes written.
        assert!(unsafe { parse(buf.const_ptr(), 0, COMPACT, 3) }.is_none());
    }
}
