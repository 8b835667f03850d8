fn main() {
    println!("cargo:rerun-if-changed=csrc/forward.c");
    cc::Build::new()
        .file("csrc/forward.c")
        .warnings(true)
        .compile("pgas_gasp_forward");
}
