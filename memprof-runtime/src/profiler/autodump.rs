//! Automatic dumps, opt-in through the environment (read as [`crate::settings::Settings`]), taken when a reading of jemalloc's counters (once a
//! second, by [`crate::profiler::counters`]) shows one is due:
//!
//! | variable | dumps |
//! |---|---|
//! | `MEMPROF_DUMP_EVERY=1GiB` | each time this many bytes were allocated since the last one (like `lg_prof_interval`) |
//! | `MEMPROF_DUMP_HIGH_WATER=10%` | at each new high-water mark of the program's live bytes, 10% (and at least 1 MiB) above the last one dumped (at first, above the live bytes when dumps were armed) |
//! | `MEMPROF_DUMP_AT_RESIDENT=90%` | when the resident set crosses 90% of the cgroup's memory limit (else the machine's memory), once per crossing: the heap before an OOM kill |
//! | `MEMPROF_DUMP_KEEP=8`, `MEMPROF_DUMP_MAX_BYTES=256MiB` | the ring's bounds: the oldest dumps go first (the newest always stays) |
//!
//! Sampled continuously, with none of these set, dumps are taken at each high water 50 % above the last
//! and at 90 % of the memory limit ([`DumpTriggers::CONTINUOUS_DEFAULT`]), and beside each the record's growing
//! stacks are kept as a profile of their own.
//!
//! The dumps are listed in `state` under `automatic_dumps` and downloadable by id like runs. A dump shows
//! the allocations sampled while sampling was on: for these, sample continuously
//! (`MEMPROF_SAMPLING=continuous`).

use parking_lot::Mutex;

use memprof_wire::HeapCounters;

use crate::jemalloc;
use crate::process::messages;
use crate::profiler::Profiler;
use crate::settings::{DumpTriggers, Retention};

/// The automatic dumps armed, process-wide: the triggers in force and the watcher of readings.
struct Armed {
    /// What makes automatic dumps, and how many are kept, once armed.
    in_force: std::sync::OnceLock<(DumpTriggers, Retention)>,
    /// The watcher, once armed.
    watcher: Mutex<Option<Watcher>>,
}

static ARMED: Armed = Armed { in_force: std::sync::OnceLock::new(), watcher: Mutex::new(None) };

/// The least a new high-water mark rises above the last one dumped, whatever the step: a heap of a few
/// hundred KiB at start-up crosses 50 % of itself at each allocation of a thread's buffer.
const HIGH_WATER_LEAST_RISE: u64 = 1 << 20;

/// What makes automatic dumps and how many are kept, if they are on.
pub(crate) fn in_force() -> Option<&'static (DumpTriggers, Retention)> {
    ARMED.in_force.get()
}

/// Arms automatic dumps made by `triggers`, kept within `retention` (the first arming stays): from the next reading of the counters
/// on, a dump is taken whenever one is due. The counters' thread must run ([`crate::profiler::counters::start`]).
///
/// The program's live bytes now are the first high-water mark: the first high-water dump is one step above
/// them, never a dump of a heap at its start (memprof's own memory is never counted, see
/// [`jemalloc::heap_stats`]).
pub(crate) fn arm(triggers: DumpTriggers, retention: Retention) {
    if ARMED.in_force.set((triggers, retention)).is_ok() {
        let allocated_now = jemalloc::heap_stats().map_or(0, |counters| counters.allocated as u64);
        *ARMED.watcher.lock() = Some(Watcher::new(triggers, allocated_now));
    }
}

/// Takes an automatic dump if this reading of the counters shows one is due (and dumps are armed).
pub(crate) fn check(counters: &HeapCounters) {
    let mut watcher = ARMED.watcher.lock();
    let Some(watcher) = watcher.as_mut() else { return };
    let Some(reason) = watcher.due(counters) else { return };
    let Some((_, retention)) = ARMED.in_force.get() else { return };
    match Profiler::global().automatic_dump(reason, retention.keep, retention.max_bytes) {
        Ok(dump) => messages::info(&format!("Automatic heap dump {} written ({})", dump.id, dump.path.display())),
        Err(error) => messages::warn(&format!("Automatic heap dump failed: {error}")),
    }
}

/// What the watcher remembers between two readings.
struct Watcher {
    triggers: DumpTriggers,
    /// `bytes_allocated_since_start` at the last allocation-interval dump.
    allocated_at_last_dump: Option<u64>,
    /// The program's live bytes at the last high-water dump (at first, when dumps were armed).
    high_water: u64,
    /// Whether the resident set was above the threshold at the last reading.
    above_resident_threshold: bool,
    /// The memory limit the threshold is a share of: read at the first reading, off the program's start
    /// (the cgroups' files, `/proc/meminfo`).
    memory_limit: std::cell::OnceCell<Option<u64>>,
}

impl Watcher {
    fn new(triggers: DumpTriggers, high_water: u64) -> Self {
        let allocated_at_last_dump = triggers.every.and_then(|_| jemalloc::bytes_allocated_since_start().ok());
        Self {
            triggers,
            allocated_at_last_dump,
            high_water,
            above_resident_threshold: false,
            memory_limit: std::cell::OnceCell::new(),
        }
    }

    /// The reason for a dump now, if this reading shows one is due.
    fn due(&mut self, counters: &HeapCounters) -> Option<String> {
        let mut reasons = Vec::new();
        // Read only when asked for: each reading advances jemalloc's epoch and reads every size class.
        if let Some(every) = self.triggers.every
            && let Ok(total) = jemalloc::bytes_allocated_since_start()
        {
            let since = total.saturating_sub(self.allocated_at_last_dump.unwrap_or(total));
            if since >= every {
                self.allocated_at_last_dump = Some(total);
                reasons.push(format!("{} MiB allocated since the last interval dump", since >> 20));
            }
        }
        if let Some(step) = self.triggers.high_water_step {
            let allocated = counters.allocated as u64;
            let mark = (self.high_water as f64 * (1.0 + step)).max((self.high_water + HIGH_WATER_LEAST_RISE) as f64);
            if allocated as f64 > mark {
                self.high_water = allocated;
                reasons.push(format!("new high-water mark, {} MiB allocated", allocated >> 20));
            }
        }
        if let (Some(share), Some(limit), Some(resident)) =
            (self.triggers.resident_share, *self.memory_limit.get_or_init(memory_limit), resident_bytes())
        {
            let above = resident as f64 >= limit as f64 * share;
            if above && !self.above_resident_threshold {
                let percent = format!("{:.1}", share * 100.0);
                let percent = percent.trim_end_matches(".0");
                reasons.push(format!(
                    "resident {} MiB crossed {percent}% of the {} MiB limit",
                    resident >> 20,
                    limit >> 20
                ));
            }
            self.above_resident_threshold = above;
        }
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

/// The tightest memory limit of the process's cgroups (see [`crate::process::cgroup`]), else the machine's memory.
fn memory_limit() -> Option<u64> {
    crate::process::cgroup::memory_limit()
        .or_else(|| kilobytes_field(&std::fs::read_to_string("/proc/meminfo").ok()?, "MemTotal:"))
}

/// This process's resident set.
fn resident_bytes() -> Option<u64> {
    kilobytes_field(&std::fs::read_to_string("/proc/self/status").ok()?, "VmRSS:")
}

/// `Name:   1234 kB` as bytes.
fn kilobytes_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse::<u64>().ok().map(|kilobytes| kilobytes * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_high_water_dump_is_due_at_each_new_mark_a_step_above_the_last() {
        let triggers = DumpTriggers { every: None, high_water_step: Some(0.1), resident_share: None };
        let mut watcher = Watcher::new(triggers, 80 << 20);
        let mut due =
            |mebibytes: usize| watcher.due(&HeapCounters { allocated: mebibytes << 20, ..HeapCounters::default() });
        assert_eq!(due(80), None, "the program's live bytes when armed are the first mark, not a dump");
        assert_eq!(due(100).as_deref(), Some("new high-water mark, 100 MiB allocated"));
        assert_eq!(due(109), None, "less than 10% above the last mark");
        assert_eq!(due(50), None);
        assert_eq!(due(111).as_deref(), Some("new high-water mark, 111 MiB allocated"));
        let mut small = Watcher::new(triggers, 200 << 10);
        let mut due =
            |kibibytes: usize| small.due(&HeapCounters { allocated: kibibytes << 10, ..HeapCounters::default() });
        assert_eq!(due(900), None, "less than 1 MiB above the last mark");
        assert_eq!(due(1300).as_deref(), Some("new high-water mark, 1 MiB allocated"));
    }

    #[test]
    fn proc_fields_are_read_in_kilobytes() {
        assert_eq!(kilobytes_field("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS:"), Some(2048 * 1024));
        assert!(memory_limit().is_some_and(|limit| limit > 0));
    }
}
