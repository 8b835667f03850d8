//! Atomics (UPC++ spec ch. 13): atomic domains and their operations.
//!
//! ```
//! use std::sync::atomic::Ordering;
//! use upcxx::{AtomicDomain, AtomicOp};
//!
//! upcxx::init();
//! // Collective over the world (§13.3 ¶4): the type and the operations it will use.
//! let mut ad = AtomicDomain::<i64>::new(&[AtomicOp::Load, AtomicOp::FetchAdd, AtomicOp::Store]);
//! // Rank 0's counter, which every rank finds through a distributed object.
//! let counters = upcxx::DistObject::new(upcxx::new_(0i64));
//! let counter = counters.fetch(0).wait();
//! // Every operation is non-blocking; by default a future of operation completion,
//! // with the value read for the fetching ones (§13.1 ¶11).
//! let before = ad.fetch_add(counter, 2, Ordering::Relaxed).wait();
//! assert!(before % 2 == 0);
//! upcxx::barrier();
//! assert_eq!(ad.load(counter, Ordering::Acquire).wait(), 2 * upcxx::rank_n() as i64);
//! // Collective destruction after an entry barrier (§13.3 ¶13), before finalize.
//! ad.destroy(upcxx::EntryBarrier::User);
//! upcxx::finalize();
//! ```
//!
//! # Design
//!
//! * An [`AtomicDomain<T>`] wraps a `gex` atomic domain (`gex_AD_t`) over the team's
//!   `gex` team, created with the `gex` operations that the [`AtomicOp`]s name. `T` is
//!   one of the six types of §13.1 ¶3, the sealed [`gex::AtomicType`]; an operation
//!   outside the domain's set (or, at construction, one not permitted for `T`, Tables
//!   13.1 and 13.2) is a panic naming the call, as is a memory order the operation does
//!   not take, a null or misaligned pointer, a target outside the domain's team, a
//!   destroyed domain or team.
//! * An operation on a target of the local team, whose segment this process maps
//!   (every target, on shared memory), is a CPU atomic on the mapping, with no message,
//!   computed by the one function that also computes `gex`'s (`gex::AtomicType::apply`).
//!   Any other target, and every operation while a GASP tool is attached (as for
//!   `rput`, see [`crate::rma`]), goes to the `gex` domain, with the target named by
//!   world rank (`GEX_FLAG_RANK_IS_JOBRANK`).
//! * Memory orders map onto `GEX_FLAG_AD_ACQ` and `GEX_FLAG_AD_REL` (§13.3 ¶28, ¶34,
//!   ¶40, ¶48): `Relaxed`, `Acquire`, `Release`, `AcqRel` where the operation takes
//!   them; `SeqCst` is not among the orders of ch. 13.
//! * Completions are those of ch. 7, operation completion only, through the machinery
//!   of [`crate::completion`]: a future (the default), a promise or an LPC, carrying
//!   the value read for `load`, `compare_exchange` and the `fetch_*` operations. An
//!   operation on a mapped word is complete when the call returns, so notifications
//!   come at the next user-level progress, as for `rput`; one on another host (the
//!   `gex` domain sends it to the owner, see `gex::atomic`) completes when the owner's
//!   reply arrives, and the first user-level progress after that notifies. Such
//!   operations are therefore pipelined: a program may start many and wait once.
//! * §13.3 ¶20: a domain must be destroyed before it is dropped, unless UPC++ was
//!   finalized since its creation; dropping a live domain while UPC++ is initialized
//!   panics.
//!
//! GASP: each operation reports `GASP_UPCXX_ATOMIC_OP` at the caller's location (the
//! `gex` operation inside is not reported, as for every UPC++ operation);
//! construction and destruction report `GASP_UPCXX_ATOMIC_DOMAIN_CONSTRUCT` and
//! `GASP_UPCXX_ATOMIC_DOMAIN_DESTROY`.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use gex::atomic::MemOrder;
use gex::ops::{Op, OpSet};
use gex::AtomicType;

use crate::completion::{
    self, operation_cx, CompletionEvents, Completions, FutureList, HasOperation, Returned,
};
use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::runtime::state::{check_init, initialized, rt};
use crate::team::{check_collective, world, EntryBarrier, Team};

mod op;
mod started;

pub use op::AtomicOp;
use started::Started;

/// The completion events of a fetching atomic (`load`, `compare_exchange`, `fetch_*`):
/// operation completion, producing the value read (§13.3 ¶27, ¶39, ¶47).
#[derive(Debug)]
pub struct AtomicFetch<T>(PhantomData<fn() -> T>);

impl<T: 'static> CompletionEvents for AtomicFetch<T> {
    const NAME: &'static str = "atomic_domain fetching operation";
    type OpValues = (T,);
}
impl<T: 'static> HasOperation for AtomicFetch<T> {}

/// The completion events of a non-fetching atomic (`store`, `add`, `inc`, ...):
/// operation completion, no value (§13.3 ¶33, ¶47).
#[derive(Debug)]
pub enum AtomicUpdate {}

impl CompletionEvents for AtomicUpdate {
    const NAME: &'static str = "atomic_domain non-fetching operation";
    type OpValues = ();
}
impl HasOperation for AtomicUpdate {}

/// An atomic domain over a team, for the operations given at construction on `T`
/// (UPC++ `atomic_domain<T>`, §13.3 ¶2): this process's representative.
#[derive(Debug)]
pub struct AtomicDomain<T: AtomicType> {
    gex: gex::AtomicDomain,
    team: Team,
    /// Whether the team is the world, of which every rank is a member.
    world: bool,
    ops: Vec<AtomicOp>,
    /// `ops` as the `gex` operations.
    set: OpSet,
    destroyed: bool,
    _type: PhantomData<fn() -> T>,
}

impl<T: AtomicType> AtomicDomain<T> {
    /// Constructs an atomic domain over the world for `ops` (UPC++ `atomic_domain(ops,
    /// world())`, §13.3 ¶4). Collective over the world, on the thread holding the
    /// master persona.
    ///
    /// # Panics
    /// If an operation is not permitted for `T` (§13.3 ¶6), off the master persona's
    /// thread (¶5), or in the restricted context.
    #[track_caller]
    pub fn new(ops: &[AtomicOp]) -> AtomicDomain<T> {
        AtomicDomain::new_in(ops, world())
    }

    /// Constructs an atomic domain over `team` for `ops` (UPC++ `atomic_domain(ops,
    /// team)`, §13.3 ¶4): collective over `team`; every member passes the same `ops`
    /// (checked: a mismatch fails the job). Makes internal progress only (¶8).
    ///
    /// # Panics
    /// As [`new`](AtomicDomain::new), or if `team` is invalid or destroyed.
    #[track_caller]
    pub fn new_in(ops: &[AtomicOp], team: &Team) -> AtomicDomain<T> {
        const CALL: &str = "atomic_domain::atomic_domain";
        check_init(CALL);
        let gex_team = team.gex(CALL);
        check_collective(CALL);
        if let Some(op) = ops.iter().find(|op| !op.permits::<T>()) {
            panic!(
                "upcxx::{CALL}: atomic_op::{} is not permitted for {} (UPC++ spec §13.3 ¶6, \
                 Table 13.1)",
                op.name(),
                std::any::type_name::<T>()
            );
        }
        let set: OpSet = ops.iter().map(|op| op.gex_op()).collect();
        let team_arg = team.id().to_u64();
        let (dt, bits) = (T::DT.bit() as i32, set.bits() as i32);
        let span = gasp::span!(GASP_UPCXX_ATOMIC_DOMAIN_CONSTRUCT, team_arg, dt, bits);
        // An empty set is a domain no operation may use; gex asks for at least one.
        let gex_set = if set.is_empty() { Op::Get.into() } else { set };
        // `gex`'s creation waits for the team making internal progress only: this
        // thread's batched RPCs go out first, as internal progress sends them.
        crate::rpc::send_unsent();
        let gex = gex::AtomicDomain::create(&gex_team, T::DT, gex_set, gex::Flags::NONE);
        gasp::end!(span, team_arg, dt, bits);
        AtomicDomain {
            gex,
            team: team.clone(),
            world: team.id() == world().id(),
            ops: ops.to_vec(),
            set,
            destroyed: false,
            _type: PhantomData,
        }
    }

    /// Destroys this process's state of the domain (UPC++ `atomic_domain::destroy`,
    /// §13.3 ¶13), after the entry barrier `lev`: collective over the domain's team, on
    /// the master persona's thread. Every operation on the domain must have completed
    /// by the end of the entry barrier (¶15). Later operations fail, naming the call.
    ///
    /// # Panics
    /// If the domain was destroyed already, off the master persona's thread (¶14), or
    /// in the restricted context.
    #[track_caller]
    pub fn destroy(&mut self, lev: EntryBarrier) {
        const CALL: &str = "atomic_domain::destroy";
        check_init(CALL);
        self.check_live(CALL);
        let team = self.team.gex(CALL);
        check_collective(CALL);
        let team_arg = self.team.id().to_u64();
        let span = gasp::span!(GASP_UPCXX_ATOMIC_DOMAIN_DESTROY, team_arg);
        match lev {
            EntryBarrier::User => crate::progress::barrier_with_progress(&team),
            EntryBarrier::Internal => crate::progress::wait_internal(team.barrier_nb()),
            EntryBarrier::None => {}
        }
        self.destroyed = true;
        self.gex.destroy();
        gasp::end!(span, team_arg);
    }

    /// The operations given at construction.
    pub fn ops(&self) -> &[AtomicOp] {
        &self.ops
    }

    /// The team given at construction.
    pub fn team(&self) -> &Team {
        &self.team
    }

    #[inline]
    #[track_caller]
    fn check_live(&self, call: &str) {
        if self.destroyed {
            panic!("upcxx::{call}: the atomic domain was destroyed (atomic_domain::destroy)");
        }
    }

    /// Initiates `op` on `p` with operands `val1`, `val2`: every check, then the
    /// operation. Returns how it started (with the value read, for a non-fetching
    /// operation unspecified) and the target's world rank.
    #[inline(always)]
    #[track_caller]
    fn initiate(
        &self,
        op: AtomicOp,
        p: GlobalPtr<T>,
        val1: T,
        val2: T,
        order: Ordering,
    ) -> (Started<T>, u32) {
        let call = op.call();
        check_init(call);
        // Not `check_not_restricted`: an operation only initiates (§13.3: progress
        // level internal), which callbacks and RPCs may do (§10.2); waiting for its
        // future there is what `Future::wait` refuses.
        self.check_live(call);
        self.team.gex(call);
        if !self.set.contains(op.gex_op()) {
            not_in_domain(op, &self.ops);
        }
        if !op.takes(order) {
            panic!(
                "upcxx::{call}: memory order {order:?} is not one this \
                 operation takes (UPC++ spec §13.3)"
            );
        }
        if p.is_null() {
            panic!("upcxx::{call}: the global pointer is null");
        }
        let (rank, addr) = (p.where_(), p.owner_addr());
        if !self.world && !self.team.contains_world(rank) {
            panic!(
                "upcxx::{call}: the target's rank {rank} is not a member of \
                 the domain's team {}",
                self.team.id()
            );
        }
        if addr % std::mem::align_of::<T>() != 0 {
            panic!(
                "upcxx::{call}: the global pointer {addr:#x} is not aligned \
                 for {}",
                std::any::type_name::<T>()
            );
        }
        let gop = op.gex_op();
        let order = MemOrder {
            acquire: matches!(order, Ordering::Acquire | Ordering::AcqRel),
            release: matches!(order, Ordering::Release | Ordering::AcqRel),
        };
        let value = match rt(call).direct_range(rank, addr, std::mem::size_of::<T>()) {
            Some(local) => {
                // SAFETY: the word is inside the mapping of `rank`'s segment (for the
                // life of the job), aligned for `T` (checked), and accessed only by
                // atomics of this domain (§13.1 ¶2, ¶6: the program's obligation); `gop`
                // is in the domain's set and permitted for `T` (checked at construction).
                let v = unsafe { T::apply(local as *mut T, gop, val1, val2, order) };
                Started::Done(v)
            }
            None => self.through_gex(rank, addr, gop, val1, val2, order),
        };
        (value, rank)
    }

    /// An operation on a target this process does not map directly, or any operation
    /// while a tool is attached: the `gex` domain's NB operation, reported. Complete at
    /// return where the target is mapped; to another host it completes when the owner's
    /// reply arrives, which the caller's completions then wait for.
    #[inline(never)]
    #[track_caller]
    fn through_gex(
        &self,
        rank: u32,
        addr: usize,
        gop: Op,
        val1: T,
        val2: T,
        order: MemOrder,
    ) -> Started<T> {
        let gptr = gasp::GPtr::new(rank, addr);
        let (o, d, n) = (
            gop.bit() as i32,
            T::DT.bit() as i32,
            std::mem::size_of::<T>(),
        );
        let (b1, b2) = (val1.to_bits(), val2.to_bits());
        let span = gasp::span!(GASP_UPCXX_ATOMIC_OP, gptr, o, d, b1, b2, n);
        let mut flags = gex::Flags::RANK_IS_JOBRANK;
        if order.acquire {
            flags = flags | gex::Flags::AD_ACQ;
        }
        if order.release {
            flags = flags | gex::Flags::AD_REL;
        }
        // The fetched value's home until the operation completes (a non-fetching
        // operation writes nothing; the initial value is then the unused result).
        let result = Box::into_raw(Box::new(val1));
        // SAFETY: `result` stays allocated and unread until the event completes: it is
        // read and freed only by `Started::finish` after that (or here, if complete).
        let started = unsafe { self.gex.op_nb(result, rank, addr, gop, val1, val2, flags) };
        let event = started.expect("gex returns NoOp only for Flags::IMMEDIATE");
        gasp::end!(span, gptr, o, d, b1, b2, n);
        if event.is_invalid() {
            // SAFETY: complete: the box is ours again.
            Started::Done(*unsafe { Box::from_raw(result) })
        } else {
            Started::Pending { event, result }
        }
    }

    #[inline]
    #[track_caller]
    fn fetching<C: Completions<AtomicFetch<T>>>(
        &self,
        op: AtomicOp,
        p: GlobalPtr<T>,
        val1: T,
        val2: T,
        order: Ordering,
        cxs: C,
    ) -> Returned<C, AtomicFetch<T>> {
        // A request that cannot be armed fails the call before the word changes.
        cxs.check_armable();
        let (started, rank) = self.initiate(op, p, val1, val2, order);
        match started {
            Started::Done(value) => cxs.completed_at_initiation(rank, (value,)).into_return(),
            pending => pending.finish(cxs, rank, |v| (v,)),
        }
    }

    #[inline]
    #[track_caller]
    fn updating<C: Completions<AtomicUpdate>>(
        &self,
        op: AtomicOp,
        p: GlobalPtr<T>,
        val: T,
        order: Ordering,
        cxs: C,
    ) -> Returned<C, AtomicUpdate> {
        cxs.check_armable();
        let (started, rank) = self.initiate(op, p, val, val, order);
        match started {
            Started::Done(_) => cxs.completed_at_initiation(rank, ()).into_return(),
            pending => pending.finish(cxs, rank, |_| ()),
        }
    }

    /// Atomically reads the value at `p` (UPC++ `atomic_domain::load`, §13.3 ¶23):
    /// `order` is `Relaxed` or `Acquire`. Returns a future of the value.
    #[inline]
    #[track_caller]
    pub fn load(&self, p: GlobalPtr<T>, order: Ordering) -> Future<T> {
        self.load_with(p, order, operation_cx::as_future())
    }

    /// [`load`](AtomicDomain::load) with completions (operation completion only, with
    /// the value).
    #[inline]
    #[track_caller]
    pub fn load_with<C: Completions<AtomicFetch<T>>>(
        &self,
        p: GlobalPtr<T>,
        order: Ordering,
        cxs: C,
    ) -> Returned<C, AtomicFetch<T>> {
        const {
            assert!(
                completion::requests_op_or_remote::<AtomicFetch<T>, C>(),
                "load needs an operation_cx request (UPC++ spec §7.2.1)"
            )
        };
        // The operand is ignored by GEX_OP_GET.
        self.fetching(AtomicOp::Load, p, T::ZERO, T::ZERO, order, cxs)
    }

    /// Atomically writes `val` to `p` (UPC++ `atomic_domain::store`, §13.3 ¶30):
    /// `order` is `Relaxed` or `Release`. Returns a future of operation completion.
    #[inline]
    #[track_caller]
    pub fn store(&self, p: GlobalPtr<T>, val: T, order: Ordering) -> Future<()> {
        self.store_with(p, val, order, operation_cx::as_future())
    }

    /// [`store`](AtomicDomain::store) with completions (operation completion only).
    #[inline]
    #[track_caller]
    pub fn store_with<C: Completions<AtomicUpdate>>(
        &self,
        p: GlobalPtr<T>,
        val: T,
        order: Ordering,
        cxs: C,
    ) -> Returned<C, AtomicUpdate> {
        const {
            assert!(
                completion::requests_op_or_remote::<AtomicUpdate, C>(),
                "store needs an operation_cx request (UPC++ spec §7.2.1)"
            )
        };
        self.updating(AtomicOp::Store, p, val, order, cxs)
    }

    /// Atomically replaces the value at `p` by `val2` if it equals `val1` (UPC++
    /// `atomic_domain::compare_exchange`, §13.3 ¶36); returns a future of the value
    /// read. Floating-point values compare as their bits (§13.2).
    #[inline]
    #[track_caller]
    pub fn compare_exchange(
        &self,
        p: GlobalPtr<T>,
        val1: T,
        val2: T,
        order: Ordering,
    ) -> Future<T> {
        self.compare_exchange_with(p, val1, val2, order, operation_cx::as_future())
    }

    /// [`compare_exchange`](AtomicDomain::compare_exchange) with completions.
    #[inline]
    #[track_caller]
    pub fn compare_exchange_with<C: Completions<AtomicFetch<T>>>(
        &self,
        p: GlobalPtr<T>,
        val1: T,
        val2: T,
        order: Ordering,
        cxs: C,
    ) -> Returned<C, AtomicFetch<T>> {
        const {
            assert!(
                completion::requests_op_or_remote::<AtomicFetch<T>, C>(),
                "compare_exchange needs an operation_cx request (UPC++ spec §7.2.1)"
            )
        };
        self.fetching(AtomicOp::CompareExchange, p, val1, val2, order, cxs)
    }
}

/// The binary and unary operations of §13.3 ¶42 (Tables 13.1 and 13.2), each as a
/// default-completion form and a `_with` form.
macro_rules! operations {
    (binary $($op:ident $name:ident $name_with:ident $fetch:ident $fetch_with:ident $what:literal;)*) => {
        impl<T: AtomicType> AtomicDomain<T> {$(
            #[doc = concat!("Atomically replaces the value at `p` by ", $what, " (UPC++ `atomic_domain::", stringify!($name), "`, §13.3 ¶42); returns a future of operation completion.")]
            #[inline]
            #[track_caller]
            pub fn $name(&self, p: GlobalPtr<T>, val: T, order: Ordering) -> Future<()> {
                self.$name_with(p, val, order, operation_cx::as_future())
            }

            #[doc = concat!("[`", stringify!($name), "`](AtomicDomain::", stringify!($name), ") with completions (operation completion only).")]
            #[inline]
            #[track_caller]
            pub fn $name_with<C: Completions<AtomicUpdate>>(&self, p: GlobalPtr<T>, val: T, order: Ordering, cxs: C) -> Returned<C, AtomicUpdate> {
                const { assert!(completion::requests_op_or_remote::<AtomicUpdate, C>(), "atomics need an operation_cx request (UPC++ spec §7.2.1)") };
                let op = AtomicOp::$op;
                self.updating(op, p, val, order, cxs)
            }

            #[doc = concat!("As [`", stringify!($name), "`](AtomicDomain::", stringify!($name), "), returning a future of the value read (UPC++ `atomic_domain::", stringify!($fetch), "`).")]
            #[inline]
            #[track_caller]
            pub fn $fetch(&self, p: GlobalPtr<T>, val: T, order: Ordering) -> Future<T> {
                self.$fetch_with(p, val, order, operation_cx::as_future())
            }

            #[doc = concat!("[`", stringify!($fetch), "`](AtomicDomain::", stringify!($fetch), ") with completions (operation completion only, with the value read).")]
            #[inline]
            #[track_caller]
            pub fn $fetch_with<C: Completions<AtomicFetch<T>>>(&self, p: GlobalPtr<T>, val: T, order: Ordering, cxs: C) -> Returned<C, AtomicFetch<T>> {
                const { assert!(completion::requests_op_or_remote::<AtomicFetch<T>, C>(), "atomics need an operation_cx request (UPC++ spec §7.2.1)") };
                let op = operations!(@fetch $op);
                self.fetching(op, p, val, val, order, cxs)
            }
        )*}
    };
    (unary $($op:ident $name:ident $name_with:ident $fetch:ident $fetch_with:ident $what:literal;)*) => {
        impl<T: AtomicType> AtomicDomain<T> {$(
            #[doc = concat!("Atomically replaces the value at `p` by ", $what, " (UPC++ `atomic_domain::", stringify!($name), "`, §13.3 ¶42); returns a future of operation completion.")]
            #[inline]
            #[track_caller]
            pub fn $name(&self, p: GlobalPtr<T>, order: Ordering) -> Future<()> {
                self.$name_with(p, order, operation_cx::as_future())
            }

            #[doc = concat!("[`", stringify!($name), "`](AtomicDomain::", stringify!($name), ") with completions (operation completion only).")]
            #[inline]
            #[track_caller]
            pub fn $name_with<C: Completions<AtomicUpdate>>(&self, p: GlobalPtr<T>, order: Ordering, cxs: C) -> Returned<C, AtomicUpdate> {
                const { assert!(completion::requests_op_or_remote::<AtomicUpdate, C>(), "atomics need an operation_cx request (UPC++ spec §7.2.1)") };
                self.updating(AtomicOp::$op, p, T::ZERO, order, cxs)
            }

            #[doc = concat!("As [`", stringify!($name), "`](AtomicDomain::", stringify!($name), "), returning a future of the value read (UPC++ `atomic_domain::", stringify!($fetch), "`).")]
            #[inline]
            #[track_caller]
            pub fn $fetch(&self, p: GlobalPtr<T>, order: Ordering) -> Future<T> {
                self.$fetch_with(p, order, operation_cx::as_future())
            }

            #[doc = concat!("[`", stringify!($fetch), "`](AtomicDomain::", stringify!($fetch), ") with completions (operation completion only, with the value read).")]
            #[inline]
            #[track_caller]
            pub fn $fetch_with<C: Completions<AtomicFetch<T>>>(&self, p: GlobalPtr<T>, order: Ordering, cxs: C) -> Returned<C, AtomicFetch<T>> {
                const { assert!(completion::requests_op_or_remote::<AtomicFetch<T>, C>(), "atomics need an operation_cx request (UPC++ spec §7.2.1)") };
                let op = operations!(@fetch $op);
                self.fetching(op, p, T::ZERO, T::ZERO, order, cxs)
            }
        )*}
    };
    (@fetch Add) => { AtomicOp::FetchAdd };
    (@fetch Sub) => { AtomicOp::FetchSub };
    (@fetch Mul) => { AtomicOp::FetchMul };
    (@fetch Min) => { AtomicOp::FetchMin };
    (@fetch Max) => { AtomicOp::FetchMax };
    (@fetch BitAnd) => { AtomicOp::FetchBitAnd };
    (@fetch BitOr) => { AtomicOp::FetchBitOr };
    (@fetch BitXor) => { AtomicOp::FetchBitXor };
    (@fetch Inc) => { AtomicOp::FetchInc };
    (@fetch Dec) => { AtomicOp::FetchDec };
}

operations! {binary
    Add add add_with fetch_add fetch_add_with "its sum with `val` (`+`)";
    Sub sub sub_with fetch_sub fetch_sub_with "its difference with `val` (`-`)";
    Mul mul mul_with fetch_mul fetch_mul_with "its product with `val` (`*`)";
    Min min min_with fetch_min fetch_min_with "the smaller of it and `val` (`std::min`)";
    Max max max_with fetch_max fetch_max_with "the larger of it and `val` (`std::max`)";
    BitAnd bit_and bit_and_with fetch_bit_and fetch_bit_and_with "its bit-wise and with `val` (`&`; integer types only)";
    BitOr bit_or bit_or_with fetch_bit_or fetch_bit_or_with "its bit-wise or with `val` (`|`; integer types only)";
    BitXor bit_xor bit_xor_with fetch_bit_xor fetch_bit_xor_with "its bit-wise exclusive or with `val` (`^`; integer types only)";
}

operations! {unary
    Inc inc inc_with fetch_inc fetch_inc_with "itself plus one (`++`)";
    Dec dec dec_with fetch_dec fetch_dec_with "itself minus one (`--`)";
}

impl<T: AtomicType> Drop for AtomicDomain<T> {
    /// §13.3 ¶20: a domain must have been destroyed unless UPC++ was finalized since
    /// its creation.
    fn drop(&mut self) {
        if !self.destroyed && initialized() && !std::thread::panicking() {
            panic!(
                "upcxx::atomic_domain::~atomic_domain: the atomic domain over {} was dropped \
                 without destroy() while UPC++ is initialized (UPC++ spec §13.3 ¶20)",
                self.team.id()
            );
        }
    }
}

#[cold]
#[track_caller]
fn not_in_domain(op: AtomicOp, ops: &[AtomicOp]) -> ! {
    let names: Vec<&str> = ops.iter().map(|o| o.name()).collect();
    panic!(
        "upcxx::{}: atomic_op::{} is not among the domain's operations ({}) (UPC++ spec \
         §13.3)",
        op.call(),
        op.name(),
        names.join(", ")
    )
}
