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

static COUNTED: AtomicU32 = AtomicU32::new(0);

fn counted(_token: &Token<'_>, _args: &[u32]) {
    COUNTED.fetch_add(1, Ordering::Relaxed);
}

/// `gex::layered::poll_unreported` returns how many messages it handled: a runtime's
/// waiting loop tells a poll that found work from an idle one by it (a handler may
/// leave the runtime nothing else to count). Every rank sends itself and its successor
/// `SENT` Requests, polling after each pair; the counts its polls return add up to the
/// handlers run, and a poll with nothing arrived returns 0.
#[test]
fn an_unreported_poll_counts_the_messages_it_handled() {
    const SENT: u32 = 40;
    for n in 1..=3 {
        gex::testing::spmd(n, || {
            let (client, ep, team) = Client::init("POLL_COUNT", Flags::NONE).unwrap();
            let mut t = [AmEntry::short("counted", AmRole::Request, 0, counted)];
            ep.register_handlers(&mut t).unwrap();
            let index = t[0].index;
            let next = (team.rank() + 1) % team.size();
            let mut handled = 0;
            for _ in 0..SENT {
                team.request_short(team.rank(), index, &[], Flags::NONE)
                    .unwrap();
                team.request_short(next, index, &[], Flags::NONE).unwrap();
                handled += gex::layered::poll_unreported();
            }
            while COUNTED.load(Ordering::Relaxed) < 2 * SENT {
                handled += gex::layered::poll_unreported();
            }
            if gex::testing::placement() == gex::testing::Placement::OneHost {
                // The queues within a host hold every message sent here: no send
                // waited for room, and so none polled on its own.
                assert_eq!(handled, 2 * SENT as usize);
            } else {
                // Between hosts a send may wait for credits, polling meanwhile: the
                // handlers that poll runs are not counted here.
                assert!((1..=2 * SENT as usize).contains(&handled), "{handled}");
            }
            team.barrier();
            assert_eq!(COUNTED.load(Ordering::Relaxed), 2 * SENT);
            if team.size() == 1 {
                assert_eq!(gex::layered::poll_unreported(), 0, "nothing arrived");
            }
            client.finalize();
        });
    }
}
