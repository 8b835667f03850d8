//! The GASNet-EX objects: client, endpoint, team and segment, and the job queries
//! (GASNet-EX spec, "Client-Data", "Operations on gex_Client_t / gex_Segment_t /
//! gex_TM_t / gex_EP_t", "Neighborhood and Host").
//!
//! There is one client per process, created collectively by [`Client::init`], with its
//! primordial endpoint and team. The objects are small `Copy` handles onto that
//! process-wide state, so they can be passed around and stored freely.

use std::any::Any;
use std::sync::{Arc, Mutex, OnceLock};

use crate::conduit::{Active, BoundSegment, Conduit, Rank};
use crate::instrument::{gasp_atomic, gasp_end, gasp_span};
use crate::progress::{self, runtime, Runtime};
use crate::Flags;

/// A client's data pointer on one object (GASNet-EX `gex_*_SetCData`).
pub type CData = Arc<dyn Any + Send + Sync>;

#[derive(Default)]
struct CDataSlot(Mutex<Option<CData>>);

impl CDataSlot {
    fn set(&self, v: Option<CData>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }
    fn get(&self) -> Option<CData> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The state behind the object handles.
pub(crate) struct Objects {
    name: String,
    flags: Flags,
    client: CDataSlot,
    endpoint: CDataSlot,
    team: CDataSlot,
    segment: CDataSlot,
    attached: OnceLock<(usize, usize)>,
}

/// The client (GASNet-EX `gex_Client_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client(());

/// The primordial endpoint (GASNet-EX `gex_EP_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint(());

/// A team: an ordered set of endpoints (GASNet-EX `gex_TM_t`). The primordial team
/// holds one endpoint per rank of the job, in job-rank order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Team {
    rank: Rank,
    size: Rank,
}

/// A rank's segment: the memory other ranks may access (GASNet-EX `gex_Segment_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    addr: usize,
    size: usize,
}

/// Why `Client::init` or `Segment::attach` failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitError {
    BadClientName(String),
    AlreadyInitialized,
    BadSegmentSize { size: usize, max: usize },
    AlreadyAttached,
}

impl std::fmt::Display for InitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InitError::BadClientName(n) => {
                write!(f, "client name {n:?} does not match [A-Z][A-Z0-9_]+")
            }
            InitError::AlreadyInitialized => write!(f, "a client already exists in this process"),
            InitError::BadSegmentSize { size, max } => write!(
                f,
                "segment size {size} must be a non-zero multiple of {} and at most {max} \
                 (raise the limit with --segment-size or UPCXX_SEGMENT_SIZE)",
                crate::PAGE_SIZE
            ),
            InitError::AlreadyAttached => write!(f, "a segment is already attached"),
        }
    }
}

impl std::error::Error for InitError {}

fn valid_client_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('A'..='Z'))
        && name.len() >= 2
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(rt) = progress::try_runtime() {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "Box<dyn Any>".into());
            let place = info
                .location()
                .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_default();
            rt.conduit
                .record_failure(&format!("panicked{place}: {msg}"));
        }
        previous(info);
    }));
}

impl Client {
    /// Creates the client, its primordial endpoint and team (GASNet-EX
    /// `gex_Client_Init`). Collective over the job, with an implicit barrier.
    ///
    /// When the program was started as `UPCXX_RANKS=N program` without a launcher, this
    /// call starts the N-rank job (re-running the program) and exits with its status.
    #[track_caller]
    pub fn init(name: &str, flags: Flags) -> Result<(Client, Endpoint, Team), InitError> {
        if !valid_client_name(name) {
            return Err(InitError::BadClientName(name.to_string()));
        }
        if progress::try_runtime().is_some() {
            return Err(InitError::AlreadyInitialized);
        }
        crate::job::relaunch_if_requested();
        let conduit = <Active as Conduit>::bootstrap();
        let rt = progress::install(Runtime {
            conduit,
            handlers: crate::am::HandlerTable::new(),
            barrier: crate::barrier::BarrierState::new(),
            objects: Objects {
                name: name.to_string(),
                flags,
                client: CDataSlot::default(),
                endpoint: CDataSlot::default(),
                team: CDataSlot::default(),
                segment: CDataSlot::default(),
                attached: OnceLock::new(),
            },
        });
        install_panic_hook();
        crate::am::register_internal(rt, &mut [crate::barrier::handler_entry()]);
        #[cfg(feature = "gasp")]
        attach_gasp_tool(rt);
        let team = Team {
            rank: rt.conduit.rank(),
            size: rt.conduit.size(),
        };
        Ok((Client(()), Endpoint(()), team))
    }

    /// GASNet-EX `gex_Client_QueryName`.
    pub fn name(&self) -> &'static str {
        &runtime("Client::name").objects.name
    }

    /// GASNet-EX `gex_Client_QueryFlags`.
    pub fn flags(&self) -> Flags {
        runtime("Client::flags").objects.flags
    }

    /// GASNet-EX `gex_Client_SetCData`.
    pub fn set_cdata(&self, data: Option<CData>) {
        runtime("Client::set_cdata").objects.client.set(data)
    }

    /// GASNet-EX `gex_Client_QueryCData`.
    pub fn cdata(&self) -> Option<CData> {
        runtime("Client::cdata").objects.client.get()
    }

    /// Ends this rank's part in the job: a barrier over the primordial team, after
    /// which the rank may exit. A rank that exits after init without finalizing (or
    /// [`exit`]ing) is reported by the launcher as failed, and the job is stopped.
    #[track_caller]
    pub fn finalize(&self) {
        let rt = runtime("Client::finalize");
        progress::check_may_communicate("Client::finalize");
        let span = gasp_span!(GASP_UPC_COLLECTIVE_EXIT, [gasp::Arg::Int(0)]);
        Team {
            rank: rt.conduit.rank(),
            size: rt.conduit.size(),
        }
        .barrier();
        gasp_end!(span, [gasp::Arg::Int(0)]);
        #[cfg(feature = "gasp")]
        gasp::dispatch::finish();
        rt.conduit.finalize();
    }
}

/// Attaches the GASP tool chosen for this run, if any (GASP §3.2: after the runtime's
/// own initialization, before user code runs).
#[cfg(feature = "gasp")]
#[track_caller]
fn attach_gasp_tool(rt: &Runtime) {
    let (members, _) = rt.conduit.nbrhd();
    let first = members.first().copied().unwrap_or(rt.conduit.rank());
    let last = members.last().copied().unwrap_or(rt.conduit.rank());
    if let Err(e) = gasp::dispatch::init(rt.conduit.rank(), rt.conduit.size(), first..last + 1) {
        panic!("gex::Client::init: cannot attach the GASP tool: {e}");
    }
}

/// Ends this process now with `code` (like `gasnet_exit`). With code 0 the rank counts as
/// finished; any other code makes the launcher stop the whole job with that code.
#[track_caller]
pub fn exit(code: i32) -> ! {
    if let Some(rt) = progress::try_runtime() {
        gasp_atomic!(GASP_UPC_NONCOLLECTIVE_EXIT, [gasp::Arg::Int(code)]);
        #[cfg(feature = "gasp")]
        gasp::dispatch::finish();
        if code == 0 {
            rt.conduit.finalize();
        } else {
            rt.conduit
                .record_failure(&format!("called gex::exit({code})"));
        }
    }
    std::process::exit(code)
}

impl Endpoint {
    /// GASNet-EX `gex_EP_QueryClient`.
    pub fn client(&self) -> Client {
        Client(())
    }

    /// GASNet-EX `gex_EP_QuerySegment`: the bound segment, once attached.
    pub fn segment(&self) -> Option<Segment> {
        let (addr, size) = *runtime("Endpoint::segment").objects.attached.get()?;
        Some(Segment { addr, size })
    }

    /// GASNet-EX `gex_EP_SetCData`.
    pub fn set_cdata(&self, data: Option<CData>) {
        runtime("Endpoint::set_cdata").objects.endpoint.set(data)
    }

    /// GASNet-EX `gex_EP_QueryCData`.
    pub fn cdata(&self) -> Option<CData> {
        runtime("Endpoint::cdata").objects.endpoint.get()
    }
}

impl Team {
    /// This process's rank in the team (GASNet-EX `gex_TM_QueryRank`).
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Number of ranks in the team (GASNet-EX `gex_TM_QuerySize`).
    pub fn size(&self) -> Rank {
        self.size
    }

    /// GASNet-EX `gex_TM_QueryClient`.
    pub fn client(&self) -> Client {
        Client(())
    }

    /// GASNet-EX `gex_TM_QueryEP`.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint(())
    }

    /// GASNet-EX `gex_TM_SetCData`.
    pub fn set_cdata(&self, data: Option<CData>) {
        runtime("Team::set_cdata").objects.team.set(data)
    }

    /// GASNet-EX `gex_TM_QueryCData`.
    pub fn cdata(&self) -> Option<CData> {
        runtime("Team::cdata").objects.team.get()
    }

    /// The job rank of team member `rank`, or a panic naming `call`.
    #[inline]
    #[track_caller]
    pub(crate) fn job_rank_of(&self, call: &str, rank: Rank) -> Rank {
        if rank >= self.size {
            invalid_rank(call, rank, self.size);
        }
        rank
    }

    /// GASNet-EX `gex_TM_TranslateRankToJobrank`.
    #[track_caller]
    pub fn translate_rank_to_jobrank(&self, rank: Rank) -> Rank {
        self.job_rank_of("Team::translate_rank_to_jobrank", rank)
    }

    /// GASNet-EX `gex_TM_TranslateJobrankToRank`: `None` if not a member.
    pub fn translate_jobrank_to_rank(&self, jobrank: Rank) -> Option<Rank> {
        (jobrank < self.size).then_some(jobrank)
    }

    /// GASNet-EX `gex_Segment_QueryBound`: the segment bound to team member `rank`,
    /// with its address at the owner and here.
    #[track_caller]
    pub fn segment_bound(&self, rank: Rank) -> Option<BoundSegment> {
        const CALL: &str = "Team::segment_bound";
        let rt = runtime(CALL);
        progress::check_may_communicate(CALL);
        rt.conduit.bound_segment(self.job_rank_of(CALL, rank))
    }
}

#[cold]
#[track_caller]
fn invalid_rank(call: &str, rank: Rank, size: Rank) -> ! {
    panic!("gex::{call}: rank {rank} is not in the team (size {size})")
}

impl Segment {
    /// Allocates and binds this rank's segment (GASNet-EX `gex_Segment_Attach`).
    /// Collective over the primordial team, with an implicit barrier. `size` must be a
    /// non-zero multiple of [`PAGE_SIZE`](crate::PAGE_SIZE), at most
    /// [`max_segment_size`].
    #[track_caller]
    pub fn attach(team: &Team, size: usize) -> Result<Segment, InitError> {
        const CALL: &str = "Segment::attach";
        let rt = runtime(CALL);
        progress::check_may_communicate(CALL);
        let max = rt.conduit.max_segment_size();
        if size == 0 || !size.is_multiple_of(crate::PAGE_SIZE) || size > max {
            return Err(InitError::BadSegmentSize { size, max });
        }
        if rt.objects.attached.get().is_some() {
            return Err(InitError::AlreadyAttached);
        }
        let addr = rt.conduit.attach_segment(size);
        team.barrier();
        rt.conduit.segments_attached();
        let _ = rt.objects.attached.set((addr, size));
        Ok(Segment { addr, size })
    }

    /// GASNet-EX `gex_Segment_QueryAddr`.
    pub fn addr(&self) -> *mut u8 {
        self.addr as *mut u8
    }

    /// GASNet-EX `gex_Segment_QuerySize`.
    pub fn size(&self) -> usize {
        self.size
    }

    /// GASNet-EX `gex_Segment_QueryClient`.
    pub fn client(&self) -> Client {
        Client(())
    }

    /// GASNet-EX `gex_Segment_SetCData`.
    pub fn set_cdata(&self, data: Option<CData>) {
        runtime("Segment::set_cdata").objects.segment.set(data)
    }

    /// GASNet-EX `gex_Segment_QueryCData`.
    pub fn cdata(&self) -> Option<CData> {
        runtime("Segment::cdata").objects.segment.get()
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
    pub members: &'static [Rank],
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
    pub nbrhd_set_size: Rank,
    pub nbrhd_set_rank: Rank,
    pub host_set_size: Rank,
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

#[cfg(test)]
mod tests {
    #[test]
    fn client_names_follow_the_spec_pattern() {
        assert!(super::valid_client_name("UPCXX"));
        assert!(super::valid_client_name("A1_B"));
        assert!(!super::valid_client_name("upcxx"));
        assert!(!super::valid_client_name("A"));
        assert!(!super::valid_client_name("1ABC"));
        assert!(!super::valid_client_name("AB-C"));
    }
}
