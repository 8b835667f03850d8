//! Transfers to and from the device memory of other ranks (`gex::kinds::put`, `get`,
//! `copy`: our extension of the GASNet-EX API for UPC++ ch. 16) on 1 to 5 ranks, each
//! with a device segment on an emulated device, and again on a CUDA device where there
//! is one (the ranks sharing it): every pair of ranks, pieces larger than one Active
//! Message, device to device between two other ranks, and the errors; each with the
//! segments of this host's other ranks mapped (IPC, the default) and
//! with every transfer by messages (`GEX_KINDS_IPC=0`). Then what mapping promises: a
//! transfer that needs nothing of its owner (also on CUDA device 0 where there is one,
//! so that a CUDA IPC that fails, whose transfers would quietly take messages, fails
//! the test), an owner that frees a segment only once its importers have unmapped it,
//! and a finalization that unmaps them all.
mod common;

use common::expect_panic;
use gex::kinds::{self, DeviceSegment, Dst, KindError, Mk, Range, Src};
use gex::testing::{spmd, spmd_with, SpmdOptions};
use gex::{Client, Flags, Segment, Team};

const MIB: usize = 1 << 20;
/// Bytes each rank writes into each rank's device segment: many Medium AMs.
const REGION: usize = 300_000;

/// This rank's client, its primordial team and a host segment of 16 pages, whose first
/// words the tests use to exchange device addresses and flags.
fn init() -> (Client, Team, Segment) {
    let (client, _ep, team) = Client::init("KINDS", Flags::NONE).unwrap();
    let host = Segment::attach(&team, 16 * gex::PAGE_SIZE).unwrap();
    (client, team, host)
}

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

/// Options for `n` ranks, with mapping (IPC) on or off.
fn options(n: usize, ipc: bool) -> SpmdOptions {
    let mut o = SpmdOptions::new(n);
    o.env
        .push(("GEX_KINDS_IPC".into(), if ipc { "1" } else { "0" }.into()));
    o
}

#[test]
fn every_rank_puts_gets_and_copies_device_memory_of_every_rank() {
    for (n, ipc) in [1, 2, 3, 5]
        .into_iter()
        .flat_map(|n| [(n, true), (n, false)])
    {
        spmd_with(options(n, ipc), || {
            let (client, team, _host) = init();
            for mk in own_kinds(team.rank() as usize) {
                for wrapped in [false, true] {
                    puts_gets_and_copies(&team, &mk, wrapped);
                }
            }
            client.finalize();
        });
    }
}

/// The devices of rank `me` in the tests of transfers: an emulated one of its own, and
/// CUDA device `me % devices` where there is one (several ranks then share a device).
fn own_kinds(me: usize) -> Vec<Mk> {
    let mut all = vec![Mk::emulated(me as i32, 16 * MIB)];
    let n = Mk::cuda_device_count();
    if n > 0 {
        all.push(Mk::cuda(me as i32 % n).expect("a CUDA device"));
    } else if me == 0 {
        eprintln!("no CUDA device: transfers are tested on emulated devices only");
    }
    all
}

/// Puts, gets and device-to-device copies between every pair of ranks, each rank with
/// a device segment on `mk`: one the segment allocates, or, `wrapped`, one over part of
/// memory the test allocated (64 KiB into it: mapped by others at that offset into the
/// allocation); every segment dropped at the end.
fn puts_gets_and_copies(team: &Team, mk: &Mk, wrapped: bool) {
    let (me, size) = (team.rank() as usize, team.size() as usize);
    const SKIP: usize = 64 << 10;
    let (seg, raw) = if wrapped {
        let raw = mk.alloc_unmanaged(SKIP + 4 * MIB).unwrap();
        // SAFETY: allocated just above, freed below after the segment is dropped.
        let seg = unsafe { DeviceSegment::wrap(mk, raw + SKIP as u64, 4 * MIB) }.unwrap();
        (seg, Some(raw))
    } else {
        (DeviceSegment::create(mk, 4 * MIB).unwrap(), None)
    };
    let bases = device_bases(team, &seg);
    // Each rank writes its region of every rank's segment (its own too).
    let mine = pattern(REGION, me);
    for (r, base) in bases.iter().enumerate() {
        kinds::put(team, r as u32, base + (me * REGION) as u64, &mine).unwrap();
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
        kinds::get(team, r as u32, base + (w * REGION) as u64, &mut got).unwrap();
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
        team,
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
    if let Some(raw) = raw {
        // SAFETY: no segment holds it any more.
        unsafe { mk.free_unmanaged(raw) };
    }
}

#[test]
fn addresses_outside_device_segments_and_bad_ranks_are_errors_naming_the_call() {
    for (n, ipc) in [(1, true), (3, true), (3, false)] {
        spmd_with(options(n, ipc), || {
            common::quiet_expected_panics();
            let (client, team, _host) = init();
            for mk in own_kinds(team.rank() as usize) {
                refuses_bad_addresses(&team, &mk);
            }
            client.finalize();
        });
    }
}

/// Transfers outside the device segments (on `mk`) of this rank and the next, and to a
/// rank that does not exist: each an error naming the call, none writing anything.
fn refuses_bad_addresses(team: &Team, mk: &Mk) {
    let me = team.rank() as usize;
    let size = team.size() as usize;
    let seg = DeviceSegment::create(mk, MIB).unwrap();
    // Device memory starts with any values (CUDA's does): zeros, to be kept.
    let zeros = vec![0u8; MIB];
    let whole = Range {
        segment: &seg,
        offset: 0,
        len: MIB,
    };
    DeviceSegment::copy(Dst::Device(whole), Src::Host(&zeros)).unwrap();
    let bases = device_bases(team, &seg);
    let peer = (me + 1) % size;
    let data = pattern(70_000, me);
    // A range that runs past the end of the peer's segment: refused by the
    // owner, piece by piece, and reported once all are answered.
    let past = bases[peer] + (MIB - 1000) as u64;
    let e = kinds::put(team, peer as u32, past, &data).unwrap_err();
    assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
    let text = e.to_string();
    assert!(text.starts_with("gex::kinds::put: "), "{text}");
    assert!(text.contains(&format!("rank {peer}")), "{text}");
    let mut out = vec![0u8; 70_000];
    let e = kinds::get(team, peer as u32, past, &mut out).unwrap_err();
    assert!(e.to_string().starts_with("gex::kinds::get: "), "{e}");
    // One that starts well inside the segment (whole pieces of it in the segment) and
    // runs past its end: refused whole, none of its pieces written.
    let inside = bases[peer] + (MIB - 32 * 1024) as u64;
    let e = kinds::put(team, peer as u32, inside, &data).unwrap_err();
    assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
    let e = kinds::get(team, peer as u32, inside, &mut out).unwrap_err();
    assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
    // A host address is no device memory, here or there.
    let host = data.as_ptr() as u64;
    let e = kinds::put(team, me as u32, host, &data[..8]).unwrap_err();
    assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
    let e = kinds::copy(team, me as u32, bases[me], peer as u32, 64, 8).unwrap_err();
    assert!(e.to_string().starts_with("gex::kinds::copy: "), "{e}");
    // Overlapping ranges of this rank's one segment.
    let e = kinds::copy(team, me as u32, bases[me] + 8, me as u32, bases[me], 64).unwrap_err();
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
    // And of the peer's segment.
    let e = kinds::copy(
        team,
        peer as u32,
        bases[peer] + 8,
        peer as u32,
        bases[peer],
        64,
    );
    if peer != me {
        let e = e.unwrap_err();
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
    }
    // The refused transfers wrote nothing.
    team.barrier();
    assert!(
        read_local(&seg, 0, MIB).iter().all(|&b| b == 0),
        "rank {me}"
    );
    expect_panic(&["gex::kinds::put", "rank"], || {
        kinds::put(team, size as u32, bases[0], &data[..8])
    });
    team.barrier();
}

/// Reads word `i` of this rank's own host segment (written by another rank's put).
fn host_word(team: &Team, i: usize) -> u64 {
    let at = team.segment_bound(team.rank()).unwrap().owner_addr + 8 * i;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: a word of this rank's own segment, inside it (16 pages).
    unsafe { (at as *const u64).read_volatile() }
}

/// The devices each rank makes its segments on in the tests of mapping: an emulated
/// one, and CUDA device 0 where there is one (the ranks of a host share it, and CUDA
/// IPC maps memory between processes on one device).
fn mapping_kinds() -> Vec<Mk> {
    let mut all = vec![Mk::emulated(0, 16 * MIB)];
    if Mk::cuda_device_count() > 0 {
        all.push(Mk::cuda(0).expect("CUDA device 0"));
    } else {
        eprintln!("no CUDA device: mapping is tested on the emulated device only");
    }
    all
}

/// With the owner's segment mapped, a transfer needs nothing of the owner: rank 1 does
/// not poll (it sleeps) while rank 0 puts into its device segment 100 times and then
/// raises a flag in rank 1's host memory; by messages the first put would wait for rank
/// 1's handlers. On each device of [`mapping_kinds`].
#[test]
fn a_mapped_segment_is_reached_without_its_owner() {
    if gex::testing::skip_unless_one_host("the ranks must share a host to map segments") {
        return;
    }
    spmd(2, || {
        let (client, team, _host) = init();
        let me = team.rank();
        for (k, mk) in mapping_kinds().iter().enumerate() {
            let seg = DeviceSegment::create(mk, MIB).unwrap();
            let bases = device_bases(&team, &seg);
            let flag_at = team.segment_bound(1).unwrap().owner_addr + 8;
            let flag = 7 + k as u64;
            if me == 0 {
                kinds::put(&team, 1, bases[1], &[1u8; 8]).unwrap(); // maps it
            }
            team.barrier();
            if me == 0 {
                for i in 0..100u8 {
                    kinds::put(&team, 1, bases[1] + u64::from(i) * 64, &[i; 64]).unwrap();
                }
                team.put_blocking(1, flag_at, &flag.to_le_bytes(), Flags::NONE)
                    .unwrap();
            } else {
                let start = std::time::Instant::now();
                while host_word(&team, 1) != flag {
                    assert!(
                        start.elapsed() < std::time::Duration::from_secs(20),
                        "{mk:?}: the puts waited for this rank's attention"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let got = read_local(&seg, 0, 6400);
                for i in 0..100 {
                    assert!(
                        got[i * 64..(i + 1) * 64].iter().all(|&b| b == i as u8),
                        "{mk:?}: piece {i}"
                    );
                }
            }
            team.barrier();
            drop(seg);
        }
        client.finalize();
    });
}

/// An owner frees a segment only after its importers have unmapped it, so a later
/// segment (perhaps at the same address) is reached, not the old memory.
#[test]
fn a_freed_segment_is_unmapped_by_its_importers_first() {
    spmd(3, || {
        let (client, team, _host) = init();
        let me = team.rank() as usize;
        let mk = Mk::emulated(0, 16 * MIB);
        for round in 0..6u8 {
            let seg = DeviceSegment::create(&mk, MIB).unwrap();
            let bases = device_bases(&team, &seg);
            // Every rank writes its byte into every other rank's segment.
            for (r, base) in bases.iter().enumerate() {
                kinds::put(&team, r as u32, base + me as u64, &[round * 8 + me as u8]).unwrap();
            }
            team.barrier();
            let got = read_local(&seg, 0, 3);
            assert_eq!(
                got,
                [round * 8, round * 8 + 1, round * 8 + 2],
                "round {round}"
            );
            team.barrier();
            drop(seg); // its importers unmap it before the memory goes
        }
        client.finalize();
    });
}

/// The mappings of emulated device memory in this process.
fn emulated_mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .expect("read /proc/self/maps")
        .lines()
        .filter(|l| l.contains("gex-emulated-device"))
        .count()
}

/// Finalization unmaps the segments of other ranks that this process mapped, so an
/// owner that drops its segment after finalizing (when no importer would answer its
/// notice) frees memory that no other process maps.
#[test]
fn finalization_unmaps_the_segments_of_other_ranks() {
    if gex::testing::skip_unless_one_host("the ranks must share a host to map segments") {
        return;
    }
    spmd(2, || {
        let (client, team, _host) = init();
        let mk = Mk::emulated(0, 16 * MIB);
        let seg = DeviceSegment::create(&mk, MIB).unwrap();
        let bases = device_bases(&team, &seg);
        let peer = 1 - team.rank();
        kinds::put(&team, peer, bases[peer as usize], &[1u8; 8]).unwrap(); // maps it
        assert_eq!(emulated_mappings(), 2, "its own segment and its peer's");
        team.barrier();
        client.finalize();
        assert_eq!(emulated_mappings(), 1, "its own segment only");
        drop(seg);
        assert_eq!(emulated_mappings(), 0);
    });
}

/// A get from another rank's device memory whose wait runs a handler that panics
/// returns (unwinding) only once the pieces it sent have landed: their answers name a
/// record on its stack and write into the caller's buffer, which the unwinding could
/// free. With every transfer by messages, rank 0 asks rank 1 for a Reply whose handler
/// panics, then gets many pieces from rank 1's device segment: the panicking Reply was
/// sent first, so the panic comes out of the get, part-way (between hosts, while it is
/// still sending pieces); no byte may land in the buffer after that, and later gets
/// still work.
#[test]
fn a_get_unwinding_waits_for_its_answers() {
    const UNWOUND: usize = 8 * MIB;
    spmd_with(options(2, false), || {
        common::quiet_expected_panics();
        let (client, ep, team) = Client::init("KINDS_UNWIND", Flags::NONE).unwrap();
        let boom = common::am::PanickingReply::register(&ep);
        let _host = Segment::attach(&team, 16 * gex::PAGE_SIZE).unwrap();
        let me = team.rank() as usize;
        let mk = Mk::emulated(me as i32, 2 * UNWOUND);
        let seg = DeviceSegment::create(&mk, UNWOUND).unwrap();
        let bases = device_bases(&team, &seg);
        // Many pieces, so that the answers keep coming after the panic, and between
        // hosts more than the conduit lets be in flight, so that the sends wait (and
        // poll): the panic then comes out of them, part-way through the sending.
        let data = pattern(UNWOUND, 1);
        if me == 1 {
            kinds::put(&team, 1, bases[1], &data).unwrap();
        }
        team.barrier();
        if me == 0 {
            boom.ask(&team, 1);
            let mut got = vec![0u8; UNWOUND];
            let panic = common::try_panic_message(|| kinds::get(&team, 1, bases[1], &mut got));
            assert!(
                panic
                    .as_deref()
                    .is_some_and(|m| m.contains(common::am::BOOM)),
                "the get ran the panicking Reply: {panic:?}"
            );
            let unwound = got.clone();
            let end = std::time::Instant::now() + std::time::Duration::from_millis(100);
            while std::time::Instant::now() < end {
                gex::poll();
            }
            assert!(got == unwound, "bytes landed after the get unwound");
            let mut again = vec![0u8; UNWOUND];
            kinds::get(&team, 1, bases[1], &mut again).unwrap();
            assert!(again == data, "a get after the unwound one");
        }
        team.barrier();
        drop(seg);
        assert_eq!(mk.allocated(), 0);
        client.finalize();
    });
}

/// `put_nb`, `get_nb` and `copy_nb` to a rank reached by messages return before its
/// owner answers: rank 1 sleeps, out of the library, while rank 0 starts them (the
/// calls that wait for the answers would wait for it). Then each completes with its
/// data, one dropped in flight too, and an address outside rank 1's segment is the
/// outcome of the transfer, naming the call. Each transfer is of a few pieces: all of
/// them fit in the messages the conduit lets be in flight to one peer (between hosts,
/// 16 of about 4 KiB), beyond which a send waits for the peer.
#[test]
fn transfers_by_messages_are_left_in_flight() {
    const LEN: usize = 6_000;
    const NAP: std::time::Duration = std::time::Duration::from_millis(2000);
    spmd_with(options(2, false), || {
        let (client, team, _host) = init();
        let me = team.rank();
        let mk = Mk::emulated(me as i32, 16 * MIB);
        let seg = DeviceSegment::create(&mk, 4 * MIB).unwrap();
        let whole = Range {
            segment: &seg,
            offset: 0,
            len: LEN,
        };
        DeviceSegment::copy(Dst::Device(whole), Src::Host(&pattern(LEN, me as usize))).unwrap();
        let bases = device_bases(&team, &seg);
        if me == 1 {
            std::thread::sleep(NAP);
        } else {
            // Rank 1 is asleep by now.
            std::thread::sleep(NAP / 10);
            let started = std::time::Instant::now();
            let put = kinds::put_nb(&team, 1, bases[1] + MIB as u64, &pattern(LEN, 7)).unwrap();
            let mut got = vec![0u8; LEN];
            // SAFETY: `got` outlives the transfer, waited for below.
            let get = unsafe { kinds::get_nb(&team, 1, bases[1], got.as_mut_ptr(), LEN) }.unwrap();
            let copied =
                kinds::copy_nb(&team, 1, bases[1] + 2 * MIB as u64, 0, bases[0], LEN).unwrap();
            let dropped =
                kinds::put_nb(&team, 1, bases[1] + 3 * MIB as u64, &pattern(LEN, 9)).unwrap();
            let bad = kinds::put_nb(&team, 1, bases[1] + 4 * MIB as u64 - 8, &[1; 64]).unwrap();
            let took = started.elapsed();
            assert!(
                took < NAP / 2,
                "the transfers took {took:?} to start: they waited for the owner"
            );
            assert!(!put.completed_at_initiation());
            drop(dropped);
            assert_eq!(put.wait(), Ok(()));
            assert_eq!(get.wait(), Ok(()));
            assert!(got == pattern(LEN, 1), "the get's data");
            assert_eq!(copied.wait(), Ok(()));
            let e = bad.wait().unwrap_err();
            assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
            assert!(e.to_string().starts_with("gex::kinds::put_nb: "), "{e}");
        }
        // Rank 0's transfers are complete (the dropped one too: it was sent before the
        // bad one, whose answer rank 0 waited for, and each rank's messages to one peer
        // are handled in order).
        team.barrier();
        team.barrier();
        if me == 1 {
            assert!(read_local(&seg, MIB, LEN) == pattern(LEN, 7), "the put");
            assert!(
                read_local(&seg, 2 * MIB, LEN) == pattern(LEN, 0),
                "the copy"
            );
            assert!(
                read_local(&seg, 3 * MIB, LEN) == pattern(LEN, 9),
                "the dropped put"
            );
        }
        team.barrier();
        drop(seg);
        client.finalize();
    });
}

/// Dropping a segment that other ranks map means telling them and waiting for their
/// answers: communication, refused while holding a handler-safe lock (as inside a
/// handler) before any message goes out.
#[test]
fn dropping_a_mapped_segment_while_holding_an_hsl_is_refused() {
    // Between hosts no rank maps another's segment: its drop tells no one.
    if gex::testing::skip_unless_one_host("a segment that another rank maps") {
        return;
    }
    spmd(2, || {
        common::quiet_expected_panics();
        let (client, team, _host) = init();
        let me = team.rank() as usize;
        let mk = Mk::emulated(0, 16 * MIB);
        let seg = DeviceSegment::create(&mk, MIB).unwrap();
        let bases = device_bases(&team, &seg);
        for (r, base) in bases.iter().enumerate() {
            kinds::put(&team, r as u32, base + me as u64, &[1]).unwrap();
        }
        team.barrier();
        let lock = gex::Hsl::new();
        lock.lock();
        let msg = common::try_panic_message(move || drop(seg));
        lock.unlock();
        let msg = msg.expect("the drop is refused");
        assert!(
            msg.contains("kinds::DeviceSegment::drop") && msg.contains("handler-safe lock"),
            "{msg}"
        );
        team.barrier();
        client.finalize();
    });
}
