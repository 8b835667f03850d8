//! Tests of the event table: tag order, argument lists, and that the typed builders
//! make the lists the C header declares.

use super::*;

#[test]
fn tags_are_sorted_unique_and_below_user_events() {
    for pair in EVENTS.windows(2) {
        assert!(
            pair[0].tag < pair[1].tag,
            "{} / {}",
            pair[0].name,
            pair[1].name
        );
    }
    assert!(EVENTS.iter().all(|e| e.tag < USEREVT_START && e.tag != 0));
    assert_eq!(by_tag(GASP_UPC_PUT).unwrap().name, "GASP_UPC_PUT");
    assert_eq!(
        by_name("GASP_UPCXX_RPC_SEND").unwrap().tag,
        GASP_UPCXX_RPC_SEND
    );
    assert!(by_tag(USEREVT_START).is_none());
}

#[test]
fn argument_names() {
    let put = by_tag(GASP_UPC_NB_PUT_INIT).unwrap();
    assert_eq!(
        put.start_arg_names().collect::<Vec<_>>(),
        ["is_relaxed", "dst", "src", "n"]
    );
    assert_eq!(put.end_arg_names().last(), Some("handle"));
    assert_eq!(
        by_tag(GASP_UPCXX_FUTURE_WAIT)
            .unwrap()
            .start_arg_names()
            .count(),
        0
    );
}

/// The C type a C tool reads an argument as (the docs of [`crate::Arg`]'s variants).
fn c_type(arg: &crate::Arg<'_>) -> &'static str {
    use crate::Arg;
    match arg {
        Arg::Int(_) | Arg::Rank(_) => "int",
        Arg::Size(_) | Arg::Bytes(_) => "size_t",
        Arg::Ptr(_) => "void *",
        Arg::GPtr(_) => "gasp_upcxx_gptr_t *",
        Arg::Handle(_) => "gasp_upc_nb_handle_t",
        Arg::U64(_) => "uint64_t",
        Arg::I64(_) => "int64_t",
        Arg::F64(_) => "double",
        Arg::Str(_) => "const char *",
    }
}

/// `list`, a C argument list of the table, declares what the builder made: `args`,
/// from parameters named `names`.
fn assert_declares(event: &str, list: &str, args: &[crate::Arg<'_>], names: &[&str]) {
    let declared: Vec<(&str, &str)> = list
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "(none)")
        .map(|a| {
            let name = a.rsplit([' ', '*']).next().unwrap();
            (a[..a.len() - name.len()].trim(), name)
        })
        .collect();
    let built: Vec<(&str, &str)> = args.iter().map(c_type).zip(names.iter().copied()).collect();
    assert_eq!(args.len(), names.len(), "{event}");
    assert_eq!(declared, built, "{event}: `{list}`");
}

#[test]
fn the_argument_builders_make_the_lists_the_table_declares() {
    let built = built();
    assert_eq!(built.len(), EVENTS.len());
    for (b, e) in built.iter().zip(EVENTS) {
        assert_eq!(b.tag, e.tag, "{}", e.name);
        assert_declares(e.name, e.start_args, &b.start, b.start_names);
        match (&b.end, e.shape) {
            (Some((args, names)), Shape::Interval) => {
                assert_declares(e.name, e.end_args, args, names);
            }
            (None, Shape::Atomic) => assert_eq!(e.end_args, "", "{}", e.name),
            _ => panic!("{}: an END builder for an interval event only", e.name),
        }
    }
    // A list the tools read by name, spelled out.
    let put = args::GASP_UPC_NB_PUT_INIT.end(1, crate::GPtr::new(3, 64), 8, 16, 42);
    assert_eq!(
        put.args(),
        [
            crate::Arg::Int(1),
            crate::Arg::GPtr(crate::GPtr { rank: 3, addr: 64 }),
            crate::Arg::Ptr(8),
            crate::Arg::Bytes(16),
            crate::Arg::Handle(42),
        ]
    );
}

#[test]
fn runs_user_code_matches_the_table() {
    for e in EVENTS {
        assert_eq!(
            runs_user_code(e.tag),
            e.timing == Timing::Execute,
            "{}",
            e.name
        );
    }
}

#[test]
fn shapes_are_consistent() {
    for e in EVENTS {
        match e.shape {
            Shape::Atomic => assert!(e.end_args.is_empty(), "{}", e.name),
            Shape::Interval => assert!(!e.end_args.is_empty(), "{}", e.name),
        }
    }
}

/// The END list of a non-blocking initiation: its START list, then the handle.
fn assert_start_then_handle(e: &EventDef) {
    let start: Vec<_> = e.start_arg_names().collect();
    let end: Vec<_> = e.end_arg_names().collect();
    assert_eq!(end[..end.len() - 1], start[..], "{}", e.name);
    assert_eq!(end.last(), Some(&"handle"), "{}", e.name);
    assert_eq!(arg_position(e.end_args, "handle"), Some(start.len()));
}

/// GASP §5.4.8: the collectives report the UPC collective events with the spec's
/// argument lists (local buffers as `void *`, `upc_flag_t` and `upc_op_t` as `int`),
/// each an initiation whose END adds the handle its sync names.
#[test]
fn collectives_report_the_upc_collective_events_as_initiations() {
    let data = "void *dst, void *src, size_t nbytes, int upc_flags";
    let permute = "void *dst, void *src, void *perm, size_t nbytes, int upc_flags";
    let reduce = "void *dst, void *src, int upc_op, size_t nelems, size_t elem_size, \
                  void *func, int upc_flags, int reduction_type";
    let upc = [
        ("GASP_UPC_ALL_BROADCAST", data),
        ("GASP_UPC_ALL_SCATTER", data),
        ("GASP_UPC_ALL_GATHER", data),
        ("GASP_UPC_ALL_GATHER_ALL", data),
        ("GASP_UPC_ALL_EXCHANGE", data),
        ("GASP_UPC_ALL_PERMUTE", permute),
        ("GASP_UPC_ALL_REDUCE", reduce),
        ("GASP_UPC_ALL_PREFIX_REDUCE", reduce),
        // Ours, with the list of the reduction to one.
        ("GASP_GEX_COLL_REDUCE_TO_ALL", reduce),
    ];
    for (name, list) in upc {
        let e = by_name(name).unwrap_or_else(|| panic!("{name} is in the table"));
        assert_eq!(
            (e.layer, e.shape, e.timing),
            (Layer::Gex, Shape::Interval, Timing::Initiate),
            "{name}"
        );
        assert_eq!(e.start_args, list, "{name}");
        assert_start_then_handle(e);
    }
    let barrier = by_tag(GASP_GEX_COLL_BARRIER).unwrap();
    assert_eq!(barrier.timing, Timing::Initiate);
    assert_eq!(barrier.start_args, "int team");
    assert_start_then_handle(barrier);
    // A broadcast's list as the tool receives it: the bytes of a block are bytes moved.
    let bcast = args::GASP_UPC_ALL_BROADCAST.end(0x1000, 0x2000, 64, 0, 7);
    assert_eq!(
        bcast.args(),
        [
            crate::Arg::Ptr(0x1000),
            crate::Arg::Ptr(0x2000),
            crate::Arg::Bytes(64),
            crate::Arg::Int(0),
            crate::Arg::Handle(7),
        ]
    );
}

/// Splitting and destroying a team are blocking and collective, and name the team.
#[test]
fn team_split_and_destroy_are_blocking_and_name_the_team() {
    let split = by_tag(GASP_GEX_TM_SPLIT).unwrap();
    assert_eq!(
        (split.shape, split.timing),
        (Shape::Interval, Timing::Blocking)
    );
    assert_eq!(split.start_args, "int team, int size, int color, int key");
    assert_eq!(
        split.end_arg_names().collect::<Vec<_>>(),
        ["team", "size", "color", "key", "new_team", "new_size"]
    );
    let destroy = by_tag(GASP_GEX_TM_DESTROY).unwrap();
    assert_eq!(
        (destroy.shape, destroy.timing),
        (Shape::Interval, Timing::Blocking)
    );
    assert_eq!(destroy.start_args, "int team, int size");
    assert_eq!(destroy.end_args, destroy.start_args);
    for e in [split, destroy] {
        assert!(
            !runs_user_code(e.tag) && !is_communication(e.tag),
            "{}",
            e.name
        );
    }
}

/// GASP §5.4.8's `gasp_upc_reduction_t`, in the spec's order, then ours.
#[test]
fn reduction_types_are_numbered_in_the_spec_order() {
    let names: Vec<&str> = reduction::ALL.iter().map(|r| r.0).collect();
    let spec = ["C", "UC", "S", "US", "I", "UI", "L", "UL", "F", "D", "LD"];
    for (i, (name, value)) in reduction::ALL.iter().enumerate() {
        assert_eq!(*value, i as i32, "{name}");
    }
    assert_eq!(
        names[..spec.len()],
        spec.map(|s| format!("GASP_UPC_REDUCTION_{s}"))[..]
    );
    assert_eq!(names[spec.len()..], ["GASP_GEX_REDUCTION_USER"]);
    assert_eq!((reduction::D, reduction::USER), (9, 11));
}

/// The non-contiguous transfers (GASNet-EX VIS, UPC++ ch. 15) have events of our own
/// (GASP has none), initiations whose END names the handle, counted as communication
/// with the target as the peer and `n` as the bytes.
#[test]
fn non_contiguous_transfers_are_communication_initiations() {
    for tag in [
        GASP_GEX_VIS_PUT,
        GASP_GEX_VIS_GET,
        GASP_UPCXX_VIS_PUT,
        GASP_UPCXX_VIS_GET,
    ] {
        let e = by_tag(tag).unwrap();
        assert_eq!((e.shape, e.timing), (Shape::Interval, Timing::Initiate));
        assert_eq!(
            e.start_args, "int target, int shape, size_t runs, size_t n",
            "{}",
            e.name
        );
        assert_eq!(e.end_arg_names().last(), Some("handle"));
        assert!(is_communication(tag) && !runs_user_code(tag), "{}", e.name);
    }
    assert_eq!(by_tag(GASP_GEX_VIS_PUT).unwrap().layer, Layer::Gex);
    assert_eq!(by_tag(GASP_UPCXX_VIS_GET).unwrap().layer, Layer::Upcxx);
}

/// Remote atomics (ours: GASP 1.4 has no atomic events) are communication: the
/// profiler's matrix finds the peer in the target and the bytes in `nbytes`; creating
/// and destroying a domain are blocking collectives that are not.
#[test]
fn atomic_operations_are_communication_and_domains_are_not() {
    for tag in [GASP_GEX_AD_OP, GASP_UPCXX_ATOMIC_OP] {
        let e = by_tag(tag).unwrap();
        assert!(is_communication(tag) && !runs_user_code(tag), "{}", e.name);
        assert!(
            e.start_args.contains("gasp_upcxx_gptr_t *target"),
            "{}",
            e.name
        );
        assert!(e.start_args.contains("size_t nbytes"), "{}", e.name);
    }
    assert_eq!(by_tag(GASP_GEX_AD_OP).unwrap().timing, Timing::Initiate);
    assert!(by_tag(GASP_GEX_AD_OP).unwrap().end_args.ends_with("handle"));
    let op =
        args::GASP_GEX_AD_OP.start(crate::GPtr::new(3, 0x40), 0x1000, 1 << 10, 1 << 2, 5, 0, 8);
    assert_eq!(op.args()[0], crate::Arg::GPtr(crate::GPtr::new(3, 0x40)));
    assert_eq!(op.args()[6], crate::Arg::Bytes(8));
    for tag in [
        GASP_GEX_AD_CREATE,
        GASP_GEX_AD_DESTROY,
        GASP_UPCXX_ATOMIC_DOMAIN_CONSTRUCT,
        GASP_UPCXX_ATOMIC_DOMAIN_DESTROY,
    ] {
        let e = by_tag(tag).unwrap();
        assert_eq!((e.shape, e.timing), (Shape::Interval, Timing::Blocking));
        assert!(e.start_args.starts_with("int team") || e.start_args.starts_with("uint64_t team"));
        assert!(!is_communication(tag), "{}", e.name);
    }
}

/// A copy between memory kinds is communication (the profiler's matrix finds the peer
/// in its first argument and the bytes in `n`); the device calls around it are not.
#[test]
fn copies_are_communication_and_device_calls_are_not() {
    let e = by_tag(GASP_UPCXX_COPY).unwrap();
    assert!(is_communication(GASP_UPCXX_COPY) && !runs_user_code(GASP_UPCXX_COPY));
    assert!(e.start_args.starts_with("int peer"), "{}", e.start_args);
    assert!(e.start_args.ends_with("size_t n"), "{}", e.start_args);
    let copy = args::GASP_UPCXX_COPY.start(
        3,
        crate::GPtr::new(3, 0x40),
        crate::GPtr::new(0, 0x80),
        2,
        1,
        64,
    );
    assert_eq!(copy.args()[0], crate::Arg::Rank(3));
    assert_eq!(copy.args()[5], crate::Arg::Bytes(64));
    for tag in [
        GASP_UPCXX_DEVICE_CONSTRUCT,
        GASP_UPCXX_DEVICE_DESTROY,
        GASP_UPCXX_DEVICE_SEGMENT,
        GASP_UPCXX_DEVICE_ALLOC,
        GASP_UPCXX_DEVICE_FREE,
    ] {
        let e = by_tag(tag).unwrap();
        assert_eq!(
            (e.shape, e.timing),
            (Shape::Interval, Timing::Blocking),
            "{}",
            e.name
        );
        assert!(!is_communication(tag), "{}", e.name);
    }
}

/// A C tool receives every argument of every system event: none has more
/// integer-class or `double` arguments than the slots `ctool` passes.
#[test]
fn every_system_event_fits_the_c_tools_argument_slots() {
    use crate::ctool::{MAX_FLOAT_ARGS, MAX_INT_ARGS};
    for e in EVENTS {
        for list in [e.start_args, e.end_args] {
            let args: Vec<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty() && *a != "(none)")
                .collect();
            let floats = args.iter().filter(|a| a.starts_with("double ")).count();
            let ints = args.len() - floats;
            assert!(
                ints <= MAX_INT_ARGS && floats <= MAX_FLOAT_ARGS,
                "{}: {list}",
                e.name
            );
        }
    }
}
