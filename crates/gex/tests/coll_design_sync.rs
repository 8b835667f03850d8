//! The flags and sync modes of the GASNet collectives design document: the flag
//! categories ("Argument conventions: flags"), the input and output sync modes
//! ("Synchronization modes"), each shown by a test in which one rank is delayed (with
//! scatter, gather-all and the broadcast, and the "i" scatter and broadcast), with
//! messages (LOCAL) and with the shared-memory method (SINGLE), and AGGREGATE
//! ("Current proposal").
mod common;

use common::coll::{attach, finalize, flags, init, local};

use std::time::{Duration, Instant};

use gex::coll::{set_method, Addr, CollFlags, Method, Operation};
use gex::ops::{Dt, Op};
use gex::testing::spmd;
use gex::{Event, Flags, Rank, Segment, Team};

/// "There are no default values for these three categories of flags. The client must
/// provide exactly one flag value from each": a missing or doubled category, and an
/// address argument of the other scope, fail naming the call.
#[test]
fn flags_need_exactly_one_of_each_category() {
    spmd(1, || {
        common::quiet_expected_panics();
        let team = init("DESIGN_FLAGS");
        let mut buf = [0u8; 4];
        let p = buf.as_mut_ptr();
        let bad = [
            (
                CollFlags::OUT_MYSYNC | CollFlags::LOCAL,
                "input synchronization",
            ),
            (
                CollFlags::IN_MYSYNC
                    | CollFlags::IN_ALLSYNC
                    | CollFlags::OUT_MYSYNC
                    | CollFlags::LOCAL,
                "input synchronization",
            ),
            (
                CollFlags::IN_MYSYNC | CollFlags::LOCAL,
                "output synchronization",
            ),
            (
                CollFlags::IN_MYSYNC
                    | CollFlags::OUT_NOSYNC
                    | CollFlags::OUT_ALLSYNC
                    | CollFlags::LOCAL,
                "output synchronization",
            ),
            (CollFlags::IN_MYSYNC | CollFlags::OUT_MYSYNC, "addressing"),
            (
                CollFlags::IN_MYSYNC | CollFlags::OUT_MYSYNC | CollFlags::LOCAL | CollFlags::SINGLE,
                "addressing",
            ),
        ];
        for (f, what) in bad {
            // SAFETY: never starts (the flags are refused).
            common::expect_panic(&["Team::gather_all_nb", what], || unsafe {
                team.gather_all_nb(p.into(), p.cast_const().into(), 1, f)
            });
        }
        let single = flags(
            CollFlags::IN_MYSYNC,
            CollFlags::OUT_MYSYNC,
            CollFlags::SINGLE,
        );
        // SAFETY: never starts.
        common::expect_panic(&["Team::scatter_nb", "Addr::Single"], || unsafe {
            team.scatter_nb(0, p.into(), p.into(), 1, single)
        });
        finalize(&team);
    });
}

/// Spins (polling) until `f` holds, failing after 20 s.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        gex::poll();
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
    }
}

/// Polls for a while, checking that `f` keeps holding.
fn stays(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(150) {
        gex::poll();
        assert!(f(), "{what}");
    }
}

/// The rank held back in the sync-mode tests, released by a flag in its segment.
struct Held<'a> {
    team: &'a Team,
    seg: &'a Segment,
    bases: Vec<usize>,
}

const FLAG_AT: usize = 0;
const DATA_AT: usize = 4096;

impl Held<'_> {
    fn last(&self) -> Rank {
        self.team.size() - 1
    }

    /// At the held rank: waits for the release.
    fn wait_release(&self) {
        // SAFETY: an aligned u64 of our own segment.
        until(
            "the release",
            || unsafe { common::read_u64(self.seg.addr() as usize + FLAG_AT) } == 1,
        );
    }

    fn release(&self) {
        self.team
            .put_blocking(
                self.last(),
                self.bases[self.last() as usize] + FLAG_AT,
                &1u64.to_ne_bytes(),
                Flags::NONE,
            )
            .unwrap();
    }

    fn reset(&self) {
        // SAFETY: our own segment, before the barrier that starts each case.
        unsafe { std::ptr::write_bytes(self.seg.addr().add(FLAG_AT), 0, 8) };
        self.team.barrier();
    }

    /// This rank's data area.
    fn data(&self, len: usize) -> &[u8] {
        // SAFETY: inside our segment; read while a collective may write it, which the
        // test does on purpose, byte by byte through a volatile read below.
        unsafe { std::slice::from_raw_parts(self.seg.addr().add(DATA_AT), len) }
    }
}

fn read_volatile(bytes: &[u8]) -> Vec<u8> {
    // SAFETY: every byte of the slice is readable.
    bytes
        .iter()
        .map(|b| unsafe { std::ptr::read_volatile(b) })
        .collect()
}

/// The rooted collectives of the sync-mode tests, from rank 0 with 8-byte blocks out of
/// the 24 bytes `1..=24`; the "i" calls with one image per rank (after `coll_init`).
#[derive(Debug, Clone, Copy)]
enum Rooted {
    Scatter,
    Broadcast,
    ScatterI,
    BroadcastI,
}

impl Rooted {
    /// The bytes rank `r` receives.
    fn block(self, r: Rank) -> Vec<u8> {
        let first = match self {
            Rooted::Scatter | Rooted::ScatterI => r as u8 * 8,
            Rooted::Broadcast | Rooted::BroadcastI => 0,
        };
        (first + 1..first + 9).collect()
    }

    /// Every case: the plain calls and the "i" calls.
    const ALL: [Rooted; 4] = [
        Rooted::Scatter,
        Rooted::Broadcast,
        Rooted::ScatterI,
        Rooted::BroadcastI,
    ];

    /// Starts the collective; a plain call's addresses may be LOCAL or SINGLE, an "i"
    /// call's are LOCAL (`dst` is this rank's one image).
    ///
    /// # Safety
    /// The buffers behind `dst` and `src` must outlive the event.
    unsafe fn start(self, team: &Team, dst: Addr<'_>, src: Addr<'_>, f: CollFlags) -> Event {
        let image = |dst: Addr<'_>| match dst {
            Addr::Local(p) => [p],
            Addr::Single(_) => unreachable!("the \"i\" cases use LOCAL addresses"),
        };
        // SAFETY: passed on to the caller.
        unsafe {
            match self {
                Rooted::Scatter => team.scatter_nb(0, dst, src, 8, f),
                Rooted::Broadcast => team.coll_broadcast_nb(0, dst, src, 8, f),
                Rooted::ScatterI => team.scatteri_nb(0, image(dst)[..].into(), src, 8, f),
                Rooted::BroadcastI => team.broadcasti_nb(0, image(dst)[..].into(), src, 8, f),
            }
        }
    }

    fn operation(self) -> Operation {
        match self {
            Rooted::Scatter | Rooted::ScatterI => Operation::Scatter,
            Rooted::Broadcast | Rooted::BroadcastI => Operation::Broadcast,
        }
    }
}

/// IN_ALLSYNC ("Data movement may begin only when all nodes have entered") against
/// IN_MYSYNC and IN_NOSYNC: a scatter and a broadcast from rank 0 while the last rank
/// is held before the call. With ALLSYNC rank 1's destination stays untouched until the last rank
/// enters; with MYSYNC and NOSYNC it is written while that rank is still held.
#[test]
fn in_allsync_moves_nothing_before_every_rank_entered() {
    spmd(3, || {
        let team = init("DESIGN_IN_SYNC");
        let me = team.rank();
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases,
        };
        team.coll_init(&vec![1; team.size() as usize]);
        let cases = Rooted::ALL.map(|op| {
            [
                CollFlags::IN_ALLSYNC,
                CollFlags::IN_MYSYNC,
                CollFlags::IN_NOSYNC,
            ]
            .map(|input| (op, input))
        });
        for (op, input) in cases.into_iter().flatten() {
            held.reset();
            // SAFETY: our own segment; nobody writes it before the collective.
            unsafe { std::ptr::write_bytes(seg.addr().add(DATA_AT), 0, 8) };
            team.barrier();
            let src: Vec<u8> = (0..24).map(|i| i + 1).collect();
            if me == held.last() {
                held.wait_release();
            }
            let f = flags(input, CollFlags::OUT_MYSYNC, CollFlags::LOCAL);
            // SAFETY: `src` and the segment outlive the wait.
            let ev = unsafe {
                op.start(
                    &team,
                    seg.addr().add(DATA_AT).into(),
                    src.as_ptr().into(),
                    f,
                )
            };
            if me == 1 {
                if input == CollFlags::IN_ALLSYNC {
                    stays(
                        "IN_ALLSYNC wrote a destination before every rank entered",
                        || read_volatile(held.data(8)) == [0; 8],
                    );
                } else {
                    until("the block of a rank that entered", || {
                        read_volatile(held.data(8)) == op.block(1)
                    });
                }
                held.release();
            }
            ev.wait();
            assert_eq!(read_volatile(held.data(8)), op.block(me), "{op:?} {f:?}");
        }
        finalize(&team);
    });
}

/// IN_MYSYNC with SINGLE addressing and the shared-memory method (which reads sources
/// directly): "Data movement in or out of the memory of a given node may begin no
/// earlier than the execution of the collective initiation function on that node".
/// The held rank fills its source only just before its call; the others still get its
/// block, and already have each other's while it is held.
#[test]
fn in_mysync_reads_a_source_only_after_its_owner_entered() {
    spmd(3, || {
        let team = init("DESIGN_IN_MYSYNC");
        let (me, n) = (team.rank(), team.size());
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases: bases.clone(),
        };
        set_method(Operation::GatherAll, Some(Method::Shared));
        held.reset();
        let src_at = DATA_AT + 1024;
        // SAFETY: our own segment, before the collective.
        unsafe {
            std::ptr::write_bytes(seg.addr().add(DATA_AT), 0, 3 * 8);
            std::ptr::write_bytes(
                seg.addr().add(src_at),
                if me == held.last() { 0 } else { me as u8 + 1 },
                8,
            );
        }
        team.barrier();
        if me == held.last() {
            held.wait_release();
            // SAFETY: our own source, before the call.
            unsafe { std::ptr::write_bytes(seg.addr().add(src_at), me as u8 + 1, 8) };
        }
        let dsts: Vec<usize> = bases.iter().map(|b| b + DATA_AT).collect();
        let srcs: Vec<usize> = bases.iter().map(|b| b + src_at).collect();
        let f = flags(
            CollFlags::IN_MYSYNC,
            CollFlags::OUT_MYSYNC,
            CollFlags::SINGLE,
        );
        // SAFETY: the segment outlives the wait.
        let ev =
            unsafe { team.gather_all_nb(dsts.as_slice().into(), srcs.as_slice().into(), 8, f) };
        if me == 0 {
            until("the blocks of the ranks that entered", || {
                read_volatile(&held.data(16)[8..16]) == [2; 8]
            });
            stays("a block was read before its owner entered", || {
                read_volatile(&held.data(24)[16..]) == [0; 8]
            });
            held.release();
        }
        ev.wait();
        let want: Vec<u8> = (0..n).flat_map(|r| [r as u8 + 1; 8]).collect();
        assert_eq!(read_volatile(held.data(24)), want);
        finalize(&team);
    });
}

/// OUT_ALLSYNC ("can succeed as soon as all data movement has completed to and from
/// all data areas") against OUT_MYSYNC: a scatter and a broadcast from rank 0 while the
/// last rank is held before the call. With MYSYNC rank 0's event completes while the last rank has
/// not entered (its destination still empty, read one-sidedly); with ALLSYNC it cannot
/// complete before the held rank's block arrived, and then that block is there.
#[test]
fn out_allsync_completes_only_after_every_rank_got_its_data() {
    spmd(3, || {
        let team = init("DESIGN_OUT_SYNC");
        let me = team.rank();
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases: bases.clone(),
        };
        let last = held.last();
        team.coll_init(&vec![1; team.size() as usize]);
        let cases = Rooted::ALL.map(|op| {
            [
                CollFlags::OUT_ALLSYNC,
                CollFlags::OUT_MYSYNC,
                CollFlags::OUT_NOSYNC,
            ]
            .map(|output| (op, output))
        });
        for (op, output) in cases.into_iter().flatten() {
            held.reset();
            // SAFETY: our own segment, before the collective.
            unsafe { std::ptr::write_bytes(seg.addr().add(DATA_AT), 0, 8) };
            team.barrier();
            let src: Vec<u8> = (0..24).map(|i| i + 1).collect();
            if me == last {
                held.wait_release();
            }
            let f = flags(CollFlags::IN_MYSYNC, output, CollFlags::LOCAL);
            // SAFETY: `src` and the segment outlive the wait.
            let mut ev = unsafe {
                op.start(
                    &team,
                    seg.addr().add(DATA_AT).into(),
                    src.as_ptr().into(),
                    f,
                )
            };
            if me == 0 {
                let mut far = [0u8; 8];
                if output == CollFlags::OUT_ALLSYNC {
                    stays("OUT_ALLSYNC completed before the held rank entered", || {
                        !ev.test()
                    });
                    held.release();
                    ev.wait();
                    team.get_blocking(&mut far, last, bases[last as usize] + DATA_AT, Flags::NONE)
                        .unwrap();
                    assert_eq!(
                        far.to_vec(),
                        op.block(last),
                        "{op:?}: OUT_ALLSYNC completed before all data arrived"
                    );
                } else {
                    until("local completion", || ev.test());
                    team.get_blocking(&mut far, last, bases[last as usize] + DATA_AT, Flags::NONE)
                        .unwrap();
                    assert_eq!(far, [0; 8]);
                    held.release();
                }
            } else {
                ev.wait();
            }
            team.barrier();
            assert_eq!(read_volatile(held.data(8)), op.block(me), "{op:?} {f:?}");
        }
        finalize(&team);
    });
}

/// OUT_MYSYNC with the shared-memory method ("all data movement has completed to and
/// from local data areas"): the root of a SINGLE scatter or broadcast, whose source the
/// others read, cannot complete while a reader is held; with OUT_NOSYNC it completes at once (its
/// source is then synchronized only when every rank has synced).
#[test]
fn out_mysync_waits_for_the_readers_of_a_source() {
    if gex::testing::skip_unless_one_host("the shared-memory method maps every segment") {
        return;
    }
    spmd(3, || {
        let team = init("DESIGN_OUT_MYSYNC");
        let me = team.rank();
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases: bases.clone(),
        };
        let src_at = DATA_AT + 1024;
        let cases = [Rooted::Scatter, Rooted::Broadcast]
            .map(|op| [CollFlags::OUT_MYSYNC, CollFlags::OUT_NOSYNC].map(|output| (op, output)));
        for (op, output) in cases.into_iter().flatten() {
            set_method(op.operation(), Some(Method::Shared));
            held.reset();
            // SAFETY: our own segment, before the collective.
            unsafe {
                std::ptr::write_bytes(seg.addr().add(DATA_AT), 0, 8);
                for i in 0..24 {
                    *seg.addr().add(src_at + i) = i as u8 + 1;
                }
            }
            team.barrier();
            if me == held.last() {
                held.wait_release();
            }
            let dsts: Vec<usize> = bases.iter().map(|b| b + DATA_AT).collect();
            let srcs: Vec<usize> = bases.iter().map(|b| b + src_at).collect();
            let f = flags(CollFlags::IN_MYSYNC, output, CollFlags::SINGLE);
            // SAFETY: the segment outlives the wait.
            let mut ev =
                unsafe { op.start(&team, dsts.as_slice().into(), srcs.as_slice().into(), f) };
            if me == 0 {
                if output == CollFlags::OUT_MYSYNC {
                    stays(
                        "OUT_MYSYNC completed while a reader of the source was held",
                        || !ev.test(),
                    );
                } else {
                    until("local completion", || ev.test());
                }
                held.release();
            }
            ev.wait();
            team.barrier();
            assert_eq!(read_volatile(held.data(8)), op.block(me), "{op:?} {f:?}");
        }
        finalize(&team);
    });
}

/// AGGREGATE: "consecutive non-blocking collective initiation calls [are] aggregated
/// into a single collective operation with a single handle". The members return the
/// invalid event; the last member's event completes only when all of them have, here
/// with a held rank that the first member waits for.
#[test]
fn aggregate_completes_with_its_last_member() {
    spmd(3, || {
        let team = init("DESIGN_AGGREGATE");
        let (me, n) = (team.rank(), team.size());
        let (seg, bases) = attach(&team, 2 * 4096);
        let held = Held {
            team: &team,
            seg: &seg,
            bases,
        };
        held.reset();
        let agg = local() | CollFlags::AGGREGATE;
        let src: Vec<u8> = vec![me as u8 + 1; 4];
        let mut first = vec![0u8; 4 * n as usize];
        let mut second = vec![0u8; 4 * n as usize];
        if me == held.last() {
            held.wait_release();
        }
        // SAFETY: the buffers outlive the wait of the aggregate's event.
        let (e1, e2) = unsafe {
            (
                team.gather_nb(0, first.as_mut_ptr().into(), src.as_ptr().into(), 4, agg),
                team.gather_all_nb(second.as_mut_ptr().into(), src.as_ptr().into(), 4, agg),
            )
        };
        assert!(
            e1.is_invalid() && e2.is_invalid(),
            "members of an aggregate return the invalid event"
        );
        let mut data = vec![0u8; 4];
        // SAFETY: outlives the wait.
        let mut closing = unsafe {
            team.gather_all_nb(data.as_mut_ptr().into(), src.as_ptr().into(), 0, local())
        };
        if me == 0 {
            stays("the aggregate completed before a member could", || {
                !closing.test()
            });
            held.release();
        }
        closing.wait();
        let want: Vec<u8> = (0..n).flat_map(|r| [r as u8 + 1; 4]).collect();
        assert_eq!(second, want);
        if me == 0 {
            assert_eq!(first, want);
        }
        finalize(&team);
    });
}

/// An aggregate is its thread's: while one thread has members of an aggregate under
/// way on one team, another thread's calls on another team neither join nor end it, and
/// a blocking call there is allowed.
#[test]
fn an_aggregate_is_its_threads_own() {
    spmd(2, || {
        let team = init("DESIGN_AGGREGATE_THREADS");
        let (me, n) = (team.rank(), team.size());
        let other = team.split(Some(0), me as i32, None).expect("a member");
        let agg = local() | CollFlags::AGGREGATE;
        let src: Vec<u8> = vec![me as u8 + 1; 4];
        let mut first = vec![0u8; 4 * n as usize];
        // SAFETY: the buffers outlive the wait of the aggregate's event.
        let e1 =
            unsafe { team.gather_all_nb(first.as_mut_ptr().into(), src.as_ptr().into(), 4, agg) };
        assert!(e1.is_invalid());
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut got = vec![0u8; 4 * n as usize];
                // SAFETY: both buffers outlive the call, which waits.
                unsafe {
                    other.gather_all(got.as_mut_ptr().into(), src.as_ptr().into(), 4, local())
                };
                let want: Vec<u8> = (0..n).flat_map(|r| [r as u8 + 1; 4]).collect();
                assert_eq!(got, want);
            });
        });
        let mut data = vec![0u8; 4];
        // SAFETY: outlives the wait.
        unsafe { team.gather_all_nb(data.as_mut_ptr().into(), src.as_ptr().into(), 0, local()) }
            .wait();
        let want: Vec<u8> = (0..n).flat_map(|r| [r as u8 + 1; 4]).collect();
        assert_eq!(first, want);
        other.destroy();
        finalize(&team);
    });
}

/// Every data-movement call of the document, for the IN_ALLSYNC test below: 8-byte
/// blocks, rooted ones from rank 0, permute to the next rank, prefix reduction as one
/// `u64` sum; the "i" calls with one image per rank.
#[derive(Debug, Clone, Copy)]
enum Movement {
    Broadcast,
    Scatter,
    Gather,
    GatherAll,
    GatherAllStaggered,
    Exchange,
    Permute,
    PrefixReduce,
    BroadcastI,
    ScatterI,
    GatherI,
    GatherAllI,
    ExchangeI,
}

impl Movement {
    const ALL: [Movement; 13] = [
        Movement::Broadcast,
        Movement::Scatter,
        Movement::Gather,
        Movement::GatherAll,
        Movement::GatherAllStaggered,
        Movement::Exchange,
        Movement::Permute,
        Movement::PrefixReduce,
        Movement::BroadcastI,
        Movement::ScatterI,
        Movement::GatherI,
        Movement::GatherAllI,
        Movement::ExchangeI,
    ];

    /// Starts the call on `dst` and `src` (each large enough for `n` blocks).
    ///
    /// # Safety
    /// Both must stay valid until the event completes.
    unsafe fn start(self, team: &Team, dst: *mut u8, src: *mut u8, f: CollFlags) -> Event {
        let n = team.size();
        let perm: Vec<Rank> = (0..n).map(|r| (r + 1) % n).collect();
        let (dl, sl) = ([dst], [src]);
        let (dl, sl): (&[*mut u8], &[*mut u8]) = (&dl, &sl);
        set_method(
            Operation::GatherAll,
            matches!(self, Movement::GatherAllStaggered).then_some(Method::Staggered),
        );
        // SAFETY: passed on to the caller.
        unsafe {
            match self {
                Movement::Broadcast => team.coll_broadcast_nb(0, dst.into(), src.into(), 8, f),
                Movement::Scatter => team.scatter_nb(0, dst.into(), src.into(), 8, f),
                Movement::Gather => team.gather_nb(0, dst.into(), src.into(), 8, f),
                Movement::GatherAll | Movement::GatherAllStaggered => {
                    team.gather_all_nb(dst.into(), src.into(), 8, f)
                }
                Movement::Exchange => team.exchange_nb(dst.into(), src.into(), 8, f),
                Movement::Permute => team.permute_nb(&perm, dst.into(), src.into(), 8, f),
                Movement::PrefixReduce => {
                    team.prefix_reduce_nb(dst.into(), src.into(), Dt::U64, 8, 1, Op::Add, None, f)
                }
                Movement::BroadcastI => team.broadcasti_nb(0, dl.into(), src.into(), 8, f),
                Movement::ScatterI => team.scatteri_nb(0, dl.into(), src.into(), 8, f),
                Movement::GatherI => team.gatheri_nb(0, dst.into(), sl.into(), 8, f),
                Movement::GatherAllI => team.gather_alli_nb(dl.into(), sl.into(), 8, f),
                Movement::ExchangeI => team.exchangei_nb(dl.into(), sl.into(), 8, f),
            }
        }
    }

    /// What rank `me` of `n` holds in its `dst` afterwards, when rank `r`'s `src` holds
    /// `src(r)` (`n` blocks).
    fn expected(self, me: Rank, n: Rank, src: impl Fn(Rank) -> Vec<u8>) -> Vec<u8> {
        let block = |r: Rank, b: Rank| src(r)[b as usize * 8..][..8].to_vec();
        let all = |f: &dyn Fn(Rank) -> Vec<u8>| (0..n).flat_map(f).collect::<Vec<u8>>();
        let mut dst = match self {
            Movement::Broadcast | Movement::BroadcastI => block(0, 0),
            Movement::Scatter | Movement::ScatterI => block(0, me),
            Movement::Gather | Movement::GatherI if me == 0 => all(&|r| block(r, 0)),
            Movement::Gather | Movement::GatherI => Vec::new(),
            Movement::GatherAll | Movement::GatherAllStaggered | Movement::GatherAllI => {
                all(&|r| block(r, 0))
            }
            Movement::Exchange | Movement::ExchangeI => all(&|r| block(r, me)),
            Movement::Permute => block((me + n - 1) % n, 0),
            Movement::PrefixReduce => (0..=me)
                .map(|r| u64::from_ne_bytes(block(r, 0).try_into().unwrap()))
                .fold(0u64, u64::wrapping_add)
                .to_ne_bytes()
                .to_vec(),
        };
        dst.resize(8 * n as usize, 0);
        dst
    }
}

/// IN_ALLSYNC ("Data movement may begin only when all nodes have entered"), for what
/// a rank moves itself at its call: the last rank, before entering, rewrites every
/// rank's source (by RMA), each of which has already entered. Every call of the
/// document moves the rewritten bytes: nothing, not a rank's own block, nor the root's
/// copy into its own destination, nor a snapshot of a source, is taken at initiation.
#[test]
fn in_allsync_reads_sources_only_after_every_rank_entered() {
    const FLAGS_AT: usize = 0;
    const SRC_AT: usize = 4096;
    const DST_AT: usize = 4096 + 1024;
    for ranks in [2, 3, 5] {
        spmd(ranks, || {
            let team = init("DESIGN_IN_ALLSYNC_SOURCES");
            let (me, n) = (team.rank(), team.size());
            let last = n - 1;
            let (seg, bases) = attach(&team, 2 * 4096);
            team.coll_init(&vec![1; n as usize]);
            let at = |off: usize| seg.addr().wrapping_add(off);
            let len = 8 * n as usize;
            let fresh =
                |r: Rank| -> Vec<u8> { (0..len).map(|i| (r * 50) as u8 + i as u8 + 1).collect() };
            let f = flags(
                CollFlags::IN_ALLSYNC,
                CollFlags::OUT_MYSYNC,
                CollFlags::LOCAL,
            );
            for op in Movement::ALL {
                // SAFETY: our own segment, before the barrier that starts the case.
                unsafe {
                    std::ptr::write_bytes(at(FLAGS_AT), 0, 8 * n as usize);
                    std::ptr::write_bytes(at(SRC_AT), 0xEE, len);
                    std::ptr::write_bytes(at(DST_AT), 0, len);
                }
                team.barrier();
                if me == last {
                    until("every other rank's entry", || {
                        // SAFETY: aligned words of our own segment.
                        (0..last).all(|r| unsafe {
                            common::read_u64(at(FLAGS_AT + 8 * r as usize) as usize)
                        } == 1)
                    });
                    for r in 0..n {
                        let to = bases[r as usize] + SRC_AT;
                        team.put_blocking(r, to, &fresh(r), Flags::NONE).unwrap();
                    }
                }
                // SAFETY: the segment outlives the wait.
                let ev = unsafe { op.start(&team, at(DST_AT), at(SRC_AT), f) };
                if me != last {
                    let flag = bases[last as usize] + FLAGS_AT + 8 * me as usize;
                    team.put_blocking(last, flag, &1u64.to_ne_bytes(), Flags::NONE)
                        .unwrap();
                }
                ev.wait();
                // SAFETY: our own segment, after the collective completed here.
                let got = unsafe { std::slice::from_raw_parts(at(DST_AT), len) };
                assert_eq!(got, op.expected(me, n, fresh), "{op:?} on {n} ranks");
                team.barrier();
            }
            set_method(Operation::GatherAll, None);
            finalize(&team);
        });
    }
}
