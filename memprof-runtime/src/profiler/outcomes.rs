//! What starting, stopping and looking up a run can answer, and the counts of runs.

use super::error::Error;
use crate::run_model::{ActiveRun, KeptProfile};

/// A run that ended without a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FailedRun {
    pub(crate) id: u64,
    pub(crate) error: Error,
}

/// How many runs started, finished and failed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunCounts {
    pub(crate) started: u64,
    pub(crate) finished: u64,
    pub(crate) failed: u64,
}

/// Why a profile asked for by id (or the latest, without one) cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LookupError {
    /// Without an id: a run is active (its profile does not exist yet, and "the latest" would be ambiguous).
    RunActive(u64),
    /// That id is the active run's.
    StillActive(u64),
    /// That run failed to write its profile.
    Failed(Error),
    /// No profile has that id; these are kept.
    NotKept { id: u64, kept: Vec<u64> },
    /// Without an id: no profile was ever written.
    NoneYet,
}

/// What `start` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Started {
    /// A new run.
    New(ActiveRun),
    /// A run was already active; it goes on unchanged.
    AlreadyActive(ActiveRun),
}

/// What the profiler's `stop_owned_by` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// It stopped the run; its profile.
    Profile(KeptProfile),
    /// There was no run.
    NoRun,
    /// Another owner's run is active, and goes on.
    OwnedBy(ActiveRun),
}
