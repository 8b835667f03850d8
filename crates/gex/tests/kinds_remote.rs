//! Transfers to and from the device memory of other ranks (`gex::kinds::put`, `get`,
//! `copy`: our extension of the GASNet-EX API for UPC++ ch. 16) on 1 to 5 ranks, each
//! with a device segment on an emulated device: every pair of ranks, pieces larger
//! than one Active Message, device to device between two other ranks, and the errors.
mod common;

use common::expect_panic;
use gex::kinds::{self, DeviceSegment, Dst, KindError, Mk, Range, Src};
use gex::testing::spmd;
use gex::{Client, Flags, Segment, Team};

const MIB: usize = 1 << 20;
/// Bytes each rank writes into each rank's device segment: many Medium AMs.
const REGION: usize = 300_000;

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(7) + seed * 13) as u8)
        .collect()
}

/// Every rank's device segment base, exchanged through the host segments.
fn device_bases(team: &Team, seg: &DeviceSegment) -> Vec<u64> {
    let me = team.rank();
    let host = team.segment_bound(me).unwrap().owner_addr;
    // SAFETY: the first word of this rank's own segment, written before the barrier.
    unsafe { (host as *mut u64).write_volatile(seg.base()) };
    team.barrier();
    (0..team.size())
        .map(|r| {
            let mut b = [0u8; 8];
            let at = team.segment_bound(r).unwrap().owner_addr;
            team.get_blocking(&mut b, r, at, Flags::NONE).unwrap();
            u64::from_le_bytes(b)
        })
        .collect()
}

fn read_local(seg: &DeviceSegment, offset: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let range = Range {
        segment: seg,
        offset,
        len,
    };
    DeviceSegment::copy(Dst::Host(&mut out), Src::Device(range)).unwrap();
    out
}

#[test]
fn every_rank_puts_gets_and_copies_device_memory_of_every_rank() {
    for n in [1, 2, 3, 5] {
        spmd(n, || {
            let (client, _ep, team) = Client::init("KINDS", Flags::NONE).unwrap();
            let _host = Segment::attach(&team, 16 * gex::PAGE_SIZE).unwrap();
            let (me, size) = (team.rank() as usize, team.size() as usize);
            let mk = Mk::emulated(me as i32, 16 * MIB);
            let seg = DeviceSegment::create(&mk, 4 * MIB).unwrap();
            let bases = device_bases(&team, &seg);
            // Each rank writes its region of every rank's segment (its own too).
            let mine = pattern(REGION, me);
            for (r, base) in bases.iter().enumerate() {
                kinds::put(&team, r as u32, base + (me * REGION) as u64, &mine).unwrap();
            }
            team.barrier();
            for w in 0..size {
                assert_eq!(
                    read_local(&seg, w * REGION, REGION),
                    pattern(REGION, w),
                    "rank {me}: the region rank {w} put"
                );
            }
            // Gets of every rank's region from every rank.
            for (r, base) in bases.iter().enumerate() {
                let mut got = vec![0u8; REGION];
                let w = (me + r) % size;
                kinds::get(&team, r as u32, base + (w * REGION) as u64, &mut got).unwrap();
                assert!(
                    got == pattern(REGION, w),
                    "rank {me}: region {w} of rank {r}"
                );
            }
            team.barrier();
            // Device to device: from the next rank's segment to the one after it,
            // into its upper half, then checked by the owner.
            let (from, to) = ((me + 1) % size, (me + 2) % size);
            let upper = 2 * MIB + me * REGION;
            kinds::copy(
                &team,
                to as u32,
                bases[to] + upper as u64,
                from as u32,
                bases[from] + (me * REGION) as u64,
                REGION,
            )
            .unwrap();
            team.barrier();
            // The rank two places back copied into this one.
            let w = (me + 2 * size - 2) % size;
            assert!(
                read_local(&seg, 2 * MIB + w * REGION, REGION) == pattern(REGION, w),
                "rank {me}: the copy rank {w} made into it"
            );
            team.barrier();
            drop(seg);
            assert_eq!(mk.allocated(), 0);
            client.finalize();
        });
    }
}

#[test]
fn addresses_outside_device_segments_and_bad_ranks_are_errors_naming_the_call() {
    for n in [1, 3] {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("KINDS", Flags::NONE).unwrap();
            let _host = Segment::attach(&team, 16 * gex::PAGE_SIZE).unwrap();
            let me = team.rank() as usize;
            let size = team.size() as usize;
            let mk = Mk::emulated(0, 16 * MIB);
            let seg = DeviceSegment::create(&mk, MIB).unwrap();
            let bases = device_bases(&team, &seg);
            let peer = (me + 1) % size;
            let data = pattern(70_000, me);
            // A range that runs past the end of the peer's segment: refused by the
            // owner, piece by piece, and reported once all are answered.
            let past = bases[peer] + (MIB - 1000) as u64;
            let e = kinds::put(&team, peer as u32, past, &data).unwrap_err();
            assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
            let text = e.to_string();
            assert!(text.starts_with("gex::kinds::put: "), "{text}");
            assert!(text.contains(&format!("rank {peer}")), "{text}");
            let mut out = vec![0u8; 70_000];
            let e = kinds::get(&team, peer as u32, past, &mut out).unwrap_err();
            assert!(e.to_string().starts_with("gex::kinds::get: "), "{e}");
            // A host address is no device memory, here or there.
            let host = data.as_ptr() as u64;
            let e = kinds::put(&team, me as u32, host, &data[..8]).unwrap_err();
            assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
            let e = kinds::copy(&team, me as u32, bases[me], peer as u32, 64, 8).unwrap_err();
            assert!(e.to_string().starts_with("gex::kinds::copy: "), "{e}");
            // Overlapping ranges of this rank's one segment.
            let e =
                kinds::copy(&team, me as u32, bases[me] + 8, me as u32, bases[me], 64).unwrap_err();
            assert!(
                matches!(
                    e,
                    KindError::Overlap {
                        dst: 8,
                        src: 0,
                        len: 64,
                        ..
                    }
                ),
                "{e}"
            );
            // The refused transfers wrote nothing.
            team.barrier();
            assert!(
                read_local(&seg, 0, MIB).iter().all(|&b| b == 0),
                "rank {me}"
            );
            expect_panic(&["gex::kinds::put", "rank"], || {
                kinds::put(&team, size as u32, bases[0], &data[..8])
            });
            team.barrier();
            client.finalize();
        });
    }
}
