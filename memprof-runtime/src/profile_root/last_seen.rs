//! The process's note of itself (its last-seen note), refreshed every [`PERIOD`] while it lives (`last-seen.json` in its
//! profile directory): when it was last seen, how big it was, the run active then. After a `kill -9` or an
//! OOM kill the next process reads it to say what the kept profiles show of the end: how long before it
//! they were taken, how much of the last heap they hold, and which run was lost.
//!
//! The file is small and bounded, written under a temporary name and renamed, so a reader never sees half
//! of one; it is read as the profile root's other files are ([`crate::profile_root::untrusted`]), up to [`LONGEST`] bytes.

use std::path::Path;
use std::time::{Duration, SystemTime};

use memprof_wire::{ActiveRun, HeapCounters, LastSeen};

use crate::{memory, profile_root::untrusted};

/// The file's name in the profile directory.
pub(crate) const FILE: &str = "last-seen.json";

/// How often it is written.
pub(crate) const PERIOD: Duration = Duration::from_secs(5);

/// The longest file read: a note is a few hundred bytes.
const LONGEST: u64 = 4096;

/// The process now, with the run active now and its memory counters read now.
pub(crate) fn now(active_run: Option<ActiveRun>, counters: &HeapCounters) -> LastSeen {
    LastSeen {
        time: untrusted::unix_seconds(SystemTime::now()),
        allocated_bytes: counters.allocated as u64,
        resident_bytes: counters.resident as u64,
        rss_bytes: memory::resident_set().unwrap_or(0),
        active_run,
        binary: crate::process::executable::path(),
    }
}

/// The note an ended process left in `directory`, if it left a readable one (its times ones a working
/// clock gives: a note naming another is not memprof's, and read as none).
pub(crate) fn read(directory: &Path) -> Option<LastSeen> {
    let seen: LastSeen = serde_json::from_slice(&untrusted::read_small(&directory.join(FILE), LONGEST).ok()?).ok()?;
    let run_started = seen.active_run.as_ref().map(|run| run.started);
    (untrusted::unix_time(seen.time).is_some()
        && run_started.is_none_or(|started| untrusted::unix_time(started).is_some()))
    .then_some(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_read_back_and_anything_else_is_not_one() {
        let directory = tempfile::tempdir().unwrap();
        let seen = LastSeen {
            time: 1_795_000_000.5,
            allocated_bytes: 294 << 20,
            resident_bytes: 300 << 20,
            rss_bytes: 310 << 20,
            active_run: Some(ActiveRun { id: 7, started_by: "http".into(), started: 1_794_999_990.0 }),
            binary: Some("/srv/app".into()),
        };
        std::fs::write(directory.path().join(FILE), serde_json::to_vec(&seen).unwrap()).unwrap();
        assert_eq!(read(directory.path()), Some(seen.clone()));
        std::fs::remove_file(directory.path().join(FILE)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", directory.path().join(FILE)).unwrap();
        assert_eq!(read(directory.path()), None, "never through a link");
        std::fs::remove_file(directory.path().join(FILE)).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            directory.path().join(FILE),
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .unwrap();
        assert_eq!(read(directory.path()), None, "a FIFO is not waited on");
        std::fs::remove_file(directory.path().join(FILE)).unwrap();
        std::fs::write(directory.path().join(FILE), vec![b' '; 1 << 20]).unwrap();
        assert_eq!(read(directory.path()), None, "read no further than a note's size");
        for planted in [
            LastSeen { time: 1e19, ..seen.clone() },
            LastSeen {
                active_run: Some(ActiveRun { id: 7, started_by: "http".into(), started: -5.0 }),
                ..seen.clone()
            },
        ] {
            std::fs::write(directory.path().join(FILE), serde_json::to_vec(&planted).unwrap()).unwrap();
            assert_eq!(read(directory.path()), None, "a time out of range: {planted:?}");
        }
    }
}
