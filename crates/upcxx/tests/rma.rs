//! One-sided communication (UPC++ spec ch. 8): `rput` and `rget` of values and arrays
//! between ranks (`rget_vec` too, many gets in flight at once, and gets into memory lent
//! beyond the call: `rget_into_vec`, `rget_into_raw`, and puts from it: `rput_vec`,
//! `rput_raw`), of plain data and of
//! types with invalid bit patterns or padding, their default completions, and their
//! errors.

mod common;
use common::{all_gather, panic_text};

use bytemuck::{AnyBitPattern, CheckedBitPattern, NoUninit, Pod, Zeroable};
use upcxx::{
    current_persona, delete_array, new_array, operation_cx, rank_me, rank_n, remote_cx, rget,
    rget_into, rget_into_raw, rget_into_raw_with, rget_into_vec, rget_into_vec_with,
    rget_into_with, rget_vec, rget_vec_with, rget_with, rput, rput_raw, rput_raw_with, rput_slice,
    rput_slice_with, rput_vec, rput_vec_with, rput_with, source_cx, when_all, Future, GlobalPtr,
    Promise,
};

/// A call that is expected to panic.
type Call = Box<dyn FnOnce()>;

/// Reads element `i` of a local array through `local()`.
fn peek<T: Pod>(gp: GlobalPtr<T>, i: usize) -> T {
    // SAFETY: the tests read only memory that no rank writes concurrently (a barrier or
    // a completed operation orders the writes before).
    unsafe { gp.add(i).local().read_volatile() }
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
struct Particle {
    pos: [f64; 3],
    id: u32,
    charge: i32,
}

/// A field-less enum: `NoUninit` (a put reads its byte), `CheckedBitPattern` (a get
/// checks its byte), but not every byte is one (0 is none).
#[derive(Debug, Clone, Copy, PartialEq, Default, NoUninit, CheckedBitPattern)]
#[repr(u8)]
enum Color {
    #[default]
    Red = 1,
    Green = 2,
    Blue = 3,
}

impl Color {
    fn of(rank: u32) -> Color {
        [Color::Red, Color::Green, Color::Blue][rank as usize % 3]
    }
}

/// A struct with padding (7 bytes after `tag`): gets may make it (`AnyBitPattern`),
/// puts may not read it (no `NoUninit`).
#[derive(Debug, Clone, Copy, PartialEq, Default, AnyBitPattern)]
#[repr(C)]
struct Padded {
    tag: u8,
    value: u64,
}

/// §8.1's element types beyond plain data (`rma.rs`'s "Element types"): `bool`s and a
/// field-less enum put and got between every pair of ranks (single values and vectors,
/// in flight together), a padded struct got from every rank, and bytes that make no
/// `bool` or `Color` failing the get, naming the call and the type.
#[test]
fn bools_enums_and_padded_structs_travel() {
    for ranks in 1..=4 {
        gex::testing::spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let n = rank_n() as usize;
            let flags: GlobalPtr<bool> = new_array(n + 1);
            let colors: GlobalPtr<Color> = new_array(n + 1);
            let padded: GlobalPtr<Padded> = new_array(1);
            // SAFETY: this rank's own element, read by others after the barrier.
            unsafe {
                padded.local().write(Padded {
                    tag: me as u8,
                    value: 0x9ad0_0000 + u64::from(me),
                })
            };
            let all = all_gather(&(flags, colors, padded));
            let mut done: Vec<Future<()>> = Vec::new();
            for &(flags, colors, _) in &all {
                done.push(rput(me.is_multiple_of(2), flags.add(me as usize)));
                done.push(rput(Color::of(me), colors.add(me as usize)));
            }
            when_all(done).wait();
            upcxx::barrier();
            for (r, &(flags, colors, padded)) in all.iter().enumerate() {
                let want_flags: Vec<bool> = (0..n).map(|s| s.is_multiple_of(2)).collect();
                let want_colors: Vec<Color> = (0..n as u32).map(Color::of).collect();
                let one_color = rget(colors.add(n - 1));
                let (got_flags, got_colors, one_flag, got_padded) = when_all((
                    rget_vec(flags, n),
                    rget_vec(colors, n),
                    rget(flags.add(n - 1)),
                    rget_vec(padded, 1),
                ))
                .wait();
                let one_color = one_color.wait();
                assert_eq!(got_flags, want_flags, "rank {r}'s flags");
                assert_eq!(got_colors, want_colors, "rank {r}'s colors");
                assert_eq!(one_flag, want_flags[n - 1]);
                assert_eq!(one_color, want_colors[n - 1]);
                let want = Padded {
                    tag: r as u8,
                    value: 0x9ad0_0000 + r as u64,
                };
                assert_eq!(got_padded, [want], "rank {r}'s padded struct");
                assert_eq!(rget(padded).wait(), want);
            }
            // Bytes that make no `bool` (2) or `Color` (0), written through the raw
            // memory of this rank's own spare elements.
            // SAFETY: this rank's own elements, which no one else reads.
            unsafe {
                flags.add(n).local().cast::<u8>().write(2);
                colors.add(n).local().cast::<u8>().write(0);
            }
            let msg = panic_text(|| drop(rget(flags.add(n))));
            assert!(
                msg.contains("upcxx::rget: the bytes read are not a valid `bool`"),
                "{msg}"
            );
            let msg = panic_text(|| drop(rget_vec(colors, n + 1)));
            assert!(
                msg.contains("upcxx::rget_vec: the bytes read are not a valid `rma::Color`"),
                "{msg}"
            );
            upcxx::barrier();
            delete_array(flags);
            delete_array(colors);
            delete_array(padded);
            upcxx::finalize();
        });
    }
}

#[test]
fn values_travel_between_every_pair_of_ranks() {
    gex::testing::spmd(4, || {
        upcxx::init();
        let me = rank_me();
        let n = rank_n() as usize;
        let ints: GlobalPtr<u64> = new_array(n);
        let parts: GlobalPtr<Particle> = new_array(n);
        let all = all_gather(&(ints, parts));
        // Each rank writes its slot of every rank's arrays, itself included.
        let mut done: Vec<Future<()>> = Vec::new();
        for &(ints, parts) in &all {
            let p = Particle {
                pos: [f64::from(me), 0.5, -1.0],
                id: me,
                charge: -(me as i32),
            };
            done.push(rput(1000 + u64::from(me), ints.add(me as usize)));
            done.push(rput(p, parts.add(me as usize)));
        }
        upcxx::when_all(done).wait();
        upcxx::barrier();
        for s in 0..n {
            assert_eq!(peek(ints, s), 1000 + s as u64, "slot written by rank {s}");
            assert_eq!(peek(parts, s).id, s as u32);
            assert_eq!(peek(parts, s).pos[0], s as f64);
        }
        // Every rank reads every slot of every rank's arrays back.
        for (r, &(ints, parts)) in all.iter().enumerate() {
            for s in 0..n {
                assert_eq!(
                    rget(ints.add(s)).wait(),
                    1000 + s as u64,
                    "rank {r} slot {s}"
                );
                let p = rget(parts.add(s)).wait();
                assert_eq!(
                    p,
                    Particle {
                        pos: [s as f64, 0.5, -1.0],
                        id: s as u32,
                        charge: -(s as i32),
                    }
                );
            }
        }
        upcxx::barrier();
        delete_array(ints);
        delete_array(parts);
        upcxx::finalize();
    });
}

#[test]
fn arrays_travel_whole_and_in_parts() {
    gex::testing::spmd(3, || {
        upcxx::init();
        let me = rank_me();
        let n = rank_n();
        const LEN: usize = 10_000;
        let buf: GlobalPtr<f64> = new_array(LEN);
        let all = all_gather(&buf);
        let next = all[((me + 1) % n) as usize];
        let prev = (me + n - 1) % n;
        // A whole array to the next rank, then an overlapping middle part again.
        let src: Vec<f64> = (0..LEN).map(|i| f64::from(me) * 1e6 + i as f64).collect();
        rput_slice(&src, next).wait();
        let middle: Vec<f64> = (0..100).map(|i| -(i as f64)).collect();
        rput_slice(&middle, next.add(5000)).wait();
        // An empty put is valid and completes like any other.
        rput_slice(&[], next.add(LEN)).wait();
        upcxx::barrier();
        for i in 0..LEN {
            let want = if (5000..5100).contains(&i) {
                -((i - 5000) as f64)
            } else {
                f64::from(prev) * 1e6 + i as f64
            };
            assert_eq!(peek(buf, i), want, "element {i} from rank {prev}");
        }
        // Read the next rank's array back: the whole, and a part at an offset.
        let mut whole = vec![0.0; LEN];
        rget_into(next, &mut whole).wait();
        let mut expect = src.clone();
        expect[5000..5100].copy_from_slice(&middle);
        assert_eq!(whole, expect);
        let mut part = [0.0f64; 7];
        rget_into(next.add(4998), &mut part).wait();
        assert_eq!(part, expect[4998..5005]);
        // The same into vectors the operations own, all in flight at once: the whole,
        // a part, every element alone, and none.
        let whole = rget_vec(next, LEN);
        let part = rget_vec(next.add(4998), 7);
        let each: Vec<Future<f64>> = (0..LEN).step_by(97).map(|i| rget(next.add(i))).collect();
        let none = rget_vec(next.add(LEN), 0);
        let (whole, part, each, none) = when_all((whole, part, when_all(each), none)).wait();
        assert_eq!(whole, expect);
        assert_eq!(part, expect[4998..5005]);
        let every: Vec<f64> = expect.iter().copied().step_by(97).collect();
        assert_eq!(each, every);
        assert!(none.is_empty());
        upcxx::barrier();
        delete_array(buf);
        upcxx::finalize();
    });
}

/// `rget(src, dest, count)` (§8.2.2) into memory the caller lends beyond the call: an
/// owned vector (`rget_into_vec`, given back) and a raw pointer (`rget_into_raw`). From
/// every rank at once, in flight together (more than 3 KiB each, so that between hosts
/// they take the mpi conduit's window; a few words, its messages; none), with futures, a
/// promise and an LPC; the data are in place at operation completion, and the vector
/// given back is the one lent, its allocation reused round after round.
#[test]
fn gets_into_lent_memory_land_by_operation_completion() {
    const LEN: usize = 1031;
    fn word(owner: usize, i: usize) -> u64 {
        0x1e47_0000_0000 | (owner as u64) << 16 | i as u64
    }
    for ranks in [1, 2, 3, 5] {
        gex::testing::spmd(ranks, || {
            upcxx::init();
            let (me, n) = (rank_me() as usize, rank_n() as usize);
            let mine: GlobalPtr<u64> = new_array(LEN);
            for i in 0..LEN {
                // SAFETY: this rank's own array, read by others after the barrier.
                unsafe { mine.add(i).local().write(word(me, i)) };
            }
            let all = all_gather(&mine);
            upcxx::barrier();
            let mut bufs: Vec<Vec<u64>> = (0..n)
                .map(|_| {
                    let mut b = Vec::with_capacity(LEN + 5);
                    b.resize(LEN, 0);
                    b
                })
                .collect();
            let addrs: Vec<*const u64> = bufs.iter().map(|b| b.as_ptr()).collect();
            for round in 0..3 {
                let gets: Vec<Future<Vec<u64>>> = bufs
                    .drain(..)
                    .zip(&all)
                    .map(|(b, &gp)| rget_into_vec(gp, b))
                    .collect();
                bufs = when_all(gets).wait();
                for (r, b) in bufs.iter_mut().enumerate() {
                    assert_eq!((b.as_ptr(), b.capacity()), (addrs[r], LEN + 5));
                    let want: Vec<u64> = (0..LEN).map(|i| word(r, i)).collect();
                    assert_eq!(*b, want, "round {round}: rank {r}'s words");
                    b.fill(0);
                }
            }
            let last = all[n - 1];
            let p = Promise::<Vec<u64>>::new();
            let (part, none) = when_all((
                rget_into_vec_with(
                    last.add(5),
                    vec![0; 3],
                    operation_cx::as_future() | operation_cx::as_promise(&p),
                ),
                rget_into_vec(last.add(LEN), Vec::new()),
            ))
            .wait();
            assert_eq!(part, [word(n - 1, 5), word(n - 1, 6), word(n - 1, 7)]);
            assert_eq!(p.finalize().wait(), part);
            assert!(none.is_empty());

            // Every rank's array into its part of one area, through pointers.
            let mut area = vec![0u64; n * LEN];
            let base = area.as_mut_ptr();
            let all_done = Promise::<()>::new();
            let ran = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            for (r, &gp) in all.iter().enumerate() {
                let ran = ran.clone();
                // SAFETY: part `r` of `area`, which nothing touches until the promise
                // is fulfilled.
                let () = unsafe {
                    rget_into_raw_with(
                        gp,
                        base.add(r * LEN),
                        LEN,
                        operation_cx::as_promise(&all_done)
                            | operation_cx::as_lpc(&current_persona(), move || {
                                ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }),
                    )
                };
            }
            all_done.finalize().wait();
            for (r, part) in area.chunks(LEN).enumerate() {
                assert!(
                    part.iter().enumerate().all(|(i, &v)| v == word(r, i)),
                    "rank {r}'s words through a pointer"
                );
            }
            while ran.load(std::sync::atomic::Ordering::Relaxed) < n {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            let mut one = 0u64;
            // SAFETY: `one` lives until the future is ready.
            unsafe { rget_into_raw(last.add(LEN - 1), &raw mut one, 1) }.wait();
            assert_eq!(one, word(n - 1, LEN - 1));
            // A promise already ready fails the call before anything moves, and the
            // vector lent is dropped with the panic.
            let ready = Promise::<Vec<u64>>::new();
            ready.fulfill_result(vec![]);
            let msg = panic_text(|| {
                rget_into_vec_with(last, vec![0; 2], operation_cx::as_promise(&ready))
            });
            assert!(msg.contains("already ready"), "{msg}");
            let ready = Promise::<()>::new();
            ready.fulfill_result(());
            let mut untouched = [7u64; 2];
            let msg = panic_text(|| {
                // SAFETY: the call fails before it writes.
                unsafe {
                    rget_into_raw_with(
                        last,
                        untouched.as_mut_ptr(),
                        2,
                        operation_cx::as_promise(&ready),
                    )
                }
            });
            assert!(msg.contains("already ready"), "{msg}");
            assert_eq!(untouched, [7, 7]);
            assert!(!upcxx::progress_required());
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}

/// Remote completions of `puts_from_lent_memory_land_by_operation_completion` that ran
/// on this rank.
static PUTS_ARRIVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `rput(src, dest, count)` (§8.2.1) from memory the caller lends beyond the call: an
/// owned vector (`rput_vec`, given back at operation completion) and a raw pointer
/// (`rput_raw`, with source completion of its own). Every rank puts into its slot of
/// every rank's array, all in flight together (8 KiB each, and 72 KiB, more than the
/// mpi conduit copies for `rput_slice`; a few words; none), with futures, a promise and
/// remote RPCs; the data are in place at operation completion, the source is freed
/// after source completion, and the vector given back is the one lent.
#[test]
fn puts_from_lent_memory_land_by_operation_completion() {
    const LEN: usize = 1031;
    const BIG: usize = 9 * 1024;
    fn word(from: usize, round: usize, i: usize) -> u64 {
        0x9e70_0000_0000 | (from as u64) << 32 | (round as u64) << 24 | i as u64
    }
    fn arrived() {
        PUTS_ARRIVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    for ranks in [1, 2, 3, 5] {
        gex::testing::spmd(ranks, || {
            upcxx::init();
            let (me, n) = (rank_me() as usize, rank_n() as usize);
            // A slot of LEN words per rank, then one of BIG words per rank.
            let mine: GlobalPtr<u64> = new_array(n * (LEN + BIG));
            // Before any rank can put (`all_gather` waits for every rank).
            PUTS_ARRIVED.store(0, std::sync::atomic::Ordering::Relaxed);
            let all = all_gather(&mine);
            let slot = |r: usize| all[r].add(me * LEN);
            let big_slot = |r: usize| all[r].add(n * LEN + me * BIG);
            let mut bufs: Vec<Vec<u64>> = (0..n).map(|_| Vec::with_capacity(LEN + 5)).collect();
            let addrs: Vec<*const u64> = bufs.iter().map(|b| b.as_ptr()).collect();
            for round in 0..3 {
                let puts: Vec<Future<Vec<u64>>> = bufs
                    .drain(..)
                    .enumerate()
                    .map(|(r, mut b)| {
                        b.clear();
                        b.extend((0..LEN).map(|i| word(me, round, i)));
                        rput_vec(b, slot(r))
                    })
                    .collect();
                bufs = when_all(puts).wait();
                for (r, b) in bufs.iter().enumerate() {
                    assert_eq!((b.as_ptr(), b.capacity()), (addrs[r], LEN + 5));
                    let back = rget_vec(slot(r), LEN).wait();
                    assert!(
                        back.iter()
                            .enumerate()
                            .all(|(i, &v)| v == word(me, round, i)),
                        "round {round}: this rank's words at rank {r}"
                    );
                }
            }
            // From pointers into one area: a promise and remote RPCs for all, the
            // area freed once every source completion is notified.
            let area: Vec<u64> = (0..n * BIG).map(|i| word(me, 7, i % BIG)).collect();
            let all_done = Promise::<()>::new();
            let mut sent = Vec::new();
            for r in 0..n {
                // SAFETY: part `r` of `area`, which is neither written nor dropped before
                // its source completion.
                let f: Future<()> = unsafe {
                    rput_raw_with(
                        area[r * BIG..].as_ptr(),
                        BIG,
                        big_slot(r),
                        source_cx::as_future()
                            | remote_cx::as_rpc(arrived, ())
                            | operation_cx::as_promise(&all_done),
                    )
                };
                sent.push(f);
            }
            when_all(sent).wait();
            drop(area);
            all_done.finalize().wait();
            for r in 0..n {
                let back = rget_vec(big_slot(r), BIG).wait();
                assert!(
                    back.iter().enumerate().all(|(i, &v)| v == word(me, 7, i)),
                    "this rank's big words at rank {r}"
                );
            }
            let last = all[n - 1];
            let p = Promise::<Vec<u64>>::new();
            let (part, none) = when_all((
                rput_vec_with(
                    vec![1, 2, 3],
                    last.add(me * LEN + 5),
                    operation_cx::as_future() | operation_cx::as_promise(&p),
                ),
                rput_vec(Vec::new(), last.add(me * LEN)),
            ))
            .wait();
            assert_eq!((part, none), (vec![1, 2, 3], vec![]));
            assert_eq!(p.finalize().wait(), [1, 2, 3]);
            let one = [0x0e_u64];
            // SAFETY: `one` outlives the future, which is waited for.
            unsafe { rput_raw(one.as_ptr(), 1, last.add(me * LEN + 9)) }.wait();
            let around = rget_vec(last.add(me * LEN + 4), 6).wait();
            let want = [word(me, 2, 4), 1, 2, 3, word(me, 2, 8), 0x0e];
            assert_eq!(around, want);
            // A promise already ready fails the call before anything moves (into this
            // rank's slot, which it alone writes).
            let mine_at_last = last.add(me * LEN);
            let ready = Promise::<Vec<u64>>::new();
            ready.fulfill_result(vec![]);
            let msg = panic_text(|| {
                rput_vec_with(
                    vec![0u64; 2],
                    mine_at_last,
                    operation_cx::as_promise(&ready),
                )
            });
            assert!(msg.contains("already ready"), "{msg}");
            let ready = Promise::<()>::new();
            ready.fulfill_result(());
            let zeros = [0u64; 2];
            let msg = panic_text(|| {
                // SAFETY: the call fails before it reads.
                unsafe {
                    rput_raw_with(
                        zeros.as_ptr(),
                        2,
                        mine_at_last,
                        operation_cx::as_promise(&ready),
                    )
                }
            });
            assert!(msg.contains("already ready"), "{msg}");
            // The same of the puts that read their source in the call.
            let msg =
                panic_text(|| rput_with(0u64, mine_at_last, operation_cx::as_promise(&ready)));
            assert!(msg.contains("already ready"), "{msg}");
            let msg = panic_text(|| {
                rput_slice_with(&zeros, mine_at_last, operation_cx::as_promise(&ready))
            });
            assert!(msg.contains("already ready"), "{msg}");
            assert_eq!(
                rget_vec(mine_at_last, 2).wait(),
                [word(me, 2, 0), word(me, 2, 1)]
            );
            assert!(!upcxx::progress_required());
            while PUTS_ARRIVED.load(std::sync::atomic::Ordering::Relaxed) < n {
                upcxx::progress(upcxx::ProgressLevel::User);
            }
            upcxx::barrier();
            delete_array(mine);
            upcxx::finalize();
        });
    }
}

#[test]
fn data_are_in_place_at_operation_completion() {
    // §8.2.1 ¶6, §8.2.2 ¶5: the writes of a put happen before its operation-completion
    // notification, and the read of a get happens before its own.
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let cell: GlobalPtr<u64> = new_array(64);
        let all = all_gather(&cell);
        let peer = all[(1 - me) as usize];
        if me == 0 {
            for round in 1..=200u64 {
                let values: Vec<u64> = (0..64).map(|i| round * 100 + i).collect();
                let p = Promise::<()>::new();
                let f = rput_slice_with(
                    &values,
                    peer,
                    operation_cx::as_future() | operation_cx::as_promise(&p),
                );
                f.wait();
                // Operation completion: reading the target now gives the new values,
                // through the owner's memory (where it is mapped: the local team) and
                // through a get.
                if peer.is_local() {
                    for i in [0usize, 31, 63] {
                        assert_eq!(peek(peer, i), round * 100 + i as u64);
                    }
                }
                let mut back = vec![0u64; 64];
                rget_into(peer, &mut back).wait();
                assert_eq!(back, values);
                p.finalize().wait();
            }
        }
        upcxx::barrier();
        delete_array(cell);
        upcxx::finalize();
    });
}

#[test]
fn rget_delivers_its_value_to_every_requested_notification() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let cell: GlobalPtr<i64> = upcxx::new_(-17 - i64::from(me));
        let all = all_gather(&cell);
        let peer = all[(1 - me) as usize];
        let want = -17 - i64::from(1 - me);
        let p = Promise::<i64>::new();
        let (a, b): (Future<i64>, Future<i64>) = rget_with(
            peer,
            operation_cx::as_future() | operation_cx::as_promise(&p) | operation_cx::as_future(),
        );
        assert_eq!(a.wait(), want);
        assert_eq!(b.wait(), want);
        assert_eq!(p.finalize().wait(), want);
        // rget_into with a promise only: returns (), fulfils the promise at progress.
        let mut dest = [0i64; 1];
        let q = Promise::<()>::new();
        let () = rget_into_with(peer, &mut dest, operation_cx::as_promise(&q));
        assert_eq!(
            dest[0], want,
            "the data are in place when rget_into returns"
        );
        q.finalize().wait();
        // rget_vec: the vector to each notification.
        let v = Promise::<Vec<i64>>::new();
        let f: Future<Vec<i64>> = rget_vec_with(
            peer,
            1,
            operation_cx::as_promise(&v) | operation_cx::as_future(),
        );
        assert_eq!(f.wait(), [want]);
        assert_eq!(v.finalize().wait(), [want]);
        // A promise already ready fails the call before anything starts: nothing is
        // left pending (on another host, nothing in flight).
        let ready = Promise::<Vec<i64>>::new();
        ready.fulfill_result(vec![]);
        let msg = panic_text(|| rget_vec_with(peer, 1, operation_cx::as_promise(&ready)));
        assert!(msg.contains("already ready"), "{msg}");
        assert!(!upcxx::progress_required());
        upcxx::barrier();
        upcxx::delete_(cell);
        upcxx::finalize();
    });
}

/// Word `i` of rank `rank`'s array from [`distinct_words`]: no two words of the job
/// are equal.
fn word(rank: u32, i: usize) -> u64 {
    u64::from(rank) << 32 | i as u64
}

/// A new array of `len` words in this rank's segment, word `i` being `word(me, i)`
/// (call before a barrier that orders the writes before other ranks' reads).
fn distinct_words(len: usize) -> GlobalPtr<u64> {
    let words: GlobalPtr<u64> = new_array(len);
    for i in 0..len {
        // SAFETY: this rank's own array, which no one reads before the barrier.
        unsafe { words.add(i).local().write(word(rank_me(), i)) };
    }
    words
}

/// An `rget` from another host lands in the future it returns, which the get itself
/// fills: many gets in flight joined by one `when_all`, futures dropped before their
/// values arrive (their gets must not land in a later get's future), callbacks
/// attached and futures cloned while the values travel. Every word differs, so a value
/// in the wrong future shows. Within a host the same calls read the mapped segment.
#[test]
fn rget_futures_hold_their_own_values_whatever_becomes_of_them() {
    const WORDS: usize = 300;
    for ranks in [1, 3] {
        gex::testing::spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let n = rank_n();
            let words = distinct_words(WORDS);
            let all = all_gather(&words);
            upcxx::barrier();
            let peer = (me + 1) % n;
            let src = all[peer as usize];
            for round in 0..3 {
                let mut plain = Vec::new();
                let mut chained = Vec::new();
                let mut cloned = Vec::new();
                for i in 0..WORDS {
                    let f = rget(src.add(i));
                    match (i + round) % 4 {
                        0 => drop(f),
                        1 => plain.push(f),
                        2 => chained.push(f.then(move |v: u64| (i, v))),
                        _ => cloned.push((i, f.clone(), f)),
                    }
                }
                let got = when_all(plain).wait();
                let want: Vec<u64> = (0..WORDS)
                    .filter(|i| (i + round) % 4 == 1)
                    .map(|i| word(peer, i))
                    .collect();
                assert_eq!(got, want, "round {round}: plain futures");
                for f in chained {
                    let (i, v) = f.wait();
                    assert_eq!(v, word(peer, i), "round {round}: a callback's value");
                }
                for (i, a, b) in cloned {
                    assert_eq!(a.wait(), word(peer, i), "round {round}: a clone");
                    assert_eq!(b.wait(), word(peer, i), "round {round}: its original");
                }
            }
            upcxx::discharge();
            assert!(!upcxx::progress_required());
            upcxx::barrier();
            delete_array(words);
            upcxx::finalize();
        });
    }
}

/// Every `operation_cx::as_future` of a transfer to or from another host (within a host
/// the same calls complete at once) holds its own value in a reply cell when the value
/// fits one: `rget_vec`s and `rput`s left in flight, their futures dropped, chained,
/// joined or waited for, every value distinct.
#[test]
fn operation_futures_of_transfers_in_flight_hold_their_own_values() {
    const WORDS: usize = 300;
    for ranks in [1, 3] {
        gex::testing::spmd(ranks, || {
            upcxx::init();
            let me = rank_me();
            let n = rank_n();
            let words = distinct_words(WORDS);
            let landed: GlobalPtr<u64> = new_array(WORDS);
            let all = all_gather(&(words, landed));
            upcxx::barrier();
            let peer = (me + 1) % n;
            let (src, dst) = all[peer as usize];
            for round in 0..3 {
                let mut plain = Vec::new();
                let mut chained = Vec::new();
                let mut puts = Vec::new();
                for i in (0..WORDS).step_by(2) {
                    let f = rget_vec(src.add(i), 2);
                    let p = rput(word(me, i) + round as u64, dst.add(i));
                    match (i / 2 + round) % 3 {
                        0 => drop((f, p)),
                        1 => {
                            plain.push((i, f));
                            puts.push(p);
                        }
                        _ => chained.push(f.then(move |v: Vec<u64>| (i, v))),
                    }
                }
                upcxx::when_all(puts).wait();
                for (i, f) in plain {
                    assert_eq!(
                        f.wait(),
                        [word(peer, i), word(peer, i + 1)],
                        "round {round}"
                    );
                }
                for f in chained {
                    let (i, v) = f.wait();
                    assert_eq!(v, [word(peer, i), word(peer, i + 1)], "round {round}");
                }
                upcxx::discharge();
                upcxx::barrier();
                let left = (me + n - 1) % n;
                for i in (0..WORDS).step_by(2) {
                    assert_eq!(
                        peek(landed, i),
                        word(left, i) + round as u64,
                        "round {round}: the put of rank {left} to word {i}"
                    );
                }
                upcxx::barrier();
            }
            assert!(!upcxx::progress_required());
            upcxx::barrier();
            delete_array(words);
            delete_array(landed);
            upcxx::finalize();
        });
    }
}

/// The future and the promise of one get (from another host: completed in a later
/// progress; within a host, at initiation) are ready after the same user-level
/// progress: a value that progress delivers into a future's reply cell is ready in that
/// progress, as the promise fulfilled there is, not one progress later.
#[test]
fn a_gets_future_and_promise_are_ready_after_the_same_progress() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let word: GlobalPtr<u64> = upcxx::new_(40 + u64::from(me));
        let peer = all_gather(&word)[(1 - me) as usize];
        for _ in 0..100 {
            let p = Promise::<u64>::new();
            let f = rget_with(
                peer,
                operation_cx::as_future() | operation_cx::as_promise(&p),
            );
            let promised = p.finalize();
            let mut progresses = 0;
            while !promised.ready() {
                assert!(!f.ready(), "the future is ready before the promise");
                upcxx::progress(upcxx::ProgressLevel::User);
                progresses += 1;
                assert!(progresses < 10_000_000, "the get never completes");
            }
            assert!(
                f.ready(),
                "the promise is ready after a progress, the future not"
            );
            assert_eq!(f.wait(), 41 - u64::from(me));
        }
        upcxx::barrier();
        upcxx::delete_(word);
        upcxx::finalize();
    });
}

#[test]
fn rput_source_completion_and_defaults() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let buf: GlobalPtr<u32> = new_array(4);
        let all = all_gather(&buf);
        let peer = all[(1 - me) as usize];
        let mut src = vec![me + 1; 4];
        let (sent, done) = rput_slice_with(
            &src,
            peer,
            source_cx::as_future() | operation_cx::as_future(),
        );
        sent.wait();
        // Source completion: the buffer may be reused without affecting the transfer.
        src.fill(99);
        done.wait();
        let mut back = [0u32; 4];
        rget_into(peer, &mut back).wait();
        assert_eq!(back, [me + 1; 4]);
        // The value form: remote/operation completions only; default is a future.
        let f: Future<()> = rput_with(7u32, peer.add(3), operation_cx::as_future());
        f.wait();
        assert_eq!(rget(peer.add(3)).wait(), 7);
        upcxx::barrier();
        delete_array(buf);
        upcxx::finalize();
    });
}

#[test]
fn null_pointers_fail_naming_the_call() {
    gex::testing::spmd(1, || {
        upcxx::init();
        let null = GlobalPtr::<u64>::null();
        let cases: [(&str, Call); 11] = [
            ("rget_vec", Box::new(move || drop(rget_vec(null, 2)))),
            ("rput", Box::new(move || drop(rput(1u64, null)))),
            (
                "rput",
                Box::new(move || rput_with(1u64, null, operation_cx::as_future()).wait()),
            ),
            (
                "rput_slice",
                Box::new(move || drop(rput_slice(&[1u64], null))),
            ),
            ("rget", Box::new(move || drop(rget(null)))),
            (
                "rget_into",
                Box::new(move || drop(rget_into(null, &mut [0u64; 2]))),
            ),
            (
                "rget_into",
                Box::new(move || {
                    rget_into_with(null, &mut [0u64; 0], operation_cx::as_future()).wait()
                }),
            ),
            (
                "rget_into_vec",
                Box::new(move || drop(rget_into_vec(null, vec![0u64; 2]))),
            ),
            (
                "rput_vec",
                Box::new(move || drop(rput_vec(vec![0u64; 2], null))),
            ),
            (
                "rput_raw",
                // SAFETY: the call fails before it reads.
                Box::new(move || drop(unsafe { rput_raw(&0u64, 1, null) })),
            ),
            (
                "rget_into_raw",
                // SAFETY: the call fails before it writes.
                Box::new(move || drop(unsafe { rget_into_raw(null, &mut 0u64, 1) })),
            ),
        ];
        for (call, f) in cases {
            let msg = panic_text(f);
            assert_eq!(msg, format!("upcxx::{call}: the global pointer is null"));
        }
        // Nothing was left pending by the failed calls.
        assert!(!upcxx::progress_required());
        upcxx::finalize();
    });
}

#[test]
fn out_of_segment_ranges_fail_with_the_callers_location() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let one: GlobalPtr<u64> = new_array(1);
        let all = all_gather(&one);
        let peer = all[(1 - me) as usize];
        let beyond = peer.add(upcxx::shared_segment_size() / 8);
        // Capture the panic's location: it must be this file, not the library's.
        let location = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let previous = std::panic::take_hook();
        let loc = location.clone();
        std::panic::set_hook(Box::new(move |info| {
            *loc.lock().unwrap() = info.location().map(|l| l.file().to_owned()).unwrap();
        }));
        let msg = panic_text(|| drop(rput(5u64, beyond)));
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        let msg = panic_text(|| drop(rget(beyond)));
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        // Below the segment's start (an offset that wraps around when computed).
        let below = peer.sub(upcxx::shared_segment_size() / 8);
        let msg = panic_text(|| drop(rput(5u64, below)));
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        let msg = panic_text(|| drop(rget(below)));
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        // The segment's last word, and ranges that start there and run past the end.
        let bound = upcxx::backend::gex_team()
            .segment_bound(1 - me)
            .expect("the peer attached a segment");
        let last: GlobalPtr<u64> = serde_json::from_str(&format!(
            "[{},1,{},0]",
            1 - me,
            bound.owner_addr + bound.size - 8
        ))
        .unwrap();
        assert_eq!(rget(last).wait(), rget_vec(last, 1).wait()[0]);
        let msg = panic_text(|| drop(rget_vec(last, 2)));
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        // A count far larger than any segment fails the same way, not in the allocator.
        let msg = panic_text(|| drop(rget_vec(peer, usize::MAX / 16)));
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        let msg = panic_text(|| drop(rget_vec(peer, usize::MAX)));
        assert!(msg.contains("do not fit in the address space"), "{msg}");
        assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        // Gets into lent memory: a vector running past the end, pointers' counts.
        let msg = panic_text(|| drop(rget_into_vec(last, vec![0u64; 2])));
        assert!(msg.contains("upcxx::rget_into_vec: ["), "{msg}");
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        let msg = panic_text(|| drop(rput_vec(vec![0u64; 2], last)));
        assert!(msg.contains("upcxx::rput_vec: ["), "{msg}");
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        let mut word = 0u64;
        for (count, says) in [
            (2, "outside the segment of rank"),
            (usize::MAX / 16, "outside the segment of rank"),
            (usize::MAX, "do not fit in the address space"),
        ] {
            // SAFETY: the calls fail before they read or write.
            let msg = panic_text(|| drop(unsafe { rget_into_raw(last, &raw mut word, count) }));
            assert!(msg.contains("upcxx::rget_into_raw: "), "{msg}");
            assert!(msg.contains(says), "{msg}");
            assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
            // SAFETY: as above.
            let msg = panic_text(|| drop(unsafe { rput_raw(&raw const word, count, last) }));
            assert!(msg.contains("upcxx::rput_raw: "), "{msg}");
            assert!(msg.contains(says), "{msg}");
            assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        }
        // A rank outside the job.
        let stranger: GlobalPtr<u64> = serde_json::from_str("[7,1,4096,0]").unwrap();
        let msg = panic_text(|| drop(rget(stranger)));
        assert!(msg.contains("rank 7 is not in the job"), "{msg}");
        assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        // A slice running past the end.
        let msg = panic_text(|| drop(rput_slice(&[0u64; 2], last)));
        assert!(msg.contains("outside the segment of rank"), "{msg}");
        assert!(location.lock().unwrap().ends_with("tests/rma.rs"));
        std::panic::set_hook(previous);
        upcxx::barrier();
        delete_array(one);
        upcxx::finalize();
    });
}

#[test]
fn calls_before_init_fail_naming_the_call() {
    // A pointer built from its serialized parts needs no runtime.
    let gp: GlobalPtr<u64> = serde_json::from_str("[0,1,4096,0]").unwrap();
    assert_eq!(
        panic_text(|| drop(rput(1u64, gp))),
        "upcxx::rput: called before upcxx::init"
    );
    assert_eq!(
        panic_text(|| drop(rget(gp))),
        "upcxx::rget: called before upcxx::init"
    );
}

/// §7.1 ¶11–¶12: with `source_cx::as_buffered` or `as_blocking`, source completion
/// happens before the call returns, so the caller may change (or free) the source at
/// once, also for a put from memory lent beyond the call (`rput_raw`, the `_lent` VIS
/// calls) to another host, where the transfer could otherwise read it later.
#[test]
fn buffered_and_blocking_sources_are_free_when_the_call_returns() {
    const N: usize = 16 * 1024; // 128 KiB: past what travels in messages
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let mine = new_array::<u64>(2 * N);
        let peer = all_gather(&mine)[(1 - me) as usize];
        let want = |i: usize| (i as u64) ^ 0x5a5a ^ u64::from(me);
        let mut src: Vec<u64> = (0..N).map(want).collect();
        // SAFETY: `src` lives until the operation completes below.
        let done = unsafe {
            rput_raw_with(
                src.as_ptr(),
                N,
                peer,
                source_cx::as_buffered() | operation_cx::as_future(),
            )
        };
        src.fill(0);
        done.wait();
        let mut runs: Vec<u64> = (0..N).map(want).collect();
        // SAFETY: as above.
        let done = unsafe {
            upcxx::rput_irregular_lent_with(
                [&runs[..]],
                [(peer.add(N), N)],
                source_cx::as_blocking() | operation_cx::as_future(),
            )
        };
        runs.fill(0);
        done.wait();
        upcxx::barrier();
        let from = 1 - me;
        for i in 0..N {
            let w = (i as u64) ^ 0x5a5a ^ u64::from(from);
            assert_eq!(peek(mine, i), w, "rput_raw, element {i}");
            assert_eq!(peek(mine, N + i), w, "rput_irregular_lent, element {i}");
        }
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}
