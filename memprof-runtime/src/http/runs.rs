//! `start` and `stop`: the Mesos run life cycle.

use super::query::Query;
use super::reply::{HttpError, Reply};
use crate::duration;
use crate::profiler::{KeptProfile, Owner, Profiler, Started};
use memprof_analysis::Format;
use memprof_wire::{ProfileUrls, RunAnswer, Started as StartedAnswer};

/// `start?duration=5mins`: starts a run ended by a timer, or reports the active one.
pub(super) fn start(query: &Query) -> Result<Reply, HttpError> {
    let length = match query.get("duration") {
        Some(text) => duration::parse_run_length(text).map_err(HttpError::bad_request)?,
        None => duration::DEFAULT_RUN,
    };
    let (run, message) = match Profiler::global().start(Owner::Http, Some(length))? {
        Started::New(run) => (run, "Successfully started new heap profiling run"),
        Started::AlreadyActive(run) => (run, "Heap profiling is already active"),
    };
    let raw = memprof_wire::paths::download_of(run.id, "raw");
    Ok(Reply::json(&StartedAnswer {
        id: run.id,
        remaining_seconds: run.remaining_seconds(),
        message: format!("{message}. After the run ends, download its profile from {raw}."),
    }))
}

/// `stop`: ends the current run and says where its profile is; with no run, says so and names the latest.
pub(super) fn stop(_: &Query) -> Result<Reply, HttpError> {
    let profiler = Profiler::global();
    let (run, message) = match profiler.stop(None)? {
        Some(run) => {
            let message = format!("Successfully stopped heap profiling run {}.", run.id);
            (Some(run), message)
        }
        None => {
            let latest = profiler.runs().latest().cloned();
            let message = match &latest {
                Some(run) => format!(
                    "No heap profiling run is active; nothing was stopped. The latest profile is run {}.",
                    run.id
                ),
                None => "No heap profiling run is active; nothing was stopped.".to_owned(),
            };
            (latest, message)
        }
    };
    let id = run.as_ref().map(|run| run.id);
    Ok(Reply::json(&RunAnswer { active: None, id, message, urls: id.map(profile_urls) }))
}

/// Where profile `id` is downloaded, in every format.
pub(super) fn profile_urls(id: u64) -> ProfileUrls {
    ProfileUrls::of(id, Format::ALL.iter().map(|format| format.name()))
}

/// A kept profile, as `state` lists it.
pub(super) fn describe_run(run: &KeptProfile) -> memprof_wire::KeptProfile {
    memprof_wire::KeptProfile {
        id: run.id,
        started_by: owner_name(&run.owner),
        started: unix_seconds(run.started),
        stopped: unix_seconds(run.stopped),
        path: run.path.display().to_string(),
        urls: profile_urls(run.id),
    }
}

/// Who started a run, as the endpoints say it.
pub(super) fn owner_name(owner: &Owner) -> String {
    match owner {
        Owner::Http => "http".to_owned(),
        Owner::Code(label) => format!("code: {label}"),
        Owner::Manual => "manual".to_owned(),
        Owner::Automatic(reason) => format!("automatic: {reason}"),
    }
}

fn unix_seconds(time: std::time::SystemTime) -> f64 {
    time.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}
