//! A first end-to-end check: AM ping-pong and put/get across 1-4 ranks.
use std::sync::atomic::{AtomicU32, Ordering};

use gex::{AmEntry, AmRole, Client, Flags, Segment, Token};

static PONGS: AtomicU32 = AtomicU32::new(0);

fn ping(token: &Token<'_>, args: &[u32]) {
    token.reply_short(200, &[args[0] + 1], Flags::NONE).unwrap();
}

fn pong(_token: &Token<'_>, args: &[u32]) {
    PONGS.fetch_add(args[0], Ordering::Relaxed);
}

#[test]
fn am_round_trip_and_put_get() {
    for n in 1..=4 {
        gex::testing::spmd(n, || {
            let (client, ep, team) = Client::init("SMOKE", Flags::NONE).unwrap();
            ep.register_handlers(&mut [
                AmEntry::short("ping", AmRole::Request, 1, ping).at(201),
                AmEntry::short("pong", AmRole::Reply, 1, pong).at(200),
            ])
            .unwrap();
            let seg = Segment::attach(&team, 1 << 16).unwrap();
            for r in 0..team.size() {
                team.request_short(r, 201, &[r], Flags::NONE).unwrap();
            }
            let want: u32 = (0..team.size()).map(|r| r + 1).sum();
            while PONGS.load(Ordering::Relaxed) < want {
                gex::poll();
            }
            assert_eq!(PONGS.load(Ordering::Relaxed), want);
            let next = (team.rank() + 1) % team.size();
            let dest = team.segment_bound(next).unwrap().owner_addr;
            team.put_blocking(
                next,
                dest + 8,
                &(team.rank() as u64).to_le_bytes(),
                Flags::NONE,
            )
            .unwrap();
            team.barrier();
            let mut back = [0u8; 8];
            team.get_blocking(&mut back, next, dest + 8, Flags::NONE)
                .unwrap();
            assert_eq!(u64::from_le_bytes(back), team.rank() as u64);
            let _ = seg;
            client.finalize();
        });
    }
}
