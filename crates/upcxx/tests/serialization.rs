//! Serialization: UPC++ spec ch. 6, locally and through RPC round trips.
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap, LinkedList, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};

use gex::testing::spmd;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use upcxx::serialization::{
    deserialize, make_seq_view, make_str_view, make_view, make_view_iter, serialize, SeqView,
    StrView, Trivial, View,
};
use upcxx::{rank_me, rank_n, rpc};

/// Counts allocations of at least `BIG` bytes, on every thread.
struct Counting;

const BIG: usize = 2048;
static BIG_ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= BIG {
            BIG_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Circle { r: f64 },
    Polygon(Vec<(i32, i32)>),
    Empty,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Scene {
    name: String,
    shapes: Vec<Shape>,
    tags: BTreeMap<String, Option<u16>>,
    nested: Option<Box<Scene>>,
}

// An RPC may return any serde type that implements FutureValue.
upcxx::impl_future_value!(Scene);

fn scene() -> Scene {
    Scene {
        name: "outer ✓".into(),
        shapes: vec![
            Shape::Circle { r: 1.5 },
            Shape::Polygon(vec![(0, 0), (-3, 4)]),
            Shape::Empty,
        ],
        tags: [("a".to_string(), Some(1)), ("b".to_string(), None)].into(),
        nested: Some(Box::new(Scene {
            name: String::new(),
            shapes: vec![],
            tags: BTreeMap::new(),
            nested: None,
        })),
    }
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    let bytes = serialize(v);
    let back: T = deserialize::<T>(&bytes).expect("deserializes");
    assert_eq!(&back, v);
}

/// §6.1–§6.2: serde types round-trip: strings, nested structs and enums, Vec, HashMap,
/// Option, tuples.
#[test]
fn serde_types_round_trip_locally() {
    round_trip(&String::from("héllo"));
    round_trip(&scene());
    round_trip(&vec![Some(1u64), None, Some(u64::MAX)]);
    let map: HashMap<String, Vec<i8>> =
        [("x".to_string(), vec![-1, 2]), ("".to_string(), vec![])].into();
    round_trip(&map);
    round_trip(&(1u8, -2i64, 3.25f32, 'c', true, ()));
    round_trip(&Option::<String>::None);
}

/// §6.2 ¶5: a trivially serializable value is its bytes: one length prefix and a copy.
#[test]
fn trivial_values_are_sent_as_their_bytes() {
    #[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Particle {
        pos: [f64; 3],
        id: u64,
    }
    let p = Trivial(Particle {
        pos: [1.0, -2.0, 3.5],
        id: 9,
    });
    let bytes = serialize(&p);
    assert_eq!(bytes.len(), 1 + 32);
    assert_eq!(&bytes[1..], bytemuck::bytes_of(&p.0));
    assert_eq!(deserialize::<Trivial<Particle>>(&bytes).unwrap(), p);
    // Element by element, the same array costs more than its bytes (varints aside, f64
    // arrays are the same size; u64 arrays of large values are larger).
    let arr = [u64::MAX; 16];
    assert!(serialize(&arr).len() > serialize(&Trivial(arr)).len());
    // Inside a serde struct.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        grid: Trivial<[[f32; 4]; 4]>,
        label: String,
    }
    let h = Holder {
        grid: Trivial([[0.5; 4]; 4]),
        label: "g".into(),
    };
    assert_eq!(deserialize::<Holder>(&serialize(&h)).unwrap(), h);
}

/// `bytes` in 16-byte-aligned memory (as the RPC layer keeps messages): the first
/// `bytes.len()` bytes of the result.
fn aligned_copy(bytes: &[u8]) -> Vec<u128> {
    let mut aligned = vec![0u128; bytes.len().div_ceil(16)];
    bytemuck::cast_slice_mut::<u128, u8>(&mut aligned)[..bytes.len()].copy_from_slice(bytes);
    aligned
}

/// §6.5: a view serializes its elements; a received view of Pod elements reads them in
/// place when the buffer is aligned, and copies them (saying so) when it is not.
#[test]
fn views_deserialize_in_place_or_copy_when_misaligned() {
    let data: Vec<u32> = (0..100).collect();
    let bytes = serialize(&make_view(&data));
    // A 16-byte-aligned copy of the bytes: in place.
    let aligned = aligned_copy(&bytes);
    let buf = &bytemuck::cast_slice::<u128, u8>(&aligned)[..bytes.len()];
    let v = deserialize::<View<'_, u32>>(buf).unwrap();
    assert!(v.in_place());
    assert_eq!(&*v, &data[..]);
    let range = buf.as_ptr_range();
    assert!(
        range.contains(&(v.as_ptr() as *const u8)),
        "the view points into the buffer"
    );
    // One byte past a 16-byte boundary: the elements are misaligned and get copied.
    let mut shifted = vec![0u128; (bytes.len() + 1).div_ceil(16)];
    bytemuck::cast_slice_mut::<u128, u8>(&mut shifted)[1..=bytes.len()].copy_from_slice(&bytes);
    let shifted = &bytemuck::cast_slice::<u128, u8>(&shifted)[1..=bytes.len()];
    let v = deserialize::<View<'_, u32>>(shifted).unwrap();
    assert!(!v.in_place());
    assert_eq!(&*v, &data[..]);
}

/// §6.5 ¶1, ¶4: a view of Pod elements made from an iterator (a list, a ring buffer
/// that wraps, a map's values, nothing) is the same message as one made from a slice of
/// the same elements, and deserializes as a `View` in place.
#[test]
fn views_of_any_container_encode_as_views_of_slices() {
    let list: LinkedList<u32> = (0..100).collect();
    let flat: Vec<u32> = list.iter().copied().collect();
    assert_eq!(
        serialize(&make_view_iter(&list)),
        serialize(&make_view(&flat))
    );
    // A ring buffer whose elements wrap around its end: two slices, one view.
    let mut ring: VecDeque<u64> = VecDeque::with_capacity(8);
    ring.extend(0..8u64);
    ring.drain(..5);
    ring.extend(8..13u64);
    assert!(!ring.as_slices().1.is_empty(), "the ring wraps");
    let flat: Vec<u64> = ring.iter().copied().collect();
    let bytes = serialize(&make_view_iter(&ring));
    assert_eq!(bytes, serialize(&make_view(&flat)));
    let aligned = aligned_copy(&bytes);
    let buf = &bytemuck::cast_slice::<u128, u8>(&aligned)[..bytes.len()];
    let v = deserialize::<View<'_, u64>>(buf).unwrap();
    assert!(v.in_place());
    assert_eq!(&*v, &flat[..]);
    let map: BTreeMap<u8, f32> = (0..10u8).map(|k| (k, f32::from(k) / 2.0)).collect();
    let values: Vec<f32> = map.values().copied().collect();
    assert_eq!(
        serialize(&make_view_iter(map.values())),
        serialize(&make_view(&values))
    );
    let none: [u16; 0] = [];
    assert!(
        deserialize::<View<'_, u16>>(&serialize(&make_view_iter(&none)))
            .unwrap()
            .is_empty()
    );
}

/// §6.5 ¶4: a view of non-trivial elements deserializes them one by one, on demand.
#[test]
fn seq_views_deserialize_lazily() {
    let words: LinkedList<String> = ["x", "yy", "zzz"].iter().map(|s| s.to_string()).collect();
    let bytes = serialize(&make_seq_view(words.iter()));
    let v = deserialize::<SeqView<'_, String>>(&bytes).unwrap();
    assert_eq!(v.len(), 3);
    let mut it = v.iter();
    assert_eq!(it.len(), 3);
    assert_eq!(it.next().as_deref(), Some("x"));
    assert_eq!(it.len(), 2, "one element consumed, two still in the buffer");
    assert_eq!(v.into_iter().collect::<Vec<_>>(), ["x", "yy", "zzz"]);
    // From values.
    let squares = SeqView::from_values((0..5u64).map(|i| i * i));
    let bytes = serialize(&squares);
    let v = deserialize::<SeqView<'_, u64>>(&bytes).unwrap();
    assert_eq!(v.iter().collect::<Vec<_>>(), vec![0, 1, 4, 9, 16]);
}

/// Serialization round trips through RPC: every type travels to each rank and back.
#[test]
fn round_trips_through_rpc() {
    for n in [1, 2, 3] {
        spmd(n, || {
            upcxx::init();
            for r in 0..rank_n() {
                assert_eq!(rpc(r, |s: Scene| s, (scene(),)).wait(), scene());
                let map: HashMap<u32, String> = (0..50).map(|i| (i, format!("v{i}"))).collect();
                assert_eq!(
                    rpc(r, |m: HashMap<u32, String>| m, (map.clone(),)).wait(),
                    map
                );
                assert_eq!(
                    rpc(
                        r,
                        |o: Option<Vec<u8>>, p: Option<u8>| (o, p),
                        (Some(vec![1u8, 2]), None::<u8>)
                    )
                    .wait(),
                    (Some(vec![1, 2]), None)
                );
                let t = Trivial([7u16; 128]);
                assert_eq!(rpc(r, |t: Trivial<[u16; 128]>| t, (t,)).wait(), t);
                let words: LinkedList<String> = (0..20).map(|i| "w".repeat(i)).collect();
                let lens = rpc(
                    r,
                    |v: SeqView<'_, String>| v.iter().map(|s| s.len()).collect::<Vec<usize>>(),
                    (make_seq_view(words.iter()),),
                );
                assert_eq!(lens.wait(), (0..20).collect::<Vec<usize>>());
                let list: LinkedList<u64> = (1..=1000).collect();
                let sum = rpc(
                    r,
                    |v: View<'_, u64>| (v.in_place(), v.iter().sum::<u64>()),
                    (make_view_iter(&list),),
                );
                assert_eq!(sum.wait(), (true, 500_500));
            }
            upcxx::finalize();
        });
    }
}

/// §6.5 ¶4: on the RPC target, a view of Pod elements is the network buffer itself: no
/// copy of the elements is made (no allocation of their size), and it is aligned.
#[test]
fn rpc_target_reads_pod_views_in_place() {
    spmd(2, || {
        upcxx::init();
        let peer = 1 - rank_me();
        // Warm up: the receive pages of both ranks exist after this.
        for _ in 0..3 {
            rpc(peer, |v: View<'_, u64>| v.len(), (make_view(&[1u64; 8]),)).wait();
        }
        let data: Vec<u64> = (0..(BIG as u64 / 8)).map(|i| i * i).collect();
        // Counted from here on, in each process: the target's own work until the RPC runs
        // allocates nothing that large, so a copy of the elements would show.
        static BASE: AtomicUsize = AtomicUsize::new(0);
        BASE.store(BIG_ALLOCS.load(Ordering::SeqCst), Ordering::SeqCst);
        upcxx::barrier();
        let f = rpc(
            peer,
            |v: View<'_, u64>| {
                let allocs = BIG_ALLOCS.load(Ordering::SeqCst) - BASE.load(Ordering::SeqCst);
                (
                    v.in_place(),
                    v.as_ptr() as usize % 8,
                    allocs,
                    v.iter().sum::<u64>(),
                )
            },
            (make_view(&data),),
        );
        let (in_place, misalignment, big_allocs, sum) = f.wait();
        assert!(in_place, "the view was copied");
        assert_eq!(misalignment, 0);
        assert_eq!(
            big_allocs, 0,
            "an allocation the size of the elements was made"
        );
        assert_eq!(sum, data.iter().sum::<u64>());
        upcxx::finalize();
    });
}

/// §6.5 ¶4–¶5: on the RPC target, a view of a string's characters is the network
/// buffer itself: no copy of them is made, ASCII or not, short or long.
#[test]
fn rpc_target_reads_str_views_in_place() {
    spmd(2, || {
        upcxx::init();
        let peer = 1 - rank_me();
        for _ in 0..3 {
            rpc(peer, |s: StrView<'_>| s.len(), (make_str_view("warm-up"),)).wait();
        }
        let text: String = "key-ü-鍵-".repeat(BIG / 8);
        let short = String::from("k-1");
        assert!(text.len() >= BIG);
        static BASE: AtomicUsize = AtomicUsize::new(0);
        BASE.store(BIG_ALLOCS.load(Ordering::SeqCst), Ordering::SeqCst);
        upcxx::barrier();
        let f = rpc(
            peer,
            |s: StrView<'_>, short: StrView<'_>| {
                let allocs = BIG_ALLOCS.load(Ordering::SeqCst) - BASE.load(Ordering::SeqCst);
                let want = "key-ü-鍵-".repeat(BIG / 8);
                (
                    allocs,
                    *s == *want,
                    short.as_str() == "k-1",
                    s.chars().count(),
                )
            },
            (make_str_view(&text), StrView::from(&short)),
        );
        let (big_allocs, same, short_same, chars) = f.wait();
        assert_eq!(big_allocs, 0, "the string was copied");
        assert!(same && short_same, "the strings arrived changed");
        assert_eq!(chars, text.chars().count());
        // The bytes are a `String`'s: a view and a `by_ref` send the same message.
        assert_eq!(serialize(&make_str_view(&text)), serialize(&text));
        let bytes = serialize(&text);
        let back = deserialize::<StrView<'_>>(&bytes).unwrap();
        assert_eq!(back.as_str(), text);
        upcxx::finalize();
    });
}

/// A view of elements aligned to more than 16 bytes still arrives intact (copied if
/// the network buffer does not happen to be aligned for it).
#[test]
fn over_aligned_views_arrive_intact() {
    #[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C, align(64))]
    struct Line([u64; 8]);
    spmd(2, || {
        upcxx::init();
        let lines: Vec<Line> = (0..40).map(|i| Line([i; 8])).collect();
        let f = rpc(
            1 - rank_me(),
            |v: View<'_, Line>| v.iter().map(|l| l.0.iter().sum::<u64>()).sum::<u64>(),
            (make_view(&lines),),
        );
        assert_eq!(f.wait(), (0..40).map(|i| i * 8).sum::<u64>());
        upcxx::finalize();
    });
}
