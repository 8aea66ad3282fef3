//! The file beside a profile that says the variance of its total, where its maker knew it from each
//! sample's own weight (memprof's record writes one beside each profile and allocation view it makes:
//! a `heap_v2` file has one sampling interval, and cannot tell samples taken at a longer one apart). A
//! reader with it says the error of the total from it ([`crate::Analysis::known_variance`]); without it,
//! estimates it from the file's own counts. Where the maker counted each size class sampled whole (the
//! whole heap, from jemalloc's counts), a second line says what that left out ([`Calibrated`]).
//!
//! ```
//! use std::path::Path;
//! use memprof_analysis::Calibrated;
//! let path = memprof_analysis::variance_path(Path::new("/tmp/profile.7.heap"));
//! assert_eq!(path, Path::new("/tmp/profile.7.heap.variance"));
//! assert_eq!(memprof_analysis::parse_variance(&memprof_analysis::variance_text(2.5e12, None)), Some(2.5e12));
//! assert_eq!(memprof_analysis::parse_variance("NaN"), None);
//! let calibrated = Calibrated { unreached_bytes: 4 << 20, cached_bytes: 1 << 20 };
//! let text = memprof_analysis::variance_text(2.5e12, Some(calibrated));
//! assert_eq!(memprof_analysis::parse_calibrated(&text), Some(calibrated));
//! assert_eq!(memprof_analysis::parse_variance(&text), Some(2.5e12));
//! assert_eq!(memprof_analysis::parse_variance_file(&text), Some((2.5e12, Some(calibrated))));
//! ```

use std::path::{Path, PathBuf};

/// The most bytes a variance file holds: a number, and a line of two.
pub const MAX_VARIANCE_FILE: u64 = 128;

/// The word that begins a variance file's second line: the calibration's.
const CALIBRATED: &str = "calibrated";

/// What a profile's maker that counted each size class sampled whole by jemalloc's counts (shared among the
/// class's stacks by their samples) says that left out: the bytes of classes no live sample reached (in no
/// stack), and of what is counted, the freed objects the threads' caches keep.
///
/// ```
/// let calibrated = memprof_analysis::Calibrated { unreached_bytes: 4 << 20, cached_bytes: 1 << 20 };
/// assert!(calibrated.said().contains("up to 4.0 MiB more in classes no live sample reached"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibrated {
    /// Bytes of the classes with live objects and no live sample, at most: in no stack.
    pub unreached_bytes: u64,
    /// Bytes the threads' caches keep, freed, counted in their classes.
    pub cached_bytes: u64,
}

impl Calibrated {
    /// How readers are told, in parentheses, after the total's estimate.
    pub fn said(&self) -> String {
        let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
        format!(
            " (each size class sampled counted whole by jemalloc, shared among its stacks by their samples; up to \
             {:.1} MiB more in classes no live sample reached, in no stack; {:.1} MiB of what is counted is freed \
             objects the threads' caches keep)",
            mib(self.unreached_bytes),
            mib(self.cached_bytes),
        )
    }
}

/// The file beside the profile (or view) at `profile` holding the variance of its total:
/// `<profile>.variance`.
pub fn variance_path(profile: &Path) -> PathBuf {
    let mut path = profile.as_os_str().to_owned();
    path.push(".variance");
    path.into()
}

/// What a variance file holds for `variance` (bytes squared), and the calibration where there was one.
pub fn variance_text(variance: f64, calibrated: Option<Calibrated>) -> String {
    match calibrated {
        Some(Calibrated { unreached_bytes, cached_bytes }) => {
            format!("{variance}\n{CALIBRATED} {unreached_bytes} {cached_bytes}\n")
        }
        None => format!("{variance}\n"),
    }
}

/// The variance a variance file's `text` says on its first line: a finite number, not negative; anything
/// else is none (the file is input like any other).
pub fn parse_variance(text: &str) -> Option<f64> {
    let first = text.lines().next()?;
    first.trim().parse::<f64>().ok().filter(|variance| variance.is_finite() && *variance >= 0.0)
}

/// What a variance file's `text` says: the variance ([`parse_variance`]), and the calibration where its second
/// line reads as one ([`parse_calibrated`]); `None` where the variance does not read as one.
pub fn parse_variance_file(text: &str) -> Option<(f64, Option<Calibrated>)> {
    Some((parse_variance(text)?, parse_calibrated(text)))
}

/// The calibration a variance file's `text` says on its second line, where it reads as one: the word and two
/// byte counts.
pub fn parse_calibrated(text: &str) -> Option<Calibrated> {
    let mut words = text.lines().nth(1)?.split_ascii_whitespace();
    let (Some(CALIBRATED), Some(unreached), Some(cached), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return None;
    };
    Some(Calibrated { unreached_bytes: unreached.parse().ok()?, cached_bytes: cached.parse().ok()? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_finite_number_not_negative_is_a_variance() {
        for (text, read) in [("0\n", Some(0.0)), (" 1e12 ", Some(1e12)), ("-1", None), ("inf", None), ("", None)] {
            assert_eq!(parse_variance(text), read, "{text:?}");
        }
        assert_eq!(parse_variance("12 MB"), None);
        assert_eq!(parse_variance("1e12\ncalibrated 1 2\n"), Some(1e12), "the calibration's line after");
    }

    #[test]
    fn only_the_word_and_two_byte_counts_are_a_calibration() {
        let read = |text: &str| parse_calibrated(text);
        assert_eq!(read("1e12\ncalibrated 4096 512\n"), Some(Calibrated { unreached_bytes: 4096, cached_bytes: 512 }));
        for text in [
            "1e12\n",
            "1e12\ncalibrated 1\n",
            "1e12\ncalibrated 1 2 3\n",
            "1e12\ncached 1 2\n",
            "1e12\ncalibrated -1 2",
        ] {
            assert_eq!(read(text), None, "{text:?}");
        }
    }
}
