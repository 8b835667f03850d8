//! Handler entries (GASNet-EX `gex_AM_Entry_t`) and the token a running handler gets
//! (`gex_Token_t`). The two name each other: a handler function takes a token, and a
//! token names its handler's entry.

use std::cell::Cell;

use crate::conduit::{Category, Inbound, Network, Rank};
use crate::runtime::Runtime;

/// Handler index (GASNet-EX `gex_AM_Index_t`).
pub type AmIndex = u8;

/// Smallest index a client may register at (GASNet-EX `GEX_AM_INDEX_BASE`).
pub const AM_INDEX_BASE: AmIndex = 128;

/// Largest number of handler arguments (GASNet-EX `gex_AM_MaxArgs`).
pub const fn max_args() -> usize {
    16
}

/// The handler function of an [`AmEntry`]. Short handlers get the arguments; Medium and
/// Long handlers also get the payload.
#[derive(Clone, Copy)]
pub enum HandlerFn {
    Short(fn(&Token<'_>, &[u32])),
    Payload(fn(&Token<'_>, &[u8], &[u32])),
}

/// The AM categories a handler accepts (GASNet-EX `GEX_FLAG_AM_{SHORT,MEDIUM,LONG,MEDLONG}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmCategory {
    Short,
    Medium,
    Long,
    MedLong,
}

/// Whether a handler runs as Request, Reply or both (`GEX_FLAG_AM_{REQUEST,REPLY,REQREP}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmRole {
    Request,
    Reply,
    ReqRep,
}

/// One handler to register (GASNet-EX `gex_AM_Entry_t`).
#[derive(Clone, Copy)]
pub struct AmEntry {
    /// 0 ("don't care") or in `[AM_INDEX_BASE, 255]`; set by registration when 0.
    pub index: AmIndex,
    pub handler: HandlerFn,
    pub category: AmCategory,
    pub role: AmRole,
    /// Number of arguments every invocation passes.
    pub nargs: usize,
    /// Client data available to the handler through [`TokenInfo::entry`].
    pub cdata: usize,
    /// Used in error messages.
    pub name: &'static str,
    /// Whether this handler's messages are reported to a GASP tool
    /// (`GASP_GEX_AM_REQUEST`/`_REPLY`/`_HANDLER`); true unless [`AmEntry::unreported`]
    /// is used by a runtime layered on gex that reports its own events instead.
    pub reported: bool,
}

impl AmEntry {
    /// A Short handler taking `nargs` arguments.
    pub fn short(
        name: &'static str,
        role: AmRole,
        nargs: usize,
        f: fn(&Token<'_>, &[u32]),
    ) -> AmEntry {
        AmEntry {
            index: 0,
            handler: HandlerFn::Short(f),
            category: AmCategory::Short,
            role,
            nargs,
            cdata: 0,
            name,
            reported: true,
        }
    }

    /// A Medium, Long or MedLong handler taking `nargs` arguments.
    pub fn payload(
        name: &'static str,
        category: AmCategory,
        role: AmRole,
        nargs: usize,
        f: fn(&Token<'_>, &[u8], &[u32]),
    ) -> AmEntry {
        AmEntry {
            index: 0,
            handler: HandlerFn::Payload(f),
            category,
            role,
            nargs,
            cdata: 0,
            name,
            reported: true,
        }
    }

    /// Keeps this handler's messages out of GASP events (see [`AmEntry::reported`]).
    pub fn unreported(mut self) -> AmEntry {
        self.reported = false;
        self
    }

    /// Sets the fixed index to register at.
    pub fn at(mut self, index: AmIndex) -> AmEntry {
        self.index = index;
        self
    }

    pub(super) fn accepts(&self, category: Category, network: Network) -> bool {
        let cat = matches!(
            (self.category, category),
            (AmCategory::Short, Category::Short)
                | (AmCategory::Medium, Category::Medium)
                | (AmCategory::Long, Category::Long)
                | (AmCategory::MedLong, Category::Medium | Category::Long)
        );
        let role = matches!(
            (self.role, network),
            (AmRole::ReqRep, _)
                | (AmRole::Request, Network::Request)
                | (AmRole::Reply, Network::Reply)
        );
        cat && role
    }
}

/// Why a handler table could not be registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    IndexReserved(AmIndex),
    IndexTaken(AmIndex),
    TableFull,
    TooManyArgs { name: &'static str, nargs: usize },
    WrongFunction { name: &'static str },
}

impl std::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegisterError::IndexReserved(i) => write!(
                f,
                "handler index {i} is reserved for the library (client indices are {AM_INDEX_BASE}..=255 or 0)"
            ),
            RegisterError::IndexTaken(i) => write!(f, "handler index {i} is already registered"),
            RegisterError::TableFull => write!(f, "no free handler index is left"),
            RegisterError::TooManyArgs { name, nargs } => write!(
                f,
                "handler {name} takes {nargs} arguments, more than max_args() = {}",
                max_args()
            ),
            RegisterError::WrongFunction { name } => write!(
                f,
                "handler {name}: a Short handler needs HandlerFn::Short, others HandlerFn::Payload"
            ),
        }
    }
}

impl std::error::Error for RegisterError {}

/// What a handler may learn about the message it runs for (GASNet-EX `gex_Token_Info`).
#[derive(Clone, Copy)]
pub struct TokenInfo {
    /// Job rank of the sender.
    pub src_rank: Rank,
    pub is_request: bool,
    pub is_long: bool,
    pub entry: &'static AmEntry,
}

/// Names the message a handler runs for, and the way back to its sender
/// (GASNet-EX `gex_Token_t`). Only valid during the handler.
pub struct Token<'a> {
    pub(super) rt: &'static Runtime,
    pub(super) msg: &'a Inbound<'a>,
    pub(super) entry: &'static AmEntry,
    pub(super) replied: Cell<bool>,
}

impl Token<'_> {
    /// GASNet-EX `gex_Token_Info`: all queries are supported.
    pub fn info(&self) -> TokenInfo {
        TokenInfo {
            src_rank: self.msg.src,
            is_request: self.msg.network == Network::Request,
            is_long: self.msg.category == Category::Long,
            entry: self.entry,
        }
    }

    /// Job rank of the sender.
    pub fn src_rank(&self) -> Rank {
        self.msg.src
    }

    /// For a Long, the destination address the initiator passed.
    pub fn dest_addr(&self) -> usize {
        self.msg.dest_addr
    }
}
