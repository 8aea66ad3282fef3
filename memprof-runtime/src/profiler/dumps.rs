//! Dumps outside runs: the heap now (`trigger_dump`, Go's scrapers) and the automatic dumps, with what grew
//! beside them in continuous mode.

use std::path::PathBuf;
use std::time::SystemTime;

use super::{Books, DumpOf, Error, KeptProfile, Owner, Profiler};
use crate::jemalloc;
use crate::process::messages;
use crate::sampler::record;

impl Profiler {
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
            Some(window_start) => jemalloc::unsampled(|| books.store.snapshot(id, &self.run_dump(window_start))),
            None => jemalloc::unsampled(|| books.store.snapshot(id, &self.heap_dump())),
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
            .automatic(id, &self.heap_dump())
            .map_err(|error| Error::Dump { of: DumpOf::Automatic, error: error.into() })?;
        let dump = keep_automatic(&mut books, id, Owner::Automatic(reason), path, keep, max_bytes);
        if let Some(record) = self.record() {
            keep_growth(&mut books, record, id, keep, max_bytes);
        }
        Ok(dump)
    }
}

/// Keeps automatic dump `id` at `path`, then drops the oldest beyond `keep` files or `max_bytes`.
fn keep_automatic(books: &mut Books, id: u64, owner: Owner, path: PathBuf, keep: usize, max_bytes: u64) -> KeptProfile {
    let now = SystemTime::now();
    let dump = KeptProfile { id, owner, started: now, stopped: now, path };
    crate::profile_root::evidence::write_provenance(&dump);
    let size = |dump: &KeptProfile| std::fs::metadata(&dump.path).map_or(0, |metadata| metadata.len());
    let evicted = books.runs.automatic_dump(dump.clone(), keep, max_bytes, size);
    books.forget(evicted);
    dump
}

/// Beside automatic dump `beside`, in continuous mode: what grew steadily over the record's last hour, as a
/// profile of its own (each stack holding its growth), so that after an OOM kill the next process shows
/// the growing stacks of the killed one beside its last heap. Nothing when nothing grew.
fn keep_growth(books: &mut Books, record: &record::table::Table, beside: u64, keep: usize, max_bytes: u64) {
    let (growers, _) = record::growers(record, |_| u32::MAX);
    let Some(seconds) = growers.first().map(|grower| grower.growth.seconds) else { return };
    let write = |path: &std::path::Path| {
        let text = record::growers_as_dump(&growers, &|grower| grower.growth.grown)?;
        crate::profile_root::storage::write_owner_only(path, text.as_bytes())
    };
    let id = books.runs.next_id();
    match jemalloc::unsampled(|| books.store.automatic(id, &write)) {
        Ok(path) => {
            let reason = format!("{}{seconds} s, beside dump {beside}", crate::profile_root::evidence::GROWTH_REASON);
            let owner = Owner::Automatic(reason);
            keep_automatic(books, id, owner, path, keep, max_bytes);
        }
        Err(error) => messages::warn(&format!("The growth beside automatic dump {beside} was not written: {error}")),
    }
}
