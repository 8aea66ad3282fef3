//! `/memory-profiler/memory`: the readings of jemalloc's counters (and, while watched, the resident set by
//! class) the dashboard's chart draws.

use super::context::Context;
use crate::http::{HttpError, Query, Reply};
use crate::memory::history;

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
