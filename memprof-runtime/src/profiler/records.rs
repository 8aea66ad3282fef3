//! What the profiler records of runs: who started them, the one in progress, the profiles kept, and what
//! starting, stopping and looking one up can answer.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use super::Error;

/// Who started a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// `/memory-profiler/start`, ended by its timer or `/stop`.
    Http,
    /// `memprof::scope!` or `memprof::Run`, with the label the code gave.
    Code(String),
    /// `heap_profile?active=true` (or `memprof activate`), ended by `active=false` or `/stop`.
    Manual,
    /// An automatic dump (not a run), with the reason it was taken.
    Automatic(String),
    /// A profile an earlier process kept, with who started it there (as [`Owner::name`] said it).
    Earlier(String),
}

impl Owner {
    /// Who started a run, as the endpoints and records say it: `http`, `code: <label>`, `manual`,
    /// `automatic: <reason>`.
    pub(crate) fn name(&self) -> String {
        match self {
            Owner::Http => "http".to_owned(),
            Owner::Code(label) => format!("code: {label}"),
            Owner::Manual => "manual".to_owned(),
            Owner::Automatic(reason) => format!("automatic: {reason}"),
            Owner::Earlier(name) => name.clone(),
        }
    }
}

/// The run in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActiveRun {
    pub(crate) id: u64,
    pub(crate) owner: Owner,
    pub(crate) started: SystemTime,
    pub(crate) deadline: Option<Instant>,
}

impl ActiveRun {
    /// Seconds until the timer ends the run; `None` for runs that end when their code says so.
    pub(crate) fn remaining_seconds(&self) -> Option<f64> {
        self.deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()).as_secs_f64())
    }
}

/// A run that ended with a profile on disk (or an automatic dump, or an earlier process's profile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeptProfile {
    pub(crate) id: u64,
    pub(crate) owner: Owner,
    pub(crate) started: SystemTime,
    pub(crate) stopped: SystemTime,
    pub(crate) path: PathBuf,
}

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

/// What [`super::Profiler::stop_owned_by`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// It stopped the run; its profile.
    Profile(KeptProfile),
    /// There was no run.
    NoRun,
    /// Another owner's run is active, and goes on.
    OwnedBy(ActiveRun),
}
