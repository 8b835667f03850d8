//! Data types and operation codes of atomics and reductions (GASNet-EX spec, "Data types
//! for atomics and reductions", "Operation codes (opcodes) for atomics and reductions").
//!
//! [`Dt`] names the element type and [`Op`] the operation; remote atomics and the
//! computational collectives take one of each. The validity rules of the spec's table
//! live here, next to the codes, so that every operation checks its arguments the same
//! way: [`Op::valid_for_reduction`] and [`Op::valid_for_atomic`].
//!
//! As in the spec, every code is a distinct bit ([`Dt::bit`], [`Op::bit`]), so sets of
//! codes (the operations an atomic domain supports, an [`OpSet`]) combine with bit-wise
//! OR without loss.

/// A data type of atomics and reductions (GASNet-EX `gex_DT_t`).
///
/// The six built-in types are the exact-width C types of the spec's table;
/// [`Dt::User`] is an opaque user-defined element of a size given at initiation.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dt {
    /// GASNet-EX `GEX_DT_I32`: `int32_t`.
    I32 = 1 << 0,
    /// GASNet-EX `GEX_DT_U32`: `uint32_t`.
    U32 = 1 << 1,
    /// GASNet-EX `GEX_DT_I64`: `int64_t`.
    I64 = 1 << 2,
    /// GASNet-EX `GEX_DT_U64`: `uint64_t`.
    U64 = 1 << 3,
    /// GASNet-EX `GEX_DT_FLT`: `float`.
    Flt = 1 << 4,
    /// GASNet-EX `GEX_DT_DBL`: `double`.
    Dbl = 1 << 5,
    /// GASNet-EX `GEX_DT_USER`: an opaque user-defined type, valid only for reductions
    /// with [`Op::User`] or [`Op::UserNc`]; its elements are indivisible byte sequences.
    User = 1 << 6,
}

impl Dt {
    /// Every data type, built-in ones first.
    pub const ALL: [Dt; 7] = [
        Dt::I32,
        Dt::U32,
        Dt::I64,
        Dt::U64,
        Dt::Flt,
        Dt::Dbl,
        Dt::User,
    ];

    /// The size in bytes of one element of a built-in type (the `dt_sz` a reduction
    /// must pass); `None` for [`Dt::User`], whose size the caller gives.
    pub const fn size(self) -> Option<usize> {
        match self {
            Dt::I32 | Dt::U32 | Dt::Flt => Some(4),
            Dt::I64 | Dt::U64 | Dt::Dbl => Some(8),
            Dt::User => None,
        }
    }

    /// Whether this is one of the spec's "Integer types" (`I32`, `U32`, `I64`, `U64`),
    /// the only types the bit-wise operations are valid for.
    pub const fn is_integer(self) -> bool {
        matches!(self, Dt::I32 | Dt::U32 | Dt::I64 | Dt::U64)
    }

    /// Whether this is a built-in type (every type but [`Dt::User`]).
    pub const fn is_builtin(self) -> bool {
        !matches!(self, Dt::User)
    }

    /// The spec's name of the constant, e.g. `"GEX_DT_I32"`.
    pub const fn name(self) -> &'static str {
        match self {
            Dt::I32 => "GEX_DT_I32",
            Dt::U32 => "GEX_DT_U32",
            Dt::I64 => "GEX_DT_I64",
            Dt::U64 => "GEX_DT_U64",
            Dt::Flt => "GEX_DT_FLT",
            Dt::Dbl => "GEX_DT_DBL",
            Dt::User => "GEX_DT_USER",
        }
    }

    /// The code as a bit: distinct for every type, so that sets of types combine with
    /// bit-wise OR (the spec's guarantee for `GEX_DT_*` values).
    pub const fn bit(self) -> u32 {
        self as u32
    }
}

/// An operation code of atomics and reductions (GASNet-EX `gex_OP_t`).
///
/// For atomics `op0` is the target's value before the operation, `op1` and `op2` the
/// arguments; fetching operations return `op0`. For reductions `op0` is the left (first)
/// operand and `op1` the right (second) one. Expressions follow C rules.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// GASNet-EX `GEX_OP_ADD`: `op0 + op1`; atomics and reductions, every built-in type.
    Add = 1 << 0,
    /// GASNet-EX `GEX_OP_MULT`: `op0 * op1`; atomics and reductions, every built-in type.
    Mult = 1 << 1,
    /// GASNet-EX `GEX_OP_MIN`: `(op0 < op1) ? op0 : op1`; atomics and reductions, every
    /// built-in type.
    Min = 1 << 2,
    /// GASNet-EX `GEX_OP_MAX`: `(op0 > op1) ? op0 : op1`; atomics and reductions, every
    /// built-in type.
    Max = 1 << 3,
    /// GASNet-EX `GEX_OP_SUB`: `op0 - op1`; atomics only (not commutative).
    Sub = 1 << 4,
    /// GASNet-EX `GEX_OP_INC`: `op0 + 1`; atomics only.
    Inc = 1 << 5,
    /// GASNet-EX `GEX_OP_DEC`: `op0 - 1`; atomics only.
    Dec = 1 << 6,
    /// GASNet-EX `GEX_OP_AND`: `op0 & op1`; atomics and reductions, integer types only.
    And = 1 << 7,
    /// GASNet-EX `GEX_OP_OR`: `op0 | op1`; atomics and reductions, integer types only.
    Or = 1 << 8,
    /// GASNet-EX `GEX_OP_XOR`: `op0 ^ op1`; atomics and reductions, integer types only.
    Xor = 1 << 9,
    /// GASNet-EX `GEX_OP_FADD`: [`Op::Add`], fetching `op0`; atomics only.
    FAdd = 1 << 10,
    /// GASNet-EX `GEX_OP_FMULT`: [`Op::Mult`], fetching `op0`; atomics only.
    FMult = 1 << 11,
    /// GASNet-EX `GEX_OP_FMIN`: [`Op::Min`], fetching `op0`; atomics only.
    FMin = 1 << 12,
    /// GASNet-EX `GEX_OP_FMAX`: [`Op::Max`], fetching `op0`; atomics only.
    FMax = 1 << 13,
    /// GASNet-EX `GEX_OP_FSUB`: [`Op::Sub`], fetching `op0`; atomics only.
    FSub = 1 << 14,
    /// GASNet-EX `GEX_OP_FINC`: [`Op::Inc`], fetching `op0`; atomics only.
    FInc = 1 << 15,
    /// GASNet-EX `GEX_OP_FDEC`: [`Op::Dec`], fetching `op0`; atomics only.
    FDec = 1 << 16,
    /// GASNet-EX `GEX_OP_FAND`: [`Op::And`], fetching `op0`; atomics only, integer types.
    FAnd = 1 << 17,
    /// GASNet-EX `GEX_OP_FOR`: [`Op::Or`], fetching `op0`; atomics only, integer types.
    FOr = 1 << 18,
    /// GASNet-EX `GEX_OP_FXOR`: [`Op::Xor`], fetching `op0`; atomics only, integer types.
    FXor = 1 << 19,
    /// GASNet-EX `GEX_OP_SET`: writes `op1` to the target; atomics only.
    Set = 1 << 20,
    /// GASNet-EX `GEX_OP_CAS`: `(op0 == op1) ? op2 : op0`, free of spurious failures;
    /// atomics only.
    Cas = 1 << 21,
    /// GASNet-EX `GEX_OP_GET`: fetches `op0` without modifying the target; atomics only.
    Get = 1 << 22,
    /// GASNet-EX `GEX_OP_SWAP`: writes `op1`, fetching `op0`; atomics only.
    Swap = 1 << 23,
    /// GASNet-EX `GEX_OP_FCAS` (deprecated alias `GEX_OP_CSWAP`): [`Op::Cas`], fetching
    /// `op0`; atomics only.
    FCas = 1 << 24,
    /// GASNet-EX `GEX_OP_USER`: a user-defined associative and commutative operation;
    /// reductions only, every built-in type and `GEX_DT_USER`.
    User = 1 << 25,
    /// GASNet-EX `GEX_OP_USER_NC`: a user-defined associative but not commutative
    /// operation; reductions only, every built-in type and `GEX_DT_USER`.
    UserNc = 1 << 26,
}

impl Op {
    /// Every operation code, in the spec's order.
    pub const ALL: [Op; 27] = [
        Op::Add,
        Op::Mult,
        Op::Min,
        Op::Max,
        Op::Sub,
        Op::Inc,
        Op::Dec,
        Op::And,
        Op::Or,
        Op::Xor,
        Op::FAdd,
        Op::FMult,
        Op::FMin,
        Op::FMax,
        Op::FSub,
        Op::FInc,
        Op::FDec,
        Op::FAnd,
        Op::FOr,
        Op::FXor,
        Op::Set,
        Op::Cas,
        Op::Get,
        Op::Swap,
        Op::FCas,
        Op::User,
        Op::UserNc,
    ];

    /// The spec's name of the constant, e.g. `"GEX_OP_FADD"`.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Add => "GEX_OP_ADD",
            Op::Mult => "GEX_OP_MULT",
            Op::Min => "GEX_OP_MIN",
            Op::Max => "GEX_OP_MAX",
            Op::Sub => "GEX_OP_SUB",
            Op::Inc => "GEX_OP_INC",
            Op::Dec => "GEX_OP_DEC",
            Op::And => "GEX_OP_AND",
            Op::Or => "GEX_OP_OR",
            Op::Xor => "GEX_OP_XOR",
            Op::FAdd => "GEX_OP_FADD",
            Op::FMult => "GEX_OP_FMULT",
            Op::FMin => "GEX_OP_FMIN",
            Op::FMax => "GEX_OP_FMAX",
            Op::FSub => "GEX_OP_FSUB",
            Op::FInc => "GEX_OP_FINC",
            Op::FDec => "GEX_OP_FDEC",
            Op::FAnd => "GEX_OP_FAND",
            Op::FOr => "GEX_OP_FOR",
            Op::FXor => "GEX_OP_FXOR",
            Op::Set => "GEX_OP_SET",
            Op::Cas => "GEX_OP_CAS",
            Op::Get => "GEX_OP_GET",
            Op::Swap => "GEX_OP_SWAP",
            Op::FCas => "GEX_OP_FCAS",
            Op::User => "GEX_OP_USER",
            Op::UserNc => "GEX_OP_USER_NC",
        }
    }

    /// The code as a bit: distinct for every operation, so that sets of operations
    /// combine with bit-wise OR (the spec's guarantee for `GEX_OP_*` values).
    pub const fn bit(self) -> u32 {
        self as u32
    }

    /// Whether the operation fetches `op0` (the spec's "Fetching Operations" and
    /// "Fetching Accessors": `GEX_OP_F*`, `GEX_OP_GET`, `GEX_OP_SWAP`, `GEX_OP_FCAS`).
    pub const fn is_fetching(self) -> bool {
        matches!(
            self,
            Op::FAdd
                | Op::FMult
                | Op::FMin
                | Op::FMax
                | Op::FSub
                | Op::FInc
                | Op::FDec
                | Op::FAnd
                | Op::FOr
                | Op::FXor
                | Op::Get
                | Op::Swap
                | Op::FCas
        )
    }

    /// Whether the operation is one of the user-defined ones (`GEX_OP_USER`,
    /// `GEX_OP_USER_NC`), whose function the client passes at initiation.
    pub const fn is_user(self) -> bool {
        matches!(self, Op::User | Op::UserNc)
    }

    /// The fetching variant of a non-fetching operation (GASNet-EX
    /// `GEX_OP_TO_FETCHING`): `GEX_OP_xxx` gives `GEX_OP_Fxxx`, `GEX_OP_CAS` gives
    /// `GEX_OP_FCAS` and `GEX_OP_SET` gives `GEX_OP_SWAP`. `None` where the spec leaves
    /// the result undefined (fetching and user-defined operations).
    pub const fn to_fetching(self) -> Option<Op> {
        Some(match self {
            Op::Add => Op::FAdd,
            Op::Mult => Op::FMult,
            Op::Min => Op::FMin,
            Op::Max => Op::FMax,
            Op::Sub => Op::FSub,
            Op::Inc => Op::FInc,
            Op::Dec => Op::FDec,
            Op::And => Op::FAnd,
            Op::Or => Op::FOr,
            Op::Xor => Op::FXor,
            Op::Set => Op::Swap,
            Op::Cas => Op::FCas,
            _ => return None,
        })
    }

    /// The non-fetching variant of a fetching operation (GASNet-EX
    /// `GEX_OP_TO_NONFETCHING`): the inverse of [`Op::to_fetching`]. `None` where the
    /// spec leaves the result undefined (non-fetching operations, `GEX_OP_GET`, and the
    /// user-defined operations).
    pub const fn to_nonfetching(self) -> Option<Op> {
        Some(match self {
            Op::FAdd => Op::Add,
            Op::FMult => Op::Mult,
            Op::FMin => Op::Min,
            Op::FMax => Op::Max,
            Op::FSub => Op::Sub,
            Op::FInc => Op::Inc,
            Op::FDec => Op::Dec,
            Op::FAnd => Op::And,
            Op::FOr => Op::Or,
            Op::FXor => Op::Xor,
            Op::Swap => Op::Set,
            Op::FCas => Op::Cas,
            _ => return None,
        })
    }

    /// Whether `op` may be passed with `dt` to a reduction (`gex_Coll_ReduceTo*NB`):
    /// `GEX_OP_ADD`, `MULT`, `MIN` and `MAX` with every built-in type; `GEX_OP_AND`,
    /// `OR` and `XOR` with the integer types; `GEX_OP_USER` and `USER_NC` with every
    /// type, `GEX_DT_USER` included, which is valid with nothing else.
    pub const fn valid_for_reduction(self, dt: Dt) -> bool {
        match self {
            Op::User | Op::UserNc => true,
            Op::Add | Op::Mult | Op::Min | Op::Max => dt.is_builtin(),
            Op::And | Op::Or | Op::Xor => dt.is_integer(),
            _ => false,
        }
    }

    /// Whether `op` may be used with `dt` by a remote atomic: every built-in operation
    /// with every built-in type, except the bit-wise ones (`GEX_OP_AND`, `OR`, `XOR`
    /// and their fetching variants), which need an integer type.
    pub const fn valid_for_atomic(self, dt: Dt) -> bool {
        match self {
            Op::User | Op::UserNc => false,
            Op::And | Op::Or | Op::Xor | Op::FAnd | Op::FOr | Op::FXor => dt.is_integer(),
            _ => dt.is_builtin(),
        }
    }

    /// Whether `op0 (+) op1 == op1 (+) op0` by the spec's definition of the operation.
    ///
    /// Among the reduction operations only `GEX_OP_USER_NC` is not commutative, so a
    /// reduction with it must combine its operands in rank order. Of the atomics-only
    /// operations, `GEX_OP_SUB` is declared non-commutative by the spec, and the unary
    /// and accessor operations have no symmetric pair of operands: all report `false`.
    pub const fn is_commutative(self) -> bool {
        matches!(
            self,
            Op::Add
                | Op::Mult
                | Op::Min
                | Op::Max
                | Op::And
                | Op::Or
                | Op::Xor
                | Op::FAdd
                | Op::FMult
                | Op::FMin
                | Op::FMax
                | Op::FAnd
                | Op::FOr
                | Op::FXor
                | Op::User
        )
    }
}

/// A set of operation codes (a `gex_OP_t` holding a bit-wise OR of `GEX_OP_*`, as
/// `gex_AD_Create` takes it): `Op::FAdd | Op::Get`, or [`OpSet::of`] a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpSet(u32);

impl OpSet {
    /// The empty set.
    pub const EMPTY: OpSet = OpSet(0);

    /// The set of the operations in `ops`.
    pub const fn of(ops: &[Op]) -> OpSet {
        let mut bits = 0;
        let mut i = 0;
        while i < ops.len() {
            bits |= ops[i].bit();
            i += 1;
        }
        OpSet(bits)
    }

    /// Whether `op` is in the set.
    pub const fn contains(self, op: Op) -> bool {
        self.0 & op.bit() != 0
    }

    /// The set as the bit mask `gex_OP_t` is.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The operations of the set, in the spec's order.
    pub fn iter(self) -> impl Iterator<Item = Op> {
        Op::ALL.into_iter().filter(move |op| self.contains(*op))
    }
}

impl From<Op> for OpSet {
    fn from(op: Op) -> OpSet {
        OpSet(op.bit())
    }
}

impl std::ops::BitOr<Op> for Op {
    type Output = OpSet;
    fn bitor(self, rhs: Op) -> OpSet {
        OpSet(self.bit() | rhs.bit())
    }
}

impl std::ops::BitOr<Op> for OpSet {
    type Output = OpSet;
    fn bitor(self, rhs: Op) -> OpSet {
        OpSet(self.0 | rhs.bit())
    }
}

impl std::ops::BitOr for OpSet {
    type Output = OpSet;
    fn bitor(self, rhs: OpSet) -> OpSet {
        OpSet(self.0 | rhs.0)
    }
}

impl FromIterator<Op> for OpSet {
    fn from_iter<I: IntoIterator<Item = Op>>(iter: I) -> OpSet {
        iter.into_iter().fold(OpSet::EMPTY, |set, op| set | op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_bits_so_they_combine_with_or() {
        let dts = Dt::ALL.iter().fold(0, |acc, dt| {
            assert_eq!(dt.bit().count_ones(), 1, "{}", dt.name());
            assert_eq!(acc & dt.bit(), 0, "{}", dt.name());
            acc | dt.bit()
        });
        assert_eq!(dts.count_ones() as usize, Dt::ALL.len());
        let ops = Op::ALL.iter().fold(0, |acc, op| {
            assert_eq!(op.bit().count_ones(), 1, "{}", op.name());
            assert_eq!(acc & op.bit(), 0, "{}", op.name());
            acc | op.bit()
        });
        assert_eq!(ops.count_ones() as usize, Op::ALL.len());
    }

    #[test]
    fn op_sets_combine_with_or_and_list_their_members() {
        let set = Op::FAdd | Op::Get | Op::Cas;
        assert_eq!(set, OpSet::of(&[Op::Cas, Op::Get, Op::FAdd]));
        assert_eq!(set.bits(), Op::FAdd.bit() | Op::Get.bit() | Op::Cas.bit());
        assert!(set.contains(Op::Get) && !set.contains(Op::Add));
        assert_eq!(set.iter().collect::<Vec<_>>(), [Op::FAdd, Op::Cas, Op::Get]);
        assert_eq!(set.iter().collect::<OpSet>(), set);
        assert!(OpSet::EMPTY.is_empty() && !OpSet::from(Op::Add).is_empty());
    }

    #[test]
    fn names_follow_the_spec() {
        assert_eq!(Dt::Flt.name(), "GEX_DT_FLT");
        assert_eq!(Dt::User.name(), "GEX_DT_USER");
        assert_eq!(Op::FOr.name(), "GEX_OP_FOR");
        assert_eq!(Op::UserNc.name(), "GEX_OP_USER_NC");
        for op in Op::ALL {
            assert!(op.name().starts_with("GEX_OP_"));
            let variant = format!("{op:?}").to_uppercase();
            assert_eq!(op.name().replace('_', "")[5..], variant[..], "{op:?}");
        }
        for dt in Dt::ALL {
            assert!(dt.name().starts_with("GEX_DT_"));
        }
    }

    #[test]
    fn builtin_sizes_are_those_of_the_c_types() {
        assert_eq!(Dt::I32.size(), Some(size_of::<i32>()));
        assert_eq!(Dt::U32.size(), Some(size_of::<u32>()));
        assert_eq!(Dt::I64.size(), Some(size_of::<i64>()));
        assert_eq!(Dt::U64.size(), Some(size_of::<u64>()));
        assert_eq!(Dt::Flt.size(), Some(size_of::<f32>()));
        assert_eq!(Dt::Dbl.size(), Some(size_of::<f64>()));
        assert_eq!(Dt::User.size(), None);
        let integers: Vec<Dt> = Dt::ALL.into_iter().filter(|d| d.is_integer()).collect();
        assert_eq!(integers, [Dt::I32, Dt::U32, Dt::I64, Dt::U64]);
    }

    #[test]
    fn to_fetching_and_back_round_trips_including_set_and_swap() {
        assert_eq!(Op::Set.to_fetching(), Some(Op::Swap));
        assert_eq!(Op::Swap.to_nonfetching(), Some(Op::Set));
        assert_eq!(Op::Cas.to_fetching(), Some(Op::FCas));
        let mut pairs = 0;
        for op in Op::ALL {
            if let Some(f) = op.to_fetching() {
                pairs += 1;
                assert!(!op.is_fetching() && f.is_fetching(), "{op:?}");
                assert_eq!(f.to_nonfetching(), Some(op));
                assert_eq!(f.to_fetching(), None);
            }
        }
        assert_eq!(pairs, 12);
        assert_eq!(Op::Get.to_nonfetching(), None);
        assert_eq!(Op::User.to_fetching(), None);
        assert_eq!(Op::UserNc.to_nonfetching(), None);
    }

    #[test]
    fn reduction_validity_follows_the_spec_table() {
        for dt in Dt::ALL {
            for op in Op::ALL {
                let expected = match op {
                    Op::Add | Op::Mult | Op::Min | Op::Max => dt != Dt::User,
                    Op::And | Op::Or | Op::Xor => {
                        matches!(dt, Dt::I32 | Dt::U32 | Dt::I64 | Dt::U64)
                    }
                    Op::User | Op::UserNc => true,
                    _ => false,
                };
                assert_eq!(op.valid_for_reduction(dt), expected, "{op:?} {dt:?}");
            }
        }
    }

    #[test]
    fn atomic_validity_follows_the_spec_table() {
        for dt in Dt::ALL {
            for op in Op::ALL {
                let bitwise = matches!(
                    op.to_nonfetching().unwrap_or(op),
                    Op::And | Op::Or | Op::Xor
                );
                let expected = dt != Dt::User
                    && !op.is_user()
                    && (!bitwise || !matches!(dt, Dt::Flt | Dt::Dbl));
                assert_eq!(op.valid_for_atomic(dt), expected, "{op:?} {dt:?}");
            }
        }
    }

    #[test]
    fn only_user_nc_is_non_commutative_among_reduction_ops() {
        let reduction_ops = Op::ALL
            .into_iter()
            .filter(|op| op.valid_for_reduction(Dt::User) || op.valid_for_reduction(Dt::I32));
        for op in reduction_ops {
            assert_eq!(op.is_commutative(), op != Op::UserNc, "{op:?}");
        }
        assert!(!Op::Sub.is_commutative());
    }
}
