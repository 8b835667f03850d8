//! GASP and `tracing` both ways on a UPC++ program of 2 ranks (`gasp::tools::tracing`):
//!
//! * the forwarder (registered by the program, or `GASP_TOOL=tracing` with the
//!   program's global subscriber) makes each interval event (gasp-1.4 §3.2 START …
//!   END) a span entered and closed on its thread, with the call site as the span's
//!   `file` and `line`, the column and the START's arguments as fields, and each atomic
//!   event a `tracing` event; measurement control (§3.3) stops it;
//! * the layer makes the program's own spans (`#[tracing::instrument]`) GASP user
//!   events (§5.3), which the built-in profiler counts and the tracer draws around the
//!   communication they contain.
#![cfg(feature = "gasp")]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gasp::formats::{Profile, Trace};
use gasp::tools::tracing::layer::UserEventLayer;
use gasp::Arg;
use gex::testing::{spmd_outcome, SpmdOptions};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Dispatch, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use upcxx::{rank_me, rank_n};

const ITERS: u64 = 12;
const PHASE: &str = "gasp tracing test phase";

/// A span or event as the recording layer saw it.
#[derive(Clone, Debug)]
struct Seen {
    name: &'static str,
    target: &'static str,
    file: Option<&'static str>,
    line: Option<u32>,
    fields: HashMap<&'static str, String>,
    /// The name of the span it was created in.
    parent: Option<&'static str>,
}

#[derive(Default)]
struct Seen3 {
    spans: Vec<Seen>,
    events: Vec<Seen>,
    closed: HashMap<&'static str, u64>,
}

/// A layer that records what reaches the subscriber.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Seen3>>);

struct Fields<'a>(&'a mut HashMap<&'static str, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

fn seen<S: Subscriber + for<'a> LookupSpan<'a>>(
    meta: &'static tracing::Metadata<'static>,
    ctx: &Context<'_, S>,
    fields: HashMap<&'static str, String>,
) -> Seen {
    Seen {
        name: meta.name(),
        target: meta.target(),
        file: meta.file(),
        line: meta.line(),
        fields,
        parent: ctx.lookup_current().map(|s| s.name()),
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let s = seen(attrs.metadata(), &ctx, fields);
        self.0.lock().unwrap().spans.push(s);
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let s = seen(event.metadata(), &ctx, fields);
        self.0.lock().unwrap().events.push(s);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let name = ctx.span(&id).expect("a live span").name();
        *self.0.lock().unwrap().closed.entry(name).or_default() += 1;
    }
}

#[test]
fn gasp_events_reach_a_tracing_subscriber_as_spans_and_events() {
    let Some(outcome) = spmd_outcome(SpmdOptions::new(2), || {
        let recorder = Recorder::default();
        let seen = recorder.0.clone();
        gasp::tools::tracing::register_with(Dispatch::new(
            tracing_subscriber::registry().with(recorder),
        ));
        upcxx::init();
        let peer = (rank_me() + 1) % rank_n();
        let phase = gasp::create_event(PHASE, Some("%d"));
        let mut rpc_line = 0;
        for i in 0..ITERS {
            gasp::event_start(phase, &[Arg::Int(i as i32)]);
            rpc_line = line!() + 1;
            let r = upcxx::rpc(peer, |x: u64| x + 1, (i,)).wait();
            assert_eq!(r, i + 1);
            gasp::event_end(phase, &[Arg::Int(i as i32)]);
        }
        gasp::event_atomic(phase, &[Arg::Int(7)]);
        // §3.3: while not measuring nothing is forwarded.
        assert!(gasp::control(false));
        upcxx::rpc(peer, |x: u64| x, (0,)).wait();
        gasp::event_atomic(phase, &[Arg::Int(8)]);
        assert!(!gasp::control(true));
        upcxx::barrier();

        let seen = seen.lock().unwrap();
        let named =
            |name: &str| -> Vec<&Seen> { seen.spans.iter().filter(|s| s.name == name).collect() };
        let sends = named("GASP_UPCXX_RPC_SEND");
        assert_eq!(sends.len() as u64, ITERS, "{sends:?}");
        for s in &sends {
            assert_eq!(s.target, "gasp::upcxx");
            assert_eq!((s.file, s.line), (Some(file!()), Some(rpc_line)));
            assert_eq!(s.fields["column"], "21", "{s:?}");
            assert_eq!(s.fields["target"], peer.to_string(), "{s:?}");
            assert_eq!(s.parent, Some(PHASE), "the user event's span encloses it");
        }
        assert_eq!(seen.closed.get("GASP_UPCXX_RPC_SEND"), Some(&ITERS));
        // The peer's RPCs ran here, inside this rank's waits, while this rank measured:
        // all of its loop's but the last, which may run in this rank's unmeasured wait
        // if this rank's loop ended first, and its unmeasured one if it arrived while
        // this rank measured again (§3.3: nothing is forwarded while not measuring).
        let executed = named("GASP_UPCXX_RPC_EXECUTE").len() as u64;
        assert!((ITERS - 1..=ITERS + 1).contains(&executed), "{executed}");
        let phases = named(PHASE);
        assert_eq!(phases.len() as u64, ITERS);
        assert!(phases.iter().all(|s| s.target == "gasp::user"));
        let values: Vec<&str> = phases.iter().map(|s| s.fields["arg0"].as_str()).collect();
        let want: Vec<String> = (0..ITERS).map(|i| i.to_string()).collect();
        assert_eq!(values, want);
        assert_eq!(seen.closed.get(PHASE), Some(&ITERS));
        let atomics: Vec<&Seen> = seen.events.iter().filter(|e| e.name == PHASE).collect();
        assert_eq!(atomics.len(), 1, "{atomics:?}");
        assert_eq!(atomics[0].fields["arg0"], "7");
        drop(seen);
        upcxx::finalize();
    }) else {
        return;
    };
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.failure);
}

#[test]
fn gasp_tool_tracing_forwards_to_the_programs_global_subscriber() {
    let mut opts = SpmdOptions::new(2);
    opts.env.push(("GASP_TOOL".into(), "tracing".into()));
    let Some(outcome) = spmd_outcome(opts, || {
        let recorder = Recorder::default();
        let seen = recorder.0.clone();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(recorder))
            .expect("the only subscriber");
        upcxx::init();
        let peer = (rank_me() + 1) % rank_n();
        for i in 0..ITERS {
            assert_eq!(upcxx::rpc(peer, |x: u64| x + 1, (i,)).wait(), i + 1);
        }
        upcxx::barrier();
        let seen = seen.lock().unwrap();
        let sends = seen
            .spans
            .iter()
            .filter(|s| s.name == "GASP_UPCXX_RPC_SEND" && s.file == Some(file!()))
            .count() as u64;
        assert_eq!(sends, ITERS);
        assert_eq!(seen.closed.get("GASP_UPCXX_RPC_SEND"), Some(&ITERS));
        drop(seen);
        upcxx::finalize();
    }) else {
        return;
    };
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.failure);
}

/// One RPC round trip inside a span of the program's own.
#[tracing::instrument(level = "info")]
fn exchange(i: u64) -> u64 {
    let peer = (rank_me() + 1) % rank_n();
    upcxx::rpc(peer, |x: u64| x * 2, (i,)).wait()
}

/// Runs the program whose spans the layer reports, under the built-in `tool`, on 2
/// ranks; the job's output file, parsed (`None` in the ranks).
fn layered<T: serde::de::DeserializeOwned>(tool: &str) -> Option<T> {
    let out =
        std::env::temp_dir().join(format!("upcxx-tracing-{tool}-{}.json", std::process::id()));
    let mut opts = SpmdOptions::new(2);
    opts.env.push(("GASP_TOOL".into(), tool.into()));
    opts.env
        .push(("GASP_OUT".into(), out.display().to_string()));
    opts.env.push(("GASP_TRACE_BUFFER".into(), "1".into()));
    let outcome = spmd_outcome(opts, || {
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(UserEventLayer::new()),
        )
        .expect("the only subscriber");
        upcxx::init();
        for i in 0..ITERS {
            assert_eq!(exchange(i), 2 * i);
        }
        upcxx::barrier();
        upcxx::finalize();
    })?;
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.failure);
    let parsed = serde_json::from_str(&std::fs::read_to_string(&out).expect(tool)).unwrap();
    std::fs::remove_file(&out).unwrap();
    Some(parsed)
}

#[test]
fn the_programs_spans_are_user_events_in_the_profile() {
    let Some(p) = layered::<Profile>("profile") else {
        return;
    };
    for rank in 0..2 {
        let rows: Vec<_> = p
            .events
            .iter()
            .filter(|r| r.rank == rank && r.name == "exchange")
            .collect();
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), ITERS, "{rows:?}");
        assert!(rows
            .iter()
            .all(|r| gasp::events::is_user_event(r.tag) && r.kind == "interval"));
        // The span's time includes the round trip it contains.
        let send: u64 = p
            .events
            .iter()
            .filter(|r| r.rank == rank && r.name == "GASP_UPCXX_RPC_SEND")
            .map(|r| r.total_ns)
            .sum();
        let span: u64 = rows.iter().map(|r| r.total_ns).sum();
        assert!(span >= send, "exchange {span} ns < its sends {send} ns");
    }
}

#[test]
fn the_programs_spans_enclose_their_communication_in_the_trace() {
    let Some(t) = layered::<Trace>("trace") else {
        return;
    };
    for rank in 0..2 {
        let of = |name: &str| -> Vec<(f64, f64)> {
            t.trace_events
                .iter()
                .filter(|e| e.pid == rank && e.ph == "X" && e.name == name)
                .map(|e| (e.ts, e.ts + e.dur.unwrap_or(0.0)))
                .collect()
        };
        let spans = of("exchange");
        let sends = of("GASP_UPCXX_RPC_SEND");
        assert_eq!(spans.len() as u64, ITERS);
        assert_eq!(sends.len() as u64, ITERS);
        for (start, end) in sends {
            assert!(
                spans.iter().any(|&(s, e)| s <= start && end <= e),
                "rank {rank}: the send at {start} µs is in no exchange span: {spans:?}"
            );
        }
    }
}
