//! The C ABI of GASP tools (gasp-1.4 §3.2–3.5): `tests/ctool/tool.c`, compiled here with
//! the system C compiler and attached with `GASP_TOOL=<lib>`, writes one line per call
//! it receives. A scripted gex program on 2 and 3 ranks writes down what it did, and the
//! test compares the two after the job: the language and argument count `gasp_init`
//! received, every event's tag, type, call site (file, line, column) and arguments as the
//! C side reads them with `va_arg` — pointers-to-shared through `gasp_upcxx_gptr_t *`,
//! a user event's values by its printf format — the tags `gasp_create_event` returned,
//! measurement control (§3.3: `gasp::control` returns what the C tool returned; events
//! while not measuring are still delivered, the tool drops them), and both notify entry
//! points: `gasp_event_notifyVA`, which the runtime prefers, and the variadic
//! `gasp_event_notify` of a library that exports only that one.
//!
//! The file format is described at the top of `tool.c`.
// The events these tests look for are compiled only with the `gasp` feature (see
// `gasp_off.rs` for the build without it).
#![cfg(feature = "gasp")]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use gasp::events::{self, *};
use gasp::Arg;
use gex::testing::{spmd_outcome, SpmdOptions};
use gex::{AmEntry, AmRole, Client, EventCategory, Flags, Hsl, Lc, Segment, Token};

/// This file, to find the column `#[track_caller]` reports for a call.
const SOURCE: &str = include_str!("gasp_ctool.rs");

/// Where the ranks' tool writes (`$GASP_CTOOL_OUT.<rank>`) and where the ranks write
/// what they expect (`$GASP_CTOOL_OUT.expected.<rank>`).
const OUT_VAR: &str = "GASP_CTOOL_OUT";
/// The notify entry point the library under test exports (`notifyVA` or `notify`): the
/// one its `init` line names.
const ENTRY_VAR: &str = "GASP_CTOOL_ENTRY";

/// The C tool's two builds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry {
    /// Exports `gasp_event_notifyVA` and `gasp_event_notify`.
    Va,
    /// Exports only the variadic `gasp_event_notify` (`-DCTOOL_VARIADIC_ONLY`).
    Variadic,
}

impl Entry {
    fn name(self) -> &'static str {
        match self {
            Entry::Va => "notifyVA",
            Entry::Variadic => "notify",
        }
    }
}

/// A fresh temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("gasp-ctool-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The C compiler: `cc`, else `gcc`.
fn c_compiler() -> &'static str {
    ["cc", "gcc"]
        .into_iter()
        .find(|cc| {
            Command::new(cc)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| {
            panic!(
                "no C compiler found (tried `cc` and `gcc` on PATH): this test builds the C \
                 GASP tool tests/ctool/tool.c; install gcc"
            )
        })
}

/// Compiles `tool.c` into `dir` as the library of `entry`'s build.
fn build_tool(dir: &Path, entry: Entry) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = dir.join(format!("libctool-{}.so", entry.name()));
    let mut cmd = Command::new(c_compiler());
    cmd.args([
        "-shared", "-fPIC", "-std=c99", "-Wall", "-Wextra", "-Werror",
    ])
    .arg("-I")
    .arg(manifest.join("../gasp/include"));
    if entry == Entry::Variadic {
        cmd.arg("-DCTOOL_VARIADIC_ONLY");
    }
    cmd.arg(manifest.join("tests/ctool/tool.c"))
        .arg("-o")
        .arg(&lib);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

// ---- The scripted program (runs in each rank) ----

static PINGS: AtomicU32 = AtomicU32::new(0);
static PONGS: AtomicU32 = AtomicU32::new(0);
static PONG_INDEX: AtomicU8 = AtomicU8::new(0);
static REPLY_LINE: AtomicU32 = AtomicU32::new(0);

fn ping(token: &Token<'_>, _args: &[u32]) {
    REPLY_LINE.store(line!() + 2, Ordering::Relaxed);
    token
        .reply_short(PONG_INDEX.load(Ordering::Relaxed), &[], Flags::NONE)
        .unwrap();
    PINGS.fetch_add(1, Ordering::Relaxed);
}

fn pong(_token: &Token<'_>, _args: &[u32]) {
    PONGS.fetch_add(1, Ordering::Relaxed);
}

/// `file:line:col` of the call on `line` of this file that starts with `call` (a
/// method's name, or a function's path): where `#[track_caller]` places it.
fn at(line: u32, call: &str) -> String {
    let text = SOURCE.lines().nth(line as usize - 1).unwrap_or_default();
    let found: Vec<usize> = text.match_indices(call).map(|(i, _)| i).collect();
    assert!(
        found.len() == 1 && text.is_ascii(),
        "line {line} of this file should make one call `{call}`: {text:?}"
    );
    let file = Path::new(file!()).file_name().unwrap().to_string_lossy();
    format!("{file}:{line}:{}", found[0] + 1)
}

/// The line of an event as `tool.c` writes it.
fn event(tag: u32, name: &str, ty: &str, site: &str, args: &str) -> String {
    let line = format!("{tag} {name} {ty} {site}");
    if args.is_empty() {
        line
    } else {
        format!("{line} {args}")
    }
}

/// The line of a system event, named as the event table names it.
fn sys(tag: u32, ty: &str, site: &str, args: &str) -> String {
    let name = events::by_tag(tag).expect("a system event").name;
    event(tag, name, ty, site, args)
}

/// A system event's START and END with the same arguments.
fn pair(tag: u32, site: &str, args: &str) -> [String; 2] {
    [sys(tag, "START", site, args), sys(tag, "END", site, args)]
}

fn gptr(rank: u32, addr: usize) -> String {
    format!("{rank}:{addr:#x}")
}

fn ptr<T>(p: *const T) -> String {
    format!("{:#x}", p as usize)
}

/// Events while measurement is off in [`scripted`]: a poll, a put and a barrier (START
/// and END each) and one user event.
const DROPPED: u64 = 7;

/// The rank's program. Every call that reports an event is on a line of its own, so its
/// call site is known; the expected lines are written to
/// `$GASP_CTOOL_OUT.expected.<rank>` as JSON: `init`, then the main sequence as
/// `prefix`, any number of `repeat` (a polling loop) and `suffix`, and the AM handlers'
/// events as `handlers` (two groups, in either order, anywhere after the main
/// sequence's line `after`: they run wherever the rank polls).
fn scripted() {
    let out = std::env::var(OUT_VAR).expect("GASP_CTOOL_OUT is set");
    let entry = std::env::var(ENTRY_VAR).expect("GASP_CTOOL_ENTRY is set");
    let (client, ep, team) = Client::init("GASPC", Flags::NONE).unwrap();
    let init = format!(
        "init {} {} {entry}",
        gasp::Language::Gex as i32,
        std::env::args().count()
    );
    let mut table = [
        AmEntry::short("ping", AmRole::Request, 0, ping),
        AmEntry::short("pong", AmRole::Reply, 0, pong),
    ];
    let reg_line = line!() + 1;
    ep.register_handlers(&mut table).unwrap();
    let registered = at(reg_line, "register_handlers(");
    let (ping_index, pong_index) = (table[0].index, table[1].index);
    PONG_INDEX.store(pong_index, Ordering::Relaxed);
    let (me, n) = (team.rank(), team.size());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let mut want = Vec::new();

    let line = line!() + 1;
    let _segment = Segment::attach(&team, 1 << 16).unwrap();
    // Its implicit barrier is reported at the caller's site.
    want.extend(pair(GASP_UPC_BARRIER, &at(line, "Segment::attach("), "0 0"));
    let dest = team.segment_bound(next).unwrap().owner_addr;

    let step = gasp::create_event("step", Some("%d %f %s"));
    let mark = gasp::create_event("mark", Some("%.3f %lld %g %zu"));
    let plain = gasp::create_event("plain", None);
    assert_eq!(
        [step.0, mark.0, plain.0],
        [USEREVT_START, USEREVT_START + 1, USEREVT_START + 2],
        "the tags the C tool's gasp_create_event returned"
    );
    want.push(format!("create {} step %d %f %s", step.0));
    want.push(format!("create {} mark %.3f %lld %g %zu", mark.0));
    want.push(format!("create {} plain (null)", plain.0));

    let line = line!() + 1;
    team.barrier();
    want.extend(pair(GASP_UPC_BARRIER, &at(line, "barrier("), "0 0"));

    let src = [7u8; 8];
    let line = line!() + 1;
    team.put_blocking(next, dest, &src, Flags::NONE).unwrap();
    let put = format!("1 {} {} 8", gptr(next, dest), ptr(src.as_ptr()));
    want.extend(pair(GASP_UPC_PUT, &at(line, "put_blocking("), &put));

    let mut back = [0u8; 8];
    let line = line!() + 1;
    team.get_blocking(&mut back, next, dest, Flags::NONE)
        .unwrap();
    assert_eq!(back, src);
    let get = format!("1 {} {} 8", ptr(back.as_ptr()), gptr(next, dest));
    want.extend(pair(GASP_UPC_GET, &at(line, "get_blocking("), &get));

    // A put or get to a segment mapped here completes during its initiation, so the END
    // of its NB or NBI initiation names GASP_NB_TRIVIAL (§5.4.6). A put to another host
    // (the mpi conduit) returns at once and completes in progress (when the owner's
    // acknowledgement arrives, or the window's flush), so the END of its NBI initiation
    // names GASP_NB_IMPLICIT. A get from another host does too, and the END of its NB
    // initiation names the event's own handle, which its wait's GASP_UPC_NB_SYNC names
    // too, unless it went through the window (below `GEX_MPI_AM_RMA_MAX`) and completed
    // at once.
    let mapped = gex::nbrhd_info().members.contains(&next);
    let line = line!() + 2;
    // SAFETY: with Lc::Now the source may be reused as soon as the call returns.
    unsafe { team.put_nbi(next, dest + 64, &src, Lc::Now, Flags::NONE) }.unwrap();
    let site = at(line, "put_nbi(");
    let put = format!("1 {} {} 8", gptr(next, dest + 64), ptr(src.as_ptr()));
    want.push(sys(GASP_UPC_NB_PUT_INIT, "START", &site, &put));
    let nbi = if mapped { NB_TRIVIAL } else { NB_IMPLICIT };
    let handle = format!("{put} {nbi}");
    want.push(sys(GASP_UPC_NB_PUT_INIT, "END", &site, &handle));
    let line = line!() + 1;
    gex::nbi_wait(EventCategory::PUT);
    let site = at(line, "gex::nbi_wait(");
    want.extend(pair(GASP_UPC_NB_SYNC, &site, &NB_IMPLICIT.to_string()));

    let line = line!() + 2;
    // SAFETY: `back` is not used again until the event has been waited for.
    let e = unsafe { team.get_nb(back.as_mut_ptr(), next, dest + 64, 8, Flags::NONE) }.unwrap();
    let site = at(line, "get_nb(");
    let get = format!("1 {} {} 8", ptr(back.as_ptr()), gptr(next, dest + 64));
    want.push(sys(GASP_UPC_NB_GET_INIT, "START", &site, &get));
    let nb = gex::testing::gasp_handle(&e);
    let handle = format!("{get} {nb}");
    want.push(sys(GASP_UPC_NB_GET_INIT, "END", &site, &handle));
    if e.is_invalid() {
        // Complete already (GEX_EVENT_INVALID): waiting for it is no synchronization.
        assert_eq!(nb, NB_TRIVIAL);
        e.wait();
    } else {
        assert!(
            !mapped,
            "a get from a segment mapped here completes during its initiation"
        );
        assert_ne!(nb, NB_TRIVIAL);
        assert_ne!(nb, NB_IMPLICIT);
        let line = line!() + 1;
        e.wait();
        let site = at(line, "wait(");
        want.extend(pair(GASP_UPC_NB_SYNC, &site, &nb.to_string()));
    }

    let hsl = Hsl::new();
    let lck = ptr(&hsl);
    let line = line!() + 1;
    let took = hsl.try_lock();
    assert!(took);
    let site = at(line, "try_lock(");
    want.push(sys(GASP_UPC_LOCK_ATTEMPT, "START", &site, &lck));
    let result = format!("{lck} 1");
    want.push(sys(GASP_UPC_LOCK_ATTEMPT, "END", &site, &result));
    let line = line!() + 1;
    let again = hsl.try_lock();
    assert!(!again, "an HSL is not recursive");
    let site = at(line, "try_lock(");
    want.push(sys(GASP_UPC_LOCK_ATTEMPT, "START", &site, &lck));
    let result = format!("{lck} 0");
    want.push(sys(GASP_UPC_LOCK_ATTEMPT, "END", &site, &result));
    let line = line!() + 1;
    hsl.unlock();
    want.extend(pair(GASP_UPC_UNLOCK, &at(line, "unlock("), &lck));
    let line = line!() + 1;
    hsl.lock();
    want.extend(pair(GASP_UPC_LOCK, &at(line, "lock("), &lck));
    let line = line!() + 1;
    hsl.unlock();
    want.extend(pair(GASP_UPC_UNLOCK, &at(line, "unlock("), &lck));

    // User events (§5.3): the C tool reads the values by the event's format. Integers
    // and doubles travel in separate va_arg sequences, hence the mixed orders.
    let line = line!() + 1;
    gasp::event_start(step, &[Arg::Int(3), Arg::F64(0.5), Arg::Str(c"alpha")]);
    let site = at(line, "gasp::event_start(");
    want.push(event(step.0, "step", "START", &site, "3 0.500000 alpha"));
    let mark_values = [
        Arg::F64(1.25),
        Arg::I64(-5_000_000_000),
        Arg::F64(-2.5e-7),
        Arg::Size(42),
    ];
    let line = line!() + 1;
    gasp::event_atomic(mark, &mark_values);
    let site = at(line, "gasp::event_atomic(");
    let values = "1.250 -5000000000 -2.5e-07 42";
    want.push(event(mark.0, "mark", "ATOMIC", &site, values));
    let line = line!() + 1;
    gasp::event_atomic(plain, &[]);
    let site = at(line, "gasp::event_atomic(");
    want.push(event(plain.0, "plain", "ATOMIC", &site, ""));
    let line = line!() + 1;
    gasp::event_end(step, &[Arg::Int(-7), Arg::F64(1e-3), Arg::Str(c"omega")]);
    let site = at(line, "gasp::event_end(");
    want.push(event(step.0, "step", "END", &site, "-7 0.001000 omega"));

    // §3.3: gasp_control returns the previous setting, nonzero before its first call.
    assert!(gasp::control(false), "the C tool was measuring");
    want.push("control 0 1".into());
    // Not measuring: these DROPPED events still reach the tool, which writes nothing.
    gex::poll();
    team.put_blocking(next, dest, &src, Flags::NONE).unwrap();
    gasp::event_atomic(plain, &[]);
    team.barrier();
    assert!(!gasp::control(true), "the C tool was not measuring");
    want.push("control 1 0".into());
    assert!(gasp::control(true), "the C tool was measuring again");
    want.push("control 1 1".into());

    let line = line!() + 1;
    gex::poll();
    want.extend(pair(GASP_GEX_POLL, &at(line, "gex::poll("), ""));
    // No rank sends its ping before every rank has entered this barrier, so the
    // handlers run after its START.
    let line = line!() + 1;
    team.barrier();
    let after = want.len();
    want.extend(pair(GASP_UPC_BARRIER, &at(line, "barrier("), "0 0"));
    let line = line!() + 1;
    team.request_short(next, ping_index, &[], Flags::NONE)
        .unwrap();
    let am = format!("{next} {ping_index} 0 0");
    want.extend(pair(GASP_GEX_AM_REQUEST, &at(line, "request_short("), &am));
    let line = line!() + 1;
    team.barrier();
    want.extend(pair(GASP_UPC_BARRIER, &at(line, "barrier("), "0 0"));
    let prefix = want.split_off(0);

    let line = line!() + 2;
    while PINGS.load(Ordering::Relaxed) == 0 || PONGS.load(Ordering::Relaxed) == 0 {
        gex::poll();
    }
    let repeat = pair(GASP_GEX_POLL, &at(line, "gex::poll("), "");
    let line = line!() + 1;
    team.barrier();
    want.extend(pair(GASP_UPC_BARRIER, &at(line, "barrier("), "0 0"));
    let line = line!() + 1;
    client.finalize();
    want.extend(pair(GASP_UPC_COLLECTIVE_EXIT, &at(line, "finalize("), "0"));
    let suffix = want;

    // Handler events are reported at the handlers' registration site; the reply's at
    // its call in `ping`.
    let reply_site = at(REPLY_LINE.load(Ordering::Relaxed), "reply_short(");
    let from_prev = format!("{prev} {ping_index} 0 0");
    let to_prev = format!("{prev} {pong_index} 0 0");
    let from_next = format!("{next} {pong_index} 0 0");
    let pinged = [
        sys(GASP_GEX_AM_HANDLER, "START", &registered, &from_prev),
        sys(GASP_GEX_AM_REPLY, "START", &reply_site, &to_prev),
        sys(GASP_GEX_AM_REPLY, "END", &reply_site, &to_prev),
        sys(GASP_GEX_AM_HANDLER, "END", &registered, &from_prev),
    ];
    let ponged = pair(GASP_GEX_AM_HANDLER, &registered, &from_next);

    let expected = serde_json::json!({
        "init": init,
        "prefix": prefix,
        "repeat": repeat,
        "suffix": suffix,
        "handlers": [pinged, ponged],
        "after": after,
    });
    let path = format!("{out}.expected.{me}");
    std::fs::write(&path, expected.to_string())
        .unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
}

// ---- The check (runs in the test process, after the job) ----

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

/// Asserts `got[at..]` begins with `want`, naming the first difference; `output` is
/// the whole file, shown with it.
#[track_caller]
fn expect_lines(what: &str, output: &str, got: &[String], at: usize, want: &[String]) {
    for (i, w) in want.iter().enumerate() {
        let g = got.get(at + i).map_or("<end of output>", String::as_str);
        assert_eq!(
            g,
            w,
            "{what}: line {} after `init` (handlers' events set apart) differs; the tool \
             wrote:\n{output}",
            at + i
        );
    }
}

/// Checks rank `rank`'s tool output against what the rank expected.
fn check_rank(ranks: usize, entry: Entry, out: &str, rank: usize) {
    let what = format!("{ranks} ranks, {} build, rank {rank}", entry.name());
    let path = format!("{out}.{rank}");
    let output = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{what}: the C tool wrote no {path}: {e}"));
    let expected_path = format!("{out}.expected.{rank}");
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{what}: the rank wrote no {expected_path}: {e}")),
    )
    .unwrap();
    let mut lines: Vec<String> = output.lines().map(str::to_owned).collect();
    let wrote = format!("the tool wrote:\n{output}");

    // gasp_init: the language and argc the C side received.
    let init: Vec<&str> = lines.first().map_or(vec![], |l| l.split(' ').collect());
    assert_eq!(
        init.get(..2),
        Some(&["init", "6"][..]),
        "{what}: `init` with GASP_LANG_GEX (6) first; {wrote}"
    );
    assert!(
        init.get(2)
            .and_then(|a| a.parse::<usize>().ok())
            .is_some_and(|argc| argc >= 1),
        "{what}: argc counts at least the program's name; {wrote}"
    );
    assert_eq!(lines[0], expected["init"].as_str().unwrap(), "{what}");

    // At exit: every event came through the build's entry point; DROPPED of them while
    // not measuring, the rest each wrote a line.
    let exit: Vec<u64> = lines
        .pop()
        .and_then(|l| {
            l.strip_prefix("exit ")
                .map(|c| c.split(' ').filter_map(|n| n.parse().ok()).collect())
        })
        .unwrap_or_else(|| panic!("{what}: the last line is not the exit line; {wrote}"));
    let written = lines
        .iter()
        .filter(|l| l.starts_with(char::is_numeric))
        .count() as u64;
    let (va, variadic) = match entry {
        Entry::Va => (written + DROPPED, 0),
        Entry::Variadic => (0, written + DROPPED),
    };
    assert_eq!(
        exit,
        [va, variadic, DROPPED],
        "{what}: calls of gasp_event_notifyVA, of gasp_event_notify, and of either while \
         not measuring; {wrote}"
    );

    // The handlers' events apart (they may come between any two of the rest, after the
    // main sequence's line `after`); the rest in order.
    let is_handler = |l: &String| {
        let tag = l.split(' ').next().and_then(|t| t.parse().ok());
        tag == Some(GASP_GEX_AM_HANDLER) || tag == Some(GASP_GEX_AM_REPLY)
    };
    let after = expected["after"].as_u64().unwrap() as usize;
    let mut main = Vec::new();
    let mut handlers = Vec::new();
    for l in lines.drain(1..) {
        if is_handler(&l) {
            assert!(
                main.len() > after,
                "{what}: `{l}` came before any rank could send its ping; {wrote}"
            );
            handlers.push(l);
        } else {
            main.push(l);
        }
    }
    let prefix = strings(&expected["prefix"]);
    let repeat = strings(&expected["repeat"]);
    let suffix = strings(&expected["suffix"]);
    expect_lines(&what, &output, &main, 0, &prefix);
    let mut at = prefix.len();
    while main.len() - at > suffix.len() && main[at..].starts_with(&repeat) {
        at += repeat.len();
    }
    expect_lines(&what, &output, &main, at, &suffix);
    assert_eq!(
        main.len(),
        at + suffix.len(),
        "{what}: lines after the end; {wrote}"
    );

    let groups: Vec<Vec<String>> = expected["handlers"]
        .as_array()
        .unwrap()
        .iter()
        .map(strings)
        .collect();
    let one_order = [groups[0].clone(), groups[1].clone()].concat();
    let other_order = [groups[1].clone(), groups[0].clone()].concat();
    assert!(
        handlers == one_order || handlers == other_order,
        "{what}: the handlers' events are\n{handlers:#?}\nexpected these two groups in \
         either order:\n{groups:#?}"
    );
}

#[test]
fn a_c_tool_reads_every_event_with_va_arg() {
    // Only the test process builds (this function also runs in every rank).
    let dir = common::in_test_process().then(TempDir::new);
    let libs = dir.as_ref().map(|d| {
        [
            build_tool(&d.0, Entry::Va),
            build_tool(&d.0, Entry::Variadic),
        ]
    });
    for (ranks, entry) in [
        (2, Entry::Va),
        (3, Entry::Va),
        (2, Entry::Variadic),
        (3, Entry::Variadic),
    ] {
        let mut opts = SpmdOptions::new(ranks);
        let mut out = String::new();
        if let (Some(dir), Some(libs)) = (&dir, &libs) {
            let lib = &libs[entry as usize];
            out = format!("{}/run-{ranks}-{}", dir.0.display(), entry.name());
            opts.env
                .push(("GASP_TOOL".into(), lib.display().to_string()));
            opts.env.push((OUT_VAR.into(), out.clone()));
            opts.env.push((ENTRY_VAR.into(), entry.name().into()));
        }
        // Returns in the test process once every rank has exited.
        let Some(outcome) = spmd_outcome(opts, scripted) else {
            continue;
        };
        if let Some(report) = outcome.failure {
            panic!("{ranks} ranks, {} build: {report}", entry.name());
        }
        for rank in 0..ranks {
            check_rank(ranks, entry, &out, rank);
        }
    }
}
