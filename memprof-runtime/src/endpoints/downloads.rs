//! `download/*?id=`: the kept profiles, raw or rendered.

use memprof_analysis::{Analysis, Format, RenderOptions};

use memprof_wire::paths::PREFIX;

use super::context::Context;
use super::render_cache;
use crate::http::{HttpError, Query, Reply};
use crate::profile_root::files::Beside;
use crate::profiler::{KeptProfile, LookupError};

/// `download/raw`: jemalloc's heap profile file, as it dumped it.
pub(super) fn raw(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    send_raw(context, requested(context, query, "id")?)
}

/// `download/labels`: the label table that resolves the label frames of a kept profile (`id`, else the
/// latest), to keep beside its raw download for `memprof analyze`.
pub(super) fn labels(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    let profile = requested(context, query, "id")?;
    let table = crate::labels::table_for(&profile.path).to_text();
    Ok(Reply::bytes("text/plain; charset=utf-8", table.into_bytes()))
}

/// `labels`: a kept profile's live bytes by label, for the dashboard and scripts.
pub(super) fn label_bytes(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    let profile = requested(context, query, "id")?;
    symbolized_here(context, &profile)?;
    let analysis = render_cache::analysed(&profile).map_err(|failure| failed(context, &profile, failure))?;
    let (_, total_bytes) = analysis.total();
    Ok(Reply::json(&memprof_wire::LabelBytes { id: profile.id, total_bytes, keys: analysis.bytes_by_label() }))
}

/// `pprof/heap`, what `jeprof http://host/memory-profiler/pprof/heap` fetches: the newest profile, during a
/// run too (there is no id to pass).
pub(super) fn newest_raw(context: &Context, _: &Query) -> Result<Reply, HttpError> {
    send_raw(context, context.profiler.newest().map_err(|error| refusal(error, "id"))?)
}

fn send_raw(context: &Context, profile: KeptProfile) -> Result<Reply, HttpError> {
    let file =
        crate::profile_root::untrusted::open_profile(&profile.path, context.profiler.settings().retention.max_bytes)
            .map_err(|error| unreadable(context, &profile, &error))?;
    Ok(Reply::download(file, format!("memprof.{}.heap", profile.id)))
}

/// `download/text`: jeprof's `--text` table, symbolized here.
pub(super) fn text(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    rendered(context, query, Format::Text)
}

/// `download/graph`: the SVG call graph.
pub(super) fn graph(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    rendered(context, query, Format::Graph)
}

/// `download/flamegraph`: the interactive SVG flame graph.
pub(super) fn flame_graph(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    rendered(context, query, Format::FlameGraph)
}

/// `download/collapsed`: folded stacks.
pub(super) fn collapsed(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    rendered(context, query, Format::Collapsed)
}

/// `download/pprof`: gzip-compressed `profile.proto`.
pub(super) fn pprof(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    rendered(context, query, Format::Pprof)
}

/// `download/otlp`: OpenTelemetry's profiles, an OTLP `ExportProfilesServiceRequest` to `POST` to a
/// Collector's `/v1development/profiles`: the resource says which process, the profiles the run's time.
pub(super) fn otlp(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    rendered(context, query, Format::Otlp)
}

/// What an OTLP download says of where it comes from: this service and process (OpenTelemetry's resource
/// conventions, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` as a push says them), and the profile's time.
fn otlp_resource(context: &Context, profile: &KeptProfile) -> memprof_analysis::OtlpResource {
    let service = context.profiler.settings().service.iter().cloned();
    let attributes = service.chain(crate::process::resource::process_attributes()).collect();
    crate::process::resource::otlp_resource(
        attributes,
        crate::sampler::throttle::sampling_attributes(),
        profile.started,
        profile.stopped,
    )
}

/// A profile (`id`, else the latest) in `format`; `base=<id>` for the difference from an earlier one,
/// `net=true` for a window's net growth, `view=allocated` for what a window allocated (freed or not),
/// `view=peak` for what it held at its highest,
/// `lines=true` for source lines instead of functions, `full=true` for the frames below the user's code too
/// (pprof always has them), `by=KEY` to split by a label, `label=KEY:VALUE` to keep only its samples.
fn rendered(context: &Context, query: &Query, format: Format) -> Result<Reply, HttpError> {
    let profile = requested(context, query, "id")?;
    let base = match query.parse_id("base")? {
        Some(base) => Some(context.profiler.profile(Some(base)).map_err(|error| refusal(error, "base"))?),
        None => None,
    };
    for profile in std::iter::once(&profile).chain(&base) {
        symbolized_here(context, profile)?;
    }
    fn invalid(name: &'static str) -> impl Fn(memprof_wire::InvalidLabel) -> HttpError {
        move |error| HttpError::bad_request(format!("Invalid parameter '{name}': {error}"))
    }
    let options = RenderOptions {
        lines: query.flag("lines")?,
        full: query.flag("full")?,
        by: query
            .get("by")
            .map(|key| memprof_wire::label_key(key).map(str::to_owned))
            .transpose()
            .map_err(invalid("by"))?,
        label: query.get("label").map(memprof_wire::label_filter).transpose().map_err(invalid("label"))?,
        resource: if format == Format::Otlp { otlp_resource(context, &profile) } else { Default::default() },
        ..RenderOptions::default()
    };
    let view = match query.get("view") {
        None | Some("live") => None,
        Some("allocated") => Some(("allocated", "record of allocations", Beside::Allocated)),
        Some("peak") => Some(("peak", "high-water mark", Beside::Peak)),
        Some(other) => {
            return Err(HttpError::bad_request(format!(
                "Invalid parameter 'view': '{}' is not live, allocated or peak",
                crate::profile_root::untrusted::printable(other)
            )));
        }
    };
    let net = query.flag("net")?;
    if net || view.is_some() {
        if base.is_some() || (net && view.is_some()) {
            return Err(HttpError::bad_request("Pass one of 'net', 'view' and 'base', not two"));
        }
        let _permit = super::jobs::Permit::or_busy()?;
        let (view, kept) = match view {
            None => {
                let (grown, shrunk) = (Beside::Grown.of(&profile.path), Beside::Shrunk.of(&profile.path));
                (
                    "net",
                    kept_beside(context, &profile, &grown, "net growth")?.minus(&kept_beside(
                        context,
                        &profile,
                        &shrunk,
                        "net growth",
                    )?),
                )
            }
            Some((view, what, side)) => {
                let mut kept = kept_beside(context, &profile, &side.of(&profile.path), what)?;
                if view == "allocated" {
                    kept.measure = memprof_analysis::Measure::Allocated;
                }
                (view, kept)
            }
        };
        let bytes = format.render(&kept, None, &options).map_err(|error| HttpError::internal(error.to_string()))?;
        let name = format!("memprof.{}-{view}.{}", profile.id, format.extension());
        return Ok(Reply::rendered(format.content_type(), bytes.into(), name, format.is_binary()));
    }
    let bytes = render_cache::rendered(&profile, base.as_ref(), format, &options)
        .map_err(|failure| failed(context, &profile, failure))?;
    let name = match &base {
        Some(base) => format!("memprof.{}-minus-{}.{}", profile.id, base.id, format.extension()),
        None => format!("memprof.{}.{}", profile.id, format.extension()),
    };
    Ok(Reply::rendered(format.content_type(), bytes, name, format.is_binary()))
}

/// A view of a window of continuous sampling kept beside its profile at `path` (`net=true`: what every
/// stack held at its end minus at its start; `view=allocated`: what it allocated, freed or not; `view=peak`: what it held at its highest),
/// symbolized each time it is asked for (an expensive job: the caller holds a permit).
fn kept_beside(
    context: &Context,
    profile: &KeptProfile,
    path: &std::path::Path,
    what: &str,
) -> Result<Analysis, HttpError> {
    let text = render_cache::read_profile(path, context.profiler.settings().retention.max_bytes).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => HttpError::not_found(format!(
            "Profile {} has no {what}: runs and windows keep one beside their profile, automatic dumps and profiles kept in memory do not",
            profile.id
        )),
        _ => HttpError::internal(format!("Cannot read the {what} of profile {} ({error})", profile.id)),
    })?;
    render_cache::kept_dump(&text, &profile.path, path)
        .map_err(|error| HttpError::internal(format!("The {what} of profile {} is malformed: {error}", profile.id)))
}

/// The answer to a render or analysis that failed.
fn failed(context: &Context, profile: &KeptProfile, failure: render_cache::Failure) -> HttpError {
    match failure {
        render_cache::Failure::Busy => super::jobs::busy(),
        render_cache::Failure::Gone(error) => unreadable(context, profile, &error),
        render_cache::Failure::Failed(message) => HttpError::internal(message),
    }
}

/// Refuses to symbolize a profile another build of this program wrote (an earlier process's, before an
/// upgrade): this binary's symbols would name the wrong functions. Its raw download is served.
fn symbolized_here(context: &Context, profile: &KeptProfile) -> Result<(), HttpError> {
    let Some(earlier) = context.profiler.earlier_profile(profile.id).filter(|earlier| !earlier.same_build) else {
        return Ok(());
    };
    let binary = earlier.binary.as_deref().unwrap_or("the program it ran");
    Err(HttpError::conflict(format!(
        "Profile {} was written by another build of this program ({binary}), whose functions this build cannot name; download it raw ({PREFIX}/download/raw?id={}) and run `memprof analyze --binary <that build of {binary}> memprof.{}.heap`",
        profile.id, profile.id, profile.id
    )))
}

/// A profile file that cannot be read: 404 when memprof deleted it meanwhile (newer profiles pushed it out
/// while the request was answered), else 500 (something else removed or damaged it).
fn unreadable(context: &Context, profile: &KeptProfile, error: &std::io::Error) -> HttpError {
    let still_kept = context.profiler.profile(Some(profile.id)).is_ok();
    if error.kind() == std::io::ErrorKind::NotFound && !still_kept {
        return HttpError::not_found(format!(
            "The profile of run {} was deleted meanwhile: newer profiles pushed it out; see {PREFIX}/state for the kept ones",
            profile.id
        ));
    }
    HttpError::internal(format!(
        "Cannot read the profile of run {} at {} ({error}); start a new run",
        profile.id,
        profile.path.display()
    ))
}

/// The profile named by the parameter `parameter` (`id`), else the latest one.
fn requested(context: &Context, query: &Query, parameter: &str) -> Result<KeptProfile, HttpError> {
    context.profiler.profile(query.parse_id(parameter)?).map_err(|error| refusal(error, parameter))
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
