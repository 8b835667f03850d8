//! The composition root: client initialization, which creates the runtime and hands it
//! every part that progress runs (the AM dispatcher, the barriers, the collective
//! engine); segment attach and finalize, which are collective; and `exit`.
//!
//! This is the only module that knows every part of the layer.

use crate::client::{Client, Endpoint, InitError, ObjectState, Segment};
use crate::conduit::{Conduit, Selected};
use crate::context::check_may_communicate;
use crate::runtime::{install, runtime, try_runtime, Runtime};
use crate::team::{self, Team};
use crate::Flags;

fn valid_client_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('A'..='Z'))
        && name.len() >= 2
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(rt) = try_runtime() {
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
        if flags != Flags::NONE {
            return Err(InitError::BadInitFlags(flags));
        }
        if try_runtime().is_some() {
            return Err(InitError::AlreadyInitialized);
        }
        crate::job::relaunch_if_requested();
        let conduit = <Selected as Conduit>::bootstrap();
        // Every part that progress runs is handed in here: the runtime knows none of
        // them by name.
        let rt = install(Runtime::new(
            conduit,
            crate::am::dispatch,
            vec![
                crate::barrier::advance,
                crate::barrier::team::advance,
                crate::coll::advance,
            ],
        ));
        ObjectState::new(name, flags).install();
        install_panic_hook();
        let [atomic_request, atomic_reply] = crate::atomic::handler_entries();
        let mut internal = vec![
            crate::barrier::handler_entry(),
            crate::coll::handler_entry(),
            atomic_request,
            atomic_reply,
        ];
        internal.extend(crate::rma::remote::handler_entries());
        internal.extend(crate::kinds::handler_entries());
        crate::am::register_internal(&mut internal);
        #[cfg(feature = "gasp")]
        attach_gasp_tool(rt);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        crate::backoff::set_oversubscribed(rt.conduit.nbrhd().0.len() > cpus);
        let team = team::install_world(rt.conduit.rank(), rt.conduit.size());
        Ok((Client(()), Endpoint(()), team))
    }

    /// Ends this rank's part in the job: a barrier over the primordial team, after
    /// which the rank may exit. A rank that exits after init without finalizing (or
    /// [`exit`]ing) is reported by the launcher as failed, and the job is stopped.
    #[track_caller]
    pub fn finalize(&self) {
        let rt = runtime("Client::finalize");
        check_may_communicate("Client::finalize");
        let span = gasp::span!(GASP_UPC_COLLECTIVE_EXIT, 0);
        // Before the barrier: after it, the owners of the device segments this process
        // mapped may free them without asking it.
        crate::kinds::close_imports();
        team::world(rt).barrier();
        gasp::end!(span, 0);
        #[cfg(feature = "gasp")]
        gasp::dispatch::finish();
        rt.finalized
            .store(true, std::sync::atomic::Ordering::Release);
        rt.conduit.finalize();
    }
}

/// Attaches the GASP tool chosen for this run, if any (GASP §3.2: after the runtime's
/// own initialization, before user code runs).
#[cfg(feature = "gasp")]
#[track_caller]
fn attach_gasp_tool(rt: &Runtime) {
    let (members, _) = rt.conduit.nbrhd();
    let mut local: Vec<u32> = members.to_vec();
    if local.is_empty() {
        local.push(rt.conduit.rank());
    }
    local.sort_unstable();
    if let Err(e) = gasp::dispatch::init(rt.conduit.rank(), rt.conduit.size(), local) {
        panic!("gex::Client::init: cannot attach the GASP tool: {e}");
    }
}

impl Segment {
    /// Allocates and binds this rank's segment (GASNet-EX `gex_Segment_Attach`).
    /// Collective over the primordial team, with an implicit barrier. `size` must be a
    /// non-zero multiple of [`PAGE_SIZE`](crate::PAGE_SIZE), at most
    /// [`max_segment_size`](crate::max_segment_size).
    #[track_caller]
    pub fn attach(team: &Team, size: usize) -> Result<Segment, InitError> {
        const CALL: &str = "Segment::attach";
        let rt = runtime(CALL);
        check_may_communicate(CALL);
        let max = rt.conduit.max_segment_size();
        if size == 0 || !size.is_multiple_of(crate::PAGE_SIZE) || size > max {
            return Err(InitError::BadSegmentSize { size, max });
        }
        if !team.is_primordial() {
            return Err(InitError::NotPrimordialTeam);
        }
        if ObjectState::attached(CALL) {
            return Err(InitError::AlreadyAttached);
        }
        let addr = rt.conduit.attach_segment(size);
        team.barrier();
        rt.conduit.segments_attached();
        if rt.conduit.am_rma_probe() {
            crate::rma::probe::choose_am_rma_blocking_max(rt, team);
        }
        ObjectState::attach(CALL, addr, size);
        Ok(Segment { addr, size })
    }
}

/// Ends the job now with `code` (`gasnet_exit`, which any one rank may call): this
/// process exits with `code`, and so does the job. With any other code than 0 the
/// launcher reports the rank and the call and stops the other ranks at once. With 0 the
/// other ranks leave with status 0 at their next wait for communication (as though
/// they had called `exit(0)` themselves); a rank still running 2 s after this one left
/// is stopped, the job still ending with 0 (by the smp launcher, see `job`; under
/// `mpirun`, by a leaving rank's `MPI_Abort` with status 0, after which `mpirun` prints
/// that the job was aborted; `srun` counts the ranks it killed as failed and exits
/// non-zero). Every rank calling `exit(0)` after a barrier is the clean
/// way to end a job this way.
#[track_caller]
pub fn exit(code: i32) -> ! {
    use std::sync::atomic::Ordering;
    if EXITING.swap(true, Ordering::AcqRel) {
        // Another thread of this process is in this call (a wait of this one may have
        // noticed the end it announced): it exits the process once the job's end is
        // under way, and an exit from here could cut that short (under mpirun, as a
        // rank leaving unfinalized).
        loop {
            std::thread::park();
        }
    }
    // After `Client::finalize` the conduit is gone (under mpirun: MPI finalized, the
    // host's queues freed): the process just exits.
    if let Some(rt) = try_runtime().filter(|rt| !rt.finalized.swap(true, Ordering::AcqRel)) {
        gasp::atomic!(GASP_UPC_NONCOLLECTIVE_EXIT, code);
        #[cfg(feature = "gasp")]
        gasp::dispatch::finish();
        if code == 0 {
            rt.conduit.end_job();
        } else {
            rt.conduit
                .record_failure(&format!("called gex::exit({code})"));
            // Under mpirun: the job ends now, with this status.
            #[cfg(feature = "mpi")]
            crate::conduit::mpi::abort_job(code);
        }
    }
    std::process::exit(code)
}

/// Set by the first call of [`exit`] in this process, which alone ends the job and the
/// process.
static EXITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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
