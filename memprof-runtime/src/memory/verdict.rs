//! The verdict: which cause explains the resident set, with the figures and the fix. Pure, so each rule
//! is tested on recorded readings.
//!
//! The rules, first that holds:
//! 1. **leak** where the leak rule ([`super::leak_rule`]) finds live bytes rising steadily and still now;
//!    **grew** where they rose so and have been flat since (a step: a cache that filled, a warm-up, a
//!    start-up's allocation);
//! 2. of **retention** (`heap/free`), **fragmentation** (`heap/unused`) and **outside_heap** (`stacks` +
//!    `other`), the largest that reaches [`NOTABLE_BYTES`] and [`NOTABLE_SHARE`] of the resident set
//!    (outside_heap: half of it);
//! 3. otherwise **healthy**, naming each class that holds [`NOTABLE_BYTES`] and [`NOTABLE_SHARE`] of the
//!    resident set, what it is and what can be done (or why nothing needs doing).

use memprof_wire::{DecaySettings, GrowingStack, Verdict, VerdictKind, paths};

use super::classes::Classified;
use super::leak_rule::Growth;
use crate::jemalloc::BinUse;

pub(crate) const NOTABLE_BYTES: u64 = 32 << 20;
/// The smallest share of the resident set a verdict names.
pub(crate) const NOTABLE_SHARE: f64 = 0.25;

/// `12.3 MiB`.
pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { 100.0 * part as f64 / whole as f64 }
}

/// The stacks a leak verdict names.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Holders {
    /// By the program's allocating function, the most first: what they grew by, or what they hold.
    pub(crate) stacks: Vec<GrowingStack>,
    /// Over how many seconds they grew, when compared with an earlier snapshot; `None`: what they hold.
    pub(crate) grown_over: Option<f64>,
    /// What every function whose stacks grew alike grew by, named or not (with `grown_over`).
    pub(crate) grown_in_all: Option<f64>,
    /// Whether the functions named may be dependencies' (the program has no debug info to tell its own
    /// code by).
    pub(crate) unsure: bool,
}

/// What a verdict naming functions adds when the program has no debug info to tell its own code by.
pub(crate) const UNSURE: &str = "Without debug info in the program, memprof cannot tell its code from its \
     dependencies': a function named may be a dependency's that the program called; build it with \
     debug = \"limited\" (it costs binary size only) to have the program's own function named";

/// What the verdict is built from.
pub(crate) struct Findings<'a> {
    /// The resident set by class.
    pub(crate) classified: &'a Classified,
    /// The leak rule's answer.
    pub(crate) growth: Option<Growth>,
    /// The stacks whose live sampled bytes grew the most, or hold the most, when sampling is on.
    pub(crate) stacks: Holders,
    /// Whether sampling is on.
    pub(crate) sampling: bool,
    /// What the record of samples the stacks are named from could not hold, when it missed samples.
    pub(crate) record_losses: Option<String>,
    /// Every small size class's use.
    pub(crate) bins: &'a [BinUse],
    /// jemalloc's purging settings.
    pub(crate) decay: Option<&'a DecaySettings>,
}

/// The verdict of `findings`.
pub(crate) fn verdict(findings: Findings<'_>) -> Verdict {
    let b = &findings.classified.bytes;
    let rss = b.rss;
    let notable = |bytes: u64, share: f64| bytes >= NOTABLE_BYTES && percent(bytes, rss) >= share * 100.0;
    if let Some(growth) = findings.growth {
        if let Some(flat) = growth.flat_seconds {
            return grew(growth, flat, findings.stacks);
        }
        return leak(growth, findings.stacks, findings.sampling, findings.record_losses);
    }
    let outside = b.stacks + b.other;
    let candidates = [
        (VerdictKind::Retention, b.free, notable(b.free, NOTABLE_SHARE)),
        (VerdictKind::Fragmentation, b.unused, notable(b.unused, NOTABLE_SHARE)),
        (VerdictKind::OutsideHeap, outside, notable(outside, 0.5)),
    ];
    let chosen = candidates.iter().filter(|candidate| candidate.2).max_by_key(|candidate| candidate.1);
    let (summary, fix) = match chosen.map(|candidate| candidate.0) {
        Some(VerdictKind::Retention) => retention(b.free, rss, findings.decay),
        Some(VerdictKind::Fragmentation) => fragmentation(b.unused, rss, findings.bins),
        Some(VerdictKind::OutsideHeap) => outside_heap(findings.classified),
        _ => healthy(findings.classified, |bytes| notable(bytes, NOTABLE_SHARE)),
    };
    Verdict { kind: chosen.map_or(VerdictKind::Healthy, |candidate| candidate.0), summary, fix, stacks: Vec::new() }
}

fn leak(growth: Growth, holders: Holders, sampling: bool, record_losses: Option<String>) -> Verdict {
    let stacks = holders.stacks.clone();
    let rate = growth.bytes as f64 / f64::from(1 << 20) / growth.seconds.max(1.0);
    let summary = format!(
        "live objects grew by {} in {:.0} s ({rate:.2} MiB/s), steadily and still now, while the rest of the \
         heap did not",
        mib(growth.bytes),
        growth.seconds
    );
    let fix = if stacks.is_empty() && !sampling {
        format!(
            "Sampling is off, so the growing code cannot be named: start a run during the growth \
             (POST {}?duration=60secs) and read the stacks holding live memory in its text download, or diff \
             two runs' profiles.",
            paths::START
        )
    } else if let (true, Some(losses)) = (stacks.is_empty(), &record_losses) {
        format!("The growing code cannot be named: {losses}.")
    } else if stacks.is_empty() {
        "Sampling is on but no sampled stack holds live memory yet: look again in a minute.".to_owned()
    } else {
        let named: Vec<String> = stacks.iter().take(3).map(named_stack).collect();
        let which = match holders.grown_over {
            Some(seconds) => format!("whose live sampled memory grew the most over the last {seconds:.0} s"),
            None => "holding the most live memory sampled since sampling started".to_owned(),
        };
        let missed = record_losses.map(|losses| format!(" These may not be all: {losses}.")).unwrap_or_default();
        let missed = if holders.unsure { format!("{missed} {UNSURE}.") } else { missed };
        format!(
            "The stacks {which}: {}. Find what keeps these allocations alive (a cache without a bound, a map \
             never pruned, tasks never joined).{}{missed}",
            named.join(", "),
            share_named(growth.bytes, &holders)
        )
    };
    Verdict { kind: VerdictKind::Leak, summary, fix, stacks }
}

/// Growth that stopped: named for what it is, with the stacks that hold it, and no leak's fix.
fn grew(growth: Growth, flat: f64, holders: Holders) -> Verdict {
    let summary = format!(
        "live objects grew by {} over {} ({:.2} MiB/s), then stopped: flat for the last {}; a step (a cache \
         that filled, a warm-up, a start-up's allocation), not a leak",
        mib(growth.bytes),
        duration(growth.seconds),
        growth.bytes as f64 / f64::from(1 << 20) / growth.seconds.max(1.0),
        duration(flat)
    );
    let named: Vec<String> = holders.stacks.iter().take(3).map(named_stack).collect();
    let held =
        if named.is_empty() { String::new() } else { format!(" The stacks that hold it: {}.", named.join(", ")) };
    let held = if named.is_empty() { held } else { format!("{held}{}", share_named(growth.bytes, &holders)) };
    let held = if holders.unsure && !named.is_empty() { format!("{held} {UNSURE}.") } else { held };
    let fix = format!(
        "Nothing leaks while it stays flat; if the step is more than the program should hold, bound what \
         filled (a cache's capacity, a buffer's size).{held}"
    );
    Verdict { kind: VerdictKind::Grew, summary, fix, stacks: holders.stacks }
}

/// The share of the process's rise (`grown` bytes) that the stacks named grew by, said when under
/// [`NAMED_ENOUGH`] (an answer that names a sixth of what grew must not read as if it named it all); nothing
/// for stacks named by what they hold.
fn share_named(grown: u64, holders: &Holders) -> String {
    if holders.grown_over.is_none() || grown == 0 {
        return String::new();
    }
    let named: f64 = holders.stacks.iter().map(|stack| stack.bytes.max(0.0)).sum();
    if named >= NAMED_ENOUGH * grown as f64 {
        return String::new();
    }
    let all = holders.grown_in_all.unwrap_or(named);
    let beyond =
        if all > named * 1.05 { format!(" (every stack seen growing so: {})", mib(all as u64)) } else { String::new() };
    format!(
        " The stacks named account for {} of the {} live objects grew by ({:.0} %){beyond}: the rest grew in \
         stacks too small to name each (under 1 MiB, or a tenth of what they hold), outside the 64 holding the \
         most, or unsteadily, or is the sampling's error.",
        mib(named as u64),
        mib(grown),
        named / grown as f64 * 100.0
    )
}

/// The least share of what grew the stacks named must account for to go without saying.
pub(crate) const NAMED_ENOUGH: f64 = 0.8;

/// A stack as a leak verdict names it: its function and growth, and how old what it holds is, when known
/// ("92 % of its 30.0 MiB is older than 10 min").
fn named_stack(stack: &GrowingStack) -> String {
    format!("{}{}", named_stack_alone(stack), under_labels(stack))
}

/// Where the program labels its allocations, the label sets a stack's bytes were allocated under, the
/// most first (three at most): " under tenant=acme 75 %, tenant=initech 25 %".
fn under_labels(stack: &GrowingStack) -> String {
    let total: f64 = stack.by_label.iter().map(|share| share.bytes.max(0.0)).sum();
    if total <= 0.0 {
        return String::new();
    }
    let shares: Vec<String> = stack
        .by_label
        .iter()
        .take(3)
        .map(|share| format!("{} {:.0} %", share.labels, share.bytes.max(0.0) / total * 100.0))
        .collect();
    format!(" under {}", shares.join(", "))
}

fn named_stack_alone(stack: &GrowingStack) -> String {
    let bytes = with_error(stack.bytes, stack.error_bytes);
    match &stack.age {
        // Grown by more than it holds: some of what it grew was freed since; said, not left to puzzle over.
        Some(age) if age.held_bytes > 0.0 && age.held_bytes < stack.bytes * 0.95 => format!(
            "{} (grew by {bytes}, of which {} is still held; {:.0} % of that is older than {})",
            stack.function,
            mib(age.held_bytes as u64),
            age.older_share * 100.0,
            duration(age.older_than_seconds)
        ),
        Some(age) if age.held_bytes > 0.0 => format!(
            "{} ({bytes}; {:.0} % of the {} it holds is older than {})",
            stack.function,
            age.older_share * 100.0,
            mib(age.held_bytes as u64),
            duration(age.older_than_seconds)
        ),
        _ => format!("{} ({bytes})", stack.function),
    }
}

/// `38.0 MiB +- 1.2 MiB` where the estimate's error is known, else `38.0 MiB`.
pub(crate) fn with_error(bytes: f64, error: Option<f64>) -> String {
    match error {
        Some(error) => format!("{} +- {}", mib(bytes.max(0.0) as u64), mib(error as u64)),
        None => mib(bytes.max(0.0) as u64),
    }
}

/// Seconds as an operator reads them: `45 s`, `10 min`.
fn duration(seconds: f64) -> String {
    if seconds >= 120.0 { format!("{:.0} min", seconds / 60.0) } else { format!("{seconds:.0} s") }
}

fn retention(free: u64, rss: u64, decay: Option<&DecaySettings>) -> (String, String) {
    let summary = format!("jemalloc keeps {} of freed pages resident ({:.0} % of RSS)", mib(free), percent(free, rss));
    let purge = format!("POST {} returns them now", paths::PURGE);
    let fix = match decay {
        Some(decay) if !decay.background_thread => format!(
            "background_thread is off, so dirty pages decay (dirty_decay_ms={}) only when their arena is used \
             again: {purge}; turn background_thread on (POST {}?background_thread=true, or \
             `background_thread:true` in MALLOC_CONF) to return them within the decay time from now on.",
            decay.dirty_decay_ms,
            paths::DECAY
        ),
        Some(decay) => format!(
            "background_thread is on and dirty pages decay over dirty_decay_ms={} ms: {purge}; lower the decay \
             time (POST {}?dirty_ms=1000) to return them sooner.",
            decay.dirty_decay_ms,
            paths::DECAY
        ),
        None => format!("{purge}."),
    };
    (summary, fix)
}

fn fragmentation(unused: u64, rss: u64, bins: &[BinUse]) -> (String, String) {
    let mut worst: Vec<&BinUse> = bins.iter().filter(|bin| bin.slab_bytes >= 1 << 20).collect();
    worst.sort_by_key(|bin| std::cmp::Reverse(bin.slab_bytes.saturating_sub(bin.regions_used * bin.size)));
    let named: Vec<String> = worst
        .iter()
        .take(3)
        .map(|bin| {
            format!(
                "{} B: {:.0} % of {} of slabs used",
                bin.size,
                percent(bin.regions_used, bin.regions),
                mib(bin.slab_bytes)
            )
        })
        .collect();
    let summary = format!(
        "{} ({:.0} % of RSS) is free space inside pages jemalloc has in use{}",
        mib(unused),
        percent(unused, rss),
        if named.is_empty() { String::new() } else { format!(": {}", named.join("; ")) }
    );
    let fix = "Few live objects pin whole slabs, and a purge cannot return them: copy long-lived survivors into \
               fresh collections (shrink_to_fit, rebuild the map) or allocate objects that live long apart from \
               short-lived ones of the same size."
        .to_owned();
    (summary, fix)
}

/// No cause to fix: each class that still holds a notable share (`notable`) named, with what it is and
/// what, if anything, can be done.
fn healthy(classified: &Classified, notable: impl Fn(u64) -> bool) -> (String, String) {
    let b = &classified.bytes;
    // Most of memprof's class is the pages jemalloc gives sampled small objects when sampling is frequent.
    let profiler = if classified.promoted * 2 > b.profiler {
        (
            "memprof's own cost: pages jemalloc's profiling gives each sampled small object (a large extent of its own while it lives)",
            "sample less often: lg_prof_sample:19 (every 512 KiB, the default) samples few small objects, where every allocation sampled gives each a page",
        )
    } else {
        (
            "memprof's own work (analyses, renders, answers)",
            "nothing to do: memprof lets it go ten seconds after the endpoints' last request",
        )
    };
    let described = [
        (
            b.objects,
            "live objects (the program's own data)",
            "nothing needs doing while they do not grow (the leak rule watches them); a run's profile (POST /memory-profiler/start) shows the stacks holding them",
        ),
        (
            b.metadata,
            "jemalloc's metadata",
            "profiling's records grow with the distinct stacks sampled (a larger lg_prof_sample samples fewer), the allocator's with its arenas and extents (MALLOC_CONF=narenas:N makes fewer arenas)",
        ),
        (b.profiler, profiler.0, profiler.1),
        (
            b.stacks,
            "thread stacks",
            "fewer threads, or smaller stacks (std::thread::Builder::stack_size, RUST_MIN_STACK, tokio's thread_stack_size)",
        ),
        (
            b.code,
            "code: the program's and its libraries' mapped files",
            "nothing needs doing: these file pages are shared with every process of the same binaries and the kernel drops them under pressure; a smaller binary (strip, fewer dependencies) maps less",
        ),
        (
            b.files,
            "file mappings and shared memory",
            "file pages the kernel can drop and write back; /proc/<pid>/smaps names the files by size",
        ),
        (
            b.other,
            "anonymous memory outside jemalloc (direct mmaps, another allocator)",
            "look for anonymous maps (mmap, memmap2's map_anon) and C libraries with their own malloc; /proc/<pid>/smaps lists the mappings by size",
        ),
        (b.unattributed, "mappings the kernel names in a way memprof does not know", "/proc/<pid>/smaps names them"),
    ];
    let named: Vec<&(u64, &str, &str)> = described.iter().filter(|(bytes, _, _)| notable(*bytes)).collect();
    let mut summary = format!(
        "RSS {}: live objects {:.0} %, no cause to fix (freed pages kept {}, unused space in pages {})",
        mib(b.rss),
        percent(b.objects, b.rss),
        mib(b.free),
        mib(b.unused)
    );
    if named.is_empty() {
        return (summary, "Nothing to do.".to_owned());
    }
    let held: Vec<String> = named
        .iter()
        .map(|(bytes, what, _)| format!("{what} hold {} ({:.0} % of RSS)", mib(*bytes), percent(*bytes, b.rss)))
        .collect();
    summary.push_str(&format!("; {}", held.join("; ")));
    let fixes: Vec<String> = named.iter().map(|(_, what, fix)| format!("{what}: {fix}")).collect();
    (summary, format!("{}.", fixes.join("; ")))
}

/// The decay time under which returning freed pages costs an allocating program noticeably.
const SHORT_DECAY_MS: i64 = 1000;

/// What `settings` cost the program, when a decay time is short enough to matter: every freed page
/// returned (almost) at once is faulted in again when the program reuses it.
///
/// ```ignore
/// let zero = DecaySettings { dirty_decay_ms: 0, muzzy_decay_ms: 0, background_thread: false, cost: None };
/// assert!(decay_cost(&zero).unwrap().starts_with("dirty_decay_ms=0"));
/// ```
pub(crate) fn decay_cost(settings: &DecaySettings) -> Option<String> {
    let ms = settings.dirty_decay_ms;
    (0..SHORT_DECAY_MS).contains(&ms).then(|| {
        format!(
            "dirty_decay_ms={ms}: freed pages go back to the system {} and are faulted in again when the program \
             reuses them: on an allocating service this costs CPU (the example service went from 8 % to 29 % of \
             a core and lost about a third of its throughput at 0); {SHORT_DECAY_MS} ms or more keeps most of \
             the saving (POST {}?dirty_ms=10000 restores jemalloc's default)",
            if ms == 0 { "at once".to_owned() } else { format!("within {ms} ms") },
            paths::DECAY
        )
    })
}

fn outside_heap(classified: &Classified) -> (String, String) {
    let b = &classified.bytes;
    if b.stacks >= b.other {
        (
            format!(
                "{} threads hold {} of stack ({:.0} % of RSS), outside the heap",
                classified.threads,
                mib(b.stacks),
                percent(b.stacks, b.rss)
            ),
            "Fewer threads, or smaller stacks (std::thread::Builder::stack_size, RUST_MIN_STACK, tokio's \
             thread_stack_size); a stack keeps every page it ever touched."
                .to_owned(),
        )
    } else {
        (
            format!(
                "{} ({:.0} % of RSS) is anonymous memory outside jemalloc: direct mmaps or another allocator",
                mib(b.other),
                percent(b.other, b.rss)
            ),
            "Look for anonymous maps (mmap, memmap2's map_anon) and C libraries with their own malloc; \
             /proc/<pid>/smaps lists the mappings by size."
                .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests;
