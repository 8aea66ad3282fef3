//! `download/*?id=`: the profiles of finished runs.

use std::fs::File;

use super::query::Query;
use super::reply::{HttpError, Reply};
use super::routes::PREFIX;
use crate::profiler::{FinishedRun, Profiler};

/// `download/raw`: jemalloc's heap profile file, as it dumped it.
pub(super) fn raw(query: &Query) -> Result<Reply, HttpError> {
    let run = requested_run(query)?;
    let file = File::open(&run.path).map_err(|error| {
        HttpError::internal(format!(
            "Cannot read the profile of run {} at {} ({error}); start a new run",
            run.id,
            run.path.display()
        ))
    })?;
    Ok(Reply::download(file, format!("memprof.{}.heap", run.id)))
}

/// `download/text`: not built yet; says how to get the same result today.
pub(super) fn text(query: &Query) -> Result<Reply, HttpError> {
    not_built_yet(query, "--text")
}

/// `download/graph`: not built yet; says how to get the same result today.
pub(super) fn graph(query: &Query) -> Result<Reply, HttpError> {
    not_built_yet(query, "--svg")
}

fn not_built_yet(query: &Query, jeprof_option: &str) -> Result<Reply, HttpError> {
    let run = requested_run(query)?;
    Err(HttpError::not_implemented(format!(
        "This memprof version cannot symbolize profiles yet; download {PREFIX}/download/raw?id={} and run `jeprof {jeprof_option} <binary> <profile>`",
        run.id
    )))
}

/// The run named by `id`, else the latest one; a clear error when there is none to serve.
fn requested_run(query: &Query) -> Result<FinishedRun, HttpError> {
    let requested = query.run_id()?;
    let runs = Profiler::global().runs();
    let active = runs.current.as_ref();
    let Some(id) = requested else {
        if let Some(active) = active {
            return Err(HttpError::conflict(format!(
                "Heap profiling run {} is active; pass an 'id' explicitly to download an earlier profile, or stop the run first",
                active.id
            )));
        }
        return runs.latest().cloned().ok_or_else(|| {
            HttpError::not_found(format!(
                "No heap profile has been generated yet; start a run with {PREFIX}/start?duration=30secs"
            ))
        });
    };
    if let Some(run) = runs.find(id) {
        return Ok(run.clone());
    }
    if active.is_some_and(|run| run.id == id) {
        return Err(HttpError::conflict(format!("Run {id} is still active; stop it first or wait for it to end")));
    }
    if let Some(failure) = runs.last_failure.as_ref().filter(|failure| failure.id == id) {
        return Err(HttpError::not_found(failure.error.clone()));
    }
    let kept: Vec<String> = runs.finished.iter().map(|run| run.id.to_string()).collect();
    let available = match kept.as_slice() {
        [] => "none has been generated yet".to_owned(),
        ids => format!("the profiles kept are {}", ids.join(", ")),
    };
    Err(HttpError::not_found(format!("No heap profile with id {id}; {available}")))
}
