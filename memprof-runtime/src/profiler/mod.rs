//! The profiler: runs over the sampler ([`crate::sampler`]: on demand or continuous, its record and its
//! budget; each sample's stack walked by [`crate::stack_walk`]), identified by increasing ids, ended by a
//! timer, by `stop`, or by the code that started them: on demand one at a time; continuously, windows that
//! may overlap (an HTTP run and any number of `scope!`s).
//!
//! On demand (the default with the switch off; see [`crate::sampler::sampling`]), a run resets jemalloc's samples (`prof.reset`) so its profile
//! holds only its own window, switches `prof.active` on, and at its end dumps the heap into the
//! [`ProfileStore`] and switches sampling off. Continuously (the default with the switch on) sampling stays on from start-up and a run is
//! a window over it: it resets nothing, and its profile is what the [`record`] holds of the objects sampled
//! since it started and still live at its end. The last
//! [`crate::settings::options::DEFAULT_KEPT_RUNS`] profiles (or as many as `keep_runs` says) stay downloadable; a failed dump is reported and leaves them untouched.

pub(crate) mod autodump;
pub(crate) mod code_runs;
pub(crate) mod counters;
mod dumps;
pub(crate) mod duration;
mod error;
mod final_dump;
mod left_off;
mod outcomes;
mod runs;
mod timer;
pub(crate) mod whole_run;
mod windows;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Condvar, Mutex};

pub(crate) use crate::run_model::{ActiveRun, KeptProfile, Owner};
pub use error::{Cause, DumpOf, Error};
pub(crate) use outcomes::{LookupError, Started, Stopped};
pub(crate) use runs::Overview;
use runs::{Runs, StopTarget};

use crate::jemalloc;
use crate::jemalloc::malloc_conf::ConfigReport;
use crate::profile_root::evidence::{EarlierProcess, EarlierProfile};
use crate::profile_root::storage::ProfileStore;
use crate::sampler::{Sampler, record};
use crate::settings::Settings;
use crate::stack_walk::Unwinder;

/// The runs' records, the files they name and the windows over the record they read, changed together
/// under one lock.
struct Books {
    runs: Runs,
    store: ProfileStore,
    /// The window over the record each open run or window reads its views from, by id.
    windows: HashMap<u64, record::Window>,
    /// Told the id of each profile that is no longer kept: set by the layer above that keeps renders of
    /// them (the endpoints), which the profiler knows nothing of.
    eviction_listener: Option<fn(u64)>,
}

impl Books {
    /// Deletes the files of profiles no longer kept, and tells whoever keeps what was made of them.
    fn forget(&mut self, profiles: Vec<KeptProfile>) {
        for profile in profiles {
            self.store.remove(&profile.path);
            self.evicted(profile.id);
        }
    }

    /// Tells the eviction listener that profile `id` is no longer kept.
    fn evicted(&self, id: u64) {
        if let Some(listener) = self.eviction_listener {
            listener(id);
        }
    }
}

/// The profiler: runs started and stopped through jemalloc, their profiles written to the store.
pub(crate) struct Profiler {
    books: Mutex<Books>,
    /// Wakes the timer when a run starts or ends.
    runs_changed: Condvar,
    /// What the program and the operator configured: resolved once, handed down to each part from here.
    settings: &'static Settings,
    /// Sampling below the runs: its mode, switch, walks and record.
    sampler: Sampler,
    /// Whether the thread ending timed runs was started (and, if not, why): [`timer::start`].
    timer: OnceLock<Result<(), Cause>>,
    /// The whole run's window and where its profiles go at exit ([`whole_run`]).
    whole_run: OnceLock<(u64, PathBuf)>,
    /// Work left off the program's start: the profile root's sweep, done by whichever needs it first (see
    /// [`Profiler::leave_off_the_start`]).
    left_off: left_off::LeftOff,
}

/// Made on first use, unsampled (reading the allocator's code out of the executable allocates some 64 kB
/// that must not show in a profile when sampling is on from the start).
static PROFILER: OnceLock<Profiler> = OnceLock::new();

impl Profiler {
    /// The profiler of this process; the first call reads jemalloc's configuration.
    pub(crate) fn global() -> &'static Profiler {
        PROFILER.get_or_init(|| {
            jemalloc::unsampled(|| {
                crate::process::lineage::own();
                let settings = crate::settings::get();
                Profiler::new(settings, ConfigReport::read(&settings.jemalloc_variables), OnceLock::new())
            })
        })
    }

    /// The profiler of this process if anything made it: a program that asked nothing of memprof and
    /// never used it has none (and never read jemalloc's configuration).
    #[inline]
    pub(crate) fn made() -> Option<&'static Profiler> {
        PROFILER.get()
    }

    /// A profiler with no runs, configured by `settings`, for the `config` jemalloc reported, whose samples
    /// walk the stack with `unwinder` (installed when first needed, if empty); its profiles go to a
    /// directory of their own.
    pub(crate) fn new(settings: &'static Settings, config: ConfigReport, unwinder: OnceLock<Unwinder>) -> Self {
        let books = Books {
            runs: Runs::new(settings.keep_runs),
            store: ProfileStore::new(settings.profile_parent.path.clone(), crate::labels::table_text),
            windows: HashMap::new(),
            eviction_listener: None,
        };
        Profiler {
            books: Mutex::new(books),
            runs_changed: Condvar::new(),
            sampler: Sampler::new(
                crate::sampler::Configured {
                    record: settings.record,
                    budget: settings.budget,
                    walk: settings.unwinder,
                },
                config,
                unwinder,
            ),
            settings,
            left_off: left_off::LeftOff::default(),
            timer: OnceLock::new(),
            whole_run: OnceLock::new(),
        }
    }

    /// The kept profile `id`, or the latest one without an id.
    pub(crate) fn profile(&self, id: Option<u64>) -> Result<KeptProfile, LookupError> {
        self.books.lock().runs.lookup(id)
    }

    /// The newest profile kept, whether a run is active or not (jeprof's `pprof/heap` reads it mid-run).
    pub(crate) fn newest(&self) -> Result<KeptProfile, LookupError> {
        self.books.lock().runs.newest().cloned().ok_or(LookupError::NoneYet)
    }

    /// What the program and the operator configured, resolved once: each part is handed what it needs
    /// from here.
    pub(crate) fn settings(&self) -> &'static Settings {
        self.settings
    }

    /// The profile `id` of an earlier process, if it is one.
    pub(crate) fn earlier_profile(&self, id: u64) -> Option<EarlierProfile> {
        self.books.lock().runs.earlier_profile(id).cloned()
    }

    /// A copy of the runs' records, taken under the lock and read without it.
    pub(crate) fn overview(&self) -> Overview {
        let books = self.books.lock();
        let mut overview = books.runs.overview(books.store.path().map(PathBuf::from), books.store.in_memory());
        overview.store_warning = books.store.warning().map(str::to_owned);
        overview
    }

    /// Has `listener` told the id of each profile no longer kept, from now on (the first listener stays).
    pub(crate) fn on_eviction(&self, listener: fn(u64)) {
        self.books.lock().eviction_listener.get_or_insert(listener);
    }

    /// Keeps the `count` newest profiles (at least one) from now on.
    pub(crate) fn keep_runs(&self, count: usize) {
        let mut books = self.books.lock();
        let evicted = books.runs.keep_runs(count);
        books.forget(evicted);
    }

    fn check_available(&self) -> Result<(), Error> {
        let config = self.sampler.config();
        if config.profiling_enabled {
            Ok(())
        } else {
            let why = config.warnings.last().cloned().unwrap_or_default();
            Err(Error::Unavailable(why))
        }
    }

    /// Leaves `work` (the profile root's sweep: a listing of `$TMPDIR`, some 3 ms for 350 entries) off the
    /// program's start, for whichever needs it first to do ([`Profiler::catch_up`]): the counters' thread as
    /// it starts, a request to the endpoints, the first run. A command-line tool that never runs one never
    /// pays it.
    pub(crate) fn leave_off_the_start(&self, work: Box<dyn FnOnce() + Send>) {
        self.left_off.leave(work);
    }

    /// Does the work left off the start, if it is still left; a caller meanwhile waits for it to be done.
    pub(crate) fn catch_up(&self) {
        self.left_off.catch_up();
    }

    /// Sampling below the runs: how it runs, its switch, walks and record.
    pub(crate) fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// Makes sampling continuous from now on (`because` says why, for `state`), no run starting meanwhile:
    /// runs are windows from then on. Once: the mode chosen first stays.
    pub(crate) fn sample_continuously(&self, because: String) -> Result<(), Error> {
        self.check_available()?;
        let _books = self.books.lock();
        self.sampler.sample_continuously(because)
    }

    /// Starts a run, or returns the active one. A run with a `length` is ended by a timer.
    pub(crate) fn start(&'static self, owner: Owner, length: Option<Duration>) -> Result<Started, Error> {
        self.check_available()?;
        self.catch_up();
        let mut books = self.books.lock();
        books.runs.check_open()?;
        if let Some(current) = books.runs.current() {
            return Ok(Started::AlreadyActive(current.clone()));
        }
        let window_start = self.sampler.record().map(|record| record.next_sequence());
        if window_start.is_none() {
            self.sampler.start_afresh()?;
        }
        let id = books.runs.next_id();
        let deadline = length.map(|length| Instant::now() + length);
        if deadline.is_some() {
            timer::start(self)?;
        }
        // The bases of its views, before its first sample (on demand, the record starts with the first run).
        let since = window_start.or_else(|| self.sampler.views_start());
        books.open_views(self.sampler.views_record(), id, since);
        if window_start.is_none()
            && let Err(error) = self.sampler.switch_on()
        {
            books.windows.remove(&id);
            return Err(error);
        }
        // Sampled continuously, an operator's run is sampled whole (the budget waits for its end).
        let operators = window_start.is_some() && matches!(owner, Owner::Http | Owner::Manual);
        let run = books.runs.begin(id, owner, deadline, window_start);
        self.sampler.sample_whole(operators);
        write_last_seen(&mut books, jemalloc::heap_stats().ok());
        self.runs_changed.notify_all();
        Ok(Started::New(run))
    }

    /// Stops the current run (only if it is `id`, when given) and returns its profile. When `id` names a
    /// run that already ended, its profile is returned; with no id and no run, the result is `None`.
    pub(crate) fn stop(&self, id: Option<u64>) -> Result<Option<KeptProfile>, Error> {
        self.check_available()?;
        let mut books = self.books.lock();
        match books.runs.stop_target(id) {
            StopTarget::Current => self.finish(&mut books).map(Some),
            StopTarget::NoRun => self.no_run_unless_started_externally().map(|()| None),
            StopTarget::Ended(profile) => profile.map(Some),
        }
    }

    /// Stops the current run if `owner` started it, deciding under one lock (so a `stop` racing it makes
    /// this find no run, not a run that vanished).
    pub(crate) fn stop_owned_by(&self, owner: &Owner) -> Result<Stopped, Error> {
        self.check_available()?;
        let mut books = self.books.lock();
        match books.runs.current() {
            Some(run) if run.owner == *owner => self.finish(&mut books).map(Stopped::Profile),
            Some(run) => Ok(Stopped::OwnedBy(run.clone())),
            None => self.no_run_unless_started_externally().map(|()| Stopped::NoRun),
        }
    }

    /// Ends the current run: the heap dumped into the store, then (on demand) sampling off.
    ///
    /// The dump comes first: between the two, the program goes on freeing sampled objects (which the
    /// profile counts out) and allocating their replacements (which it would no longer sample), so a
    /// profile dumped after switching off reads low on memory that churns.
    fn finish(&self, books: &mut Books) -> Result<KeptProfile, Error> {
        let Some(run) = books.runs.end() else {
            unreachable!("finish is only called with a current run");
        };
        self.sampler.sample_whole(false);
        self.runs_changed.notify_all();
        self.keep(books, run)
    }

    /// Dumps the profile of `run`, which just ended, into the store and keeps it (or records why not).
    fn keep(&self, books: &mut Books, run: ActiveRun) -> Result<KeptProfile, Error> {
        let dumped = jemalloc::unsampled(|| books.store.dump(run.id, &self.sampler.window_writer(run.window_start)));
        books.keep_views(run.id, dumped.as_ref().ok());
        if run.window_start.is_none() {
            self.sampler.switch_off(run.id);
        }
        let finished = match dumped {
            Ok(path) => {
                let finished = KeptProfile {
                    id: run.id,
                    owner: run.owner,
                    started: run.started,
                    stopped: SystemTime::now(),
                    path,
                };
                crate::profile_root::evidence::write_provenance(&finished);
                let evicted = books.runs.finished(finished.clone());
                books.forget(evicted);
                Ok(finished)
            }
            Err(error) => Err(books.runs.failed(run.id, error.into())),
        };
        write_last_seen(books, jemalloc::heap_stats().ok());
        finished
    }

    /// Writes the process's last-seen note in its profile directory (see [`crate::profile_root::last_seen`]); nothing
    /// when no directory can be written (profiles kept in memory). `counters` are the program's, read now.
    pub(crate) fn note_last_seen(&self, counters: memprof_wire::HeapCounters) {
        write_last_seen(&mut self.books.lock(), Some(counters));
    }

    /// Serves what earlier processes kept (found at start-up).
    pub(crate) fn adopt_earlier(&self, earlier: Vec<EarlierProcess>) {
        self.books.lock().runs.adopt_earlier(earlier);
    }

    /// Deletes what earlier processes kept; how many profiles there were.
    pub(crate) fn clear_earlier(&self) -> usize {
        let mut books = self.books.lock();
        let earlier = books.runs.take_earlier();
        for profile in earlier.iter().flat_map(|process| &process.profiles) {
            books.evicted(profile.profile.id);
        }
        drop(books);
        crate::profile_root::evidence::clear(&earlier)
    }

    /// In continuous mode, opens a window for code (`Run`, `scope!`) beside any other run or window:
    /// `None` on demand, where code starts a run like any other.
    pub(crate) fn open_window(&self, owner: Owner) -> Result<Option<ActiveRun>, Error> {
        let Some(record) = self.sampler.record() else { return Ok(None) };
        let mut books = self.books.lock();
        books.runs.check_open()?;
        let id = books.runs.next_id();
        let since = record.next_sequence();
        let window = books.runs.open_window(id, owner, since);
        books.open_views(Some(record), id, Some(since));
        Ok(Some(window))
    }

    /// The samples taken since run or window `id` began, whoever allocated them; `None` where no record
    /// counts them (or `id` is not in progress).
    pub(crate) fn samples_since_start(&self, id: u64) -> Option<u64> {
        self.books.lock().windows.get(&id).map(record::Window::samples)
    }

    /// Closes window `id` and keeps its profile: what was sampled since it opened and is still live.
    pub(crate) fn close_window(&self, id: u64) -> Result<KeptProfile, Error> {
        let mut books = self.books.lock();
        let Some(window) = books.runs.close_window(id) else { return Err(Error::UnknownRun(id)) };
        self.keep(&mut books, window)
    }

    /// Dumps the heap as it is now, outside any run (sampled by earlier runs or by sampling left on), into
    /// a file the caller deletes once read.
    ///
    /// With `run`, the profile of that run or window in progress as it stands: what it would hold if it
    /// ended now (sampled continuously, the objects sampled since it began and still live; on demand, the
    /// heap, whose samples the run reset as it began). [`Error::UnknownRun`] when it is not in progress.
    pub(crate) fn snapshot(&self, run: Option<u64>) -> Result<(std::fs::File, String), Error> {
        self.check_available()?;
        let mut books = self.books.lock();
        books.runs.check_open()?;
        let window_start = match run {
            Some(run) => Some(books.runs.in_progress(run).ok_or(Error::UnknownRun(run))?.window_start),
            None => None,
        };
        let id = books.runs.next_id();
        let written = match window_start {
            Some(window_start) => {
                jemalloc::unsampled(|| books.store.snapshot(id, &self.sampler.window_writer(window_start)))
            }
            None => jemalloc::unsampled(|| books.store.snapshot(id, &self.sampler.heap_writer())),
        };
        written.map_err(|error| Error::Dump { of: DumpOf::Snapshot, error: error.into() })
    }

    /// Dumps the heap now into the ring of automatic dumps, then drops the oldest dumps beyond `keep`
    /// files or `max_bytes` in all (the newest always stays).
    pub(crate) fn automatic_dump(&self, reason: String, keep: usize, max_bytes: u64) -> Result<KeptProfile, Error> {
        self.check_available()?;
        let mut books = self.books.lock();
        books.runs.check_open()?;
        let id = books.runs.next_id();
        let path = books
            .store
            .automatic(id, &self.sampler.heap_writer())
            .map_err(|error| Error::Dump { of: DumpOf::Automatic, error: error.into() })?;
        let dump = dumps::keep_automatic(&mut books, id, Owner::Automatic(reason), path, keep, max_bytes);
        if let Some(record) = self.sampler.record() {
            dumps::keep_growth(&mut books, record, id, keep, max_bytes);
        }
        Ok(dump)
    }

    /// With no run of memprof's, the answer to a stop: nothing, unless (on demand) sampling was switched
    /// on outside memprof (which it leaves alone).
    fn no_run_unless_started_externally(&self) -> Result<(), Error> {
        if self.sampler.started_externally() { Err(Error::StartedExternally) } else { Ok(()) }
    }

    /// Ends any run without keeping its profile and removes the profile directory: the program is ending.
    ///
    /// A run still active can leave its profile behind, outside the removed directory, at the path in
    /// `MEMPROF_FINAL_DUMP`.
    pub(crate) fn shut_down(&self) {
        whole_run::keep(self);
        let mut books = self.books.lock();
        if let Some(run) = books.runs.end() {
            self.runs_changed.notify_all();
            final_dump::leave(
                self.settings.final_dump.as_deref(),
                run.id,
                &self.sampler.window_writer(run.window_start),
            );
            if run.window_start.is_none() {
                self.sampler.switch_off(run.id);
            }
        }
        books.runs.close();
        books.store.remove_all();
    }
}

/// Writes the process's last-seen note with the run active now (see [`Profiler::note_last_seen`]); also
/// when a run starts and ends, so that a run started just before a kill is named after the restart.
/// `counters`: the program's memory counters read now (none when they could not be read: nothing written).
fn write_last_seen(books: &mut Books, counters: Option<memprof_wire::HeapCounters>) {
    let active = books.runs.current().map(|run| memprof_wire::ActiveRun {
        id: run.id,
        started_by: run.owner.name(),
        started: crate::profile_root::untrusted::unix_seconds(run.started),
    });
    let Some(counters) = counters.filter(|_| !books.store.in_memory()) else {
        return;
    };
    let seen = crate::profile_root::last_seen::now(active, &counters);
    let Ok(json) = serde_json::to_vec(&seen) else {
        return;
    };
    // Failing leaves the previous record (or none): the next start says less about this process's end.
    let _ = books.store.write_small_file(crate::profile_root::last_seen::FILE, &json);
}

#[cfg(test)]
mod tests;
