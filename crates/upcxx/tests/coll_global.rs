//! The broadcast of a buffer in the shared segment (UPC++ spec §12.2 ¶37 `broadcast(buffer,
//! count, root, team)`, buffer named by a global pointer: `coll::broadcast_global`) on 1
//! to 5 ranks, from every root, up to 1 MiB, over the world and split teams, and what
//! misuse does.

mod common;

use common::{all_gather, panic_text};
use gex::testing::spmd;
use upcxx::coll::broadcast_global;
use upcxx::{rank_me, world, EntryBarrier, GlobalPtr, Team};

/// Element `i` of the buffer that `root` broadcasts in round `round`.
fn pattern(round: usize, root: u32, i: usize) -> u64 {
    ((round as u64) << 48) ^ (u64::from(root) << 32) ^ (i as u64).wrapping_mul(0x9e37_79b9)
}

/// This rank's `count` elements at `buf`, as a slice.
///
/// # Safety
/// No collective may be in flight on the buffer, and nobody else may access it while
/// the slice lives.
unsafe fn elements<'a>(buf: GlobalPtr<u64>, count: usize) -> &'a mut [u64] {
    // SAFETY: the caller's contract; `buf` is this rank's allocation of `count` elements.
    unsafe { std::slice::from_raw_parts_mut(buf.local(), count) }
}

/// Broadcasts from every root of `team` at every size, checking every element on every
/// rank.
fn from_every_root(team: &Team) {
    const MAX: usize = (1 << 20) / 8;
    let buf = upcxx::new_array::<u64>(MAX);
    let me = team.rank_me();
    let mut round = 0;
    for count in [0, 1, 3, 1000, 8192, MAX] {
        for root in 0..team.rank_n() {
            // SAFETY: no collective is in flight on `buf` between two rounds.
            let mine = unsafe { elements(buf, count) };
            for (i, x) in mine.iter_mut().enumerate() {
                *x = if me == root {
                    pattern(round, root, i)
                } else {
                    !0
                };
            }
            broadcast_global(buf, count, root, team).wait();
            // SAFETY: as above, after operation completion.
            let got = unsafe { elements(buf, count) };
            if let Some(i) = (0..count).find(|&i| got[i] != pattern(round, root, i)) {
                panic!(
                    "rank {me} of {}: element {i} of {count} from root {root} is {:#x}",
                    team.rank_n(),
                    got[i]
                );
            }
            round += 1;
        }
    }
    upcxx::coll::barrier(team);
    upcxx::delete_array(buf);
}

#[test]
fn every_root_and_size_on_1_to_5_ranks() {
    for ranks in 1..=5 {
        spmd(ranks, || {
            upcxx::init();
            from_every_root(world());
            upcxx::finalize();
        });
    }
}

/// Roots are team ranks (§11.1 ¶2); each team broadcasts on its own.
#[test]
fn every_root_and_size_over_split_teams() {
    spmd(5, || {
        upcxx::init();
        let me = rank_me();
        let t = world().split((me % 2) as i32, -(me as i32));
        from_every_root(&t);
        t.destroy(EntryBarrier::User);
        upcxx::finalize();
    });
}

/// Several broadcasts in flight on one team, waited in reverse order.
#[test]
fn broadcasts_in_flight_complete_in_any_order() {
    spmd(3, || {
        upcxx::init();
        let bufs: Vec<GlobalPtr<u64>> = (0..4).map(|_| upcxx::new_array::<u64>(4096)).collect();
        for (k, &b) in bufs.iter().enumerate() {
            // SAFETY: fresh allocations, no collective on them yet.
            let mine = unsafe { elements(b, 4096) };
            mine.iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = pattern(k, rank_me(), i));
        }
        let fs: Vec<_> = bufs
            .iter()
            .enumerate()
            .map(|(k, &b)| broadcast_global(b, 4096, (k % 3) as u32, world()))
            .collect();
        for f in fs.into_iter().rev() {
            f.wait();
        }
        for (k, &b) in bufs.iter().enumerate() {
            // SAFETY: every broadcast completed.
            let got = unsafe { elements(b, 4096) };
            let root = (k % 3) as u32;
            assert!(got
                .iter()
                .enumerate()
                .all(|(i, &x)| x == pattern(k, root, i)));
        }
        upcxx::barrier();
        bufs.into_iter().for_each(upcxx::delete_array);
        upcxx::finalize();
    });
}

#[test]
fn buffers_not_in_this_ranks_segment_fail_naming_the_call() {
    spmd(2, || {
        upcxx::init();
        let msg = panic_text(|| drop(broadcast_global(GlobalPtr::<u64>::null(), 1, 0, world())));
        assert!(
            msg.contains("upcxx::broadcast_global") && msg.contains("null"),
            "{msg}"
        );
        let buf = upcxx::new_array::<u64>(8);
        let theirs = all_gather(&buf)[0];
        if rank_me() == 1 {
            let msg = panic_text(|| drop(broadcast_global(theirs, 8, 0, world())));
            assert!(msg.contains("segment of rank 0"), "{msg}");
        }
        let too_many = upcxx::shared_segment_size() / 8 + 1;
        let msg = panic_text(|| drop(broadcast_global(buf, too_many, 0, world())));
        assert!(
            msg.contains("upcxx::broadcast_global") && msg.contains("shared segment"),
            "{msg}"
        );
        upcxx::barrier();
        upcxx::delete_array(buf);
        upcxx::finalize();
    });
}
