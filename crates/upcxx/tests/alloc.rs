//! Shared-segment allocation (UPC++ spec ch. 4): construction and destruction,
//! alignment, exhaustion, freeing errors, reuse, and allocation from several threads.

mod common;
use common::{all_gather, panic_text};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use upcxx::{
    allocate, allocate_typed, allocate_typed_aligned, deallocate, delete_, delete_array,
    delete_array_unchecked, delete_unchecked, new_, new_array, new_array_with, rank_me,
    shared_segment_size, shared_segment_used, try_new_, try_new_array, try_new_array_with,
    GlobalPtr,
};

/// Segment size for the tests that fill the segment.
const SMALL_SEGMENT: usize = 1 << 20;

fn small_segment(ranks: usize) -> gex::testing::SpmdOptions {
    let mut opts = gex::testing::SpmdOptions::new(ranks);
    opts.segment_size = SMALL_SEGMENT;
    opts
}

static DROPS: AtomicUsize = AtomicUsize::new(0);

/// Counts its drops in `DROPS`.
#[derive(Default)]
struct Tracked(#[allow(dead_code)] u64);

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn allocation_before_init_panics() {
    let msg = panic_text(|| {
        new_(1u8);
    });
    assert!(
        msg.contains("upcxx::new_: called before upcxx::init"),
        "{msg}"
    );
    let msg = panic_text(|| {
        allocate(8, 8);
    });
    assert!(
        msg.contains("upcxx::allocate: called before upcxx::init"),
        "{msg}"
    );
    // Freeing null is a no-op anywhere (§4.2 ¶23, ¶28, ¶45).
    delete_(GlobalPtr::<u8>::null());
    delete_array(GlobalPtr::<u8>::null());
    deallocate(GlobalPtr::<u8>::null());
}

#[test]
fn new_and_delete_round_trip() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let base = shared_segment_used();
        assert!(
            shared_segment_size() >= base && base > 0,
            "the heap's metadata is in use"
        );

        // §4.2 ¶1: a new object, initialized, with affinity to the caller.
        let s = new_(format!("rank {me}"));
        assert_eq!(s.where_(), me);
        assert!(!s.is_null());
        // SAFETY: this rank owns the object.
        assert_eq!(unsafe { &*s.local() }, &format!("rank {me}"));
        assert!(shared_segment_used() > base);
        // SAFETY: nobody else has seen the pointer: still the String `new_` built.
        unsafe { delete_unchecked(s) };
        assert_eq!(
            shared_segment_used(),
            base,
            "delete_ returns all of the block"
        );

        // §4.2 ¶21: delete_ runs the destructor (of a type that has one, unsafe: only
        // the program knows that no rank overwrote the object).
        DROPS.store(0, Ordering::SeqCst);
        let t = try_new_(Tracked(5)).expect("room for one object");
        assert_eq!(DROPS.load(Ordering::SeqCst), 0);
        // SAFETY: nobody else has seen the pointer.
        unsafe { delete_unchecked(t) };
        assert_eq!(DROPS.load(Ordering::SeqCst), 1);

        // §4.2 ¶11, ¶26: arrays of default values, and delete_array drops every element.
        let a = new_array::<Tracked>(7);
        assert_eq!(DROPS.load(Ordering::SeqCst), 1);
        // SAFETY: nobody else has seen the pointer.
        unsafe { delete_array_unchecked(a) };
        assert_eq!(DROPS.load(Ordering::SeqCst), 8, "delete_array drops all 7");
        let z = new_array::<u32>(5);
        // SAFETY: this rank owns the array of 5 initialized elements.
        assert_eq!(unsafe { std::slice::from_raw_parts(z.local(), 5) }, &[0; 5]);
        let sq = try_new_array_with(6, |i| (i * i) as u64).unwrap();
        assert_eq!(
            // SAFETY: this rank owns the array of 6 initialized elements.
            unsafe { std::slice::from_raw_parts(sq.local(), 6) },
            &[0, 1, 4, 9, 16, 25]
        );
        let strings = new_array_with(3, |i| "x".repeat(i));
        // SAFETY: as above, 3 elements.
        assert_eq!(unsafe { &*strings.local().add(2) }, "xx");
        // SAFETY: nobody else has seen the pointer.
        unsafe { delete_array_unchecked(strings) };
        delete_array(sq);
        delete_array(z);

        // Zero-length arrays and zero-sized types still get distinct, freeable blocks.
        let e1 = try_new_array::<u64>(0).unwrap();
        let e2 = new_array::<u64>(0);
        let u1 = new_(());
        let u2 = new_(());
        let all: HashSet<_> = [e1.cast::<u8>(), e2.cast(), u1.cast(), u2.cast()].into();
        assert_eq!(all.len(), 4);
        assert!(!e1.is_null() && !u1.is_null());
        delete_array(e1);
        delete_array(e2);
        delete_(u1);
        delete_(u2);

        // Raw allocation: uninitialized, freed without drops (§4.2 ¶31–¶45).
        let raw = allocate(100, 8).unwrap();
        let typed = allocate_typed::<Tracked>(4).unwrap();
        // SAFETY: 100 bytes of this rank's memory.
        unsafe { raw.local().write_bytes(0xab, 100) };
        deallocate(typed);
        deallocate(raw);
        assert_eq!(DROPS.load(Ordering::SeqCst), 8, "deallocate drops nothing");
        assert_eq!(shared_segment_used(), base);
        upcxx::finalize();
    });
}

#[test]
fn other_ranks_see_new_values_and_owner_frees() {
    gex::testing::spmd(3, || {
        upcxx::init();
        let me = rank_me();
        let mine = new_([u64::from(me); 8]);
        let all = all_gather(&mine);
        for (r, p) in all.iter().enumerate() {
            assert_eq!(p.where_() as usize, r);
            // Loads for the local team, RMA for ranks on other hosts.
            let got = if p.is_local() {
                // SAFETY: the owner wrote the value before the gather's barrier.
                unsafe { p.local().read_volatile() }
            } else {
                upcxx::rget(*p).wait()
            };
            assert_eq!(got, [r as u64; 8]);
        }
        upcxx::barrier();
        delete_(mine);
        upcxx::finalize();
    });
}

#[test]
fn alignment_is_honoured() {
    gex::testing::spmd(1, || {
        upcxx::init();
        #[repr(align(256))]
        struct Wide(#[allow(dead_code)] u8);
        let mut blocks = Vec::new();
        for i in 0..8 {
            let p = allocate(24 + i, 1).unwrap();
            assert_eq!(p.local() as usize % 16, 0, "at least malloc's alignment");
            blocks.push(p);
            let q = allocate(100, 4096).unwrap();
            assert_eq!(q.local() as usize % 4096, 0);
            blocks.push(q);
            let w = allocate_typed::<Wide>(3).unwrap();
            assert_eq!(w.local() as usize % 256, 0);
            blocks.push(w.cast());
            // §4.2 ¶35's alignment argument, and never less than the type's own.
            let a = allocate_typed_aligned::<u64>(5, 1024).unwrap();
            assert_eq!(a.local() as usize % 1024, 0);
            blocks.push(a.cast());
            let v = allocate_typed_aligned::<Wide>(2, 8).unwrap();
            assert_eq!(v.local() as usize % 256, 0);
            blocks.push(v.cast());
        }
        let wide = new_(Wide(1));
        assert_eq!(wide.local() as usize % 256, 0);
        delete_(wide);
        for b in blocks {
            deallocate(b);
        }
        // Beyond a page too (the heap's shadow agrees with the segment modulo the
        // largest alignment it grants), and none beyond that: 1 GiB, or the segment's
        // size rounded up to a power of two.
        for align in [1 << 16, 1 << 20] {
            let p = allocate(8, align).expect("room for an aligned block");
            assert_eq!(p.local() as usize % align, 0);
            deallocate(p);
        }
        assert!(allocate(8, 1 << 31).is_none());
        let beyond = shared_segment_size().next_power_of_two() * 2;
        assert!(allocate(8, beyond).is_none());
        let msg = panic_text(|| {
            allocate(8, 3);
        });
        assert!(
            msg.contains("upcxx::allocate: alignment 3 is not a power of two"),
            "{msg}"
        );
        let msg = panic_text(|| {
            allocate_typed_aligned::<u32>(4, 48);
        });
        assert!(
            msg.contains("upcxx::allocate: alignment 48 is not a power of two"),
            "{msg}"
        );
        upcxx::finalize();
    });
}

#[test]
fn exhaustion_is_reported() {
    gex::testing::spmd_with(small_segment(1), || {
        upcxx::init();
        assert_eq!(shared_segment_size(), SMALL_SEGMENT);
        let base = shared_segment_used();
        // More than the segment: nothrow forms give None, throwing forms panic.
        assert!(try_new_array::<u8>(SMALL_SEGMENT).is_none());
        assert!(allocate(SMALL_SEGMENT, 16).is_none());
        assert!(
            allocate_typed::<u64>(usize::MAX / 4).is_none(),
            "size overflow"
        );
        assert!(
            try_new_array::<u64>(usize::MAX / 4).is_none(),
            "size overflow"
        );
        let msg = panic_text(|| {
            new_array::<u8>(SMALL_SEGMENT);
        });
        assert!(
            msg.contains("upcxx::new_array: shared segment exhausted"),
            "{msg}"
        );
        // A failed new_array never calls its initializer.
        assert!(try_new_array_with::<u8>(SMALL_SEGMENT, |_| unreachable!()).is_none());
        assert_eq!(shared_segment_used(), base, "failures allocate nothing");

        // Fill the segment with 4 KiB blocks: it fills up, and then a freed block is
        // the only room, so the next allocation reuses exactly it.
        let mut blocks = Vec::new();
        while let Some(p) = allocate(4096, 16) {
            blocks.push(p);
        }
        assert!(
            blocks.len() > 200,
            "a 1 MiB segment holds over 200 blocks of 4 KiB"
        );
        assert!(shared_segment_used() > SMALL_SEGMENT * 9 / 10);
        assert!(try_new_([0u8; 4096]).is_none());
        let msg = panic_text(|| {
            new_([0u8; 4096]);
        });
        assert!(
            msg.contains("upcxx::new_: shared segment exhausted"),
            "{msg}"
        );
        let hole = blocks.swap_remove(blocks.len() / 2);
        deallocate(hole);
        let again = allocate(4096, 16).expect("the freed block");
        assert_eq!(again, hole, "a freed block is reused");
        blocks.push(again);
        for b in blocks {
            deallocate(b);
        }
        assert_eq!(shared_segment_used(), base);
        // All of it is usable again, as one block.
        let big = allocate(SMALL_SEGMENT / 2, 16).expect("the segment is free again");
        deallocate(big);
        upcxx::finalize();
    });
}

#[test]
fn freeing_errors_are_caught() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me();
        let base = shared_segment_used();
        let one = new_(17u64);
        let arr = new_array::<u64>(4);
        let raw = allocate(64, 16).unwrap();

        // Double free (§4.2 ¶22: only non-deallocated pointers).
        let twice = new_(3u32);
        delete_(twice);
        let msg = panic_text(|| delete_(twice));
        assert!(msg.contains("upcxx::delete_:"), "{msg}");
        assert!(
            msg.contains("not a live block allocated by new_ on this rank"),
            "{msg}"
        );
        let t = allocate(32, 16).unwrap();
        deallocate(t);
        let msg = panic_text(|| deallocate(t));
        assert!(
            msg.contains("upcxx::deallocate:") && msg.contains("already freed"),
            "{msg}"
        );

        // The wrong function for the block.
        let msg = panic_text(|| delete_(arr));
        assert!(
            msg.contains("allocated by new_array; free it with delete_array"),
            "{msg}"
        );
        let msg = panic_text(|| deallocate(one));
        assert!(
            msg.contains("allocated by new_; free it with delete_"),
            "{msg}"
        );
        let msg = panic_text(|| delete_array(raw));
        assert!(
            msg.contains("allocated by allocate; free it with deallocate"),
            "{msg}"
        );
        // An element type of another size.
        let msg = panic_text(|| delete_(one.cast::<u32>()));
        assert!(
            msg.contains("holds elements of 8 bytes") && msg.contains("4 bytes"),
            "{msg}"
        );
        // Not the start of a block.
        let msg = panic_text(|| delete_array(arr + 2));
        assert!(msg.contains("upcxx::delete_array:"), "{msg}");
        assert!(
            msg.contains("not a live block allocated by new_array"),
            "{msg}"
        );
        let msg = panic_text(|| deallocate(raw.cast::<u8>() + 3));
        assert!(msg.contains("not the start of a block"), "{msg}");

        // Another rank's pointer (§4.2 ¶22: allocated "on the calling process").
        let all = all_gather(&one);
        let theirs = all[(me as usize + 1) % 2];
        let msg = panic_text(|| delete_(theirs));
        assert!(
            msg.contains(&format!("has affinity to rank {}", theirs.where_())),
            "{msg}"
        );
        upcxx::barrier();

        // None of the failed frees changed anything: the blocks are still live.
        // SAFETY: this rank owns `one`.
        assert_eq!(unsafe { one.local().read() }, 17);
        delete_(one);
        delete_array(arr);
        deallocate(raw);
        assert_eq!(shared_segment_used(), base);
        upcxx::finalize();
    });
}

#[test]
fn panics_in_constructors_and_destructors_free_the_block() {
    gex::testing::spmd(1, || {
        upcxx::init();
        let base = shared_segment_used();
        // §4.2 ¶14: built elements are destroyed in reverse order, then the block freed.
        static ORDER: Mutex<Vec<usize>> = Mutex::new(Vec::new());
        struct Noisy(usize);
        impl Drop for Noisy {
            fn drop(&mut self) {
                ORDER.lock().unwrap().push(self.0);
            }
        }
        let msg = panic_text(|| {
            new_array_with(6, |i| {
                if i == 4 {
                    panic!("no element 4");
                }
                Noisy(i)
            });
        });
        assert_eq!(msg, "no element 4");
        assert_eq!(*ORDER.lock().unwrap(), vec![3, 2, 1, 0]);
        assert_eq!(shared_segment_used(), base);

        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("bomb");
            }
        }
        let b = new_(Bomb);
        // SAFETY: nobody else has seen the pointer.
        assert_eq!(panic_text(|| unsafe { delete_unchecked(b) }), "bomb");
        assert_eq!(shared_segment_used(), base, "the block is freed anyway");
        upcxx::finalize();
    });
}

#[test]
fn allocation_from_several_threads() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = u64::from(rank_me());
        let base = shared_segment_used();
        const THREADS: u64 = 4;
        const PER_THREAD: u64 = 400;
        let kept: Vec<Vec<GlobalPtr<u64>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    s.spawn(move || {
                        let mut kept = Vec::new();
                        for i in 0..PER_THREAD {
                            let v = me << 32 | t << 16 | i;
                            let p = new_(v);
                            let q = new_array_with(i as usize % 7 + 1, |_| v);
                            // SAFETY: this thread owns both blocks.
                            unsafe {
                                assert_eq!(p.local().read(), v);
                                assert_eq!(q.local().read(), v);
                            }
                            delete_array(q);
                            if i % 2 == 0 {
                                kept.push(p);
                            } else {
                                delete_(p);
                            }
                        }
                        kept
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let distinct: HashSet<GlobalPtr<u64>> = kept.iter().flatten().copied().collect();
        assert_eq!(distinct.len() as u64, THREADS * PER_THREAD / 2);
        for (t, ptrs) in kept.iter().enumerate() {
            for (k, p) in ptrs.iter().enumerate() {
                let v = me << 32 | (t as u64) << 16 | (2 * k as u64);
                assert_eq!(
                    // SAFETY: a live, initialized block of this rank, no longer written.
                    unsafe { p.local().read() },
                    v,
                    "no block was handed out twice"
                );
            }
        }
        for p in kept.into_iter().flatten() {
            delete_(p);
        }
        assert_eq!(shared_segment_used(), base);
        upcxx::finalize();
    });
}

/// Every rank of a job fills its segment at once: allocation fails with `None` on
/// each, communication goes on (a put into a full segment's existing block, RPCs), and
/// after freeing, every rank allocates again, up to the same amount.
#[test]
fn a_full_heap_on_every_rank_is_an_error_the_job_survives() {
    gex::testing::spmd_with(small_segment(3), || {
        upcxx::init();
        let (me, n) = (rank_me(), upcxx::rank_n());
        let base = shared_segment_used();
        // Blocks of 4 KiB, then of one word, until nothing fits.
        let fill = || {
            let mut blocks = Vec::new();
            for words in [512, 1] {
                while let Some(p) = allocate_typed::<u64>(words) {
                    blocks.push(p);
                }
            }
            blocks
        };
        let blocks = fill();
        assert!(blocks.len() > 200, "rank {me}: {} blocks", blocks.len());
        assert!(try_new_(0u64).is_none(), "rank {me}: the segment is full");
        // Still communicating: every rank's first block is written by its left
        // neighbour, and RPCs round-trip.
        let firsts = all_gather(&blocks[0]);
        let right = (me + 1) % n;
        upcxx::rput(u64::from(me) + 100, firsts[right as usize]).wait();
        assert_eq!(
            upcxx::rpc(right, |x: u32| x + 1, (me,)).wait(),
            me + 1,
            "rank {me}: rpc with full segments"
        );
        upcxx::barrier();
        let left = (me + n - 1) % n;
        // SAFETY: this rank's block, written by the left neighbour before the barrier.
        assert_eq!(unsafe { blocks[0].local().read() }, u64::from(left) + 100);
        upcxx::barrier();
        let count = blocks.len();
        for b in blocks {
            deallocate(b);
        }
        assert_eq!(shared_segment_used(), base, "rank {me}: all freed");
        let again = fill();
        assert_eq!(again.len(), count, "rank {me}: the same room after freeing");
        for b in again {
            deallocate(b);
        }
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// Any rank may write any byte of another's segment with a safe `rput`: here over the
/// next rank's live blocks, the bytes just below them and the freed blocks between
/// them. The heap keeps none of its bookkeeping in the segment, so the overwritten
/// blocks are still freed by their owner, a second free is still caught, and the heap
/// serves and frees blocks as before, every byte coming back.
#[test]
fn peers_overwriting_the_segment_leave_the_heap_intact() {
    gex::testing::spmd(3, || {
        upcxx::init();
        let (me, n) = (rank_me(), upcxx::rank_n());
        let base = shared_segment_used();
        let blocks: Vec<GlobalPtr<u64>> = (0..5).map(|i| new_array_with(32, |_| i)).collect();
        delete_array(blocks[1]);
        delete_array(blocks[3]);
        let lo = blocks.iter().min().unwrap().cast::<u8>();
        let hi = blocks.iter().max().unwrap().cast::<u8>();
        let all = all_gather(&(lo, hi));
        let (lo, hi) = all[((me + 1) % n) as usize];
        let from = lo - 64;
        let len = (hi - from) as usize + 32 * 8 + 64;
        upcxx::rput_vec(vec![0xA5u8; len], from).wait();
        upcxx::barrier();

        for i in [0, 2, 4] {
            // SAFETY: this rank's live block of 32 elements; nobody writes it any more.
            assert_eq!(unsafe { blocks[i].local().read() }, 0xA5A5_A5A5_A5A5_A5A5);
            delete_array(blocks[i]);
        }
        let msg = panic_text(|| delete_array(blocks[0]));
        assert!(msg.contains("it was already freed"), "{msg}");
        assert_eq!(shared_segment_used(), base);
        let again: Vec<GlobalPtr<u64>> = (0..64)
            .map(|i| new_array_with(i + 1, |_| i as u64))
            .collect();
        for (i, p) in again.into_iter().enumerate() {
            // SAFETY: this rank's fresh block of `i + 1` elements.
            assert_eq!(unsafe { p.local().add(i).read() }, i as u64);
            delete_array(p);
        }
        assert_eq!(shared_segment_used(), base);
        upcxx::barrier();
        upcxx::finalize();
    });
}
