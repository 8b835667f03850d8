//! What one poll of the mpi conduit's transport between hosts tests, with one
//! `MPI_Testsome`, and what the completions it reports do (see the parent module).

use std::ffi::c_int;

use ::mpi::ffi;

use super::super::boot::check;
use super::super::MpiConduit;
use super::control::{EXIT, SIGNAL};
use super::{wire, SendBuf, State, CONTROL_BASE, SEND_BASE};
use crate::conduit::Rank;

/// Pending receives of each network tested per poll, the oldest first (see
/// [`State::gather_tested`]): two, so that a message arriving right behind another
/// is reported by the same poll.
const TEST_DEPTH: usize = 2;

impl State {
    /// Whether network `net` has records to handle: a message whose records are being
    /// handled, or an arrived one first in its order.
    #[inline]
    pub(super) fn arrived(&self, net: usize) -> bool {
        self.cursor[net].is_some()
            || self.order[net]
                .front()
                .is_some_and(|&slot| self.slots[slot].status.is_some())
    }

    /// Gathers into `tested` the requests a poll tests: the oldest [`TEST_DEPTH`]
    /// pending receives of each network, the oldest pending credit receive, and every
    /// send in flight. The receives of one network (or the credit receives) all match
    /// the same messages (any source, one tag), so MPI matches them in posting order,
    /// and a network's records are handled in that order: a later receive that
    /// completes first would wait for the older one anyway. Testing only the oldest
    /// keeps the array short, and `MPI_Testsome` looks at each of its requests on
    /// every call, most of an idle poll's work beside the progress engine's pass.
    #[inline]
    pub(super) fn gather_tested(&mut self) {
        if std::mem::take(&mut self.stale) {
            self.gather();
        }
    }

    /// [`gather_tested`](Self::gather_tested) past its check.
    fn gather(&mut self) {
        self.tested_at.clear();
        for order in &self.order {
            let mut n = 0;
            for &slot in order {
                if n == TEST_DEPTH {
                    break;
                }
                if self.slots[slot].status.is_none() {
                    self.tested_at.push(slot);
                    n += 1;
                }
            }
        }
        if let Some(&c) = self.control_order.front() {
            self.tested_at.push(CONTROL_BASE + c);
        }
        self.tested_at.extend(SEND_BASE..self.reqs.len());
        self.tested.clear();
        for &i in &self.tested_at {
            self.tested.push(self.reqs[i]);
        }
    }
}

impl MpiConduit {
    /// One pass of MPI's progress engine with one `MPI_Testsome` over the requests that
    /// can complete usefully now (see [`State::gather_tested`]): marks arrived messages
    /// ready in their slots, applies returned credits and posts their receives again,
    /// frees completed sends, completes the parts of gets whose requests completed and
    /// flushes those of puts (`rma`). Returns how many such parts it completed (work
    /// found, for a waiting loop).
    pub(super) fn test_all(&self, st: &mut State) -> usize {
        st.gather_tested();
        let count = st.tested.len();
        // Grown as the requests tested grow, never shrunk: MPI writes at most `count`.
        if st.done_idx.len() < count {
            st.done_idx.resize(count, 0);
            // SAFETY: a zeroed status is a valid out-parameter.
            st.done_status.resize(count, unsafe { std::mem::zeroed() });
        }
        let mut outcount = 0;
        // A test call that finds nothing done runs one pass of the progress engine and
        // returns, without looking again at what that pass delivered: a second call
        // reports it in this poll instead of the next.
        for _ in 0..2 {
            // SAFETY: arrays of `count` requests, indices and statuses.
            unsafe {
                check(
                    ffi::MPI_Testsome(
                        count as c_int,
                        st.tested.as_mut_ptr(),
                        &mut outcount,
                        st.done_idx.as_mut_ptr(),
                        st.done_status.as_mut_ptr(),
                    ),
                    "MPI_Testsome",
                );
            }
            if outcount != 0 {
                break;
            }
        }
        // MPI_UNDEFINED (negative) when every request is null or inactive: nothing to do.
        let outcount = outcount.max(0) as usize;
        st.stale |= outcount > 0;
        let mut sends_done = false;
        for k in 0..outcount {
            let t = st.done_idx[k] as usize;
            let i = st.tested_at[t];
            // The copy tested is the request now (MPI_REQUEST_NULL once a send
            // completes; a persistent receive's handle stays, inactive).
            st.reqs[i] = st.tested[t];
            let status = st.done_status[k];
            if i < CONTROL_BASE {
                let len = received(&status);
                if let Some(credits) = wire::credits(&st.slots[i].buf, len) {
                    self.apply_credits(
                        &mut st.in_flight,
                        status.MPI_SOURCE,
                        credits.map(u32::from),
                    );
                }
                st.slots[i].status = Some((status.MPI_SOURCE as Rank, len));
            } else if i < SEND_BASE {
                let c = i - CONTROL_BASE;
                let b = st.control_bufs[c];
                if b[0] & 0xff == SIGNAL {
                    self.apply_signal(status.MPI_SOURCE, received(&status), b);
                } else if b[0] == EXIT {
                    // A rank of another host called `gex::exit(0)`: this host's ranks
                    // leave at their next wait.
                    self.host.mark_exiting();
                } else {
                    let mut credits = [0; 2];
                    credits[(b[0] as usize).min(1)] = b[1];
                    if b[0] > 1 {
                        credits[1] = u32::MAX; // an unknown kind: corrupt
                    }
                    self.apply_credits(&mut st.in_flight, status.MPI_SOURCE, credits);
                }
                // Posted again by the next poll, as a receive slot is. Only the oldest
                // control receive is tested (`gather`), so it is the one that completed.
                debug_assert_eq!(st.control_order.front(), Some(&c));
                st.control_order.pop_front();
                st.control_unposted.push(c);
            } else {
                sends_done = true;
            }
        }
        while let Some((dest, net)) = st.sent_done.pop() {
            st.out[dest as usize][net].sending -= 1;
        }
        let mut parts = 0;
        if sends_done {
            // Completed sends are null now: drop them, keeping `sends` beside `reqs`.
            let mut j = SEND_BASE;
            while j < st.reqs.len() {
                // SAFETY: reading an MPI constant.
                if st.reqs[j] == unsafe { ffi::RSMPI_REQUEST_NULL } {
                    st.reqs.swap_remove(j);
                    match st.sends.swap_remove(j - SEND_BASE) {
                        SendBuf::Msg { buf, dest, net } => {
                            st.out[dest as usize][net].sending -= 1;
                            st.free.push(buf);
                        }
                        SendBuf::Control(sent) => st.free_control.push(sent),
                        SendBuf::Get(op) => {
                            op.part_done();
                            parts += 1;
                        }
                        SendBuf::Put { dest, op, .. } => st.unflushed.push((dest, op)),
                    }
                } else {
                    j += 1;
                }
            }
        }
        if !st.unflushed.is_empty() {
            parts += self.flush_puts(st);
        }
        parts
    }
}

/// The bytes a completed receive delivered.
fn received(status: &ffi::MPI_Status) -> usize {
    let mut count = 0;
    // SAFETY: a completed receive's status.
    unsafe {
        check(
            ffi::MPI_Get_count(status, ffi::RSMPI_UINT8_T, &mut count),
            "MPI_Get_count",
        );
    }
    count.max(0) as usize
}
