//! `download/*?id=`: the profiles of finished runs.

use std::fs::File;

use super::query::Query;
use super::reply::{HttpError, Reply};
use super::routes::PREFIX;
use crate::profiler::{FinishedRun, Profiler};
use crate::rendered;
use memprof_analysis::{Format, RenderOptions};

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

/// `download/text`: jeprof's `--text` table, symbolized here.
pub(super) fn text(query: &Query) -> Result<Reply, HttpError> {
    rendered(query, Format::Text)
}

/// `download/graph`: the SVG call graph.
pub(super) fn graph(query: &Query) -> Result<Reply, HttpError> {
    rendered(query, Format::Graph)
}

/// `download/flamegraph`: the interactive SVG flame graph.
pub(super) fn flame_graph(query: &Query) -> Result<Reply, HttpError> {
    rendered(query, Format::FlameGraph)
}

/// `download/collapsed`: folded stacks.
pub(super) fn collapsed(query: &Query) -> Result<Reply, HttpError> {
    rendered(query, Format::Collapsed)
}

/// `download/pprof`: gzip-compressed `profile.proto`.
pub(super) fn pprof(query: &Query) -> Result<Reply, HttpError> {
    rendered(query, Format::Pprof)
}

/// A run's profile (`id`, else the latest) in `format`; `base=<id>` for the difference from an earlier run,
/// `lines=true` for source lines instead of functions.
fn rendered(query: &Query, format: Format) -> Result<Reply, HttpError> {
    let run = requested_run(query)?;
    let base = query.parse_id("base")?.map(|base| kept_run(base, "base")).transpose()?;
    let options = RenderOptions { lines: query.flag("lines")?, ..RenderOptions::default() };
    let kept = Profiler::global().runs().kept_ids();
    let bytes = rendered::rendered(&run, base.as_ref(), format, &options, &kept).map_err(|failure| match failure {
        rendered::Failure::Busy => busy(),
        rendered::Failure::Failed(message) => HttpError::internal(message),
    })?;
    let name = match &base {
        Some(base) => format!("memprof.{}-minus-{}.{}", run.id, base.id, format.extension()),
        None => format!("memprof.{}.{}", run.id, format.extension()),
    };
    Ok(Reply::rendered(format.content_type(), bytes, name, format == Format::Pprof))
}

/// 503: other renders take the capacity; the client retries.
pub(super) fn busy() -> HttpError {
    HttpError::busy(format!("{} other profiles are being rendered; try again in a second", rendered::MAX_RENDERS), 1)
}

/// The run named by `id`, else the latest one; a clear error when there is none to serve.
fn requested_run(query: &Query) -> Result<FinishedRun, HttpError> {
    let requested = query.parse_id("id")?;
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
    drop(runs);
    kept_run(id, "id")
}

/// The kept run `id` (named by the parameter `parameter`); 409 while it runs, 404 listing the kept ids.
fn kept_run(id: u64, parameter: &str) -> Result<FinishedRun, HttpError> {
    let runs = Profiler::global().runs();
    if let Some(run) = runs.find(id) {
        return Ok(run.clone());
    }
    if runs.current.as_ref().is_some_and(|run| run.id == id) {
        return Err(HttpError::conflict(format!("Run {id} is still active; stop it first or wait for it to end")));
    }
    if let Some(failure) = runs.last_failure.as_ref().filter(|failure| failure.id == id) {
        return Err(HttpError::not_found(failure.error.clone()));
    }
    let kept: Vec<String> = runs.kept_ids().iter().map(u64::to_string).collect();
    let available = match kept.as_slice() {
        [] => "none has been generated yet".to_owned(),
        ids => format!("the profiles kept are {}", ids.join(", ")),
    };
    Err(HttpError::not_found(format!("No heap profile with {parameter} {id}; {available}")))
}
