//! Which path a small blocking put or get to another host takes, measured when the
//! segments are attached, where the conduit asks for it ([`Conduit::am_rma_probe`]: the
//! mpi conduit with several hosts and `GEX_MPI_AM_RMA_MAX` unset).
//!
//! A put of a few bytes to a segment not mapped here can go as Active Messages to the
//! owner, who copies (`remote.rs`: a Request and its Reply), or through the conduit's
//! RMA (the mpi conduit: `MPI_Put` and `MPI_Win_flush`). Which is faster depends on the
//! machine and on its MPI, not on the program: on one machine a flushed `MPI_Put` of 8
//! bytes between two of Open MPI's shared-memory "hosts" took 1.7 µs against 0.6 µs by
//! messages, on another 0.6-0.9 µs against 1.3-1.45 µs; over TCP, Open MPI's `osc
//! pt2pt` carries each flushed put as several messages of its own. So rank 0 measures
//! both with one rank of another host (the lowest rank of the next host, as every host
//! is taken to be alike), at sizes from 8 bytes to the configured threshold, and the
//! threshold becomes the largest size up to which messages won every size measured
//! (the window winning only by [`MARGIN_PERCENT`] or more). Each path's figure at a
//! size is the fastest of [`ROUNDS`] batches of [`PUTS`] blocking puts, the two paths'
//! batches interleaved and each path's first put untimed, so a preemption or a slow
//! start costs neither path its figure. Every put writes back the bytes that were
//! there (read first), so the segment is left as attach made it. Within [`BUDGET`], or
//! the threshold is left as configured: a machine so loaded that the measurement takes
//! longer gives figures that say nothing. The measurement is made only where no rank
//! set `GEX_MPI_AM_RMA_MAX` (the conduit compares them at start), since every rank
//! takes part in its broadcast.
//!
//! The other ranks wait in the broadcast of the result, polling, which serves the
//! measurement's messages and, for an `MPI_Put` that needs the target's progress, its
//! window. Blocking gets take the threshold of blocking puts (a get by messages is a
//! Request and its Reply too; through the window, an `MPI_Rget` waited for instead of
//! a put and its flush). Non-blocking transfers and the runs of VIS operations keep
//! the configured threshold ([`Conduit::am_rma_max`]): messages gather those in flight
//! together, which no single put measures. On the machine where the window won (0.68
//! against 1.39 µs for a blocking put of 8 bytes), 64 `rget`s of 8 bytes in flight
//! took 0.43 µs each by messages and 0.80 µs each through the window, and an `rput` of
//! 8 bytes waited for at once took no less through the window (an `MPI_Rput`, then a
//! flush in a later poll) than by messages.

use std::time::{Duration, Instant};

use super::remote;
use crate::conduit::{AddressError, Completion, Conduit, Rank};
use crate::event;
use crate::runtime::Runtime;
use crate::team::Team;

/// The call that the measurement is part of, named by its errors.
const CALL: &str = "Segment::attach";

/// The sizes measured, smallest first; those above the configured threshold are not.
const SIZES: [usize; 4] = [8, 256, 1024, 3072];

/// Batches per path and size, the fastest of which counts.
const ROUNDS: usize = 5;

/// Blocking puts per batch.
const PUTS: u32 = 8;

/// The longest the measurement may take before it gives up. Between two of Open MPI's
/// shared-memory "hosts" a blocking put took 0.6-1.7 µs either way, so all four sizes
/// (80 puts each) take under a millisecond; between network namespaces joined by TCP
/// (`scripts/multihost.sh`) it took about 0.2 ms by messages and 0.9 ms through the
/// window (whose operations wait for the target's polls), so the smallest size alone
/// would take 45 ms: the measurement stops, leaving messages, the faster path there.
const BUDGET: Duration = Duration::from_millis(20);

/// How much faster the window must be, in percent of the time by messages, to take
/// the transfers of a size from them: a tie keeps messages, which also gather the
/// transfers that follow one another (and two close figures may swap from job to job).
const MARGIN_PERCENT: u128 = 10;

/// Chooses the conduit's threshold for small blocking transfers by messages
/// ([`Conduit::set_am_rma_blocking_max`]): measured by rank 0, broadcast over `team` (the
/// primordial team, every rank taking part). Called at attach, before any user
/// transfer.
pub(crate) fn choose_am_rma_blocking_max(rt: &Runtime, team: &Team) {
    // What no measurement gives: the other ranks check that rank 0's value came.
    let mut chosen = u64::MAX.to_le_bytes();
    let mut measured = String::new();
    if rt.conduit.rank() == 0 {
        let peer = rt.conduit.host_leaders()[1];
        let (max, what) = measure(rt, peer);
        chosen = (max as u64).to_le_bytes();
        measured = what;
    }
    {
        // The runtime's own collective, not the program's: no GASP event.
        #[cfg(feature = "gasp")]
        let _quiet = gasp::dispatch::quiet();
        team.broadcast(0, &mut chosen);
    }
    let chosen = u64::from_le_bytes(chosen);
    assert!(
        chosen != u64::MAX,
        "gex::{CALL}: the threshold of small transfers measured by rank 0 did not arrive"
    );
    rt.conduit
        .set_am_rma_blocking_max(chosen as usize, Some(&measured));
}

/// A size's figures: the fastest batch's time per put by messages and through the
/// conduit's RMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Figure {
    size: usize,
    messages: Duration,
    window: Duration,
}

impl Figure {
    /// Whether the window beat messages at this size by [`MARGIN_PERCENT`].
    fn window_wins(&self) -> bool {
        self.window.as_nanos() * 100 <= self.messages.as_nanos() * (100 - MARGIN_PERCENT)
    }
}

/// The threshold that `figures` (by size, smallest first) call for: the largest size
/// up to which messages won every size, 0 if they lost the first.
fn threshold(figures: &[Figure]) -> usize {
    figures
        .iter()
        .take_while(|f| !f.window_wins())
        .last()
        .map_or(0, |f| f.size)
}

/// The threshold that puts to `peer` measured here call for, and what was measured.
fn measure(rt: &Runtime, peer: Rank) -> (usize, String) {
    let configured = rt.conduit.am_rma_max();
    let segment = rt
        .conduit
        .bound_segment(peer)
        .expect("the segments are attached");
    let sizes: Vec<usize> = SIZES
        .into_iter()
        .filter(|&s| s <= configured.min(segment.size))
        .collect();
    let Some(&largest) = sizes.last() else {
        return (configured, String::new());
    };
    let addr = segment.owner_addr;
    let mut saved = vec![0u8; largest];
    // SAFETY: `saved` is borrowed exclusively until the blocking get completes.
    let c = unsafe { remote::get(rt, CALL, saved.as_mut_ptr(), peer, addr, largest, true) };
    complete(rt, c);
    let put = |by_messages: bool, src: &[u8]| {
        let c = if by_messages {
            Ok(remote::put_by_messages(rt, CALL, peer, addr, src, true))
        } else {
            rt.conduit.put(peer, addr, src, true)
        };
        complete(rt, c);
    };
    // Untimed: whatever the first transfer of either path sets up (the window's lock
    // of the peer, the transport's connection) is not a put's cost.
    put(true, &saved);
    put(false, &saved);

    let start = Instant::now();
    let mut figures = Vec::new();
    for size in sizes {
        let src = &saved[..size];
        let mut best = [Duration::MAX; 2];
        for _ in 0..ROUNDS {
            for (path, best) in best.iter_mut().enumerate() {
                let t = Instant::now();
                for _ in 0..PUTS {
                    put(path == 0, src);
                }
                *best = (*best).min(t.elapsed() / PUTS);
                if start.elapsed() > BUDGET {
                    let mut seen = report(&figures);
                    seen.push(format!("over {BUDGET:?}: left as configured"));
                    return (configured, seen.join(", "));
                }
            }
        }
        let [messages, window] = best;
        let figure = Figure {
            size,
            messages,
            window,
        };
        figures.push(figure);
        if figure.window_wins() {
            break;
        }
    }
    (threshold(&figures), report(&figures).join(", "))
}

/// What the conduit reports of `figures` (tests read it back).
fn report(figures: &[Figure]) -> Vec<String> {
    figures
        .iter()
        .map(|f| {
            format!(
                "{} B: {} ns by messages, {} ns by RMA",
                f.size,
                f.messages.as_nanos(),
                f.window.as_nanos()
            )
        })
        .collect()
}

/// Waits for a transfer of the measurement; an address error cannot arise (the
/// range is inside the peer's segment, whose bounds were read from the conduit).
fn complete(rt: &Runtime, c: Result<Completion, AddressError>) {
    let c = c.unwrap_or_else(|e| panic!("gex::{CALL}: measuring small puts: {e:?}"));
    event::complete_blocking(rt, c);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(size: usize, messages: u64, window: u64) -> Figure {
        Figure {
            size,
            messages: Duration::from_nanos(messages),
            window: Duration::from_nanos(window),
        }
    }

    #[test]
    fn the_threshold_is_the_last_size_before_the_window_wins() {
        let all_messages = [
            figure(8, 600, 1700),
            figure(256, 700, 1700),
            figure(1024, 800, 1700),
            figure(3072, 1100, 1700),
        ];
        assert_eq!(threshold(&all_messages), 3072);
        assert_eq!(threshold(&[figure(8, 1400, 700)]), 0);
        assert_eq!(
            threshold(&[figure(8, 600, 1000), figure(256, 900, 700)]),
            8,
            "the window beat messages at 256 bytes"
        );
        assert_eq!(threshold(&[]), 0);
    }

    #[test]
    fn the_window_must_win_by_the_margin() {
        // 10% faster wins; 5% faster is a tie, which messages keep.
        assert!(figure(8, 1000, 900).window_wins());
        assert!(!figure(8, 1000, 950).window_wins());
        assert_eq!(
            threshold(&[figure(8, 1000, 950), figure(256, 1000, 900)]),
            8
        );
    }
}
