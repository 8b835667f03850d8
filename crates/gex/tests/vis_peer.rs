//! "VIS Put Peer Completion" (`gex_VIS_SetPeerCompletionHandler`), with 1 to 4 ranks:
//! the armed handler runs on the target after the data of the next VIS put landed.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::vis::{region, Form, FORMS, REGION};
use common::{expect_panic, pattern};
use gex::testing::spmd;
use gex::vis::set_peer_completion_handler;
use gex::{AmCategory, AmEntry, AmRole, Client, Event, Flags, Memvec, Segment, Team, Token};

static LANDED: AtomicUsize = AtomicUsize::new(0);
static WRONG: AtomicUsize = AtomicUsize::new(0);

/// The peer completion handler: its payload names a range of this rank's segment and
/// the seed of the bytes that must already be there.
fn landed(_token: &Token<'_>, payload: &[u8], args: &[u32]) {
    assert!(args.is_empty());
    let word = |i: usize| u64::from_le_bytes(payload[i * 8..i * 8 + 8].try_into().unwrap());
    let (addr, len, seed) = (word(0) as usize, word(1) as usize, word(2));
    // SAFETY: the range is in this rank's segment, written by the put this completes.
    let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
    if bytes != pattern(seed, len).as_slice() {
        WRONG.fetch_add(1, Ordering::Relaxed);
    }
    LANDED.fetch_add(1, Ordering::Release);
}

/// "VIS Put Peer Completion": the armed handler runs on the target of the next VIS put
/// only, once, after all of its data landed (the handler reads them), with the payload
/// given; `handler == 0` disarms; gets, `IMMEDIATE` and wrongly registered handlers are
/// refused.
#[test]
fn peer_completion_handler_runs_after_the_data_landed() {
    for n in 1..=4 {
        spmd(n, || {
            common::quiet_expected_panics();
            let (client, ep, team) = Client::init("VIS_PEER", Flags::NONE).unwrap();
            let mut table = [
                AmEntry::payload("landed", AmCategory::Medium, AmRole::Reply, 0, landed),
                AmEntry::payload(
                    "request_only",
                    AmCategory::Medium,
                    AmRole::Request,
                    0,
                    landed,
                ),
            ];
            ep.register_handlers(&mut table).unwrap();
            let (handler, wrong_role) = (table[0].index, table[1].index);
            let seg = Segment::attach(&team, REGION * team.size() as usize).unwrap();
            let bases = common::segment_bases(&team);
            let me = team.rank();
            team.barrier();
            // Each rank sends one put of each kind, in every form, to every rank; only
            // the armed ones notify. Each notifies with where the data are, in the
            // target's own address space (the segment base it reported).
            let mut sent_to = vec![0usize; team.size() as usize];
            let _seg = seg;
            let mut k = 0u64;
            for r in 0..team.size() {
                let base = bases[r as usize] + region(me);
                for form in FORMS {
                    for kind in 0..3 {
                        k += 1;
                        let seed = (me as u64) << 32 | k;
                        let len = 96;
                        let data = pattern(seed, len);
                        // A place of its own, so no later put overwrites it before the
                        // target runs the handler; an owner-space address is the
                        // target's own address of it.
                        let at = base + k as usize * 128;
                        let mut payload = Vec::new();
                        for w in [at as u64, len as u64, seed] {
                            payload.extend_from_slice(&w.to_le_bytes());
                        }
                        set_peer_completion_handler(handler, &payload, Flags::NONE);
                        let e = peer_put(&team, form, kind, r, at, &data);
                        form.sync(e);
                        sent_to[r as usize] += 1;
                        // Disarmed now: a second put notifies nobody.
                        team.strided_put_blocking(r, at, &[], &data, 0, &[], 8, &[], Flags::NONE)
                            .unwrap();
                    }
                }
                // Arming and disarming: nothing is sent.
                set_peer_completion_handler(handler, b"x", Flags::NONE);
                set_peer_completion_handler(0, &[], Flags::NONE);
                team.vector_put_blocking(r, &[Memvec::new(base, 1)], &[b"y"], Flags::NONE)
                    .unwrap();
            }
            // A put that moves nothing still notifies its rank.
            let mut payload = Vec::new();
            for w in [bases[me as usize] as u64, 0, 0] {
                payload.extend_from_slice(&w.to_le_bytes());
            }
            set_peer_completion_handler(handler, &payload, Flags::NONE);
            team.strided_put_blocking(me, 0, &[8], &[0u8; 8], 0, &[8], 8, &[0], Flags::NONE)
                .unwrap();
            sent_to[me as usize] += 1;
            // Every rank sent each rank the same number, plus one to itself.
            assert!(sent_to
                .iter()
                .all(|&s| s == FORMS.len() * 3 + (s > FORMS.len() * 3) as usize));
            team.barrier();
            let total = FORMS.len() * 3 * team.size() as usize + 1;
            while LANDED.load(Ordering::Acquire) < total {
                gex::poll();
            }
            assert_eq!(LANDED.load(Ordering::Acquire), total);
            assert_eq!(
                WRONG.load(Ordering::Relaxed),
                0,
                "a handler ran before its data"
            );
            // Refusals.
            let call = "gex::vis::set_peer_completion_handler";
            expect_panic(&[call, "0-argument Medium Reply"], || {
                set_peer_completion_handler(wrong_role, &[], Flags::NONE)
            });
            expect_panic(&[call, "VIS_MAX_PEERCOMPLETION"], || {
                set_peer_completion_handler(
                    handler,
                    &[0; gex::VIS_MAX_PEERCOMPLETION + 1],
                    Flags::NONE,
                )
            });
            set_peer_completion_handler(handler, &[], Flags::NONE);
            expect_panic(
                &["gex::Team::strided_get_blocking", "only VIS puts"],
                || {
                    let mut d = [0u8; 8];
                    team.strided_get_blocking(
                        &mut d,
                        0,
                        &[],
                        me,
                        bases[me as usize],
                        &[],
                        8,
                        &[],
                        Flags::NONE,
                    )
                },
            );
            set_peer_completion_handler(handler, &[], Flags::NONE);
            expect_panic(&["gex::Team::vector_put_blocking", "IMMEDIATE"], || {
                team.vector_put_blocking(me, &[], &[[0u8; 0]; 0], Flags::IMMEDIATE)
            });
            set_peer_completion_handler(0, &[], Flags::NONE);
            team.barrier();
            assert_eq!(
                LANDED.load(Ordering::Acquire),
                total,
                "a disarmed put notified"
            );
            client.finalize();
        });
    }
}

/// One put of `data` to `at` on `r`: vector (`kind` 0, in two pieces), indexed (1, in
/// three blocks) or strided (2, as 12 rows of 8 bytes), in `form`.
fn peer_put(team: &Team, form: Form, kind: u32, r: u32, at: usize, data: &[u8]) -> Option<Event> {
    let f = form.flags();
    let pieces: Vec<&[u8]> = data.chunks(32).collect();
    let dsts = [Memvec::new(at, 40), Memvec::new(at + 40, data.len() - 40)];
    let addrs = [at, at + 32, at + 64];
    // SAFETY: (NB, NBI) `data` outlives the sync the caller makes.
    unsafe {
        match (kind, form) {
            (0, Form::Blocking) => team
                .vector_put_blocking(r, &dsts, &[&data[..50], &data[50..]], f)
                .map(|_| None),
            (0, Form::Nb | Form::NbLeaf) => team.vector_put_nb(r, &dsts, &[data], f).map(Some),
            (0, _) => team.vector_put_nbi(r, &dsts, &pieces, f).map(|_| None),
            (1, Form::Blocking) => team
                .indexed_put_blocking(r, &addrs, 32, &pieces, f)
                .map(|_| None),
            (1, Form::Nb | Form::NbLeaf) => {
                team.indexed_put_nb(r, &addrs, 32, &pieces, f).map(Some)
            }
            (1, _) => team
                .indexed_put_nbi(r, &addrs, 32, &pieces, f)
                .map(|_| None),
            (_, Form::Blocking) => team
                .strided_put_blocking(r, at, &[8], data, 0, &[8], 8, &[12], f)
                .map(|_| None),
            (_, Form::Nb | Form::NbLeaf) => team
                .strided_put_nb(r, at, &[8], data, 0, &[8], 8, &[12], f)
                .map(Some),
            (_, _) => team
                .strided_put_nbi(r, at, &[8], data, 0, &[8], 8, &[12], f)
                .map(|_| None),
        }
    }
    .unwrap()
}
