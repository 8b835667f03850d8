//! The blocking forms of the design document's collectives ("Handles": "All GASNet
//! collective initiation functions will have blocking and explicit-handle non-blocking
//! versions"): each starts its non-blocking form and waits for the event, so it
//! returns when the non-blocking form's sync would succeed, as the document's "trivial
//! one-liner" does. Two rules are the blocking forms' own (the flags section): they may
//! not carry `AGGREGATE`, and may not be called between the first and the last member
//! of an aggregate; either fails naming the call.

use super::flags::Addr;
use super::images::AddrList;
use super::{CollFlags, AGGREGATE};
use crate::conduit::Rank;
use crate::ops::{Dt, Op};
use crate::team::Team;

use super::super::reduce::ReduceFn;

/// Fails, naming `call`, where a blocking collective is not allowed.
#[track_caller]
pub(super) fn check_blocking(call: &str, flags: CollFlags) {
    if flags.contains(CollFlags::AGGREGATE) {
        panic!(
            "gex::{call}: AGGREGATE is not allowed in a blocking collective (GASNet \
             collectives design, flags); use the non-blocking form"
        );
    }
    if !AGGREGATE.with_borrow(Vec::is_empty) {
        panic!(
            "gex::{call}: a blocking collective inside an aggregate (a call with AGGREGATE \
             has not yet been followed by the aggregate's last member)"
        );
    }
}

/// One blocking form per non-blocking call: the same arguments, no event.
macro_rules! blocking {
    ($($name:ident => $nb:ident ( $($arg:ident : $ty:ty),* );)*) => {$(
        #[doc = concat!(
            "The blocking form of [`Team::", stringify!($nb), "`]: returns when its event ",
            "would complete.\n\n",
            "# Safety\n",
            "As for [`Team::", stringify!($nb), "`], its event completing when this returns.",
            "\n\n# Panics\n",
            "As [`Team::", stringify!($nb), "`]; also with `AGGREGATE` in `flags`, or ",
            "between the first and the last member of an aggregate.",
        )]
        #[allow(clippy::too_many_arguments)]
        #[track_caller]
        pub unsafe fn $name(&self, $($arg: $ty,)* flags: CollFlags) {
            check_blocking(concat!("Team::", stringify!($name)), flags);
            // SAFETY: the caller's contract, passed on for the whole life of the event,
            // which ends here.
            unsafe { self.$nb($($arg,)* flags) }.wait();
        }
    )*};
}

impl Team {
    blocking! {
        coll_broadcast => coll_broadcast_nb(root: Rank, dst: Addr<'_>, src: Addr<'_>, nbytes: usize);
        scatter => scatter_nb(root: Rank, dst: Addr<'_>, src: Addr<'_>, nbytes: usize);
        gather => gather_nb(root: Rank, dst: Addr<'_>, src: Addr<'_>, nbytes: usize);
        gather_all => gather_all_nb(dst: Addr<'_>, src: Addr<'_>, nbytes: usize);
        exchange => exchange_nb(dst: Addr<'_>, src: Addr<'_>, nbytes: usize);
        permute => permute_nb(perm: &[Rank], dst: Addr<'_>, src: Addr<'_>, nbytes: usize);
        broadcasti => broadcasti_nb(root: Rank, dst: AddrList<'_>, src: Addr<'_>, nbytes: usize);
        scatteri => scatteri_nb(root: Rank, dst: AddrList<'_>, src: Addr<'_>, nbytes: usize);
        gatheri => gatheri_nb(root: Rank, dst: Addr<'_>, src: AddrList<'_>, nbytes: usize);
        gather_alli => gather_alli_nb(dst: AddrList<'_>, src: AddrList<'_>, nbytes: usize);
        exchangei => exchangei_nb(dst: AddrList<'_>, src: AddrList<'_>, nbytes: usize);
        prefix_reduce => prefix_reduce_nb(
            dst: Addr<'_>,
            src: Addr<'_>,
            dt: Dt,
            dt_size: usize,
            dt_count: usize,
            op: Op,
            user: Option<(ReduceFn, usize)>
        );
    }
}
