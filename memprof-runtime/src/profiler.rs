//! Profiling runs: one at a time, identified by increasing ids, ended by a timer, by `stop`, or by the
//! code that started them.
//!
//! A run resets jemalloc's samples (`prof.reset`) so its profile holds only its own window, switches
//! `prof.active` on, and at its end dumps the heap into the [`ProfileStore`] and switches sampling off. The last
//! [`DEFAULT_KEPT_RUNS`] profiles (or as many as `keep_runs` says) stay downloadable; a failed dump is reported and leaves them untouched.

use std::collections::VecDeque;
use std::fmt;
use std::path::PathBuf;
use std::sync::{LazyLock, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::evidence::{EarlierProcess, EarlierProfile};
use crate::jemalloc;
use crate::malloc_conf::ConfigReport;
use crate::messages;
use crate::storage::ProfileStore;
use crate::unwinder::Unwinder;

use crate::environment::FINAL_DUMP as FINAL_DUMP_VARIABLE;

/// How many finished profiles are kept on disk and downloadable, unless `keep_runs` says otherwise.
pub(crate) const DEFAULT_KEPT_RUNS: usize = 4;

/// Why a run could not be started or finished. Each message says what happened and what to do.
///
/// ```
/// let error = memprof_runtime::Error::Busy(1795354618996);
/// assert_eq!(error.to_string(), "Heap profiling run 1795354618996 is already active; stop it or wait for it to end");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Profiling is not enabled in this process (`opt.prof` is false).
    Unavailable(String),
    /// Sampling was switched on by someone else (`MALLOC_CONF=prof_active:true`, or by hand).
    StartedExternally,
    /// Another run is active; it carries that run's id.
    Busy(u64),
    /// No run or profile has this id.
    UnknownRun(u64),
    /// jemalloc refused a control: what memprof was doing, the control's name, and jemalloc's error.
    Control {
        /// What memprof was doing, such as "Cannot switch sampling on".
        doing: &'static str,
        /// The `mallctl` name.
        control: &'static str,
        /// jemalloc's error.
        error: String,
    },
    /// A heap profile could not be written.
    Dump {
        /// Which dump.
        of: DumpOf,
        /// Why, as the file system or jemalloc said it.
        error: String,
    },
    /// A thread memprof needs could not be started.
    Thread {
        /// Which thread, such as "the run's timer".
        purpose: &'static str,
        /// Why.
        error: String,
    },
    /// memprof has shut down ([`crate::shutdown`], or the [`crate::Guard`] dropped): nothing more is
    /// profiled or dumped.
    Ending,
}

/// Which heap profile could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DumpOf {
    /// Run `id`'s; `previous` is the profile still available, if any.
    Run {
        /// The run.
        id: u64,
        /// The newest profile kept, which stays downloadable.
        previous: Option<u64>,
    },
    /// The heap as it is now, outside any run.
    Snapshot,
    /// An automatic dump.
    Automatic,
}

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable(why) => write!(formatter, "{why}"),
            Error::StartedExternally => formatter.write_str(
                "Heap profiling was started externally (by the jemalloc configuration, such as MALLOC_CONF=prof_active:true); memprof does not start or stop runs over it",
            ),
            Error::Busy(id) => write!(formatter, "Heap profiling run {id} is already active; stop it or wait for it to end"),
            Error::UnknownRun(id) => write!(formatter, "There is no heap profiling run with id {id}"),
            Error::Control { doing, control, error } => write!(formatter, "{doing} ({control}: {error})"),
            Error::Dump { of: DumpOf::Run { id, previous }, error } => {
                write!(formatter, "The heap profile of run {id} could not be written: {error}; ")?;
                match previous {
                    Some(previous) => write!(formatter, "the previous profile (id {previous}) is still available"),
                    None => formatter.write_str("no earlier profile exists"),
                }
            }
            Error::Dump { of: DumpOf::Snapshot, error } => write!(formatter, "The heap could not be dumped: {error}"),
            Error::Dump { of: DumpOf::Automatic, error } => {
                write!(formatter, "The automatic heap dump could not be written: {error}")
            }
            Error::Thread { purpose, error } => write!(formatter, "Cannot start {purpose} thread ({error})"),
            Error::Ending => formatter.write_str(
                "memprof has shut down (memprof::shutdown was called, or the guard memprof::start returned was dropped: keep it in a variable until main returns, `let _memprof = memprof::start(...)`, not `let _ = ...`); nothing more is profiled or dumped",
            ),
        }
    }
}

impl std::error::Error for Error {}

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
#[derive(Debug, Clone)]
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

/// A run that ended with a profile on disk.
#[derive(Debug, Clone)]
pub(crate) struct KeptProfile {
    pub(crate) id: u64,
    pub(crate) owner: Owner,
    pub(crate) started: SystemTime,
    pub(crate) stopped: SystemTime,
    pub(crate) path: PathBuf,
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

/// A run that ended without a profile.
#[derive(Debug, Clone)]
pub(crate) struct FailedRun {
    pub(crate) id: u64,
    pub(crate) error: Error,
}

/// What `start` did.
#[derive(Debug, Clone)]
pub(crate) enum Started {
    /// A new run.
    New(ActiveRun),
    /// A run was already active; it goes on unchanged.
    AlreadyActive(ActiveRun),
}

/// Everything about runs, behind one lock.
#[derive(Debug)]
pub(crate) struct Runs {
    pub(crate) current: Option<ActiveRun>,
    /// Oldest first.
    pub(crate) finished: VecDeque<KeptProfile>,
    /// Automatic dumps, oldest first, in a ring of their own (see [`crate::autodump`]).
    pub(crate) automatic: VecDeque<KeptProfile>,
    /// What earlier processes that ended without cleaning up kept, newest first (see [`crate::evidence`]).
    pub(crate) earlier: Vec<EarlierProcess>,
    /// Set when the program ends: nothing is dumped any more.
    closed: bool,
    pub(crate) last_failure: Option<FailedRun>,
    last_id: u64,
    pub(crate) store: ProfileStore,
    /// How many finished runs to keep.
    kept: usize,
    /// Runs started, finished with a profile, and failed, since the program started.
    pub(crate) counts: RunCounts,
}

/// How many runs started, finished and failed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RunCounts {
    pub(crate) started: u64,
    pub(crate) finished: u64,
    pub(crate) failed: u64,
}

impl Default for Runs {
    fn default() -> Self {
        Self {
            current: None,
            finished: VecDeque::new(),
            automatic: VecDeque::new(),
            earlier: Vec::new(),
            closed: false,
            last_failure: None,
            last_id: 0,
            store: ProfileStore::default(),
            kept: DEFAULT_KEPT_RUNS,
            counts: RunCounts::default(),
        }
    }
}

impl Runs {
    /// The newest finished run.
    pub(crate) fn latest(&self) -> Option<&KeptProfile> {
        self.finished.back()
    }

    /// The newest profile of this process: a finished run's or an automatic dump's.
    fn newest(&self) -> Option<&KeptProfile> {
        self.finished.back().into_iter().chain(self.automatic.back()).max_by_key(|profile| profile.id)
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.closed { Err(Error::Ending) } else { Ok(()) }
    }

    /// How many finished runs are kept.
    pub(crate) fn kept(&self) -> usize {
        self.kept
    }

    /// The finished run with this id.
    pub(crate) fn find(&self, id: u64) -> Option<&KeptProfile> {
        self.kept_profiles().find(|run| run.id == id)
    }

    /// Every profile kept: runs', automatic dumps' and earlier processes'.
    fn kept_profiles(&self) -> impl Iterator<Item = &KeptProfile> {
        let earlier = self.earlier.iter().flat_map(|process| process.profiles.iter().map(|earlier| &earlier.profile));
        self.finished.iter().chain(&self.automatic).chain(earlier)
    }

    /// The ids of every profile kept, runs', automatic dumps' and earlier processes'.
    pub(crate) fn kept_ids(&self) -> Vec<u64> {
        self.kept_profiles().map(|run| run.id).collect()
    }

    /// The profile `id` of an earlier process, if it is one.
    pub(crate) fn earlier_profile(&self, id: u64) -> Option<&EarlierProfile> {
        self.earlier.iter().flat_map(|process| &process.profiles).find(|earlier| earlier.profile.id == id)
    }

    /// A new id: milliseconds since the Unix epoch, bumped past the previous id so ids never collide.
    fn next_id(&mut self) -> u64 {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        self.last_id = u64::try_from(now).unwrap_or(u64::MAX).max(self.last_id + 1);
        self.last_id
    }

    /// Deletes a profile no longer kept, and tells whoever keeps what was made of it.
    fn evict(&mut self, profile: &KeptProfile) {
        self.store.remove(&profile.path);
        evicted(profile.id);
    }

    fn keep(&mut self, run: KeptProfile) {
        self.finished.push_back(run);
        self.drop_oldest();
    }

    /// Deletes the oldest profiles beyond the number kept.
    fn drop_oldest(&mut self) {
        while self.finished.len() > self.kept {
            if let Some(oldest) = self.finished.pop_front() {
                self.evict(&oldest);
            }
        }
    }
}

/// The process-wide profiler.
pub(crate) struct Profiler {
    runs: Mutex<Runs>,
    /// Wakes the timer of the current run when the run ends early.
    run_ended: Condvar,
    pub(crate) config: ConfigReport,
    /// How samples walk the stack.
    pub(crate) unwinder: Unwinder,
}

/// Made on first use, unsampled (reading the allocator's code out of the executable allocates some 64 kB
/// that must not show in a profile when sampling is on from the start).
static PROFILER: LazyLock<Profiler> = LazyLock::new(|| {
    jemalloc::unsampled(|| {
        let config = ConfigReport::read();
        let unwinder = if config.profiling_enabled {
            crate::unwinder::install()
        } else {
            Unwinder::Libgcc("heap profiling is disabled".to_owned())
        };
        Profiler { runs: Mutex::new(Runs::default()), run_ended: Condvar::new(), config, unwinder }
    })
});

impl Profiler {
    /// The profiler of this process; the first call reads jemalloc's configuration.
    pub(crate) fn global() -> &'static Profiler {
        &PROFILER
    }

    /// The kept profile `id`, or the latest one without an id, under one lock.
    pub(crate) fn profile(&self, id: Option<u64>) -> Result<KeptProfile, LookupError> {
        let runs = self.runs.lock();
        let current = runs.current.as_ref().map(|run| run.id);
        let Some(id) = id else {
            if let Some(current) = current {
                return Err(LookupError::RunActive(current));
            }
            return runs.newest().cloned().ok_or(LookupError::NoneYet);
        };
        if let Some(profile) = runs.find(id) {
            return Ok(profile.clone());
        }
        if current == Some(id) {
            return Err(LookupError::StillActive(id));
        }
        match runs.last_failure.as_ref().filter(|failure| failure.id == id) {
            Some(failure) => Err(LookupError::Failed(failure.error.clone())),
            None => Err(LookupError::NotKept { id, kept: runs.kept_ids() }),
        }
    }

    /// The newest profile kept, whether a run is active or not (jeprof's `pprof/heap` reads it mid-run).
    pub(crate) fn newest(&self) -> Result<KeptProfile, LookupError> {
        self.runs.lock().newest().cloned().ok_or(LookupError::NoneYet)
    }

    /// A consistent view of the runs, for reading (hold it briefly).
    pub(crate) fn runs(&self) -> MutexGuard<'_, Runs> {
        self.runs.lock()
    }

    /// Keeps the `count` newest profiles (at least one) from now on.
    pub(crate) fn keep_runs(&self, count: usize) {
        let mut runs = self.runs.lock();
        runs.kept = count.max(1);
        runs.drop_oldest();
    }

    fn check_available(&self) -> Result<(), Error> {
        if self.config.profiling_enabled {
            Ok(())
        } else {
            let why = self.config.warnings.last().cloned().unwrap_or_default();
            Err(Error::Unavailable(why))
        }
    }

    /// Starts a run, or returns the active one. A run with a `length` is ended by a timer.
    pub(crate) fn start(&'static self, owner: Owner, length: Option<Duration>) -> Result<Started, Error> {
        self.check_available()?;
        let mut runs = self.runs.lock();
        runs.check_open()?;
        if let Some(current) = &runs.current {
            return Ok(Started::AlreadyActive(current.clone()));
        }
        if jemalloc::profiling_active()
            .map_err(|error| control("Cannot read whether sampling is on", "prof.active", error))?
        {
            return Err(Error::StartedExternally);
        }
        let lg_sample =
            jemalloc::lg_sample().map_err(|error| control("Cannot read the sampling rate", "prof.lg_sample", error))?;
        jemalloc::reset_samples(lg_sample)
            .map_err(|error| control("Cannot reset the heap profile", "prof.reset", error))?;
        let run = ActiveRun {
            id: runs.next_id(),
            owner,
            started: SystemTime::now(),
            deadline: length.map(|length| Instant::now() + length),
        };
        if let Some(deadline) = run.deadline {
            self.spawn_timer(run.id, deadline)?;
        }
        jemalloc::set_profiling_active(true)
            .map_err(|error| control("Heap profiling couldn't be enabled", "prof.active", error))?;
        runs.current = Some(run.clone());
        runs.counts.started += 1;
        Ok(Started::New(run))
    }

    /// Stops the current run (only if it is `id`, when given) and returns its profile. When `id` names a
    /// run that already ended, its profile is returned; with no id and no run, the result is `None`.
    pub(crate) fn stop(&self, id: Option<u64>) -> Result<Option<KeptProfile>, Error> {
        self.check_available()?;
        let mut runs = self.runs.lock();
        let current_id = runs.current.as_ref().map(|run| run.id);
        match (id, current_id) {
            (None, Some(_)) => self.finish(&mut runs).map(Some),
            (Some(id), Some(current)) if id == current => self.finish(&mut runs).map(Some),
            (None, None) if jemalloc::profiling_active().unwrap_or(false) => Err(Error::StartedExternally),
            (None, None) => Ok(None),
            (Some(id), _) => match (runs.find(id), &runs.last_failure) {
                (Some(run), _) => Ok(Some(run.clone())),
                (None, Some(failure)) if failure.id == id => Err(failure.error.clone()),
                (None, _) => Err(Error::UnknownRun(id)),
            },
        }
    }

    /// Stops the current run if `owner` started it, deciding under one lock (so a `stop` racing it makes
    /// this find no run, not a run that vanished).
    pub(crate) fn stop_owned_by(&self, owner: &Owner) -> Result<Stopped, Error> {
        self.check_available()?;
        let mut runs = self.runs.lock();
        match &runs.current {
            Some(run) if run.owner == *owner => self.finish(&mut runs).map(Stopped::Profile),
            Some(run) => Ok(Stopped::OwnedBy(run.clone())),
            None if jemalloc::profiling_active().unwrap_or(false) => Err(Error::StartedExternally),
            None => Ok(Stopped::NoRun),
        }
    }

    /// Ends the current run: the heap dumped into the store, then sampling off.
    ///
    /// The dump comes first: between the two, the program goes on freeing sampled objects (which the
    /// profile counts out) and allocating their replacements (which it would no longer sample), so a
    /// profile dumped after switching off reads low on memory that churns.
    fn finish(&self, runs: &mut Runs) -> Result<KeptProfile, Error> {
        let Some(run) = runs.current.take() else {
            unreachable!("finish is only called with a current run");
        };
        self.run_ended.notify_all();
        let dumped = jemalloc::unsampled(|| runs.store.dump(run.id));
        switch_sampling_off(run.id);
        match dumped {
            Ok(path) => {
                let finished = KeptProfile {
                    id: run.id,
                    owner: run.owner,
                    started: run.started,
                    stopped: SystemTime::now(),
                    path,
                };
                crate::evidence::record(&finished);
                runs.keep(finished.clone());
                runs.counts.finished += 1;
                Ok(finished)
            }
            Err(error) => {
                let of = DumpOf::Run { id: run.id, previous: runs.latest().map(|latest| latest.id) };
                let error = Error::Dump { of, error: error.to_string() };
                runs.last_failure = Some(FailedRun { id: run.id, error: error.clone() });
                runs.counts.failed += 1;
                Err(error)
            }
        }
    }

    /// Starts the thread that ends run `id` at `deadline`, unless the run ends before.
    fn spawn_timer(&'static self, id: u64, deadline: Instant) -> Result<(), Error> {
        // Spawned before sampling is switched on, and unsampled before `spawn` returns.
        crate::threads::spawn("memprof-timer", move || self.end_at(id, deadline))
            .map_err(|error| Error::Thread { purpose: "the run's timer", error: error.to_string() })
    }

    fn end_at(&self, id: u64, deadline: Instant) {
        let mut runs = self.runs.lock();
        while runs.current.as_ref().is_some_and(|run| run.id == id) {
            if Instant::now() >= deadline {
                match self.finish(&mut runs) {
                    Ok(run) => {
                        messages::info(&format!("Heap profiling run {id} ended; profile at {}", run.path.display()))
                    }
                    Err(error) => messages::warn(&error.to_string()),
                }
                return;
            }
            self.run_ended.wait_until(&mut runs, deadline);
        }
    }

    /// Dumps the heap as it is now, outside any run (sampled by earlier runs or by sampling left on), into
    /// a file the caller deletes once read.
    pub(crate) fn snapshot(&self) -> Result<(std::fs::File, String), Error> {
        self.check_available()?;
        let mut runs = self.runs.lock();
        let id = runs.next_id();
        runs.check_open()?;
        runs.store.snapshot(id).map_err(|error| Error::Dump { of: DumpOf::Snapshot, error: error.to_string() })
    }

    /// Dumps the heap now into the ring of automatic dumps, then drops the oldest dumps beyond `keep`
    /// files or `max_bytes` in all (the newest always stays).
    pub(crate) fn automatic_dump(&self, reason: String, keep: usize, max_bytes: u64) -> Result<KeptProfile, Error> {
        self.check_available()?;
        let mut runs = self.runs.lock();
        runs.check_open()?;
        let id = runs.next_id();
        let path = runs
            .store
            .automatic(id)
            .map_err(|error| Error::Dump { of: DumpOf::Automatic, error: error.to_string() })?;
        let now = SystemTime::now();
        let dump = KeptProfile { id, owner: Owner::Automatic(reason), started: now, stopped: now, path };
        crate::evidence::record(&dump);
        runs.automatic.push_back(dump.clone());
        let size = |run: &KeptProfile| std::fs::metadata(&run.path).map_or(0, |metadata| metadata.len());
        while runs.automatic.len() > 1
            && (runs.automatic.len() > keep || runs.automatic.iter().map(size).sum::<u64>() > max_bytes)
        {
            if let Some(oldest) = runs.automatic.pop_front() {
                runs.evict(&oldest);
            }
        }
        Ok(dump)
    }

    /// Serves what earlier processes kept (found at start-up).
    pub(crate) fn adopt_earlier(&self, earlier: Vec<EarlierProcess>) {
        self.runs.lock().earlier = earlier;
    }

    /// Deletes what earlier processes kept; how many profiles there were.
    pub(crate) fn clear_earlier(&self) -> usize {
        let mut runs = self.runs.lock();
        let earlier = std::mem::take(&mut runs.earlier);
        for profile in earlier.iter().flat_map(|process| &process.profiles) {
            evicted(profile.profile.id);
        }
        crate::evidence::clear(&earlier)
    }

    /// Ends any run without keeping its profile and removes the profile directory: the program is ending.
    ///
    /// A run still active can leave its profile behind, outside the removed directory, at the path in
    /// `MEMPROF_FINAL_DUMP`.
    pub(crate) fn shut_down(&self) {
        let mut runs = self.runs.lock();
        if let Some(run) = runs.current.take() {
            self.run_ended.notify_all();
            match std::env::var_os(FINAL_DUMP_VARIABLE) {
                Some(path) => {
                    let path = PathBuf::from(path);
                    match jemalloc::unsampled(|| jemalloc::dump_profile(&path)) {
                        Ok(()) => messages::info(&format!(
                            "Heap profiling run {} was active when the program ended; its profile is at {}",
                            run.id,
                            path.display()
                        )),
                        Err(error) => messages::warn(&format!(
                            "The final heap profile of run {} was not written: {error}",
                            run.id
                        )),
                    }
                }
                None => messages::info(&format!(
                    "Heap profiling run {} was active when the program ended; its profile is discarded (set {FINAL_DUMP_VARIABLE}=/path/final.heap to keep it)",
                    run.id
                )),
            }
            switch_sampling_off(run.id);
        }
        runs.finished.clear();
        runs.automatic.clear();
        runs.closed = true;
        runs.store.remove_all();
    }
}

/// What [`Profiler::stop_owned_by`] did.
pub(crate) enum Stopped {
    /// It stopped the run; its profile.
    Profile(KeptProfile),
    /// There was no run.
    NoRun,
    /// Another owner's run is active, and goes on.
    OwnedBy(ActiveRun),
}

/// A failed jemalloc control, as an [`Error`].
/// Told the id of each profile that is no longer kept: set by the layer above that keeps renders of them
/// (the endpoints), which the profiler knows nothing of.
static EVICTION_LISTENER: OnceLock<fn(u64)> = OnceLock::new();

/// Has `listener` told the id of each profile no longer kept, from now on (the first listener stays).
pub(crate) fn on_eviction(listener: fn(u64)) {
    let _ = EVICTION_LISTENER.set(listener);
}

fn evicted(id: u64) {
    if let Some(listener) = EVICTION_LISTENER.get() {
        listener(id);
    }
}

fn control(doing: &'static str, control: &'static str, error: jemalloc::CtlError) -> Error {
    Error::Control { doing, control, error: error.to_string() }
}

/// Switches sampling off at the end of run `id`; a failure is logged (the run is over either way).
fn switch_sampling_off(id: u64) {
    if let Err(error) = jemalloc::set_profiling_active(false) {
        messages::warn(&format!("Could not switch heap profiling off at the end of run {id} (prof.active: {error})"));
    }
}
