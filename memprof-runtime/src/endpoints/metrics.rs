//! `/metrics`: jemalloc's memory counters, the resident set by class (the memory history's newest) and the
//! profiler's state in Prometheus's text format (0.0.4).

use std::fmt::Write;

use super::context::Context;
use crate::http::{HttpError, Query, Reply};
use crate::jemalloc;

/// `/metrics`.
pub(super) fn metrics(context: &Context, _: &Query) -> Result<Reply, HttpError> {
    let mut text = String::new();
    // Scraped, the resident set by class is read with the counters from now on; the first scrape (or the
    // first after ten minutes unwatched) reads it itself.
    crate::profiler::counters::want_classes();
    let recent = crate::memory::history::ring().latest_classes_since(crate::profiler::counters::CLASSES_WATCHED);
    let classes = recent.or_else(|| {
        let promoted = crate::sampler::record::promoted_bytes();
        crate::memory::read(promoted).ok().map(|reading| reading.classified.bytes)
    });
    if let Some(classes) = classes {
        let name = "memprof_memory_bytes";
        let _ = write!(
            text,
            "# HELP {name} The process's resident set by class (see /memory-profiler/explain); the classes add up to \
             memprof_resident_set_bytes.\n# TYPE {name} gauge\n"
        );
        for (class, bytes) in classes.by_class() {
            let _ = writeln!(text, "{name}{{class=\"{class}\"}} {bytes}");
        }
        let name = "memprof_resident_set_bytes";
        let help = "The process's resident set, as the kernel counts it (the sum of smaps' Rss).";
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}\n", classes.rss);
    }
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
    };
    if let Ok(stats) = jemalloc::heap_stats() {
        for (name, value, help) in [
            ("allocated", stats.allocated, "Bytes in live allocations (jemalloc stats.allocated)."),
            ("active", stats.active, "Bytes in active pages, allocations and their padding (stats.active)."),
            ("metadata", stats.metadata, "Bytes of jemalloc's own metadata (stats.metadata)."),
            ("resident", stats.resident, "Bytes in physically resident pages jemalloc maps (stats.resident)."),
            ("mapped", stats.mapped, "Bytes in active extents jemalloc maps (stats.mapped)."),
            ("retained", stats.retained, "Bytes of virtual memory kept for reuse, not returned (stats.retained)."),
        ] {
            metric(&format!("memprof_jemalloc_{name}_bytes"), "gauge", help, value as f64);
        }
    }
    let profiler = context.profiler;
    let flag = |on: bool| if on { 1.0 } else { 0.0 };
    metric(
        "memprof_profiling_enabled",
        "gauge",
        "1 when heap profiling is compiled in and enabled (opt.prof).",
        flag(profiler.sampler().config().profiling_enabled),
    );
    metric(
        "memprof_profiling_active",
        "gauge",
        "1 while allocations are being sampled (prof.active).",
        flag(crate::sampler::throttle::sampling_on().unwrap_or(false)),
    );
    if let Ok(lg_sample) = jemalloc::lg_sample() {
        metric(
            "memprof_sample_period_bytes",
            "gauge",
            "Mean bytes allocated between two samples.",
            (1u64 << lg_sample) as f64,
        );
    }
    let overview = profiler.overview();
    let counts = overview.counts;
    metric("memprof_runs_started_total", "counter", "Profiling runs started.", counts.started as f64);
    metric(
        "memprof_runs_finished_total",
        "counter",
        "Profiling runs that ended with a profile.",
        counts.finished as f64,
    );
    metric(
        "memprof_runs_failed_total",
        "counter",
        "Profiling runs whose profile could not be written.",
        counts.failed as f64,
    );
    metric("memprof_run_active", "gauge", "1 while a profiling run is active.", flag(overview.current.is_some()));
    metric("memprof_profiles_kept", "gauge", "Finished profiles kept for download.", overview.finished.len() as f64);
    let (label_sets, overflowed) = crate::labels::counts();
    metric("memprof_label_sets", "gauge", "Distinct allocation label sets recorded.", f64::from(label_sets));
    metric(
        "memprof_label_sets_overflowed_total",
        "counter",
        "Times labels were entered past the bound on label sets (recorded as memprof_overflow).",
        overflowed as f64,
    );
    if let Some(push) = crate::otlp_push::report() {
        let name = "memprof_otlp_exports_total";
        let _ = write!(
            text,
            "# HELP {name} OTLP exports of heap profiles, by outcome: sent (accepted), retried (a send that failed and is tried again), refused (for good), dropped (unsent).\n# TYPE {name} counter\n"
        );
        for (outcome, count) in
            [("sent", push.sent), ("retried", push.retried), ("refused", push.refused), ("dropped", push.dropped)]
        {
            let _ = writeln!(text, "{name}{{outcome=\"{outcome}\"}} {count}");
        }
        let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
            let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
        };
        metric(
            "memprof_otlp_sent_bytes_total",
            "counter",
            "Bytes of OTLP exports accepted, as sent.",
            push.sent_bytes as f64,
        );
        metric(
            "memprof_otlp_rejected_profiles_total",
            "counter",
            "Profiles of accepted exports the endpoint rejected (OTLP partial success).",
            push.rejected_profiles as f64,
        );
        metric("memprof_otlp_queued_exports", "gauge", "OTLP exports waiting to be sent.", push.queued as f64);
        metric(
            "memprof_otlp_backoff_seconds",
            "gauge",
            "How long until the next OTLP send may go: the backoff after failures, or the collector's Retry-After.",
            push.backoff_ms as f64 / 1000.0,
        );
    }
    // The record of samples: continuous sampling's, or on demand the one the first run started.
    if let Some(record) = profiler.sampler().views_record() {
        record_metrics(&mut text, record)?;
    }
    Ok(Reply::bytes("text/plain; version=0.0.4; charset=utf-8", text.into_bytes()))
}

/// How many growing stacks `/metrics` names.
const GROWING_NAMED: usize = 5;

/// The record's fill, and the stacks that grew steadily over its one history (sampled continuously, its
/// last hour; on demand, the run's time).
fn record_metrics(text: &mut String, record: &crate::sampler::record::table::Table) -> Result<(), HttpError> {
    let (dropped, live, stacks) = record.fill();
    let given_back = record.given_back().0;
    for (name, kind, help, value) in [
        ("memprof_record_live_objects", "gauge", "Sampled objects live now in the record of samples.", live as u64),
        ("memprof_record_stacks", "gauge", "Distinct stacks sampled since start-up, in the record.", stacks as u64),
        (
            "memprof_record_dropped_objects_total",
            "counter",
            "Samples of objects the record had no room for (their stacks' allocations still count).",
            dropped.objects,
        ),
        (
            "memprof_record_dropped_stacks_total",
            "counter",
            "Samples whose stack the record had no room for.",
            dropped.stacks,
        ),
        (
            "memprof_record_stacks_given_back_total",
            "counter",
            "Stacks the nearly full record gave back for new ones (idle, holding nothing).",
            given_back,
        ),
    ] {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
    }
    let now = crate::leak_naming::Growing::Now;
    let Some(growing) = crate::leak_naming::grown_in_the_record(record, GROWING_NAMED, now)? else { return Ok(()) };
    let name = "memprof_growing_bytes";
    let _ = write!(
        text,
        "# HELP {name} How much the stacks that grew steadily over the record's history (the last hour, or on demand the run's time) and still grow now grew, by the program's function that allocated them (see /memory-profiler/explain); a function whose stacks stop growing leaves the gauge within about a minute.\n# TYPE {name} gauge\n"
    );
    for stack in &growing.stacks {
        let _ = writeln!(text, "{name}{{function=\"{}\"}} {}", label_value(&stack.function), stack.bytes.round());
    }
    let name = "memprof_growing_error_bytes";
    let _ = write!(
        text,
        "# HELP {name} The sampling error of memprof_growing_bytes for the same function: two standard errors (the true growth is within it of the gauge about 95 times in 100).\n# TYPE {name} gauge\n"
    );
    for stack in &growing.stacks {
        let error = stack.error_bytes.unwrap_or_default().round();
        let _ = writeln!(text, "{name}{{function=\"{}\"}} {error}", label_value(&stack.function));
    }
    Ok(())
}

/// `value` escaped as Prometheus's text format wants a label value: backslash, quote and newline.
fn label_value(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
