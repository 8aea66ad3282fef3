//! `start` and `stop`: the Mesos run life cycle.

use super::context::Context;
use super::to_wire::profile_urls;
use crate::http::{HttpError, Query, Reply};
use crate::profiler::duration;
use crate::profiler::{Owner, Started};
use memprof_wire::{RunAnswer, Started as StartedAnswer};

/// `start?duration=5mins`: starts a run ended by a timer, or reports the active one.
pub(super) fn start(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    let length = match query.get("duration") {
        Some(text) => duration::parse_run_length(text).map_err(HttpError::bad_request)?,
        None => duration::DEFAULT_RUN,
    };
    let (run, message, already_active) = match context.profiler.start(Owner::Http, Some(length))? {
        Started::New(run) => (run, "Successfully started new heap profiling run", false),
        Started::AlreadyActive(run) => (run, "Heap profiling is already active", true),
    };
    let raw = memprof_wire::paths::download_of(run.id, "raw");
    Ok(Reply::json(&StartedAnswer {
        id: run.id,
        remaining_seconds: run.remaining_seconds(),
        message: format!("{message}. After the run ends, download its profile from {raw}."),
        already_active,
    }))
}

/// `stop`: ends the current run and says where its profile is; with no run, says so and names the latest.
pub(super) fn stop(context: &Context, _: &Query) -> Result<Reply, HttpError> {
    let profiler = context.profiler;
    let (run, message) = match profiler.stop(None)? {
        Some(run) => {
            let message = format!("Successfully stopped heap profiling run {}.", run.id);
            (Some(run), message)
        }
        None => {
            let latest = profiler.overview().latest().cloned();
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

/// `clear_earlier` (POST): deletes the profiles earlier processes left (see `state`'s
/// `earlier_processes`).
pub(super) fn clear_earlier(context: &Context, _: &Query) -> Result<Reply, HttpError> {
    let cleared = context.profiler.clear_earlier();
    Ok(Reply::json(&RunAnswer {
        active: None,
        id: None,
        message: format!("Deleted {cleared} profile{} of earlier processes", if cleared == 1 { "" } else { "s" }),
        urls: None,
    }))
}
