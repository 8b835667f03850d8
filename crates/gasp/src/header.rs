//! The C header of our event tags, `include/gasp_upcxx.h` (GASP §5.5's `gasp_upc.h`
//! for this implementation), rendered from the event table so the two cannot drift:
//! the test below fails if the checked-in header differs from [`render_events_header`].

use std::fmt::Write;

use crate::events::{
    reduction, Shape, EVENTS, EVENTS_VERSION, NB_IMPLICIT, NB_TRIVIAL, USEREVT_END, USEREVT_START,
};

/// The text of `include/gasp_upcxx.h`.
pub fn render_events_header() -> String {
    let mut h = String::new();
    h += "/* gasp_upcxx.h: the GASP events of the Rust PGAS stack (upcxx and gex).\n";
    h += " * Generated from crates/gasp/src/events.rs; do not edit: a test checks that this\n";
    h += " * file matches the table. Included by gasp.h. */\n";
    h += "#ifndef GASP_UPCXX_H\n#define GASP_UPCXX_H\n\n#include <stdint.h>\n\n";
    let _ = writeln!(h, "#define GASP_UPCXX_VERSION {EVENTS_VERSION}\n");
    h += "/* A pointer-to-shared: the owning rank and the address in the owner's address\n";
    h += " * space. Events pass a pointer to one (GASP section 5.4). */\n";
    h += "typedef struct {\n    uint32_t rank;\n    uint64_t addr;\n} gasp_upcxx_gptr_t;\n\n";
    h += "/* The handle of a non-blocking operation (GASP section 5.4.6). */\n";
    h += "typedef uint64_t gasp_upc_nb_handle_t;\n";
    let _ = writeln!(h, "#define GASP_NB_TRIVIAL {NB_TRIVIAL}");
    let _ = writeln!(h, "#define GASP_NB_IMPLICIT {NB_IMPLICIT}\n");
    h += "/* The element type of a reduction (GASP section 5.4.8), passed as an int;\n";
    h += " * GASP_GEX_REDUCTION_USER is ours, for a user data type. */\n";
    h += "typedef enum {\n";
    for (name, value) in reduction::ALL {
        let _ = writeln!(h, "    {name} = {value},");
    }
    h += "} gasp_upc_reduction_t;\n\n";
    h += "/* Tags returned by gasp_create_event (GASP section 5.3). */\n";
    let _ = writeln!(h, "#define GASP_UPCXX_USEREVT_START {USEREVT_START:#x}");
    let _ = writeln!(h, "#define GASP_UPCXX_USEREVT_END {USEREVT_END:#x}\n");
    h += "/* System events. For each: the event types it is reported with and the varargs\n";
    h += " * of gasp_event_notify for each type. */\n";
    for e in EVENTS {
        h += "\n/* ";
        h += &e.doc.split_whitespace().collect::<Vec<_>>().join(" ");
        h += "\n";
        match e.shape {
            Shape::Interval => {
                let _ = writeln!(h, " *   GASP_START: {}", e.start_args);
                let _ = writeln!(h, " *   GASP_END:   {}", e.end_args);
            }
            Shape::Atomic => {
                let _ = writeln!(h, " *   GASP_ATOMIC: {}", e.start_args);
            }
        }
        h += " */\n";
        let _ = writeln!(h, "#define {} {:#x}", e.name, e.tag);
    }
    h += "\n#endif /* GASP_UPCXX_H */\n";
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_in_header_matches_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/gasp_upcxx.h");
        let rendered = render_events_header();
        if std::env::var_os("GASP_BLESS").is_some() {
            std::fs::write(path, &rendered).unwrap();
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "include/gasp_upcxx.h differs from the event table; regenerate it with \
             `GASP_BLESS=1 cargo test -p gasp --lib header`"
        );
    }
}
