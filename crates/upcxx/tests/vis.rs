//! Non-contiguous one-sided communication (UPC++ spec ch. 15), with 1 to 4 ranks:
//! strided puts and gets of 0 to 3 dimensions, translational and transposing
//! (§15.2.6–7); irregular and regular puts and gets over iterators of several kinds
//! (§15.2.1–5), with zero counts; every completion kind of ch. 7 each call provides;
//! bad input; the same calls with local runs lent beyond the call (the `_lent` forms).
mod common;
use common::{all_gather, panic_text};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use upcxx::{
    current_persona, delete_array, new_array, operation_cx, progress, rank_me, rank_n, remote_cx,
    source_cx, GlobalPtr, ProgressLevel, Promise,
};

/// The reference of a strided transfer: for every index below `extents`, the element
/// at byte offset `dot(i, src_strides)` from `src_base` (element index) of `src` goes
/// to byte offset `dot(i, dst_strides)` from `dst_base` of `dst`.
fn reference<const D: usize>(
    src: &[u64],
    src_base: usize,
    src_strides: [isize; D],
    dst: &mut [u64],
    dst_base: usize,
    dst_strides: [isize; D],
    extents: [usize; D],
) {
    let total: usize = extents.iter().product();
    for mut k in 0..total {
        let (mut s, mut d) = (src_base as isize * 8, dst_base as isize * 8);
        for j in 0..D {
            let i = (k % extents[j]) as isize;
            k /= extents[j];
            s += i * src_strides[j];
            d += i * dst_strides[j];
        }
        dst[(d / 8) as usize] = src[(s / 8) as usize];
    }
}

/// Reads `n` elements of a remote array with a contiguous `rget_into`.
fn fetch(gp: GlobalPtr<u64>, n: usize) -> Vec<u64> {
    let mut v = vec![0; n];
    upcxx::rget_into(gp, &mut v).wait();
    v
}

const N: usize = 512;

/// One strided case: put `src` around `src_base` into the target array around
/// `dst_base`, compare the whole array with the reference; then get it back around a
/// local base and compare again.
fn strided_case<const D: usize>(
    target: GlobalPtr<u64>,
    seed: u64,
    (src_base, src_strides): (usize, [isize; D]),
    (dst_base, dst_strides): (usize, [isize; D]),
    extents: [usize; D],
) {
    let src: Vec<u64> = (0..N as u64).map(|i| seed * 10_000 + i).collect();
    let before: Vec<u64> = (0..N as u64).map(|i| !i).collect();
    upcxx::rput_slice(&before, target).wait();
    upcxx::rput_strided(
        &src,
        src_base,
        src_strides,
        target.add(dst_base),
        dst_strides,
        extents,
    )
    .wait();
    let mut expected = before.clone();
    reference(
        &src,
        src_base,
        src_strides,
        &mut expected,
        dst_base,
        dst_strides,
        extents,
    );
    assert_eq!(
        fetch(target, N),
        expected,
        "put {D}-D {extents:?} {src_strides:?} {dst_strides:?}"
    );
    // Get: the remote array is `src` now; read the same shape back into a local buffer.
    upcxx::rput_slice(&src, target).wait();
    let mut local = before.clone();
    upcxx::rget_strided(
        target.add(src_base),
        src_strides,
        &mut local,
        dst_base,
        dst_strides,
        extents,
    )
    .wait();
    let mut expected = before;
    reference(
        &src,
        src_base,
        src_strides,
        &mut expected,
        dst_base,
        dst_strides,
        extents,
    );
    assert_eq!(
        local, expected,
        "get {D}-D {extents:?} {src_strides:?} {dst_strides:?}"
    );
}

/// §15.2.6–7: translational and transposing copies of 0 to 3 dimensions, negative and
/// zero source strides, zero extents, to and from every rank.
#[test]
fn strided_every_dimension_and_transpose() {
    for n in 1..=4 {
        gex::testing::spmd(n, || {
            upcxx::init();
            // Each writer has a region of N elements of every rank's array.
            let mine: GlobalPtr<u64> = new_array(N * rank_n() as usize);
            let all = all_gather(&mine);
            for (r, &array) in all.iter().enumerate() {
                let target = array.add(rank_me() as usize * N);
                let seed = u64::from(rank_me()) * 10 + r as u64;
                // Dim 0: one element (¶3).
                strided_case::<0>(target, seed, (5, []), (9, []), []);
                // 1-D: every third element into a dense run; a reversal; a broadcast of
                // one element (zero source stride); zero extent.
                strided_case::<1>(target, seed, (0, [24]), (4, [8]), [20]);
                strided_case::<1>(target, seed, (40, [-8]), (0, [8]), [41]);
                strided_case::<1>(target, seed, (7, [0]), (100, [8]), [9]);
                strided_case::<1>(target, seed, (0, [8]), (0, [8]), [0]);
                // 2-D: a sub-block (rows of 16, 5 of 6 columns, 4 rows), and the
                // transpose of a 12×7 matrix.
                strided_case::<2>(target, seed, (3, [8, 128]), (0, [8, 40]), [5, 4]);
                strided_case::<2>(target, seed, (0, [8, 96]), (10, [56, 8]), [12, 7]);
                // 3-D: a permutation of the axes (a 4×3×2 block into 2×4×3 order).
                strided_case::<3>(target, seed, (0, [8, 32, 96]), (1, [48, 16, 8]), [4, 3, 2]);
                // 3-D with a zero extent: nothing moves.
                strided_case::<3>(target, seed, (0, [8, 32, 96]), (0, [8, 32, 96]), [4, 0, 2]);
            }
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}

/// §15.2.1–5: irregular and regular transfers take iterators of any kind (arrays,
/// vectors by value and by reference, adapters), runs of any integer length type, and
/// empty sequences or zero-length runs; the runs of each side are one stream.
#[test]
fn irregular_and_regular_over_any_iterators() {
    for n in 1..=4 {
        gex::testing::spmd(n, || {
            upcxx::init();
            let mine: GlobalPtr<u64> = new_array(N * rank_n() as usize);
            let all = all_gather(&mine);
            for &array in &all {
                let t = array.add(rank_me() as usize * N);
                let zero = vec![0u64; N];
                upcxx::rput_slice(&zero, t).wait();
                // Irregular put: 3 local runs (one empty) into 4 remote runs (one of
                // zero length), cut differently; lengths as u32.
                let a: Vec<u64> = (1..=5).collect();
                let b: Vec<u64> = (6..=12).collect();
                let src = vec![&a[..], &[][..], &b[..]];
                let dst = [
                    (t.add(100), 3u32),
                    (t.add(10), 0),
                    (t.add(0), 4),
                    (t.add(50), 5),
                ];
                upcxx::rput_irregular(src, dst).wait();
                let got = fetch(t, N);
                assert_eq!(got[100..103], [1, 2, 3]);
                assert_eq!(got[0..4], [4, 5, 6, 7]);
                assert_eq!(got[50..55], [8, 9, 10, 11, 12]);
                assert_eq!(got.iter().filter(|&&v| v != 0).count(), 12);
                // Irregular get by reference over a Vec of pairs, into chunks of a
                // buffer (an iterator adapter), lengths as i64.
                let runs: Vec<(GlobalPtr<u64>, i64)> = vec![(t.add(50), 5), (t.add(100), 3)];
                let mut back = [0u64; 8];
                upcxx::rget_irregular(runs.iter(), back.chunks_mut(4)).wait();
                assert_eq!(back, [8, 9, 10, 11, 12, 1, 2, 3]);
                // Regular put: 4 local runs of 3 into 6 remote runs of 2, from a map.
                let values: Vec<u64> = (100..112).collect();
                let starts = (0..6).map(|k| t.add(200 + 10 * k));
                upcxx::rput_regular(values.chunks(3), 3, starts, 2).wait();
                let got = fetch(t, N);
                for k in 0..6 {
                    let at = 200 + 10 * k;
                    assert_eq!(got[at..at + 2], [100 + 2 * k as u64, 101 + 2 * k as u64]);
                    assert_eq!(got[at + 2], 0);
                }
                // Regular get: 3 remote runs of 4 (a plain array of pointers) into 2
                // local runs of 6 (Vecs, by mutable reference).
                let mut outs = [vec![0u64; 6], vec![0u64; 6]];
                let starts = [t.add(200), t.add(210), t.add(220)];
                upcxx::rget_regular(starts, 4, outs.iter_mut(), 6).wait();
                assert_eq!(
                    outs.concat(),
                    [100, 101, 0, 0, 102, 103, 0, 0, 104, 105, 0, 0]
                );
                // Zero counts: empty sequences, and runs of length zero.
                let none: [(GlobalPtr<u64>, usize); 0] = [];
                upcxx::rput_irregular(Vec::<&[u64]>::new(), none).wait();
                upcxx::rget_irregular(none, Vec::<&mut [u64]>::new()).wait();
                upcxx::rput_regular([&[][..]; 3], 0, [t, t.add(1)], 0).wait();
                upcxx::rget_regular(std::iter::empty(), 4, Vec::<&mut [u64]>::new(), 2).wait();
                assert_eq!(fetch(t, N), got, "a zero-count call wrote");
            }
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}

static RPC_OK: AtomicU64 = AtomicU64::new(0);
static RPC_BAD: AtomicU64 = AtomicU64::new(0);

/// A remote completion: the values `first..first+count` must be at `at` when it runs.
fn landed(at: GlobalPtr<u64>, count: u64, first: u64) {
    let ok = (0..count as usize).all(|i| {
        // SAFETY: written by the put this completes; nobody writes it again.
        unsafe { at.add(i).local().read_volatile() == first + i as u64 }
    });
    if ok && at.where_() == rank_me() {
        RPC_OK.fetch_add(1, Ordering::SeqCst);
    } else {
        RPC_BAD.fetch_add(1, Ordering::SeqCst);
    }
}

/// Ch. 7 through ch. 15: puts notify source and operation completion as futures,
/// promises and LPCs, and remote completion as an RPC that finds the data in place;
/// gets notify operation completion as a future, a promise and an LPC. Notifications
/// wait for user-level progress (§7.1 ¶14).
#[test]
fn completions_of_every_kind() {
    for n in [1, 3] {
        gex::testing::spmd(n, || {
            upcxx::init();
            let mine: GlobalPtr<u64> = new_array(N);
            let all = all_gather(&mine);
            let me = u64::from(rank_me());
            let next = all[((rank_me() + 1) % rank_n()) as usize];
            let lpcs = Arc::new(AtomicU64::new(0));
            let first = me * 1000;
            let vals: Vec<u64> = (first..first + 8).collect();
            let p = Promise::<()>::new();
            let (l1, l2) = (lpcs.clone(), lpcs.clone());
            let (src_done, op_done) = upcxx::rput_strided_with(
                &vals,
                0,
                [8],
                next,
                [16],
                [8],
                source_cx::as_future()
                    | operation_cx::as_future()
                    | source_cx::as_lpc(&current_persona(), move || {
                        l1.fetch_add(1, Ordering::SeqCst);
                    })
                    | operation_cx::as_promise(&p)
                    | operation_cx::as_lpc(&current_persona(), move || {
                        l2.fetch_add(10, Ordering::SeqCst);
                    })
                    | remote_cx::as_rpc(landed, (next.add(100), 0u64, 0u64)),
            );
            assert!(!op_done.ready(), "notified before user-level progress");
            src_done.wait();
            op_done.wait();
            p.finalize().wait();
            while lpcs.load(Ordering::SeqCst) < 11 {
                progress(ProgressLevel::User);
            }
            // Remote completion alone (the call returns ()), for irregular and regular.
            let () = upcxx::rput_irregular_with(
                [&vals[..4]],
                [(next.add(200), 4usize)],
                remote_cx::as_rpc(landed, (next.add(200), 4u64, first)),
            );
            let () = upcxx::rput_regular_with(
                vals.chunks(2),
                2,
                (0..4).map(|k| next.add(300 + 2 * k)),
                2,
                remote_cx::as_rpc(landed, (next.add(300), 8u64, first)),
            );
            // `as_buffered` and `as_blocking` source completion (§7.2.1): the source may be
            // reused as soon as the call returns.
            let mut reused = vals.clone();
            let done = upcxx::rput_strided_with(
                &reused,
                0,
                [8],
                next.add(400),
                [8],
                [8],
                source_cx::as_buffered() | operation_cx::as_future(),
            );
            reused.fill(0);
            done.wait();
            let done = upcxx::rput_regular_with(
                [&vals[..]],
                8,
                [next.add(420)],
                8,
                source_cx::as_blocking() | operation_cx::as_future(),
            );
            done.wait();
            assert_eq!(fetch(next.add(400), 8), vals);
            assert_eq!(fetch(next.add(420), 8), vals);
            // Gets: a future, a promise and an LPC.
            let q = Promise::<()>::new();
            let l3 = lpcs.clone();
            let mut back = [0u64; 8];
            let got = upcxx::rget_strided_with(
                next,
                [16],
                &mut back,
                0,
                [8],
                [8],
                operation_cx::as_future()
                    | operation_cx::as_promise(&q)
                    | operation_cx::as_lpc(&current_persona(), move || {
                        l3.fetch_add(100, Ordering::SeqCst);
                    }),
            );
            got.wait();
            q.finalize().wait();
            assert_eq!(back.to_vec(), vals);
            let mut pieces = [[0u64; 2]; 2];
            upcxx::rget_irregular_with(
                [(next.add(200), 4usize)],
                pieces.iter_mut(),
                operation_cx::as_future(),
            )
            .wait();
            assert_eq!(pieces.concat(), vals[..4]);
            let mut one = [0u64; 8];
            upcxx::rget_regular_with(
                [next.add(300)],
                8,
                [&mut one[..]],
                8,
                operation_cx::as_future(),
            )
            .wait();
            assert_eq!(one.to_vec(), vals);
            while lpcs.load(Ordering::SeqCst) < 111 || RPC_OK.load(Ordering::SeqCst) < 3 {
                progress(ProgressLevel::User);
            }
            assert_eq!(RPC_BAD.load(Ordering::SeqCst), 0);
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}

/// Bad input fails naming the call before anything moves: remote runs on two
/// processes, a null pointer, totals that differ, a regular run of the wrong length, a
/// negative run length, a stride that misaligns `T` (one of a dimension of extent 1
/// misaligns nothing), a shape outside the segment.
#[test]
fn bad_input_fails_naming_the_call() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let mine: GlobalPtr<u64> = new_array(16);
        let all = all_gather(&mine);
        let (a, b) = (all[0], all[1]);
        let zero = [0u64; 16];
        upcxx::rput_slice(&zero, mine).wait();
        upcxx::barrier();
        let src = [7u64; 16];
        let null = GlobalPtr::<u64>::null();
        let msg = panic_text(|| drop(upcxx::rput_irregular([&src[..2]], [(a, 1usize), (b, 1)])));
        assert!(
            msg.starts_with(
                "upcxx::rput_irregular: the remote runs have affinity to ranks 0 and 1"
            ),
            "{msg}"
        );
        let msg = panic_text(|| drop(upcxx::rget_regular([a, b], 1, [[0u64; 1]; 2].iter_mut(), 1)));
        assert!(
            msg.starts_with("upcxx::rget_regular: the remote runs have affinity"),
            "{msg}"
        );
        let msg = panic_text(|| drop(upcxx::rput_irregular([&src[..1]], [(null, 1usize)])));
        assert!(
            msg.contains("upcxx::rput_irregular: a run of the remote sequence starts at a null"),
            "{msg}"
        );
        let msg = panic_text(|| drop(upcxx::rput_irregular([&src[..3]], [(mine, 2usize)])));
        assert!(
            msg.contains(
                "upcxx::rput_irregular: the source runs hold 3 elements and the destination runs 2"
            ),
            "{msg}"
        );
        let msg = panic_text(|| drop(upcxx::rput_regular([&src[..3], &src[..2]], 3, [mine], 5)));
        assert!(
            msg.contains("upcxx::rput_regular: a local run has 2 elements"),
            "{msg}"
        );
        let msg = panic_text(|| drop(upcxx::rget_irregular([(mine, -1i32)], [&mut [0u64; 1][..]])));
        assert!(
            msg.contains("upcxx::rget_irregular: a run length is negative"),
            "{msg}"
        );
        let msg = panic_text(|| drop(upcxx::rput_strided(&src, 0, [4], mine, [8], [2])));
        assert!(
            msg.contains("upcxx::rput_strided: the stride of 4 bytes is not a multiple"),
            "{msg}"
        );
        // A dimension of extent 1 never steps: its stride may be anything.
        let values = [1u64, 2, 3, 4];
        upcxx::rput_strided(&values, 1, [8, 3], mine, [8, 5], [2, 1]).wait();
        let mut got = [0u64; 2];
        upcxx::rget_strided(mine, [-3, 8], &mut got, 0, [1, 8], [1, 2]).wait();
        assert_eq!(got, [2, 3]);
        upcxx::rput_slice(&zero, mine).wait();
        // A shape of no element names no remote memory: a null base is fine there.
        upcxx::rput_strided(&values, 0, [8, 8], null, [8, 8], [2, 0]).wait();
        upcxx::rget_strided(null, [8], &mut got, 0, [8], [0]).wait();
        assert_eq!(got, [2, 3], "a get of no element wrote");
        let msg = panic_text(|| drop(upcxx::rget_strided(null, [8], &mut [0u64; 2], 0, [8], [2])));
        assert_eq!(msg, "upcxx::rget_strided: the global pointer is null");
        // Past the end of the 16-element array's segment: gex names the range.
        let msg = panic_text(|| drop(upcxx::rput_strided(&src, 0, [8], mine, [1 << 30], [2])));
        assert!(
            msg.contains("gex::Team::strided_put_nb") && msg.contains("outside the segment"),
            "{msg}"
        );
        // A local shape leaving its slice.
        let msg = panic_text(|| drop(upcxx::rput_strided(&src, 10, [8], mine, [8], [8])));
        assert!(msg.contains("local shape spans"), "{msg}");
        assert_eq!(fetch(mine, 16), zero, "a refused call wrote");
        assert!(!upcxx::progress_required());
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

/// Ch. 15's calls with local runs lent beyond the call (`vis/lent.rs`): every shape put
/// to and got from every rank, all in flight together (runs of a few words, which
/// travel in messages between hosts, and one of 4.8 KiB, which takes the window), with
/// source completion before the source is overwritten, futures and a promise; then
/// their errors, which leave nothing in flight.
#[test]
fn lent_runs_land_by_their_completions() {
    const BLOCK: usize = 12;
    const LONG: usize = 600;
    // A region per writer in every rank's array: a BLOCK×BLOCK block, then LONG words,
    // then 4 runs of 5 words 8 apart.
    const REGION: usize = BLOCK * BLOCK + LONG + 32;
    fn value(from: usize, to: usize, i: usize) -> u64 {
        0x1e_0000_0000 | (from as u64) << 24 | (to as u64) << 16 | i as u64
    }
    for ranks in [1, 2, 3, 5] {
        gex::testing::spmd(ranks, || {
            upcxx::init();
            let (me, n) = (rank_me() as usize, rank_n() as usize);
            let mine: GlobalPtr<u64> = new_array(n * REGION);
            let all = all_gather(&mine);
            let region = |r: usize| all[r].add(me * REGION);
            // Every source for every target, kept until its source completion.
            let mut blocks: Vec<Vec<u64>> = (0..n)
                .map(|r| (0..BLOCK * BLOCK).map(|i| value(me, r, i)).collect())
                .collect();
            let longs: Vec<Vec<u64>> = (0..n)
                .map(|r| (0..LONG).map(|i| value(me, r, 1000 + i)).collect())
                .collect();
            let shorts: Vec<Vec<u64>> = (0..n)
                .map(|r| (0..20).map(|i| value(me, r, 2000 + i)).collect())
                .collect();
            let mut sent = Vec::new();
            let mut done = Vec::new();
            for r in 0..n {
                // SAFETY: the sources are neither written nor dropped before their
                // source futures are ready.
                let (s, d) = unsafe {
                    upcxx::rput_strided_lent_with::<2, u64, _>(
                        &blocks[r],
                        0,
                        [8, 8 * BLOCK as isize],
                        region(r),
                        [8 * BLOCK as isize, 8],
                        [BLOCK, BLOCK],
                        source_cx::as_future() | operation_cx::as_future(),
                    )
                };
                sent.push(s);
                done.push(d);
                // SAFETY: as above.
                done.push(unsafe {
                    upcxx::rput_irregular_lent(
                        [&longs[r][..]],
                        [(region(r).add(BLOCK * BLOCK), LONG)],
                    )
                });
                let starts = (0..4).map(|k| region(r).add(BLOCK * BLOCK + LONG + 8 * k));
                // SAFETY: as above.
                done.push(unsafe { upcxx::rput_regular_lent(shorts[r].chunks(10), 10, starts, 5) });
            }
            upcxx::when_all(sent).wait();
            for b in &mut blocks {
                b.fill(0);
            }
            upcxx::when_all(done).wait();
            drop((longs, shorts));
            upcxx::barrier();

            // Back from every rank, through every shape, into buffers lent beyond the calls.
            let mut block_back = vec![vec![0u64; BLOCK * BLOCK]; n];
            let mut long_back = vec![vec![0u64; LONG]; n];
            let mut short_back = vec![vec![0u64; 20]; n];
            let all_back = Promise::<()>::new();
            let mut got = Vec::new();
            for (r, ((b, l), s)) in block_back
                .iter_mut()
                .zip(long_back.iter_mut())
                .zip(short_back.iter_mut())
                .enumerate()
            {
                let theirs = all[r].add(me * REGION);
                // SAFETY: the buffers are left alone until their futures are ready, or
                // the promise is.
                unsafe {
                    got.push(upcxx::rget_strided_lent::<2, u64>(
                        theirs,
                        [8 * BLOCK as isize, 8],
                        b,
                        0,
                        [8, 8 * BLOCK as isize],
                        [BLOCK, BLOCK],
                    ));
                    got.push(upcxx::rget_irregular_lent(
                        [(theirs.add(BLOCK * BLOCK), LONG)],
                        [&mut l[..]],
                    ));
                    let starts = (0..4).map(|k| theirs.add(BLOCK * BLOCK + LONG + 8 * k));
                    let () = upcxx::rget_regular_lent_with(
                        starts,
                        5,
                        s.chunks_mut(4),
                        4,
                        operation_cx::as_promise(&all_back),
                    );
                }
            }
            upcxx::when_all(got).wait();
            all_back.finalize().wait();
            for r in 0..n {
                let want: Vec<u64> = (0..BLOCK * BLOCK).map(|i| value(me, r, i)).collect();
                assert_eq!(block_back[r], want, "the block this rank put at rank {r}");
                let want: Vec<u64> = (0..LONG).map(|i| value(me, r, 1000 + i)).collect();
                assert_eq!(long_back[r], want, "the long run this rank put at rank {r}");
                let want: Vec<u64> = (0..20).map(|i| value(me, r, 2000 + i)).collect();
                assert_eq!(
                    short_back[r], want,
                    "the short runs this rank put at rank {r}"
                );
            }
            // Errors name the call, and a promise already ready leaves nothing in flight.
            let src = [7u64; 4];
            let mut dst = [0u64; 4];
            let msg = panic_text(|| {
                // SAFETY: the call fails before it starts.
                drop(unsafe { upcxx::rput_strided_lent(&src, 0, [4], all[0], [8], [2]) })
            });
            assert!(
                msg.contains("upcxx::rput_strided_lent: the stride of 4 bytes"),
                "{msg}"
            );
            let null = GlobalPtr::<u64>::null();
            let msg = panic_text(|| {
                // SAFETY: as above.
                drop(unsafe { upcxx::rget_irregular_lent([(null, 2usize)], [&mut dst[..2]]) })
            });
            assert!(
                msg.contains("upcxx::rget_irregular_lent: a run of the remote sequence starts"),
                "{msg}"
            );
            // A call that fails its checks after arming gives back the promise's
            // dependency (source and operation completion, both forms): the promise
            // is ready once finalized, not waiting for a transfer that never started.
            let given = Promise::<()>::new();
            let msg = panic_text(|| {
                // SAFETY: the call fails before it starts.
                unsafe {
                    upcxx::rput_irregular_lent_with(
                        [&src[..2]],
                        [(null, 2usize)],
                        source_cx::as_promise(&given) | operation_cx::as_promise(&given),
                    )
                }
            });
            assert!(msg.contains("upcxx::rput_irregular_lent: a run"), "{msg}");
            let msg = panic_text(|| {
                // SAFETY: as above.
                unsafe {
                    upcxx::rget_irregular_lent_with(
                        [(null, 2usize)],
                        [&mut dst[..2]],
                        operation_cx::as_promise(&given),
                    )
                }
            });
            assert!(msg.contains("upcxx::rget_irregular_lent: a run"), "{msg}");
            given.finalize().wait();
            let ready = Promise::<()>::new();
            ready.fulfill_result(());
            // SAFETY: the call fails before it starts.
            let msg = panic_text(|| unsafe {
                upcxx::rget_strided_lent_with::<1, u64, _>(
                    all[n - 1],
                    [8],
                    &mut dst,
                    0,
                    [8],
                    [4],
                    operation_cx::as_promise(&ready),
                )
            });
            assert!(msg.contains("already ready"), "{msg}");
            // The safe forms too, before their data move: the first words of this
            // rank's region at the last rank keep their values.
            let last = region(n - 1);
            let msg = panic_text(|| {
                upcxx::rput_strided_with::<1, u64, _>(
                    &src,
                    0,
                    [8],
                    last,
                    [8],
                    [4],
                    operation_cx::as_promise(&ready),
                )
            });
            assert!(msg.contains("already ready"), "{msg}");
            // (The block landed transposed: word j of the region holds element j * BLOCK.)
            let kept: Vec<u64> = (0..4).map(|j| value(me, n - 1, j * BLOCK)).collect();
            assert_eq!(upcxx::rget_vec(last, 4).wait(), kept);
            assert!(!upcxx::progress_required());
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}

static EMPTY_RUNS_ARRIVED: AtomicU64 = AtomicU64::new(0);

/// §15.2.2 ¶7, §7.1 ¶10: a put whose runs all have length zero moves nothing, and its
/// remote completion runs on the process its destination runs name, as for runs that
/// move data (a halo exchange with an empty row still tells its neighbour).
#[test]
fn a_put_of_empty_runs_completes_remotely_at_its_target() {
    for n in [2, 3] {
        gex::testing::spmd(n, || {
            upcxx::init();
            let me = rank_me();
            let mine: GlobalPtr<u64> = new_array(4);
            let next = all_gather(&mine)[((me + 1) % rank_n()) as usize];
            let empty: &[u64] = &[];
            let arrived = |from: u32| {
                assert_eq!((from + 1) % rank_n(), rank_me(), "ran on the wrong rank");
                EMPTY_RUNS_ARRIVED.fetch_add(1, Ordering::SeqCst);
            };
            upcxx::rput_irregular_with(
                [empty],
                [(next, 0usize)],
                remote_cx::as_rpc(arrived, (me,)) | operation_cx::as_future(),
            )
            .wait();
            upcxx::rput_regular_with(
                [empty],
                0,
                [next.add(1)],
                0,
                remote_cx::as_rpc(arrived, (me,)) | operation_cx::as_future(),
            )
            .wait();
            while EMPTY_RUNS_ARRIVED.load(Ordering::SeqCst) < 2 {
                progress(upcxx::ProgressLevel::User);
            }
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}
