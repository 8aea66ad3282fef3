//! Go's `/debug/pprof/heap` and `/debug/pprof/allocs`: the live heap as a gzip-compressed, symbolized
//! pprof profile, so Parca, Pyroscope and Grafana Alloy scrape a memprof service as they scrape a Go one.
//! `?seconds=N` answers the change over the next N seconds (Parca's `delta` profiles); `gc` (Go's
//! "collect garbage first") is accepted and has nothing to do here.
//!
//! `allocs` adds what was allocated since start-up, freed or not (`alloc_objects`, `alloc_space`, its
//! default): with continuous sampling the record keeps it per stack, bounded, and it only grows, as the
//! scrapers' delta rule needs; on demand jemalloc keeps it only with `MALLOC_CONF=prof_accum:true` (every
//! allocation stack is then kept for the program's life, so it is the operator's choice). Without either,
//! `allocs` answers the in-use profile, as Go's two endpoints differ only in their default sample type,
//! with a pprof comment saying so: it is the path Parca and Grafana Alloy scrape by default, and an error
//! there would be a gap in a fleet.
//!
//! Only allocations made while sampling was on are in the heap profile: sample continuously for
//! continuous profiling (`sampling = "continuous"`, `MEMPROF_SAMPLING=continuous`).

use std::time::{Duration, Instant};

use super::context::Context;
use super::jobs::Permit;
use crate::http::{HttpError, Query, Reply, Request};
use memprof_analysis::{Analysis, Format, RenderOptions};

/// The comment of a profile served while sampling is off.
const SAMPLING_OFF: &str = "memprof: sampling is off (prof.active false), so this profile holds no samples; for \
continuous profiling sample continuously: start with MEMPROF_SAMPLING=continuous (or the attribute's sampling = \"continuous\")";

/// The longest `seconds` a scrape may ask for.
const MAX_SECONDS: u64 = 60;

/// `/debug/pprof/heap`.
pub(super) fn heap(context: &Context, query: &Query, request: &Request) -> Result<Reply, HttpError> {
    heap_profile(context, query, request, false)
}

/// `/debug/pprof/allocs`.
pub(super) fn allocs(context: &Context, query: &Query, request: &Request) -> Result<Reply, HttpError> {
    heap_profile(context, query, request, true)
}

/// The heap as Go's scrapers read it, `alloc_space` first for `allocs`; the growth over `?seconds=N`.
fn heap_profile(
    context: &Context,
    query: &Query,
    request: &Request,
    allocations_first: bool,
) -> Result<Reply, HttpError> {
    let seconds = query
        .get("seconds")
        .map(|text| {
            text.parse::<u64>().ok().filter(|seconds| (1..=MAX_SECONDS).contains(seconds)).ok_or_else(|| {
                HttpError::bad_request(format!(
                    "Invalid parameter 'seconds': '{text}'; expected a whole number from 1 to {MAX_SECONDS}"
                ))
            })
        })
        .transpose()?;
    // With sampling off the profile holds no samples: a scraper storing it all day should be told why.
    let off = (!crate::sampler::throttle::sampling_on().unwrap_or(false)).then(|| SAMPLING_OFF.to_owned());
    // The estimates said are of the heap the profile was made from (the reading of its last snapshot, taken
    // `since` then); a delta's, of the heap at its end. Without the record (on demand), of jemalloc's dump,
    // sampled at one interval: the profile's error, from its samples.
    let options = |context: &Context, since: Instant, profile: &Analysis| {
        let record = context.profiler.sampler().record();
        let cautions = record.into_iter().flat_map(crate::sampler::record::cautions);
        let written = crate::sampler::record::heap_written_since(since);
        let estimates = match (record, seconds) {
            (Some(record), None) => Some(crate::sampler::record::estimate_note(record, written)),
            (Some(record), Some(seconds)) => Some(format!(
                "{}; of the whole heap as the {seconds} s ended: the profile is what changed over them",
                crate::sampler::record::estimate_note(record, written)
            )),
            (None, _) => profile.sampling_note(),
        };
        let comments = off
            .clone()
            .into_iter()
            .chain(cautions.chain(estimates).map(|caution| format!("memprof: {caution}")))
            .collect();
        RenderOptions { allocations_first, comments, ..RenderOptions::default() }
    };
    let bytes = match seconds {
        None => {
            let _permit = Permit::or_busy()?;
            let since = Instant::now();
            let now = super::heap_now::symbolized(context)?;
            render(&now, &options(context, since, &now))?
        }
        Some(seconds) => {
            // The first snapshot is kept through the wait, small beside its symbolizing; the wait holds no
            // permit and no busy place, and ends when the client leaves.
            let before = {
                let _permit = Permit::or_busy()?;
                super::heap_now::symbolized(context)?
            };
            request.wait(Duration::from_secs(seconds))?;
            let _permit = Permit::or_busy()?;
            let since = Instant::now();
            let grown = super::heap_now::symbolized(context)?.minus(&before);
            render(&grown, &options(context, since, &grown))?
        }
    };
    Ok(Reply::rendered(Format::Pprof.content_type(), bytes.into(), "profile.pb.gz".to_owned(), true))
}

fn render(profile: &Analysis, options: &RenderOptions) -> Result<Vec<u8>, HttpError> {
    Format::Pprof.render(profile, None, options).map_err(|error| HttpError::internal(error.to_string()))
}
