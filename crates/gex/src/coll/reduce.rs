//! The element-wise combination a reduction applies (GASNet-EX spec, "Collectives Part
//! III. Computational": "User-Defined Reduction Operations", "Common Semantics").
//!
//! A [`Reduction`] is the validated `(dt, dt_sz, op, user_op, user_cdata)` of one
//! `gex_Coll_ReduceTo*NB` call. Whatever the algorithm, every step of a reduction is one
//! [`Reduction::combine`]: `y[i] = x[i] (+) y[i]` over two vectors, the result written
//! into the right-hand operand, the form the spec gives user functions
//! ([`ReduceFn`]). Keeping the left/right order in this one place is what lets a
//! non-commutative operation (`GEX_OP_USER_NC`) combine in rank order.
//!
//! Built-in types are read with `from_ne_bytes`, so the buffers need no alignment (they
//! may be anywhere in a segment or a message). Each (type, operation) pair is its own
//! monomorphic loop without branches, which the compiler vectorizes. The expressions are
//! the spec's C expressions:
//! * Integer `GEX_OP_ADD` and `GEX_OP_MULT` wrap on overflow, signed types included
//!   (C leaves signed overflow undefined; two's-complement wrapping is the defined
//!   choice, and the one that keeps the result independent of the combining order).
//! * `GEX_OP_MIN` is `(op0 < op1) ? op0 : op1` and `GEX_OP_MAX` `(op0 > op1) ? op0 : op1`,
//!   exactly, with `op0` the left operand. A comparison with a NaN is false, so a NaN on
//!   the left yields the right operand and a NaN on the right yields the NaN; of `-0.0`
//!   and `+0.0`, which compare equal, the right one is kept.
//! * Floating-point `GEX_OP_ADD` and `GEX_OP_MULT` are IEEE 754 operations in the type's
//!   precision, evaluated in the order the caller combines in.

use std::ops::{BitAnd, BitOr, BitXor};

use crate::ops::{Dt, Op};

/// A user-defined reduction operation (GASNet-EX `gex_Coll_ReduceFn_t`).
///
/// `left` and `right_and_out` each hold `count` consecutive elements of the reduction's
/// element size. The function must, for every `i` in `0..count`, compute
/// `y[i] = x[i] (+) y[i]` with `x` the elements of `left` and `y` those of
/// `right_and_out`, writing the result over the right-hand operand. `cdata` is the
/// `user_cdata` word passed at initiation. `count` is positive but unrelated to the
/// `dt_cnt` of the call: vectors may be split or concatenated. The function must not
/// block on progress, and may be called concurrently with itself.
pub type ReduceFn = fn(left: &[u8], right_and_out: &mut [u8], count: usize, cdata: usize);

/// The validated operation of one reduction: data type, element size, operation and,
/// for `GEX_OP_USER` and `GEX_OP_USER_NC`, the user function with its client data.
#[derive(Debug, Clone, Copy)]
pub struct Reduction {
    dt: Dt,
    dt_size: usize,
    op: Op,
    user: Option<(ReduceFn, usize)>,
}

impl Reduction {
    /// Validates the arguments `dt`, `dt_sz`, `op`, `user_op` and `user_cdata` of the
    /// reduction `call` (the spec's argument descriptions of the computational
    /// collectives). `user` is ignored unless `op` is user-defined, as the spec says.
    ///
    /// # Panics
    ///
    /// With a message naming `call` and the rule broken: when `op` is not valid for
    /// reductions with `dt` ([`Op::valid_for_reduction`]), when `dt_size` is not the size
    /// of the built-in type (or is zero for `GEX_DT_USER`), or when a user-defined `op`
    /// comes without a function.
    pub fn new(
        call: &str,
        dt: Dt,
        dt_size: usize,
        op: Op,
        user: Option<(ReduceFn, usize)>,
    ) -> Reduction {
        let (dt_name, op_name) = (dt.name(), op.name());
        if !op.valid_for_reduction(Dt::User) && !op.valid_for_reduction(Dt::I32) {
            panic!("{call}: {op_name} is not a reduction operation (it is valid only for atomics)");
        }
        if dt == Dt::User && !op.is_user() {
            panic!("{call}: {dt_name} needs GEX_OP_USER or GEX_OP_USER_NC, not {op_name}");
        }
        if !op.valid_for_reduction(dt) {
            panic!("{call}: {op_name} is not valid for {dt_name}");
        }
        match dt.size() {
            Some(size) if size != dt_size => {
                panic!("{call}: dt_sz must be {size} for {dt_name}, not {dt_size}")
            }
            None if dt_size == 0 => panic!("{call}: dt_sz must be non-zero for {dt_name}"),
            _ => {}
        }
        let user = if op.is_user() {
            if user.is_none() {
                panic!("{call}: {op_name} needs a user function (user_op)");
            }
            user
        } else {
            None
        };
        Reduction {
            dt,
            dt_size,
            op,
            user,
        }
    }

    /// The data type (`dt`).
    pub fn dt(&self) -> Dt {
        self.dt
    }

    /// The size in bytes of one element (`dt_sz`).
    pub fn dt_size(&self) -> usize {
        self.dt_size
    }

    /// The operation (`op`).
    pub fn op(&self) -> Op {
        self.op
    }

    /// The user function and its client data, for `GEX_OP_USER` and `GEX_OP_USER_NC`.
    pub fn user(&self) -> Option<(ReduceFn, usize)> {
        self.user
    }

    /// Whether operands may be combined in any order: false only for `GEX_OP_USER_NC`,
    /// which must combine in rank order (spec, "Common Semantics").
    pub fn commutative(&self) -> bool {
        self.op.is_commutative()
    }

    /// Combines two vectors element-wise, `right[i] = left[i] (+) right[i]` for every
    /// element (the `y[i] = x[i] (+) y[i]` of `gex_Coll_ReduceFn_t`); `left` holds the
    /// operands of lower rank in a non-commutative reduction. A user function is called
    /// once with the whole vector, and not at all for an empty one (its `count` must be
    /// positive).
    ///
    /// # Panics
    ///
    /// When the buffers differ in length or their length is not a multiple of the
    /// element size.
    pub fn combine(&self, left: &[u8], right_and_out: &mut [u8]) {
        assert!(
            left.len() == right_and_out.len() && left.len().is_multiple_of(self.dt_size),
            "gex::Reduction::combine: operands of {} and {} bytes for elements of {} bytes",
            left.len(),
            right_and_out.len(),
            self.dt_size
        );
        if let Some((user_op, cdata)) = self.user {
            let count = left.len() / self.dt_size;
            if count > 0 {
                user_op(left, right_and_out, count, cdata);
            }
            return;
        }
        let (l, r) = (left, right_and_out);
        match self.dt {
            Dt::I32 => integer::<i32>(self.op, l, r),
            Dt::U32 => integer::<u32>(self.op, l, r),
            Dt::I64 => integer::<i64>(self.op, l, r),
            Dt::U64 => integer::<u64>(self.op, l, r),
            Dt::Flt => arithmetic::<f32>(self.op, l, r),
            Dt::Dbl => arithmetic::<f64>(self.op, l, r),
            Dt::User => unreachable!("GEX_DT_USER always has a user function"),
        }
    }
}

/// A built-in element type: its bytes, and its `+` and `*` as the spec defines them.
trait Element: Copy + PartialOrd {
    const SIZE: usize;
    fn load(bytes: &[u8]) -> Self;
    fn store(self, bytes: &mut [u8]);
    fn add(self, other: Self) -> Self;
    fn mult(self, other: Self) -> Self;
}

/// A built-in integer type, on which the bit-wise operations are valid too.
trait Integer: Element + BitAnd<Output = Self> + BitOr<Output = Self> + BitXor<Output = Self> {}

macro_rules! element {
    ($($t:ty: $add:ident, $mult:ident;)*) => {$(
        impl Element for $t {
            const SIZE: usize = size_of::<$t>();
            #[inline(always)]
            fn load(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("chunks of the element size"))
            }
            #[inline(always)]
            fn store(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_ne_bytes());
            }
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                element!(@op self, other, $add, +)
            }
            #[inline(always)]
            fn mult(self, other: Self) -> Self {
                element!(@op self, other, $mult, *)
            }
        }
    )*};
    (@op $a:ident, $b:ident, ieee, $sym:tt) => { $a $sym $b };
    (@op $a:ident, $b:ident, $method:ident, $sym:tt) => { $a.$method($b) };
}

element! {
    i32: wrapping_add, wrapping_mul;
    u32: wrapping_add, wrapping_mul;
    i64: wrapping_add, wrapping_mul;
    u64: wrapping_add, wrapping_mul;
    f32: ieee, ieee;
    f64: ieee, ieee;
}

impl Integer for i32 {}
impl Integer for u32 {}
impl Integer for i64 {}
impl Integer for u64 {}

/// `right[i] = f(left[i], right[i])` over the elements of two equal-length buffers.
#[inline(always)]
fn zip_with<T: Element>(left: &[u8], right: &mut [u8], f: impl Fn(T, T) -> T) {
    for (l, r) in left
        .chunks_exact(T::SIZE)
        .zip(right.chunks_exact_mut(T::SIZE))
    {
        f(T::load(l), T::load(r)).store(r);
    }
}

/// The operations valid for every built-in type.
fn arithmetic<T: Element>(op: Op, left: &[u8], right: &mut [u8]) {
    match op {
        Op::Add => zip_with(left, right, T::add),
        Op::Mult => zip_with(left, right, T::mult),
        Op::Min => zip_with(left, right, |a: T, b: T| if a < b { a } else { b }),
        Op::Max => zip_with(left, right, |a: T, b: T| if a > b { a } else { b }),
        _ => unreachable!("{} was validated as a built-in reduction", op.name()),
    }
}

/// The operations valid for the integer types.
fn integer<T: Integer>(op: Op, left: &[u8], right: &mut [u8]) {
    match op {
        Op::And => zip_with(left, right, |a: T, b: T| a & b),
        Op::Or => zip_with(left, right, |a: T, b: T| a | b),
        Op::Xor => zip_with(left, right, |a: T, b: T| a ^ b),
        _ => arithmetic::<T>(op, left, right),
    }
}

#[cfg(test)]
mod tests {
    use std::panic::catch_unwind;

    use super::*;

    const CALL: &str = "gex::Team::reduce_to_all_nb";
    const COUNT: usize = 37;

    /// Deterministic test values: the type's edge cases, then a pseudo-random sequence.
    fn bits(seed: u64) -> impl Iterator<Item = u64> {
        let mut x = seed;
        std::iter::repeat_with(move || {
            x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
            x
        })
    }

    fn encode<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| to(v)).collect()
    }

    /// Checks `combine` for every valid built-in op on one type against the reference
    /// `reference(op, left, right)`, computed on typed values.
    macro_rules! check_type {
        ($t:ty, $dt:expr, $edges:expr, $from_bits:expr, $reference:expr) => {{
            let edges: Vec<$t> = $edges;
            let gen = |seed| -> Vec<$t> {
                edges
                    .iter()
                    .copied()
                    .chain(bits(seed).map($from_bits))
                    .take(COUNT)
                    .collect()
            };
            let (left, right) = (gen(1), gen(2));
            // Every pairing of edge cases, too.
            let left: Vec<$t> = left
                .into_iter()
                .chain(edges.iter().flat_map(|&e| edges.iter().map(move |_| e)))
                .collect();
            let right: Vec<$t> = right
                .into_iter()
                .chain(edges.iter().flat_map(|_| edges.iter().copied()))
                .collect();
            let mut checked = 0;
            for op in Op::ALL
                .into_iter()
                .filter(|op| !op.is_user() && op.valid_for_reduction($dt))
            {
                let reduction = Reduction::new(CALL, $dt, size_of::<$t>(), op, None);
                let mut out = encode(&right, <$t>::to_ne_bytes);
                reduction.combine(&encode(&left, <$t>::to_ne_bytes), &mut out);
                for (i, chunk) in out.chunks_exact(size_of::<$t>()).enumerate() {
                    let got = <$t>::from_ne_bytes(chunk.try_into().unwrap());
                    let want: $t = $reference(op, left[i], right[i]);
                    // Equal, or both NaN (whose payload is not specified).
                    assert!(
                        format!("{got:?}") == format!("{want:?}"),
                        "{op:?} {:?}: {:?} (+) {:?} = {got:?}, want {want:?}",
                        $dt,
                        left[i],
                        right[i]
                    );
                }
                checked += 1;
            }
            checked
        }};
    }

    macro_rules! int_reference {
        ($t:ty) => {
            |op: Op, l: $t, r: $t| -> $t {
                match op {
                    Op::Add => l.wrapping_add(r),
                    Op::Mult => l.wrapping_mul(r),
                    Op::Min => std::cmp::min(l, r),
                    Op::Max => std::cmp::max(l, r),
                    Op::And => l & r,
                    Op::Or => l | r,
                    Op::Xor => l ^ r,
                    _ => unreachable!(),
                }
            }
        };
    }

    macro_rules! float_reference {
        ($t:ty) => {
            |op: Op, l: $t, r: $t| -> $t {
                match op {
                    Op::Add => l + r,
                    Op::Mult => l * r,
                    // The C expressions, on the total order where neither is NaN.
                    Op::Min if l.is_nan() || r.is_nan() => r,
                    Op::Max if l.is_nan() || r.is_nan() => r,
                    Op::Min => match l.partial_cmp(&r).unwrap() {
                        std::cmp::Ordering::Less => l,
                        _ => r,
                    },
                    Op::Max => match l.partial_cmp(&r).unwrap() {
                        std::cmp::Ordering::Greater => l,
                        _ => r,
                    },
                    _ => unreachable!(),
                }
            }
        };
    }

    #[test]
    fn every_valid_builtin_pair_matches_an_independent_reference() {
        let mut checked = 0;
        checked += check_type! {
            i32, Dt::I32, vec![0, 1, -1, i32::MAX, i32::MIN, 3],
            |x| x as i32, int_reference!(i32)
        };
        checked += check_type! {
            u32, Dt::U32, vec![0, 1, u32::MAX, u32::MAX / 2 + 1, 3],
            |x| x as u32, int_reference!(u32)
        };
        checked += check_type! {
            i64, Dt::I64, vec![0, 1, -1, i64::MAX, i64::MIN, 3],
            |x| x as i64, int_reference!(i64)
        };
        checked += check_type! {
            u64, Dt::U64, vec![0, 1, u64::MAX, u64::MAX / 2 + 1, 3],
            |x| x, int_reference!(u64)
        };
        checked += check_type! {
            f32, Dt::Flt, vec![0.0, -0.0, 1.5, f32::NAN, f32::INFINITY, f32::NEG_INFINITY,
                f32::MIN_POSITIVE, f32::MAX],
            |x| (x as i32) as f32 / 1024.0, float_reference!(f32)
        };
        checked += check_type! {
            f64, Dt::Dbl, vec![0.0, -0.0, 1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY,
                f64::MIN_POSITIVE, f64::MAX],
            |x| (x as i64) as f64 / 3.0, float_reference!(f64)
        };
        // ADD, MULT, MIN, MAX on six types, AND, OR, XOR on four.
        assert_eq!(checked, 4 * 6 + 3 * 4);
    }

    #[test]
    fn every_invalid_pair_panics_naming_the_call() {
        let user: Option<(ReduceFn, usize)> = Some((|_, _, _, _| {}, 0));
        for dt in Dt::ALL {
            for op in Op::ALL.into_iter().filter(|op| !op.valid_for_reduction(dt)) {
                let size = dt.size().unwrap_or(8);
                let err = catch_unwind(|| Reduction::new(CALL, dt, size, op, user)).unwrap_err();
                let msg = err.downcast_ref::<String>().expect("a formatted message");
                assert!(msg.starts_with(CALL) && msg.contains(op.name()), "{msg}");
            }
        }
    }

    #[test]
    #[should_panic(
        expected = "gex::Team::reduce_to_all_nb: GEX_OP_AND is not valid for GEX_DT_FLT"
    )]
    fn bitwise_op_on_float_panics() {
        Reduction::new(CALL, Dt::Flt, 4, Op::And, None);
    }

    #[test]
    #[should_panic(
        expected = "gex::Team::reduce_to_one_nb: GEX_OP_FADD is not a reduction operation"
    )]
    fn atomic_only_op_panics() {
        Reduction::new("gex::Team::reduce_to_one_nb", Dt::I64, 8, Op::FAdd, None);
    }

    #[test]
    #[should_panic(
        expected = "gex::Team::reduce_to_all_nb: GEX_DT_USER needs GEX_OP_USER or GEX_OP_USER_NC, not GEX_OP_ADD"
    )]
    fn user_type_with_builtin_op_panics() {
        Reduction::new(CALL, Dt::User, 16, Op::Add, None);
    }

    #[test]
    #[should_panic(expected = "gex::Team::reduce_to_all_nb: dt_sz must be 8 for GEX_DT_DBL, not 4")]
    fn wrong_builtin_size_panics() {
        Reduction::new(CALL, Dt::Dbl, 4, Op::Add, None);
    }

    #[test]
    #[should_panic(
        expected = "gex::Team::reduce_to_all_nb: dt_sz must be non-zero for GEX_DT_USER"
    )]
    fn zero_user_size_panics() {
        Reduction::new(CALL, Dt::User, 0, Op::User, Some((|_, _, _, _| {}, 0)));
    }

    #[test]
    #[should_panic(expected = "gex::Team::reduce_to_all_nb: GEX_OP_USER_NC needs a user function")]
    fn user_op_without_function_panics() {
        Reduction::new(CALL, Dt::I32, 4, Op::UserNc, None);
    }

    #[test]
    #[should_panic(expected = "gex::Reduction::combine: operands of 8 and 12 bytes")]
    fn operands_of_different_lengths_panic() {
        Reduction::new(CALL, Dt::I32, 4, Op::Add, None).combine(&[0; 8], &mut [0; 12]);
    }

    #[test]
    fn user_function_is_ignored_for_builtin_ops() {
        let r = Reduction::new(CALL, Dt::U32, 4, Op::Xor, Some((|_, _, _, _| panic!(), 0)));
        assert!(r.user().is_none());
        let mut out = 0b1100u32.to_ne_bytes();
        r.combine(&0b1010u32.to_ne_bytes(), &mut out);
        assert_eq!(u32::from_ne_bytes(out), 0b0110);
    }

    #[test]
    fn unaligned_buffers_are_combined() {
        let values: Vec<f64> = (0..COUNT).map(|i| i as f64 * 0.25).collect();
        let bytes = encode(&values, f64::to_ne_bytes);
        for offset in 1..8 {
            let mut left = vec![0u8; bytes.len() + offset];
            let mut right = left.clone();
            left[offset..].copy_from_slice(&bytes);
            right[offset..].copy_from_slice(&bytes);
            let r = Reduction::new(CALL, Dt::Dbl, 8, Op::Add, None);
            r.combine(&left[offset..], &mut right[offset..]);
            for (i, chunk) in right[offset..].chunks_exact(8).enumerate() {
                assert_eq!(
                    f64::from_ne_bytes(chunk.try_into().unwrap()),
                    values[i] * 2.0
                );
            }
        }
    }

    #[test]
    fn min_and_max_follow_the_c_expression_with_nan_and_signed_zero() {
        let combine = |op, l: f64, r: f64| {
            let mut out = r.to_ne_bytes();
            Reduction::new(CALL, Dt::Dbl, 8, op, None).combine(&l.to_ne_bytes(), &mut out);
            f64::from_ne_bytes(out)
        };
        // (op0 < op1) ? op0 : op1 is false with a NaN on either side: the right wins.
        assert_eq!(combine(Op::Min, f64::NAN, 1.0), 1.0);
        assert!(combine(Op::Min, 1.0, f64::NAN).is_nan());
        assert_eq!(combine(Op::Max, f64::NAN, 1.0), 1.0);
        assert!(combine(Op::Max, 1.0, f64::NAN).is_nan());
        // -0.0 and +0.0 compare equal: the right one is kept.
        assert!(combine(Op::Min, -0.0, 0.0).is_sign_positive());
        assert!(combine(Op::Min, 0.0, -0.0).is_sign_negative());
        assert!(combine(Op::Max, 0.0, -0.0).is_sign_negative());
        assert_eq!(combine(Op::Min, -2.0, 1.0), -2.0);
        assert_eq!(combine(Op::Max, -2.0, 1.0), 1.0);
    }

    #[test]
    fn integer_add_and_mult_wrap() {
        let combine_i32 = |op, l: i32, r: i32| {
            let mut out = r.to_ne_bytes();
            Reduction::new(CALL, Dt::I32, 4, op, None).combine(&l.to_ne_bytes(), &mut out);
            i32::from_ne_bytes(out)
        };
        assert_eq!(combine_i32(Op::Add, i32::MAX, 1), i32::MIN);
        assert_eq!(combine_i32(Op::Mult, i32::MIN, -1), i32::MIN);
        let mut out = 2u64.to_ne_bytes();
        Reduction::new(CALL, Dt::U64, 8, Op::Mult, None).combine(&u64::MAX.to_ne_bytes(), &mut out);
        assert_eq!(u64::from_ne_bytes(out), u64::MAX - 1);
    }

    /// A permutation of {0, 1, 2} as a 12-byte user element: three `u32` images.
    /// `x (+) y` is "apply `y`, then `x`" (`(x (+) y)[i] = x[y[i]]`): associative, not
    /// commutative.
    fn compose(left: &[u8], right_and_out: &mut [u8], count: usize, cdata: usize) {
        assert_eq!(cdata, 0xc0ffee, "the client data of the call");
        assert_eq!(left.len(), count * 12);
        for (x, y) in left
            .chunks_exact(12)
            .zip(right_and_out.chunks_exact_mut(12))
        {
            let get =
                |b: &[u8], i: usize| u32::from_ne_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
            let out: Vec<u8> = (0..3)
                .flat_map(|i| get(x, get(y, i) as usize).to_ne_bytes())
                .collect();
            y.copy_from_slice(&out);
        }
    }

    fn perm(p: [u32; 3]) -> Vec<u8> {
        encode(&p, u32::to_ne_bytes)
    }

    #[test]
    fn non_commutative_user_op_keeps_left_and_right() {
        let r = Reduction::new(CALL, Dt::User, 12, Op::UserNc, Some((compose, 0xc0ffee)));
        assert!(!r.commutative());
        let (swap01, rotate) = (perm([1, 0, 2]), perm([1, 2, 0]));
        // Two elements: swap01 (+) rotate, and rotate (+) swap01.
        let left = [swap01.clone(), rotate.clone()].concat();
        let mut out = [rotate.clone(), swap01.clone()].concat();
        r.combine(&left, &mut out);
        assert_eq!(out[..12], perm([0, 2, 1])[..], "swap01[rotate[i]]");
        assert_eq!(out[12..], perm([2, 1, 0])[..], "rotate[swap01[i]]");
        // A reduction over "ranks" 0..3 in rank order, folded from the right.
        let ranks = [perm([1, 0, 2]), perm([0, 2, 1]), perm([2, 1, 0])];
        let mut acc = ranks[2].clone();
        r.combine(&ranks[1], &mut acc);
        r.combine(&ranks[0], &mut acc);
        // p0[p1[p2[i]]]: i=0 -> 2 -> 1 -> 0; i=1 -> 1 -> 2 -> 2; i=2 -> 0 -> 0 -> 1.
        assert_eq!(acc, perm([0, 2, 1]));
    }

    #[test]
    fn user_op_on_builtin_type_gets_count_and_cdata() {
        fn sum_mod(left: &[u8], right_and_out: &mut [u8], count: usize, modulus: usize) {
            assert_eq!(right_and_out.len(), count * 8);
            for (x, y) in left.chunks_exact(8).zip(right_and_out.chunks_exact_mut(8)) {
                let s = (u64::from_ne_bytes(x.try_into().unwrap())
                    + u64::from_ne_bytes(y.try_into().unwrap()))
                    % modulus as u64;
                y.copy_from_slice(&s.to_ne_bytes());
            }
        }
        let r = Reduction::new(CALL, Dt::U64, 8, Op::User, Some((sum_mod, 7)));
        assert!(r.commutative());
        let mut out = encode(&[5u64, 6, 0], u64::to_ne_bytes);
        r.combine(&encode(&[4u64, 6, 3], u64::to_ne_bytes), &mut out);
        assert_eq!(out, encode(&[2u64, 5, 3], u64::to_ne_bytes));
    }

    #[test]
    fn empty_vectors_do_not_call_the_user_function() {
        let r = Reduction::new(
            CALL,
            Dt::User,
            12,
            Op::User,
            Some((|_, _, _, _| panic!("called"), 0)),
        );
        r.combine(&[], &mut []);
        Reduction::new(CALL, Dt::I32, 4, Op::Add, None).combine(&[], &mut []);
    }

    #[test]
    fn accessors_return_the_validated_arguments() {
        let r = Reduction::new(CALL, Dt::User, 24, Op::UserNc, Some((compose, 3)));
        assert_eq!((r.dt(), r.dt_size(), r.op()), (Dt::User, 24, Op::UserNc));
        assert_eq!(r.user().map(|(_, cdata)| cdata), Some(3));
    }
}
