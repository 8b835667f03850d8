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
