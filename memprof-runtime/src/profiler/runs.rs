//! The bookkeeping of runs, with no jemalloc, thread or file in it: ids, the run in progress, the two rings
//! of kept profiles and their eviction, and which profile a request names (the 404/409 rules).
//!
//! Whatever it evicts it hands back: the profiler deletes the files and tells who keeps renders
//! of them.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::error::{Cause, DumpOf, Error};
use super::outcomes::{FailedRun, LookupError, RunCounts};
use crate::profile_root::evidence::{EarlierProcess, EarlierProfile};
use crate::run_model::{ActiveRun, KeptProfile, Owner};

/// Everything about runs, kept behind the profiler's lock.
#[derive(Debug)]
pub(crate) struct Runs {
    current: Option<ActiveRun>,
    /// Windows opened by code in continuous mode, beside the current run (they may overlap it and each
    /// other), oldest first.
    windows: Vec<ActiveRun>,
    /// Oldest first.
    finished: VecDeque<KeptProfile>,
    /// Automatic dumps, oldest first, in a ring of their own (see [`super::autodump`]).
    automatic: VecDeque<KeptProfile>,
    /// What earlier processes that ended without cleaning up kept, newest first (see [`crate::profile_root::evidence`]).
    earlier: Vec<EarlierProcess>,
    /// Set when the program ends: nothing is dumped any more.
    closed: bool,
    last_failure: Option<FailedRun>,
    last_id: u64,
    /// How many finished runs to keep, of operators' and of code's each (see [`Runs::drop_oldest`]).
    kept: usize,
    counts: RunCounts,
}

/// What a request to stop names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StopTarget {
    /// The run in progress: finish it.
    Current,
    /// No run is in progress, and no id was given.
    NoRun,
    /// A run that ended already: its profile, or why it has none.
    Ended(Result<KeptProfile, Error>),
}

/// A copy of the runs' records, for handlers to read without holding the profiler's lock.
#[derive(Debug, Clone)]
pub(crate) struct Overview {
    pub(crate) current: Option<ActiveRun>,
    /// Windows opened by code, oldest first.
    pub(crate) windows: Vec<ActiveRun>,
    /// Oldest first.
    pub(crate) finished: Vec<KeptProfile>,
    /// Oldest first.
    pub(crate) automatic: Vec<KeptProfile>,
    pub(crate) earlier: Vec<EarlierProcess>,
    pub(crate) last_failure: Option<FailedRun>,
    pub(crate) kept: usize,
    pub(crate) counts: RunCounts,
    /// The profile directory, once made.
    pub(crate) directory: Option<PathBuf>,
    /// Whether profiles are kept in memory, for want of a writable directory.
    pub(crate) in_memory: bool,
    /// Why profiles are not where they were (the store's word), if they are not.
    pub(crate) store_warning: Option<String>,
}

impl Overview {
    /// The newest finished run.
    pub(crate) fn latest(&self) -> Option<&KeptProfile> {
        self.finished.last()
    }

    /// What the books warn of: profiles kept elsewhere than they were (a directory the process can no
    /// longer write), and a run that failed after the latest profile (its download says why too).
    pub(crate) fn warnings(&self) -> impl Iterator<Item = String> + use<> {
        let latest = self.finished.iter().chain(&self.automatic).max_by_key(|profile| profile.id);
        let failed = self
            .last_failure
            .as_ref()
            .filter(|failure| latest.is_none_or(|latest| latest.id < failure.id))
            .map(|failure| format!("Run {} failed: {}", failure.id, failure.error));
        self.store_warning.clone().into_iter().chain(failed)
    }
}

impl Runs {
    /// No runs yet; `kept` finished runs will be kept (at least one).
    pub(crate) fn new(kept: usize) -> Self {
        Self {
            current: None,
            windows: Vec::new(),
            finished: VecDeque::new(),
            automatic: VecDeque::new(),
            earlier: Vec::new(),
            closed: false,
            last_failure: None,
            last_id: 0,
            kept: kept.max(1),
            counts: RunCounts::default(),
        }
    }

    /// The run in progress.
    pub(crate) fn current(&self) -> Option<&ActiveRun> {
        self.current.as_ref()
    }

    /// The run or window `id`, if it is in progress.
    pub(crate) fn in_progress(&self, id: u64) -> Option<&ActiveRun> {
        self.current.iter().chain(&self.windows).find(|run| run.id == id)
    }

    /// Fails with [`Error::Ending`] once the program ends.
    pub(crate) fn check_open(&self) -> Result<(), Error> {
        if self.closed { Err(Error::Ending) } else { Ok(()) }
    }

    /// A new id: milliseconds since the Unix epoch, bumped past the previous id so ids never collide.
    pub(crate) fn next_id(&mut self) -> u64 {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        self.last_id = u64::try_from(now).unwrap_or(u64::MAX).max(self.last_id + 1);
        self.last_id
    }

    /// Records run `id` (from [`Runs::next_id`]) as in progress (the caller checked there is none), a window
    /// from the record's `window_start` in continuous mode.
    pub(crate) fn begin(
        &mut self,
        id: u64,
        owner: Owner,
        deadline: Option<Instant>,
        window_start: Option<u64>,
    ) -> ActiveRun {
        let run = ActiveRun { id, owner, started: SystemTime::now(), deadline, window_start };
        self.current = Some(run.clone());
        self.counts.started += 1;
        run
    }

    /// Records window `id` as open, from the record's `window_start` (continuous mode), beside any other run.
    pub(crate) fn open_window(&mut self, id: u64, owner: Owner, window_start: u64) -> ActiveRun {
        let run = ActiveRun { id, owner, started: SystemTime::now(), deadline: None, window_start: Some(window_start) };
        self.windows.push(run.clone());
        self.counts.started += 1;
        run
    }

    /// Closes window `id`, if open.
    pub(crate) fn close_window(&mut self, id: u64) -> Option<ActiveRun> {
        let index = self.windows.iter().position(|window| window.id == id)?;
        Some(self.windows.remove(index))
    }

    /// Ends the run in progress, if any.
    pub(crate) fn end(&mut self) -> Option<ActiveRun> {
        self.current.take()
    }

    /// Keeps the profile of a run that ended; returns the profiles pushed out.
    pub(crate) fn finished(&mut self, profile: KeptProfile) -> Vec<KeptProfile> {
        self.finished.push_back(profile);
        self.counts.finished += 1;
        self.drop_oldest()
    }

    /// Records that run `id` ended without a profile, and returns the error saying so.
    pub(crate) fn failed(&mut self, id: u64, error: Cause) -> Error {
        let of = DumpOf::Run { id, previous: self.finished.back().map(|latest| latest.id) };
        let error = Error::Dump { of, error };
        self.last_failure = Some(FailedRun { id, error: error.clone() });
        self.counts.failed += 1;
        error
    }

    /// Keeps the `count` newest finished runs (at least one) from now on; returns the profiles pushed out.
    pub(crate) fn keep_runs(&mut self, count: usize) -> Vec<KeptProfile> {
        self.kept = count.max(1);
        self.drop_oldest()
    }

    /// Drops the oldest finished runs beyond [`Runs::kept`], counted apart for code's (`scope!`, `Run`) and
    /// for the others' (an operator's, over HTTP or the CLI): a loop of scopes never pushes out the profile
    /// an operator just took; returns the profiles dropped, oldest first.
    fn drop_oldest(&mut self) -> Vec<KeptProfile> {
        let by_code = |profile: &KeptProfile| matches!(profile.owner, Owner::Code(_));
        let mut dropped = Vec::new();
        for code in [false, true] {
            let mut excess =
                self.finished.iter().filter(|profile| by_code(profile) == code).count().saturating_sub(self.kept);
            self.finished.retain(|profile| {
                let drop = excess > 0 && by_code(profile) == code;
                if drop {
                    excess -= 1;
                    dropped.push(profile.clone());
                }
                !drop
            });
        }
        dropped.sort_by_key(|profile| profile.id);
        dropped
    }

    /// Keeps an automatic dump, then drops the oldest beyond `keep` dumps or `max_bytes` in all, as `size`
    /// measures them (the newest always stays); returns the dumps dropped.
    pub(crate) fn automatic_dump(
        &mut self,
        dump: KeptProfile,
        keep: usize,
        max_bytes: u64,
        size: impl Fn(&KeptProfile) -> u64,
    ) -> Vec<KeptProfile> {
        self.automatic.push_back(dump);
        let mut total: u64 = self.automatic.iter().map(&size).sum();
        let mut dropped = Vec::new();
        while self.automatic.len() > 1 && (self.automatic.len() > keep || total > max_bytes) {
            let Some(oldest) = self.automatic.pop_front() else { break };
            total = total.saturating_sub(size(&oldest));
            dropped.push(oldest);
        }
        dropped
    }

    /// Serves what earlier processes kept.
    pub(crate) fn adopt_earlier(&mut self, earlier: Vec<EarlierProcess>) {
        self.earlier = earlier;
    }

    /// Stops serving what earlier processes kept, and hands it back.
    pub(crate) fn take_earlier(&mut self) -> Vec<EarlierProcess> {
        std::mem::take(&mut self.earlier)
    }

    /// Closes the books as the program ends: nothing more is kept (open windows are dropped); returns this
    /// process's profiles.
    pub(crate) fn close(&mut self) -> Vec<KeptProfile> {
        self.closed = true;
        self.windows.clear();
        self.finished.drain(..).chain(self.automatic.drain(..)).collect()
    }

    /// The newest profile of this process: a finished run's or an automatic dump's.
    pub(crate) fn newest(&self) -> Option<&KeptProfile> {
        self.finished.back().into_iter().chain(self.automatic.back()).max_by_key(|profile| profile.id)
    }

    /// Every profile kept: runs', automatic dumps' and earlier processes'.
    fn kept_profiles(&self) -> impl Iterator<Item = &KeptProfile> {
        let earlier = self.earlier.iter().flat_map(|process| process.profiles.iter().map(|earlier| &earlier.profile));
        self.finished.iter().chain(&self.automatic).chain(earlier)
    }

    fn find(&self, id: u64) -> Option<&KeptProfile> {
        self.kept_profiles().find(|run| run.id == id)
    }

    /// The profile `id` of an earlier process, if it is one.
    pub(crate) fn earlier_profile(&self, id: u64) -> Option<&EarlierProfile> {
        self.earlier.iter().flat_map(|process| &process.profiles).find(|earlier| earlier.profile.id == id)
    }

    /// The kept profile `id`, or without an id the latest run or window that ended (what an operator who just
    /// stopped one means, though automatic dumps were taken since: those are reached by their ids), else the
    /// newest automatic dump, else the newest profile an earlier process left (the heap before a kill,
    /// which `state` lists); why not, when it cannot be served.
    pub(crate) fn lookup(&self, id: Option<u64>) -> Result<KeptProfile, LookupError> {
        let current = self.current.as_ref().map(|run| run.id);
        let Some(id) = id else {
            if let Some(current) = current {
                return Err(LookupError::RunActive(current));
            }
            let earlier =
                self.earlier.first().and_then(|process| process.profiles.first()).map(|earlier| &earlier.profile);
            let latest = self.finished.back().or(self.automatic.back());
            // With nothing kept, a run that failed is what there is to say (never "none yet").
            return latest.or(earlier).cloned().ok_or_else(|| match &self.last_failure {
                Some(failure) => LookupError::Failed(failure.error.clone()),
                None => LookupError::NoneYet,
            });
        };
        if let Some(profile) = self.find(id) {
            return Ok(profile.clone());
        }
        if current == Some(id) || self.windows.iter().any(|window| window.id == id) {
            return Err(LookupError::StillActive(id));
        }
        match self.last_failure.as_ref().filter(|failure| failure.id == id) {
            Some(failure) => Err(LookupError::Failed(failure.error.clone())),
            None => Err(LookupError::NotKept { id, kept: self.kept_profiles().map(|run| run.id).collect() }),
        }
    }

    /// What a request to stop run `id` (the current one, without an id) names.
    pub(crate) fn stop_target(&self, id: Option<u64>) -> StopTarget {
        let current = self.current.as_ref().map(|run| run.id);
        match (id, current) {
            (None, Some(_)) => StopTarget::Current,
            (Some(id), Some(current)) if id == current => StopTarget::Current,
            (None, None) => StopTarget::NoRun,
            (Some(id), _) => StopTarget::Ended(match (self.find(id), &self.last_failure) {
                (Some(run), _) => Ok(run.clone()),
                (None, Some(failure)) if failure.id == id => Err(failure.error.clone()),
                (None, _) => Err(Error::UnknownRun(id)),
            }),
        }
    }

    /// A copy of the records, with where the profiles are stored.
    pub(crate) fn overview(&self, directory: Option<PathBuf>, in_memory: bool) -> Overview {
        Overview {
            current: self.current.clone(),
            windows: self.windows.clone(),
            finished: self.finished.iter().cloned().collect(),
            automatic: self.automatic.iter().cloned().collect(),
            earlier: self.earlier.clone(),
            last_failure: self.last_failure.clone(),
            kept: self.kept,
            counts: self.counts,
            directory,
            in_memory,
            store_warning: None,
        }
    }
}

#[cfg(test)]
mod tests;
