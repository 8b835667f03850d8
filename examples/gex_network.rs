//! Every kind of gex transfer between every pair of ranks, each checked: Short, Medium
//! and Long Active Messages with their Replies (and a flood of Short ones, past any
//! flow-control window, each counted, whose Requests and Replies must arrive in the
//! order sent, as the smp and mpi conduits deliver each network's messages from one
//! sender, and whose Request handler must never run inside another, which a poll for
//! Replies only under back-pressure would do if it ran a Request), puts and gets large and small, a VIS put whose peer
//! completion handler checks, on the target, that the data landed first, and a
//! broadcast and an all-to-all exchange with every rank's segment address given
//! (SINGLE), whose method every rank must choose alike whatever it maps. It
//! prints the job's host structure (`gex_System_QueryMyPosition`) and `verified`.
//!
//! Run as `UPCXX_RANKS=4 gex_network`, or, built with the `mpi` feature, as
//! `mpirun -n 4 gex_network` (add `-x GEX_MPI_HOST_RANKS=1` so that every rank is its
//! own host and every transfer between ranks goes over the network path). With the
//! argument `--on-thread` every transfer is made by a second thread of each rank, not
//! by the thread that initialized gex.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

use std::sync::atomic::AtomicUsize;

use gex::coll::CollFlags;
use gex::vis::set_peer_completion_handler;
use gex::{AmCategory, AmEntry, AmRole, Client, Flags, Lc, Memvec, Segment, Token};

const PING: u8 = 201;
const PONG: u8 = 200;
const MEDIUM: u8 = 202;
const LONG: u8 = 203;
const VIS_LANDED: u8 = 204;
/// Bytes of each Medium payload, and of each Long payload.
const MEDIUM_LEN: usize = 1000;
const LONG_LEN: usize = 8192;
// A rank's segment: the word at 8, then fixed regions (the large put, the VIS put,
// the broadcast's source and destination), then the regions that grow with the job: a
// Long payload from every rank, and the exchange's source and destination, a block per
// rank each.
/// Where the put from the previous rank lands.
const PUT_AT: usize = 64 << 10;
/// Bytes of the large put (past MPI's eager limits).
const PUT_LEN: usize = 256 << 10;
/// Where the VIS put from the previous rank lands, and its length.
const VIS_AT: usize = 320 << 10;
const VIS_LEN: usize = 3000;
/// The broadcast's source (on rank 0) and destination, and its length: past the size
/// from which ranks that map every source read it directly.
const BCAST_SRC: usize = 384 << 10;
const BCAST_DST: usize = 416 << 10;
const BCAST_LEN: usize = 32 << 10;
/// Where Long payloads from rank `s` land: `LONG_AT + s * LONG_LEN`.
const LONG_AT: usize = 448 << 10;
/// The bytes of each exchange block.
const XCHG_LEN: usize = 16 << 10;

/// The exchange's source in a job of `n` ranks (after every rank's Long payload).
fn xchg_src(n: u32) -> usize {
    LONG_AT + n as usize * LONG_LEN
}

/// The exchange's destination in a job of `n` ranks.
fn xchg_dst(n: u32) -> usize {
    xchg_src(n) + n as usize * XCHG_LEN
}

/// The segment a job of `n` ranks needs.
fn segment_size(n: u32) -> usize {
    (xchg_dst(n) + n as usize * XCHG_LEN).next_multiple_of(gex::PAGE_SIZE)
}
/// Short requests sent to every rank without waiting: many times the messages a
/// conduit lets be in flight to one peer, so its flow control must hold them back.
const FLOOD: u32 = 500;

/// Handlers run on the polling thread, one at a time unless one polls: the next ping
/// sequence number due from each rank, and the next pong sequence number due back.
static NEXT_PING: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static NEXT_PONG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Set while a ping handler runs.
static IN_PING: AtomicBool = AtomicBool::new(false);
/// The sequence argument of the Replies to Medium and Long requests (not counted).
const UNORDERED: u32 = u32::MAX;

static PONGS: AtomicU32 = AtomicU32::new(0);
static BAD: AtomicU32 = AtomicU32::new(0);
static VIS_DONE: AtomicU32 = AtomicU32::new(0);
/// This rank's segment, for the peer completion handler.
static SEGMENT: AtomicUsize = AtomicUsize::new(0);

/// The byte `i` of the payload from `src` to `dst`.
fn pattern(src: u32, dst: u32, i: usize) -> u8 {
    (i as u32).wrapping_mul(31).wrapping_add(src * 7 + dst * 13) as u8
}

fn payload(src: u32, dst: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| pattern(src, dst, i)).collect()
}

/// Checks that `seq` is the next number due from `peer` in `next`, and counts it.
fn in_order(next: &Mutex<Vec<u32>>, peer: u32, seq: u32, what: &str) {
    let mut next = next.lock().unwrap();
    let due = &mut next[peer as usize];
    if seq != *due {
        eprintln!(
            "gex_network: rank {}: {what} {seq} from rank {peer} arrived when {due} was due",
            gex::job_rank()
        );
        BAD.fetch_add(1, Ordering::Relaxed);
    }
    *due = seq + 1;
}

fn ping(token: &Token<'_>, args: &[u32]) {
    if IN_PING.swap(true, Ordering::Relaxed) {
        eprintln!(
            "gex_network: rank {}: a Request handler ran inside another",
            gex::job_rank()
        );
        BAD.fetch_add(1, Ordering::Relaxed);
    }
    in_order(&NEXT_PING, token.src_rank(), args[1], "ping");
    // Under back-pressure this reply polls for Replies only.
    token.reply_short(PONG, args, Flags::NONE).unwrap();
    IN_PING.store(false, Ordering::Relaxed);
}

fn pong(token: &Token<'_>, args: &[u32]) {
    if args[0] != gex::job_rank() {
        BAD.fetch_add(1, Ordering::Relaxed);
    }
    if args[1] != UNORDERED {
        in_order(&NEXT_PONG, token.src_rank(), args[1], "pong");
    }
    PONGS.fetch_add(1, Ordering::Relaxed);
}

fn check_payload(token: &Token<'_>, bytes: &[u8], args: &[u32]) {
    let src = token.src_rank();
    let want = payload(src, gex::job_rank(), args[0] as usize);
    if bytes != want.as_slice() {
        eprintln!(
            "gex_network: rank {}: a bad payload from rank {src}",
            gex::job_rank()
        );
        BAD.fetch_add(1, Ordering::Relaxed);
    }
    token
        .reply_short(PONG, &[src, UNORDERED], Flags::NONE)
        .unwrap();
}

/// The peer completion handler of the VIS put: its payload names the sender, whose
/// bytes must already be in place.
fn vis_landed(_token: &Token<'_>, bytes: &[u8], _args: &[u32]) {
    let src = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
    let at = SEGMENT.load(Ordering::Relaxed) + VIS_AT;
    // SAFETY: this rank's segment, written by the put this handler completes.
    let landed = unsafe { std::slice::from_raw_parts(at as *const u8, VIS_LEN) };
    if landed != payload(src, gex::job_rank(), VIS_LEN).as_slice() {
        eprintln!(
            "gex_network: rank {}: the peer completion of rank {src}'s VIS put ran before \
             its data",
            gex::job_rank()
        );
        BAD.fetch_add(1, Ordering::Relaxed);
    }
    VIS_DONE.fetch_add(1, Ordering::Release);
}

fn main() {
    let (client, ep, team) = Client::init("NETWORK", Flags::NONE).expect("gex::Client::init");
    ep.register_handlers(&mut [
        AmEntry::short("ping", AmRole::Request, 2, ping).at(PING),
        AmEntry::short("pong", AmRole::Reply, 2, pong).at(PONG),
        AmEntry::payload(
            "medium",
            AmCategory::Medium,
            AmRole::Request,
            1,
            check_payload,
        )
        .at(MEDIUM),
        AmEntry::payload("long", AmCategory::Long, AmRole::Request, 1, check_payload).at(LONG),
        AmEntry::payload(
            "vis landed",
            AmCategory::Medium,
            AmRole::Reply,
            0,
            vis_landed,
        )
        .at(VIS_LANDED),
    ])
    .expect("gex::Endpoint::register_handlers");
    *NEXT_PING.lock().unwrap() = vec![0; team.size() as usize];
    *NEXT_PONG.lock().unwrap() = vec![0; team.size() as usize];
    let seg = Segment::attach(&team, segment_size(team.size())).expect("gex::Segment::attach");
    SEGMENT.store(seg.addr() as usize, Ordering::Relaxed);
    let (me, n) = (team.rank(), team.size());
    let position = gex::my_position();
    println!(
        "rank {me} of {n}: host {} of {}",
        position.host_set_rank, position.host_set_size
    );

    if std::env::args().any(|a| a == "--on-thread") {
        std::thread::scope(|s| {
            s.spawn(|| transfers(&team, &seg));
        });
    } else {
        transfers(&team, &seg);
    }
    client.finalize();
}

/// Every transfer of the program, checked; ends the job if one delivered wrong bytes.
fn transfers(team: &gex::Team, seg: &Segment) {
    let (me, n) = (team.rank(), team.size());
    for r in 0..n {
        for seq in 0..FLOOD {
            team.request_short(r, PING, &[me, seq], Flags::NONE)
                .unwrap();
        }
        let m = payload(me, r, MEDIUM_LEN);
        team.request_medium(r, MEDIUM, &m, Lc::Now, Flags::NONE, &[MEDIUM_LEN as u32])
            .unwrap();
        let l = payload(me, r, LONG_LEN);
        let at = team.segment_bound(r).unwrap().owner_addr + LONG_AT + me as usize * LONG_LEN;
        team.request_long(r, LONG, &l, at, Lc::Now, Flags::NONE, &[LONG_LEN as u32])
            .unwrap();
    }
    while PONGS.load(Ordering::Relaxed) < (FLOOD + 2) * n {
        gex::poll();
    }

    // A small and a large put into the next rank, read back by a get, and read in place
    // by their target after the barrier.
    let next = (me + 1) % n;
    let base = team.segment_bound(next).unwrap().owner_addr;
    let big = payload(me, next, PUT_LEN);
    team.put_blocking(next, base + PUT_AT, &big, Flags::NONE)
        .unwrap();
    team.put_blocking(next, base + 8, &u64::from(me).to_le_bytes(), Flags::NONE)
        .unwrap();
    let mut back = vec![0u8; PUT_LEN];
    team.get_blocking(&mut back, next, base + PUT_AT, Flags::NONE)
        .unwrap();
    let mut word = [0u8; 8];
    team.get_blocking(&mut word, next, base + 8, Flags::NONE)
        .unwrap();
    // A VIS put of two pieces into one run of the next rank, announced by its peer
    // completion handler (which checks there that the data came first).
    let vis = payload(me, next, VIS_LEN);
    set_peer_completion_handler(VIS_LANDED, &me.to_le_bytes(), Flags::NONE);
    team.vector_put_blocking(
        next,
        &[Memvec::new(base + VIS_AT, VIS_LEN)],
        &[&vis[..1000], &vis[1000..]],
        Flags::NONE,
    )
    .unwrap();
    while VIS_DONE.load(Ordering::Acquire) < 1 {
        gex::poll();
    }

    // Collectives with SINGLE addresses: rank 0's block to every rank, and block `j` of
    // every rank `i` to block `i` of rank `j`.
    let bases: Vec<usize> = (0..n)
        .map(|r| team.segment_bound(r).unwrap().owner_addr)
        .collect();
    let at = |off: usize| -> Vec<usize> { bases.iter().map(|b| b + off).collect() };
    let local = |off: usize| seg.addr().wrapping_add(off);
    let blocks: Vec<u8> = (0..n).flat_map(|j| payload(me, j, XCHG_LEN)).collect();
    // SAFETY: this rank's segment, which nothing else touches before the collectives.
    unsafe {
        if me == 0 {
            let b = payload(0, n, BCAST_LEN);
            std::ptr::copy_nonoverlapping(b.as_ptr(), local(BCAST_SRC), BCAST_LEN);
        }
        std::ptr::copy_nonoverlapping(blocks.as_ptr(), local(xchg_src(n)), blocks.len());
    }
    let sync = CollFlags::IN_ALLSYNC | CollFlags::OUT_ALLSYNC | CollFlags::SINGLE;
    let (src, dst) = (at(BCAST_SRC), at(BCAST_DST));
    // SAFETY: every address is inside its owner's segment, untouched until completion.
    unsafe {
        team.coll_broadcast_nb(
            0,
            dst.as_slice().into(),
            src.as_slice().into(),
            BCAST_LEN,
            sync,
        )
    }
    .wait();
    let (src, dst) = (at(xchg_src(n)), at(xchg_dst(n)));
    // SAFETY: as above, `n * XCHG_LEN` bytes on every rank.
    unsafe { team.exchange_nb(dst.as_slice().into(), src.as_slice().into(), XCHG_LEN, sync) }
        .wait();
    // SAFETY: this rank's segment, written by the completed collectives (OUT_ALLSYNC).
    let (bcast, xchg) = unsafe {
        (
            std::slice::from_raw_parts(local(BCAST_DST), BCAST_LEN),
            std::slice::from_raw_parts(local(xchg_dst(n)), n as usize * XCHG_LEN),
        )
    };
    let want: Vec<u8> = (0..n).flat_map(|i| payload(i, me, XCHG_LEN)).collect();
    if bcast != payload(0, n, BCAST_LEN).as_slice() || xchg != want.as_slice() {
        eprintln!("gex_network: rank {me}: a collective delivered wrong bytes");
        BAD.fetch_add(1, Ordering::Relaxed);
    }
    team.barrier();
    let prev = (me + n - 1) % n;
    // SAFETY: this rank's segment, written by the previous rank before the barrier.
    let mine = unsafe { std::slice::from_raw_parts(seg.addr().add(PUT_AT), PUT_LEN) };
    let ok = back == big
        && u64::from_le_bytes(word) == u64::from(me)
        && mine == payload(prev, me, PUT_LEN).as_slice()
        && BAD.load(Ordering::Relaxed) == 0
        // Every rank's flood arrived whole (each rank had all its pongs before the
        // barrier above), in order (`in_order`), and each pong came back.
        && NEXT_PING.lock().unwrap().iter().all(|&k| k == FLOOD)
        && NEXT_PONG.lock().unwrap().iter().all(|&k| k == FLOOD);
    team.barrier();
    if !ok {
        eprintln!("gex_network: rank {me}: a transfer delivered wrong bytes");
        gex::exit(1);
    }
    if me == 0 {
        println!("{n} ranks: AMs, puts and gets between every pair verified");
    }
}
