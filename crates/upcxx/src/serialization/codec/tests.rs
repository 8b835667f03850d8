//! Tests of the codec's own paths: their bytes against postcard's, bad input, and the
//! helpers under them.

use super::*;

/// The bytes of `write` into a slot of `slot` bytes (spilling past it).
fn written(slot: usize, write: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>) -> Vec<u8> {
    let mut buf = vec![0u8; slot];
    let mut spill = Vec::new();
    let mut w = Writer::new(&mut buf, Some(&mut spill));
    write(&mut w).expect("written");
    let (len, spilled) = (w.pos(), w.spilled());
    if spilled {
        spill
    } else {
        buf.truncate(len);
        buf
    }
}

/// `varint` writes and reads postcard's bytes for an integer, on both sides of the
/// one-byte case and up to `u64::MAX`.
#[test]
fn varints_are_postcards() {
    let values = [
        0,
        1,
        127,
        128,
        300,
        16_383,
        16_384,
        u64::from(u32::MAX),
        u64::MAX,
    ];
    for n in values {
        let theirs = postcard::to_stdvec(&n).unwrap();
        for slot in [0, 1, 16] {
            assert_eq!(
                written(slot, |w| w.varint(n)),
                theirs,
                "{n} in a slot of {slot}"
            );
        }
        let mut r = Reader::new(&theirs);
        assert_eq!(r.varint().unwrap(), n);
        assert_eq!(r.pos, theirs.len());
    }
    assert!(Reader::new(&[]).varint().is_err(), "no byte left");
    assert!(Reader::new(&[0x80]).varint().is_err(), "a varint cut short");
}

/// `str` writes postcard's bytes for a `str` (length varint, then the bytes), in
/// the slot and across the spill, and reads them back in place.
#[test]
fn strings_are_postcards() {
    for len in [0, 1, 16, 17, 32, 33, 127, 128, 300] {
        let s: String = (0..len)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let theirs = postcard::to_stdvec(&s).unwrap();
        for slot in [0, 5, len, len + 1, len + 8] {
            assert_eq!(
                written(slot, |w| w.str(&s)),
                theirs,
                "{len} bytes, slot {slot}"
            );
        }
        assert_eq!(Reader::new(&theirs).str().unwrap(), s);
    }
    let mut cut = postcard::to_stdvec("abc").unwrap();
    cut.pop();
    assert!(
        Reader::new(&cut).str().is_err(),
        "fewer bytes than the length says"
    );
}

/// `is_ascii` agrees with core's at every length around its cases and with a
/// non-ASCII byte at every position.
#[test]
fn is_ascii_sees_every_byte() {
    for len in 0..70 {
        let mut bytes = vec![b'a'; len];
        assert!(is_ascii(&bytes), "{len} ASCII bytes");
        for at in 0..len {
            for high in [0x80, 0xc3, 0xff] {
                bytes[at] = high;
                assert!(!is_ascii(&bytes), "{high:#x} at {at} of {len}");
                bytes[at] = 0x7f;
                assert!(is_ascii(&bytes), "0x7f at {at} of {len}");
            }
        }
    }
}

/// The UTF-8 check takes ASCII at once, accepts any other valid UTF-8 and refuses
/// invalid bytes wherever they sit (before, inside and after the word-sized parts).
#[test]
fn utf8_checks_every_byte() {
    assert_eq!(utf8(b"plain ascii key-0-1").unwrap(), "plain ascii key-0-1");
    assert_eq!(utf8("clé ключ 鍵 🔑".as_bytes()).unwrap(), "clé ключ 鍵 🔑");
    for len in 1..40 {
        for at in 0..len {
            let mut bytes = vec![b'k'; len];
            bytes[at] = 0xff;
            assert!(utf8(&bytes).is_err(), "0xff at {at} of {len}");
            // A lone continuation byte, and a lead byte whose sequence is cut off.
            bytes[at] = 0x80;
            assert!(utf8(&bytes).is_err(), "0x80 at {at} of {len}");
            bytes[at] = 0xc3;
            if at + 1 == len {
                assert!(utf8(&bytes).is_err(), "0xc3 at the end of {len}");
            }
        }
    }
    let e = utf8(&[b'a', 0xc0, 0x80]).unwrap_err();
    assert!(e.to_string().contains("serialization failed"), "{e}");
}

/// Every length `copy_small` takes, at every offset of a larger buffer, copies
/// exactly those bytes and touches no other.
#[test]
fn copy_small_copies_exactly_the_bytes() {
    let src: Vec<u8> = (1..=32).collect();
    for n in 0..=32 {
        for at in 0..4 {
            let mut buf = [0u8; 40];
            copy_small(&mut buf[at..at + n], &src[..n]);
            let mut want = [0u8; 40];
            want[at..at + n].copy_from_slice(&src[..n]);
            assert_eq!(buf, want, "{n} bytes at {at}");
        }
    }
}
