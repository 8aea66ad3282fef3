//! A window over the record: opened as a run or a `scope!` starts, it holds what every stack held and had
//! allocated then (the bases of its net growth and allocations) and the place its high-water mark is
//! tracked in, which it gives back when it closes, written or not.

use std::io;
use std::path::Path;

use super::table::Table;
use super::{Base, base_now, write_allocations, write_net_growth, write_peak};
use crate::jemalloc;
use crate::profile_root::files::Beside;

/// A window over the record of samples, from the sequence number it opened at.
pub(crate) struct Window {
    record: &'static Table,
    base: Base,
}

impl Window {
    /// Opens a window over `record` at sequence number `since`: its bases read now, its high-water mark
    /// tracked from now on. Call unsampled.
    pub(crate) fn open(record: &'static Table, since: u64) -> Window {
        Window { record, base: base_now(record, since) }
    }

    /// The samples taken since the window opened, whoever allocated them.
    pub(crate) fn samples(&self) -> u64 {
        self.record.next_sequence().saturating_sub(self.base.since)
    }

    /// Closes the window, writing beside the profile at `path` its net growth since it opened (what every
    /// stack holds now minus then: `net=true` downloads), what it allocated, freed or not
    /// (`view=allocated`), and what it held at its highest (`view=peak`). Call unsampled.
    pub(crate) fn close_into(mut self, path: &Path) -> io::Result<()> {
        write_net_growth(self.record, &self.base, &Beside::Grown.of(path), &Beside::Shrunk.of(path))?;
        write_allocations(self.record, &self.base, &Beside::Allocated.of(path))?;
        match self.base.peak.take() {
            Some(place) => write_peak(self.record, place, &Beside::Peak.of(path)),
            None => Ok(()),
        }
    }
}

impl Drop for Window {
    /// Gives the high-water mark's place back, unless writing the peak did.
    fn drop(&mut self) {
        if let Some(place) = self.base.peak.take() {
            jemalloc::unsampled(|| self.record.end_peak(place));
        }
    }
}
