//! Memory kinds (UPC++ spec ch. 16): `cuda_device` (§16.1.1), `device_allocator`
//! (§16.1.2) and `copy` (§16.1.3) in every direction between host and device memory
//! (and between host memory of two ranks), local and remote, on 1 to 4 ranks, with
//! every completion of §16.1.3 ¶5–¶7; and the errors.
//!
//! The devices are emulated (`gex::kinds::Mk::emulated`, through
//! `CudaDevice::with_kind`), so every machine runs the device-independent machinery;
//! `cuda_devices_copy_in_every_direction` runs the same copies on CUDA devices and
//! prints that it was skipped where there is none.

mod common;
use common::{all_gather, panic_text};

use std::sync::atomic::{AtomicU64, Ordering};

use gex::kinds::Mk;
use upcxx::{
    copy, copy_from_host, copy_to_host, copy_to_host_with, copy_with, delete_array, new_array,
    operation_cx, rank_me, rank_n, remote_cx, source_cx, CudaDevice, CudaDeviceKind, DeviceAddr,
    DeviceAllocator, EntryBarrier, GlobalPtr, KindError, Promise,
};

const MIB: usize = 1 << 20;
/// Values each rank moves per direction and target: several Active Messages' worth.
const N: usize = 20_000;

fn values(seed: usize, salt: u64) -> Vec<u64> {
    (0..N as u64)
        .map(|i| i * 0x9e37_79b9 + seed as u64 * 1_000_003 + salt)
        .collect()
}

fn read_device(src: GlobalPtr<u64, CudaDeviceKind>) -> Vec<u64> {
    let mut out = vec![0u64; N];
    copy_to_host(src, &mut out).wait();
    out
}

/// Every direction of `copy` from every rank to every rank, on the devices given.
fn every_direction(mut dev: CudaDevice) {
    let me = rank_me() as usize;
    let n = rank_n() as usize;
    let alloc = DeviceAllocator::new(&mut dev, 8 * n * N * 8 + MIB).unwrap();
    // Per initiator: two device regions and one host region at every rank.
    let dregion = alloc.allocate::<u64>(2 * n * N);
    let hregion: GlobalPtr<u64> = new_array(n * N);
    assert!(!dregion.is_null());
    assert_eq!(
        DeviceAllocator::<CudaDevice>::device_id(dregion),
        dev.device_id()
    );
    let all = all_gather(&(dregion, hregion));
    for (t, &(d, h)) in all.iter().enumerate() {
        let (d1, d2) = (d.add(me * N), d.add((n + me) * N));
        let hmine = h.add(me * N);
        // Host slice to the device of `t`, and back into a slice.
        let v = values(me, t as u64);
        copy_from_host(&v, d1).wait();
        assert_eq!(read_device(d1), v, "rank {me}: host slice -> device of {t}");
        // The device of `t` to host memory of `t` (remote host), then that host
        // memory to a device of the next rank (remote to remote), and back.
        copy(d1, hmine, N).wait();
        let next = &all[(t + 1) % n];
        let dnext = next.0.add(me * N);
        let v2 = values(me, 1000 + t as u64);
        copy_from_host(&v2, d2).wait();
        copy(hmine, dnext, N).wait();
        assert_eq!(
            read_device(dnext),
            v,
            "rank {me}: host of {t} -> device of next"
        );
        // Device to device between two other ranks' devices (or the same one).
        copy(d2, dnext, N).wait();
        assert_eq!(
            read_device(dnext),
            v2,
            "rank {me}: device of {t} -> device of next"
        );
        // Host memory of this rank to host memory of `t` and back (with every rank its
        // own host, one put or get that completes in progress), the source overwritten
        // once source completion says it may be.
        let own: GlobalPtr<u64> = new_array(N);
        let back: GlobalPtr<u64> = new_array(N);
        let v3 = values(me, 2000 + t as u64);
        // SAFETY: this rank's own arrays of N values, which no other rank accesses.
        let (own_local, back_local) = unsafe {
            (
                std::slice::from_raw_parts_mut(own.local(), N),
                std::slice::from_raw_parts(back.local(), N),
            )
        };
        own_local.copy_from_slice(&v3);
        let (sent, done) = copy_with(
            own,
            hmine,
            N,
            source_cx::as_future() | operation_cx::as_future(),
        );
        sent.wait();
        own_local.fill(0);
        done.wait();
        copy(hmine, back, N).wait();
        assert_eq!(
            back_local,
            &v3[..],
            "rank {me}: own host -> host of {t} -> own host"
        );
        delete_array(own);
        delete_array(back);
        // The device of `t` into this rank's own host memory, through a global pointer.
        let mine: GlobalPtr<u64> = new_array(N);
        copy(d2, mine, N).wait();
        // SAFETY: this rank's own array of N values, written by the finished copy.
        let got = unsafe { std::slice::from_raw_parts(mine.local(), N) };
        assert_eq!(got, &v2[..], "rank {me}: device of {t} -> own host");
        delete_array(mine);
    }
    upcxx::barrier();
    alloc.deallocate(dregion);
    assert_eq!(alloc.used(), 0);
    delete_array(hregion);
    drop(alloc);
    dev.destroy(EntryBarrier::User);
}

#[test]
fn copy_moves_every_direction_between_every_pair_of_ranks() {
    for n in [1, 2, 3, 4] {
        gex::testing::spmd(n, || {
            upcxx::init();
            every_direction(CudaDevice::with_kind(Mk::emulated(
                rank_me() as i32,
                256 * MIB,
            )));
            upcxx::finalize();
        });
    }
}

#[test]
fn cuda_devices_copy_in_every_direction() {
    let count = CudaDevice::device_count();
    if count == 0 {
        eprintln!("cuda_devices_copy_in_every_direction: no CUDA device: skipped");
        return;
    }
    for (n, ipc) in [1, 2, 4].into_iter().flat_map(|n| [(n, true), (n, false)]) {
        gex::testing::spmd_with(options(n, ipc), move || {
            upcxx::init();
            let id = rank_me() as i32 % count;
            every_direction(CudaDevice::new(id).expect("a CUDA device"));
            upcxx::finalize();
        });
    }
}

/// Options for a job of `n` ranks whose device segments are mapped by the other ranks
/// of the host (CUDA IPC, the default) or reached by messages only (`GEX_KINDS_IPC=0`:
/// the owner's bounce through host memory).
fn options(n: usize, ipc: bool) -> gex::testing::SpmdOptions {
    let mut o = gex::testing::SpmdOptions::new(n);
    o.env
        .push(("GEX_KINDS_IPC".into(), if ipc { "1" } else { "0" }.into()));
    o
}

/// §16.1.3 ¶3: `copy` initiates. A copy whose device end is reached by messages
/// (another host, or with mapping off) returns before the owner answers: rank 1 sleeps,
/// out of the library, while rank 0 copies host memory (a slice, and its segment) to
/// rank 1's device, its own device memory to rank 1's, and rank 1's device memory into
/// its segment; then each completes with its data, on emulated devices and on CUDA
/// devices where there are some. The copies are small: between hosts all their messages
/// fit in what the conduit lets be in flight to one peer.
#[test]
fn copies_by_messages_return_before_they_complete() {
    const NAP: std::time::Duration = std::time::Duration::from_millis(2000);
    const M: usize = 500;
    let count = CudaDevice::device_count();
    for cuda in [false, true] {
        if cuda && count == 0 {
            eprintln!(
                "copies_by_messages_return_before_they_complete: no CUDA device: the CUDA \
                 part is skipped"
            );
            continue;
        }
        gex::testing::spmd_with(options(2, false), move || {
            upcxx::init();
            let me = rank_me();
            let mut dev = if cuda {
                CudaDevice::new(me as i32 % count).expect("a CUDA device")
            } else {
                CudaDevice::with_kind(Mk::emulated(me as i32, 64 * MIB))
            };
            let alloc = DeviceAllocator::new(&mut dev, MIB).unwrap();
            let mine = alloc.allocate::<u64>(4 * M);
            let host: GlobalPtr<u64> = new_array(2 * M);
            let v = values(me as usize, 5)[..M].to_vec();
            copy_from_host(&v, mine).wait();
            let all = all_gather(&mine);
            let peer = all[1];
            if me == 1 {
                std::thread::sleep(NAP);
            } else {
                std::thread::sleep(NAP / 10);
                // SAFETY: this rank's own array, which no other rank touches.
                unsafe { std::slice::from_raw_parts_mut(host.local(), M) }
                    .copy_from_slice(&values(0, 6)[..M]);
                let started = std::time::Instant::now();
                let from_slice = copy_from_host(&values(0, 7)[..M], peer.add(M));
                let from_segment = copy(host, peer.add(2 * M), M);
                let device_to_device = copy(mine, peer.add(3 * M), M);
                let into_segment = copy(peer, host.add(M), M);
                let took = started.elapsed();
                assert!(
                    took < NAP / 2,
                    "the copies took {took:?}: they waited for rank 1"
                );
                upcxx::when_all((from_slice, from_segment, device_to_device, into_segment)).wait();
                // SAFETY: as above; the copy into it is complete.
                let got = unsafe { std::slice::from_raw_parts(host.local().add(M), M) };
                assert!(got == &values(1, 5)[..M], "rank 1's device memory, here");
            }
            upcxx::barrier();
            if me == 1 {
                let mut got = vec![0u64; 3 * M];
                copy_to_host(mine.add(M), &mut got).wait();
                assert!(got[..M] == values(0, 7)[..M], "from a slice");
                assert!(got[M..2 * M] == values(0, 6)[..M], "from rank 0's segment");
                assert!(got[2 * M..] == values(0, 5)[..M], "from rank 0's device");
            }
            upcxx::barrier();
            delete_array(host);
            alloc.deallocate(mine);
            drop(alloc);
            dev.destroy(EntryBarrier::User);
            upcxx::finalize();
        });
    }
}

static REMOTE_RAN: AtomicU64 = AtomicU64::new(0);

fn landed(at: GlobalPtr<u64, CudaDeviceKind>, want: u64) {
    // §16.1.3 ¶6: remote completion implies the values are at the destination.
    // A copy writes a host destination before it returns; waiting for its future
    // here, in the restricted context, would not be allowed (§10.2).
    let mut got = [0u64; 1];
    drop(copy_to_host(at, &mut got));
    assert_eq!(got[0], want, "remote completion ran before the data landed");
    REMOTE_RAN.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn completions_are_delivered_as_chapter_7_says() {
    for n in [1, 2, 3] {
        gex::testing::spmd(n, || {
            upcxx::init();
            completions(CudaDevice::with_kind(Mk::emulated(0, 64 * MIB)));
            upcxx::finalize();
        });
    }
    let count = CudaDevice::device_count();
    if count == 0 {
        eprintln!("completions_are_delivered_as_chapter_7_says: no CUDA device: skipped");
        return;
    }
    for (n, ipc) in [1, 2, 4].into_iter().flat_map(|n| [(n, true), (n, false)]) {
        gex::testing::spmd_with(options(n, ipc), move || {
            upcxx::init();
            completions(CudaDevice::new(rank_me() as i32 % count).expect("a CUDA device"));
            upcxx::finalize();
        });
    }
}

/// Every completion of a copy, on the devices given: each rank copies into the next
/// rank's device memory (its own on 1 rank).
fn completions(mut dev: CudaDevice) {
    let me = rank_me();
    let alloc = DeviceAllocator::new(&mut dev, MIB).unwrap();
    let mine = alloc.allocate::<u64>(64);
    let all = all_gather(&mine);
    let peer = all[((me + 1) % rank_n()) as usize];
    let src = [7u64 + u64::from(me); 64];
    // Source and operation futures, ready at the next progress (§7.1 ¶14).
    let (s, o) = upcxx::copy_from_host_with(
        &src,
        peer,
        source_cx::as_future() | operation_cx::as_future(),
    );
    s.wait();
    o.wait();
    // A promise, and a remote completion run by the destination's owner.
    let p = Promise::<()>::new();
    let () = upcxx::copy_from_host_with(
        &src[..1],
        peer.add(1),
        operation_cx::as_promise(&p) | remote_cx::as_rpc(landed, (peer.add(1), 7 + u64::from(me))),
    );
    p.finalize().wait();
    // The previous rank's copies into this rank's memory are done (they finish inside
    // their calls) before this rank writes `mine[2]` below.
    upcxx::barrier();
    // copy between global pointers, with an LPC.
    let hits = std::sync::Arc::new(AtomicU64::new(0));
    let h2 = hits.clone();
    let () = copy_with(
        peer,
        mine.add(2),
        1,
        operation_cx::as_lpc(&upcxx::current_persona(), move || {
            h2.fetch_add(1, Ordering::SeqCst);
        }),
    );
    while hits.load(Ordering::SeqCst) == 0 {
        upcxx::progress(upcxx::ProgressLevel::User);
    }
    // A remote completion of a copy into host memory of this process runs here.
    let mut out = [0u64; 1];
    let before = REMOTE_RAN.load(Ordering::SeqCst);
    let () = copy_to_host_with(
        mine.add(2),
        &mut out,
        remote_cx::as_rpc(landed, (mine.add(2), 7 + u64::from(me))),
    );
    while REMOTE_RAN.load(Ordering::SeqCst) == before {
        upcxx::progress(upcxx::ProgressLevel::User);
    }
    upcxx::barrier();
    // Each rank ran the remote completions of the previous rank's first copy and its
    // own.
    while REMOTE_RAN.load(Ordering::SeqCst) < 2 {
        upcxx::progress(upcxx::ProgressLevel::User);
    }
    upcxx::barrier();
    alloc.deallocate(mine);
    drop(alloc);
    dev.destroy(EntryBarrier::User);
}

#[test]
fn the_allocator_allocates_aligned_frees_and_reports_null_when_full() {
    gex::testing::spmd(1, || {
        upcxx::init();
        let mut dev = CudaDevice::with_kind(Mk::emulated(3, 64 * MIB));
        assert!(dev.is_active());
        assert_eq!(dev.device_id(), 3);
        let alloc = DeviceAllocator::new(&mut dev, MIB).unwrap();
        let a = alloc.allocate_aligned::<u8>(100, 4096);
        assert_eq!(DeviceAllocator::<CudaDevice>::local(a) % 4096, 0);
        let b = alloc.allocate::<u64>(1000);
        assert_eq!(DeviceAllocator::<CudaDevice>::local(b) % 8, 0);
        assert_eq!(b.where_(), rank_me());
        assert_eq!(b.dynamic_kind(), upcxx::KindId::CudaDevice);
        assert!(!b.is_local(), "device memory is never local");
        // to_global_ptr and local are inverses.
        let raw = DeviceAllocator::<CudaDevice>::local(b.add(10));
        assert_eq!(alloc.to_global_ptr::<u64>(raw), b.add(10));
        assert_eq!(DeviceAllocator::<CudaDevice>::device_id(b.add(10)), 3);
        assert_eq!(
            DeviceAllocator::<CudaDevice>::device_id(GlobalPtr::<u64, CudaDeviceKind>::null()),
            CudaDevice::INVALID_DEVICE_ID
        );
        // §16.1.1 ¶8: a null global pointer's address is the null pointer, which no
        // allocation has.
        let null: DeviceAddr =
            DeviceAllocator::<CudaDevice>::local(GlobalPtr::<u64, CudaDeviceKind>::null());
        assert_eq!(null, CudaDevice::null_pointer());
        assert_ne!(raw, CudaDevice::null_pointer());
        // Full: null, and room again after a free. A request whose size with its
        // alignment overflows is null too, not a wrapped small block.
        assert!(alloc.allocate::<u8>(MIB).is_null());
        assert!(alloc.allocate_aligned::<u8>(usize::MAX, 4).is_null());
        assert!(alloc.allocate_aligned::<u8>(usize::MAX, 2).is_null());
        // Sizes that fit a u64 but not twice over, nor the segment.
        assert!(alloc.allocate::<u64>(1 << 60).is_null());
        assert!(alloc.allocate_aligned::<u8>(1, 1 << 63).is_null());
        alloc.deallocate(a);
        alloc.deallocate(b);
        assert_eq!(alloc.used(), 0);
        let whole = alloc.allocate::<u8>(MIB);
        assert!(
            !whole.is_null(),
            "freed ranges merge back into the whole segment"
        );
        alloc.deallocate(whole);
        alloc.deallocate(GlobalPtr::<u8, CudaDeviceKind>::null());
        drop(alloc);
        dev.destroy(EntryBarrier::None);
        upcxx::finalize();
    });
}

/// §16.1.2 ¶13–¶16, ¶21: an allocator over device memory the program allocated
/// serves allocations that every rank copies into, refuses memory that is not the
/// device's or that another allocator manages, and leaves the memory (and what it
/// holds) to the program when dropped. On emulated devices and, where there is one, a
/// CUDA device, on 1 to 3 ranks.
#[test]
fn an_allocator_over_the_programs_memory_leaves_it_to_the_program() {
    for n in [1, 2, 3] {
        gex::testing::spmd(n, || {
            upcxx::init();
            over_program_memory(Mk::emulated(rank_me() as i32, 64 * MIB));
            upcxx::finalize();
        });
    }
    let count = CudaDevice::device_count();
    if count == 0 {
        eprintln!(
            "an_allocator_over_the_programs_memory_leaves_it_to_the_program: no CUDA \
             device: the CUDA part is skipped"
        );
        return;
    }
    for n in [1, 2, 3] {
        gex::testing::spmd(n, move || {
            upcxx::init();
            over_program_memory(Mk::cuda(rank_me() as i32 % count).expect("a CUDA device"));
            upcxx::finalize();
        });
    }
}

/// [`an_allocator_over_the_programs_memory_leaves_it_to_the_program`] on devices of
/// `mk`'s kind, the program's memory allocated through `mk`.
fn over_program_memory(mk: Mk) {
    let (me, n) = (rank_me() as usize, rank_n() as usize);
    let raw = mk.alloc_unmanaged(2 * MIB).unwrap();
    let mut dev = CudaDevice::with_kind(mk.clone());
    // SAFETY: `raw` is freed at the end, after every segment over it.
    let alloc = unsafe { DeviceAllocator::with_memory(&mut dev, raw + 4096, MIB) }.unwrap();
    let mine = alloc.allocate::<u64>(N / 4);
    assert_eq!(
        DeviceAllocator::<CudaDevice>::local(mine),
        raw + 4096,
        "the first allocation starts the program's memory"
    );
    let all = all_gather(&mine);
    let next = all[(me + 1) % n];
    let v = values(me, 3)[..N / 4].to_vec();
    copy_from_host(&v, next).wait();
    upcxx::barrier();
    let from = (me + n - 1) % n;
    let mut got = vec![0u64; N / 4];
    copy_to_host(mine, &mut got).wait();
    assert!(
        got == values(from, 3)[..N / 4],
        "rank {me}: the copy of rank {from}"
    );
    // Memory another allocator manages, memory of no device: refused.
    let mut other = CudaDevice::with_kind(mk.clone());
    // SAFETY: `raw` is freed at the end, after every segment over it.
    let e = unsafe { DeviceAllocator::with_memory(&mut other, raw + 8192, 4096) }.unwrap_err();
    assert!(matches!(e, KindError::InUse { .. }), "{e}");
    let host = vec![0u8; 4096];
    // SAFETY: `raw` is freed at the end, after every segment over it.
    let e = unsafe { DeviceAllocator::with_memory(&mut other, host.as_ptr() as u64, 4096) }
        .unwrap_err();
    assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
    upcxx::barrier();
    drop(alloc);
    dev.destroy(EntryBarrier::User);
    // The memory and its values outlive the allocator.
    // SAFETY: `raw` is freed at the end, after every segment over it.
    let whole = unsafe { DeviceAllocator::with_memory(&mut other, raw, 2 * MIB) }.unwrap();
    let again = whole.to_global_ptr::<u64>(raw + 4096);
    let mut kept = vec![0u64; N / 4];
    copy_to_host(again, &mut kept).wait();
    assert!(kept == got, "rank {me}: the memory kept its values");
    drop(whole);
    other.destroy(EntryBarrier::User);
    // SAFETY: no allocator manages it any more.
    unsafe { mk.free_unmanaged(raw) };
}

#[test]
fn devices_are_created_and_destroyed_collectively_and_bad_ids_say_why() {
    for n in [1, 3] {
        gex::testing::spmd(n, || {
            upcxx::init();
            // Inactive devices take part in the collective (§16.1.1 ¶3).
            let mut d = if rank_me().is_multiple_of(2) {
                CudaDevice::with_kind(Mk::emulated(0, MIB))
            } else {
                CudaDevice::new(CudaDevice::INVALID_DEVICE_ID).unwrap()
            };
            assert_eq!(d.is_active(), rank_me().is_multiple_of(2));
            d.destroy(EntryBarrier::User);
            assert!(!d.is_active());
            assert_eq!(d.device_id(), CudaDevice::INVALID_DEVICE_ID);
            // A valid-looking id this process cannot open: the reason, after the
            // collective part (every rank gets here).
            let count = CudaDevice::device_count();
            let e = CudaDevice::new(count + 7).unwrap_err();
            assert!(
                matches!(
                    e,
                    KindError::NoDriver { .. } | KindError::NoSuchDevice { .. }
                ),
                "{e}"
            );
            assert!(e.to_string().starts_with("gex::kinds::Mk::cuda"), "{e}");
            upcxx::finalize();
        });
    }
}

#[test]
fn bad_calls_fail_naming_the_call() {
    gex::testing::spmd(2, || {
        upcxx::init();
        bad_calls(
            CudaDevice::with_kind(Mk::emulated(0, 64 * MIB)),
            CudaDevice::with_kind(Mk::emulated(1, MIB)),
            2 * MIB,
        );
        upcxx::finalize();
    });
    let count = CudaDevice::device_count();
    if count == 0 {
        eprintln!("bad_calls_fail_naming_the_call: no CUDA device: the CUDA part is skipped");
        return;
    }
    for ipc in [true, false] {
        gex::testing::spmd_with(options(2, ipc), move || {
            upcxx::init();
            let id = rank_me() as i32 % count;
            let open = || CudaDevice::new(id).expect("a CUDA device");
            // A segment larger than any device (1 PiB).
            bad_calls(open(), open(), 1 << 50);
            upcxx::finalize();
        });
    }
}

/// The errors of bad calls on `dev` between 2 ranks; `small`, a second device, is
/// asked for a segment of `too_big` bytes, more than it has.
fn bad_calls(mut dev: CudaDevice, mut small: CudaDevice, too_big: usize) {
    let me = rank_me();
    let alloc = DeviceAllocator::new(&mut dev, MIB).unwrap();
    let text = panic_text(|| {
        let _ = DeviceAllocator::new(&mut dev, MIB);
    });
    assert!(
        text.contains("device_allocator") && text.contains("already"),
        "{text}"
    );
    let mut inactive = CudaDevice::inactive();
    let text = panic_text(|| {
        let _ = DeviceAllocator::new(&mut inactive, MIB);
    });
    assert!(text.contains("inactive"), "{text}");
    let e = DeviceAllocator::new(&mut small, too_big);
    assert!(matches!(e, Err(KindError::OutOfMemory { .. })), "{e:?}");
    small.destroy(EntryBarrier::User);
    let g = alloc.allocate::<u64>(128);
    let all = all_gather(&g);
    let peer = all[(1 - me) as usize];
    // Past the end of the peer's segment: the owner refuses it.
    let host = [0u64; 128];
    let text = panic_text(|| copy_from_host(&host, peer.add(MIB / 8 - 64)).wait());
    assert!(text.starts_with("upcxx::copy: gex::kinds::put"), "{text}");
    assert!(text.contains(&format!("rank {}", 1 - me)), "{text}");
    let text = panic_text(|| copy(g, g.add(64), 128).wait());
    assert!(text.contains("overlap"), "{text}");
    let text = panic_text(|| copy(GlobalPtr::<u64, CudaDeviceKind>::null(), g, 1).wait());
    assert!(text.contains("null"), "{text}");
    let text = panic_text(|| alloc.deallocate(peer));
    assert!(text.contains("device_allocator::deallocate"), "{text}");
    alloc.deallocate(g);
    let text = panic_text(|| alloc.deallocate(g));
    assert!(text.contains("not a live allocation"), "{text}");
    upcxx::barrier();
    drop(alloc);
    dev.destroy(EntryBarrier::User);
}

/// GASP: a collective device, its segment, an allocation, copies in each form and the
/// free each report their event at the caller's line, with the ends, kinds and bytes
/// of each copy; the transfers inside a copy are not reported.
#[cfg(feature = "gasp")]
#[test]
fn memory_kinds_report_their_gasp_events() {
    use common::recorder::{Recorder, Shared};
    use gasp::events::*;
    use gasp::{Arg, EventType};
    use std::sync::Arc;

    gex::testing::spmd(2, || {
        let rec = Arc::new(Recorder::default());
        let shared = rec.clone();
        gasp::register_tool(move |_, _| Box::new(Shared(shared)));
        upcxx::init();
        let me = rank_me();
        let new_line = line!() + 1;
        let mut dev = CudaDevice::with_kind(Mk::emulated(0, 64 * MIB));
        let seg_line = line!() + 1;
        let alloc = DeviceAllocator::new(&mut dev, MIB).unwrap();
        let alloc_line = line!() + 1;
        let mine = alloc.allocate::<u64>(16);
        let peer = all_gather(&mine)[1 - me as usize];
        let host = [5u64; 16];
        let to_line = line!() + 1;
        copy_from_host(&host, peer).wait();
        let mut back = [0u64; 16];
        let from_line = line!() + 1;
        copy_to_host(peer, &mut back).wait();
        let between_line = line!() + 1;
        copy(peer, mine, 16).wait();
        upcxx::barrier();
        let free_line = line!() + 1;
        alloc.deallocate(mine);
        drop(alloc);
        let destroy_line = line!() + 1;
        dev.destroy(EntryBarrier::User);
        let got = rec.0.lock().unwrap().clone();
        assert!(
            got.iter()
                .all(|e| ![GASP_GEX_AM_REQUEST, GASP_UPC_PUT, GASP_UPC_GET].contains(&e.0)),
            "a copy's transfers were reported"
        );
        let ours: Vec<_> = got
            .iter()
            .filter(|e| (GASP_UPCXX_COPY..=GASP_UPCXX_DEVICE_FREE).contains(&e.0))
            .collect();
        let kinds: Vec<_> = ours.iter().map(|e| (e.0, e.1, e.2)).collect();
        use EventType::{End, Start};
        assert_eq!(
            kinds,
            [
                (GASP_UPCXX_DEVICE_CONSTRUCT, Start, new_line),
                (GASP_UPCXX_DEVICE_CONSTRUCT, End, new_line),
                (GASP_UPCXX_DEVICE_SEGMENT, Start, seg_line),
                (GASP_UPCXX_DEVICE_SEGMENT, End, seg_line),
                (GASP_UPCXX_DEVICE_ALLOC, Start, alloc_line),
                (GASP_UPCXX_DEVICE_ALLOC, End, alloc_line),
                (GASP_UPCXX_COPY, Start, to_line),
                (GASP_UPCXX_COPY, End, to_line),
                (GASP_UPCXX_COPY, Start, from_line),
                (GASP_UPCXX_COPY, End, from_line),
                (GASP_UPCXX_COPY, Start, between_line),
                (GASP_UPCXX_COPY, End, between_line),
                (GASP_UPCXX_DEVICE_FREE, Start, free_line),
                (GASP_UPCXX_DEVICE_FREE, End, free_line),
                (GASP_UPCXX_DEVICE_DESTROY, Start, destroy_line),
                (GASP_UPCXX_DEVICE_DESTROY, End, destroy_line),
            ]
        );
        let other = 1 - me;
        let fmt = |a: Arg<'_>| format!("{a:?}");
        // The copy to the other rank's device: peer, kinds (host 1, device 2), bytes.
        let to = &ours[6].3;
        assert_eq!(to[0], fmt(Arg::Rank(other)), "{to:?}");
        assert_eq!(
            to[3..],
            [Arg::Int(2), Arg::Int(1), Arg::Bytes(128)].map(fmt),
            "{to:?}"
        );
        let from = &ours[8].3;
        assert_eq!(from[0], fmt(Arg::Rank(other)), "{from:?}");
        assert_eq!(from[3..5], [Arg::Int(1), Arg::Int(2)].map(fmt), "{from:?}");
        let between = &ours[10].3;
        assert_eq!(between[0], fmt(Arg::Rank(other)), "{between:?}");
        assert_eq!(ours[2].3, [Arg::Int(0), Arg::Size(MIB)].map(fmt));
        assert_eq!(ours[4].3, [Arg::Int(0), Arg::Size(128)].map(fmt));
        assert!(is_communication(GASP_UPCXX_COPY));
        assert!(!is_communication(GASP_UPCXX_DEVICE_ALLOC));
        upcxx::finalize();
    });
}

/// A host address is not device memory: `to_global_ptr` refuses it, and a device
/// pointer cast from a host one is refused by the kind check.
#[test]
fn host_addresses_are_not_device_pointers() {
    gex::testing::spmd(1, || {
        upcxx::init();
        let mut dev = CudaDevice::with_kind(Mk::emulated(0, 64 * MIB));
        let alloc = DeviceAllocator::new(&mut dev, MIB).unwrap();
        let host = [0u64; 4];
        let text = panic_text(|| {
            alloc.to_global_ptr::<u64>(host.as_ptr() as u64);
        });
        assert!(text.contains("device_allocator::to_global_ptr"), "{text}");
        let h: GlobalPtr<u64> = new_array(4);
        let any: GlobalPtr<u64, upcxx::AnyKind> = h.into();
        assert!(any.dynamic_kind_cast::<CudaDeviceKind>().is_none());
        let text = panic_text(|| {
            any.static_kind_cast::<CudaDeviceKind>();
        });
        assert!(text.contains("static_kind_cast"), "{text}");
        delete_array(h);
        drop(alloc);
        dev.destroy(EntryBarrier::None);
        upcxx::finalize();
    });
}

/// §16.1.3 ¶5: source completion of a copy means the source may change. A copy from
/// host memory of another host into this process's is a get, which reads its source
/// until it completes: its source completion comes with its operation completion, not
/// before (on one host the copy is done when the call returns: both at once too).
#[test]
fn a_copy_from_another_hosts_memory_completes_its_source_with_the_get() {
    const LEN: usize = MIB / 2;
    gex::testing::spmd(2, || {
        upcxx::init();
        let me = rank_me() as usize;
        let mine: GlobalPtr<u64> = new_array(LEN);
        // SAFETY: this rank's own array, before anyone reads it.
        unsafe { std::slice::from_raw_parts_mut(mine.local(), LEN) }
            .copy_from_slice(&(0..LEN as u64).map(|i| i ^ me as u64).collect::<Vec<_>>());
        let other = all_gather(&mine)[1 - me];
        let into: GlobalPtr<u64> = new_array(LEN);
        if me == 1 {
            // No progress for a while: a get that needs this rank's (by messages, or
            // through a window served by messages) stays in flight meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(500));
        } else {
            let (sent, done) = copy_with(
                other,
                into,
                LEN,
                source_cx::as_future() | operation_cx::as_future(),
            );
            sent.wait();
            assert!(
                done.ready(),
                "the source of a copy was released while the get reading it was in flight"
            );
            done.wait();
            // SAFETY: the copy into this rank's array is complete.
            let got = unsafe { std::slice::from_raw_parts(into.local(), LEN) };
            assert!(got.iter().zip(0..).all(|(&v, i)| v == i ^ 1));
        }
        upcxx::barrier();
        delete_array(into);
        delete_array(mine);
        upcxx::finalize();
    });
}
