//! Objects and queries: `Client::init`, the job and team queries, "Neighborhood and
//! Host", "Client-Data" (CData), "Collective allocation and creation of Segments"
//! (`Segment::attach`) and "Query addresses and length of a (possibly remote) bound
//! segment" (`Team::segment_bound`), run with 1 to 4 ranks.
mod common;

use std::sync::Arc;

use gex::client::CData;
use gex::testing::{spmd, spmd_with, SpmdOptions};
use gex::{Client, Flags, InitError, Segment, PAGE_SIZE};

/// "Initialize the client": the name must match `[A-Z][A-Z0-9_]+`, and a second
/// `Client::init` in the same process fails; the queries of the client, its primordial
/// endpoint and team ("Query rank of team member, and size of team", "Translations
/// between (tm,rank) and jobrank") agree with the job.
#[test]
fn init_errors_and_job_queries() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            for bad in ["", "A", "lower", "1ABC", "AB-C", "ÄB", "A B"] {
                match Client::init(bad, Flags::NONE) {
                    Err(InitError::BadClientName(name)) => assert_eq!(name, bad),
                    other => panic!("init({bad:?}) gave {other:?}"),
                }
            }
            let (client, ep, team) = Client::init("OBJ_TEST1", Flags::NONE).unwrap();
            assert_eq!(
                Client::init("OBJ_TEST1", Flags::NONE).unwrap_err(),
                InitError::AlreadyInitialized
            );
            assert_eq!(
                Client::init("OTHER", Flags::NONE).unwrap_err(),
                InitError::AlreadyInitialized
            );
            // "Otherwise must be 0": the one flag the spec allows asks for GASNet-1.
            let err = Client::init("OTHER", Flags::IMMEDIATE).unwrap_err();
            assert_eq!(err, InitError::BadInitFlags(Flags::IMMEDIATE));
            assert!(err.to_string().contains("takes no flags"), "{err}");
            // A bad name is still reported as a bad name after init.
            assert!(matches!(
                Client::init("bad", Flags::NONE),
                Err(InitError::BadClientName(_))
            ));

            assert_eq!(client.name(), "OBJ_TEST1");
            assert_eq!(client.flags(), Flags::NONE);
            assert_eq!(ep.flags(), Flags::NONE);
            assert_eq!(team.flags(), Flags::NONE);
            let (rank, size) = gex::testing::launcher_rank().expect("started as a rank");
            let (rank, size) = (rank as u32, size as u32);
            assert_eq!(gex::job_rank(), rank);
            assert_eq!(gex::job_size(), size);
            assert_eq!(team.rank(), rank);
            assert_eq!(team.size(), size);
            assert_eq!(ep.client(), client);
            assert_eq!(team.client(), client);
            assert_eq!(team.endpoint(), ep);
            for r in 0..size {
                assert_eq!(team.translate_rank_to_jobrank(r), r);
                assert_eq!(team.translate_jobrank_to_rank(r), Some(r));
            }
            assert_eq!(team.translate_jobrank_to_rank(size), None);
            common::expect_panic(
                &["Team::translate_rank_to_jobrank", "not in the team"],
                || team.translate_rank_to_jobrank(size),
            );
            client.finalize();
        });
    }
}

/// "Neighborhood and Host": members sorted, `members[my_index] == job_rank`, the host is
/// a superset of the neighbourhood, and `my_position` is in range. Where the test
/// process knows the placement (`gex::testing::placement`), the hosts are exactly its
/// hosts: on one host (the smp conduit, `mpirun` on this host) every rank shares memory
/// with every other; under the mpi conduit's host cap (`GEX_MPI_HOST_RANKS=k`) the
/// hosts are the blocks of `k` consecutive ranks, numbered in order.
#[test]
fn nbrhd_host_and_position_are_consistent() {
    for n in 1..=4 {
        let mut opts = SpmdOptions::new(n);
        // The ranks learn the placement from the test process: under `mpirun` on other
        // hosts they do not inherit its environment.
        let hosts: Vec<String> = (0..n)
            .filter_map(|r| gex::testing::placement().host_of(r, n))
            .map(|(h, t)| format!("{h}/{t}"))
            .collect();
        opts.env.push((HOSTS.into(), hosts.join(",")));
        spmd_with(opts, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("OBJ_NBRHD", Flags::NONE).unwrap();
            let me = gex::job_rank();
            // Every rank's host and the number of hosts, where known.
            let hosts: Vec<(u32, u32)> = std::env::var(HOSTS)
                .unwrap()
                .split(',')
                .filter(|h| !h.is_empty())
                .map(|h| {
                    let (h, t) = h.split_once('/').unwrap();
                    (h.parse().unwrap(), t.parse().unwrap())
                })
                .collect();
            for (what, set) in [("nbrhd", gex::nbrhd_info()), ("host", gex::host_info())] {
                assert!(!set.members.is_empty(), "{what}");
                assert!(
                    set.members.windows(2).all(|w| w[0] < w[1]),
                    "{what} not sorted: {:?}",
                    set.members
                );
                assert!(set.members.iter().all(|&r| r < gex::job_size()), "{what}");
                assert!((set.my_index as usize) < set.members.len(), "{what}");
                assert_eq!(set.members[set.my_index as usize], me, "{what}");
                if !hosts.is_empty() {
                    let mine: Vec<u32> = (0..team.size())
                        .filter(|&r| hosts[r as usize].0 == hosts[me as usize].0)
                        .collect();
                    assert_eq!(set.members, mine.as_slice(), "{what}");
                }
            }
            let nb = gex::nbrhd_info();
            let host = gex::host_info();
            assert!(nb.members.iter().all(|r| host.members.contains(r)));
            let pos = gex::my_position();
            assert!(pos.nbrhd_set_rank < pos.nbrhd_set_size);
            assert!(pos.host_set_rank < pos.host_set_size);
            assert!(pos.host_set_size <= pos.nbrhd_set_size);
            assert!(pos.nbrhd_set_size <= team.size());
            assert_eq!(pos, gex::my_position(), "stable");
            if let Some(&(index, count)) = hosts.get(me as usize) {
                assert_eq!((pos.nbrhd_set_size, pos.host_set_size), (count, count));
                assert_eq!((pos.nbrhd_set_rank, pos.host_set_rank), (index, index));
            }
            client.finalize();
        });
    }
}

/// Environment variable giving the ranks every rank's host and the number of hosts
/// (`host/hosts,...`), empty where the placement is not known.
const HOSTS: &str = "OBJ_HOSTS";

fn cdata_value(d: Option<CData>) -> Option<u64> {
    d.map(|d| *d.downcast_ref::<u64>().expect("a u64 was stored"))
}

/// "Client-Data (CData) support": `{Client,EP,TM,Segment}_{Set,Query}CData` start
/// empty, keep what was set for each object separately, and can be cleared.
#[test]
fn cdata_on_every_object() {
    for n in 1..=2 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("OBJ_CDATA", Flags::NONE).unwrap();
            let seg = Segment::attach(&team, 4 * PAGE_SIZE).unwrap();
            assert_eq!(seg.flags(), Flags::NONE);
            assert!(client.cdata().is_none());
            assert!(ep.cdata().is_none());
            assert!(team.cdata().is_none());
            assert!(seg.cdata().is_none());
            let base = 1000 * (gex::job_rank() as u64 + 1);
            client.set_cdata(Some(Arc::new(base + 1)));
            ep.set_cdata(Some(Arc::new(base + 2)));
            team.set_cdata(Some(Arc::new(base + 3)));
            seg.set_cdata(Some(Arc::new(base + 4)));
            assert_eq!(cdata_value(client.cdata()), Some(base + 1));
            assert_eq!(cdata_value(ep.cdata()), Some(base + 2));
            assert_eq!(cdata_value(team.cdata()), Some(base + 3));
            assert_eq!(cdata_value(seg.cdata()), Some(base + 4));
            // Handles are copies of the same objects.
            assert_eq!(cdata_value(team.client().cdata()), Some(base + 1));
            assert_eq!(cdata_value(team.endpoint().cdata()), Some(base + 2));
            assert_eq!(cdata_value(ep.segment().unwrap().cdata()), Some(base + 4));
            // Replacing and clearing one does not touch the others.
            team.set_cdata(Some(Arc::new(base + 30)));
            client.set_cdata(None);
            assert_eq!(client.cdata().map(|_| ()), None);
            assert_eq!(cdata_value(ep.cdata()), Some(base + 2));
            assert_eq!(cdata_value(team.cdata()), Some(base + 30));
            assert_eq!(cdata_value(seg.cdata()), Some(base + 4));
            // Any type will do.
            seg.set_cdata(Some(Arc::new(String::from("segment data"))));
            assert_eq!(
                seg.cdata()
                    .unwrap()
                    .downcast_ref::<String>()
                    .map(String::as_str),
                Some("segment data")
            );
            client.finalize();
        });
    }
}

/// `Segment::attach` ("Collective allocation and creation of Segments") rejects a size
/// of 0, a size that is not a multiple of the page size, a size over
/// `max_segment_size()`, a team other than the primordial one ("The current release
/// requires that 'tm' be the team created by gex_Client_Init()") and a second
/// attach; `Endpoint::segment` ("Query the bound segment") is `None` until the attach.
#[test]
fn segment_attach_errors() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("OBJ_ATTACH", Flags::NONE).unwrap();
            let max = gex::max_segment_size();
            assert!(
                max >= PAGE_SIZE && max.is_multiple_of(PAGE_SIZE),
                "max {max}"
            );
            assert!(ep.segment().is_none());
            for r in 0..team.size() {
                assert_eq!(
                    team.segment_bound(r),
                    None,
                    "no segment bound to rank {r} yet"
                );
            }
            for bad in [
                0,
                1,
                PAGE_SIZE - 1,
                PAGE_SIZE + 1,
                3 * PAGE_SIZE / 2,
                max + PAGE_SIZE,
                max + 1,
                usize::MAX,
            ] {
                assert_eq!(
                    Segment::attach(&team, bad),
                    Err(InitError::BadSegmentSize { size: bad, max }),
                    "attach({bad})"
                );
            }
            // Over a team split from the primordial one: refused on every rank.
            let me = team.rank();
            let half = team.split(Some(me % 2), 0, None).unwrap();
            assert_eq!(
                Segment::attach(&half, 8 * PAGE_SIZE),
                Err(InitError::NotPrimordialTeam)
            );
            assert!(ep.segment().is_none(), "a failed attach binds nothing");
            let size = 8 * PAGE_SIZE;
            let seg = Segment::attach(&team, size).unwrap();
            assert_eq!(seg.size(), size);
            assert!(!seg.addr().is_null());
            assert_eq!(seg.addr() as usize % PAGE_SIZE, 0);
            assert_eq!(seg.client(), client);
            assert_eq!(ep.segment(), Some(seg));
            assert_eq!(
                Segment::attach(&team, size),
                Err(InitError::AlreadyAttached)
            );
            assert_eq!(
                Segment::attach(&team, PAGE_SIZE),
                Err(InitError::AlreadyAttached)
            );
            assert_eq!(
                ep.segment(),
                Some(seg),
                "a failed second attach keeps the first"
            );
            client.finalize();
        });
    }
}

/// Every rank attaches a different size; `segment_bound` of every peer reports the
/// owner's address and size, and a local address (PSHM) through which a write is seen
/// by the owner after a barrier.
#[test]
fn segment_bound_of_every_peer() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("OBJ_BOUND", Flags::NONE).unwrap();
            let (me, size) = (team.rank() as usize, team.size() as usize);
            let seg_size = |r: usize| (r + 1) * 5 * PAGE_SIZE;
            let seg = Segment::attach(&team, seg_size(me)).unwrap();
            assert_eq!(seg.size(), seg_size(me));
            let mine = team.segment_bound(me as u32).unwrap();
            assert_eq!(mine.owner_addr, seg.addr() as usize);
            assert_eq!(mine.local_addr, Some(seg.addr() as usize));
            assert_eq!(mine.size, seg_size(me));
            let bounds: Vec<_> = (0..size)
                .map(|r| team.segment_bound(r as u32).unwrap())
                .collect();
            // The segments of the neighbourhood are mapped here (PSHM), and only those.
            let nbrhd = gex::nbrhd_info().members;
            for (r, b) in bounds.iter().enumerate() {
                assert_eq!(b.size, seg_size(r), "size of rank {r}'s segment");
                assert_eq!(b.owner_addr % PAGE_SIZE, 0);
                assert_eq!(
                    b.local_addr.is_some(),
                    nbrhd.contains(&(r as u32)),
                    "rank {r}'s segment is mapped here exactly if it shares memory with us \
                     (neighbourhood {nbrhd:?})"
                );
                assert_eq!(team.segment_bound(r as u32), Some(*b), "stable");
            }
            // Through the local address: write my owner address and a tag into every
            // mapped peer segment, and by RMA into the others; the owner checks them
            // against its own view.
            for (r, b) in bounds.iter().enumerate() {
                let Some(local) = b.local_addr else {
                    let words = [
                        bounds[r].owner_addr as u64,
                        0xC0FFEE00 + (me * 16 + r) as u64,
                    ];
                    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
                    team.put_blocking(r as u32, b.owner_addr + 16 * me, &bytes, Flags::NONE)
                        .unwrap();
                    if me == 0 {
                        team.put_blocking(
                            r as u32,
                            b.owner_addr + b.size - 1,
                            &[0x5A],
                            Flags::NONE,
                        )
                        .unwrap();
                    }
                    continue;
                };
                let local = local as *mut u64;
                // SAFETY: slot `me` (16 bytes) of rank r's segment is written only by us;
                // seg_size(r) >= 5 pages > 16 * 4 bytes.
                unsafe {
                    local
                        .add(2 * me)
                        .write_volatile(bounds[r].owner_addr as u64);
                    local
                        .add(2 * me + 1)
                        .write_volatile(0xC0FFEE00 + (me * 16 + r) as u64);
                }
                // The last byte of the segment is ours to write too (rank 0 only).
                if me == 0 {
                    // SAFETY: inside rank r's segment.
                    unsafe {
                        ((b.local_addr.unwrap() + b.size - 1) as *mut u8).write_volatile(0x5A)
                    };
                }
            }
            team.barrier();
            let base = seg.addr() as *const u64;
            for w in 0..size {
                // SAFETY: inside our segment; written before the barrier.
                let (addr, tag) = unsafe {
                    (
                        base.add(2 * w).read_volatile(),
                        base.add(2 * w + 1).read_volatile(),
                    )
                };
                assert_eq!(
                    addr,
                    seg.addr() as u64,
                    "rank {w} saw our segment at a different owner address"
                );
                assert_eq!(tag, 0xC0FFEE00 + (w * 16 + me) as u64, "tag from rank {w}");
            }
            // SAFETY: the last byte of our segment.
            let last = unsafe { (seg.addr().add(seg.size() - 1)).read_volatile() };
            assert_eq!(last, 0x5A);
            // The bound segment is the one RMA uses.
            for (r, b) in bounds.iter().enumerate() {
                let mut got = [0u8; 8];
                team.get_blocking(&mut got, r as u32, b.owner_addr + 16 * me + 8, Flags::NONE)
                    .unwrap();
                assert_eq!(u64::from_ne_bytes(got), 0xC0FFEE00 + (me * 16 + r) as u64);
            }
            common::expect_panic(&["Team::segment_bound", "not in the team"], || {
                team.segment_bound(size as u32)
            });
            client.finalize();
        });
    }
}

/// `max_segment_size()` (`gasnet_getMaxLocalSegmentSize`) follows the job's segment
/// size (`SpmdOptions::segment_size`, rounded up to whole pages), and exactly that size
/// can be attached.
#[test]
fn max_segment_size_follows_the_job() {
    for (n, requested, expected) in [
        (1, 3 * PAGE_SIZE, 3 * PAGE_SIZE),
        (2, 1 << 20, 1 << 20),
        (3, 10_000, 3 * PAGE_SIZE),
        (4, 64 * PAGE_SIZE + 1, 65 * PAGE_SIZE),
    ] {
        let opts = SpmdOptions {
            segment_size: requested,
            env: vec![("EXPECTED_MAX".into(), expected.to_string())],
            ..SpmdOptions::new(n)
        };
        spmd_with(opts, || {
            common::quiet_expected_panics();
            let (client, _ep, team) = Client::init("OBJ_MAX", Flags::NONE).unwrap();
            let expected: usize = std::env::var("EXPECTED_MAX").unwrap().parse().unwrap();
            assert_eq!(gex::max_segment_size(), expected);
            assert_eq!(
                Segment::attach(&team, expected + PAGE_SIZE),
                Err(InitError::BadSegmentSize {
                    size: expected + PAGE_SIZE,
                    max: expected
                })
            );
            let seg = Segment::attach(&team, expected).unwrap();
            assert_eq!(seg.size(), expected);
            for r in 0..team.size() {
                assert_eq!(team.segment_bound(r).unwrap().size, expected);
            }
            // Long payloads may be as large as the segment.
            assert!(team.max_request_long(None, gex::LcKind::Now, Flags::NONE, 0) >= 512);
            client.finalize();
        });
    }
}

static REPLIED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Request handler: answers with a Long into the requester's segment, at the address
/// its two arguments name.
fn reply_into_the_requester(token: &gex::Token<'_>, args: &[u32]) {
    let at = u64::from(args[0]) | u64::from(args[1]) << 32;
    token
        .reply_long(
            args[2] as u8,
            &[7; 8],
            at as usize,
            gex::Lc::Now,
            Flags::NONE,
            &[],
        )
        .unwrap();
}

fn replied(_token: &gex::Token<'_>, payload: &[u8], _args: &[u32]) {
    assert_eq!(payload, [7; 8]);
    REPLIED.store(true, std::sync::atomic::Ordering::Release);
}

/// A rank that returned from `Segment::attach` may address every segment, and so may
/// the handlers its messages run on a rank still finishing its attach (every rank
/// attached before any left the attach's barrier): rank 1 enters the attach first and
/// waits in its barrier, rank 0 attaches later and, once out, sends rank 1 a Request
/// whose handler answers with a Long into rank 0's segment, which rank 1 may run
/// before it leaves the barrier itself.
#[test]
fn handlers_run_during_attach_reach_every_segment() {
    spmd(2, || {
        common::quiet_expected_panics();
        let (client, ep, team) = Client::init("OBJ_ATTACH_AM", Flags::NONE).unwrap();
        let mut t = [
            gex::AmEntry::short(
                "reply_into",
                gex::AmRole::Request,
                3,
                reply_into_the_requester,
            ),
            gex::AmEntry::payload(
                "replied",
                gex::AmCategory::Long,
                gex::AmRole::Reply,
                0,
                replied,
            ),
        ];
        ep.register_handlers(&mut t).unwrap();
        if team.rank() == 0 {
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        let _seg = Segment::attach(&team, 1 << 20).unwrap();
        if team.rank() == 0 {
            let at = team.segment_bound(0).unwrap().owner_addr as u64;
            let args = [at as u32, (at >> 32) as u32, u32::from(t[1].index)];
            team.request_short(1, t[0].index, &args, Flags::NONE)
                .unwrap();
            common::poll_until("the Long reply", 10, || {
                REPLIED.load(std::sync::atomic::Ordering::Acquire)
            });
        }
        team.barrier();
        client.finalize();
    });
}
