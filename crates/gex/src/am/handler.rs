//! Handler entries (GASNet-EX `gex_AM_Entry_t`) and the token a running handler gets
//! (`gex_Token_t`). The two name each other: a handler function takes a token, and a
//! token names its handler's entry.

use std::cell::Cell;

use crate::client::Endpoint;
use crate::conduit::{Category, Inbound, Network, Rank};
use crate::runtime::Runtime;

/// Handler index (GASNet-EX `gex_AM_Index_t`).
pub type AmIndex = u8;

/// Smallest index a client may register at (GASNet-EX `GEX_AM_INDEX_BASE`).
pub const AM_INDEX_BASE: AmIndex = 128;

/// GASNet-EX `GASNET_HIDDEN_AM_CONCURRENCY_LEVEL`: 0, as handlers never run on a
/// thread the client does not own. The layer has no thread of its own: a handler runs
/// inside a call of the client's that polls, on that call's thread.
pub const HIDDEN_AM_CONCURRENCY_LEVEL: u32 = 0;

/// Largest number of handler arguments (GASNet-EX `gex_AM_MaxArgs`).
pub const fn max_args() -> usize {
    16
}

/// The handler function of an [`AmEntry`]. Short handlers get the arguments; Medium and
/// Long handlers also get the payload.
#[derive(Clone, Copy)]
pub enum HandlerFn {
    /// The handler of a Short AM: the token and the arguments.
    Short(fn(&Token<'_>, &[u32])),
    /// The handler of a Medium or Long AM: the token, the payload and the arguments.
    Payload(fn(&Token<'_>, &[u8], &[u32])),
}

/// The AM categories a handler accepts (GASNet-EX `GEX_FLAG_AM_{SHORT,MEDIUM,LONG,MEDLONG}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmCategory {
    /// Called only as a Short (`GEX_FLAG_AM_SHORT`).
    Short,
    /// Called only as a Medium (`GEX_FLAG_AM_MEDIUM`).
    Medium,
    /// Called only as a Long (`GEX_FLAG_AM_LONG`).
    Long,
    /// Called as a Medium or a Long (`GEX_FLAG_AM_MEDLONG`).
    MedLong,
}

/// Whether a handler runs as Request, Reply or both (`GEX_FLAG_AM_{REQUEST,REPLY,REQREP}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmRole {
    /// Called only as a Request (`GEX_FLAG_AM_REQUEST`).
    Request,
    /// Called only as a Reply (`GEX_FLAG_AM_REPLY`).
    Reply,
    /// Called as a Request or a Reply (`GEX_FLAG_AM_REQREP`).
    ReqRep,
}

/// One handler to register (GASNet-EX `gex_AM_Entry_t`).
#[derive(Clone, Copy)]
pub struct AmEntry {
    /// 0 ("don't care") or in `[AM_INDEX_BASE, 255]`; set by registration when 0.
    pub index: AmIndex,
    /// The handler on this process (`gex_fnptr`).
    pub handler: HandlerFn,
    /// The categories it is called as (the category part of `gex_flags`).
    pub category: AmCategory,
    /// Whether it is called as Request, Reply or both (the role part of `gex_flags`).
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
    /// The fixed index lies below [`AM_INDEX_BASE`]: it is reserved for the library.
    IndexReserved(AmIndex),
    /// A handler is already registered at this fixed index.
    IndexTaken(AmIndex),
    /// A "don't care" entry found no free index.
    TableFull,
    /// An entry declares more than [`max_args`] arguments (`gex_nargs`).
    TooManyArgs {
        /// The entry's `name`.
        name: &'static str,
        /// The number of arguments it declared.
        nargs: usize,
    },
    /// The function kind does not match the category: a Short handler needs
    /// [`HandlerFn::Short`], a Medium or Long one [`HandlerFn::Payload`].
    WrongFunction {
        /// The entry's `name`.
        name: &'static str,
    },
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
    /// Whether the running handler is a Request (`gex_is_req`).
    pub is_request: bool,
    /// Whether the running handler is a Long (`gex_is_long`).
    pub is_long: bool,
    /// The entry the handler was registered with (`gex_entry`).
    pub entry: &'static AmEntry,
    /// The endpoint the message arrived at (`gex_ep`, one of the two queries every
    /// implementation supports): this process's one endpoint.
    pub ep: Endpoint,
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
    /// The runtime the handler runs in (for the library's own handlers).
    pub(crate) fn runtime(&self) -> &'static Runtime {
        self.rt
    }

    /// GASNet-EX `gex_Token_Info`: all queries are supported.
    pub fn info(&self) -> TokenInfo {
        TokenInfo {
            src_rank: self.msg.src,
            is_request: self.msg.network == Network::Request,
            is_long: self.msg.category == Category::Long,
            entry: self.entry,
            ep: Endpoint(()),
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
