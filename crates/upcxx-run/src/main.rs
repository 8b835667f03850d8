//! `upcxx-run`: runs a PGAS program as an N-rank job on this host, and reports on the
//! files the built-in tools wrote.
//!
//! ```text
//! upcxx-run -n N [--conduit smp|mpi] [--segment-size SIZE] [--timeout SECS]
//!           [--profile[=FILE] | --trace[=FILE] | --tool LIB.so]
//!           [--profile-only FILE] [--exclude-local] PROGRAM [ARGS...]
//! upcxx-run report FILE [-o OUT.html] [--top N] [--source-dir DIR]...
//! ```
//!
//! Everything after `PROGRAM` is passed to every rank verbatim, including arguments that
//! start with `-`. The exit status is the job's (see `gex::job::JobOutcome::exit_code`);
//! invalid command lines exit with status 2, a program that cannot be found with 127.
//!
//! `--profile` and `--trace` attach the built-in GASP tools to every rank (the program's
//! `gex`/`upcxx` must have their default `gasp` feature); the launcher merges the ranks'
//! outputs into one file (default `upcxx-profile.json` / `upcxx-trace.json`) and prints
//! a summary. `--tool` attaches a C tool instead.
//!
//! `--conduit mpi` runs the job through `mpirun` instead (see `mpi.rs`), for a program
//! built with the `mpi` feature; the default, `smp`, is this launcher's own job start.
//! `UPCXX_CONDUIT=mpi` in the environment has the same effect (the option wins), so a
//! script or test that runs `upcxx-run` reaches the mpi conduit unchanged;
//! `GEX_MPIRUN` replaces the `mpirun` command prefix.
//!
//! `report` reads a profile (`upcxx-profile.json`) or a trace (`upcxx-trace.json`),
//! prints the costliest operation kinds and call sites (with the text of each site's line
//! where the source file is readable from here, or under a `--source-dir`) and writes one
//! self-contained HTML page of tables and charts (`gasp::report`), by default next to FILE
//! with the extension `.html`. It exits with 1 if the file cannot be read or written.
//!
//! # Subcommands
//!
//! The command line is parsed into [`Cli`]: an optional [`Command`] and the flattened,
//! optional [`RunArgs`]. `args_conflicts_with_subcommands` makes the two exclusive and
//! `subcommand_negates_reqs` lifts `-n` and `PROGRAM` when a subcommand is given; with
//! neither, `-n` and `PROGRAM` are required as they always were. A subcommand name is
//! only recognized as the first argument, so a program that happens to be named like a
//! subcommand is run as `upcxx-run -n 2 report` or `upcxx-run -n 2 ./report`.
//!
//! The file is longer than most because the command line's unit and property tests
//! (about 290 lines) sit beside the definitions and the run they check.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use gex::job::{self, JobSpec};

mod mpi;
mod otf2;

/// Runs PROGRAM as an N-rank job on this host.
#[derive(Debug, Parser)]
#[command(
    name = "upcxx-run",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Present exactly when no subcommand is given.
    #[command(flatten)]
    run: Option<RunArgs>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Summarizes a profile or trace: prints the top costs, writes an HTML report.
    Report(ReportArgs),
}

/// Arguments of `upcxx-run report`.
#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// The profile (upcxx-profile.json) or trace (upcxx-trace.json) to report on.
    #[arg(value_name = "FILE")]
    file: PathBuf,

    /// Where to write the HTML report [default: FILE with the extension .html].
    #[arg(short = 'o', long = "output", value_name = "OUT.html")]
    output: Option<PathBuf>,

    /// Number of operation kinds (and of call sites) to print.
    #[arg(long, value_name = "N", default_value_t = 15)]
    top: usize,

    /// Where to look for the program's source files, to show the text of each call
    /// site's line (repeatable; paths as recorded are tried first, relative to the
    /// current directory).
    #[arg(long = "source-dir", value_name = "DIR")]
    source_dirs: Vec<PathBuf>,

    /// Also write a trace as an OTF2 archive in DIR (DIR/NAME.otf2, NAME being FILE's
    /// name without its extension), for Vampir and the other OTF2 tools (needs the
    /// feature `otf2`).
    #[arg(long, value_name = "DIR")]
    otf2: Option<PathBuf>,
}

/// Arguments of running a job (the default action).
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Number of ranks (processes) to run, at least 1.
    #[arg(short = 'n', long = "ranks", value_name = "N", value_parser = parse_ranks)]
    ranks: usize,

    /// How the ranks are started and communicate: smp (this launcher, shared memory)
    /// or mpi (through mpirun; the program must be built with the feature `mpi`).
    /// With mpi, $GEX_MPIRUN replaces the launcher command `mpirun --oversubscribe`
    /// (split on whitespace, e.g. "mpirun --host a:4,b:4").
    /// [default: $UPCXX_CONDUIT, else smp]
    #[arg(long, value_enum)]
    conduit: Option<Conduit>,

    /// Shared segment size per rank, e.g. 64M, 2G, 1GiB, 4096 (binary units).
    /// [default: $UPCXX_SEGMENT_SIZE, else 128M]
    #[arg(long, value_name = "SIZE", value_parser = job::parse_size)]
    segment_size: Option<usize>,

    /// Stop the job (exit status 124) if it runs longer than SECS seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    timeout: Option<Duration>,

    /// Profile the run: per rank, event and call site counts, times and bytes, and the
    /// communication matrix, written to FILE and summarized at the end.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = gasp::tools::DEFAULT_PROFILE_FILE,
        group = "gasp_tool"
    )]
    profile: Option<PathBuf>,

    /// Trace the run: every event, as a Chrome/Perfetto trace written to FILE; a FILE
    /// ending in .otf2 is an OTF2 archive (FILE.otf2, FILE.def, FILE/), with the trace
    /// beside it as FILE.json (needs the feature `otf2`).
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = gasp::tools::DEFAULT_TRACE_FILE,
        group = "gasp_tool"
    )]
    trace: Option<PathBuf>,

    /// Attach the GASP tool in this C shared library (exporting gasp_init,
    /// gasp_event_notifyVA, gasp_control and gasp_create_event; see gasp.h).
    #[arg(long, value_name = "LIB.so", group = "gasp_tool")]
    tool: Option<PathBuf>,

    /// Report only the events named in FILE, one per line (GASP --profile-only).
    #[arg(long, value_name = "FILE")]
    profile_only: Option<PathBuf>,

    /// Leave out accesses to the local team's memory (GASP --profile; the default is
    /// --profile-local, which reports them).
    #[arg(long)]
    exclude_local: bool,

    /// The program every rank runs, followed by its arguments (passed verbatim).
    #[arg(
        value_name = "PROGRAM",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        value_parser = clap::value_parser!(OsString)
    )]
    command: Vec<OsString>,
}

/// The `--conduit` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Conduit {
    Smp,
    Mpi,
}

fn parse_ranks(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("the number of ranks must be at least 1".to_owned()),
        Ok(n) if u32::try_from(n).is_ok() => Ok(n),
        Ok(_) => Err("too many ranks".to_owned()),
        Err(_) => Err(format!("'{s}' is not a number of ranks")),
    }
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err("the timeout must be a positive number of seconds".to_owned()),
    }
}

const NAME: &str = "upcxx-run";

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match (cli.command, cli.run) {
        (Some(Command::Report(args)), _) => report(&args),
        (None, Some(run_args)) => run(run_args),
        (None, None) => {
            // Unreachable: without a subcommand clap requires `-n` and PROGRAM.
            eprintln!("{NAME}: nothing to do");
            2
        }
    };
    exit_code(code)
}

/// `upcxx-run report`: the top costs to stdout, the HTML page to a file.
fn report(args: &ReportArgs) -> i32 {
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_report_path(&args.file));
    if output == args.file {
        eprintln!(
            "{NAME}: {}: the report would overwrite its input; choose another name with -o",
            args.file.display()
        );
        return 1;
    }
    let loaded = match gasp::report::load(&args.file) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return 1;
        }
    };
    if let Some(dir) = &args.otf2 {
        let gasp::report::Loaded::Trace(trace) = &loaded else {
            eprintln!(
                "{NAME}: --otf2: {} is a profile; OTF2 needs a trace (upcxx-run --trace)",
                args.file.display()
            );
            return 1;
        };
        let name = args
            .file
            .file_stem()
            .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
        if let Err(e) = write_otf2(trace, dir, &name) {
            eprintln!("{NAME}: --otf2 {}: {e}", dir.display());
            return 1;
        }
    }
    let mut summary = loaded.summary();
    summary.read_sources(&mut gasp::report::SourceLines::new(
        args.source_dirs.iter().cloned(),
    ));
    if let Err(e) = std::fs::write(&output, gasp::report::render_html(&summary)) {
        eprintln!("{NAME}: {}: cannot write the report: {e}", output.display());
        return 1;
    }
    // A closed stdout (`upcxx-run report f | head`) is no failure: the report is written.
    let mut stdout = std::io::stdout().lock();
    let _ = write!(stdout, "{}", gasp::report::top_costs(&summary, args.top));
    let _ = writeln!(stdout, "\nreport written to {}", output.display());
    0
}

/// Writes `dir/name.otf2` and says so on stderr, as the launcher reports its files.
fn write_otf2(trace: &gasp::formats::Trace, dir: &Path, name: &str) -> Result<(), String> {
    if !otf2::AVAILABLE {
        return otf2::write(trace, dir, name).map(|_| ());
    }
    let anchor = if dir == Path::new(".") {
        PathBuf::from(format!("{name}.otf2"))
    } else {
        dir.join(format!("{name}.otf2"))
    };
    if anchor.exists() || dir.join(name).exists() {
        return Err(format!(
            "{} already exists; OTF2 does not overwrite an archive",
            anchor.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the directory: {e}"))?;
    let w = otf2::write(trace, dir, name)?;
    eprintln!(
        "{NAME}: OTF2 archive written to {} ({} locations, {} regions, {} records)",
        anchor.display(),
        w.locations,
        w.regions,
        w.records
    );
    Ok(())
}

/// The trace file of `--trace=FILE.otf2`: `FILE.json`.
fn otf2_trace_json(archive: &Path) -> Option<PathBuf> {
    (archive.extension()? == "otf2").then(|| archive.with_extension("json"))
}

/// `dir/upcxx-profile.json` → `dir/upcxx-profile.html`.
fn default_report_path(file: &Path) -> PathBuf {
    file.with_extension("html")
}

fn run(args: RunArgs) -> i32 {
    let segment_size = match args.segment_size {
        Some(s) => s,
        None => match job::segment_size_from_env() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{NAME}: {e}");
                return 2;
            }
        },
    };
    let env = match tool_env(&args) {
        Ok(env) => env,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return 2;
        }
    };
    let otf2_target = args
        .trace
        .as_ref()
        .and_then(|t| Some((t.clone(), otf2_trace_json(t)?)));
    // Not clap's `env`: a value from the environment would conflict with `report`.
    let conduit = match args.conduit {
        Some(c) => c,
        None => match job::mpirun::mpi_requested() {
            Ok(true) => Conduit::Mpi,
            Ok(false) => Conduit::Smp,
            Err(e) => {
                eprintln!("{NAME}: {e}");
                return 2;
            }
        },
    };
    let mut command = args.command.into_iter();
    let Some(program) = command.next() else {
        // Unreachable: clap requires at least one value.
        eprintln!("{NAME}: no program given");
        return 2;
    };
    let spec = JobSpec {
        program: PathBuf::from(program),
        args: command.collect(),
        ranks: args.ranks,
        segment_size,
        timeout: args.timeout,
        env,
        name: NAME.to_owned(),
        forward_signals: true,
    };
    let outcome = match conduit {
        Conduit::Smp => job::run(&spec),
        // `mpirun::wait` passes SIGINT and SIGTERM on to mpirun, which ends the ranks.
        Conduit::Mpi => job::with_tool(&spec, mpi::run),
    };
    let code = match outcome {
        Ok(outcome) => outcome.exit_code,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return job::launch_error_exit_code(&e);
        }
    };
    if let Some((archive, json)) = otf2_target {
        let trace = match gasp::report::load(&json) {
            Ok(gasp::report::Loaded::Trace(t)) => t,
            Ok(_) => return code.max(1),
            Err(e) => {
                eprintln!("{NAME}: {e}");
                return code.max(1);
            }
        };
        let dir = match archive.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = archive
            .file_stem()
            .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
        if let Err(e) = write_otf2(&trace, &dir, &name) {
            eprintln!("{NAME}: --trace={}: {e}", archive.display());
            return code.max(1);
        }
    }
    code
}

/// The ranks' environment for the GASP options (see `gasp::dispatch` and `gex::job`).
fn tool_env(args: &RunArgs) -> Result<Vec<(OsString, OsString)>, String> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: OsString| env.push((k.into(), v));
    if let Some(out) = &args.profile {
        set(gasp::dispatch::GASP_TOOL, "profile".into());
        set(gasp::tools::GASP_OUT, out.clone().into_os_string());
    }
    if let Some(out) = &args.trace {
        set(gasp::dispatch::GASP_TOOL, "trace".into());
        let json = match otf2_trace_json(out) {
            Some(_) if !otf2::AVAILABLE => {
                return Err(format!("--trace={}: {}", out.display(), otf2::UNAVAILABLE))
            }
            Some(json) => json,
            None => out.clone(),
        };
        set(gasp::tools::GASP_OUT, json.into_os_string());
    }
    if let Some(lib) = &args.tool {
        // The ranks may run in another directory: pass an absolute path.
        let lib = std::path::absolute(lib).map_err(|e| format!("--tool {}: {e}", lib.display()))?;
        if !lib.is_file() {
            return Err(format!("--tool {}: no such file", lib.display()));
        }
        set(gasp::dispatch::GASP_TOOL, lib.into_os_string());
    }
    if let Some(list) = &args.profile_only {
        let list = std::path::absolute(list)
            .map_err(|e| format!("--profile-only {}: {e}", list.display()))?;
        std::fs::read_to_string(&list)
            .map_err(|e| format!("--profile-only {}: {e}", list.display()))?;
        set(gasp::dispatch::GASP_PROFILE_ONLY, list.into_os_string());
    }
    if args.exclude_local {
        set(gasp::dispatch::GASP_EXCLUDE_LOCAL, "1".into());
    }
    Ok(env)
}

fn exit_code(code: i32) -> ExitCode {
    // Exit statuses are 8 bits; job codes are 0..=255 by construction (128 + signal at
    // most), so this only guards against surprises.
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse_cli(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("upcxx-run").chain(args.iter().copied()))
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        parse_cli(args).map(|c| {
            assert!(c.command.is_none(), "{args:?} parsed as a subcommand");
            c.run.expect("run arguments without a subcommand")
        })
    }

    fn parse_report(args: &[&str]) -> Result<ReportArgs, clap::Error> {
        parse_cli(args).map(|c| {
            assert!(c.run.is_none(), "{args:?} parsed run arguments");
            match c.command {
                Some(Command::Report(r)) => r,
                None => panic!("{args:?} is no report command"),
            }
        })
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn trailing_arguments_are_verbatim() {
        let a = parse(&["-n", "4", "prog", "-n", "5", "--timeout", "x", "--", "-v"]).unwrap();
        assert_eq!(a.ranks, 4);
        assert_eq!(a.timeout, None);
        assert_eq!(
            a.command,
            ["prog", "-n", "5", "--timeout", "x", "--", "-v"].map(OsString::from)
        );
    }

    #[test]
    fn the_conduit_is_smp_unless_mpi_is_asked_for() {
        // Unset: UPCXX_CONDUIT or smp, decided when the job starts.
        assert_eq!(parse(&["-n", "2", "prog"]).unwrap().conduit, None);
        let a = parse(&["--conduit", "smp", "-n", "2", "prog"]).unwrap();
        assert_eq!(a.conduit, Some(Conduit::Smp));
        let a = parse(&["--conduit", "mpi", "-n", "2", "prog", "--conduit", "smp"]).unwrap();
        assert_eq!(a.conduit, Some(Conduit::Mpi));
        assert_eq!(a.command, ["prog", "--conduit", "smp"].map(OsString::from));
        assert!(parse(&["--conduit", "ibv", "-n", "2", "prog"]).is_err());
    }

    #[test]
    fn options() {
        let a = parse(&["--segment-size", "64M", "--timeout", "1.5", "-n2", "prog"]).unwrap();
        assert_eq!(a.ranks, 2);
        assert_eq!(a.segment_size, Some(64 << 20));
        assert_eq!(a.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(a.command, [OsString::from("prog")]);
        let a = parse(&["--ranks=3", "--", "prog", "--help"]).unwrap();
        assert_eq!(a.ranks, 3);
        assert_eq!(a.command, ["prog", "--help"].map(OsString::from));
    }

    #[test]
    fn tool_options() {
        let a = parse(&["-n", "2", "--profile", "prog", "--trace"]).unwrap();
        assert_eq!(a.profile, Some(PathBuf::from("upcxx-profile.json")));
        assert_eq!(a.trace, None, "after PROGRAM, --trace is the program's");
        let a = parse(&["-n", "2", "--trace=t.json", "--exclude-local", "prog"]).unwrap();
        assert_eq!(a.trace, Some(PathBuf::from("t.json")));
        assert!(a.exclude_local);
        let env = tool_env(&a).unwrap();
        assert!(env.contains(&("GASP_TOOL".into(), "trace".into())));
        assert!(env.contains(&("GASP_OUT".into(), "t.json".into())));
        assert!(env.contains(&("GASP_EXCLUDE_LOCAL".into(), "1".into())));
        let a = parse(&["-n", "2", "--tool", "/no/such/lib.so", "prog"]).unwrap();
        assert!(tool_env(&a).unwrap_err().contains("/no/such/lib.so"));
        let a = parse(&["-n", "2", "--profile-only", "/no/such/list", "prog"]).unwrap();
        assert!(tool_env(&a)
            .unwrap_err()
            .contains("--profile-only /no/such/list"));
        for both in [
            &["-n", "2", "--profile", "--trace", "prog"][..],
            &["-n", "2", "--profile", "--tool", "x.so", "prog"],
        ] {
            assert_eq!(parse(both).unwrap_err().exit_code(), 2, "{both:?}");
        }
    }

    #[test]
    fn bad_input_is_rejected() {
        for args in [
            &["-n", "0", "prog"][..],
            &["-n", "x", "prog"],
            &["-n", "-1", "prog"],
            &["prog"],
            &["-n", "2"],
            &["-n", "2", "--segment-size", "lots", "prog"],
            &["-n", "2", "--segment-size", "0", "prog"],
            &["-n", "2", "--timeout", "0", "prog"],
            &["-n", "2", "--timeout", "-3", "prog"],
        ] {
            let e = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} accepted"));
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn report_subcommand() {
        let r = parse_report(&["report", "run/upcxx-profile.json"]).unwrap();
        assert_eq!(r.file, PathBuf::from("run/upcxx-profile.json"));
        assert_eq!(r.output, None);
        assert_eq!(r.top, 15);
        assert_eq!(
            default_report_path(&r.file),
            PathBuf::from("run/upcxx-profile.html")
        );
        let r = parse_report(&["report", "t.json", "-o", "out.html", "--top", "3"]).unwrap();
        assert_eq!(r.output, Some(PathBuf::from("out.html")));
        assert_eq!(r.top, 3);
        let r = parse_report(&["report", "--output=x.html", "t.json"]).unwrap();
        assert_eq!(r.output, Some(PathBuf::from("x.html")));
        assert_eq!(
            default_report_path(Path::new("trace")),
            PathBuf::from("trace.html")
        );
    }

    #[test]
    fn otf2_traces_go_to_a_json_file_beside_the_archive() {
        assert_eq!(
            otf2_trace_json(Path::new("run/job.otf2")),
            Some(PathBuf::from("run/job.json"))
        );
        assert_eq!(otf2_trace_json(Path::new("job.json")), None);
        let a = parse(&["-n", "2", "--trace=run/job.otf2", "prog"]).unwrap();
        let r = parse_report(&["report", "t.json", "--otf2", "out"]).unwrap();
        assert_eq!(r.otf2, Some(PathBuf::from("out")));
        if otf2::AVAILABLE {
            let env = tool_env(&a).unwrap();
            assert!(env.contains(&("GASP_OUT".into(), "run/job.json".into())));
        } else {
            // Refused before anything runs, saying why.
            let e = tool_env(&a).unwrap_err();
            assert!(e.contains("OTF2 export is off"), "{e}");
        }
    }

    #[test]
    fn a_program_named_report_still_runs() {
        let a = parse(&["-n", "2", "report", "x.json"]).unwrap();
        assert_eq!(a.command, ["report", "x.json"].map(OsString::from));
    }

    #[test]
    fn bad_report_command_lines_are_rejected() {
        for args in [
            &["report"][..],
            &["report", "a.json", "b.json"],
            &["report", "a.json", "-o"],
            &["report", "a.json", "--top", "x"],
            &["report", "a.json", "-n", "2"],
            &["report", "-n", "2", "prog"],
        ] {
            let e = parse_cli(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} accepted"));
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }

    mod fuzz {
        //! Property tests of the command line: random and mutated argument lists parse
        //! into arguments in range or are rejected with clap's usage error (exit status
        //! 2), never a panic. Cases: `PROPTEST_CASES`.
        use super::*;
        use proptest::prelude::*;

        /// Words the launcher knows, numbers near their limits, and arbitrary text.
        fn word() -> impl Strategy<Value = String> {
            prop_oneof![
                prop::sample::select(vec![
                    "-n",
                    "-n2",
                    "--ranks",
                    "--ranks=3",
                    "--segment-size",
                    "--timeout",
                    "--profile",
                    "--profile=p.json",
                    "--trace",
                    "--trace=t.json",
                    "--tool",
                    "--profile-only",
                    "--exclude-local",
                    "--",
                    "report",
                    "-o",
                    "--top",
                    "prog",
                    "-v",
                    "0",
                    "1",
                    "5",
                    "4294967296",
                    "-1",
                    "1.5",
                    "0.0",
                    "NaN",
                    "inf",
                    "1e400",
                    "64M",
                    "0K",
                    "18446744073709551616",
                    "",
                ])
                .prop_map(str::to_owned),
                "[0-9.eE+-]{1,24}",
                any::<String>(),
            ]
        }

        fn check(args: &[String]) -> Result<(), TestCaseError> {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            match parse_cli(&args) {
                Ok(Cli {
                    run: Some(a),
                    command: None,
                }) => {
                    prop_assert!(a.ranks >= 1 && u32::try_from(a.ranks).is_ok());
                    prop_assert!(!a.command.is_empty());
                    prop_assert_ne!(a.segment_size, Some(0));
                    prop_assert_ne!(a.timeout, Some(Duration::ZERO));
                    // The tool settings are checked, not trusted: a path that is not
                    // there is an error naming the option.
                    if let Err(e) = tool_env(&a) {
                        prop_assert!(e.starts_with("--"), "{e}");
                    }
                }
                Ok(Cli {
                    run: None,
                    command: Some(Command::Report(r)),
                }) => {
                    prop_assert!(!r.file.as_os_str().is_empty() || args.contains(&""));
                }
                Ok(other) => prop_assert!(false, "{args:?} parsed as {other:?}"),
                Err(e) => prop_assert!(matches!(e.exit_code(), 0 | 2), "{e}"),
            }
            Ok(())
        }

        proptest! {
            #[test]
            fn random_command_lines(args in prop::collection::vec(word(), 0..8)) {
                check(&args)?;
            }

            #[test]
            fn mutated_command_lines(
                ranks in 1u32..6,
                edits in prop::collection::vec((0usize..10, word(), 0u8..3), 1..4),
            ) {
                let mut args: Vec<String> =
                    ["-n", &ranks.to_string(), "--segment-size", "16M", "--timeout", "2", "prog", "x"]
                        .map(str::to_owned)
                        .to_vec();
                check(&args)?;
                for (at, w, op) in edits {
                    let at = at.min(args.len());
                    match op {
                        0 => args.insert(at, w),
                        1 if at < args.len() => args[at] = w,
                        _ => args.truncate(at),
                    }
                }
                check(&args)?;
            }

            #[test]
            fn timeouts_parse_or_say_why(s in prop_oneof!["[ +-]?[0-9]{0,30}(\\.[0-9]{0,8})?([eE][+-]?[0-9]{1,4})?", any::<String>()]) {
                match parse_timeout(&s) {
                    Ok(d) => prop_assert!(!d.is_zero()),
                    Err(e) => prop_assert!(e.contains("seconds"), "{e}"),
                }
            }
        }
    }
}
