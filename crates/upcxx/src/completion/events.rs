//! The events a communication call reports (§7.1) and what their notifications
//! accept: the call's marker traits, the values an event produces, and the promises,
//! LPC callbacks and remote calls that can be notified. Sits on futures (promises).

use crate::future::{Cons, FutureElements, Nil, Promise};
use crate::rpc::PreparedRpcFf;

/// The source-completion event (§7.1): the source buffer may be reused.
#[derive(Debug, Clone, Copy)]
pub enum Source {}

/// The remote-completion event (§7.1): the data are at the target.
#[derive(Debug, Clone, Copy)]
pub enum Remote {}

/// The operation-completion event (§7.1): the operation is done for the initiator.
#[derive(Debug, Clone, Copy)]
pub enum Operation {}

/// Bit of [`Completions::EVENTS`](crate::completion::Completions::EVENTS) for source completion.
pub const SOURCE_EVENT: u8 = 1;
/// Bit of [`Completions::EVENTS`](crate::completion::Completions::EVENTS) for remote completion.
pub const REMOTE_EVENT: u8 = 2;
/// Bit of [`Completions::EVENTS`](crate::completion::Completions::EVENTS) for operation completion.
pub const OPERATION_EVENT: u8 = 4;

/// The completion events a communication call provides and the values its operation
/// completion produces (the "Completions:" paragraph of each call in the spec). Each
/// call has a marker type implementing this and the `Has*` traits of its events.
pub trait CompletionEvents: 'static {
    /// The call's name, for messages (`"rput"`).
    const NAME: &'static str;
    /// The values of operation completion: `()` for none, `(T,)` for one value.
    type OpValues: EventValues;
}

/// A call that provides source completion.
#[diagnostic::on_unimplemented(
    message = "`{Self}` provides no source completion, so `source_cx` requests are not \
               accepted (UPC++ spec §7.2.1)"
)]
pub trait HasSource: CompletionEvents {}

/// A call that provides remote completion.
#[diagnostic::on_unimplemented(
    message = "`{Self}` provides no remote completion, so `remote_cx` requests are not \
               accepted (UPC++ spec §7.2.1)"
)]
pub trait HasRemote: CompletionEvents {}

/// A call that provides operation completion.
#[diagnostic::on_unimplemented(
    message = "`{Self}` provides no operation completion, so `operation_cx` requests are \
               not accepted (UPC++ spec §7.2.1)"
)]
pub trait HasOperation: CompletionEvents {}

/// The values an event produces: `()` (none) or `(T,)` (one value of type `T`).
pub trait EventValues: 'static {
    /// The value type of a future readied by the event: `()` or `T`.
    type FutureValue: 'static;
    /// These values as the value of a future the event readies (§7.1 ¶7: an event
    /// producing a `T` readies a `future<T>`, one producing none a `future<>`).
    fn into_future_value(self) -> Self::FutureValue;
}

impl EventValues for () {
    type FutureValue = ();
    fn into_future_value(self) {}
}

impl<T: 'static> EventValues for (T,) {
    type FutureValue = T;
    fn into_future_value(self) -> T {
        self.0
    }
}

/// The values of an event that produces what a `Future<V>` holds: none if `V` is `()`
/// (a `future<>`), the one value `V` otherwise. For the calls whose value type is the
/// caller's, as `rpc`'s is its function's (§9.3 ¶22–¶24).
pub type ValuesOf<V> = <<V as FutureElements>::List as ValuesFromList<V>>::Values;

/// How [`ValuesOf`] tells `()` from other values: by the element list of `V`, which is
/// empty only for `()`. Implemented for the element lists; you never implement it.
pub trait ValuesFromList<V>: 'static {
    /// `()` for the empty list, `(V,)` otherwise.
    type Values: EventValues;
    /// `v` as those values.
    fn values(v: V) -> Self::Values;
}

impl<V: 'static> ValuesFromList<V> for Nil {
    type Values = ();
    #[inline]
    fn values(_v: V) {}
}

impl<V: 'static, H: 'static, T: 'static> ValuesFromList<V> for Cons<H, T> {
    type Values = (V,);
    #[inline]
    fn values(v: V) -> (V,) {
        (v,)
    }
}

/// A promise that can be notified of an event producing `V` (§7.1 ¶8): any promise
/// for an event without values (one anonymous dependency is fulfilled), a
/// `Promise<T>` for an event producing a `T` (`fulfill_result`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be notified of an event producing `{V}`: the promise's type \
               must match the event's value (UPC++ spec §7.1)"
)]
pub trait FulfillWith<V> {
    /// Notifies this promise of the event (§7.1 ¶8): calls `fulfill_result` with the
    /// event's value, or, for an event without values, fulfills one anonymous dependency.
    fn fulfill_with(&self, values: V);

    /// Notifies this promise of the event as a completion does: at once inside the
    /// progress that found the operation complete, else at this thread's next
    /// user-level progress (`thread::notify`).
    fn notify_with(self, values: V)
    where
        Self: Sized + 'static,
        V: 'static,
    {
        crate::thread::notify(move || self.fulfill_with(values));
    }
}

impl<T: 'static> FulfillWith<()> for Promise<T> {
    fn fulfill_with(&self, (): ()) {
        self.fulfill_anonymous(1);
    }

    /// Without a closure: operations completing into one promise between two progress
    /// calls cost a count, not an allocation each (`thread::defer_satisfy`).
    fn notify_with(self, (): ()) {
        crate::thread::notify_satisfy(self.into_dependencies());
    }
}

impl<T: 'static> FulfillWith<(T,)> for Promise<T> {
    fn fulfill_with(&self, (value,): (T,)) {
        self.fulfill_result(value);
    }
}

/// An LPC callback for an event producing `V` (§7.1 ¶9): `FnOnce()` for an event
/// without values, `FnOnce(T)` for an event producing a `T`. Its result is discarded.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the LPC callback of an event producing `{V}`: it must be \
               a `Send + 'static` closure taking the event's values (none, or one) \
               (UPC++ spec §7.1)"
)]
pub trait LpcCallback<V>: Send + 'static {
    /// Invokes the callback with the values the event produced, or with none if it
    /// produced none (§7.1 ¶9), and discards its result.
    fn call(self, values: V);
}

impl<F, R> LpcCallback<()> for F
where
    F: FnOnce() -> R + Send + 'static,
{
    fn call(self, (): ()) {
        self();
    }
}

impl<F, T, R> LpcCallback<(T,)> for F
where
    F: FnOnce(T) -> R + Send + 'static,
{
    fn call(self, (value,): (T,)) {
        self(value);
    }
}

/// A function and arguments that `remote_cx::as_rpc` can run on the target: what
/// [`crate::rpc::rpc_ff`] accepts. The call is serialized when the operation starts,
/// so borrowed arguments (`&DistObject`, `&Team`) need only outlive the initiating call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be sent by `remote_cx::as_rpc`",
    note = "the function must be a fn item or a closure capturing nothing, taking the \
            elements of the argument tuple; the arguments must be serializable"
)]
pub trait RemoteCall {
    /// Serializes the call, to be sent when remote completion occurs.
    #[doc(hidden)]
    fn prepare(self) -> PreparedRpcFf;
}
