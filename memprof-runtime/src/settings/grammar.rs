//! How a setting's text is read (sizes, percentages, counts, words, durations), and the one way a value
//! that is not one is reported: [`Problem`]. Pure: no environment, no jemalloc.

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

/// Something wrong with what the environment says, reported at start-up (or when memprof is first needed):
/// every key's malformed value in the same words, whatever module uses it.
///
/// ```ignore
/// let problem = Problem::malformed("MEMPROF_DUMP_EVERY", "lots", "a size such as 1GiB", "it is ignored");
/// assert_eq!(problem.to_string(), "MEMPROF_DUMP_EVERY=\"lots\" is not a size such as 1GiB; it is ignored");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// A variable whose value is not one it takes: `{name}="{value}" is not {expected}; {instead}`.
    Malformed {
        /// The variable's name.
        name: String,
        /// Its value, as set (quoted and escaped when said).
        value: String,
        /// What it takes, such as "a size such as 1GiB".
        expected: String,
        /// What is done instead, such as "it is ignored".
        instead: String,
    },
    /// A variable set under its older name, read while the new one is unset.
    Renamed {
        /// The older name, set.
        older: &'static str,
        /// The name now.
        name: &'static str,
    },
    /// A `MEMPROF_*` variable memprof does not read, within two edits of one it does.
    Misspelt {
        /// The variable set.
        name: String,
        /// The one meant.
        meant: &'static str,
    },
}

impl Problem {
    /// A malformed value of `name`.
    pub(crate) fn malformed(name: &str, value: &str, expected: &str, instead: &str) -> Problem {
        Problem::Malformed {
            name: name.to_owned(),
            value: value.to_owned(),
            expected: expected.to_owned(),
            instead: instead.to_owned(),
        }
    }

    /// Whether it keeps something the operator asked for from being done (an error), rather than pointing
    /// at a likely mistake (a warning).
    pub(crate) fn is_error(&self) -> bool {
        matches!(self, Problem::Malformed { .. })
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Malformed { name, value, expected, instead } => {
                write!(formatter, "{name}={value:?} is not {expected}; {instead}")
            }
            Problem::Renamed { older, name } => {
                write!(formatter, "{older} is the older name of {name}: it is read while {name} is unset; rename it")
            }
            Problem::Misspelt { name, meant } => {
                write!(formatter, "{name} is not a variable memprof reads: did you mean {meant}?")
            }
        }
    }
}

/// A size in memprof-wire's grammar (`512KiB`, `64MiB`, `1GB`), at least 1 byte.
pub(crate) fn size(text: &str) -> Option<u64> {
    memprof_wire::size::parse(text)
}

/// `10%` as 0.1, within `range` (shares, not percentages).
pub(crate) fn percent(text: &str, range: RangeInclusive<f64>) -> Option<f64> {
    let share = text.trim().strip_suffix('%')?.trim().parse::<f64>().ok()? / 100.0;
    range.contains(&share).then_some(share)
}

/// A whole number within `range`.
pub(crate) fn count(text: &str, range: RangeInclusive<u64>) -> Option<u64> {
    text.trim().parse::<u64>().ok().filter(|count| range.contains(count))
}

/// A path a setting names: absolute, or explicitly relative (`./`, `../`), without control characters;
/// any other bytes (a path need not be UTF-8). `None` when it is not one: a value such as `-1`, `5 parsecs`
/// or `10\n20` is a mistake, not a directory to make in the working directory.
///
/// ```ignore
/// assert_eq!(path(b"/var/tmp/run"), Some(PathBuf::from("/var/tmp/run")));
/// assert_eq!(path(b"5 parsecs"), None);
/// ```
pub(crate) fn path(bytes: &[u8]) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    is_path(bytes).then(|| std::ffi::OsStr::from_bytes(bytes).into())
}

/// Whether [`path`] takes `bytes` (judged without allocating).
pub(crate) fn is_path(bytes: &[u8]) -> bool {
    let explicit = [&b"/"[..], b"./", b"../"].iter().any(|start| bytes.starts_with(start));
    explicit && !bytes.iter().any(u8::is_ascii_control)
}

/// `true` or `false`.
pub(crate) fn boolean(text: &str) -> Option<bool> {
    match text.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// A duration as runs take it (`30s`, `30secs`, `500ms`: memprof-wire's grammar), within `range`.
pub(crate) fn duration(text: &str, range: RangeInclusive<Duration>) -> Option<Duration> {
    memprof_wire::duration::parse(text.trim()).ok().filter(|length| range.contains(length))
}

/// The one of `words` that `text` is, as its value.
pub(crate) fn word<T: Copy>(text: &str, words: &[(&str, T)]) -> Option<T> {
    words.iter().find(|(word, _)| *word == text.trim()).map(|(_, value)| *value)
}

/// `words` as a problem says what is expected: "`a`, `b` or `c`".
pub(crate) fn expected_words<T>(words: &[(&str, T)]) -> String {
    let quoted: Vec<String> = words.iter().map(|(word, _)| format!("`{word}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_percentages_counts_and_words_are_read_or_refused() {
        assert_eq!(
            [size("1048576"), size("64MiB"), size(" 1 GB "), size("512KiB")],
            [Some(1 << 20), Some(64 << 20), Some(1_000_000_000), Some(512 << 10)]
        );
        assert_eq!([size("0"), size("lots"), size("1TiB"), size("99999999999999999999GiB")], [None; 4]);
        assert_eq!(
            [percent("10%", 0.001..=10.0), percent("10", 0.001..=10.0), percent("0%", 0.001..=10.0)],
            [Some(0.1), None, None]
        );
        assert_eq!([count("3", 1..=9), count("0", 1..=9), count("x", 1..=9)], [Some(3), None, None]);
        assert_eq!([boolean("true"), boolean("false"), boolean("yes")], [Some(true), Some(false), None]);
        let words = [("libgcc", 1), ("unwind-tables", 2)];
        assert_eq!((word("libgcc", &words), word("fast", &words)), (Some(1), None));
        assert_eq!(expected_words(&words), "`libgcc` or `unwind-tables`");
        assert_eq!(expected_words(&[("a", 1), ("b", 2), ("c", 3)]), "`a`, `b` or `c`");
        let seconds = Duration::from_secs(1)..=Duration::from_secs(60);
        assert_eq!(
            [duration("30s", seconds.clone()), duration("2secs", seconds.clone()), duration("2h", seconds)],
            [Some(Duration::from_secs(30)), Some(Duration::from_secs(2)), None]
        );
    }

    #[test]
    fn every_malformed_value_is_said_alike_quoted_and_escaped() {
        let problem =
            Problem::malformed("MEMPROF_SAMPLING", "always\u{1b}[2J", "`continuous` or `on-demand`", "it is ignored");
        assert_eq!(
            problem.to_string(),
            "MEMPROF_SAMPLING=\"always\\u{1b}[2J\" is not `continuous` or `on-demand`; it is ignored"
        );
        assert!(problem.is_error());
        let misspelt = Problem::Misspelt { name: "MEMPROF_SAMPLNG".to_owned(), meant: "MEMPROF_SAMPLING" };
        assert_eq!(
            misspelt.to_string(),
            "MEMPROF_SAMPLNG is not a variable memprof reads: did you mean MEMPROF_SAMPLING?"
        );
        assert!(!misspelt.is_error());
    }
}
