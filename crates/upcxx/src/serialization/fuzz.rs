//! Property tests of decoding (§6): the bytes of an RPC come from another rank, so
//! [`deserialize`] of any bytes, random or a valid encoding mutated (bytes flipped,
//! truncated, extended, length fields changed), returns a value or an [`Error`]; never a
//! panic, an out-of-bounds read or an allocation the bytes do not justify. A received
//! [`SeqView`] decodes its elements lazily: an element that does not decode panics
//! naming `upcxx::SeqView` (a message no correct sender writes). Cases:
//! `PROPTEST_CASES` (default 256 per test).

use std::panic::{catch_unwind, AssertUnwindSafe};

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::{
    by_ref, deserialize, make_str_view, make_view, serialize, ByRef, SeqView, Serialization,
    StrView, Trivial, View,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Point,
    Circle { r: f64 },
    Poly(Vec<(i32, i32)>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    id: u64,
    name: String,
    tags: Vec<Option<u16>>,
    shape: Shape,
    raw: Trivial<[u16; 3]>,
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Point),
        any::<f64>().prop_map(|r| Shape::Circle { r }),
        prop::collection::vec(any::<(i32, i32)>(), 0..6).prop_map(Shape::Poly),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    (
        any::<u64>(),
        ".{0,12}",
        prop::collection::vec(any::<Option<u16>>(), 0..6),
        shape(),
        any::<[u16; 3]>(),
    )
        .prop_map(|(id, name, tags, shape, raw)| Record {
            id,
            name,
            tags,
            shape,
            raw: Trivial(raw),
        })
}

/// An edit of an encoding.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Truncate(usize),
    Extend(Vec<u8>),
    /// Overwrites 8 bytes (a View's or SeqView's u64 length field, where one is).
    Length(usize, u64),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(i, x)| Edit::Flip(i, x)),
        any::<usize>().prop_map(Edit::Truncate),
        prop::collection::vec(any::<u8>(), 1..16).prop_map(Edit::Extend),
        (
            any::<usize>(),
            prop_oneof![0u64..64, any::<u64>(), Just(u64::MAX), Just(1 << 61)]
        )
            .prop_map(|(i, n)| Edit::Length(i, n)),
    ]
}

fn apply(bytes: &mut Vec<u8>, edits: &[Edit]) {
    for e in edits {
        let n = bytes.len();
        match e {
            Edit::Flip(i, x) if n > 0 => bytes[i % n] ^= x,
            Edit::Truncate(k) => bytes.truncate(k % (n + 1)),
            Edit::Extend(more) => bytes.extend_from_slice(more),
            // Length fields sit at multiples of 8 in views; anywhere else it is noise.
            Edit::Length(i, v) if n >= 8 => {
                let at = (i % (n / 8)) * 8;
                bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
            _ => {}
        }
    }
}

/// Decodes `bytes` as `T`: a value or an error, never a panic.
fn decodes<T: Serialization>(bytes: &[u8]) -> Result<bool, TestCaseError> {
    match catch_unwind(AssertUnwindSafe(|| deserialize::<T>(bytes).is_ok())) {
        Ok(ok) => Ok(ok),
        Err(_) => Err(TestCaseError::fail(format!(
            "deserialize::<{}> panicked on {bytes:?}",
            std::any::type_name::<T>()
        ))),
    }
}

/// Decodes `bytes` as a borrowed string's owned value, as a string view, as a `String`
/// and as an `Option<String>` (the codec's own string paths), and with postcard itself:
/// the same value, or an error from all.
fn str_decodes_as_postcard(bytes: &[u8]) -> Result<(), TestCaseError> {
    decodes::<ByRef<'_, str>>(bytes)?;
    decodes::<StrView<'_>>(bytes)?;
    decodes::<Option<String>>(bytes)?;
    let postcard = postcard::from_bytes::<String>(bytes).ok();
    prop_assert_eq!(
        &deserialize::<String>(bytes).ok(),
        &postcard,
        "decoding {:?}",
        bytes
    );
    prop_assert_eq!(
        deserialize::<Option<String>>(bytes).ok(),
        postcard::from_bytes::<Option<String>>(bytes).ok(),
        "decoding {:?}",
        bytes
    );
    let owned = deserialize::<ByRef<'_, str>>(bytes).ok();
    prop_assert_eq!(&owned, &postcard, "decoding {:?}", bytes);
    let view = deserialize::<StrView<'_>>(bytes)
        .ok()
        .map(|v| v.to_string());
    prop_assert_eq!(&view, &postcard, "decoding {:?}", bytes);
    Ok(())
}

/// Decodes `bytes` as a `SeqView<String>` and runs its iterator (collected, so the
/// exact size it reports is used to allocate).
fn seq_view_decodes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(v) = deserialize::<SeqView<'_, String>>(bytes) else {
        return Ok(());
    };
    prop_assert!(
        v.len() <= bytes.len(),
        "{} elements in {} bytes",
        v.len(),
        bytes.len()
    );
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| v.iter().collect::<Vec<String>>())) {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        prop_assert!(msg.starts_with("upcxx::SeqView:"), "{msg}");
    }
    Ok(())
}

proptest! {
    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        decodes::<Record>(&bytes)?;
        decodes::<(u32, String, Vec<Option<f64>>)>(&bytes)?;
        decodes::<Vec<Shape>>(&bytes)?;
        decodes::<View<'_, u64>>(&bytes)?;
        decodes::<View<'_, u8>>(&bytes)?;
        decodes::<View<'_, [u32; 3]>>(&bytes)?;
        decodes::<Trivial<[u16; 5]>>(&bytes)?;
        seq_view_decodes(&bytes)?;
        str_decodes_as_postcard(&bytes)?;
    }

    #[test]
    fn mutated_borrowed_strings(s in prop_oneof![".{0,40}", "[ -~]{0,200}", any::<String>()],
                                edits in prop::collection::vec(edit(), 1..4)) {
        let mut bytes = serialize(&by_ref(s.as_str()));
        prop_assert_eq!(&bytes, &serialize(&s), "postcard's bytes");
        prop_assert_eq!(&bytes, &serialize(&make_str_view(&s)), "postcard's bytes");
        prop_assert_eq!(deserialize::<ByRef<'_, str>>(&bytes).ok(), Some(s));
        apply(&mut bytes, &edits);
        str_decodes_as_postcard(&bytes)?;
    }

    #[test]
    fn mutated_records(r in record(), edits in prop::collection::vec(edit(), 1..4)) {
        let mut bytes = serialize(&r);
        prop_assert_eq!(deserialize::<Record>(&bytes).ok(), Some(r));
        apply(&mut bytes, &edits);
        decodes::<Record>(&bytes)?;
    }

    #[test]
    fn mutated_views(xs in prop::collection::vec(any::<u64>(), 0..40),
                     edits in prop::collection::vec(edit(), 1..4)) {
        let mut bytes = serialize(&make_view(&xs));
        prop_assert_eq!(deserialize::<View<'_, u64>>(&bytes).map(|v| v.to_vec()).ok(), Some(xs));
        apply(&mut bytes, &edits);
        if decodes::<View<'_, u64>>(&bytes)? {
            let v = deserialize::<View<'_, u64>>(&bytes).expect("decodes");
            prop_assert!(v.len() * 8 <= bytes.len());
        }
        decodes::<View<'_, [u8; 3]>>(&bytes)?;
    }

    #[test]
    fn mutated_seq_views(words in prop::collection::vec(".{0,8}", 0..20),
                         edits in prop::collection::vec(edit(), 1..4)) {
        let mut bytes = serialize(&SeqView::<String, _>::from_values(words.iter().cloned()));
        let back: Vec<String> = deserialize::<SeqView<'_, String>>(&bytes)
            .expect("a valid encoding")
            .iter()
            .collect();
        prop_assert_eq!(back, words);
        apply(&mut bytes, &edits);
        seq_view_decodes(&bytes)?;
    }
}

#[test]
fn a_seq_view_cannot_claim_more_elements_than_bytes() {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&(1u64 << 60).to_le_bytes());
    bytes.extend_from_slice(&2u64.to_le_bytes());
    bytes.extend_from_slice(&[1, b'a']);
    let e = deserialize::<SeqView<'_, String>>(&bytes).unwrap_err();
    assert!(e.to_string().contains("elements claimed in 2 bytes"), "{e}");
    // A type that encodes in no bytes may have more elements than bytes.
    let mut units = Vec::new();
    units.extend_from_slice(&3u64.to_le_bytes());
    units.extend_from_slice(&0u64.to_le_bytes());
    let v = deserialize::<SeqView<'_, ()>>(&units).unwrap();
    assert_eq!(v.iter().count(), 3);
}
