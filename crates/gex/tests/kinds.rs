//! Memory kinds (`gex::kinds`, our extension of the GASNet-EX API for UPC++ ch. 16):
//! kinds, device segments and copies between host and device memory.
//!
//! Each behaviour is checked on emulated devices (feature `testing`), which every
//! machine has, and again on every CUDA device this process sees; without one the
//! CUDA part prints that it was skipped, and the errors of a machine without CUDA are
//! checked instead.

use std::sync::{Mutex, MutexGuard};

use gex::kinds::{DeviceSegment, Dst, KindError, Mk, Range, Src};

const MIB: usize = 1 << 20;

/// Held by each test while it runs: the tests share CUDA device 0's primary context,
/// whose allocator readily hands a freed address to the next allocation, so a test that
/// checks that a freed address is no longer device memory must not run beside one that
/// allocates.
static SERIAL: Mutex<()> = Mutex::new(());

/// The kinds to run a behaviour on: two emulated devices, and the first two CUDA
/// devices if there are any; with the guard of [`SERIAL`].
fn kinds(test: &str) -> (MutexGuard<'static, ()>, Vec<(Mk, Mk)>) {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut all = vec![(Mk::emulated(0, 64 * MIB), Mk::emulated(1, 64 * MIB))];
    let n = Mk::cuda_device_count();
    if n == 0 {
        eprintln!("{test}: no CUDA device: the CUDA part is skipped");
    } else {
        let a = Mk::cuda(0).expect("CUDA device 0");
        let b = if n > 1 {
            Mk::cuda(1).expect("CUDA device 1")
        } else {
            a.clone()
        };
        all.push((a, b));
    }
    (serial, all)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn range(segment: &DeviceSegment, offset: usize, len: usize) -> Range<'_> {
    Range {
        segment,
        offset,
        len,
    }
}

fn read(seg: &DeviceSegment, offset: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    DeviceSegment::copy(Dst::Host(&mut out), Src::Device(range(seg, offset, len))).unwrap();
    out
}

#[test]
fn host_to_device_and_back_round_trips_every_byte() {
    let (_serial, all) = kinds("host_to_device_and_back_round_trips_every_byte");
    for (mk, _) in all {
        let seg = DeviceSegment::create(&mk, 4 * MIB).unwrap();
        assert_eq!(seg.size(), 4 * MIB);
        assert!(mk.owns(seg.base(), seg.size()), "{mk:?}");
        for (offset, len) in [
            (0, 1),
            (7, 8),
            (4096, 65_536 + 3),
            (4 * MIB - 5, 5),
            (0, 4 * MIB),
        ] {
            let data = pattern(len, offset as u8);
            DeviceSegment::copy(Dst::Device(range(&seg, offset, len)), Src::Host(&data)).unwrap();
            assert_eq!(
                read(&seg, offset, len),
                data,
                "{mk:?}: {len} bytes at {offset}"
            );
        }
    }
}

#[test]
fn device_to_device_copies_within_a_segment_between_segments_and_devices() {
    let (_serial, all) =
        kinds("device_to_device_copies_within_a_segment_between_segments_and_devices");
    for (a, b) in all {
        let s1 = DeviceSegment::create(&a, MIB).unwrap();
        let s2 = DeviceSegment::create(&a, MIB).unwrap();
        let s3 = DeviceSegment::create(&b, MIB).unwrap();
        let data = pattern(MIB / 2, 3);
        DeviceSegment::copy(Dst::Device(range(&s1, 0, MIB / 2)), Src::Host(&data)).unwrap();
        // Within one segment, ranges apart.
        DeviceSegment::copy(
            Dst::Device(range(&s1, MIB / 2, MIB / 2)),
            Src::Device(range(&s1, 0, MIB / 2)),
        )
        .unwrap();
        assert_eq!(read(&s1, MIB / 2, MIB / 2), data);
        // Between two segments of one device, then to the other device (or, with one
        // CUDA device, a third segment of it).
        DeviceSegment::copy(
            Dst::Device(range(&s2, 100, 5000)),
            Src::Device(range(&s1, 0, 5000)),
        )
        .unwrap();
        assert_eq!(read(&s2, 100, 5000), data[..5000]);
        DeviceSegment::copy(
            Dst::Device(range(&s3, 0, MIB / 2)),
            Src::Device(range(&s1, MIB / 2, MIB / 2)),
        )
        .unwrap();
        assert_eq!(read(&s3, 0, MIB / 2), data, "{a:?} -> {b:?}");
    }
}

#[test]
fn segments_free_their_memory_when_dropped() {
    let (_serial, all) = kinds("segments_free_their_memory_when_dropped");
    for (mk, _) in all {
        assert_eq!(mk.allocated(), 0);
        let s1 = DeviceSegment::create(&mk, MIB).unwrap();
        let s2 = DeviceSegment::create(&mk, 3 * MIB).unwrap();
        assert_eq!(mk.allocated(), 4 * MIB);
        let base = s1.base();
        drop(s1);
        assert_eq!(mk.allocated(), 3 * MIB);
        assert!(
            !mk.owns(base, 1),
            "{mk:?}: a freed segment is not device memory"
        );
        drop(s2);
        assert_eq!(mk.allocated(), 0);
    }
    // An emulated device's whole capacity, many times over: every drop gave it back.
    let mk = Mk::emulated(0, 8 * MIB);
    for _ in 0..64 {
        let s = DeviceSegment::create(&mk, 8 * MIB).unwrap();
        assert!(DeviceSegment::create(&mk, 1).is_err(), "the device is full");
        drop(s);
    }
}

/// A segment over memory the program allocated (UPC++ §16.1.2 ¶13): copies reach it,
/// its drop leaves the memory (whose contents survive), and memory that is not the
/// device's, runs past its allocation, or that a segment already holds is refused.
#[test]
fn wrapped_memory_is_a_segment_that_leaves_its_memory_to_the_program() {
    let (_serial, all) = kinds("wrapped_memory_is_a_segment_that_leaves_its_memory_to_the_program");
    for (mk, _) in all {
        let raw = mk.alloc_unmanaged(2 * MIB).unwrap();
        // SAFETY: `raw` is freed at the end, after every segment over it.
        let seg = unsafe { DeviceSegment::wrap(&mk, raw + 4096, MIB) }.unwrap();
        assert_eq!((seg.base(), seg.size()), (raw + 4096, MIB));
        assert_eq!(mk.allocated(), 0, "the program's memory is not the kind's");
        let data = pattern(MIB, 5);
        DeviceSegment::copy(Dst::Device(range(&seg, 0, MIB)), Src::Host(&data)).unwrap();
        assert!(read(&seg, 0, MIB) == data, "{mk:?}");

        let wrap = "gex::kinds::DeviceSegment::wrap";
        // SAFETY: `raw` is freed at the end, after every segment over it.
        let e = unsafe { DeviceSegment::wrap(&mk, raw + 8192, 4096) }.unwrap_err();
        assert!(matches!(e, KindError::InUse { .. }), "{e}");
        assert!(e.to_string().starts_with(wrap), "{e}");
        // SAFETY: `raw` is freed at the end, after every segment over it.
        let e = unsafe { DeviceSegment::wrap(&mk, raw + MIB as u64, 2 * MIB) }.unwrap_err();
        assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
        let host = vec![0u8; 4096];
        // SAFETY: `raw` is freed at the end, after every segment over it.
        let e = unsafe { DeviceSegment::wrap(&mk, host.as_ptr() as u64, 4096) }.unwrap_err();
        assert!(matches!(e, KindError::NotDeviceMemory { .. }), "{e}");
        // SAFETY: `raw` is freed at the end, after every segment over it.
        let e = unsafe { DeviceSegment::wrap(&mk, raw, 0) }.unwrap_err();
        assert!(matches!(e, KindError::BadSize { .. }), "{e}");

        drop(seg);
        assert!(mk.owns(raw, 2 * MIB), "{mk:?}: the drop left the memory");
        // SAFETY: `raw` is freed at the end, after every segment over it.
        let whole = unsafe { DeviceSegment::wrap(&mk, raw, 2 * MIB) }.unwrap();
        assert!(
            read(&whole, 4096, MIB) == data,
            "{mk:?}: the contents survive"
        );
        drop(whole);
        // SAFETY: no segment holds it any more.
        unsafe { mk.free_unmanaged(raw) };
        assert_eq!(mk.allocated(), 0);
    }
}

#[test]
fn bad_sizes_and_ranges_are_errors_naming_the_call_and_copy_nothing() {
    let (_serial, all) = kinds("bad_sizes_and_ranges_are_errors_naming_the_call_and_copy_nothing");
    for (mk, _) in all {
        let create = "gex::kinds::DeviceSegment::create";
        let e = DeviceSegment::create(&mk, 0).unwrap_err();
        assert!(matches!(e, KindError::BadSize { .. }), "{e}");
        assert!(e.to_string().starts_with(create), "{e}");
        let too_big = mk.total_memory() + 1;
        let e = DeviceSegment::create(&mk, too_big).unwrap_err();
        assert!(
            matches!(e, KindError::OutOfMemory { size, .. } if size == too_big),
            "{e}"
        );
        assert!(e.to_string().starts_with(create), "{e}");
        assert_eq!(mk.allocated(), 0, "a failed create allocates nothing");

        let seg = DeviceSegment::create(&mk, 4096).unwrap();
        let zeros = vec![0u8; 4096];
        DeviceSegment::copy(Dst::Device(range(&seg, 0, 4096)), Src::Host(&zeros)).unwrap();
        let copy = "gex::kinds::DeviceSegment::copy";
        let data = pattern(64, 9);
        for (offset, len) in [(4096 - 63, 64), (4096, 64), (usize::MAX - 10, 64)] {
            let e = DeviceSegment::copy(
                Dst::Device(range(&seg, offset, len)),
                Src::Host(&data[..len]),
            )
            .unwrap_err();
            assert!(matches!(e, KindError::OutOfSegment { .. }), "{e}");
            assert!(e.to_string().starts_with(copy), "{e}");
            let mut out = vec![0u8; len];
            let e = DeviceSegment::copy(Dst::Host(&mut out), Src::Device(range(&seg, offset, len)))
                .unwrap_err();
            assert!(matches!(e, KindError::OutOfSegment { .. }), "{e}");
        }
        let e = DeviceSegment::copy(Dst::Device(range(&seg, 0, 32)), Src::Host(&data)).unwrap_err();
        assert!(
            matches!(
                e,
                KindError::LengthMismatch {
                    dst: 32,
                    src: 64,
                    ..
                }
            ),
            "{e}"
        );
        let e = DeviceSegment::copy(
            Dst::Device(range(&seg, 16, 64)),
            Src::Device(range(&seg, 0, 64)),
        )
        .unwrap_err();
        assert!(matches!(e, KindError::Overlap { .. }), "{e}");
        assert_eq!(
            read(&seg, 0, 4096),
            zeros,
            "{mk:?}: a refused copy wrote nothing"
        );
    }
}

#[test]
fn a_host_address_is_not_device_memory() {
    let (_serial, all) = kinds("a_host_address_is_not_device_memory");
    for (mk, _) in all {
        let host = vec![0u8; 4096];
        assert!(!mk.owns(host.as_ptr() as u64, 1), "{mk:?}");
        let seg = DeviceSegment::create(&mk, 4096).unwrap();
        assert!(mk.owns(seg.base() + 4095, 1));
        assert!(
            !mk.owns(seg.base() + 4095, 2),
            "{mk:?}: past the allocation"
        );
        assert_eq!(seg.offset_of(seg.base() + 10, 20), Some(10));
        assert_eq!(seg.offset_of(seg.base() + 4090, 20), None);
        assert_eq!(seg.offset_of(seg.base().wrapping_sub(1), 1), None);
    }
}

#[test]
fn without_cuda_opening_a_device_says_why() {
    let n = Mk::cuda_device_count();
    assert!(n >= 0);
    for id in [-1, n, n + 5] {
        let e = Mk::cuda(id).unwrap_err();
        assert!(e.to_string().starts_with("gex::kinds::Mk::cuda: "), "{e}");
        match e {
            KindError::NoDriver { class, .. } => {
                assert_eq!(n, 0);
                assert_eq!(class, "cuda_device");
                assert!(e.to_string().contains("libcuda"), "{e}");
            }
            KindError::NoSuchDevice { id: got, count, .. } => {
                assert_eq!((got, count), (id, n));
            }
            other => panic!("Mk::cuda({id}): {other}"),
        }
    }
    if n > 0 {
        let mk = Mk::cuda(0).unwrap();
        assert_eq!((mk.class(), mk.device_id()), ("cuda_device", 0));
        assert!(mk.total_memory() > 0);
    }
}

/// Every call of a CUDA kind leaves the calling thread's current context as the
/// program had it: none, or a context the program made for itself (which a kind that
/// made its own primary context current would have replaced, sending the program's
/// next driver calls to another context).
#[test]
fn cuda_calls_leave_the_programs_current_context_as_it_was() {
    use cudarc::driver::sys::{self, CUresult};

    let (_serial, all) = kinds("cuda_calls_leave_the_programs_current_context_as_it_was");
    let current = || {
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: an out-pointer; the driver is initialized (a kind opened a device).
        let r = unsafe { sys::cuCtxGetCurrent(&mut ctx) };
        assert_eq!(r, CUresult::CUDA_SUCCESS);
        ctx
    };
    let exercise = |mk: &Mk| {
        let seg = DeviceSegment::create(mk, MIB).unwrap();
        assert!(mk.owns(seg.base(), seg.size()));
        let data = pattern(4096, 9);
        DeviceSegment::copy(Dst::Device(range(&seg, 0, 4096)), Src::Host(&data)).unwrap();
        DeviceSegment::copy(
            Dst::Device(range(&seg, 8192, 4096)),
            Src::Device(range(&seg, 0, 4096)),
        )
        .unwrap();
        assert_eq!(read(&seg, 8192, 4096), data);
    };
    for (mk, _) in all.iter().filter(|(mk, _)| mk.class() == "cuda_device") {
        // SAFETY: no context current on this thread from here.
        let r = unsafe { sys::cuCtxSetCurrent(std::ptr::null_mut()) };
        assert_eq!(r, CUresult::CUDA_SUCCESS);
        exercise(mk);
        assert!(current().is_null(), "{mk:?}: a context was left current");

        let (mut dev, mut own): (sys::CUdevice, sys::CUcontext) = (0, std::ptr::null_mut());
        // SAFETY: out-pointers; the kind's device exists. The new context becomes
        // current on this thread; it is destroyed below.
        unsafe {
            assert_eq!(
                sys::cuDeviceGet(&mut dev, mk.device_id()),
                CUresult::CUDA_SUCCESS
            );
            assert_eq!(
                sys::cuCtxCreate_v2(&mut own, 0, dev),
                CUresult::CUDA_SUCCESS
            );
        }
        exercise(mk);
        let after = current();
        // SAFETY: the context made above, no longer used.
        unsafe { sys::cuCtxDestroy_v2(own) };
        assert_eq!(after, own, "{mk:?}: the program's context was replaced");
    }
}
