//! RPCs that wait for the objects their arguments name.
//!
//! A `&DistObject<T>` or `&Team` argument travels as its id and is the target's own
//! object when the function runs; if the target has not built that object yet, the
//! call waits there until it does (§9.3 ¶1, §14.3 ¶2). Only argument tuples with such
//! an element ([`RpcArgs::BY_ID`], known at compile time) come here.
//!
//! A waiting call keeps its receive page (as a call whose result is a future not yet
//! ready does, §6.5 ¶6) and is run again, from the start, once the object it waited for
//! is built: at the next user-level progress of the thread that builds it, which holds
//! the master persona (§14.4 ¶4), also when the persona moved to that thread after the
//! call arrived (§10.5.3: the persona's work goes with it). It then checks its arguments again, and may wait for
//! another one. Calls that wait do not hold back the calls that arrive after them:
//! RPCs without such arguments keep their order, a waiting one runs when it can. UPC++
//! promises no order among RPCs (its progress engine's queues are unordered, §1.2 ¶1),
//! so a program cannot tell the difference. Sits on `incoming` and `function`.

use super::function::Entry;
use super::incoming::Incoming;
use super::RpcArgs;
use crate::serialization::Rerun;

/// Where a waiting message's payload lies in its receive page.
#[derive(Clone, Copy)]
struct Payload(*const u8, usize);

// SAFETY: the bytes are only read, by the one run of the message, on whichever thread
// builds the object it waits for; the page they lie in is kept alive by the run's
// `PageHold` (an `Arc`) and is not written again until it is released.
unsafe impl Send for Payload {}

impl Payload {
    /// The bytes.
    ///
    /// # Safety
    /// The page they lie in must still be held.
    unsafe fn bytes<'a>(self) -> &'a [u8] {
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts(self.0, self.1) }
    }
}

/// Arranges for `entry` to run `msg` again once every object its arguments name is
/// built here, and returns true; returns false if they all are.
///
/// # Panics
/// If the arguments do not deserialize, or name an object dropped here.
pub(super) fn until_here<A: RpcArgs>(msg: &Incoming<'_>, entry: Entry) -> bool {
    let mut make_rerun = || -> Rerun {
        let held = msg.hold();
        let head = *msg.head;
        let payload = Payload(msg.payload.as_ptr(), msg.payload.len());
        Box::new(move || {
            let hold = held.into_hold();
            // SAFETY: the payload lies in the receive page that `hold` keeps alive, whose
            // buffer does not move once handed to the hold (`delivery::run_page`).
            let payload = unsafe { payload.bytes() };
            let msg = Incoming {
                head: &head,
                payload,
                hold: &hold,
            };
            // SAFETY: `entry` is the trampoline that ran this message before.
            unsafe { entry(&msg) }
        })
    };
    A::wait_until_here(msg.payload, &mut make_rerun).unwrap_or_else(|e| {
        panic!(
            "upcxx::rpc: the arguments from rank {} do not deserialize: {e}",
            msg.head.src
        )
    })
}
