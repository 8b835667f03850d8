//! A thread's trace buffer: records appended in the [record format](super::record) on
//! the hot path, decoded at the end.

use std::ffi::CStr;
use std::panic::Location;

use rustc_hash::FxHashMap;

use super::record::*;
use crate::events;
use crate::timer::{self, Ticks};
use crate::tool::{Arg, EventType, GPtr};

/// One thread's records.
pub(super) struct ThreadTrace {
    /// The chunk being filled.
    current: Vec<u64>,
    /// Full chunks, oldest first.
    full: Vec<Vec<u64>>,
    records: usize,
    limit: usize,
    pub(super) dropped: u64,
    /// Ticks of the previous record (of the thread's registration at first).
    last_ticks: Ticks,
    pub(super) start_ticks: Ticks,
    /// Each argument position's last value.
    prev: [[u64; 2]; MAX_ARGS],
    sites: Vec<Site>,
    site_index: FxHashMap<(usize, u64), u32>,
    /// (call-site address, meta, site + 1; 0: empty).
    cache: [(usize, u64, u32); SITE_CACHE],
    pub(super) strings: Vec<String>,
    /// An interval not written yet ([`ThreadTrace::defer`]).
    deferred: Option<Deferred>,
}

/// A library interval whose END named no arguments, written later.
#[derive(Clone, Copy)]
struct Deferred {
    location: &'static Location<'static>,
    tag: u32,
    start: Ticks,
    end: Ticks,
}

impl ThreadTrace {
    pub(super) fn new(limit: usize, buffer_words: usize) -> ThreadTrace {
        let now = timer::ticks_now();
        ThreadTrace {
            current: touched(buffer_words),
            full: Vec::new(),
            records: 0,
            limit,
            dropped: 0,
            last_ticks: now,
            start_ticks: now,
            prev: [[0; 2]; MAX_ARGS],
            sites: Vec::new(),
            site_index: FxHashMap::default(),
            cache: [(0, 0, 0); SITE_CACHE],
            strings: Vec::new(),
            deferred: None,
        }
    }

    /// Records an interval whose END named no arguments (a future wait's) later:
    /// before the thread's next record (so records stay in order), or at finish. Such
    /// an END is where the program resumes after waiting, usually on a round trip's
    /// critical path, and the next record usually comes when the program has sent its
    /// next message.
    #[inline(always)]
    pub(super) fn defer(
        &mut self,
        start: Ticks,
        end: Ticks,
        tag: u32,
        location: &'static Location<'static>,
    ) {
        self.flush();
        self.deferred = Some(Deferred {
            location,
            tag,
            start,
            end,
        });
    }

    /// Writes the deferred interval, if any, out of line.
    #[inline(always)]
    pub(super) fn flush(&mut self) {
        if self.deferred.is_some() {
            self.write_deferred();
        }
    }

    /// Writes the deferred interval, if any.
    #[cold]
    #[inline(never)]
    pub(super) fn write_deferred(&mut self) {
        if let Some(d) = self.deferred.take() {
            self.push(d.end, Some(d.start), d.tag, EventType::End, d.location, &[]);
        }
    }

    /// Appends a record of one event at `ticks`, or with `start`, of a whole interval:
    /// START at `start` and END at `ticks`, with the END's arguments (which repeat the
    /// START's; see the dispatcher's docs), recorded at the END. Such a record has an
    /// [`INTERVAL`] site and the interval's duration after its header, and decodes into
    /// the two events. The deferred interval, if any, is written first.
    #[inline(always)]
    pub(super) fn push(
        &mut self,
        ticks: Ticks,
        start: Option<Ticks>,
        tag: u32,
        ty: EventType,
        location: &'static Location<'static>,
        args: &[Arg<'_>],
    ) {
        self.flush();
        if self.records >= self.limit {
            self.dropped += 1 + u64::from(start.is_some());
            return;
        }
        if self.current.capacity() - self.current.len() < RECORD_MAX_WORDS {
            self.next_chunk();
        }
        let mut delta = ticks.wrapping_sub(self.last_ticks);
        if delta > DELTA_MAX {
            self.current.push(CLOCK);
            self.current.push(ticks);
            delta = 0;
        }
        self.last_ticks = ticks;
        self.records += 1 + usize::from(start.is_some());
        // The record goes straight into the chunk: its header first (written last, when
        // the site is known), an interval's duration, then the arguments that changed.
        let len = self.current.len();
        let record = &mut self.current.spare_capacity_mut()[..2 + 2 * MAX_ARGS];
        let (mut n, mut same, mut kinds) = (1, 0u64, 0u64);
        let mut ty = ty as u64;
        if let Some(start) = start {
            record[1].write(ticks.saturating_sub(start));
            n = 2;
            ty = INTERVAL;
        }
        let args = &args[..args.len().min(MAX_ARGS)];
        for (i, arg) in args.iter().enumerate() {
            let (kind, w) = match *arg {
                Arg::Int(v) => (K_INT, [i64::from(v) as u64, 0]),
                Arg::I64(v) => (K_INT, [v as u64, 0]),
                Arg::Size(v) | Arg::Bytes(v) | Arg::Ptr(v) => (K_UNSIGNED, [v as u64, 0]),
                Arg::Rank(v) => (K_UNSIGNED, [u64::from(v), 0]),
                Arg::Handle(v) | Arg::U64(v) => (K_UNSIGNED, [v, 0]),
                Arg::F64(v) => (K_FLOAT, [v.to_bits(), 0]),
                Arg::GPtr(g) => (K_GPTR, [u64::from(g.rank), g.addr]),
                Arg::Str(s) => (K_STR, [intern(&mut self.strings, s), 0]),
            };
            kinds |= kind << (3 * i);
            if w == self.prev[i] {
                same |= 1 << i;
            } else {
                self.prev[i] = w;
                record[n].write(w[0]);
                n += 1;
                if kind == K_GPTR {
                    record[n].write(w[1]);
                    n += 1;
                }
            }
        }
        let meta = u64::from(tag)
            | ty << META_TYPE
            | (args.len() as u64) << META_NARGS
            | kinds << META_KINDS;
        let site = self.site(location, meta);
        self.current.spare_capacity_mut()[0]
            .write(site | same << SAME_SHIFT | delta << DELTA_SHIFT);
        // SAFETY: the chunk had room for a record after `len` (checked above), and the
        // `n` words from `len` were just written: the header, then the duration and the
        // arguments.
        unsafe { self.current.set_len(len + n) };
    }

    /// The index of the site (location, meta).
    #[inline(always)]
    fn site(&mut self, location: &'static Location<'static>, meta: u64) -> u64 {
        let key = location as *const Location<'static> as usize;
        let slot = ((key >> 3) as u64 ^ meta).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
        let (k, m, site) = self.cache[slot as usize & (SITE_CACHE - 1)];
        if k == key && m == meta && site != 0 {
            return u64::from(site - 1);
        }
        self.site_slow(slot as usize & (SITE_CACHE - 1), location, meta)
    }

    #[cold]
    #[inline(never)]
    fn site_slow(&mut self, slot: usize, location: &'static Location<'static>, meta: u64) -> u64 {
        let key = location as *const Location<'static> as usize;
        let sites = &mut self.sites;
        let site = *self.site_index.entry((key, meta)).or_insert_with(|| {
            sites.push(Site { location, meta });
            sites.len() as u32 - 1
        });
        // Sites beyond the header's field all share its last value; a program does not
        // have a million call sites.
        let site = site.min(CLOCK as u32 - 1);
        self.cache[slot] = (key, meta, site + 1);
        u64::from(site)
    }

    #[cold]
    #[inline(never)]
    fn next_chunk(&mut self) {
        let chunk = std::mem::replace(&mut self.current, Vec::with_capacity(CHUNK_WORDS));
        if !chunk.is_empty() {
            self.full.push(chunk);
        }
    }

    /// The records, oldest first.
    pub(super) fn decode(&self) -> impl Iterator<Item = Record> + '_ {
        let mut words = self
            .full
            .iter()
            .chain(std::iter::once(&self.current))
            .flat_map(|c| c.iter().copied());
        let mut ticks = self.start_ticks;
        let mut prev = [[0u64; 2]; MAX_ARGS];
        // An interval's START takes the arguments its event's START names.
        let start_nargs: Vec<u8> = self
            .sites
            .iter()
            .map(|s| match events::by_tag(s.tag()) {
                Some(def) => def.start_arg_names().count().min(s.nargs()) as u8,
                None => s.nargs() as u8,
            })
            .collect();
        // The END of the interval whose START was returned last.
        let mut end: Option<Record> = None;
        std::iter::from_fn(move || {
            if let Some(end) = end.take() {
                return Some(end);
            }
            let mut header = words.next()?;
            if header & SITE_MASK == CLOCK {
                ticks = words.next()?;
                header = words.next()?;
            }
            ticks = ticks.wrapping_add(header >> DELTA_SHIFT);
            let site_index = (header & SITE_MASK) as usize;
            let site = self.sites[site_index];
            let duration = if site.interval() { words.next()? } else { 0 };
            let same = header >> SAME_SHIFT;
            let mut args = [Stored::U(0); MAX_ARGS];
            for (i, (arg, prev)) in args.iter_mut().zip(&mut prev).enumerate() {
                if i >= site.nargs() {
                    break;
                }
                let kind = site.kind(i);
                if same >> i & 1 == 0 {
                    prev[0] = words.next()?;
                    prev[1] = if kind == K_GPTR { words.next()? } else { 0 };
                }
                *arg = match kind {
                    K_INT => Stored::I(prev[0] as i64),
                    K_UNSIGNED => Stored::U(prev[0]),
                    K_FLOAT => Stored::F(f64::from_bits(prev[0])),
                    K_GPTR => Stored::G(GPtr {
                        rank: prev[0] as u32,
                        addr: prev[1],
                    }),
                    _ => Stored::S(prev[0] as u32),
                };
            }
            let record = Record {
                ticks,
                location: site.location,
                tag: site.tag(),
                ty: site.ty(),
                nargs: site.nargs() as u8,
                args,
            };
            if !site.interval() {
                return Some(record);
            }
            end = Some(record);
            Some(Record {
                ticks: ticks.wrapping_sub(duration),
                ty: EventType::Start,
                nargs: start_nargs[site_index],
                ..record
            })
        })
    }
}

/// An empty buffer of `words` words whose pages are already touched.
fn touched(words: usize) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::with_capacity(words);
    let bytes = words * std::mem::size_of::<u64>();
    #[cfg(target_os = "linux")]
    {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        let page = 4096;
        let start = (v.as_mut_ptr() as usize).next_multiple_of(page);
        let end = (v.as_mut_ptr() as usize + bytes) & !(page - 1);
        if end > start {
            // SAFETY: [start, end) lies inside the allocation `v` owns; populating pages
            // for writing changes no byte of it.
            let r = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, MADV_POPULATE_WRITE)
            };
            if r == 0 {
                return v;
            }
        }
    }
    // Older kernels: write a word of every page.
    for w in v.spare_capacity_mut().iter_mut().step_by(512) {
        w.write(0);
    }
    v
}

/// The index of a copy of `s` (a user event's string argument; cold: the runtime's
/// events have none, and a call on the hot path would make its loop spill).
#[cold]
#[inline(never)]
fn intern(strings: &mut Vec<String>, s: &CStr) -> u64 {
    strings.push(s.to_string_lossy().into_owned());
    strings.len() as u64 - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored_eq(a: &Stored, b: &Stored) -> bool {
        match (a, b) {
            (Stored::I(x), Stored::I(y)) => x == y,
            (Stored::U(x), Stored::U(y)) => x == y,
            (Stored::F(x), Stored::F(y)) => x.to_bits() == y.to_bits(),
            (Stored::G(x), Stored::G(y)) => x == y,
            (Stored::S(x), Stored::S(y)) => x == y,
            _ => false,
        }
    }

    #[test]
    fn records_decode_to_what_was_recorded() {
        // A small first buffer, so that records continue in further chunks.
        let mut t = ThreadTrace::new(usize::MAX, 64);
        let g = GPtr {
            rank: 3,
            addr: 0xdead_beef_0000,
        };
        let name = c"phase";
        let put = [Arg::Int(1), Arg::GPtr(g), Arg::Ptr(0x1000), Arg::Bytes(8)];
        let put_end = [
            Arg::Int(1),
            Arg::GPtr(g),
            Arg::Ptr(0x1000),
            Arg::Bytes(8),
            Arg::Handle(7),
        ];
        let user = [
            Arg::I64(-5),
            Arg::F64(2.5),
            Arg::Str(name),
            Arg::U64(u64::MAX),
        ];
        // (ticks, tag, type, arguments, which of `want`'s lists they decode to).
        let mut expected = Vec::new();
        let mut ticks = t.start_ticks;
        for i in 0..10_000u64 {
            let (tag, ty, args, want): (u32, EventType, &[Arg<'_>], usize) = match i % 5 {
                0 | 4 => (events::GASP_UPC_NB_PUT_INIT, EventType::Start, &put, 0),
                1 => (events::GASP_UPC_NB_PUT_INIT, EventType::End, &put_end, 1),
                2 => (events::USEREVT_START, EventType::Atomic, &user, 2),
                _ => (events::GASP_UPCXX_FUTURE_WAIT, EventType::End, &[], 3),
            };
            // Mostly small steps; now and then a gap too long for the header.
            ticks += if i % 1000 == 999 { 1 << 45 } else { i % 17 };
            if i % 5 == 4 {
                // A whole interval, recorded at its END with the END's arguments: it
                // decodes into its START, with the arguments the START names, and END.
                let start = ticks - i % 13;
                t.push(
                    ticks,
                    Some(start),
                    tag,
                    EventType::End,
                    Location::caller(),
                    &put_end,
                );
                expected.push((start, tag, EventType::Start, put.len(), 0));
                expected.push((ticks, tag, EventType::End, put_end.len(), 1));
            } else {
                t.push(ticks, None, tag, ty, Location::caller(), args);
                expected.push((ticks, tag, ty, args.len(), want));
            }
        }
        assert!(!t.full.is_empty(), "the records span several chunks");
        let decoded: Vec<Record> = t.decode().collect();
        assert_eq!(decoded.len(), expected.len());
        for (i, (r, &(ticks, tag, ty, nargs, want))) in decoded.iter().zip(&expected).enumerate() {
            assert_eq!(
                (r.ticks, r.tag, r.ty, r.nargs as usize),
                (ticks, tag, ty, nargs),
                "record {i}"
            );
            let want: Vec<Stored> = match want {
                0 => vec![Stored::I(1), Stored::G(g), Stored::U(0x1000), Stored::U(8)],
                1 => vec![
                    Stored::I(1),
                    Stored::G(g),
                    Stored::U(0x1000),
                    Stored::U(8),
                    Stored::U(7),
                ],
                2 => {
                    let Stored::S(s) = r.args[2] else {
                        panic!("a string argument decodes as a string")
                    };
                    assert_eq!(t.strings[s as usize], "phase");
                    vec![
                        Stored::I(-5),
                        Stored::F(2.5),
                        r.args[2],
                        Stored::U(u64::MAX),
                    ]
                }
                _ => vec![],
            };
            for (a, b) in r.args[..r.nargs as usize].iter().zip(&want) {
                assert!(stored_eq(a, b), "record {i}: {a:?} != {b:?}");
            }
            assert_eq!(r.location.file(), file!());
        }
    }

    #[test]
    fn a_deferred_interval_is_written_before_the_next_record_or_at_finish() {
        let mut t = ThreadTrace::new(usize::MAX, 64);
        let t0 = t.start_ticks;
        let (wait, barrier) = (events::GASP_UPCXX_FUTURE_WAIT, events::GASP_UPC_BARRIER);
        let here = Location::caller();
        t.defer(t0 + 1, t0 + 5, wait, here);
        // A second deferred interval writes the first, a record the second.
        t.defer(t0 + 6, t0 + 9, wait, here);
        t.push(t0 + 12, None, barrier, EventType::Start, here, &[]);
        t.defer(t0 + 13, t0 + 20, wait, here);
        assert_eq!(t.decode().count(), 5);
        // At finish.
        t.write_deferred();
        let got: Vec<_> = t.decode().map(|r| (r.ticks - t0, r.tag, r.ty)).collect();
        use EventType::{End, Start};
        assert_eq!(
            got,
            [
                (1, wait, Start),
                (5, wait, End),
                (6, wait, Start),
                (9, wait, End),
                (12, barrier, Start),
                (13, wait, Start),
                (20, wait, End),
            ]
        );
    }

    #[test]
    fn a_full_thread_drops_and_counts() {
        let mut t = ThreadTrace::new(3, 64);
        for i in 0..5 {
            t.push(
                t.start_ticks + i,
                None,
                events::GASP_UPC_BARRIER,
                EventType::Start,
                Location::caller(),
                &[],
            );
        }
        assert_eq!((t.decode().count(), t.dropped), (3, 2));
        // A dropped interval is two events.
        let end = t.start_ticks + 9;
        t.push(
            end,
            Some(end - 1),
            events::GASP_UPC_BARRIER,
            EventType::End,
            Location::caller(),
            &[],
        );
        assert_eq!((t.decode().count(), t.dropped), (3, 4));
    }
}
