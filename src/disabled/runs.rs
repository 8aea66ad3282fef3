//! Compiled out: runs that never start. [`Run::start`] says why; [`Profile::latest`] finds none. The
//! types keep the names and methods of the compiled-in ones, so code that names them builds either way.

use std::convert::Infallible;
use std::path::Path;

use memprof_wire::Error;

/// Compiled out: a run that never starts ([`Run::start`] returns [`Error::Unavailable`]).
///
/// ```
/// assert!(memprof::Run::start("load").is_err());
/// ```
#[derive(Debug)]
#[must_use = "the run ends when it is dropped"]
pub struct Run {
    never: Infallible,
}

impl Run {
    /// Compiled out: fails with [`Error::Unavailable`].
    pub fn start(_label: impl Into<String>) -> Result<Run, Error> {
        Err(Error::Unavailable("memprof is compiled out of this program (its `enabled` feature is off)".to_owned()))
    }

    /// The run's id (no run exists compiled out).
    pub fn id(&self) -> u64 {
        match self.never {}
    }

    /// Ends the run (no run exists compiled out).
    pub fn stop(self) -> Result<Profile, Error> {
        match self.never {}
    }
}

/// Compiled out: a heap profile, of which there is none.
///
/// ```
/// assert!(memprof::Profile::latest().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    never: Infallible,
}

impl Profile {
    /// Compiled out: `None`.
    pub fn latest() -> Option<Profile> {
        None
    }

    /// The id of the run that produced it (none exists compiled out).
    pub fn id(&self) -> u64 {
        match self.never {}
    }

    /// Where the file is (none exists compiled out).
    pub fn path(&self) -> &Path {
        match self.never {}
    }

    /// Copies the profile (none exists compiled out).
    pub fn save(&self, _to: impl AsRef<Path>) -> std::io::Result<()> {
        match self.never {}
    }

    /// What the run allocated (none exists compiled out).
    pub fn allocated_path(&self) -> Option<std::path::PathBuf> {
        match self.never {}
    }

    /// What the run held at its peak (none exists compiled out).
    pub fn peak_path(&self) -> Option<std::path::PathBuf> {
        match self.never {}
    }
}
