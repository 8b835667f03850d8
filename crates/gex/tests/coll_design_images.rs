//! The multi-image ("i") collectives of the GASNet collectives design document
//! ("Current proposal": `gasnet_coll_init(images)`, `gasnet_coll_broadcasti_nb`,
//! `_scatteri_nb`, `_gatheri_nb`, `_gather_alli_nb`, `_exchangei_nb`): on 1 to 5 ranks
//! with rank `r` holding `r % 3 + 1` images, blocks in node-major image order, every
//! root, sizes from 0 B (to 1 MiB for the rooted ones), each method forced in turn,
//! with LOCAL and SINGLE address lists; and `coll_init`'s own rules.
mod common;

use common::coll::{finalize, init, local};

use common::pattern;
use gex::coll::{set_method, Addr, AddrList, CollFlags, Method, Operation};
use gex::testing::spmd;
use gex::{Event, Rank, Segment, Team};

const MIB: usize = 1 << 20;

/// The images of rank `r`.
fn count(r: Rank) -> usize {
    r as usize % 3 + 1
}

/// The team's images: the count per rank, and the first image of each rank.
struct Images {
    counts: Vec<usize>,
    first: Vec<usize>,
}

impl Images {
    fn new(n: Rank) -> Images {
        let counts: Vec<usize> = (0..n).map(count).collect();
        let mut first = vec![0];
        for c in &counts {
            first.push(first[first.len() - 1] + c);
        }
        Images { counts, first }
    }

    fn total(&self) -> usize {
        self.first[self.counts.len()]
    }

    /// This rank's images' team indices.
    fn of(&self, r: Rank) -> std::ops::Range<usize> {
        self.first[r as usize]..self.first[r as usize + 1]
    }
}

/// An "i" collective with its single-valued arguments.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Broadcast(Rank),
    Scatter(Rank),
    Gather(Rank),
    GatherAll,
    Exchange,
}

/// The buffers of one rank for one case: the sources and the expected destinations,
/// one per image where the argument is a list, else one (empty where unused).
struct Buffers {
    srcs: Vec<Vec<u8>>,
    wants: Vec<Vec<u8>>,
}

impl Kind {
    fn operation(self) -> Operation {
        match self {
            Kind::Broadcast(_) => Operation::Broadcast,
            Kind::Scatter(_) => Operation::Scatter,
            Kind::Gather(_) => Operation::Gather,
            Kind::GatherAll => Operation::GatherAll,
            Kind::Exchange => Operation::Exchange,
        }
    }

    /// Whether the source (destination) argument is a list, one per image.
    fn lists(self) -> (bool, bool) {
        match self {
            Kind::Broadcast(_) | Kind::Scatter(_) => (false, true),
            Kind::Gather(_) => (true, false),
            Kind::GatherAll | Kind::Exchange => (true, true),
        }
    }

    fn buffers(self, case: u64, im: &Images, me: Rank, nb: usize) -> Buffers {
        let b = |from: usize, to: usize| pattern(case << 24 ^ (from as u64) << 12 ^ to as u64, nb);
        let all = |f: &dyn Fn(usize) -> Vec<u8>| (0..im.total()).flat_map(f).collect::<Vec<u8>>();
        let mine = im.of(me);
        let (srcs, wants) = match self {
            Kind::Broadcast(root) => (
                vec![if me == root { b(0, 0) } else { Vec::new() }],
                mine.map(|_| b(0, 0)).collect(),
            ),
            Kind::Scatter(root) => (
                vec![if me == root {
                    all(&|i| b(0, i))
                } else {
                    Vec::new()
                }],
                mine.map(|i| b(0, i)).collect(),
            ),
            Kind::Gather(root) => (
                mine.map(|i| b(i, 0)).collect(),
                vec![if me == root {
                    all(&|i| b(i, 0))
                } else {
                    Vec::new()
                }],
            ),
            Kind::GatherAll => (
                mine.clone().map(|i| b(i, 0)).collect(),
                mine.map(|_| all(&|i| b(i, 0))).collect(),
            ),
            Kind::Exchange => (
                mine.clone().map(|i| all(&|j| b(i, j))).collect(),
                mine.map(|j| all(&|i| b(i, j))).collect(),
            ),
        };
        Buffers { srcs, wants }
    }

    /// Starts the collective; `dst` and `src` are single addresses or lists as
    /// [`lists`](Self::lists) says.
    ///
    /// # Safety
    /// The buffers behind the addresses must outlive the event.
    unsafe fn start(
        self,
        team: &Team,
        dst: Arg<'_>,
        src: Arg<'_>,
        nb: usize,
        f: CollFlags,
    ) -> Event {
        // SAFETY: passed on to the caller.
        unsafe {
            match (self, dst, src) {
                (Kind::Broadcast(root), Arg::List(d), Arg::One(s)) => {
                    team.broadcasti_nb(root, d, s, nb, f)
                }
                (Kind::Scatter(root), Arg::List(d), Arg::One(s)) => {
                    team.scatteri_nb(root, d, s, nb, f)
                }
                (Kind::Gather(root), Arg::One(d), Arg::List(s)) => {
                    team.gatheri_nb(root, d, s, nb, f)
                }
                (Kind::GatherAll, Arg::List(d), Arg::List(s)) => team.gather_alli_nb(d, s, nb, f),
                (Kind::Exchange, Arg::List(d), Arg::List(s)) => team.exchangei_nb(d, s, nb, f),
                _ => unreachable!("{self:?}: the arguments follow `lists`"),
            }
        }
    }
}

impl Kind {
    /// Runs the collective's blocking form (arguments as for [`start`](Self::start)).
    ///
    /// # Safety
    /// The buffers behind the addresses must outlive the call.
    unsafe fn run(self, team: &Team, dst: Arg<'_>, src: Arg<'_>, nb: usize, f: CollFlags) {
        // SAFETY: passed on to the caller.
        unsafe {
            match (self, dst, src) {
                (Kind::Broadcast(root), Arg::List(d), Arg::One(s)) => {
                    team.broadcasti(root, d, s, nb, f)
                }
                (Kind::Scatter(root), Arg::List(d), Arg::One(s)) => {
                    team.scatteri(root, d, s, nb, f)
                }
                (Kind::Gather(root), Arg::One(d), Arg::List(s)) => team.gatheri(root, d, s, nb, f),
                (Kind::GatherAll, Arg::List(d), Arg::List(s)) => team.gather_alli(d, s, nb, f),
                (Kind::Exchange, Arg::List(d), Arg::List(s)) => team.exchangei(d, s, nb, f),
                _ => unreachable!("{self:?}: the arguments follow `lists`"),
            }
        }
    }
}

/// Every kind once by its blocking form, with LOCAL lists; checks every destination.
fn blocking_round(team: &Team, kinds: &[Kind], nb: usize, first_case: u64) {
    let (me, n) = (team.rank(), team.size());
    let im = Images::new(n);
    for (c, &kind) in kinds.iter().enumerate() {
        let Buffers { srcs, wants } = kind.buffers(first_case + c as u64, &im, me, nb);
        let mut dsts: Vec<Vec<u8>> = wants.iter().map(|w| vec![0xEE; w.len()]).collect();
        let src_ptrs: Vec<*mut u8> = srcs.iter().map(|s| s.as_ptr().cast_mut()).collect();
        let dst_ptrs: Vec<*mut u8> = dsts.iter_mut().map(|d| d.as_mut_ptr()).collect();
        let (src_list, dst_list) = kind.lists();
        let (d, s) = (
            local_arg(dst_list, &dst_ptrs),
            local_arg(src_list, &src_ptrs),
        );
        // SAFETY: the buffers outlive the call.
        unsafe { kind.run(team, d, s, nb, local()) };
        assert!(
            dsts == wants,
            "blocking {kind:?} size {nb} on {n} ranks, rank {me}"
        );
    }
}

/// An address argument of an "i" call: one address, or one per image.
#[derive(Clone, Copy)]
enum Arg<'a> {
    One(Addr<'a>),
    List(AddrList<'a>),
}

fn local_arg(list: bool, ptrs: &[*mut u8]) -> Arg<'_> {
    if list {
        Arg::List(AddrList::Local(ptrs))
    } else {
        Arg::One(Addr::Local(ptrs[0]))
    }
}

fn single_arg<'a>(list: bool, images: &'a [usize], ranks: &'a [usize]) -> Arg<'a> {
    if list {
        Arg::List(AddrList::Single(images))
    } else {
        Arg::One(Addr::Single(ranks))
    }
}

fn kinds(n: Rank) -> Vec<Kind> {
    let mut all = vec![Kind::GatherAll, Kind::Exchange];
    for root in 0..n {
        all.extend([
            Kind::Broadcast(root),
            Kind::Scatter(root),
            Kind::Gather(root),
        ]);
    }
    all
}

/// Every kind with LOCAL lists, the message methods of each forced in turn, all of a
/// size in flight at once.
fn local_round(team: &Team, kinds: &[Kind], sizes: &[usize], first_case: u64) {
    let (me, n) = (team.rank(), team.size());
    let im = Images::new(n);
    let mut case = first_case;
    for &nb in sizes {
        for pass in 0..2 {
            let mut kept = Vec::new();
            let mut events = Vec::new();
            for &kind in kinds {
                let methods: Vec<Method> = kind
                    .operation()
                    .methods()
                    .iter()
                    .copied()
                    .filter(|&m| m != Method::Shared)
                    .collect();
                let m = methods[pass % methods.len()];
                set_method(kind.operation(), Some(m));
                case += 1;
                let Buffers { srcs, wants } = kind.buffers(case, &im, me, nb);
                let mut dsts: Vec<Vec<u8>> = wants.iter().map(|w| vec![0xEE; w.len()]).collect();
                let src_ptrs: Vec<*mut u8> = srcs.iter().map(|s| s.as_ptr().cast_mut()).collect();
                let dst_ptrs: Vec<*mut u8> = dsts.iter_mut().map(|d| d.as_mut_ptr()).collect();
                let (src_list, dst_list) = kind.lists();
                let (d, s) = (
                    local_arg(dst_list, &dst_ptrs),
                    local_arg(src_list, &src_ptrs),
                );
                // SAFETY: the buffers are kept until the events complete below (the
                // address lists are read at initiation only).
                events.push(unsafe { kind.start(team, d, s, nb, local()) });
                kept.push((kind, m, srcs, dsts, wants));
            }
            Event::wait_all(&mut events);
            for (kind, m, _srcs, dsts, wants) in &kept {
                assert!(
                    dsts == wants,
                    "{kind:?} {m:?} size {nb} on {n} ranks, rank {me}"
                );
            }
        }
    }
    for op in [
        Operation::Broadcast,
        Operation::Scatter,
        Operation::Gather,
        Operation::GatherAll,
        Operation::Exchange,
    ] {
        set_method(op, None);
    }
}

/// The "i" calls with LOCAL lists ("On node i, this argument is an array of images[i]
/// local addresses"): every root, sizes from 0 B past several messages, each message
/// method forced, every kind of one size in flight at once; the rooted ones at 1 MiB on
/// 1, 2 and 4 ranks; each kind once more by its blocking form.
#[test]
fn images_local_every_root_size_and_method() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("DESIGN_IMAGES");
            let n = team.size();
            team.coll_init(&(0..n).map(count).collect::<Vec<_>>());
            local_round(&team, &kinds(n), &[0, 1, 7, 3969, 20_001], 1);
            blocking_round(&team, &kinds(n), 3969, 500);
            if matches!(n, 1 | 2 | 4) {
                let rooted: Vec<Kind> = kinds(n)
                    .into_iter()
                    .filter(|k| !matches!(k, Kind::GatherAll | Kind::Exchange))
                    .collect();
                local_round(&team, &rooted, &[MIB], 1000);
            }
            finalize(&team);
        });
    }
}

/// No bytes with null addresses, as C callers pass them: every kind with LOCAL lists,
/// each message method forced, moves nothing and completes.
#[test]
fn images_move_no_bytes_from_null_addresses() {
    for n in [1, 3] {
        spmd(n, || {
            let team = init("DESIGN_IMAGES_NULL");
            let (me, n) = (team.rank(), team.size());
            team.coll_init(&(0..n).map(count).collect::<Vec<_>>());
            let nulls = vec![std::ptr::null_mut::<u8>(); count(me)];
            for kind in kinds(n) {
                for &m in kind.operation().methods() {
                    if m == Method::Shared {
                        continue;
                    }
                    set_method(kind.operation(), Some(m));
                    let (src_list, dst_list) = kind.lists();
                    let (d, s) = (local_arg(dst_list, &nulls), local_arg(src_list, &nulls));
                    // SAFETY: no bytes move.
                    unsafe { kind.run(&team, d, s, 0, local()) };
                }
                set_method(kind.operation(), None);
            }
            finalize(&team);
        });
    }
}

/// The "i" calls with SINGLE lists ("an array of NImages addresses … The ith address is
/// used as the destination (source) address of the ith image"): owner-space addresses
/// in the segments, the shared method and every message method forced, every sync
/// mode.
#[test]
fn images_single_shared_and_forced_methods() {
    for n in 1..=5u32 {
        spmd(n as usize, || {
            let team = init("DESIGN_IMAGES_SINGLE");
            let (me, n) = (team.rank(), team.size());
            team.coll_init(&(0..n).map(count).collect::<Vec<_>>());
            let im = Images::new(n);
            let sizes = [0usize, 13, 5000];
            // Each rank's areas: up to three sources, then up to three destinations,
            // each large enough for every image's block.
            let area = (im.total() * sizes[2]).div_ceil(64) * 64 + 64;
            let bytes = (6 * area).div_ceil(gex::PAGE_SIZE) * gex::PAGE_SIZE;
            let seg = Segment::attach(&team, bytes).unwrap();
            let bases = common::segment_bases(&team);
            let src_at = |k: usize| k * area;
            let dst_at = |k: usize| (3 + k) * area;
            let modes = [
                (CollFlags::IN_NOSYNC, CollFlags::OUT_NOSYNC),
                (CollFlags::IN_MYSYNC, CollFlags::OUT_MYSYNC),
                (CollFlags::IN_ALLSYNC, CollFlags::OUT_ALLSYNC),
            ];
            let mut case = 1;
            for nb in sizes {
                for kind in kinds(n) {
                    for (i, &m) in kind.operation().methods().iter().enumerate() {
                        set_method(kind.operation(), Some(m));
                        case += 1;
                        let Buffers { srcs, wants } = kind.buffers(case, &im, me, nb);
                        // SAFETY: our own segment; nobody else touches it until the
                        // collective starts (the barrier below).
                        unsafe {
                            for (k, s) in srcs.iter().enumerate() {
                                let at = seg.addr().add(src_at(k));
                                std::ptr::copy_nonoverlapping(s.as_ptr(), at, s.len());
                            }
                            for (k, w) in wants.iter().enumerate() {
                                std::ptr::write_bytes(seg.addr().add(dst_at(k)), 0xEE, w.len());
                            }
                        }
                        team.barrier();
                        let every_image = |at: &dyn Fn(usize) -> usize| -> Vec<usize> {
                            (0..n)
                                .flat_map(|r| (0..count(r)).map(move |k| (r, k)))
                                .map(|(r, k)| bases[r as usize] + at(k))
                                .collect()
                        };
                        let every_rank =
                            |at: usize| -> Vec<usize> { bases.iter().map(|b| b + at).collect() };
                        let (src_list, dst_list) = kind.lists();
                        let (s_images, s_ranks) = (every_image(&src_at), every_rank(src_at(0)));
                        let (d_images, d_ranks) = (every_image(&dst_at), every_rank(dst_at(0)));
                        let (input, output) = modes[i % modes.len()];
                        let f = input | output | CollFlags::SINGLE;
                        // SAFETY: the segment outlives the event.
                        unsafe {
                            kind.start(
                                &team,
                                single_arg(dst_list, &d_images, &d_ranks),
                                single_arg(src_list, &s_images, &s_ranks),
                                nb,
                                f,
                            )
                        }
                        .wait();
                        // Every rank's sources must stay intact until all are done.
                        team.barrier();
                        for (k, w) in wants.iter().enumerate() {
                            // SAFETY: the collective is complete everywhere (barrier).
                            let got = unsafe {
                                std::slice::from_raw_parts(seg.addr().add(dst_at(k)), w.len())
                            };
                            assert!(
                                got == w.as_slice(),
                                "{kind:?} {m:?} size {nb} on {n} ranks, rank {me} image {k}"
                            );
                        }
                    }
                    set_method(kind.operation(), None);
                }
            }
            finalize(&team);
        });
    }
}

/// `gasnet_coll_init` "must be call[ed] … before they may invoke any" "i" call, "may be
/// called at most once", with "exactly gasnet_nodes() elements", "all … non-zero":
/// each broken rule fails naming the call.
#[test]
fn coll_init_is_required_once_with_a_non_zero_count_per_rank() {
    spmd(2, || {
        common::quiet_expected_panics();
        let team = init("DESIGN_IMAGES_INIT");
        let mut buf = [0u8; 4];
        let p = buf.as_mut_ptr();
        let list = [p];
        // SAFETY: never starts (no images declared).
        common::expect_panic(&["Team::gather_alli_nb", "Team::coll_init"], || unsafe {
            team.gather_alli_nb(list[..].into(), list[..].into(), 1, local())
        });
        // SAFETY: never starts.
        common::expect_panic(&["Team::broadcasti_nb", "coll_init"], || unsafe {
            team.broadcasti_nb(0, list[..].into(), p.into(), 1, local())
        });
        common::expect_panic(&["Team::coll_init", "2"], || team.coll_init(&[1]));
        common::expect_panic(&["Team::coll_init", "non-zero"], || team.coll_init(&[1, 0]));
        team.coll_init(&[1, 2]);
        common::expect_panic(&["Team::coll_init", "twice"], || team.coll_init(&[1, 2]));
        let three = [p, p, p];
        // SAFETY: never starts (three addresses for one or two images).
        common::expect_panic(&["Team::scatteri_nb", "images"], || unsafe {
            team.scatteri_nb(0, three[..].into(), p.into(), 1, local())
        });
        finalize(&team);
    });
}
