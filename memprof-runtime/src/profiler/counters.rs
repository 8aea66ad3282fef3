//! memprof's one thread reading jemalloc's memory counters, once a second: each reading goes into the
//! memory history (the dashboard's chart, [`crate::memory::history`]) and, when they are armed, to the
//! automatic dumps' watcher ([`crate::profiler::autodump`]); sampled continuously, every few seconds the
//! record's history takes a reading too. While someone watches (the dashboard's chart or `/metrics` asked in
//! the last [`CLASSES_WATCHED`]), the resident set by class ([`crate::memory`]) goes with a reading as often
//! as reading it costs at most [`CLASSES_SHARE`] of a core: every second for a process of a few thousand
//! mappings, less often for more; nobody watching, the kernel's smaps are not read at all. Every
//! [`last_seen::PERIOD`] it writes the process's last-seen note, which the next process reads if this
//! one is killed.
//!
//! Reading jemalloc's counters advances its `epoch`, which merges every arena's statistics (some 750,000
//! instructions with a few arenas; more with many): sampled continuously and unthinned, a second in which
//! the record saw no sample taken and none freed is not read again ([`read_due`]): the last reading stands,
//! for at most [`UNREAD_AT_MOST`]. An idle process reads them every [`UNREAD_AT_MOST`].
//!
//! Started once, by start-up, for all that read it (the endpoints on, automatic dumps armed, sampling
//! continuous), before sampling can be on, so its birth is never sampled; a router mounted without
//! [`crate::start`] starts it for the dashboard's chart ([`crate::endpoints`]' context).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use memprof_wire::Reading;

use crate::{jemalloc, memory, memory::history, profile_root::last_seen, profiler::autodump};

/// The reading thread's state: whether it runs, and until when the classes are read.
struct Readings {
    /// Whether the reading thread runs.
    started: Mutex<bool>,
    /// Until when (milliseconds on [`since_start`]'s clock) the resident set by class is read with the
    /// counters: only while the dashboard's chart or `/metrics` shows it; automatic dumps and the record's
    /// history need jemalloc's counters alone.
    classes_wanted_until: AtomicU64,
    /// When [`since_start`]'s clock began: its first call.
    first: OnceLock<Instant>,
}

static READINGS: Readings =
    Readings { started: Mutex::new(false), classes_wanted_until: AtomicU64::new(0), first: OnceLock::new() };

/// How often the counters are read.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// The longest the last reading of jemalloc's counters stands in for a new one.
pub(crate) const UNREAD_AT_MOST: Duration = Duration::from_secs(10);

/// Whether jemalloc's counters are read again now: `changes` is what the record saw so far (samples taken
/// and freed, see [`crate::sampler::record::table::Table::changes`]), `None` where it cannot tell (not
/// sampled continuously, or thinned); `last` is the last reading's `changes` and its age.
fn read_due(changes: Option<u64>, last: Option<(Option<u64>, Duration)>) -> bool {
    match (changes, last) {
        (Some(now), Some((Some(then), age))) => now != then || age >= UNREAD_AT_MOST,
        _ => true,
    }
}

/// What the record saw so far, where an unchanged count means an unchanged heap (see [`read_due`]).
fn changes_seen() -> Option<u64> {
    let record = crate::profiler::Profiler::global().sampler().record()?;
    (crate::sampler::throttle::thinning() == crate::sampler::budget::Thinning::NONE).then(|| record.changes())
}

/// The share of one core that reading the classes may take.
pub(crate) const CLASSES_SHARE: f64 = 0.005;

/// How long the resident set by class is read after the last answer that shows it.
pub(crate) const CLASSES_WATCHED: Duration = Duration::from_secs(600);

/// Milliseconds since the first call: the clock `READINGS.classes_wanted_until` is on.
fn since_start() -> u64 {
    READINGS.first.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Reads the resident set by class with the counters for the next [`CLASSES_WATCHED`] (an answer that
/// shows it was asked for).
pub(crate) fn want_classes() {
    READINGS.classes_wanted_until.fetch_max(since_start() + CLASSES_WATCHED.as_millis() as u64, Ordering::Relaxed);
}

/// Whether someone watched the resident set by class recently enough for it to be read now.
fn classes_watched() -> bool {
    since_start() < READINGS.classes_wanted_until.load(Ordering::Relaxed)
}

/// Starts the thread that reads the counters every [`PERIOD`], unless it runs already.
pub(crate) fn start() -> std::io::Result<()> {
    let mut started = READINGS.started.lock();
    if *started {
        return Ok(());
    }
    crate::process::threads::spawn("memprof-stats", || {
        // The profile root's sweep, off the program's start.
        crate::profiler::Profiler::global().catch_up();
        history::reserve();
        let mut classes_due = Instant::now();
        let mut last_seen_due = Instant::now();
        let mut pacer = crate::sampler::throttle::Pacer::new();
        // The last reading of jemalloc's counters: what, when, and what the record had seen then.
        let mut last: Option<(memprof_wire::HeapCounters, Instant, Option<u64>)> = None;
        loop {
            let changes = changes_seen();
            let fresh = read_due(changes, last.map(|(_, at, then)| (then, at.elapsed())))
                .then(|| jemalloc::heap_stats().ok().map(|counters| (counters, Instant::now(), changes)))
                .flatten();
            last = fresh.or(last);
            if let Some((counters, ..)) = last {
                let time = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
                let now = Instant::now();
                let due = now >= classes_due && classes_watched();
                let classes =
                    due.then(|| memory::read(crate::sampler::record::promoted_bytes()).ok()).flatten().map(|reading| {
                        classes_due = now + PERIOD.max(now.elapsed().div_f64(CLASSES_SHARE));
                        reading.classified.bytes
                    });
                history::record(Reading { time, counters, classes });
                // The one history of what grew (continuous, or during a run on demand) is read while sampled.
                if let Some(record) = crate::profiler::Profiler::global().sampler().views_record()
                    && crate::sampler::throttle::sampling_on().unwrap_or(false)
                {
                    // What the walks need, when sampling is on from start-up: read here (once), off the
                    // program's start; then the functions the walks met are judged, each once.
                    crate::stack_walk::prepare_for_samples();
                    crate::allocator_code::AllocatorCode::of_this_program().judge_asked();
                    crate::sampler::record::read_when_due(record);
                }
                autodump::check(&counters);
                if now >= last_seen_due {
                    last_seen_due = now + last_seen::PERIOD;
                    crate::profiler::Profiler::global().note_last_seen(counters);
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
    fn the_counters_are_read_again_when_the_record_saw_a_change_or_cannot_tell() {
        let second = Duration::from_secs(1);
        assert!(read_due(Some(5), None), "never read");
        assert!(!read_due(Some(5), Some((Some(5), second))), "nothing sampled or freed since");
        assert!(read_due(Some(6), Some((Some(5), second))), "a sample taken or freed");
        assert!(read_due(Some(5), Some((Some(5), UNREAD_AT_MOST))), "the last reading too old");
        assert!(read_due(None, Some((Some(5), second))), "thinned, or not continuous: it cannot tell");
        assert!(read_due(Some(5), Some((None, second))), "the last reading was taken when it could not tell");
    }

    #[test]
    fn the_classes_are_read_for_ten_minutes_after_they_were_watched() {
        want_classes();
        assert!(classes_watched());
        let left = READINGS.classes_wanted_until.load(Ordering::Relaxed).saturating_sub(since_start());
        assert!(left > CLASSES_WATCHED.as_millis() as u64 - 1000, "{left} ms left");
    }
}
