//! Non-contiguous transfers (GASNet-EX "Vector/Indexed/Strided (VIS)"), with 1 to 4
//! ranks: every shape (vector, indexed, strided with 0 to 3 stride levels, transposes,
//! negative strides, overlapping sources) for put and get in each completion form
//! (Blocking, NB, NB with `GEX_FLAG_ENABLE_LEAF_LC`, NBI, NBI with the flag), checked
//! byte for byte against a reference written here. The degenerate cases and bad input
//! are in `vis_errors.rs`, the peer completion handler in `vis_peer.rs`.
mod common;

use common::pattern;
use common::vis::{init, region, Form, FORMS, GET_FORMS};
use gex::testing::spmd;
use gex::{Event, Flags, Memvec, Team};

#[derive(Clone, Debug)]
struct Shape {
    elemsz: usize,
    count: Vec<usize>,
    src: Vec<isize>,
    dst: Vec<isize>,
}

fn shape(elemsz: usize, count: &[usize], src: &[isize], dst: &[isize]) -> Shape {
    Shape {
        elemsz,
        count: count.to_vec(),
        src: src.to_vec(),
        dst: dst.to_vec(),
    }
}

impl Shape {
    /// The offsets of every element, as (source, destination), by plain enumeration of
    /// the index space.
    fn elements(&self) -> Vec<(isize, isize)> {
        let mut out = Vec::new();
        if self.elemsz == 0 || self.count.contains(&0) {
            return out;
        }
        let mut index = vec![0usize; self.count.len()];
        loop {
            let off = |strides: &[isize]| -> isize {
                index
                    .iter()
                    .zip(strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum()
            };
            out.push((off(&self.src), off(&self.dst)));
            let mut k = 0;
            loop {
                if k == index.len() {
                    return out;
                }
                index[k] += 1;
                if index[k] < self.count[k] {
                    break;
                }
                index[k] = 0;
                k += 1;
            }
        }
    }

    /// The extent `[lo, hi)` of one side's offsets.
    fn extent(&self, src: bool) -> (isize, isize) {
        let e = self.elements();
        let offs = e.iter().map(|&(s, d)| if src { s } else { d });
        let lo = offs.clone().min().unwrap_or(0);
        let hi = offs.max().unwrap_or(0) + self.elemsz as isize;
        (lo, hi)
    }

    /// The reference transfer: `dst` (its base at `dbase`) after copying from `src`
    /// (its base at `sbase`), element by element.
    fn apply(&self, src: &[u8], sbase: isize, dst: &mut [u8], dbase: isize) {
        for (s, d) in self.elements() {
            let (s, d) = ((sbase + s) as usize, (dbase + d) as usize);
            dst[d..d + self.elemsz].copy_from_slice(&src[s..s + self.elemsz]);
        }
    }
}

/// Every shape the strided tests move: 0 to 3 levels, folded and unfolded levels,
/// transposes, negative strides, overlapping sources, odd and large elements.
fn shapes() -> Vec<Shape> {
    vec![
        // stridelevels == 0: one contiguous copy; the strides are ignored.
        shape(13, &[], &[], &[]),
        // One level, contiguous on both sides.
        shape(8, &[16], &[8], &[8]),
        // One level gathering every third 4-byte element into a dense run.
        shape(4, &[10], &[12], &[4]),
        // 2-D sub-matrix: 5 of 10 columns, 4 rows, into a dense 5×4.
        shape(8, &[5, 4], &[8, 80], &[8, 40]),
        // 2-D transpose of a 7×5 matrix of doubles.
        shape(8, &[7, 5], &[8, 56], &[40, 8]),
        // Transpose of bytes, and of 3-byte elements (the generic copy).
        shape(1, &[9, 6], &[1, 9], &[6, 1]),
        shape(3, &[4, 5], &[3, 12], &[15, 3]),
        // Large elements, a reflection (negative destination stride).
        shape(40, &[3, 2], &[40, 120], &[-40, 120]),
        // 3-D with a permutation of the levels and a negative source stride.
        shape(2, &[3, 4, 2], &[2, -6, 24], &[16, 2, 48]),
        // 3-D dense on both sides except the outer level.
        shape(4, &[4, 3, 2], &[4, 16, 100], &[4, 16, 48]),
        // Overlapping sources (stride 0): one element broadcast to 6 places.
        shape(8, &[6], &[0], &[8]),
        // Levels of count 1 among others.
        shape(16, &[1, 3, 1], &[999, 16, -5], &[7, 32, 1]),
    ]
}

/// Where this writer's region starts in every target's segment.
/// "Strided Puts and Gets": every shape, put to and got from every rank in every form,
/// equals the reference byte for byte, and nothing around the destination changes.
#[test]
fn strided_every_shape_and_form() {
    for n in 1..=4 {
        spmd(n, || {
            let (client, team, _seg, bases) = init("VIS_STRIDED");
            let me = team.rank();
            for (i, sh) in shapes().iter().enumerate() {
                let (slo, shi) = sh.extent(true);
                let (dlo, dhi) = sh.extent(false);
                let (slen, dlen) = ((shi - slo) as usize, (dhi - dlo) as usize);
                for r in 0..team.size() {
                    let remote = bases[r as usize] + region(me);
                    for (f, form) in FORMS.into_iter().enumerate() {
                        let seed = (me as u64) << 40 | (r as u64) << 32 | (i * 8 + f) as u64;
                        // Put: the local source holds the shape with its base at -slo.
                        let src = pattern(seed, slen);
                        let before = pattern(!seed, dlen + 16);
                        team.put_blocking(r, remote, &before, Flags::NONE).unwrap();
                        let dst_addr = remote + 8 + (-dlo) as usize;
                        let base = (-slo) as usize;
                        let e = match form {
                            Form::Blocking => {
                                team.strided_put_blocking(
                                    r,
                                    dst_addr,
                                    &sh.dst,
                                    &src,
                                    base,
                                    &sh.src,
                                    sh.elemsz,
                                    &sh.count,
                                    form.flags(),
                                )
                                .unwrap();
                                None
                            }
                            // SAFETY: `src` lives until the sync below.
                            Form::Nb | Form::NbLeaf => Some(unsafe {
                                team.strided_put_nb(
                                    r,
                                    dst_addr,
                                    &sh.dst,
                                    &src,
                                    base,
                                    &sh.src,
                                    sh.elemsz,
                                    &sh.count,
                                    form.flags(),
                                )
                                .unwrap()
                            }),
                            Form::Nbi | Form::NbiLeaf => {
                                // SAFETY: as above.
                                unsafe {
                                    team.strided_put_nbi(
                                        r,
                                        dst_addr,
                                        &sh.dst,
                                        &src,
                                        base,
                                        &sh.src,
                                        sh.elemsz,
                                        &sh.count,
                                        form.flags(),
                                    )
                                }
                                .unwrap();
                                None
                            }
                        };
                        form.sync(e);
                        let mut expected = before.clone();
                        sh.apply(&src, -slo, &mut expected, 8 - dlo);
                        let mut got = vec![0u8; dlen + 16];
                        team.get_blocking(&mut got, r, remote, Flags::NONE).unwrap();
                        assert_eq!(got, expected, "put of shape {i} {sh:?} to {r}, {form:?}");
                    }
                    for form in GET_FORMS {
                        // Get: the remote source is the pattern, the local destination
                        // a buffer with its base at 8 - dlo.
                        let seed = (me as u64) << 40 | (r as u64) << 32 | 0xFF00 | i as u64;
                        let remote_data = pattern(seed, slen);
                        team.put_blocking(r, remote, &remote_data, Flags::NONE)
                            .unwrap();
                        let before = pattern(!seed, dlen + 16);
                        let mut dst = before.clone();
                        let src_addr = remote + (-slo) as usize;
                        let base = (8 - dlo) as usize;
                        let e = match form {
                            Form::Blocking => {
                                team.strided_get_blocking(
                                    &mut dst,
                                    base,
                                    &sh.dst,
                                    r,
                                    src_addr,
                                    &sh.src,
                                    sh.elemsz,
                                    &sh.count,
                                    Flags::NONE,
                                )
                                .unwrap();
                                None
                            }
                            // SAFETY: `dst` is not touched until the sync below.
                            Form::Nb => Some(unsafe {
                                team.strided_get_nb(
                                    &mut dst,
                                    base,
                                    &sh.dst,
                                    r,
                                    src_addr,
                                    &sh.src,
                                    sh.elemsz,
                                    &sh.count,
                                    Flags::NONE,
                                )
                                .unwrap()
                            }),
                            _ => {
                                // SAFETY: as above.
                                unsafe {
                                    team.strided_get_nbi(
                                        &mut dst,
                                        base,
                                        &sh.dst,
                                        r,
                                        src_addr,
                                        &sh.src,
                                        sh.elemsz,
                                        &sh.count,
                                        Flags::NONE,
                                    )
                                }
                                .unwrap();
                                None
                            }
                        };
                        form.sync(e);
                        let mut expected = before;
                        sh.apply(&remote_data, -slo, &mut expected, 8 - dlo);
                        assert_eq!(dst, expected, "get of shape {i} {sh:?} from {r}, {form:?}");
                    }
                }
            }
            team.barrier();
            client.finalize();
        });
    }
}

/// A vector or indexed description: the local pieces' lengths and the remote ranges
/// (offsets in the writer's region).
struct Lists {
    local: Vec<usize>,
    remote: Vec<(usize, usize)>,
}

/// Vector shapes: lists cut differently, zero-length entries on both sides, ranges out
/// of order.
fn vector_cases() -> Vec<Lists> {
    let l = |local: &[usize], remote: &[(usize, usize)]| Lists {
        local: local.to_vec(),
        remote: remote.to_vec(),
    };
    vec![
        l(&[5], &[(0, 5)]),
        l(&[3, 0, 5, 8], &[(100, 7), (0, 0), (40, 9)]),
        l(&[1; 20], &[(1000, 4), (10, 16)]),
        l(&[64, 0, 0, 1], &[(300, 1), (200, 64)]),
        l(&[0, 0], &[(0, 0)]),
        l(&[], &[]),
    ]
}

/// `count` remote blocks of `len` bytes in a scrambled order over a strided layout.
fn indexed_offsets(count: usize, len: usize) -> Vec<usize> {
    (0..count).map(|i| ((i * 7) % count) * (len + 3)).collect()
}

/// The vector and indexed calls of one form; `put` or get.
#[allow(clippy::too_many_arguments)]
fn list_op(
    team: &Team,
    form: Form,
    put: bool,
    indexed: Option<usize>,
    r: u32,
    remote: &[(usize, usize)],
    local: &mut [Vec<u8>],
) -> Option<Event> {
    let memvecs: Vec<Memvec> = remote.iter().map(|&(a, n)| Memvec::new(a, n)).collect();
    let addrs: Vec<usize> = remote.iter().map(|&(a, _)| a).collect();
    let f = form.flags();
    // SAFETY: (NB and NBI) `local` lives until `form.sync`, and a get's pieces are not
    // touched before it.
    unsafe {
        match (put, indexed, form) {
            (true, None, Form::Blocking) => team
                .vector_put_blocking(r, &memvecs, local, f)
                .ok()
                .map(|_| None),
            (true, None, Form::Nb | Form::NbLeaf) => {
                team.vector_put_nb(r, &memvecs, local, f).ok().map(Some)
            }
            (true, None, _) => team
                .vector_put_nbi(r, &memvecs, local, f)
                .ok()
                .map(|_| None),
            (false, None, Form::Blocking) => team
                .vector_get_blocking(local, r, &memvecs, f)
                .ok()
                .map(|_| None),
            (false, None, Form::Nb) => team.vector_get_nb(local, r, &memvecs, f).ok().map(Some),
            (false, None, _) => team
                .vector_get_nbi(local, r, &memvecs, f)
                .ok()
                .map(|_| None),
            (true, Some(n), Form::Blocking) => team
                .indexed_put_blocking(r, &addrs, n, local, f)
                .ok()
                .map(|_| None),
            (true, Some(n), Form::Nb | Form::NbLeaf) => {
                team.indexed_put_nb(r, &addrs, n, local, f).ok().map(Some)
            }
            (true, Some(n), _) => team
                .indexed_put_nbi(r, &addrs, n, local, f)
                .ok()
                .map(|_| None),
            (false, Some(n), Form::Blocking) => team
                .indexed_get_blocking(local, r, &addrs, n, f)
                .ok()
                .map(|_| None),
            (false, Some(n), Form::Nb) => {
                team.indexed_get_nb(local, r, &addrs, n, f).ok().map(Some)
            }
            (false, Some(n), _) => team
                .indexed_get_nbi(local, r, &addrs, n, f)
                .ok()
                .map(|_| None),
        }
    }
    .expect("no IMMEDIATE flag: never NoOp")
}

/// "Vector and Indexed Puts and Gets": both lists are one stream of bytes in list
/// order; every case, to and from every rank, in every form, equals the reference.
#[test]
fn vector_and_indexed_every_form() {
    for n in 1..=4 {
        spmd(n, || {
            let (client, team, _seg, bases) = init("VIS_LISTS");
            let me = team.rank();
            let mut cases: Vec<(Option<usize>, Lists)> =
                vector_cases().into_iter().map(|c| (None, c)).collect();
            // Indexed: 64 blocks of 64 bytes; 32 remote blocks of 16 from 16 local of
            // 32; a list of blocks of length zero; and 600 blocks of 8 and 150 of 40,
            // more small runs than one message carries to a rank of another host (the
            // mpi conduit gathers them into messages of runs).
            for (count, len, lcount, llen) in [
                (64, 64, 64, 64),
                (32, 16, 16, 32),
                (5, 0, 3, 0),
                (600, 8, 600, 8),
                (150, 40, 50, 120),
            ] {
                let remote = indexed_offsets(count, len)
                    .into_iter()
                    .map(|a| (a, len))
                    .collect();
                cases.push((
                    Some(len),
                    Lists {
                        local: vec![llen; lcount],
                        remote,
                    },
                ));
            }
            for (i, (indexed, case)) in cases.iter().enumerate() {
                for r in 0..team.size() {
                    let base = bases[r as usize] + region(me);
                    let remote: Vec<(usize, usize)> =
                        case.remote.iter().map(|&(a, n)| (base + a, n)).collect();
                    let span = case.remote.iter().map(|&(a, n)| a + n).max().unwrap_or(0) + 8;
                    for (f, form) in FORMS.into_iter().enumerate() {
                        let seed = (me as u64) << 40 | (r as u64) << 32 | (i * 8 + f) as u64;
                        // Put, then read the region back.
                        let before = pattern(!seed, span);
                        team.put_blocking(r, base, &before, Flags::NONE).unwrap();
                        let mut local: Vec<Vec<u8>> = case
                            .local
                            .iter()
                            .enumerate()
                            .map(|(k, &len)| pattern(seed + k as u64, len))
                            .collect();
                        let stream: Vec<u8> = local.concat();
                        let e = list_op(&team, form, true, *indexed, r, &remote, &mut local);
                        form.sync(e);
                        let mut expected = before.clone();
                        let mut at = 0;
                        for &(a, len) in &case.remote {
                            expected[a..a + len].copy_from_slice(&stream[at..at + len]);
                            at += len;
                        }
                        let mut got = vec![0u8; span];
                        team.get_blocking(&mut got, r, base, Flags::NONE).unwrap();
                        assert_eq!(got, expected, "put case {i} to {r}, {form:?}");
                        if matches!(form, Form::NbLeaf | Form::NbiLeaf) {
                            continue; // the flag is for puts
                        }
                        // Get the same ranges back into pieces cut as the local list.
                        let mut pieces: Vec<Vec<u8>> =
                            case.local.iter().map(|&len| vec![0xEE; len]).collect();
                        let e = list_op(&team, form, false, *indexed, r, &remote, &mut pieces);
                        form.sync(e);
                        assert_eq!(pieces.concat(), stream, "get case {i} from {r}, {form:?}");
                    }
                }
            }
            team.barrier();
            client.finalize();
        });
    }
}

/// A blocking vector get by messages (from a rank of another host) that unwinds
/// part-way (a Reply handler's panic, caught by the program) waits for the runs it
/// asked for before it unwinds: no byte lands in the buffers afterwards. On shared
/// memory the runs are copied at once, with nothing to unwind.
#[test]
fn a_blocking_get_of_runs_unwinding_waits_for_its_answers() {
    const RUNS: usize = 10_000;
    const LEN: usize = 16;
    spmd(2, || {
        common::quiet_expected_panics();
        let (client, ep, team) = gex::Client::init("VIS_UNWIND", Flags::NONE).unwrap();
        let boom = common::am::PanickingReply::register(&ep);
        let size = (RUNS * LEN).next_multiple_of(gex::PAGE_SIZE);
        let seg = gex::Segment::attach(&team, size).unwrap();
        let me = team.rank();
        let data = pattern(7, RUNS * LEN);
        if me == 1 {
            // SAFETY: this rank's own segment, before anyone reads it.
            unsafe { std::slice::from_raw_parts_mut(seg.addr(), data.len()) }
                .copy_from_slice(&data);
        }
        team.barrier();
        if me == 0 {
            let base = team.segment_bound(1).unwrap().owner_addr;
            // Every other run of the other rank's data: one run each.
            let src: Vec<Memvec> = (0..RUNS / 2)
                .map(|i| Memvec {
                    addr: base + 2 * i * LEN,
                    len: LEN,
                })
                .collect();
            let mut bufs = vec![[0u8; LEN]; RUNS / 2];
            boom.ask(&team, 1);
            let panic = common::try_panic_message(|| {
                team.vector_get_blocking(&mut bufs, 1, &src, Flags::NONE)
            });
            match panic {
                None => {
                    for (i, b) in bufs.iter().enumerate() {
                        assert_eq!(&b[..], &data[2 * i * LEN..(2 * i + 1) * LEN]);
                    }
                    // The panicking Reply still comes: catch it here.
                    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while common::try_panic_message(gex::poll).is_none() {
                        assert!(std::time::Instant::now() < end, "the Reply never came");
                    }
                }
                Some(m) => {
                    assert!(m.contains(common::am::BOOM), "{m}");
                    let unwound = bufs.clone();
                    let end = std::time::Instant::now() + std::time::Duration::from_millis(200);
                    while std::time::Instant::now() < end {
                        gex::poll();
                    }
                    assert!(bufs == unwound, "bytes landed after the get unwound");
                }
            }
        }
        team.barrier();
        client.finalize();
    });
}
