//! The operations of atomic domains (UPC++ `atomic_op`, §13.3 ¶1), the `gex` operation
//! each is, the types they permit (Tables 13.1, 13.2) and the memory orders they take.

use std::sync::atomic::Ordering;

use gex::ops::Op;
use gex::AtomicType;

/// The operations of an atomic domain (UPC++ `atomic_op`, §13.3 ¶1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `atomic_op::load`.
    Load,
    /// `atomic_op::store`.
    Store,
    /// `atomic_op::compare_exchange`.
    CompareExchange,
    /// `atomic_op::add`.
    Add,
    /// `atomic_op::fetch_add`.
    FetchAdd,
    /// `atomic_op::sub`.
    Sub,
    /// `atomic_op::fetch_sub`.
    FetchSub,
    /// `atomic_op::mul`.
    Mul,
    /// `atomic_op::fetch_mul`.
    FetchMul,
    /// `atomic_op::min`.
    Min,
    /// `atomic_op::fetch_min`.
    FetchMin,
    /// `atomic_op::max`.
    Max,
    /// `atomic_op::fetch_max`.
    FetchMax,
    /// `atomic_op::bit_and` (integer types only).
    BitAnd,
    /// `atomic_op::fetch_bit_and` (integer types only).
    FetchBitAnd,
    /// `atomic_op::bit_or` (integer types only).
    BitOr,
    /// `atomic_op::fetch_bit_or` (integer types only).
    FetchBitOr,
    /// `atomic_op::bit_xor` (integer types only).
    BitXor,
    /// `atomic_op::fetch_bit_xor` (integer types only).
    FetchBitXor,
    /// `atomic_op::inc`.
    Inc,
    /// `atomic_op::fetch_inc`.
    FetchInc,
    /// `atomic_op::dec`.
    Dec,
    /// `atomic_op::fetch_dec`.
    FetchDec,
}

impl AtomicOp {
    /// Every operation, in the order of §13.3 ¶1.
    pub const ALL: [AtomicOp; 23] = [
        AtomicOp::Load,
        AtomicOp::Store,
        AtomicOp::CompareExchange,
        AtomicOp::Add,
        AtomicOp::FetchAdd,
        AtomicOp::Sub,
        AtomicOp::FetchSub,
        AtomicOp::Mul,
        AtomicOp::FetchMul,
        AtomicOp::Min,
        AtomicOp::FetchMin,
        AtomicOp::Max,
        AtomicOp::FetchMax,
        AtomicOp::BitAnd,
        AtomicOp::FetchBitAnd,
        AtomicOp::BitOr,
        AtomicOp::FetchBitOr,
        AtomicOp::BitXor,
        AtomicOp::FetchBitXor,
        AtomicOp::Inc,
        AtomicOp::FetchInc,
        AtomicOp::Dec,
        AtomicOp::FetchDec,
    ];

    /// The `gex` operation that performs it: `load` is `GEX_OP_GET`, `store`
    /// `GEX_OP_SET`, `compare_exchange` `GEX_OP_FCAS`, the others their namesakes.
    pub const fn gex_op(self) -> Op {
        match self {
            AtomicOp::Load => Op::Get,
            AtomicOp::Store => Op::Set,
            AtomicOp::CompareExchange => Op::FCas,
            AtomicOp::Add => Op::Add,
            AtomicOp::FetchAdd => Op::FAdd,
            AtomicOp::Sub => Op::Sub,
            AtomicOp::FetchSub => Op::FSub,
            AtomicOp::Mul => Op::Mult,
            AtomicOp::FetchMul => Op::FMult,
            AtomicOp::Min => Op::Min,
            AtomicOp::FetchMin => Op::FMin,
            AtomicOp::Max => Op::Max,
            AtomicOp::FetchMax => Op::FMax,
            AtomicOp::BitAnd => Op::And,
            AtomicOp::FetchBitAnd => Op::FAnd,
            AtomicOp::BitOr => Op::Or,
            AtomicOp::FetchBitOr => Op::FOr,
            AtomicOp::BitXor => Op::Xor,
            AtomicOp::FetchBitXor => Op::FXor,
            AtomicOp::Inc => Op::Inc,
            AtomicOp::FetchInc => Op::FInc,
            AtomicOp::Dec => Op::Dec,
            AtomicOp::FetchDec => Op::FDec,
        }
    }

    /// The spec's name, e.g. `"fetch_add"`.
    pub const fn name(self) -> &'static str {
        match self {
            AtomicOp::Load => "load",
            AtomicOp::Store => "store",
            AtomicOp::CompareExchange => "compare_exchange",
            AtomicOp::Add => "add",
            AtomicOp::FetchAdd => "fetch_add",
            AtomicOp::Sub => "sub",
            AtomicOp::FetchSub => "fetch_sub",
            AtomicOp::Mul => "mul",
            AtomicOp::FetchMul => "fetch_mul",
            AtomicOp::Min => "min",
            AtomicOp::FetchMin => "fetch_min",
            AtomicOp::Max => "max",
            AtomicOp::FetchMax => "fetch_max",
            AtomicOp::BitAnd => "bit_and",
            AtomicOp::FetchBitAnd => "fetch_bit_and",
            AtomicOp::BitOr => "bit_or",
            AtomicOp::FetchBitOr => "fetch_bit_or",
            AtomicOp::BitXor => "bit_xor",
            AtomicOp::FetchBitXor => "fetch_bit_xor",
            AtomicOp::Inc => "inc",
            AtomicOp::FetchInc => "fetch_inc",
            AtomicOp::Dec => "dec",
            AtomicOp::FetchDec => "fetch_dec",
        }
    }

    /// The name of the call, for messages: `"atomic_domain::fetch_add"`.
    pub(super) const fn call(self) -> &'static str {
        macro_rules! calls {
            ($($op:ident $name:literal),*) => {
                match self { $(AtomicOp::$op => concat!("atomic_domain::", $name),)* }
            };
        }
        calls!(
            Load "load", Store "store", CompareExchange "compare_exchange", Add "add",
            FetchAdd "fetch_add", Sub "sub", FetchSub "fetch_sub", Mul "mul",
            FetchMul "fetch_mul", Min "min", FetchMin "fetch_min", Max "max",
            FetchMax "fetch_max", BitAnd "bit_and", FetchBitAnd "fetch_bit_and",
            BitOr "bit_or", FetchBitOr "fetch_bit_or", BitXor "bit_xor",
            FetchBitXor "fetch_bit_xor", Inc "inc", FetchInc "fetch_inc", Dec "dec",
            FetchDec "fetch_dec"
        )
    }

    /// Whether `T` is permitted for the operation (Tables 13.1 and 13.2: the bit-wise
    /// operations take the integer types only).
    pub fn permits<T: AtomicType>(self) -> bool {
        self.gex_op().valid_for_atomic(T::DT)
    }

    /// The memory orders the operation takes: `load` relaxed or acquire (§13.3 ¶25),
    /// `store` relaxed or release (¶31), the others any but `SeqCst` (¶37, ¶43).
    pub(super) fn takes(self, order: Ordering) -> bool {
        match self {
            AtomicOp::Load => matches!(order, Ordering::Relaxed | Ordering::Acquire),
            AtomicOp::Store => matches!(order, Ordering::Relaxed | Ordering::Release),
            _ => !matches!(order, Ordering::SeqCst),
        }
    }
}
