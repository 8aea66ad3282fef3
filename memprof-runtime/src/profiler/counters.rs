//! memprof's one thread reading jemalloc's memory counters, once a second: each reading goes into the
//! memory history (the dashboard's chart, [`crate::memory::history`]) and, when they are armed, to the
//! automatic dumps' watcher ([`crate::profiler::autodump`]); sampled continuously, every few seconds the
//! record's history takes a reading too. While someone watches (the dashboard's chart or `/metrics` asked in
//! the last [`CLASSES_WATCHED`]), the resident set by class ([`crate::memory`]) goes with a reading as often
//! as reading it costs at most [`CLASSES_SHARE`] of a core: every second for a process of a few thousand
//! mappings, less often for more; nobody watching, the kernel's smaps are not read at all. Every
//! [`last_seen::PERIOD`] it writes the process's last-seen record, which the next process reads if this
//! one is killed.
//!
//! Started at start-up when the endpoints are on or automatic dumps are armed (before any run, so its
//! birth is never sampled), and at most once.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use memprof_wire::Reading;

use crate::{jemalloc, memory, memory::history, profile_root::last_seen, profiler::autodump};

/// How often the counters are read.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// The share of one core that reading the classes may take.
pub(crate) const CLASSES_SHARE: f64 = 0.005;

/// Whether the reading thread runs.
static STARTED: Mutex<bool> = Mutex::new(false);

/// How long the resident set by class is read after the last answer that shows it.
pub(crate) const CLASSES_WATCHED: Duration = Duration::from_secs(600);

/// Until when (milliseconds on [`since_start`]'s clock) the resident set by class is read with the
/// counters: only while the dashboard's chart or `/metrics` shows it; automatic dumps and the record's
/// history need jemalloc's counters alone.
static CLASSES_WANTED_UNTIL: AtomicU64 = AtomicU64::new(0);

/// Milliseconds since the first call: the clock [`CLASSES_WANTED_UNTIL`] is on.
fn since_start() -> u64 {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    FIRST.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Reads the resident set by class with the counters for the next [`CLASSES_WATCHED`] (an answer that
/// shows it was asked for).
pub(crate) fn want_classes() {
    CLASSES_WANTED_UNTIL.fetch_max(since_start() + CLASSES_WATCHED.as_millis() as u64, Ordering::Relaxed);
}

/// Whether someone watched the resident set by class recently enough for it to be read now.
fn classes_watched() -> bool {
    since_start() < CLASSES_WANTED_UNTIL.load(Ordering::Relaxed)
}

/// Starts the thread that reads the counters every [`PERIOD`], unless it runs already.
pub(crate) fn start() -> std::io::Result<()> {
    let mut started = STARTED.lock();
    if *started {
        return Ok(());
    }
    crate::process::threads::spawn("memprof-stats", || {
        // The profile root's sweep, off the program's start.
        crate::profiler::Profiler::global().catch_up();
        history::reserve();
        let mut classes_due = Instant::now();
        let mut last_seen_due = Instant::now();
        let mut pacer = crate::profiler::throttle::Pacer::new();
        loop {
            if let Ok(counters) = jemalloc::heap_stats() {
                let time = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
                let now = Instant::now();
                let due = now >= classes_due && classes_watched();
                let classes = due.then(|| memory::read(crate::profiler::record::promoted_bytes()).ok()).flatten().map(
                    |reading| {
                        classes_due = now + PERIOD.max(now.elapsed().div_f64(CLASSES_SHARE));
                        reading.classified.bytes
                    },
                );
                history::record(Reading { time, counters, classes });
                // The one history of what grew (continuous, or during a run on demand) is read while sampled.
                if let Some(record) = crate::profiler::Profiler::global().views_record()
                    && crate::profiler::throttle::sampling_on().unwrap_or(false)
                {
                    // What the walks need, when sampling is on from start-up: read here (once), off the
                    // program's start.
                    crate::profiler::unwinder::prepare_for_samples();
                    crate::profiler::record::read_when_due(record);
                }
                autodump::check(&counters);
                if now >= last_seen_due {
                    last_seen_due = now + last_seen::PERIOD;
                    crate::profiler::Profiler::global().record_last_seen();
                }
            }
            // Sampled continuously past its budget, sampling is thinned slot by slot meanwhile.
            pacer.pace(PERIOD);
        }
    })?;
    *started = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classes_are_read_for_ten_minutes_after_they_were_watched() {
        want_classes();
        assert!(classes_watched());
        let left = CLASSES_WANTED_UNTIL.load(Ordering::Relaxed).saturating_sub(since_start());
        assert!(left > CLASSES_WATCHED.as_millis() as u64 - 1000, "{left} ms left");
    }
}
