//! Automatic dumps, opt-in through the environment, taken when a reading of jemalloc's counters (once a
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
//! and at 90 % of the memory limit ([`Settings::continuous_default`]), and beside each the record's growing
//! stacks are kept as a profile of their own.
//!
//! The dumps are listed in `state` under `automatic_dumps` and downloadable by id like runs. A dump shows
//! the allocations sampled while sampling was on: for these, sample continuously
//! (`MEMPROF_SAMPLING=continuous`).

use parking_lot::Mutex;

use memprof_wire::HeapCounters;

use crate::process::messages;
use crate::profiler::Profiler;
use crate::{jemalloc, process::environment};

/// How many automatic dumps are kept unless `MEMPROF_DUMP_KEEP` says otherwise.
const DEFAULT_KEPT_DUMPS: usize = 8;
/// How many bytes of automatic dumps are kept unless `MEMPROF_DUMP_MAX_BYTES` says otherwise.
const DEFAULT_KEPT_DUMP_BYTES: u64 = 256 << 20;
/// The least a new high-water mark rises above the last one dumped, whatever the step: a heap of a few
/// hundred KiB at start-up crosses 50 % of itself at each allocation of a thread's buffer.
const HIGH_WATER_LEAST_RISE: u64 = 1 << 20;

/// What triggers a dump, and how many are kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// Bytes allocated between two dumps.
    pub(crate) every: Option<u64>,
    /// Growth over the last high-water dump that makes a new one (0.1 = 10%).
    pub(crate) high_water_step: Option<f64>,
    /// Share of the memory limit whose crossing by the resident set makes a dump.
    pub(crate) resident_share: Option<f64>,
    /// Dumps kept at most.
    pub(crate) keep: usize,
    /// Bytes of dumps kept at most.
    pub(crate) max_bytes: u64,
}

impl Settings {
    /// The settings the environment asks for; `None` when it asks for no automatic dumps. A malformed
    /// value is an error that names the variable.
    pub(crate) fn from_environment() -> Result<Option<Self>, String> {
        Self::from_lookup(|name| crate::process::environment::value(name).map(str::to_owned))
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let parsed = |name: &str, parse: fn(&str) -> Option<f64>, what: &str| -> Result<Option<f64>, String> {
            lookup(name)
                .map(|text| parse(text.trim()).ok_or_else(|| format!("{name}={text:?} is not {what}")))
                .transpose()
        };
        let every = parsed(environment::DUMP_EVERY, parse_bytes, "a size such as 1GiB")?;
        let high_water_step = parsed(environment::DUMP_HIGH_WATER, parse_percent, "a percentage such as 10%")?;
        let resident_share = parsed(environment::DUMP_AT_RESIDENT, parse_percent, "a percentage such as 90%")?;
        if every.is_none() && high_water_step.is_none() && resident_share.is_none() {
            return Ok(None);
        }
        let (keep, max_bytes) = limits(&lookup)?;
        Ok(Some(Self {
            every: every.map(|bytes| bytes as u64),
            high_water_step,
            resident_share: resident_share.map(|share| share.min(1.0)),
            keep,
            max_bytes,
        }))
    }
}

impl Settings {
    /// What continuous sampling arms when the environment asks for nothing: a dump at each high water 50 %
    /// above the last, and when the resident set crosses 90 % of the memory limit (the heap before an OOM
    /// kill), within the usual bounds.
    pub(crate) fn continuous_default() -> Self {
        let (keep, max_bytes) = retention();
        Self { every: None, high_water_step: Some(0.5), resident_share: Some(0.9), keep, max_bytes }
    }
}

/// How many dumps, and how many bytes of them, are kept: `MEMPROF_DUMP_KEEP` and `MEMPROF_DUMP_MAX_BYTES`,
/// else the defaults. The same bounds hold what earlier processes left ([`crate::profile_root::evidence`]); a malformed
/// value counts as unset there (it is reported when automatic dumps are asked for).
pub(crate) fn retention() -> (usize, u64) {
    limits(&|name: &str| crate::process::environment::value(name).map(str::to_owned))
        .unwrap_or((DEFAULT_KEPT_DUMPS, DEFAULT_KEPT_DUMP_BYTES))
}

fn limits(lookup: &impl Fn(&str) -> Option<String>) -> Result<(usize, u64), String> {
    let keep = lookup(environment::DUMP_KEEP)
        .map(|text| {
            text.trim()
                .parse::<u16>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{}={text:?} is not a count from 1 to 65535", environment::DUMP_KEEP))
        })
        .transpose()?;
    let max_bytes = lookup(environment::DUMP_MAX_BYTES)
        .map(|text| {
            parse_bytes(text.trim())
                .ok_or_else(|| format!("{}={text:?} is not a size such as 256MiB", environment::DUMP_MAX_BYTES))
        })
        .transpose()?;
    Ok((keep.map_or(DEFAULT_KEPT_DUMPS, usize::from), max_bytes.map_or(DEFAULT_KEPT_DUMP_BYTES, |bytes| bytes as u64)))
}

/// `1048576`, `512KiB`, `64MiB`, `1GiB` (or `KB`, `MB`, `GB` in powers of 1000), at least 1.
fn parse_bytes(text: &str) -> Option<f64> {
    let split = text.find(|character: char| !character.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return None,
    };
    let bytes = number.parse::<u64>().ok()? as f64 * scale;
    (bytes >= 1.0).then_some(bytes)
}

/// `10%` as 0.1; from 0.1% to 1000%.
fn parse_percent(text: &str) -> Option<f64> {
    let share = text.strip_suffix('%')?.trim().parse::<f64>().ok()? / 100.0;
    (0.001..=10.0).contains(&share).then_some(share)
}

/// The settings automatic dumps run with, once armed.
static IN_FORCE: std::sync::OnceLock<Settings> = std::sync::OnceLock::new();

/// The watcher, once armed.
static WATCHER: Mutex<Option<Watcher>> = Mutex::new(None);

/// The settings automatic dumps run with, if they are on (not the environment read again).
pub(crate) fn settings_in_force() -> Option<&'static Settings> {
    IN_FORCE.get()
}

/// Arms automatic dumps with `settings` (the first settings stay): from the next reading of the counters
/// on, a dump is taken whenever one is due. The counters' thread must run ([`crate::profiler::counters::start`]).
///
/// The program's live bytes now are the first high-water mark: the first high-water dump is one step above
/// them, never a dump of a heap at its start (memprof's own memory is never counted, see
/// [`jemalloc::heap_stats`]).
pub(crate) fn arm(settings: Settings) {
    if IN_FORCE.set(settings.clone()).is_ok() {
        let allocated_now = jemalloc::heap_stats().map_or(0, |counters| counters.allocated as u64);
        *WATCHER.lock() = Some(Watcher::new(settings, allocated_now));
    }
}

/// Takes an automatic dump if this reading of the counters shows one is due (and dumps are armed).
pub(crate) fn check(counters: &HeapCounters) {
    let mut watcher = WATCHER.lock();
    let Some(watcher) = watcher.as_mut() else { return };
    let Some(reason) = watcher.due(counters) else { return };
    let settings = &watcher.settings;
    match Profiler::global().automatic_dump(reason, settings.keep, settings.max_bytes) {
        Ok(dump) => messages::info(&format!("Automatic heap dump {} written ({})", dump.id, dump.path.display())),
        Err(error) => messages::warn(&format!("Automatic heap dump failed: {error}")),
    }
}

/// What the watcher remembers between two readings.
struct Watcher {
    settings: Settings,
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
    fn new(settings: Settings, high_water: u64) -> Self {
        let allocated_at_last_dump = settings.every.and_then(|_| jemalloc::bytes_allocated_since_start().ok());
        Self {
            settings,
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
        if let Some(every) = self.settings.every
            && let Ok(total) = jemalloc::bytes_allocated_since_start()
        {
            let since = total.saturating_sub(self.allocated_at_last_dump.unwrap_or(total));
            if since >= every {
                self.allocated_at_last_dump = Some(total);
                reasons.push(format!("{} MiB allocated since the last interval dump", since >> 20));
            }
        }
        if let Some(step) = self.settings.high_water_step {
            let allocated = counters.allocated as u64;
            let mark = (self.high_water as f64 * (1.0 + step)).max((self.high_water + HIGH_WATER_LEAST_RISE) as f64);
            if allocated as f64 > mark {
                self.high_water = allocated;
                reasons.push(format!("new high-water mark, {} MiB allocated", allocated >> 20));
            }
        }
        if let (Some(share), Some(limit), Some(resident)) =
            (self.settings.resident_share, *self.memory_limit.get_or_init(memory_limit), resident_bytes())
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

    fn settings(variables: &[(&str, &str)]) -> Result<Option<Settings>, String> {
        Settings::from_lookup(|name| variables.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string()))
    }

    #[test]
    fn settings_come_from_the_environment() {
        assert_eq!(settings(&[]), Ok(None));
        assert_eq!(settings(&[("MEMPROF_DUMP_KEEP", "3")]), Ok(None), "bounds alone ask for nothing");
        let every = settings(&[("MEMPROF_DUMP_EVERY", "64MiB"), ("MEMPROF_DUMP_KEEP", "3")]).unwrap().unwrap();
        assert_eq!((every.every, every.keep, every.max_bytes), (Some(64 << 20), 3, 256 << 20));
        let both =
            settings(&[("MEMPROF_DUMP_HIGH_WATER", "10%"), ("MEMPROF_DUMP_AT_RESIDENT", "90%")]).unwrap().unwrap();
        assert_eq!((both.high_water_step, both.resident_share), (Some(0.1), Some(0.9)));
        assert_eq!(settings(&[("MEMPROF_DUMP_EVERY", "1 GB")]).unwrap().unwrap().every, Some(1_000_000_000));
    }

    #[test]
    fn malformed_settings_name_the_variable() {
        assert_eq!(
            settings(&[("MEMPROF_DUMP_EVERY", "lots")]),
            Err("MEMPROF_DUMP_EVERY=\"lots\" is not a size such as 1GiB".to_owned())
        );
        assert_eq!(
            settings(&[("MEMPROF_DUMP_HIGH_WATER", "10")]),
            Err("MEMPROF_DUMP_HIGH_WATER=\"10\" is not a percentage such as 10%".to_owned())
        );
        let zero = settings(&[("MEMPROF_DUMP_AT_RESIDENT", "90%"), ("MEMPROF_DUMP_KEEP", "0")]);
        assert_eq!(zero, Err("MEMPROF_DUMP_KEEP=\"0\" is not a count from 1 to 65535".to_owned()));
    }

    #[test]
    fn a_high_water_dump_is_due_at_each_new_mark_a_step_above_the_last() {
        let settings = settings(&[("MEMPROF_DUMP_HIGH_WATER", "10%")]).unwrap().unwrap();
        let mut watcher = Watcher::new(settings, 80 << 20);
        let mut due =
            |mebibytes: usize| watcher.due(&HeapCounters { allocated: mebibytes << 20, ..HeapCounters::default() });
        assert_eq!(due(80), None, "the program's live bytes when armed are the first mark, not a dump");
        assert_eq!(due(100).as_deref(), Some("new high-water mark, 100 MiB allocated"));
        assert_eq!(due(109), None, "less than 10% above the last mark");
        assert_eq!(due(50), None);
        assert_eq!(due(111).as_deref(), Some("new high-water mark, 111 MiB allocated"));
        let mut small = Watcher::new(watcher.settings.clone(), 200 << 10);
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
