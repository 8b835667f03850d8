//! The flags of the design document's collectives ("Argument conventions: flags"):
//! exactly one input sync mode, one output sync mode and one addressing scope, plus
//! `AGGREGATE`.

use crate::conduit::Rank;

/// The flags of a collective of the design document (`GASNET_COLL_*`). Exactly one
/// flag of each of the three categories must be given (there are no defaults):
/// `IN_*`, `OUT_*`, and `SINGLE` or `LOCAL`; `AGGREGATE` may be added.
///
/// ```
/// use gex::coll::CollFlags;
/// let f = CollFlags::IN_MYSYNC | CollFlags::OUT_ALLSYNC | CollFlags::LOCAL;
/// assert!(f.contains(CollFlags::OUT_ALLSYNC));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollFlags(u32);

impl CollFlags {
    /// All data movement may begin on any rank as soon as any rank has entered the call.
    pub const IN_NOSYNC: CollFlags = CollFlags(1);
    /// Data movement in or out of a rank's memory begins no earlier than that rank's
    /// call.
    pub const IN_MYSYNC: CollFlags = CollFlags(1 << 1);
    /// Data movement begins only when every rank has entered the call: until its own
    /// call, any rank may still write any rank's sources and destinations (with RMA, say),
    /// and the call moves what is there then.
    pub const IN_ALLSYNC: CollFlags = CollFlags(1 << 2);
    /// The sync may succeed at any time, so long as the last rank to sync does not do
    /// so before all data movement has completed.
    pub const OUT_NOSYNC: CollFlags = CollFlags(1 << 3);
    /// The sync succeeds once all data movement to and from this rank's areas has
    /// completed.
    pub const OUT_MYSYNC: CollFlags = CollFlags(1 << 4);
    /// The sync succeeds once all data movement to and from every rank's areas has
    /// completed.
    pub const OUT_ALLSYNC: CollFlags = CollFlags(1 << 5);
    /// UPC-style addressing: every rank passes every rank's addresses, identically.
    pub const SINGLE: CollFlags = CollFlags(1 << 6);
    /// Titanium-style addressing: each rank passes only its own addresses.
    pub const LOCAL: CollFlags = CollFlags(1 << 7);
    /// This call and the following ones up to the first without `AGGREGATE` form one
    /// aggregate with a single event.
    pub const AGGREGATE: CollFlags = CollFlags(1 << 8);

    /// The flags as a bit mask.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag in `other` is set in `self`.
    pub const fn contains(self, other: CollFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The categories of `self`, or a panic naming `call` and the category that is
    /// missing or given twice.
    #[track_caller]
    pub(crate) fn check(self, call: &str) -> Modes {
        let pick = |names: [(&str, CollFlags); 3], what: &str| -> usize {
            let set: Vec<usize> = (0..names.len())
                .filter(|&i| self.contains(names[i].1))
                .collect();
            if set.len() != 1 {
                let all: Vec<&str> = names
                    .iter()
                    .map(|n| n.0)
                    .filter(|n| !n.is_empty())
                    .collect();
                panic!(
                    "gex::{call}: the flags must hold exactly one {what} flag ({}), \
                     not {} (design document, \"Argument conventions\": there are no defaults)",
                    all.join(", "),
                    set.len()
                );
            }
            set[0]
        };
        let modes = [Sync::No, Sync::My, Sync::All];
        let input = pick(
            [
                ("IN_NOSYNC", Self::IN_NOSYNC),
                ("IN_MYSYNC", Self::IN_MYSYNC),
                ("IN_ALLSYNC", Self::IN_ALLSYNC),
            ],
            "input synchronization",
        );
        let output = pick(
            [
                ("OUT_NOSYNC", Self::OUT_NOSYNC),
                ("OUT_MYSYNC", Self::OUT_MYSYNC),
                ("OUT_ALLSYNC", Self::OUT_ALLSYNC),
            ],
            "output synchronization",
        );
        let scope = pick(
            [
                ("SINGLE", Self::SINGLE),
                ("LOCAL", Self::LOCAL),
                ("", CollFlags(1 << 31)),
            ],
            "addressing",
        );
        Modes {
            input: modes[input],
            output: modes[output],
            single: scope == 0,
            aggregate: self.contains(Self::AGGREGATE),
        }
    }
}

impl std::ops::BitOr for CollFlags {
    type Output = CollFlags;
    fn bitor(self, rhs: CollFlags) -> CollFlags {
        CollFlags(self.0 | rhs.0)
    }
}

/// One sync mode: NOSYNC, MYSYNC or ALLSYNC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    No,
    My,
    All,
}

/// The checked flags of one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Modes {
    pub(crate) input: Sync,
    pub(crate) output: Sync,
    pub(crate) single: bool,
    pub(crate) aggregate: bool,
}

/// An address argument: this rank's own address (with [`CollFlags::LOCAL`]), or every
/// rank's (with [`CollFlags::SINGLE`]).
///
/// Segments are not aligned (each rank maps its segment at its own address), so a
/// SINGLE argument is a list with one address per team rank, each in its owner's
/// address space (as RMA takes them: `Team::segment_bound(r).owner_addr + offset`),
/// identical on every rank. This is the design document's SINGLE case with the
/// "i"-interface's one-address-per-node list, which it names for unaligned segments.
#[derive(Debug, Clone, Copy)]
pub enum Addr<'a> {
    /// This rank's address (LOCAL).
    Local(*mut u8),
    /// Every team rank's address, by team rank, in its owner's address space (SINGLE).
    Single(&'a [usize]),
}

impl From<*mut u8> for Addr<'_> {
    fn from(p: *mut u8) -> Self {
        Addr::Local(p)
    }
}

impl From<*const u8> for Addr<'_> {
    fn from(p: *const u8) -> Self {
        Addr::Local(p.cast_mut())
    }
}

impl<'a> From<&'a [usize]> for Addr<'a> {
    fn from(list: &'a [usize]) -> Self {
        Addr::Single(list)
    }
}

impl Addr<'_> {
    /// This rank's address, after checking the argument against the flags (null, for
    /// no bytes, as a dangling pointer: see `coll::or_dangling`).
    #[track_caller]
    pub(crate) fn mine(&self, call: &str, what: &str, modes: Modes, me: Rank, n: Rank) -> *mut u8 {
        match (self, modes.single) {
            (Addr::Local(p), false) => crate::coll::or_dangling(*p),
            (Addr::Single(list), true) => {
                if list.len() != n as usize {
                    panic!(
                        "gex::{call}: a SINGLE `{what}` lists one address per team rank: {} for \
                         a team of {n}",
                        list.len()
                    );
                }
                list[me as usize] as *mut u8
            }
            (Addr::Local(_), true) => {
                panic!("gex::{call}: with SINGLE, `{what}` must be Addr::Single (every rank's address)")
            }
            (Addr::Single(_), false) => {
                panic!(
                    "gex::{call}: with LOCAL, `{what}` must be Addr::Local (this rank's address)"
                )
            }
        }
    }

    /// The SINGLE list (empty for LOCAL).
    pub(crate) fn list(&self) -> &[usize] {
        match self {
            Addr::Local(_) => &[],
            Addr::Single(list) => list,
        }
    }
}
