//! With the feature `otf2`, finds the OTF2 C library (Debian: `libopen-trace-format2-dev`)
//! and links it, setting `cfg(otf2_lib)`; without the library the launcher builds without
//! it, and `--otf2` says so.
//!
//! Hand-written rather than through the `pkg-config` crate: the probe is two commands
//! (`pkg-config --libs otf2`, else `otf2-config --ldflags` and `--libs`, which OTF2
//! installs where it ships no `.pc` file), and a failure must not stop the build.

use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(otf2_lib)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
    if std::env::var_os("CARGO_FEATURE_OTF2").is_none() {
        return;
    }
    let flags = output("pkg-config", &["--libs", "otf2"]).or_else(|| {
        let ldflags = output("otf2-config", &["--ldflags"])?;
        let libs = output("otf2-config", &["--libs"])?;
        Some(format!("{ldflags} {libs}"))
    });
    let Some(flags) = flags else {
        println!(
            "cargo::warning=feature otf2: the OTF2 library was not found (neither \
             `pkg-config otf2` nor `otf2-config` answered); building without OTF2 export"
        );
        return;
    };
    let mut linked = false;
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo::rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo::rustc-link-lib={lib}");
            linked |= lib.starts_with("otf2") || lib.starts_with("open-trace-format");
        }
    }
    if linked {
        println!("cargo::rustc-cfg=otf2_lib");
    } else {
        println!("cargo::warning=feature otf2: no OTF2 library among `{flags}`");
    }
}

/// The trimmed standard output of a successful `cmd args`.
fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
