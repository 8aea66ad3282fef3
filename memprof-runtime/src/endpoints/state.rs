//! `state` and `statistics`: what the profiler and jemalloc are doing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memprof_wire::{
    AutomaticDumpSettings, AutomaticDumps, CurrentRun, Failure, JemallocState, LabelCounts, MallocConfSources,
    ProfilerState, SampleRecord, Sampling, SamplingBudget, StackWalk, State,
};
use parking_lot::Mutex;

use super::context::Context;
use super::to_wire::{describe_earlier, describe_run};
use crate::http::{HttpError, Query, Reply};
use crate::jemalloc;

/// `state`: Mesos's object, plus the kept runs, the sampling rate, warnings and heap counters.
pub(super) fn state(context: &Context, _: &Query) -> Result<Reply, HttpError> {
    let profiler = context.profiler;
    let config = profiler.sampler().config();
    // jemalloc's figures are read with no lock held (a stats epoch walks every arena), and the runs'
    // records are a copy: a run's start or stop never waits for this answer.
    let active = crate::sampler::throttle::sampling_on().unwrap_or(false);
    let lg_sample = jemalloc::lg_sample().ok();
    let heap = jemalloc::heap_stats().ok();
    let label_counts = crate::labels::counts();
    let runs = profiler.overview();
    let current_run = match &runs.current {
        Some(run) => CurrentRun::Active {
            id: run.id,
            remaining_seconds: run.remaining_seconds(),
            started_by: run.owner.name(),
            samples: profiler.samples_since_start(run.id),
        },
        None => CurrentRun::Idle { id: () },
    };
    let tmp_dir = match &runs.directory {
        Some(path) => path.display().to_string(),
        None if runs.in_memory => "In memory (no writable directory)".to_owned(),
        None => "Not yet generated".to_owned(),
    };
    let settings = crate::profiler::autodump::in_force().map(|(triggers, retention)| AutomaticDumpSettings {
        every_bytes: triggers.every,
        high_water_step: triggers.high_water_step,
        resident_share: triggers.resident_share,
        keep: retention.keep,
        max_bytes: retention.max_bytes,
    });
    Ok(Reply::json(&State {
        memory_profiler: ProfilerState {
            jemalloc_detected: true,
            tmp_dir,
            current_run,
            open_windows: runs
                .windows
                .iter()
                .map(|window| memprof_wire::RunOwner { id: window.id, started_by: window.owner.name() })
                .collect(),
            latest_run: runs.latest().map(describe_run),
            runs: runs.finished.iter().rev().map(describe_run).collect(),
            keep_runs: runs.kept,
            auth_required: context.token.is_some(),
            automatic_dumps: AutomaticDumps {
                settings,
                dumps: runs.automatic.iter().rev().map(describe_run).collect(),
            },
            last_failure: runs
                .last_failure
                .as_ref()
                .map(|failure| Failure { id: failure.id, error: failure.error.to_string() }),
            started_externally: active && runs.current.is_none() && profiler.sampler().record().is_none(),
            lg_prof_sample: lg_sample,
            stack_walk: StackWalk {
                method: profiler.sampler().unwinder().name().to_owned(),
                why: profiler.sampler().unwinder().why().map(str::to_owned),
                completed_by_unwinder: crate::stack_walk::completed_walks(),
            },
            sampling: sampling(profiler),
            sample_period_bytes: lg_sample.map(|lg| 1u64 << lg),
            otlp_push: crate::otlp_push::report(),
            warnings: warnings(config, profiler.sampler().record(), active)
                .into_iter()
                .chain(runs.warnings())
                .collect(),
            messages: crate::process::messages::said(),
            earlier_processes: runs.earlier.iter().map(describe_earlier).collect(),
            labels: LabelCounts {
                sets: label_counts.0,
                max_sets: crate::labels::MAX_LABEL_SETS,
                overflowed: label_counts.1,
            },
            heap,
        },
        jemalloc: JemallocState {
            malloc_conf: MallocConfSources {
                environment: config.environment.clone(),
                build_options: config.built_in.clone(),
                exported: config.exported.clone(),
            },
            profiling_enabled: config.profiling_enabled,
            profiling_active: active,
        },
    }))
}

/// How sampling runs, and how full the record is.
fn sampling(profiler: &crate::profiler::Profiler) -> Sampling {
    let choice = profiler.sampler().sampling();
    let record = profiler.sampler().record().map(|record| {
        let (dropped, live, stacks) = record.fill();
        let capacity = record.capacity();
        let given_back = record.given_back();
        SampleRecord {
            capacity_bytes: capacity.bytes(),
            live_objects: live as u64,
            max_objects: record.max_objects() as u64,
            stacks: stacks as u64,
            max_stacks: capacity.stacks as u64,
            dropped_objects: dropped.objects,
            dropped_stacks: dropped.stacks,
            stacks_given_back: given_back.0,
        }
    });
    let (paused, paused_for) = crate::process::threads::sampling_paused();
    Sampling {
        mode: choice.mode.name().to_owned(),
        because: choice.because,
        record,
        paused_for_threads: paused,
        paused_for_threads_us: paused_for.as_micros() as u64,
        budget: crate::sampler::throttle::report().map(|report| {
            let lg_sample = jemalloc::lg_sample().unwrap_or_default();
            SamplingBudget {
                share_ppm: (report.budget.share() * 1e6).round() as u32,
                thinned_by: report.now.factor(),
                interval_bytes: (1u64 << lg_sample) * u64::from(report.now.factor()),
                most_thinned_by: report.most.factor(),
                thinned_ms: report.thinned.as_millis() as u64,
                sample_work_ns: report.sample_work.map(|work| work.as_nanos() as u64),
            }
        }),
    }
}

/// The configuration's warnings, what the decay settings in force cost, when that is worth saying, what
/// the record of samples could not hold, and why labels from `tracing` are silent while allocations are
/// `sampled`.
fn warnings(
    config: &crate::jemalloc::malloc_conf::ConfigReport,
    record: Option<&crate::sampler::record::table::Table>,
    sampled: bool,
) -> Vec<String> {
    let decay = jemalloc::decay_settings().ok();
    let losses = record.and_then(crate::sampler::record::losses);
    let labels = crate::labels::silence(sampled);
    let said = config.warnings.iter().cloned().chain(decay.as_ref().and_then(crate::memory::decay_cost));
    said.chain(losses).chain(labels).collect()
}

/// `statistics`: jemalloc's `malloc_stats_print` in JSON, verbatim; `format=text` for its human-readable
/// report, as Traffic Server prints it.
pub(super) fn statistics(_: &Context, query: &Query) -> Result<Reply, HttpError> {
    let json = match query.get("format") {
        None | Some("json") => true,
        Some("text") => false,
        Some(other) => {
            return Err(HttpError::bad_request(format!(
                "Invalid parameter 'format': '{other}'; expected 'json' or 'text'"
            )));
        }
    };
    let content_type = if json { "application/json; charset=utf-8" } else { "text/plain; charset=utf-8" };
    let report = recent_statistics(json)?;
    Ok(Reply::shared(content_type, report))
}

/// How long a statistics report is served again instead of printed anew: printing one takes tens of
/// milliseconds of CPU, and a dashboard or scraper asking often must not take it from the program.
const STATISTICS_REUSED_FOR: Duration = Duration::from_secs(1);

/// When a report was printed, and the report.
type Printed = (Instant, Arc<Vec<u8>>);

/// The last text and JSON reports ([`recent_statistics`]): with many arenas, megabytes.
static RECENT: Mutex<[Option<Printed>; 2]> = Mutex::new([None, None]);

/// Lets go of the last reports (the endpoints are idle: see `forget_caches`).
pub(super) fn forget_statistics() {
    *RECENT.lock() = [None, None];
}

/// The JSON (or text) report printed less than [`STATISTICS_REUSED_FOR`] ago, else a new one; requests that
/// arrive while one is printed wait for it. Printing is an expensive job ([`super::jobs`]).
fn recent_statistics(json: bool) -> Result<Arc<Vec<u8>>, HttpError> {
    let mut recent = RECENT.lock();
    let slot = &mut recent[usize::from(json)];
    if let Some((_, report)) = slot.as_ref().filter(|(printed, _)| printed.elapsed() < STATISTICS_REUSED_FOR) {
        return Ok(Arc::clone(report));
    }
    let _permit = super::jobs::Permit::or_busy()?;
    let report = jemalloc::statistics(json)
        .map_err(|error| HttpError::internal(format!("jemalloc could not print its statistics ({error})")))?;
    let report = Arc::new(report);
    *slot = Some((Instant::now(), Arc::clone(&report)));
    Ok(report)
}
