//! The computation of one atomic operation on memory this process maps: the six data
//! types of remote atomics ([`AtomicType`]) and, for each, [`AtomicType::apply`].
//!
//! This is the one place an operation's meaning lives. The initiator runs it on the
//! shared mapping of the target's segment; a conduit that cannot map the target would
//! run the same function in an Active Message handler on the target.
//!
//! Integers use the CPU's atomic instructions through `std::sync::atomic` (`MULT` by a
//! compare-and-swap loop, as no CPU has an atomic multiply). Floating-point values are
//! kept as their bits in an integer atomic of the same width: `SET`, `GET`, `SWAP` and
//! `(F)CAS` act on the bits, every arithmetic operation is a compare-and-swap loop that
//! computes in `f32`/`f64`.

use std::sync::atomic::{
    fence, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering, Ordering::Relaxed,
};

use crate::ops::{Dt, Op};

mod sealed {
    pub trait Sealed {}
}

/// A data type of remote atomics (GASNet-EX "Data types for atomics and reductions":
/// `int32_t`, `uint32_t`, `int64_t`, `uint64_t`, `float`, `double`). Sealed: these six
/// are all there are.
pub trait AtomicType:
    sealed::Sealed + Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static
{
    /// The GASNet-EX data type (`GEX_DT_*`).
    const DT: Dt;

    /// Zero: the operand to pass where an operation takes none.
    const ZERO: Self;

    /// The value's bits, zero-extended (how GASP events carry operands).
    fn to_bits(self) -> u64;

    /// The value whose [`to_bits`](AtomicType::to_bits) are the low bits of `bits`.
    fn from_bits(bits: u64) -> Self;

    /// Performs `op` atomically on the object at `target` with operands `op1` and `op2`
    /// (ignored where the operation takes fewer), ordered by `order` (see
    /// [`MemOrder`]); returns the value the object held before (`op0`) for fetching
    /// operations, and an unspecified value for the others.
    ///
    /// # Safety
    /// `target` must be valid for reads and writes of a `Self`, aligned to its size,
    /// and for the duration of the call accessed only atomically (the atomic access
    /// phase of GASNet-EX). `op` must be valid for atomics with `Self::DT`
    /// ([`Op::valid_for_atomic`]).
    unsafe fn apply(target: *mut Self, op: Op, op1: Self, op2: Self, order: MemOrder) -> Self;
}

/// The memory ordering an operation asks for (`GEX_FLAG_AD_ACQ`, `GEX_FLAG_AD_REL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemOrder {
    /// `GEX_FLAG_AD_ACQ`: later accesses of the synchronizing thread stay after it.
    pub acquire: bool,
    /// `GEX_FLAG_AD_REL`: earlier accesses of the initiating thread stay before it.
    pub release: bool,
}

impl MemOrder {
    /// The ordering of a read-modify-write.
    fn rmw(self) -> Ordering {
        match (self.acquire, self.release) {
            (true, true) => Ordering::AcqRel,
            (true, false) => Ordering::Acquire,
            (false, true) => Ordering::Release,
            (false, false) => Relaxed,
        }
    }

    /// The ordering of a failed compare-and-swap (no release: nothing was written).
    fn failure(self) -> Ordering {
        if self.acquire {
            Ordering::Acquire
        } else {
            Relaxed
        }
    }

    /// A load (`GET`): a release is a full fence before it. A release fence would not
    /// do: it orders earlier accesses before later *stores* only, and the spec keeps
    /// every earlier access (an earlier store included) before the operation.
    fn load(self) -> Ordering {
        if self.release {
            fence(Ordering::SeqCst);
        }
        self.failure()
    }

    /// A store (`SET`): an acquire is a fence after it ([`MemOrder::after_store`]).
    fn store(self) -> Ordering {
        if self.release {
            Ordering::Release
        } else {
            Relaxed
        }
    }

    /// A store's acquire (`SET`): a full fence after it, for the same reason as
    /// [`MemOrder::load`]'s: a later load must not pass the store.
    fn after_store(self) {
        if self.acquire {
            fence(Ordering::SeqCst);
        }
    }
}

/// A compare-and-swap loop: replaces the value `v` by `f(v)`; returns `v`.
#[inline]
fn update<V: Copy>(
    load: impl Fn(Ordering) -> V,
    cas: impl Fn(V, V, Ordering, Ordering) -> Result<V, V>,
    f: impl Fn(V) -> V,
    order: MemOrder,
) -> V {
    let mut cur = load(order.failure());
    loop {
        match cas(cur, f(cur), order.rmw(), order.failure()) {
            Ok(v) => return v,
            Err(v) => cur = v,
        }
    }
}

macro_rules! integer {
    ($($t:ty => $atomic:ty, $dt:ident;)*) => {$(
        impl sealed::Sealed for $t {}

        impl AtomicType for $t {
            const DT: Dt = Dt::$dt;
            const ZERO: $t = 0;

            #[inline]
            fn to_bits(self) -> u64 {
                // Zero-extended bits, as the GASP argument is a `uint64_t`.
                self as u64 & (u64::MAX >> (64 - 8 * std::mem::size_of::<$t>()))
            }

            #[inline]
            fn from_bits(bits: u64) -> $t {
                // Truncation keeps the low bits, the value's own.
                bits as $t
            }

            #[inline]
            unsafe fn apply(target: *mut $t, op: Op, op1: $t, op2: $t, order: MemOrder) -> $t {
                // SAFETY: the caller's contract: `target` is valid, aligned and accessed
                // only atomically; the atomic type has the layout of the integer.
                let a = unsafe { <$atomic>::from_ptr(target) };
                let rmw = order.rmw();
                // C arithmetic on the integer types, with wrapping where C's signed
                // overflow would be undefined.
                match op {
                    Op::Set => {
                        a.store(op1, order.store());
                        order.after_store();
                        op1
                    }
                    Op::Get => a.load(order.load()),
                    Op::Swap => a.swap(op1, rmw),
                    Op::Cas | Op::FCas => match a.compare_exchange(op1, op2, rmw, order.failure()) {
                        Ok(v) | Err(v) => v,
                    },
                    Op::Add | Op::FAdd => a.fetch_add(op1, rmw),
                    Op::Sub | Op::FSub => a.fetch_sub(op1, rmw),
                    Op::Inc | Op::FInc => a.fetch_add(1, rmw),
                    Op::Dec | Op::FDec => a.fetch_sub(1, rmw),
                    Op::Min | Op::FMin => a.fetch_min(op1, rmw),
                    Op::Max | Op::FMax => a.fetch_max(op1, rmw),
                    Op::And | Op::FAnd => a.fetch_and(op1, rmw),
                    Op::Or | Op::FOr => a.fetch_or(op1, rmw),
                    Op::Xor | Op::FXor => a.fetch_xor(op1, rmw),
                    Op::Mult | Op::FMult => update(
                        |o| a.load(o),
                        |c, n, s, f| a.compare_exchange_weak(c, n, s, f),
                        |v| v.wrapping_mul(op1),
                        order,
                    ),
                    Op::User | Op::UserNc => unreachable!("checked at initiation"),
                }
            }
        }
    )*};
}

integer! {
    i32 => AtomicI32, I32;
    u32 => AtomicU32, U32;
    i64 => AtomicI64, I64;
    u64 => AtomicU64, U64;
}

macro_rules! float {
    ($($t:ty => $atomic:ty, $bits:ty, $dt:ident;)*) => {$(
        impl sealed::Sealed for $t {}

        impl AtomicType for $t {
            const DT: Dt = Dt::$dt;
            const ZERO: $t = 0.0;

            #[inline]
            fn to_bits(self) -> u64 {
                u64::from(<$t>::to_bits(self))
            }

            #[inline]
            fn from_bits(bits: u64) -> $t {
                <$t>::from_bits(bits as $bits)
            }

            #[inline]
            unsafe fn apply(target: *mut $t, op: Op, op1: $t, op2: $t, order: MemOrder) -> $t {
                // SAFETY: the caller's contract; the float and its bits have one size
                // and alignment.
                let a = unsafe { <$atomic>::from_ptr(target.cast::<$bits>()) };
                let rmw = order.rmw();
                let arith = |f: &dyn Fn($t) -> $t| {
                    <$t>::from_bits(update(
                        |o| a.load(o),
                        |c, n, s, fl| a.compare_exchange_weak(c, n, s, fl),
                        |bits| f(<$t>::from_bits(bits)).to_bits(),
                        order,
                    ))
                };
                match op {
                    Op::Set => {
                        a.store(op1.to_bits(), order.store());
                        order.after_store();
                        op1
                    }
                    Op::Get => <$t>::from_bits(a.load(order.load())),
                    Op::Swap => <$t>::from_bits(a.swap(op1.to_bits(), rmw)),
                    // As if on integers of the same width (allowed by the spec).
                    Op::Cas | Op::FCas => {
                        match a.compare_exchange(op1.to_bits(), op2.to_bits(), rmw, order.failure())
                        {
                            Ok(v) | Err(v) => <$t>::from_bits(v),
                        }
                    }
                    Op::Add | Op::FAdd => arith(&|v| v + op1),
                    Op::Sub | Op::FSub => arith(&|v| v - op1),
                    Op::Mult | Op::FMult => arith(&|v| v * op1),
                    Op::Inc | Op::FInc => arith(&|v| v + 1.0),
                    Op::Dec | Op::FDec => arith(&|v| v - 1.0),
                    // The spec's C expressions, literally.
                    Op::Min | Op::FMin => arith(&|v| if v < op1 { v } else { op1 }),
                    Op::Max | Op::FMax => arith(&|v| if v > op1 { v } else { op1 }),
                    Op::And | Op::FAnd | Op::Or | Op::FOr | Op::Xor | Op::FXor => {
                        unreachable!("bit-wise operations on floating point are refused at creation")
                    }
                    Op::User | Op::UserNc => unreachable!("checked at initiation"),
                }
            }
        }
    )*};
}

float! {
    f32 => AtomicU32, u32, Flt;
    f64 => AtomicU64, u64, Dbl;
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELAXED: MemOrder = MemOrder {
        acquire: false,
        release: false,
    };

    fn run<T: AtomicType>(start: T, op: Op, a: T, b: T) -> (T, T) {
        let mut cell = start;
        // SAFETY: a live local, accessed only here.
        let got = unsafe { T::apply(&mut cell, op, a, b, RELAXED) };
        (got, cell)
    }

    #[test]
    fn integer_operations_follow_the_c_expressions() {
        assert_eq!(run(5i32, Op::FAdd, 3, 0), (5, 8));
        assert_eq!(run(5i32, Op::FSub, 7, 0), (5, -2));
        assert_eq!(run(5i32, Op::FMult, -3, 0), (5, -15));
        assert_eq!(run(5i32, Op::FMin, -3, 0), (5, -3));
        assert_eq!(run(5u32, Op::FMax, 3, 0), (5, 5));
        assert_eq!(run(5u64, Op::FInc, 0, 0), (5, 6));
        assert_eq!(run(0u64, Op::FDec, 0, 0), (0, u64::MAX));
        assert_eq!(run(0b1100i64, Op::FAnd, 0b1010, 0), (0b1100, 0b1000));
        assert_eq!(run(0b1100i64, Op::FOr, 0b1010, 0), (0b1100, 0b1110));
        assert_eq!(run(0b1100i64, Op::FXor, 0b1010, 0), (0b1100, 0b0110));
        assert_eq!(run(9u32, Op::FCas, 9, 4), (9, 4));
        assert_eq!(run(9u32, Op::FCas, 8, 4), (9, 9));
        assert_eq!(run(9u32, Op::Swap, 1, 0), (9, 1));
        assert_eq!(run(9u32, Op::Get, 1, 0), (9, 9));
        assert_eq!(run(9u32, Op::Set, 1, 0).1, 1);
        assert_eq!(run(i32::MAX, Op::Add, 1, 0).1, i32::MIN);
    }

    #[test]
    fn float_min_max_are_the_spec_expressions_with_their_nan_and_zero_cases() {
        assert_eq!(run(1.5f64, Op::FAdd, 2.0, 0.0), (1.5, 3.5));
        assert_eq!(run(1.5f32, Op::FMult, 2.0, 0.0), (1.5, 3.0));
        assert_eq!(run(1.5f32, Op::FDec, 0.0, 0.0), (1.5, 0.5));
        // (op0 < op1) ? op0 : op1: a NaN or equal pair gives op1.
        assert!(run(f64::NAN, Op::Min, 1.0, 0.0).1 == 1.0);
        assert!(run(1.0f64, Op::Min, f64::NAN, 0.0).1.is_nan());
        assert!(run(0.0f64, Op::Min, -0.0, 0.0).1.is_sign_negative());
        assert!(run(-0.0f64, Op::Max, 0.0, 0.0).1.is_sign_positive());
        // CAS compares bits: -0.0 does not match 0.0, a NaN matches itself.
        assert_eq!(
            run(-0.0f32, Op::FCas, 0.0, 7.0).1.to_bits(),
            (-0.0f32).to_bits()
        );
        assert_eq!(run(f32::NAN, Op::FCas, f32::NAN, 7.0).1, 7.0);
    }
}

#[cfg(test)]
mod ordering_tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    const ROUNDS: u64 = 200_000;

    /// A word alone on its cache line.
    #[repr(align(128))]
    struct Line(AtomicU64);

    /// The store-buffering litmus test: in round `i` one thread sets `x` to `i + 1` and
    /// then gets `y`, the other sets `y` then gets `x`, each `SET` with `set`'s ordering
    /// and each `GET` with `get`'s. Returns the rounds in which both gets read the old
    /// value: one of the two loads went before its thread's store.
    fn store_buffering(set: MemOrder, get: MemOrder) -> usize {
        let words = [Line(AtomicU64::new(0)), Line(AtomicU64::new(0))];
        // Round `i` starts on a thread once both stored `i + 1` here: a spin barrier
        // whose release and acquire order nothing between a store and a later load.
        let arrived = [Line(AtomicU64::new(0)), Line(AtomicU64::new(0))];
        let side = |me: usize| {
            let (words, arrived) = (&words, &arrived);
            move || {
                let (mine, theirs) = (words[me].0.as_ptr(), words[1 - me].0.as_ptr());
                (0..ROUNDS)
                    .map(|i| {
                        arrived[me].0.store(i + 1, Ordering::Release);
                        while arrived[1 - me].0.load(Ordering::Acquire) <= i {
                            std::hint::spin_loop();
                        }
                        // One thread leaves the barrier before the other: a delay that
                        // varies by round and thread lines the two pairs up in some.
                        let spins = (2 * i + me as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63;
                        for _ in 0..spins {
                            std::hint::spin_loop();
                        }
                        // SAFETY: the words outlive the threads and are accessed only
                        // atomically.
                        let seen = unsafe {
                            u64::apply(mine, Op::Set, i + 1, 0, set);
                            u64::apply(theirs, Op::Get, 0, 0, get)
                        };
                        seen <= i
                    })
                    .collect::<Vec<bool>>()
            }
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(side(0));
            let b = s.spawn(side(1));
            (a.join().unwrap(), b.join().unwrap())
        });
        a.iter().zip(&b).filter(|(a, b)| **a && **b).count()
    }

    /// GASNet-EX "Remote Atomic Operations": with `GEX_FLAG_AD_ACQ`, "memory accesses
    /// by the processor, issued after the synchronization call, shall not be reordered
    /// before that call"; with `GEX_FLAG_AD_REL`, those "issued before the initiation
    /// call, shall not be reordered after that call". So a `SET` with `ACQ` keeps the
    /// thread's next load after its store, and a `GET` with `REL` keeps the thread's
    /// last store before its load: neither may read the old value in the same round as
    /// the other thread. (A store then an acquire fence, or a release fence then a load,
    /// allows it, and x86 shows it within these rounds in an optimized build: CI runs
    /// this test so. A debug build's calls leave the store buffer time to drain.)
    #[test]
    fn acquire_set_and_release_get_keep_the_store_before_the_load() {
        let acq = MemOrder {
            acquire: true,
            release: false,
        };
        let rel = MemOrder {
            acquire: false,
            release: true,
        };
        let relaxed = MemOrder {
            acquire: false,
            release: false,
        };
        assert_eq!(store_buffering(acq, relaxed), 0, "SET with AD_ACQ");
        assert_eq!(store_buffering(relaxed, rel), 0, "GET with AD_REL");
    }
}
