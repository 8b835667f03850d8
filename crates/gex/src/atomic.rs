//! Atomic domains and remote atomic operations (GASNet-EX spec, "Remote Atomics":
//! "Atomic Domains", `gex_AD_Create`, `gex_AD_Destroy`, the `gex_AD_Query*` calls,
//! CData, and "Remote Atomic Operations", `gex_AD_OpNB_*`, `gex_AD_OpNBI_*`).
//!
//! ```
//! use gex::ops::Op;
//! use gex::{AtomicDomain, Client, Flags, Segment};
//!
//! let (client, _ep, team) = Client::init("AD_DOC", Flags::NONE).unwrap();
//! let _segment = Segment::attach(&team, 1 << 16).unwrap();
//! // Collective: every rank of the team, the same type, operations and flags.
//! let ad = AtomicDomain::create(&team, gex::ops::Dt::I64, Op::FAdd | Op::Set, Flags::NONE);
//! let word = team.segment_bound(0).unwrap().owner_addr;
//! if team.rank() == 0 {
//!     ad.op_blocking(0, word, Op::Set, 40i64, 0, Flags::NONE);
//! }
//! team.barrier();
//! let before = ad.op_blocking(0, word, Op::FAdd, 1i64, 0, Flags::AD_ACQ);
//! assert!(before >= Some(40));
//! team.barrier();
//! ad.destroy();
//! client.finalize();
//! ```
//!
//! # The API
//!
//! An [`AtomicDomain`] is a handle (the spec's `gex_AD_t`), cheap to clone. The spec's
//! typed families `gex_AD_OpNB_[DATATYPE]` and `gex_AD_OpNBI_[DATATYPE]` are one generic
//! call each, [`AtomicDomain::op_nb`] and [`AtomicDomain::op_nbi`], over the sealed
//! trait [`AtomicType`] of the six data types; the type must be the domain's (checked
//! at every call). Those two write the fetched value into caller memory that must
//! outlive the call until the operation is synchronized, so they are `unsafe`, as the
//! NB and NBI gets of `rma` are. [`AtomicDomain::op_blocking`], which the spec does not
//! have, is the safe form: it returns the fetched value.
//!
//! Every call checks, before anything happens, and panics naming the call: a domain
//! destroyed or of another type, an operation not in the domain's set, a rank outside
//! the team (or, with [`Flags::RANK_IS_JOBRANK`], a job rank that is not a member), a
//! target misaligned for the type or outside the target's bound segment, a missing or
//! misaligned result location for a fetching operation, flags the call does not take,
//! and a `MY_RANK`/`MY_NBRHD` assertion that does not hold.
//!
//! # How an operation runs
//!
//! Where the target's segment is mapped in this process (every segment on one host:
//! the conduit's `translate` gives the local address), an operation is a CPU atomic on
//! the shared mapping, computed by [`AtomicType::apply`] (`atomic/compute.rs`), and is
//! complete when the call returns. NB calls then return [`Event::invalid`] (the spec's
//! `GEX_EVENT_INVALID` for a synchronous completion).
//!
//! Where it is not (the mpi conduit, a target on another host), the operation is an
//! Active Message round trip (`atomic/remote.rs`): a Request carries it to the target's
//! owner, whose handler runs the same `apply` on its own mapping of the word and
//! replies with the fetched value; the operation completes when the Reply has stored
//! it. NB calls return an event that completes then, NBI calls count as pending in
//! their category until then, and `op_blocking` polls until then. Every check is made
//! at the initiator, before the Request is sent. These operations need the target to
//! make progress (to poll), which the spec allows (see `atomic/remote.rs`).
//!
//! Either way every operation on a word is a CPU atomic made on the owner's host, so
//! operations of ranks on that host (through the mapping) and of ranks elsewhere
//! (through messages) are all atomic with respect to each other. That is why remote
//! words are not updated with MPI's own atomics (`MPI_Fetch_and_op`,
//! `MPI_Compare_and_swap`): MPI accumulate operations are atomic only with respect to
//! other MPI accumulates on the same window, not to CPU atomics of ranks that map the
//! memory. (It also keeps clear of MPI libraries whose one-sided compare-and-swap is
//! unreliable over shared-memory windows.)
//!
//! `GEX_AD_PATH=am` in the environment makes domains created afterwards send every
//! operation to the owner, mapped or not (the owner itself included), so that the
//! message path is tested and measured on one host; `auto`, the default, chooses by
//! the mapping.
//!
//! NBI calls count under the spec's categories: `GEX_EC_PUT` for `GEX_OP_SET`,
//! `GEX_EC_GET` for `GEX_OP_GET`, `GEX_EC_RMW` for every other operation.
//! `GEX_FLAG_IMMEDIATE` returns [`NoOp`], having done nothing, only when a message to
//! another host finds no room in the owner's queue; a mapped target never lacks
//! resources.
//!
//! # What the spec allows, and what this implementation does
//!
//! * **Coherence with other accesses.** The spec guarantees atomicity only among
//!   operations on the same domain, and forbids any other access to the target during
//!   an "atomic access phase". Ours are CPU atomics, which are also atomic with respect
//!   to other CPU atomics (another domain, `std::sync::atomic` on the same word), but
//!   programs must not rely on that: the spec does not grant it.
//! * **Ordering.** Without flags an operation is `Relaxed`. `GEX_FLAG_AD_REL` makes it a
//!   release, `GEX_FLAG_AD_ACQ` an acquire, both an `AcqRel` read-modify-write; a `GET`
//!   with `REL` is a sequentially consistent fence and a load, a `SET` with `ACQ` a store
//!   and such a fence (a release or acquire fence would let the load pass the store). On a mapped target the operation is complete at return, so initiation and
//!   synchronization are the same point for the ordering the spec defines. Through a
//!   message, the owner's handler applies the same ordering there; the Request is sent
//!   after the initiator's earlier accesses and the Reply handler stores the result
//!   before it marks the operation complete (a release that the synchronizing thread
//!   acquires), so accesses ordered before or after the operation stay so.
//! * **`MY_RANK`, `MY_NBRHD`, `FAVOR_*`** are hints to the implementation; the path
//!   is chosen by where the target is mapped, not by them. The `MY_*` assertions are
//!   checked nevertheless (a false one is the caller's bug), the `FAVOR_*` ones only
//!   for exclusivity.
//! * **Integers** follow C arithmetic, except that signed overflow, undefined in C,
//!   wraps.
//! * **Floating point** (the spec lists deviations from IEEE 754 it permits): `(F)CAS`
//!   compares bits, as if on integers (so `-0.0` does not match `0.0`, and a NaN
//!   matches the same NaN); `MIN`/`MAX` are the spec's C expressions in floating point,
//!   `(op0 < op1) ? op0 : op1` and `(op0 > op1) ? op0 : op1`, so when either value is a
//!   NaN, or they compare equal (`-0.0` and `0.0`), the result is `op1`. Signalling
//!   NaNs are not treated specially.
//!
//! The files: this one holds the domain and the calls, `atomic/check.rs` the checks
//! every operation makes and their messages, `atomic/compute.rs` the computation,
//! `atomic/remote.rs` the messages to the owner of a target this process does not map.
//!
//! GASP: every operation reports `GASP_GEX_AD_OP`, an initiation whose END carries its
//! handle; creation and destruction report `GASP_GEX_AD_CREATE` and
//! `GASP_GEX_AD_DESTROY` (our events: GASP 1.4 has none for atomics).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use gasp::GPtr;

use crate::client::{CData, CDataSlot};
use crate::conduit::{Completion, Conduit, Rank};
use crate::context;
use crate::event::{self, Event, EventCategory};
use crate::ops::{Dt, Op, OpSet};
use crate::runtime::runtime;
use crate::team::Team;
use crate::{Flags, NoOp};

mod check;
mod compute;
mod remote;

pub(crate) use remote::handler_entries;

use check::Target;

pub use compute::{AtomicType, MemOrder};

/// The flags `gex_AD_Create` takes: one of the `FAVOR` hints at most.
const CREATE_FLAGS: [Flags; 3] = [
    Flags::AD_FAVOR_MY_RANK,
    Flags::AD_FAVOR_MY_NBRHD,
    Flags::AD_FAVOR_REMOTE,
];

/// The flags `gex_AD_Op*` take.
const OP_FLAGS: Flags = Flags(
    Flags::IMMEDIATE.bits()
        | Flags::AD_MY_RANK.bits()
        | Flags::AD_MY_NBRHD.bits()
        | Flags::AD_ACQ.bits()
        | Flags::AD_REL.bits()
        | Flags::RANK_IS_JOBRANK.bits(),
);

/// An atomic domain (GASNet-EX `gex_AD_t`): a team, one data type and a set of
/// operations, through which remote atomics on that type are made.
#[derive(Debug, Clone)]
pub struct AtomicDomain {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    team: Team,
    dt: Dt,
    ops: OpSet,
    flags: Flags,
    /// The job rank of each member, by team rank; `None` for the primordial team,
    /// whose ranks are job ranks. Kept here so that an operation looks up no table.
    members: Option<Box<[Rank]>>,
    /// This process's job rank.
    me: Rank,
    /// Whether every operation goes by message, mapped target or not
    /// (`GEX_AD_PATH=am`).
    messages: bool,
    destroyed: AtomicBool,
    cdata: CDataSlot,
    /// The team's name for GASP events.
    gasp_team: i32,
}

impl AtomicDomain {
    /// GASNet-EX `gex_AD_Create`: creates a domain for the operations `ops` on data type
    /// `dt` over `team`, with at most one of the `FAVOR` hints in `flags`. Collective
    /// over the team: every member passes the same `dt`, `ops` and `flags` (checked: a
    /// mismatch fails the job) and the call returns once all have entered it.
    ///
    /// # Panics
    /// If `dt` is [`Dt::User`], `ops` is empty or holds an operation not valid for
    /// atomics on `dt` ([`Op::valid_for_atomic`]), `flags` holds anything but one
    /// `FAVOR` hint, the team was destroyed, or in a restricted context.
    #[track_caller]
    pub fn create(team: &Team, dt: Dt, ops: impl Into<OpSet>, flags: Flags) -> AtomicDomain {
        const CALL: &str = "AtomicDomain::create";
        let ops = ops.into();
        let rt = runtime(CALL);
        context::check_may_communicate(CALL);
        let data = team.data(CALL);
        if !dt.is_builtin() {
            panic!(
                "gex::{CALL}: {} is not a data type of remote atomics",
                dt.name()
            );
        }
        if ops.is_empty() {
            panic!("gex::{CALL}: the set of operations is empty");
        }
        if let Some(op) = ops.iter().find(|op| !op.valid_for_atomic(dt)) {
            panic!(
                "gex::{CALL}: {} is not an atomic operation on {} (GASNet-EX \"Operation \
                 codes for atomics and reductions\")",
                op.name(),
                dt.name()
            );
        }
        let favor = CREATE_FLAGS.iter().filter(|f| flags.contains(**f)).count();
        let others = CREATE_FLAGS.iter().fold(flags, |rest, f| rest.without(*f));
        if favor > 1 || others != Flags::NONE {
            panic!(
                "gex::{CALL}: flags {:#x} are not one of GEX_FLAG_AD_FAVOR_{{MY_RANK,MY_NBRHD,\
                 REMOTE}} (which exclude each other)",
                flags.bits()
            );
        }
        let gasp_team = data.shared_name();
        let (d, o, f) = (dt.bit() as i32, ops.bits() as i32, flags.bits() as i32);
        let span = gasp::span!(GASP_GEX_AD_CREATE, gasp_team, d, o, f);
        let words = [
            0xAD,
            u64::from(dt.bit()),
            u64::from(ops.bits()),
            u64::from(flags.bits()),
        ];
        team.agreement_nb(CALL, &words).wait();
        let domain = AtomicDomain {
            state: Arc::new(State {
                team: *team,
                dt,
                ops,
                flags,
                members: (!team.is_primordial()).then(|| data.members.clone()),
                me: rt.conduit.rank(),
                messages: remote::forced(),
                destroyed: AtomicBool::new(false),
                cdata: CDataSlot::default(),
                gasp_team,
            }),
        };
        gasp::end!(span, gasp_team, d, o, f);
        domain
    }

    /// GASNet-EX `gex_AD_Destroy`: collective over the domain's team, without barrier
    /// synchronization. Every operation on the domain must be complete everywhere
    /// before any rank calls it (in practice: synchronize, then a barrier). Every later
    /// use of the domain, through any of its handles, fails naming the call.
    ///
    /// # Panics
    /// If the domain was destroyed already, or in a restricted context.
    #[track_caller]
    pub fn destroy(&self) {
        const CALL: &str = "AtomicDomain::destroy";
        runtime(CALL);
        context::check_may_communicate(CALL);
        let st = self.live(CALL);
        let span = gasp::span!(GASP_GEX_AD_DESTROY, st.gasp_team);
        st.destroyed.store(true, Ordering::Release);
        gasp::end!(span, st.gasp_team);
    }

    /// GASNet-EX `gex_AD_QueryFlags`: the flags passed at creation.
    #[track_caller]
    pub fn flags(&self) -> Flags {
        self.live("AtomicDomain::flags").flags
    }

    /// GASNet-EX `gex_AD_QueryTM`: the team passed at creation.
    #[track_caller]
    pub fn team(&self) -> Team {
        self.live("AtomicDomain::team").team
    }

    /// GASNet-EX `gex_AD_QueryDT`: the data type passed at creation.
    #[track_caller]
    pub fn dt(&self) -> Dt {
        self.live("AtomicDomain::dt").dt
    }

    /// GASNet-EX `gex_AD_QueryOps`: the set of operations passed at creation.
    #[track_caller]
    pub fn ops(&self) -> OpSet {
        self.live("AtomicDomain::ops").ops
    }

    /// GASNet-EX `gex_AD_SetCData`.
    #[track_caller]
    pub fn set_cdata(&self, data: Option<CData>) {
        self.live("AtomicDomain::set_cdata").cdata.set(data)
    }

    /// GASNet-EX `gex_AD_QueryCData`: `None` for a new domain.
    #[track_caller]
    pub fn cdata(&self) -> Option<CData> {
        self.live("AtomicDomain::cdata").cdata.get()
    }

    /// GASNet-EX `gex_AD_OpNB_[DATATYPE]`: performs `opcode` atomically on the `T` at
    /// `tgt_addr` (an address in the target's address space, inside its bound segment)
    /// of team rank `tgt_rank` (a job rank with [`Flags::RANK_IS_JOBRANK`]), with
    /// `operand1` and `operand2` where the operation takes them (ignored otherwise). A
    /// fetching operation writes the value the target held before (`op0`) to `result`
    /// by the time the returned event is synchronized. `flags` may hold `IMMEDIATE`,
    /// one of `AD_MY_RANK`/`AD_MY_NBRHD`, `AD_ACQ`, `AD_REL` and `RANK_IS_JOBRANK`.
    ///
    /// # Safety
    /// For a fetching operation `result` must be valid for writes of a `T` and not
    /// otherwise accessed until the event is synchronized; it is ignored (and may be
    /// null) for the others.
    ///
    /// # Panics
    /// See the [module documentation](self): every check is made before the operation.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[track_caller]
    pub unsafe fn op_nb<T: AtomicType>(
        &self,
        result: *mut T,
        tgt_rank: Rank,
        tgt_addr: usize,
        opcode: Op,
        operand1: T,
        operand2: T,
        flags: Flags,
    ) -> Result<Event, NoOp> {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.nb(
                "AtomicDomain::op_nb",
                result,
                tgt_rank,
                tgt_addr,
                opcode,
                operand1,
                operand2,
                flags,
            )
        }
    }

    /// [`op_nb`](AtomicDomain::op_nb) for the call `call`.
    ///
    /// # Safety
    /// As for [`op_nb`](AtomicDomain::op_nb).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[track_caller]
    unsafe fn nb<T: AtomicType>(
        &self,
        call: &'static str,
        result: *mut T,
        tgt_rank: Rank,
        tgt_addr: usize,
        opcode: Op,
        operand1: T,
        operand2: T,
        flags: Flags,
    ) -> Result<Event, NoOp> {
        let args = (tgt_rank, tgt_addr, opcode, operand1, operand2, flags);
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.initiate(call, result, args, false, |c| match c {
                Ok(c) => {
                    let e = Event::from_completion(c);
                    let handle = e.gasp_handle();
                    (Ok(e), handle)
                }
                Err(NoOp) => (Err(NoOp), gasp::events::NB_TRIVIAL),
            })
        }
    }

    /// Checks and performs an operation inside its GASP event, handing its completion
    /// to `finish`, which returns what the call returns and the operation's GASP handle
    /// (the one place the three forms share). A `blocking` call's operation has
    /// completed when `finish` gets it.
    ///
    /// # Safety
    /// As for [`op_nb`](AtomicDomain::op_nb), until `finish`'s completion is
    /// synchronized.
    #[inline]
    #[track_caller]
    unsafe fn initiate<T: AtomicType, R>(
        &self,
        call: &'static str,
        result: *mut T,
        (tgt_rank, tgt_addr, opcode, operand1, operand2, flags): (Rank, usize, Op, T, T, Flags),
        blocking: bool,
        finish: impl FnOnce(Result<Completion, NoOp>) -> (R, u64),
    ) -> R {
        let target = self.check::<T>(call, result, tgt_rank, tgt_addr, opcode, flags);
        let span = gasp::span!(
            GASP_GEX_AD_OP,
            GPtr::new(target.rank, tgt_addr),
            result as usize,
            opcode.bit() as i32,
            T::DT.bit() as i32,
            operand1.to_bits(),
            operand2.to_bits(),
            std::mem::size_of::<T>()
        );
        // SAFETY: `check` found the target inside its segment and aligned; `result` is
        // the caller's to keep valid.
        let c = unsafe {
            run(
                call, &target, tgt_addr, result, opcode, operand1, operand2, flags, blocking,
            )
        };
        let (r, _handle) = finish(c);
        gasp::end!(
            span,
            GPtr::new(target.rank, tgt_addr),
            result as usize,
            opcode.bit() as i32,
            T::DT.bit() as i32,
            operand1.to_bits(),
            operand2.to_bits(),
            std::mem::size_of::<T>(),
            _handle
        );
        r
    }

    /// GASNet-EX `gex_AD_OpNBI_[DATATYPE]`: [`op_nb`](AtomicDomain::op_nb) with implicit
    /// completion, synchronized with `nbi_wait`/`nbi_test` of `EventCategory::PUT` for
    /// `GEX_OP_SET`, `EventCategory::GET` for `GEX_OP_GET` and `EventCategory::RMW` for
    /// every other operation, or by the end of an access region.
    ///
    /// # Safety
    /// As for [`op_nb`](AtomicDomain::op_nb), until the operation is synchronized.
    ///
    /// # Panics
    /// See the [module documentation](self).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[track_caller]
    pub unsafe fn op_nbi<T: AtomicType>(
        &self,
        result: *mut T,
        tgt_rank: Rank,
        tgt_addr: usize,
        opcode: Op,
        operand1: T,
        operand2: T,
        flags: Flags,
    ) -> Result<(), NoOp> {
        const CALL: &str = "AtomicDomain::op_nbi";
        let args = (tgt_rank, tgt_addr, opcode, operand1, operand2, flags);
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.initiate(CALL, result, args, false, |c| match c {
                Ok(c) => {
                    let handle = event::nbi_handle(&c);
                    event::track_nbi(nbi_category(opcode), c);
                    (Ok(()), handle)
                }
                Err(NoOp) => (Err(NoOp), gasp::events::NB_TRIVIAL),
            })
        }
    }

    /// [`op_nb`](AtomicDomain::op_nb) and a wait for its event, safe: returns the
    /// fetched value (`op0`) of a fetching operation, `None` for the others. Not in the
    /// spec, which has no blocking remote atomics; reported as one `GASP_GEX_AD_OP`
    /// whose END comes after the operation completed (with a trivial handle).
    ///
    /// # Panics
    /// See the [module documentation](self). `IMMEDIATE` is not taken: the call blocks.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[track_caller]
    pub fn op_blocking<T: AtomicType>(
        &self,
        tgt_rank: Rank,
        tgt_addr: usize,
        opcode: Op,
        operand1: T,
        operand2: T,
        flags: Flags,
    ) -> Option<T> {
        const CALL: &str = "AtomicDomain::op_blocking";
        if flags.contains(Flags::IMMEDIATE) {
            panic!("gex::{CALL}: GEX_FLAG_IMMEDIATE is not taken by a blocking call");
        }
        let rt = runtime(CALL);
        let mut out = std::mem::MaybeUninit::<T>::uninit();
        let args = (tgt_rank, tgt_addr, opcode, operand1, operand2, flags);
        // SAFETY: `out` lives until the operation is complete, below, and is read only
        // after that, for a fetching operation, which wrote it.
        unsafe {
            self.initiate(CALL, out.as_mut_ptr(), args, true, |c| {
                // Complete before the event's END: nothing is left to synchronize.
                let c = c.expect("a call without IMMEDIATE waits for room");
                event::complete_blocking(rt, c);
                ((), gasp::events::NB_TRIVIAL)
            });
            opcode.is_fetching().then(|| out.assume_init())
        }
    }
}

/// Performs the operation on a checked target: on the mapping here, storing a fetched
/// value in `result` (complete at return), or by a message to the owner of a target
/// this process does not map (`remote`), complete at return too for a `blocking` call;
/// `NoOp` only for the latter, with `IMMEDIATE`.
///
/// # Safety
/// `target` comes from [`AtomicDomain::check`] for `T` and `opcode`, at `addr`; for a
/// fetching operation `result` is valid for writes of a `T` until completion.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn run<T: AtomicType>(
    call: &str,
    target: &Target,
    addr: usize,
    result: *mut T,
    opcode: Op,
    operand1: T,
    operand2: T,
    flags: Flags,
    blocking: bool,
) -> Result<Completion, NoOp> {
    let order = MemOrder {
        acquire: flags.contains(Flags::AD_ACQ),
        release: flags.contains(Flags::AD_REL),
    };
    let Some(local) = target.local else {
        let req = remote::Request {
            rank: target.rank,
            addr,
            result,
            opcode,
            operand1,
            operand2,
            order,
        };
        let rt = runtime(call);
        // SAFETY: the target is checked; `result` is the caller's to keep valid (for a
        // blocking call, until it returns).
        return unsafe {
            if blocking {
                remote::send_blocking(rt, call, &req);
                Ok(Completion::Done)
            } else {
                remote::send(rt, call, &req, flags)
            }
        };
    };
    // SAFETY: the target is a `T` in a segment mapped for the life of the job, aligned
    // (checked), and in an atomic access phase accessed only by atomics (the spec's
    // rule for the caller); `opcode` is in the domain's set, valid for `T::DT`.
    let op0 = unsafe { T::apply(local as *mut T, opcode, operand1, operand2, order) };
    if opcode.is_fetching() {
        // SAFETY: the caller's contract; non-null and aligned (checked).
        unsafe { result.write(op0) };
    }
    Ok(Completion::Done)
}

/// The NBI category of an operation ("Remote Atomic Operations", "Return value").
fn nbi_category(op: Op) -> EventCategory {
    match op {
        Op::Set => EventCategory::PUT,
        Op::Get => EventCategory::GET,
        _ => EventCategory::RMW,
    }
}
