//! The file beside a profile that says the variance of its total, where its maker knew it from each
//! sample's own weight (memprof's record writes one beside each profile and allocation view it makes:
//! a `heap_v2` file has one sampling interval, and cannot tell samples taken at a longer one apart). A
//! reader with it says the error of the total from it ([`crate::Analysis::known_variance`]); without it,
//! estimates it from the file's own counts.
//!
//! ```
//! use std::path::Path;
//! let path = memprof_analysis::variance_path(Path::new("/tmp/profile.7.heap"));
//! assert_eq!(path, Path::new("/tmp/profile.7.heap.variance"));
//! assert_eq!(memprof_analysis::parse_variance(&memprof_analysis::variance_text(2.5e12)), Some(2.5e12));
//! assert_eq!(memprof_analysis::parse_variance("NaN"), None);
//! ```

use std::path::{Path, PathBuf};

/// The most bytes a variance file holds: a number.
pub const MAX_VARIANCE_FILE: u64 = 64;

/// The file beside the profile (or view) at `profile` holding the variance of its total:
/// `<profile>.variance`.
pub fn variance_path(profile: &Path) -> PathBuf {
    let mut path = profile.as_os_str().to_owned();
    path.push(".variance");
    path.into()
}

/// What a variance file holds for `variance` (bytes squared).
pub fn variance_text(variance: f64) -> String {
    format!("{variance}\n")
}

/// The variance a variance file's `text` says: a finite number, not negative; anything else is none (the
/// file is input like any other).
pub fn parse_variance(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|variance| variance.is_finite() && *variance >= 0.0)
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
    }
}
