//! The settings of a job read from the environment, shared by the launcher (`job`) and
//! the conduit, and how they are parsed. A leaf.

use std::ffi::OsStr;

/// Environment variable holding the job rank (0-based) of a rank process.
pub const UPCXX_RANK: &str = "UPCXX_RANK";
/// Environment variable holding the number of ranks of the job. Set by the launcher in
/// every rank; set by the user (without [`UPCXX_RANK`]) to make a program launch itself
/// as a job (see `job::relaunch_if_requested`).
pub const UPCXX_RANKS: &str = "UPCXX_RANKS";
/// Environment variable giving the segment size per rank (e.g. `64M`, `2G`), used when
/// no size is given explicitly. See [`parse_size()`].
pub const UPCXX_SEGMENT_SIZE: &str = "UPCXX_SEGMENT_SIZE";

/// How many processes an MPI launcher started with this one, if one did: `mpirun` of
/// Open MPI sets `OMPI_COMM_WORLD_SIZE`, MPICH's and Slurm's PMI(2) `PMI_SIZE`; Slurm's
/// PMIx sets only `PMIX_RANK` of those, its task count being the step's.
pub(crate) fn mpi_launcher_size() -> Option<u64> {
    let number = |v: &str| {
        std::env::var(v)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    number("OMPI_COMM_WORLD_SIZE")
        .or_else(|| number("PMI_SIZE"))
        .or_else(|| {
            std::env::var_os("PMIX_RANK")?;
            number("SLURM_STEP_NUM_TASKS").or_else(|| number("SLURM_NTASKS"))
        })
}

/// Default segment size per rank when neither `--segment-size` nor
/// `UPCXX_SEGMENT_SIZE` is given (the same default as UPC++'s shared heap).
pub const DEFAULT_SEGMENT_SIZE: usize = 128 << 20;

/// Parses a size such as `4096`, `64K`, `64M`, `2G`, `1GiB` or `1.5 MB` into bytes.
///
/// Units are binary: `K`, `KB` and `KiB` all mean 1024 bytes, `M` 1024², and so on. The
/// size must be greater than zero and fit in `usize`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty size".to_owned());
    }
    let bytes = parse_size::Config::new()
        .with_binary()
        .parse_size(t)
        .map_err(|e| format!("invalid size '{s}': {e} (expected e.g. 4096, 64M, 2G, 1GiB)"))?;
    if bytes == 0 {
        return Err(format!("invalid size '{s}': must be greater than zero"));
    }
    usize::try_from(bytes).map_err(|_| format!("invalid size '{s}': too large"))
}

/// The segment size per rank from `UPCXX_SEGMENT_SIZE`, or
/// [`DEFAULT_SEGMENT_SIZE`] if it is unset or empty.
pub fn segment_size_from_env() -> Result<usize, String> {
    match std::env::var_os(UPCXX_SEGMENT_SIZE) {
        None => Ok(DEFAULT_SEGMENT_SIZE),
        Some(v) if v.is_empty() => Ok(DEFAULT_SEGMENT_SIZE),
        Some(v) => {
            let v = v
                .to_str()
                .ok_or_else(|| format!("{UPCXX_SEGMENT_SIZE} is not valid UTF-8"))?;
            parse_size(v).map_err(|e| format!("{UPCXX_SEGMENT_SIZE}: {e}"))
        }
    }
}

/// Parses a number of ranks (at least 1).
pub(crate) fn parse_ranks(v: &OsStr) -> Result<usize, String> {
    let s = v.to_str().ok_or("not valid UTF-8")?.trim();
    match s.parse::<usize>() {
        Ok(0) => Err("the number of ranks must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a number of ranks")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64MB"), Ok(64 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size(" 16k "), Ok(16 << 10));
        assert!(parse_size("").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("-1M").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("64Q").is_err());
    }

    #[test]
    fn ranks() {
        assert_eq!(parse_ranks(OsStr::new("4")), Ok(4));
        assert!(parse_ranks(OsStr::new("0")).is_err());
        assert!(parse_ranks(OsStr::new("four")).is_err());
    }

    mod fuzz {
        //! Property tests of the size and rank parsers: any string is a value in range
        //! or an error that quotes it; never a panic. Cases: `PROPTEST_CASES`.
        use super::super::*;
        use proptest::prelude::*;

        /// Strings near the valid ones: numbers, fractions, units, signs, spaces.
        fn size_like() -> impl Strategy<Value = String> {
            (
                "[ +-]?[0-9]{0,25}(\\.[0-9]{0,6})?",
                " ?",
                "(|[kKmMgGtTpPeEzZyY]|[kKmMgGtTpPeE]i?[bB]|B|bytes|Q)",
                " *",
            )
                .prop_map(|(n, sp, unit, tail)| format!("{n}{sp}{unit}{tail}"))
        }

        proptest! {
            #[test]
            fn sizes_parse_or_say_why(s in prop_oneof![size_like(), any::<String>()]) {
                match parse_size(&s) {
                    Ok(n) => prop_assert!(n > 0),
                    Err(e) => prop_assert!(e.contains("size"), "{e}"),
                }
            }

            #[test]
            fn ranks_parse_or_say_why(s in prop_oneof!["[ +-]?[0-9]{0,22} ?", any::<String>()]) {
                match parse_ranks(OsStr::new(&s)) {
                    Ok(n) => prop_assert!(n >= 1),
                    Err(e) => prop_assert!(!e.is_empty()),
                }
            }

            #[test]
            fn binary_units_scale(n in 1u64..1 << 20, unit in 0usize..4) {
                let (suffix, shift) = [("", 0), ("K", 10), ("M", 20), ("G", 30)][unit];
                prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok((n << shift) as usize));
            }
        }
    }
}
