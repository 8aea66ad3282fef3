//! `start` and `stop`: the Mesos run life cycle.

use serde_json::{Value, json};

use super::query::Query;
use super::reply::{HttpError, Reply};
use super::routes::PREFIX;
use crate::duration;
use crate::profiler::{FinishedRun, Owner, Profiler, Started};
use memprof_analysis::Format;

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
    Ok(Reply::json(&json!({
        "id": run.id,
        "remaining_seconds": run.remaining_seconds(),
        "message": format!(
            "{message}. After the run ends, download its profile from {PREFIX}/download/raw?id={}.",
            run.id
        ),
    })))
}

/// `stop`: ends the active run and says where its profile is; with no run, a no-op that says so.
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
    let mut answer = json!({ "id": run.as_ref().map(|run| run.id), "message": message });
    if let (Some(run), Value::Object(fields)) = (&run, &mut answer) {
        fields.extend(profile_urls(run.id));
    }
    Ok(Reply::json(&answer))
}

/// Where run `id`'s profile can be downloaded: under Mesos's keys, and in every format under `downloads`.
pub(super) fn profile_urls(id: u64) -> serde_json::Map<String, Value> {
    let url = |format: &str| json!(format!("{PREFIX}/download/{format}?id={id}"));
    let mut urls: serde_json::Map<String, Value> =
        [("url_raw_profile", "raw"), ("url_graph_profile", "graph"), ("url_symbolized_profile", "text")]
            .into_iter()
            .map(|(key, format)| (key.to_owned(), url(format)))
            .collect();
    let downloads = std::iter::once("raw").chain(Format::ALL.iter().map(|format| format.name()));
    urls.insert("downloads".to_owned(), downloads.map(|format| (format.to_owned(), url(format))).collect());
    urls
}

/// A finished run as `state` lists it.
pub(super) fn describe_run(run: &FinishedRun) -> Value {
    let mut fields = serde_json::Map::new();
    fields.insert("id".to_owned(), json!(run.id));
    fields.insert("started_by".to_owned(), owner_json(&run.owner));
    fields.insert("started".to_owned(), json!(unix_seconds(run.started)));
    fields.insert("stopped".to_owned(), json!(unix_seconds(run.stopped)));
    fields.insert("path".to_owned(), json!(run.path.display().to_string()));
    fields.extend(profile_urls(run.id));
    Value::Object(fields)
}

/// `"http"` for runs started by `/start`, else the label the code gave.
pub(super) fn owner_json(owner: &Owner) -> Value {
    match owner {
        Owner::Http => json!("http"),
        Owner::Code(label) => json!(format!("code: {label}")),
        Owner::Manual => json!("manual"),
        Owner::Automatic(reason) => json!(format!("automatic: {reason}")),
    }
}

fn unix_seconds(time: std::time::SystemTime) -> f64 {
    time.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}
