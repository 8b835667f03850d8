//! The typed argument lists of events: what the builders of
//! [`events::args`](crate::events::args) return and the instrumentation macros take
//! (re-exported by [`instrument`](crate::instrument)). A leaf below the event table, so
//! that the table and the macros both build on it without importing each other.

use std::marker::PhantomData;

use crate::Arg;

/// An event of the table: its tag. Implemented by the event types of
/// [`events::args`](crate::events::args).
pub trait Tagged: Copy {
    /// The event's tag.
    const TAG: u32;
}

/// An event reported as START and END around an operation.
pub trait Interval: Tagged {}

/// An event reported as one ATOMIC event.
pub trait Atomic: Tagged {}

/// The arguments of event `E`'s START (or ATOMIC) event, from its `start` builder.
#[derive(Clone, Copy, Debug)]
pub struct Start<E, const N: usize> {
    pub(crate) event: E,
    pub(crate) args: [Arg<'static>; N],
}

/// The arguments of event `E`'s END event, from its `end` builder.
#[derive(Clone, Copy, Debug)]
pub struct End<E, const N: usize> {
    pub(crate) args: [Arg<'static>; N],
    event: PhantomData<E>,
}

impl<E: Tagged, const N: usize> Start<E, N> {
    /// For the builders of [`events::args`](crate::events::args) only.
    #[doc(hidden)]
    #[inline(always)]
    pub fn new(event: E, args: [Arg<'static>; N]) -> Self {
        Start { event, args }
    }

    /// The arguments, as the tool receives them.
    #[inline(always)]
    pub fn args(&self) -> &[Arg<'static>] {
        &self.args
    }
}

impl<E: Tagged, const N: usize> End<E, N> {
    /// For the builders of [`events::args`](crate::events::args) only.
    #[doc(hidden)]
    #[inline(always)]
    pub fn new(_event: E, args: [Arg<'static>; N]) -> Self {
        End {
            args,
            event: PhantomData,
        }
    }

    /// The arguments, as the tool receives them.
    #[inline(always)]
    pub fn args(&self) -> &[Arg<'static>] {
        &self.args
    }
}
