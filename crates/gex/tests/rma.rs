//! One-sided RMA ("Extended API": "Put", "Get", "Value-based payloads") in its
//! Blocking, NB and NBI forms with every local-completion option ("NOTE 2a", "NOTE 2b"),
//! between every pair of ranks, with 1 to 4 ranks, many gets in flight at once, and
//! puts to another host that return before they complete.
mod common;

use common::pattern;
use gex::testing::spmd;
use gex::{Client, Event, EventCategory, Flags, Lc, Segment};

const MB: usize = 1 << 20;
/// Put variants: Blocking; NB with Now, Defer, an event; NBI with Now, Defer, Group.
const PUT_VARIANTS: usize = 7;
/// Sizes on both sides of the largest transfer the mpi conduit sends between hosts as
/// messages by default (3 KiB), and of a page.
const SIZES: [usize; 11] = [1, 2, 7, 8, 63, 3072, 3073, 4096, 4097, 65537, MB];

fn seed(writer: u32, target: u32, variant: usize, size: usize) -> u64 {
    ((writer as u64) << 48) ^ ((target as u64) << 40) ^ ((variant as u64) << 32) ^ size as u64
}

/// Where `writer`'s put of `variant` lands in the target's segment.
fn region(writer: u32, variant: usize) -> usize {
    (writer as usize * PUT_VARIANTS + variant) * (MB + 4096)
}

/// "Put" and "Get" for sizes from 1 byte to 1 MiB: every rank writes a distinct
/// pattern into every rank's segment with each put form (PutBlocking, PutNB with
/// `GEX_EVENT_NOW`/`DEFER`/an lc event, PutNBI with `NOW`/`DEFER`/`GROUP`), synchronizes
/// (events, `gex_NBI_Wait`; a source of `GEX_EVENT_NOW` is overwritten as soon as the
/// call returns), and after a barrier the owner finds exactly those bytes (and nothing
/// written past them); the writer reads them back with GetBlocking, GetNB and GetNBI.
#[test]
fn put_get_every_form_and_size() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("RMA_FORMS", Flags::NONE).unwrap();
            let size_needed = region(team.size(), 0);
            let seg_size = size_needed.div_ceil(gex::PAGE_SIZE) * gex::PAGE_SIZE;
            let seg = Segment::attach(&team, seg_size).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            for size in SIZES {
                // Clear what this size will touch (and a guard byte after it).
                for w in 0..team.size() {
                    for v in 0..PUT_VARIANTS {
                        // SAFETY: inside our segment; nobody writes it until the barrier.
                        unsafe { std::ptr::write_bytes(seg.addr().add(region(w, v)), 0, size + 1) };
                    }
                }
                team.barrier();
                let mut keep: Vec<Vec<u8>> = Vec::new();
                let mut events: Vec<Event> = Vec::new();
                for r in 0..team.size() {
                    for v in 0..PUT_VARIANTS {
                        let mut data = pattern(seed(me, r, v, size), size);
                        let dest = bases[r as usize] + region(me, v);
                        // SAFETY: for the NB and NBI variants, `data` is kept in `keep`
                        // until the events and NBI categories are synchronized below.
                        unsafe {
                            match v {
                                0 => team.put_blocking(r, dest, &data, Flags::NONE).unwrap(),
                                1 => events.push(
                                    team.put_nb(r, dest, &data, Lc::Now, Flags::NONE).unwrap(),
                                ),
                                2 => events.push(
                                    team.put_nb(r, dest, &data, Lc::Defer, Flags::NONE).unwrap(),
                                ),
                                3 => {
                                    let mut lc = Event::invalid();
                                    let ev = team
                                        .put_nb(r, dest, &data, Lc::Event(&mut lc), Flags::NONE)
                                        .unwrap();
                                    lc.wait();
                                    events.push(ev);
                                }
                                4 => team.put_nbi(r, dest, &data, Lc::Now, Flags::NONE).unwrap(),
                                5 => team
                                    .put_nbi(r, dest, &data, Lc::Defer, Flags::NONE)
                                    .unwrap(),
                                _ => team
                                    .put_nbi(r, dest, &data, Lc::Group, Flags::NONE)
                                    .unwrap(),
                            }
                        }
                        if matches!(v, 1 | 4) {
                            // GEX_EVENT_NOW: the source may change once the call returns
                            // (a put still in flight must have its own copy).
                            data.fill(0xee);
                        }
                        keep.push(data);
                    }
                }
                gex::nbi_wait(EventCategory::LC);
                gex::nbi_wait(EventCategory::PUT);
                assert!(gex::nbi_test(EventCategory::PUT | EventCategory::LC));
                Event::wait_all(&mut events);
                assert!(events.iter().all(Event::is_invalid));
                drop(keep);
                team.barrier();
                for w in 0..team.size() {
                    for v in 0..PUT_VARIANTS {
                        let at = region(w, v);
                        // SAFETY: inside our segment; written before the barrier.
                        let got =
                            unsafe { std::slice::from_raw_parts(seg.addr().add(at), size + 1) };
                        assert!(
                            got[..size] == pattern(seed(w, me, v, size), size)[..],
                            "{size} bytes from rank {w}, put variant {v}"
                        );
                        assert_eq!(
                            got[size], 0,
                            "byte after {size} bytes from rank {w}, variant {v}"
                        );
                    }
                }
                // Read back what we wrote everywhere, with each get form.
                for r in 0..team.size() {
                    for v in 0..PUT_VARIANTS {
                        let src = bases[r as usize] + region(me, v);
                        let want = pattern(seed(me, r, v, size), size);
                        let mut got = vec![0u8; size];
                        match v % 3 {
                            0 => team.get_blocking(&mut got, r, src, Flags::NONE).unwrap(),
                            1 => {
                                // SAFETY: `got` lives and is untouched until the wait.
                                let ev = unsafe {
                                    team.get_nb(got.as_mut_ptr(), r, src, size, Flags::NONE)
                                }
                                .unwrap();
                                ev.wait();
                            }
                            _ => {
                                // SAFETY: as above, until nbi_wait.
                                unsafe {
                                    team.get_nbi(got.as_mut_ptr(), r, src, size, Flags::NONE)
                                }
                                .unwrap();
                                gex::nbi_wait(EventCategory::GET);
                            }
                        }
                        assert!(
                            got == want,
                            "get of {size} bytes from rank {r}, variant {v}"
                        );
                    }
                }
                team.barrier();
            }
            client.finalize();
        });
    }
}

/// A put into the middle of a peer's data changes exactly the bytes it names, and puts
/// and gets at unaligned addresses and to/from this rank's own segment work.
#[test]
fn unaligned_and_overlapping_ranges() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("RMA_UNALIGNED", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            let next = (me + 1) % team.size();
            let base = bases[next as usize] + 1000 * me as usize;
            let big = pattern(me as u64 + 1, 999);
            team.put_blocking(next, base, &big, Flags::NONE).unwrap();
            let patch = [0xAAu8; 13];
            team.put_blocking(next, base + 101, &patch, Flags::NONE)
                .unwrap();
            team.barrier();
            let prev = (me + team.size() - 1) % team.size();
            let mut want = pattern(prev as u64 + 1, 999);
            want[101..114].copy_from_slice(&patch);
            // SAFETY: inside our segment; written before the barrier.
            let got =
                unsafe { std::slice::from_raw_parts(seg.addr().add(1000 * prev as usize), 999) };
            assert!(got == &want[..], "patched data from rank {prev}");
            // Get an odd range back into an odd offset of a buffer.
            let mut buf = [0x11u8; 64];
            team.get_blocking(&mut buf[3..50], next, base + 97, Flags::NONE)
                .unwrap();
            let mut expect = pattern(me as u64 + 1, 999)[97..144].to_vec();
            expect[4..17].copy_from_slice(&patch);
            assert_eq!(&buf[3..50], &expect[..]);
            assert!(
                buf[..3].iter().chain(&buf[50..]).all(|&b| b == 0x11),
                "get wrote outside its buffer"
            );
            // Zero bytes: nothing is read or written, and the destination may be null (a
            // pointer valid for zero bytes).
            // SAFETY: no byte is written.
            unsafe {
                team.get_nbi(std::ptr::null_mut(), next, base, 0, Flags::NONE)
                    .unwrap();
                team.get_nb(std::ptr::null_mut(), next, base, 0, Flags::NONE)
                    .unwrap()
                    .wait();
            }
            gex::nbi_wait(EventCategory::GET);
            team.barrier();
            client.finalize();
        });
    }
}

/// "Value-based payloads": PutBlockingVal, PutNBIVal and PutNBVal write exactly the low
/// `nbytes` (1..=8) bytes of the value in native order, leaving the bytes around them
/// alone, and GetBlockingVal reads them back as an unsigned integer of that size.
#[test]
fn value_based_put_and_get() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("RMA_VALUES", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, MB).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            // Slot (writer, form, nbytes) is 32 bytes: 8 of 0xEE, the value, 0xEE after.
            let slot = |w: u32, form: usize, nb: usize| ((w as usize * 3 + form) * 8 + nb - 1) * 32;
            // SAFETY: inside our segment; nobody writes it before the barrier.
            unsafe { std::ptr::write_bytes(seg.addr(), 0xEE, slot(team.size(), 0, 1)) };
            team.barrier();
            let value = |w: u32, r: u32, form: usize, nb: usize| {
                0x8877_6655_4433_2211u64.rotate_left((w * 8 + r * 3 + form as u32 + nb as u32) * 5)
                    | 0x8080_8080_8080_8080
            };
            let mut events = Vec::new();
            for r in 0..team.size() {
                for nb in 1..=8 {
                    for form in 0..3 {
                        let dest = bases[r as usize] + slot(me, form, nb) + 8;
                        let v = value(me, r, form, nb);
                        match form {
                            0 => team.put_val_blocking(r, dest, v, nb, Flags::NONE).unwrap(),
                            1 => team.put_val_nbi(r, dest, v, nb, Flags::NONE).unwrap(),
                            _ => events.push(team.put_val_nb(r, dest, v, nb, Flags::NONE).unwrap()),
                        }
                    }
                }
            }
            gex::nbi_wait(EventCategory::PUT);
            Event::wait_all(&mut events);
            team.barrier();
            for w in 0..team.size() {
                for nb in 1..=8 {
                    for form in 0..3 {
                        let at = slot(w, form, nb);
                        // SAFETY: inside our segment; written before the barrier.
                        let got = unsafe { std::slice::from_raw_parts(seg.addr().add(at), 32) };
                        let v = value(w, me, form, nb);
                        assert!(
                            got[..8].iter().all(|&b| b == 0xEE),
                            "bytes before, {nb} bytes from {w}"
                        );
                        assert_eq!(
                            &got[8..8 + nb],
                            &v.to_ne_bytes()[..nb],
                            "{nb}-byte value from {w}, form {form}"
                        );
                        assert!(
                            got[8 + nb..].iter().all(|&b| b == 0xEE),
                            "bytes after, {nb} bytes from {w}, form {form}"
                        );
                    }
                }
            }
            for r in 0..team.size() {
                for nb in 1..=8 {
                    for form in 0..3 {
                        let src = bases[r as usize] + slot(me, form, nb) + 8;
                        let mask = if nb == 8 {
                            u64::MAX
                        } else {
                            (1u64 << (8 * nb)) - 1
                        };
                        assert_eq!(
                            team.get_val(r, src, nb, Flags::NONE),
                            value(me, r, form, nb) & mask,
                            "get_val of {nb} bytes"
                        );
                    }
                    // The byte after is 0xEE: a wider read sees it.
                    if nb < 8 {
                        let src = bases[r as usize] + slot(me, 0, nb) + 8;
                        let wider = team.get_val(r, src, nb + 1, Flags::NONE);
                        assert_eq!(wider >> (8 * nb), 0xEE, "the byte after a {nb}-byte put");
                    }
                }
            }
            for bad in [0, 9, 16] {
                common::expect_panic(&["Team::put_val_blocking", "nbytes must be 1..=8"], || {
                    team.put_val_blocking(me, bases[me as usize], 1, bad, Flags::NONE)
                });
                common::expect_panic(&["Team::get_val", "nbytes must be 1..=8"], || {
                    team.get_val(me, bases[me as usize], bad, Flags::NONE)
                });
                common::expect_panic(&["Team::put_val_nbi"], || {
                    team.put_val_nbi(me, bases[me as usize], 1, bad, Flags::NONE)
                });
                common::expect_panic(&["Team::put_val_nb"], || {
                    team.put_val_nb(me, bases[me as usize], 1, bad, Flags::NONE)
                });
            }
            team.barrier();
            client.finalize();
        });
    }
}

/// A blocking get whose wait runs a handler that panics returns (unwinding) only once
/// its bytes have landed: its answer still names the destination, which the unwinding
/// frees. Rank 0 asks rank 1 for a Reply whose handler panics, then gets from rank 1;
/// the panicking Reply was sent before the get's answer, so rank 0 handles it first.
/// Where the get travels as messages (ranks 0 and 1 on two hosts, the get no larger
/// than `gex::testing::am_rma_max(true)`) the panic comes out of the get, and the bytes must
/// be there when it does; later blocking gets still work. Elsewhere the get copies at
/// once, or completes through the MPI window, and the panic comes out of a poll after
/// it.
#[test]
fn blocking_get_unwinding_waits_for_its_answer() {
    spmd(2, || {
        common::quiet_expected_panics();
        let (client, ep, team) = Client::init("RMA_UNWIND", Flags::NONE).unwrap();
        let boom = common::am::PanickingReply::register(&ep);
        let seg = Segment::attach(&team, MB).unwrap();
        let bases = common::segment_bases(&team);
        // One message's worth, and more than messages carry between hosts (an
        // `MPI_Rget` through the window, or many pieces).
        for len in [64, MB / 2] {
            let data = pattern(0x0e4d + len as u64, len);
            if team.rank() == 1 {
                // SAFETY: our own segment; rank 0 reads it only after the barrier.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), seg.addr(), len) };
            }
            team.barrier();
            if team.rank() == 0 {
                let apart = gex::testing::placement()
                    .host_of(0, 2)
                    .zip(gex::testing::placement().host_of(1, 2))
                    .map(|(a, b)| a.0 != b.0);
                let mut got = vec![0u8; len];
                boom.ask(&team, 1);
                let mut panic = common::try_panic_message(|| {
                    team.get_blocking(&mut got, 1, bases[1], Flags::NONE)
                });
                assert!(
                    got == data,
                    "{len} bytes: the get's bytes when it returned or unwound"
                );
                // A get of one message waits for its answer, running the Reply before
                // it; a larger one may complete (through the window) before any poll.
                if apart == Some(true) && len <= gex::testing::am_rma_max(true) {
                    assert!(panic.is_some(), "the get between hosts ran no handler");
                }
                while panic.is_none() {
                    panic = common::try_panic_message(gex::poll);
                }
                assert!(panic.unwrap().contains(common::am::BOOM));
                for _ in 0..3 {
                    let mut again = vec![0u8; len];
                    team.get_blocking(&mut again, 1, bases[1], Flags::NONE)
                        .unwrap();
                    assert!(again == data, "a blocking get after the unwound one");
                }
            }
            team.barrier();
        }
        client.finalize();
    });
}

/// Many NB and NBI gets in flight at once, of every rank's segment, small and large
/// (between hosts of the mpi conduit: messages to the owner, and `MPI_Rget`s tested by
/// every poll), synchronized together by `gex_Event_WaitAll` and `gex_NBI_Wait`; every
/// byte is the owner's.
#[test]
fn gets_in_flight_together() {
    const PIECES: usize = 6;
    const PIECE: usize = 48 << 10;
    for n in 1..=4 {
        spmd(n, || {
            let (client, _ep, team) = Client::init("RMA_INFLIGHT", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, 2 * PIECES * PIECE).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            let mine = pattern(u64::from(me) + 77, PIECES * PIECE);
            // SAFETY: this rank's own segment, which no one reads before the barrier.
            unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), seg.addr(), mine.len()) };
            team.barrier();
            let size = team.size() as usize;
            let mut nb = vec![0u8; size * PIECES * PIECE];
            let mut nbi = vec![0u8; size * PIECES * PIECE];
            let mut events = Vec::new();
            for r in 0..team.size() {
                for p in 0..PIECES {
                    // Pieces of every size class: 8 bytes (a message), 3 KiB (the
                    // largest message), the rest (the window between hosts).
                    let len = [8, 3072, PIECE][p % 3];
                    let at = p * PIECE;
                    let src = bases[r as usize] + at;
                    let off = r as usize * PIECES * PIECE + at;
                    // SAFETY: the destinations stay untouched until the waits below.
                    unsafe {
                        events.push(
                            team.get_nb(nb.as_mut_ptr().add(off), r, src, len, Flags::NONE)
                                .unwrap(),
                        );
                        team.get_nbi(nbi.as_mut_ptr().add(off), r, src, len, Flags::NONE)
                            .unwrap();
                    }
                }
            }
            Event::wait_all(&mut events);
            gex::nbi_wait(EventCategory::GET);
            for r in 0..team.size() {
                let theirs = pattern(u64::from(r) + 77, PIECES * PIECE);
                for p in 0..PIECES {
                    let len = [8, 3072, PIECE][p % 3];
                    let at = p * PIECE;
                    let off = r as usize * PIECES * PIECE + at;
                    assert!(
                        nb[off..off + len] == theirs[at..at + len],
                        "NB piece {p} of {r}"
                    );
                    assert!(
                        nbi[off..off + len] == theirs[at..at + len],
                        "NBI piece {p} of {r}"
                    );
                }
            }
            team.barrier();
            client.finalize();
        });
    }
}

/// Puts whose caller keeps the source ("NOTE 2a": any `lc_opt` but `GEX_EVENT_NOW`) to
/// a segment on another host return before they complete, however large, and report
/// local completion no earlier than that: rank 1 leaves the library (saying so by a
/// file) and stays out until rank 0's puts have returned (another file), and the lc
/// event and the DEFER put's lc leaf must still be pending at return (a put complete at
/// return fails here). A put
/// that waited inside the call for rank 1's progress would make rank 1 fail the job
/// after 30 s (also with Open MPI's `osc pt2pt`, which serves a window operation only
/// inside the target's MPI calls, once a first put has made it take the target's
/// lock; see the mpi conduit's documentation). Every put is larger than
/// `GEX_MPI_AM_RMA_MAX`, so that it takes the window: a put by messages larger than
/// the flow control's window waits inside the call for the owner to return credits.
/// Both ranks on one host: nothing to check.
#[test]
fn held_puts_to_another_host_return_before_they_complete() {
    const WAIT: std::time::Duration = std::time::Duration::from_secs(30);
    let by_messages: usize = std::env::var("GEX_MPI_AM_RMA_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3 << 10);
    let pieces = [MB, 3 * MB / 2, 200 << 10].map(|len| by_messages + len);
    let spacing = (by_messages + 3 * MB / 2).next_multiple_of(8);
    spmd(2, || {
        let (client, _ep, team) = Client::init("RMA_HELD", Flags::NONE).unwrap();
        let warm_at = 3 * spacing;
        let warm_len = by_messages + (8 << 10);
        let seg =
            Segment::attach(&team, (warm_at + warm_len).next_multiple_of(gex::PAGE_SIZE)).unwrap();
        let bases = common::segment_bases(&team);
        let me = team.rank();
        if team.segment_bound(1 - me).unwrap().local_addr.is_some() {
            team.barrier();
            client.finalize();
            return;
        }
        // A name both ranks know: rank 0's process id, read from its segment.
        if me == 0 {
            let pid = u64::from(std::process::id());
            // SAFETY: our own segment, read by rank 1 after the barrier only.
            unsafe { seg.addr().cast::<u64>().write(pid) };
        }
        team.barrier();
        let mut pid = [0u8; 8];
        team.get_blocking(&mut pid, 0, bases[0], Flags::NONE)
            .unwrap();
        let file = std::env::temp_dir().join(format!("gex-held-puts-{}", u64::from_le_bytes(pid)));
        let ready = file.with_extension("ready");
        if me == 0 {
            // A first transfer through the window, while rank 1 is in the library:
            // `osc pt2pt` takes each target's lock of `MPI_Win_lock_all` at the first
            // operation to it, which waits for the target.
            let warm = vec![1u8; warm_len];
            team.put_blocking(1, bases[1] + warm_at, &warm, Flags::NONE)
                .unwrap();
        }
        team.barrier();
        if me == 1 {
            std::fs::write(&ready, b"ready").unwrap();
            let start = std::time::Instant::now();
            while !file.exists() {
                assert!(
                    start.elapsed() < WAIT,
                    "rank 0's puts to this rank did not return while it made no progress"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        } else {
            let start = std::time::Instant::now();
            while !ready.exists() {
                assert!(start.elapsed() < WAIT, "rank 1 never left the library");
                gex::poll();
            }
            let data: Vec<Vec<u8>> = pieces
                .iter()
                .enumerate()
                .map(|(i, &len)| pattern(0x4e1d + i as u64, len))
                .collect();
            let mut at = bases[1];
            let mut dest = || {
                let d = at;
                at += spacing;
                d
            };
            let mut lc = Event::invalid();
            // SAFETY: `data` is kept until every event and NBI category below is
            // synchronized.
            let (defer, event) = unsafe {
                let defer = team
                    .put_nb(1, dest(), &data[0], Lc::Defer, Flags::NONE)
                    .unwrap();
                let event = team
                    .put_nb(1, dest(), &data[1], Lc::Event(&mut lc), Flags::NONE)
                    .unwrap();
                team.put_nbi(1, dest(), &data[2], Lc::Group, Flags::NONE)
                    .unwrap();
                (defer, event)
            };
            std::fs::write(&file, b"returned").unwrap();
            assert!(
                !lc.is_invalid(),
                "local completion reported at return, although the source may still be read"
            );
            let leaf = defer.query_leaf(EventCategory::LC);
            assert!(
                !leaf.is_invalid(),
                "the DEFER put's lc leaf says its source is free, although it may still be read"
            );
            let mut events = vec![defer, event, lc, leaf];
            Event::wait_all(&mut events);
            gex::nbi_wait(EventCategory::LC | EventCategory::PUT);
        }
        team.barrier();
        if me == 1 {
            let mut at = 0;
            for (i, &len) in pieces.iter().enumerate() {
                // SAFETY: our own segment, written by rank 0's puts before the barrier.
                let got = unsafe { std::slice::from_raw_parts(seg.addr().add(at), len) };
                assert!(
                    got == pattern(0x4e1d + i as u64, len),
                    "put {i} landed wrong"
                );
                at += spacing;
            }
            let _ = std::fs::remove_file(&file);
            let _ = std::fs::remove_file(&ready);
        }
        team.barrier();
        client.finalize();
    });
}

/// Between hosts a blocking put or get takes the threshold of blocking transfers (which
/// the mpi conduit may measure at attach; `gex::testing::am_rma_max(true)`), a
/// non-blocking one the configured threshold (`am_rma_max(false)`). With the blocking
/// threshold at 0 on both ranks, rank 0's blocking puts and gets of 8 bytes to rank 1
/// (another host) add no AM to those rank 1 handles over MPI (they take the MPI
/// window), while its non-blocking ones add one each (the Request); with the blocking
/// threshold back at the configured one, the blocking ones add one each too. The
/// barriers between the phases are signals between hosts, not AMs. Ranks 0 and 1 on
/// one host: nothing to check.
#[test]
fn blocking_transfers_between_hosts_take_their_own_threshold() {
    const N: u64 = 10;
    spmd(2, || {
        let (client, _ep, team) = Client::init("RMA_PATHS", Flags::NONE).unwrap();
        let _seg = Segment::attach(&team, MB).unwrap();
        let bases = common::segment_bases(&team);
        let me = team.rank();
        let configured = gex::testing::am_rma_max(false);
        if team.segment_bound(1 - me).unwrap().local_addr.is_some() || configured < 8 {
            team.barrier();
            client.finalize();
            return;
        }
        // AMs rank 1 handled over MPI while rank 0 moved 8 bytes there and back N
        // times, blocking or not, with the blocking threshold at `blocking_max`.
        let handled = |blocking_max: usize, blocking: bool| -> u64 {
            gex::testing::set_am_rma_blocking_max(blocking_max);
            team.barrier();
            let before = gex::testing::am_handled_over_mpi();
            if me == 0 {
                for i in 0..N {
                    let word = (i + 1).to_le_bytes();
                    let mut got = [0u8; 8];
                    if blocking {
                        team.put_blocking(1, bases[1], &word, Flags::NONE).unwrap();
                        team.get_blocking(&mut got, 1, bases[1], Flags::NONE)
                            .unwrap();
                    } else {
                        // SAFETY: `word` and `got` live and are untouched until the
                        // waits.
                        unsafe {
                            team.put_nb(1, bases[1], &word, Lc::Now, Flags::NONE)
                                .unwrap()
                                .wait();
                            team.get_nb(got.as_mut_ptr(), 1, bases[1], 8, Flags::NONE)
                                .unwrap()
                                .wait();
                        }
                    }
                    assert_eq!(got, word, "blocking: {blocking}, threshold {blocking_max}");
                }
            }
            team.barrier();
            gex::testing::am_handled_over_mpi() - before
        };
        let window = handled(0, true);
        let non_blocking = handled(0, false);
        let messages = handled(configured, true);
        if me == 1 {
            assert_eq!(window, 0, "AMs of blocking transfers through the window");
            assert!(
                non_blocking >= 2 * N,
                "{non_blocking} AMs of {N} non-blocking puts and gets"
            );
            assert!(
                messages >= 2 * N,
                "{messages} AMs of {N} blocking puts and gets by messages"
            );
        }
        team.barrier();
        client.finalize();
    });
}
