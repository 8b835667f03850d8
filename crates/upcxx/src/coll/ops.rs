//! The operations of reductions (UPC++ spec §12.2 ¶17–¶22): the `op_fast_*` function
//! objects and any closure, and how each becomes a `gex` reduction.
//!
//! * An `op_fast_*` on one of `gex`'s built-in types (`i32`, `u32`, `i64`, `u64`, `f32`,
//!   `f64`) is the built-in operation (`GEX_OP_ADD` ..): no user code runs.
//! * On the other arithmetic types, and for any closure, the reduction is `gex`'s
//!   user-defined one over elements of `size_of::<T>()` bytes, with a trampoline
//!   monomorphized for the element type and the operation. The operation itself
//!   travels as the client-data word: the address of the boxed operation, which the
//!   collective keeps until it completes (so closures may capture).
//! * A closure reduces with `GEX_OP_USER_NC`: `gex` then combines in rank order, so an
//!   operation that is associative but not commutative gives the rank-ordered result,
//!   the same bytes on every rank. The spec asks only for commutative operations
//!   (§12.2 ¶25); this is a guarantee of this implementation.
//!
//! Integer `op_fast_add` and `op_fast_mul` wrap on overflow, as `gex`'s built-in
//! operations do (the defined choice for what C leaves undefined).

use bytemuck::{CheckedBitPattern, NoUninit};
use gex::coll::ReduceFn;
use gex::ops::{Dt, Op};

/// How `gex` reduces with an operation: a built-in `(dt, op)`, or the user-defined
/// reduction with a trampoline.
#[derive(Debug, Clone, Copy)]
pub(super) enum Lowered {
    Builtin(Dt, Op),
    User(Op, ReduceFn),
}

/// An operation of [`reduce_one`](crate::reduce_one) and [`reduce_all`](crate::reduce_all)
/// over `T` (the spec's `BinaryOp`, §12.2 ¶25): the `op_fast_*` objects, and any
/// `Fn(T, T) -> T + Sync` closure or function (associative; it may not call UPC++).
///
/// A type of your own implements `apply`; how the reduction runs it is this crate's
/// choice, which no implementation outside it can override (claiming another
/// operation's built-in reduction would hand that reduction this one's value):
///
/// ```compile_fail,E0050
/// use upcxx::{op_fast_add, ReduceOp};
/// struct Claims;
/// impl ReduceOp<bool> for Claims {
///     fn apply(&self, left: bool, _: bool) -> bool {
///         left
///     }
///     fn lowered(&self) -> upcxx::coll::LoweredOp {
///         ReduceOp::<u8>::lowered(&op_fast_add)
///     }
/// }
/// ```
pub trait ReduceOp<T: NoUninit + CheckedBitPattern>: Sync + Sized + 'static {
    /// Combines two values: `left` comes from lower ranks than `right`.
    fn apply(&self, left: T, right: T) -> T;

    /// How `gex` reduces with this operation. Only this crate can name the token, so
    /// only its operations choose their lowering: the reduction passes the operation's
    /// own address to the trampoline the lowering names, which must be its own.
    #[doc(hidden)]
    fn lowered(&self, _: sealed::Token) -> LoweredOp {
        LoweredOp(Lowered::User(Op::UserNc, trampoline::<T, Self>))
    }
}

pub(super) mod sealed {
    /// The argument of [`ReduceOp::lowered`](super::ReduceOp::lowered), which code
    /// outside this crate cannot name, and so cannot override the method with.
    #[derive(Debug, Clone, Copy)]
    pub struct Token(pub(in crate::coll) ());
}

/// How `gex` reduces with an operation (opaque).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct LoweredOp(pub(super) Lowered);

impl<T: NoUninit + CheckedBitPattern, F: Fn(T, T) -> T + Sync + 'static> ReduceOp<T> for F {
    #[inline]
    fn apply(&self, left: T, right: T) -> T {
        self(left, right)
    }
}

/// `gex`'s user-defined reduction function for operation `O` over `T`: `right[i] =
/// left[i] (+) right[i]` for `count` elements, `cdata` the address of the `O`. The
/// operands are checked as they become values (free for any type whose every bit
/// pattern is one): bytes that make no `T` fail the reduction.
fn trampoline<T: NoUninit + CheckedBitPattern, O: ReduceOp<T>>(
    left: &[u8],
    right: &mut [u8],
    count: usize,
    cdata: usize,
) {
    // SAFETY: `cdata` is the address of the boxed `O` of a collective in flight
    // (`super::Reduction`), which keeps the box until the reduction completes, after
    // which `gex` calls no more; `O: Sync`, so a shared reference from any thread is fine.
    let op = unsafe { &*(cdata as *const O) };
    let size = std::mem::size_of::<T>();
    let left = left[..count * size].chunks_exact(size);
    let right = right[..count * size].chunks_exact_mut(size);
    for (l, r) in left.zip(right) {
        let v = op.apply(operand(l), operand(r));
        r.copy_from_slice(bytemuck::bytes_of(&v));
    }
}

/// The operand whose bytes are `bytes`, or a panic naming the type if they make none.
fn operand<T: NoUninit + CheckedBitPattern>(bytes: &[u8]) -> T {
    bytemuck::checked::try_pod_read_unaligned(bytes).unwrap_or_else(|_| {
        panic!(
            "upcxx reduction: an operand's bytes are not a valid `{}` (only unsafe code \
             can have made such a value)",
            std::any::type_name::<T>()
        )
    })
}

macro_rules! fast_op {
    ($($(#[$m:meta])* $name:ident, $ty:ident, $gex:ident;)*) => {$(
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $ty;

        $(#[$m])*
        #[allow(non_upper_case_globals)]
        pub const $name: $ty = $ty;

        impl $ty {
            const OP: Op = Op::$gex;
        }
    )*};
}

fast_op! {
    /// Binary `+` (UPC++ `op_fast_add`, §12.2 ¶17); arithmetic types, and `bool` as
    /// `|` (¶22).
    op_fast_add, OpFastAdd, Add;
    /// Binary `*` (UPC++ `op_fast_mul`); arithmetic types, and `bool` as `&`.
    op_fast_mul, OpFastMul, Mult;
    /// `std::min` (UPC++ `op_fast_min`); arithmetic types, and `bool` as `&`.
    op_fast_min, OpFastMin, Min;
    /// `std::max` (UPC++ `op_fast_max`); arithmetic types, and `bool` as `|`.
    op_fast_max, OpFastMax, Max;
    /// Binary `&` (UPC++ `op_fast_bit_and`); integer types and `bool`.
    op_fast_bit_and, OpFastBitAnd, And;
    /// Binary `|` (UPC++ `op_fast_bit_or`); integer types and `bool`.
    op_fast_bit_or, OpFastBitOr, Or;
    /// Binary `^` (UPC++ `op_fast_bit_xor`); integer types and `bool`.
    op_fast_bit_xor, OpFastBitXor, Xor;
}

/// `op_fast_*` over a `gex` built-in type: the built-in operation.
macro_rules! builtin {
    ($op:ty: $($t:ident => $dt:ident),*; $apply:expr) => {$(
        impl ReduceOp<$t> for $op {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t {
                let f: fn($t, $t) -> $t = $apply;
                f(a, b)
            }
            fn lowered(&self, _: sealed::Token) -> LoweredOp {
                LoweredOp(Lowered::Builtin(Dt::$dt, <$op>::OP))
            }
        }
    )*};
}

/// `op_fast_*` over another type: the user-defined reduction, commutative.
macro_rules! emulated {
    ($op:ty: $($t:ident),*; $apply:expr) => {$(
        impl ReduceOp<$t> for $op {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t {
                let f: fn($t, $t) -> $t = $apply;
                f(a, b)
            }
            fn lowered(&self, _: sealed::Token) -> LoweredOp {
                LoweredOp(Lowered::User(Op::User, trampoline::<$t, Self>))
            }
        }
    )*};
}

builtin!(OpFastAdd: i32 => I32, u32 => U32, i64 => I64, u64 => U64; |a, b| a.wrapping_add(b));
builtin!(OpFastAdd: f32 => Flt, f64 => Dbl; |a, b| a + b);
builtin!(OpFastMul: i32 => I32, u32 => U32, i64 => I64, u64 => U64; |a, b| a.wrapping_mul(b));
builtin!(OpFastMul: f32 => Flt, f64 => Dbl; |a, b| a * b);
builtin!(OpFastMin: i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => Flt, f64 => Dbl;
    |a, b| if b < a { b } else { a });
builtin!(OpFastMax: i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => Flt, f64 => Dbl;
    |a, b| if a < b { b } else { a });
builtin!(OpFastBitAnd: i32 => I32, u32 => U32, i64 => I64, u64 => U64; |a, b| a & b);
builtin!(OpFastBitOr: i32 => I32, u32 => U32, i64 => I64, u64 => U64; |a, b| a | b);
builtin!(OpFastBitXor: i32 => I32, u32 => U32, i64 => I64, u64 => U64; |a, b| a ^ b);

emulated!(OpFastAdd: i8, i16, i128, isize, u8, u16, u128, usize; |a, b| a.wrapping_add(b));
emulated!(OpFastMul: i8, i16, i128, isize, u8, u16, u128, usize; |a, b| a.wrapping_mul(b));
emulated!(OpFastMin: i8, i16, i128, isize, u8, u16, u128, usize; |a, b| if b < a { b } else { a });
emulated!(OpFastMax: i8, i16, i128, isize, u8, u16, u128, usize; |a, b| if a < b { b } else { a });
emulated!(OpFastBitAnd: i8, i16, i128, isize, u8, u16, u128, usize; |a, b| a & b);
emulated!(OpFastBitOr: i8, i16, i128, isize, u8, u16, u128, usize; |a, b| a | b);
emulated!(OpFastBitXor: i8, i16, i128, isize, u8, u16, u128, usize; |a, b| a ^ b);
emulated!(OpFastBitAnd: bool; |a, b| a & b);
emulated!(OpFastBitOr: bool; |a, b| a | b);
emulated!(OpFastBitXor: bool; |a, b| a ^ b);
// §12.2 ¶22: over `bool`, add and max are `bit_or`, mul and min are `bit_and`.
emulated!(OpFastAdd: bool; |a, b| a | b);
emulated!(OpFastMax: bool; |a, b| a | b);
emulated!(OpFastMul: bool; |a, b| a & b);
emulated!(OpFastMin: bool; |a, b| a & b);
