//! How an atomic started: complete at initiation, or pending on the `gex` domain until
//! the owner's reply (a rank on another host), with the completions notified then.

use gex::AtomicType;

use crate::completion::{self, CompletionEvents, Completions, FutureList, Returned};

/// How an operation started: complete, with the value read, or (through `gex`, to a
/// rank on another host) pending until `event` completes, the value then at `result`.
pub(super) enum Started<T> {
    Done(T),
    Pending { event: gex::Event, result: *mut T },
}

impl<T: AtomicType> Started<T> {
    /// Arms `cxs` and notifies them, with `values` of the value read, once the pending
    /// operation completes (found by the user-level progress of this thread).
    pub(super) fn finish<Ev: CompletionEvents, C: Completions<Ev>>(
        self,
        cxs: C,
        rank: crate::Rank,
        values: impl FnOnce(T) -> Ev::OpValues + 'static,
    ) -> Returned<C, Ev> {
        let Started::Pending { mut event, result } = self else {
            unreachable!("finish is for a pending operation")
        };
        let (futures, armed) = cxs.arm();
        completion::notify_when_outgoing(
            move || event.test(),
            rank,
            armed,
            // SAFETY: called once, after the event completed: `gex` wrote the value
            // (or left the initial one) and no longer uses the box, which
            // `through_gex` leaked for this.
            move || values(*unsafe { Box::from_raw(result) }),
        );
        futures.into_return()
    }
}
