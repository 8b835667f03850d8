//! The GASNet-EX objects: client, endpoint, team and segment, and the job queries
//! (GASNet-EX spec, "Client-Data", "Operations on gex_Client_t / gex_Segment_t /
//! gex_TM_t / gex_EP_t", "Neighborhood and Host").
//!
//! There is one client per process, created collectively by [`Client::init`], with its
//! primordial endpoint and team. The objects are small `Copy` handles onto that
//! process-wide state, so they can be passed around and stored freely.

use std::any::Any;
use std::sync::{Arc, Mutex, OnceLock};

use crate::conduit::{Conduit, Rank};
use crate::runtime::runtime;
use crate::Flags;

/// A client's data pointer on one object (GASNet-EX `gex_*_SetCData`).
pub type CData = Arc<dyn Any + Send + Sync>;

#[derive(Default, Debug)]
pub(crate) struct CDataSlot(Mutex<Option<CData>>);

impl CDataSlot {
    pub(crate) fn set(&self, v: Option<CData>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }
    pub(crate) fn get(&self) -> Option<CData> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The state behind the object handles, set once by `Client::init`.
pub(crate) struct ObjectState {
    name: String,
    flags: Flags,
    client: CDataSlot,
    endpoint: CDataSlot,
    segment: CDataSlot,
    attached: OnceLock<(usize, usize)>,
}

static OBJECTS: OnceLock<ObjectState> = OnceLock::new();

/// The objects' state, or a panic naming `call` if `Client::init` has not run.
#[track_caller]
fn objects(call: &str) -> &'static ObjectState {
    runtime(call);
    OBJECTS
        .get()
        .expect("set by Client::init before it returns")
}

impl ObjectState {
    /// The state of a new client named `name`, with no data and no segment.
    pub(crate) fn new(name: &str, flags: Flags) -> ObjectState {
        ObjectState {
            name: name.to_string(),
            flags,
            client: CDataSlot::default(),
            endpoint: CDataSlot::default(),
            segment: CDataSlot::default(),
            attached: OnceLock::new(),
        }
    }

    /// Makes `self` the process's object state (once, from `Client::init`).
    pub(crate) fn install(self) {
        let _ = OBJECTS.set(self);
    }

    /// Records the attached segment; false if one was attached already.
    pub(crate) fn attach(call: &str, addr: usize, size: usize) -> bool {
        objects(call).attached.set((addr, size)).is_ok()
    }

    /// Whether a segment is attached.
    pub(crate) fn attached(call: &str) -> bool {
        objects(call).attached.get().is_some()
    }
}

/// The client (GASNet-EX `gex_Client_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client(pub(crate) ());

/// The primordial endpoint (GASNet-EX `gex_EP_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint(pub(crate) ());

/// A rank's segment: the memory other ranks may access (GASNet-EX `gex_Segment_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub(crate) addr: usize,
    pub(crate) size: usize,
}

/// Why `Client::init` or `Segment::attach` failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitError {
    /// The client name does not match `[A-Z][A-Z0-9_]+` (`gex_Client_Init`).
    BadClientName(String),
    /// `gex_Client_Init` was given flags: the spec allows only
    /// `GEX_FLAG_USES_GASNET1`, which asks for the GASNet-1 API this layer does not
    /// provide, and "otherwise must be 0".
    BadInitFlags(Flags),
    /// This process already has a client: one `gex_Client_Init` per job.
    AlreadyInitialized,
    /// The segment size is zero, not a multiple of [`PAGE_SIZE`](crate::PAGE_SIZE), or
    /// over [`max_segment_size`].
    BadSegmentSize {
        /// The size asked for.
        size: usize,
        /// The largest size this job allows.
        max: usize,
    },
    /// This rank's endpoint already has a segment bound (`gex_Segment_Attach`).
    AlreadyAttached,
    /// `gex_Segment_Attach` over a team other than the one `Client::init` made (the
    /// spec requires that one: the segment is bound on every rank of the job).
    NotPrimordialTeam,
}

impl std::fmt::Display for InitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InitError::BadClientName(n) => {
                write!(f, "client name {n:?} does not match [A-Z][A-Z0-9_]+")
            }
            InitError::BadInitFlags(flags) => write!(
                f,
                "Client::init takes no flags ({flags:?}): GASNet-EX allows only \
                 GEX_FLAG_USES_GASNET1, for the GASNet-1 API, which this layer does not \
                 provide"
            ),
            InitError::AlreadyInitialized => write!(f, "a client already exists in this process"),
            InitError::BadSegmentSize { size, max } => write!(
                f,
                "segment size {size} must be a non-zero multiple of {} and at most {max} \
                 (raise the limit with --segment-size or UPCXX_SEGMENT_SIZE)",
                crate::PAGE_SIZE
            ),
            InitError::AlreadyAttached => write!(f, "a segment is already attached"),
            InitError::NotPrimordialTeam => write!(
                f,
                "a segment is attached over the team Client::init made, not a team split \
                 from it"
            ),
        }
    }
}

impl std::error::Error for InitError {}

impl Client {
    /// GASNet-EX `gex_Client_QueryName`.
    pub fn name(&self) -> &'static str {
        &objects("Client::name").name
    }

    /// GASNet-EX `gex_Client_QueryFlags`.
    pub fn flags(&self) -> Flags {
        objects("Client::flags").flags
    }

    /// GASNet-EX `gex_Client_SetCData`.
    pub fn set_cdata(&self, data: Option<CData>) {
        objects("Client::set_cdata").client.set(data)
    }

    /// GASNet-EX `gex_Client_QueryCData`.
    pub fn cdata(&self) -> Option<CData> {
        objects("Client::cdata").client.get()
    }
}

impl Endpoint {
    /// GASNet-EX `gex_EP_QueryClient`.
    pub fn client(&self) -> Client {
        Client(())
    }

    /// GASNet-EX `gex_EP_QueryFlags`: the flags of its creation; the primordial
    /// endpoint is created by `Client::init`, with none.
    pub fn flags(&self) -> Flags {
        Flags::NONE
    }

    /// GASNet-EX `gex_EP_QuerySegment`: the bound segment, once attached.
    pub fn segment(&self) -> Option<Segment> {
        let (addr, size) = *objects("Endpoint::segment").attached.get()?;
        Some(Segment { addr, size })
    }

    /// GASNet-EX `gex_EP_SetCData`.
    pub fn set_cdata(&self, data: Option<CData>) {
        objects("Endpoint::set_cdata").endpoint.set(data)
    }

    /// GASNet-EX `gex_EP_QueryCData`.
    pub fn cdata(&self) -> Option<CData> {
        objects("Endpoint::cdata").endpoint.get()
    }
}

impl Segment {
    /// GASNet-EX `gex_Segment_QueryAddr`.
    pub fn addr(&self) -> *mut u8 {
        self.addr as *mut u8
    }

    /// GASNet-EX `gex_Segment_QuerySize`.
    pub fn size(&self) -> usize {
        self.size
    }

    /// GASNet-EX `gex_Segment_QueryFlags`: the flags of its creation; `attach` takes
    /// none.
    pub fn flags(&self) -> Flags {
        Flags::NONE
    }

    /// GASNet-EX `gex_Segment_QueryClient`.
    pub fn client(&self) -> Client {
        Client(())
    }

    /// GASNet-EX `gex_Segment_SetCData`.
    pub fn set_cdata(&self, data: Option<CData>) {
        objects("Segment::set_cdata").segment.set(data)
    }

    /// GASNet-EX `gex_Segment_QueryCData`.
    pub fn cdata(&self) -> Option<CData> {
        objects("Segment::cdata").segment.get()
    }
}

/// The largest segment [`Segment::attach`] accepts (`gasnet_getMaxLocalSegmentSize`).
#[track_caller]
pub fn max_segment_size() -> usize {
    runtime("max_segment_size").conduit.max_segment_size()
}

/// This process's rank in the job (GASNet-EX `gex_System_QueryJobRank`).
#[track_caller]
pub fn job_rank() -> Rank {
    runtime("job_rank").conduit.rank()
}

/// Number of processes in the job (GASNet-EX `gex_System_QueryJobSize`).
#[track_caller]
pub fn job_size() -> Rank {
    runtime("job_size").conduit.size()
}

/// Members of a neighbourhood or host (GASNet-EX `gex_RankInfo_t` array), sorted by
/// job rank, and this process's index among them.
#[derive(Debug, Clone, Copy)]
pub struct RankSet {
    /// The job ranks of the members (`gex_jobrank` of each `gex_RankInfo_t`).
    pub members: &'static [Rank],
    /// This process's index in `members` (`my_info_index_p`).
    pub my_index: Rank,
}

/// The processes that share memory with this one (GASNet-EX
/// `gex_System_QueryNbrhdInfo`).
#[track_caller]
pub fn nbrhd_info() -> RankSet {
    let (members, my_index) = runtime("nbrhd_info").conduit.nbrhd();
    RankSet { members, my_index }
}

/// The processes on this host (GASNet-EX `gex_System_QueryHostInfo`).
#[track_caller]
pub fn host_info() -> RankSet {
    let (members, my_index) = runtime("host_info").conduit.host();
    RankSet { members, my_index }
}

/// Position of this process's neighbourhood and host among all of the job's
/// (GASNet-EX `gex_System_QueryMyPosition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MyPosition {
    /// Number of distinct neighbourhoods in the job.
    pub nbrhd_set_size: Rank,
    /// Index of this process's neighbourhood, in `[0, nbrhd_set_size)`.
    pub nbrhd_set_rank: Rank,
    /// Number of distinct hosts in the job.
    pub host_set_size: Rank,
    /// Index of this process's host, in `[0, host_set_size)`.
    pub host_set_rank: Rank,
}

/// GASNet-EX `gex_System_QueryMyPosition`.
#[track_caller]
pub fn my_position() -> MyPosition {
    let (nbrhd_set_size, nbrhd_set_rank, host_set_size, host_set_rank) =
        runtime("my_position").conduit.nbrhd_set();
    MyPosition {
        nbrhd_set_size,
        nbrhd_set_rank,
        host_set_size,
        host_set_rank,
    }
}
