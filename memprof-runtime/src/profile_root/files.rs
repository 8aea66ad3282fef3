//! A kept profile's files: the heap profile, and what is kept beside it ([`Beside`]), each named from the
//! profile's path. Writers and readers name a side file here, the store removes them all from here: a new
//! view of a profile is one variant here and its writer.
//!
//! ```ignore
//! let peak = Beside::Peak.of(Path::new("/tmp/memprof.x/profile.7.heap"));
//! assert_eq!(peak, Path::new("/tmp/memprof.x/profile.7.peak"));
//! ```

use std::path::{Path, PathBuf};

/// What is kept beside a heap profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beside {
    /// Who made it, with which build ([`crate::profile_root::evidence`]).
    Provenance,
    /// The label table, named as memprof-analysis reads it offline ([`memprof_analysis::labels_path`]).
    Labels,
    /// What grew during a window (its net growth is this less [`Beside::Shrunk`]).
    Grown,
    /// What shrank during a window.
    Shrunk,
    /// What a window allocated, freed or not.
    Allocated,
    /// What a window held at its highest.
    Peak,
}

impl Beside {
    /// Every side file.
    pub(crate) const ALL: [Beside; 6] =
        [Beside::Provenance, Beside::Labels, Beside::Grown, Beside::Shrunk, Beside::Allocated, Beside::Peak];

    /// This side file of the heap profile at `profile`.
    pub(crate) fn of(self, profile: &Path) -> PathBuf {
        match self {
            Beside::Provenance => profile.with_extension("json"),
            Beside::Labels => memprof_analysis::labels_path(profile),
            Beside::Grown => profile.with_extension("net-grown"),
            Beside::Shrunk => profile.with_extension("net-shrunk"),
            Beside::Allocated => profile.with_extension("allocated"),
            Beside::Peak => profile.with_extension("peak"),
        }
    }
}

/// Where the sampling variance of the total of the profile (or view) at `file` is kept, beside it, when its
/// maker knew it (the record's profiles and allocation views: each sample weighed by the interval it was
/// drawn at): [`memprof_analysis::variance_path`]; readers without it estimate the error from the file.
pub(crate) fn variance_of(file: &Path) -> PathBuf {
    memprof_analysis::variance_path(file)
}

/// The known sampling variance of the profile at `file`, if one was written beside it and reads as one, with
/// what its calibration left out where it says so.
pub(crate) fn read_variance(file: &Path) -> Option<(f64, Option<memprof_analysis::Calibrated>)> {
    let limit = memprof_analysis::MAX_VARIANCE_FILE;
    let text = crate::profile_root::untrusted::read_small_text(&variance_of(file), limit).ok()?;
    memprof_analysis::parse_variance_file(&text)
}

/// Deletes the heap profile at `profile` and every file beside it; a file already gone is not an error.
pub(crate) fn remove_all(profile: &Path) {
    let _ = std::fs::remove_file(profile);
    let _ = std::fs::remove_file(variance_of(profile));
    for side in Beside::ALL {
        let _ = std::fs::remove_file(side.of(profile));
        let _ = std::fs::remove_file(variance_of(&side.of(profile)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variance_is_read_back_and_anything_else_is_not_one() {
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("profile.7.heap");
        let view = Beside::Allocated.of(&profile);
        assert_eq!(read_variance(&profile), None, "none written");
        crate::profile_root::storage::write_variance(&profile, 2.5e12, None);
        assert_eq!(read_variance(&profile), Some((2.5e12, None)));
        let calibrated = memprof_analysis::Calibrated { unreached_bytes: 4096, cached_bytes: 512 };
        crate::profile_root::storage::write_variance(&profile, 2.5e12, Some(calibrated));
        assert_eq!(read_variance(&profile), Some((2.5e12, Some(calibrated))));
        assert_eq!(read_variance(&view), None, "a view's is its own");
        for written in ["NaN\n", "-1\n", "inf\n", "12 MB\n", ""] {
            std::fs::write(variance_of(&view), written).unwrap();
            assert_eq!(read_variance(&view), None, "{written:?}");
        }
        std::fs::write(variance_of(&view), "9".repeat(200)).unwrap();
        assert_eq!(read_variance(&view), None, "too long to be one");
        remove_all(&profile);
        assert!(!variance_of(&profile).exists() && !variance_of(&view).exists(), "removed with the profile");
    }

    #[test]
    fn every_side_file_has_a_name_of_its_own_beside_the_profile() {
        let profile = Path::new("/tmp/memprof.x/profile.7.heap");
        let names: Vec<PathBuf> = Beside::ALL.iter().map(|side| side.of(profile)).collect();
        assert_eq!(Beside::Peak.of(profile), Path::new("/tmp/memprof.x/profile.7.peak"));
        assert_eq!(Beside::Labels.of(profile), memprof_analysis::labels_path(profile));
        for (index, name) in names.iter().enumerate() {
            assert_eq!(name.parent(), profile.parent(), "{name:?}");
            assert!(name != profile && !names[..index].contains(name), "{name:?} twice");
        }
    }

    #[test]
    fn removing_a_profile_removes_what_is_beside_it_and_nothing_else() {
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("profile.7.heap");
        let other = directory.path().join("profile.8.heap");
        for path in Beside::ALL.iter().map(|side| side.of(&profile)).chain([profile.clone(), other.clone()]) {
            std::fs::write(path, b"x").unwrap();
        }
        std::fs::remove_file(Beside::Peak.of(&profile)).unwrap();
        remove_all(&profile);
        let left: Vec<_> = std::fs::read_dir(directory.path()).unwrap().map(|entry| entry.unwrap().path()).collect();
        assert_eq!(left, [other]);
    }
}
