//! The views every run and window keeps (its net growth, allocations and peak), read from its
//! [`record::Window`] over the record of samples, opened as it starts and closed into files beside its
//! profile as it ends. How sampling runs and how a profile is written are the sampler's
//! ([`crate::sampler::Sampler`]).

use super::Books;
use crate::jemalloc;
use crate::process::messages;
use crate::sampler::record;

impl Books {
    /// Opens the window over `record` (none without one) that run or window `id`, starting at sequence
    /// number `since` of it, reads its views from.
    pub(super) fn open_views(&mut self, record: Option<&'static record::table::Table>, id: u64, since: Option<u64>) {
        if let (Some(record), Some(since)) = (record, since) {
            let window = jemalloc::unsampled(|| record::Window::open(record, since));
            self.windows.insert(id, window);
        }
    }

    /// Closes the window of run or window `id`, its views written beside its profile at `path` (none when
    /// the profile failed; not for profiles kept in memory).
    pub(super) fn keep_views(&mut self, id: u64, path: Option<&std::path::PathBuf>) {
        let Some(window) = self.windows.remove(&id) else { return };
        // Dropped unwritten, it gives its high-water mark's place back all the same.
        let (Some(path), false) = (path, self.store.in_memory()) else { return };
        if let Err(error) = jemalloc::unsampled(|| window.close_into(path)) {
            messages::warn(&format!("The net growth, allocations and peak of window {id} were not written: {error}"));
        }
    }
}
