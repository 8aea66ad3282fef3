//! `/memory-profiler/`: one self-contained HTML page (no CDN, no build step; it works on an air-gapped host)
//! that charts memory, drives runs and shows flame graphs, all through the other endpoints; and
//! `/memory-profiler/memory`, the readings its chart draws.

use super::context::Context;
use crate::http::{HttpError, Query, Reply};
use crate::memory::history;

/// The page, compiled into the runtime.
const PAGE: &str = include_str!("dashboard.html");

/// `/memory-profiler/`: the dashboard. It holds no data, so it needs no token; it asks for one when the
/// endpoints it calls answer 401.
pub(super) fn page(_: &Context, _: &Query) -> Result<Reply, HttpError> {
    Ok(Reply::bytes("text/html; charset=utf-8", PAGE.as_bytes().to_vec()).with_headers(PAGE_HEADERS))
}

/// The page is never framed (clickjacking its buttons), its type is not guessed, and it loads nothing but
/// its own inline script and style, the endpoints' answers, and the flame graphs and call graphs it shows
/// from `blob:` URLs (whose documents inherit this policy: their inline scripts are the renderers' own).
const PAGE_HEADERS: &[(&str, &str)] = &[
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data: blob:; frame-src blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
];

/// `/memory-profiler/memory?since=T`: jemalloc's counters read once a second over the last ten minutes,
/// oldest first; with `since`, only the readings after time `T` (Unix milliseconds, as each reading's `time`).
pub(super) fn memory(_: &Context, query: &Query) -> Result<Reply, HttpError> {
    // The chart shows the resident set by class: read it with the counters while the chart is watched.
    crate::profiler::counters::want_classes();
    let since = match query.get("since") {
        None => 0,
        Some(text) => text.parse().map_err(|_| {
            HttpError::bad_request(format!(
                "Invalid parameter 'since': '{text}' is not a time; give the 'time' of the newest reading you have"
            ))
        })?,
    };
    Ok(Reply::json(&memprof_wire::Memory {
        interval_seconds: crate::profiler::counters::PERIOD.as_secs(),
        capacity: history::CAPACITY,
        readings: history::ring().since(since),
    }))
}

/// How many growing functions the dashboard's chart shows.
const GROWING_SHOWN: usize = 5;

/// `growing`: the functions that grew steadily over the record's one history (sampled continuously, its
/// last hour; on demand, the run's time), with what each held at every reading, for the dashboard's chart
/// (symbolizing them is an expensive job).
pub(super) fn growing(context: &Context, _: &Query) -> Result<Reply, HttpError> {
    let continuous = context.profiler.record().is_some();
    let Some(record) = context.profiler.views_record() else {
        let nothing = memprof_wire::Growing { continuous: false, series: Vec::new(), missed: None, unsure: None };
        return Ok(Reply::json(&nothing));
    };
    let _permit = super::jobs::Permit::or_busy()?;
    let (series, unsure) = super::growing::growing_series(record, GROWING_SHOWN)?;
    let missed = crate::profiler::record::losses(record);
    let unsure = unsure.then(|| crate::memory::UNSURE.to_owned());
    Ok(Reply::json(&memprof_wire::Growing { continuous, series, missed, unsure }))
}
