//! Global pointers (UPC++ spec ch. 3): values, arithmetic, ordering, hashing, printing,
//! casts, and translation to local pointers on every rank of the local team.
//!
//! Pure-value tests build non-null pointers by deserializing `(rank, kind, address,
//! device)`,
//! which needs no runtime; multi-rank tests run under `gex::testing::spmd`.

mod common;
use common::{all_gather, panic_text};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashSet};
use std::hash::{Hash, Hasher};

use upcxx::{
    delete_array, local_team_contains, new_array, new_array_with, rank_me, rank_n, rget, rput,
    to_global_ptr, try_global_ptr, AnyKind, GlobalPtr, Host, KindId, Rank,
};

/// A pointer from its parts, through the serialized form (rank, kind, address,
/// device).
fn gp<T>(rank: u32, kind: KindId, addr: usize) -> GlobalPtr<T> {
    serde_json::from_str(&format!("[{rank},{},{addr},0]", kind as u8)).unwrap()
}

fn any_gp<T>(rank: u32, kind: KindId, addr: usize) -> GlobalPtr<T, AnyKind> {
    serde_json::from_str(&format!("[{rank},{},{addr},0]", kind as u8)).unwrap()
}

fn hash_of<V: Hash>(v: &V) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

#[test]
fn null_needs_no_runtime() {
    let n = GlobalPtr::<u64>::null();
    assert!(n.is_null());
    assert!(n.is_local(), "§3.2 ¶35: null is local in any context");
    assert!(n.local().is_null());
    assert_eq!(n.where_(), 0);
    assert_eq!(n, GlobalPtr::default());
    assert_eq!(n + 0, n);
    assert_eq!(n.add(0), n);
    assert_eq!(n - n, 0);
    assert_eq!(n.to_string(), "(gp: null)");
    assert_eq!(to_global_ptr(std::ptr::null_mut::<u64>()), n);
    assert_eq!(try_global_ptr(std::ptr::null_mut::<u64>()), Some(n));
    assert_eq!(n.cast::<u8>(), GlobalPtr::<u8>::null());
    assert_eq!(GlobalPtr::<u64>::KIND, KindId::Host);
    assert_eq!(GlobalPtr::<u64, AnyKind>::KIND, KindId::Any);
    // Null is canonical: a serialized null of any rank or kind comes back as the null.
    assert_eq!(gp::<u64>(3, KindId::Host, 0), n);
    assert_eq!(any_gp::<u64>(3, KindId::CudaDevice, 0), GlobalPtr::null());
    assert_eq!(std::mem::size_of::<GlobalPtr<u64>>(), 16);
}

#[test]
fn null_arithmetic_panics() {
    let msg = panic_text(|| {
        let _ = GlobalPtr::<u32>::null() + 1;
    });
    assert!(msg.contains("cannot offset a null pointer"), "{msg}");
    let msg = panic_text(|| {
        let _ = GlobalPtr::<u32>::null().sub(2);
    });
    assert!(msg.contains("upcxx::GlobalPtr::sub"), "{msg}");
}

#[test]
fn runtime_operations_before_init_panic() {
    let p = gp::<u32>(1, KindId::Host, 0x1000);
    let msg = panic_text(|| {
        p.local();
    });
    assert!(
        msg.contains("upcxx::GlobalPtr::local: called before upcxx::init"),
        "{msg}"
    );
    let msg = panic_text(|| {
        p.is_local();
    });
    assert!(
        msg.contains("upcxx::GlobalPtr::is_local: called before upcxx::init"),
        "{msg}"
    );
    let mut x = 5u32;
    let msg = panic_text(|| {
        to_global_ptr(&mut x as *mut u32);
    });
    assert!(
        msg.contains("upcxx::to_global_ptr: called before upcxx::init"),
        "{msg}"
    );
}

#[test]
fn arithmetic_by_elements() {
    let p = gp::<u64>(2, KindId::Host, 0x10_000);
    assert_eq!(p.where_(), 2);
    assert!(!p.is_null());
    // §3.2 ¶52–¶69: +, -, +=, -=, diff + ptr, ptr - ptr, in units of elements.
    assert_eq!(p + 3, gp(2, KindId::Host, 0x10_000 + 24));
    assert_eq!(p.add(3), p + 3);
    assert_eq!(3 + p, p + 3);
    assert_eq!(p.offset(-2), gp(2, KindId::Host, 0x10_000 - 16));
    assert_eq!((p + 5).sub(5), p);
    assert_eq!(p + 4 - 4, p);
    assert_eq!((p + 7) - (p + 2), 5);
    assert_eq!((p + 2) - (p + 7), -5);
    assert_eq!((p + 7).offset_from(p), 7);
    assert_eq!(p - p, 0);
    let mut q = p;
    q += 1; // operator++
    q += 1;
    assert_eq!(q, p + 2);
    q -= 3; // operator--, three times
    assert_eq!(q, p.offset(-1));
    // Element size matters; casting keeps the address and rank.
    assert_eq!(p.cast::<u8>() + 8, (p + 1).cast::<u8>());
    assert_eq!(p.cast::<[u64; 4]>() + 1, (p + 4).cast());
    assert_eq!((p + 1).cast::<u8>() - p.cast::<u8>(), 8);
    // Zero-sized elements do not move.
    let z = p.cast::<()>();
    assert_eq!(z + 10, z);
}

#[test]
fn difference_across_ranks_panics() {
    let a = gp::<u32>(0, KindId::Host, 0x1000);
    let b = gp::<u32>(1, KindId::Host, 0x1000);
    let msg = panic_text(|| {
        let _ = a - b;
    });
    assert!(msg.contains("upcxx::GlobalPtr::offset_from"), "{msg}");
    assert!(msg.contains("different ranks"), "{msg}");
    let msg = panic_text(|| {
        let _ = a - GlobalPtr::null();
    });
    assert!(msg.contains("do not point into the same object"), "{msg}");
    let odd = (a.cast::<u8>() + 1).cast::<u32>();
    let msg = panic_text(|| {
        let _ = odd - a;
    });
    assert!(
        msg.contains("not a multiple of the element size 4"),
        "{msg}"
    );
}

#[test]
fn address_overflow_panics() {
    let p = gp::<u64>(0, KindId::Host, 16);
    let msg = panic_text(|| {
        let _ = p - 3;
    });
    assert!(msg.contains("overflows"), "{msg}");
    let msg = panic_text(|| {
        let _ = p.add(usize::MAX);
    });
    assert!(msg.contains("overflows"), "{msg}");
}

#[test]
fn ordering_is_strict_total_by_rank_then_address() {
    let a0 = gp::<u32>(0, KindId::Host, 0x9000);
    let b0 = a0 + 1;
    let a1 = gp::<u32>(1, KindId::Host, 0x1000);
    let n = GlobalPtr::<u32>::null();
    // §3.2 ¶77: higher index compares greater, one-past-the-end greatest.
    assert!(a0 < b0);
    assert!(b0 > a0);
    assert!(a0 != b0);
    assert_eq!(a0.cmp(&(b0 - 1)), std::cmp::Ordering::Equal);
    assert_eq!(b0.partial_cmp(&a0), Some(std::cmp::Ordering::Greater));
    // ¶84: a strict total order across ranks, consistent with the above.
    assert!(b0 < a1, "rank orders before address");
    assert!(n < a0);
    let mut v = vec![a1, b0, n, a0, a1 + 1, a0];
    v.sort();
    assert_eq!(v, vec![n, a0, a0, b0, a1, a1 + 1]);
    let set: BTreeSet<_> = v.iter().copied().collect();
    assert_eq!(set.len(), 5);
}

#[test]
fn hashing_agrees_with_equality() {
    let a = gp::<u32>(1, KindId::Host, 0x2000);
    let same = gp::<u32>(0, KindId::Host, 0x1ffc) + 0;
    assert_ne!(a, same, "different ranks");
    let copy: GlobalPtr<u32> = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
    assert_eq!(copy, a);
    assert_eq!(hash_of(&copy), hash_of(&a));
    assert_eq!(hash_of(&(a + 1 - 1)), hash_of(&a));
    let set: HashSet<GlobalPtr<u32>> = [a, copy, a + 1, same, GlobalPtr::null(), GlobalPtr::null()]
        .into_iter()
        .collect();
    assert_eq!(set.len(), 4);
}

#[test]
fn display_distinguishes_exactly_the_unequal() {
    let a = gp::<u32>(2, KindId::Host, 0x7f00_0000_1000);
    assert_eq!(a.to_string(), "(gp: rank 2, 0x7f0000001000)");
    assert_eq!((a + 1).to_string(), "(gp: rank 2, 0x7f0000001004)");
    assert_eq!(
        gp::<u32>(3, KindId::Host, 0x7f00_0000_1000).to_string(),
        "(gp: rank 3, 0x7f0000001000)"
    );
    let dev = any_gp::<u32>(2, KindId::CudaDevice, 0x7f00_0000_1000);
    assert_eq!(
        dev.to_string(),
        "(gp: rank 2, cuda_device, device 0, 0x7f0000001000)"
    );
    // Memory of another device at the same address: another pointer (§3.2 ¶76).
    let other: GlobalPtr<u32, AnyKind> = serde_json::from_str(&format!(
        "[2,{},{},1]",
        KindId::CudaDevice as u8,
        0x7f00_0000_1000u64
    ))
    .unwrap();
    assert_eq!(
        other.to_string(),
        "(gp: rank 2, cuda_device, device 1, 0x7f0000001000)"
    );
    assert_ne!(other, dev);
    assert_ne!(hash_of(&other), hash_of(&dev));
    assert!(dev < other, "ordered by device before address");
    assert!(dev + 1 < other);
    let msg = panic_text(|| {
        other.offset_from(dev);
    });
    assert!(msg.contains("do not point into the same object"), "{msg}");
    let debug = format!("{a:?}");
    assert!(
        debug.contains("u32") && debug.contains("(gp: rank 2, 0x7f0000001000)"),
        "{debug}"
    );
}

#[test]
fn serde_round_trip_and_validation() {
    let a = gp::<u16>(5, KindId::Host, 0xabc0);
    let text = serde_json::to_string(&a).unwrap();
    assert_eq!(text, format!("[5,{},{},0]", KindId::Host as u8, 0xabc0));
    assert_eq!(serde_json::from_str::<GlobalPtr<u16>>(&text).unwrap(), a);
    let null = serde_json::to_string(&GlobalPtr::<u16>::null()).unwrap();
    assert!(serde_json::from_str::<GlobalPtr<u16>>(&null)
        .unwrap()
        .is_null());
    // A host pointer cannot hold device memory; `Any` is never a dynamic kind.
    let dev = format!("[5,{},4096,3]", KindId::CudaDevice as u8);
    assert!(serde_json::from_str::<GlobalPtr<u16>>(&dev).is_err());
    let d = serde_json::from_str::<GlobalPtr<u16, AnyKind>>(&dev).unwrap();
    assert_eq!(
        serde_json::to_string(&d).unwrap(),
        dev,
        "the device id travels"
    );
    let any = format!("[5,{},4096,0]", KindId::Any as u8);
    assert!(serde_json::from_str::<GlobalPtr<u16, AnyKind>>(&any).is_err());
    assert!(serde_json::from_str::<GlobalPtr<u16>>("[5,9,4096,0]").is_err());
    // Host memory is on no device.
    let host_on_device = format!("[5,{},4096,1]", KindId::Host as u8);
    assert!(serde_json::from_str::<GlobalPtr<u16>>(&host_on_device).is_err());
}

#[test]
fn kind_casts() {
    let h = gp::<u32>(1, KindId::Host, 0x4000);
    // §3.2 ¶16: any from host.
    let a: GlobalPtr<u32, AnyKind> = h.into();
    assert_eq!(a.dynamic_kind(), KindId::Host);
    assert_eq!(a.where_(), 1);
    assert_eq!(a, h.static_kind_cast::<AnyKind>());
    assert_eq!(a.to_string(), h.to_string());
    // ¶94: back to host, statically and dynamically.
    assert_eq!(a.static_kind_cast::<Host>(), h);
    assert_eq!(a.dynamic_kind_cast::<Host>(), Some(h));
    assert_eq!(h.dynamic_kind_cast::<Host>(), Some(h));
    assert_eq!(
        GlobalPtr::<u32, AnyKind>::null().dynamic_kind_cast::<Host>(),
        Some(GlobalPtr::null())
    );
    // Device memory is not host memory.
    let d = any_gp::<u32>(1, KindId::CudaDevice, 0x4000);
    assert_eq!(d.dynamic_kind(), KindId::CudaDevice);
    assert_ne!(d, a, "same rank and address, different device");
    assert_eq!(d.dynamic_kind_cast::<Host>(), None);
    assert!(!d.is_local());
    let msg = panic_text(|| {
        d.static_kind_cast::<Host>();
    });
    assert!(
        msg.contains("references cuda_device memory, not host"),
        "{msg}"
    );
    let msg = panic_text(|| {
        d.local();
    });
    assert!(
        msg.contains("upcxx::GlobalPtr::local") && msg.contains("cuda_device"),
        "{msg}"
    );
    // Arithmetic keeps the kind.
    assert_eq!((d + 1).dynamic_kind(), KindId::CudaDevice);
    // ¶16: any from a device pointer too.
    let dev = d.static_kind_cast::<upcxx::CudaDeviceKind>();
    let back: GlobalPtr<u32, AnyKind> = dev.into();
    assert_eq!(back, d);
}

#[test]
fn local_on_every_peer() {
    gex::testing::spmd(4, || {
        upcxx::init();
        let me = rank_me();
        let n = rank_n() as usize;
        let mine: GlobalPtr<u64> = new_array_with(n, |i| u64::from(me) * 1000 + i as u64);
        assert_eq!(mine.where_(), me);
        // A pointer to own memory is in own address space: local() is the identity.
        assert_eq!(
            mine.to_string(),
            format!("(gp: rank {me}, {:#x})", mine.local() as usize)
        );
        let all = all_gather(&mine);
        assert_eq!(all[me as usize], mine);
        for (r, &p) in all.iter().enumerate() {
            assert_eq!(p.where_() as usize, r);
            // Local exactly for the local team (every rank, on one host): another host's
            // memory is reached by RMA only (§3.2 ¶35).
            assert_eq!(
                p.is_local(),
                local_team_contains(r as u32),
                "rank {r}'s array"
            );
            if !p.is_local() {
                let msg = panic_text(|| {
                    p.local();
                });
                assert!(msg.contains("upcxx::GlobalPtr::local"), "{msg}");
                for i in 0..n {
                    let v = rget(p.add(i)).wait();
                    assert_eq!(v, r as u64 * 1000 + i as u64, "rank {r}'s element {i}");
                }
                continue;
            }
            let local = p.local();
            for i in 0..n {
                // SAFETY: rank r initialized its array before the gather's barrier.
                let v = unsafe { local.add(i).read_volatile() };
                assert_eq!(v, r as u64 * 1000 + i as u64, "rank {r}'s element {i}");
                assert_eq!(p.add(i).local(), local.wrapping_add(i));
            }
            // Back from the local address to the same global pointer (§3.2 ¶23, ¶27).
            assert_eq!(to_global_ptr(local), p);
            assert_eq!(try_global_ptr(local.wrapping_add(2)), Some(p + 2));
        }
        // Everyone has read every array before anyone writes.
        upcxx::barrier();
        for &p in &all {
            if !p.is_local() {
                rput(1_000_000 + u64::from(me), p.add(me as usize)).wait();
                continue;
            }
            // SAFETY: every rank writes only its own slot of each array.
            unsafe {
                p.add(me as usize)
                    .local()
                    .write_volatile(1_000_000 + u64::from(me))
            };
        }
        upcxx::barrier();
        for s in 0..n {
            // SAFETY: the writers finished before the barrier.
            let v = unsafe { mine.local().add(s).read_volatile() };
            assert_eq!(v, 1_000_000 + s as u64, "slot written by rank {s}");
        }
        // Every rank renders every pointer alike, and distinct pointers differently.
        let texts: Vec<String> = all.iter().map(|p| p.to_string()).collect();
        let gathered = all_gather(&texts);
        assert!(gathered.iter().all(|t| *t == texts));
        assert_eq!(texts.iter().collect::<HashSet<_>>().len(), n);
        // Sorting orders by rank, whatever the addresses.
        let mut sorted = all.clone();
        sorted.reverse();
        sorted.sort();
        assert_eq!(sorted, all);
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

#[test]
fn to_global_ptr_rejects_memory_outside_segments() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let mut on_stack = 7u64;
        let p = &mut on_stack as *mut u64;
        assert_eq!(try_global_ptr(p), None);
        let msg = panic_text(|| {
            to_global_ptr(p);
        });
        assert!(msg.contains("upcxx::to_global_ptr:"), "{msg}");
        assert!(msg.contains("not inside the shared segment"), "{msg}");
        let boxed = Box::into_raw(Box::new(1u32));
        assert_eq!(try_global_ptr(boxed), None);
        // SAFETY: made by Box::into_raw just above.
        drop(unsafe { Box::from_raw(boxed) });
        // Interior pointers of a segment object map to the element they point at.
        let arr: GlobalPtr<u32> = new_array(8);
        let third = arr.local().wrapping_add(3);
        assert_eq!(to_global_ptr(third), arr + 3);
        assert_eq!(to_global_ptr(third.cast::<u8>()), arr.cast::<u8>() + 12);
        delete_array(arr);
        upcxx::finalize();
    });
}

#[test]
fn local_checks_rank_and_segment() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let outside = gp::<u32>(1, KindId::Host, 0x10);
        let msg = panic_text(|| {
            outside.local();
        });
        assert!(
            msg.contains("outside the shared segment of rank 1"),
            "{msg}"
        );
        let stranger = gp::<u32>(7, KindId::Host, 0x1000);
        assert!(!stranger.is_local());
        let msg = panic_text(|| {
            stranger.local();
        });
        assert!(
            msg.contains("rank 7 is not in the job (rank_n() = 2)"),
            "{msg}"
        );
        upcxx::finalize();
    });
}

/// A global pointer is a plain value of futures: an RPC returns one (of any kind), and
/// `make_future` holds one.
#[test]
fn futures_and_rpcs_carry_global_pointers() {
    gex::testing::spmd(2, || {
        upcxx::init();
        let mine: GlobalPtr<u64> = new_array(1);
        let other = 1 - rank_me();
        let back = upcxx::rpc(other, |p: GlobalPtr<u64>| p, (mine,)).wait();
        assert_eq!(back, mine);
        let dev = any_gp::<u64>(other, KindId::CudaDevice, 0x4000);
        let back = upcxx::rpc(other, |p: GlobalPtr<u64, AnyKind>| p, (dev,)).wait();
        assert_eq!(back.dynamic_kind(), KindId::CudaDevice);
        assert_eq!(upcxx::make_future(mine).wait(), mine);
        upcxx::barrier();
        delete_array(mine);
        upcxx::finalize();
    });
}

/// A node of a ring of lists spread over the ranks: plain data holding a global pointer.
#[derive(Debug, Clone, Copy, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Node {
    value: u64,
    next: GlobalPtr<Node>,
}

/// UPC++ spec §3.2 ¶6: a global pointer is DefinitelyTriviallySerializable. Zeroed
/// bytes are the null pointer; pointers travel by `rput`, `rget`, `rget_vec` and
/// `broadcast`, inside structs stored in segments, and a ring of nodes linked across
/// the ranks is walked by gets alone. Bytes that never held a pointer make one whose
/// kind fails where it is asked for, naming the call.
#[test]
fn pointers_are_plain_data() {
    let zeroed: GlobalPtr<u64> = bytemuck::Zeroable::zeroed();
    assert_eq!(zeroed, GlobalPtr::null());
    assert!(bytemuck::bytes_of(&GlobalPtr::<u64, AnyKind>::null())
        .iter()
        .all(|&b| b == 0));
    // The kind code in the last four bytes: 0 is host, 1 is cuda_device.
    let mut bytes = [0u8; std::mem::size_of::<GlobalPtr<u64, AnyKind>>()];
    bytes[..8].copy_from_slice(&0x4000u64.to_ne_bytes());
    bytes[8..12].copy_from_slice(&1u32.to_ne_bytes());
    bytes[12..14].copy_from_slice(&1u16.to_ne_bytes());
    let dev: GlobalPtr<u64, AnyKind> = bytemuck::cast(bytes);
    assert_eq!(dev, any_gp(1, KindId::CudaDevice, 0x4000));
    bytes[12..14].copy_from_slice(&7u16.to_ne_bytes());
    let garbage: GlobalPtr<u64, AnyKind> = bytemuck::cast(bytes);
    assert!(!garbage.is_null());
    assert_eq!(
        garbage.to_string(),
        "(gp: rank 1, kind code 7, device 0, 0x4000)"
    );
    let msg = panic_text(|| {
        garbage.dynamic_kind();
    });
    assert!(msg.contains("names no memory kind"), "{msg}");
    assert!(serde_json::to_string(&garbage).is_err());
    let msg = panic_text(|| {
        garbage.static_kind_cast::<Host>();
    });
    assert!(msg.contains("references kind code 7 memory"), "{msg}");
    // A null read from bytes with other parts than null()'s is null all the same.
    let mut bytes = [0u8; std::mem::size_of::<GlobalPtr<u64>>()];
    bytes[8..12].copy_from_slice(&3u32.to_ne_bytes());
    bytes[12..14].copy_from_slice(&9u16.to_ne_bytes());
    let odd: GlobalPtr<u64> = bytemuck::cast(bytes);
    assert!(odd.is_null());
    assert_eq!(odd, GlobalPtr::null());
    assert_eq!(hash_of(&odd), hash_of(&GlobalPtr::<u64>::null()));
    assert_eq!(odd.cmp(&GlobalPtr::null()), std::cmp::Ordering::Equal);
    assert_eq!(odd.dynamic_kind(), KindId::Host);
    assert_eq!(odd.offset_from(GlobalPtr::null()), 0);
    assert_eq!(
        serde_json::to_string(&odd).unwrap(),
        serde_json::to_string(&GlobalPtr::<u64>::null()).unwrap()
    );

    for ranks in 1..=4 {
        gex::testing::spmd(ranks, || {
            upcxx::init();
            let (me, n) = (rank_me(), rank_n());
            // Every rank's node, its pointer broadcast from its owner.
            let node: GlobalPtr<Node> = new_array(1);
            let nodes: Vec<GlobalPtr<Node>> = (0..n)
                .map(|r| upcxx::broadcast(node, r, upcxx::world()).wait())
                .collect();
            assert_eq!(nodes[me as usize], node);
            // Each node links to the next rank's, written by a put of the whole node.
            let next = nodes[((me + 1) % n) as usize];
            let value = 1000 + u64::from(me);
            rput(Node { value, next }, node).wait();
            upcxx::barrier();
            // A walk round the ring from this rank's node, by gets of nodes.
            let mut at = node;
            let mut seen = Vec::new();
            for _ in 0..n {
                let Node { value, next } = rget(at).wait();
                seen.push(value);
                at = next;
            }
            assert_eq!(at, node, "the ring closes");
            let expected: Vec<u64> = (0..n).map(|k| 1000 + u64::from((me + k) % n)).collect();
            assert_eq!(seen, expected);
            // The pointers alone, 8 bytes into each node: rank 0's as a vector of one,
            // the next rank's as a value.
            let link = |r: Rank| {
                nodes[r as usize]
                    .cast::<u64>()
                    .add(1)
                    .cast::<GlobalPtr<Node>>()
            };
            let links = upcxx::rget_vec(link(0), 1).wait();
            assert_eq!(links, [nodes[1 % n as usize]]);
            let theirs = rget(link((me + 1) % n)).wait();
            assert_eq!(theirs, nodes[((me + 2) % n) as usize]);
            upcxx::barrier();
            delete_array(node);
            upcxx::finalize();
        });
    }
}
