//! `upcxx-run`: runs a PGAS program as an N-rank job on this host.
//!
//! ```text
//! upcxx-run -n N [--segment-size SIZE] [--timeout SECS] PROGRAM [ARGS...]
//! ```
//!
//! Everything after `PROGRAM` is passed to every rank verbatim, including arguments that
//! start with `-`. The exit status is the job's (see `gex::job::JobOutcome::exit_code`);
//! invalid command lines exit with status 2, a program that cannot be found with 127.
//!
//! # Adding subcommands
//!
//! The command line is parsed into [`Cli`], whose only content today is the flattened
//! [`RunArgs`]. A later subcommand (e.g. `upcxx-run report FILE`) is added as
//!
//! ```ignore
//! #[derive(Parser)]
//! #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
//! struct Cli {
//!     #[command(subcommand)]
//!     command: Option<Command>,
//!     #[command(flatten)]
//!     run: RunArgs,
//! }
//! #[derive(Subcommand)]
//! enum Command { Report { file: PathBuf } }
//! ```
//!
//! and dispatched in `main` (`None` runs the job as today). A program that happens to be
//! named like a subcommand is then run as `upcxx-run -n 2 ./report`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use gex::job::{self, JobSpec};

/// Runs PROGRAM as an N-rank job on this host.
#[derive(Debug, Parser)]
#[command(name = "upcxx-run", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// Arguments of running a job (the default, and today only, action).
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Number of ranks (processes) to run, at least 1.
    #[arg(short = 'n', long = "ranks", value_name = "N", value_parser = parse_ranks)]
    ranks: usize,

    /// Shared segment size per rank, e.g. 64M, 2G, 1GiB, 4096 (binary units).
    /// [default: $UPCXX_SEGMENT_SIZE, else 128M]
    #[arg(long, value_name = "SIZE", value_parser = job::parse_size)]
    segment_size: Option<usize>,

    /// Stop the job (exit status 124) if it runs longer than SECS seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    timeout: Option<Duration>,

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
    exit_code(run(cli.run))
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
        env: Vec::new(),
        name: NAME.to_owned(),
        forward_signals: true,
    };
    match job::run(&spec) {
        Ok(outcome) => outcome.exit_code,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            job::launch_error_exit_code(&e)
        }
    }
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

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("upcxx-run").chain(args.iter().copied())).map(|c| c.run)
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
}
