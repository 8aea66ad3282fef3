//! `download/*?id=`: the kept profiles, raw or rendered.

use std::fs::File;

use memprof_analysis::{Format, RenderOptions};

use super::query::Query;
use super::reply::{HttpError, Reply};
use super::routes::PREFIX;
use crate::profiler::{KeptProfile, LookupError, Profiler};
use crate::rendered;

/// `download/raw`: jemalloc's heap profile file, as it dumped it.
pub(super) fn raw(query: &Query) -> Result<Reply, HttpError> {
    let profile = requested(query, "id")?;
    let file = File::open(&profile.path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => gone(profile.id),
        _ => HttpError::internal(format!(
            "Cannot read the profile of run {} at {} ({error}); start a new run",
            profile.id,
            profile.path.display()
        )),
    })?;
    Ok(Reply::download(file, format!("memprof.{}.heap", profile.id)))
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

/// A profile (`id`, else the latest) in `format`; `base=<id>` for the difference from an earlier one,
/// `lines=true` for source lines instead of functions.
fn rendered(query: &Query, format: Format) -> Result<Reply, HttpError> {
    let profile = requested(query, "id")?;
    let base = match query.parse_id("base")? {
        Some(base) => Some(Profiler::global().profile(Some(base)).map_err(|error| refusal(error, "base"))?),
        None => None,
    };
    let options = RenderOptions { lines: query.flag("lines")?, ..RenderOptions::default() };
    let bytes = rendered::rendered(&profile, base.as_ref(), format, &options).map_err(|failure| match failure {
        rendered::Failure::Busy => busy(),
        rendered::Failure::Gone(id) => gone(id),
        rendered::Failure::Failed(message) => HttpError::internal(message),
    })?;
    let name = match &base {
        Some(base) => format!("memprof.{}-minus-{}.{}", profile.id, base.id, format.extension()),
        None => format!("memprof.{}.{}", profile.id, format.extension()),
    };
    Ok(Reply::rendered(format.content_type(), bytes, name, format == Format::Pprof))
}

/// 503: other renders take the capacity; the client retries.
pub(super) fn busy() -> HttpError {
    HttpError::busy(format!("{} other profiles are being rendered; try again in a second", rendered::MAX_RENDERS), 1)
}

/// 404: the profile was deleted while the request was answered (newer ones pushed it out).
fn gone(id: u64) -> HttpError {
    HttpError::not_found(format!(
        "The profile of run {id} was deleted meanwhile: newer profiles pushed it out; see /memory-profiler/state for the kept ones"
    ))
}

/// The profile named by the parameter `parameter` (`id`), else the latest one.
fn requested(query: &Query, parameter: &str) -> Result<KeptProfile, HttpError> {
    Profiler::global().profile(query.parse_id(parameter)?).map_err(|error| refusal(error, parameter))
}

/// Why a profile named by `parameter` cannot be served: 409 while it runs, else 404 saying what is kept.
fn refusal(error: LookupError, parameter: &str) -> HttpError {
    match error {
        LookupError::RunActive(active) => HttpError::conflict(format!(
            "Heap profiling run {active} is active; pass an 'id' explicitly to download an earlier profile, or stop the run first"
        )),
        LookupError::StillActive(id) => {
            HttpError::conflict(format!("Run {id} is still active; stop it first or wait for it to end"))
        }
        LookupError::Failed(failure) => HttpError::not_found(failure.to_string()),
        LookupError::NoneYet => HttpError::not_found(format!(
            "No heap profile has been generated yet; start a run with {PREFIX}/start?duration=30secs"
        )),
        LookupError::NotKept { id, kept } => {
            let kept: Vec<String> = kept.iter().map(u64::to_string).collect();
            let available = match kept.as_slice() {
                [] => "none has been generated yet".to_owned(),
                ids => format!("the profiles kept are {}", ids.join(", ")),
            };
            HttpError::not_found(format!("No heap profile with {parameter} {id}; {available}"))
        }
    }
}
