//! Windows over the record of samples: opened by code beside the HTTP run, the base of their net growth and
//! the views every run keeps, and how a run's or the heap's profile is written (the record's window, or
//! jemalloc's dump). How sampling runs is [`crate::sampler::mode`]'s.

use super::{ActiveRun, Error, KeptProfile, Owner, Profiler};
use crate::jemalloc;
use crate::process::messages;
use crate::profile_root::files::Beside;
use crate::sampler::record;

impl Profiler {
    /// How the profile of a run starting at `window_start` is written: the record's window, or jemalloc's dump.
    pub(super) fn run_dump(
        &self,
        window_start: Option<u64>,
    ) -> impl Fn(&std::path::Path) -> std::io::Result<()> + use<> {
        let record = self.record();
        move |path| match (record, window_start) {
            (Some(record), Some(since)) => record::write_profile(record, path, since, record::heap_v2::Content::Live),
            _ => jemalloc::dump_profile(path),
        }
    }

    /// How the heap as it is now is written: everything the record holds, with what each stack allocated
    /// since start-up (Go's `alloc_*`), in continuous mode; else jemalloc's dump.
    pub(super) fn heap_dump(&self) -> impl Fn(&std::path::Path) -> std::io::Result<()> + use<> {
        let record = self.record();
        move |path| match record {
            Some(record) => record::write_profile(record, path, 0, record::heap_v2::Content::LiveAndAllocated),
            None => jemalloc::dump_profile(path),
        }
    }

    /// In continuous mode, opens a window for code (`Run`, `scope!`) beside any other run or window:
    /// `None` on demand, where code starts a run like any other.
    pub(crate) fn open_window(&self, owner: Owner) -> Result<Option<ActiveRun>, Error> {
        let Some(record) = self.record() else { return Ok(None) };
        let mut books = self.books.lock();
        books.runs.check_open()?;
        let id = books.runs.next_id();
        let since = record.next_sequence();
        let window = books.runs.open_window(id, owner, since);
        self.remember_base(id, Some(since));
        Ok(Some(window))
    }

    /// On demand, starts the record of samples before the first run samples (once), so that runs too keep
    /// what they allocated and their high-water marks; answers the sequence number a run starting now
    /// begins at (`None` where the record cannot be kept: the run has its live view alone, and says why).
    pub(super) fn views_start(&self) -> Option<u64> {
        if self.views_record().is_none() {
            let capacity = self.settings().record;
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if let Err(error) = jemalloc::unsampled(|| record::start(capacity))
                && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                messages::warn(&format!("Runs keep only what is live at their end: no record of samples ({error})"));
            }
        }
        self.views_record().map(|record| record.next_sequence())
    }

    /// Remembers what each stack holds and has allocated as window or run `id` starts (at sequence number
    /// `since` of the record), the bases of its net growth and allocations, and tracks its high-water mark.
    pub(super) fn remember_base(&self, id: u64, since: Option<u64>) {
        if let (Some(record), Some(since)) = (self.views_record(), since) {
            let base = jemalloc::unsampled(|| record::base_now(record, since));
            self.window_bases.lock().insert(id, base);
        }
    }

    /// The samples taken since run or window `id` began, whoever allocated them; `None` where no record
    /// counts them (or `id` is not in progress).
    pub(crate) fn samples_since_start(&self, id: u64) -> Option<u64> {
        let since = self.window_bases.lock().get(&id)?.since;
        Some(self.views_record()?.next_sequence().saturating_sub(since))
    }

    /// Beside the profile of window `id` at `path` (none when it failed), its net growth since it started
    /// (what every stack holds at its end minus at its start), for `net=true` downloads, what it allocated,
    /// freed or not, for `view=allocated`, and what it held at its highest, for `view=peak`; not for
    /// profiles kept in memory. The window's base and its high-water mark's place are let go either way.
    pub(super) fn keep_window_views(&self, id: u64, path: Option<&std::path::PathBuf>, in_memory: bool) {
        let base = self.window_bases.lock().remove(&id);
        let (Some(record), Some(base)) = (self.views_record(), base) else { return };
        let written = jemalloc::unsampled(|| {
            let (Some(path), false) = (path, in_memory) else {
                // Only the high-water mark's place to give back.
                if let Some(place) = base.peak {
                    record.end_peak(place);
                }
                return Ok(());
            };
            let (grown, shrunk) = (Beside::Grown.of(path), Beside::Shrunk.of(path));
            record::write_net_growth(record, &base, &grown, &shrunk)?;
            record::write_allocations(record, &base, &Beside::Allocated.of(path))?;
            let peak = Beside::Peak.of(path);
            base.peak.map_or(Ok(()), |place| record::write_peak(record, place, &peak))
        });
        if let Err(error) = written {
            messages::warn(&format!("The net growth, allocations and peak of window {id} were not written: {error}"));
        }
    }

    /// Closes window `id` and keeps its profile: what was sampled since it opened and is still live.
    pub(crate) fn close_window(&self, id: u64) -> Result<KeptProfile, Error> {
        let mut books = self.books.lock();
        let Some(window) = books.runs.close_window(id) else { return Err(Error::UnknownRun(id)) };
        self.keep(&mut books, window)
    }
}
