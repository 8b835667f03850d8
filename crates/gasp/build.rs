//! Compiles `csrc/forward.c`: the variadic function that packs an event's arguments into
//! the `va_list` of a C tool's `gasp_event_notifyVA` (GASP §3.2). Rust can call a
//! variadic function but cannot define one.

fn main() {
    println!("cargo:rerun-if-changed=csrc/forward.c");
    cc::Build::new()
        .file("csrc/forward.c")
        .warnings(true)
        .compile("pgas_gasp_forward");
}
