//! The process's memory explained (`explain`): the resident set by class, the verdict and the figures
//! behind them. Acting on it is [`super::freed_pages`]'s.

use super::context::Context;
use super::jobs::Permit;
use crate::http::{HttpError, Query, Reply};
use crate::{jemalloc, memory, memory::history};

/// `explain`: the resident set by class, the verdict and the figures behind them.
pub(super) fn explain(context: &Context, _: &Query) -> Result<Reply, HttpError> {
    let _permit = Permit::or_busy()?;
    let promoted = crate::sampler::record::promoted_bytes();
    let reading =
        memory::read(promoted).map_err(|error| HttpError::internal(format!("Cannot read the memory ({error})")))?;
    // `memory::read` advanced jemalloc's epoch: the bins are of the same moment.
    // A failed read is said, never answered as if there were nothing: no size class to name, or no verdict.
    let (bins, bins_unread) = match jemalloc::bins() {
        Ok(bins) => (bins, None),
        Err(error) => (Vec::new(), Some(error.to_string())),
    };
    let decay = jemalloc::decay_settings().ok();
    let growth = memory::growth(&memory::live_readings(&history::ring().since(0)));
    let sampling = crate::sampler::throttle::sampling_on().map_err(|error| {
        HttpError::internal(format!("Cannot tell whether sampling is on (prof.active: {error}); explain cannot judge"))
    })?;
    let stacks =
        crate::leak_naming::named_for_explain(growth, sampling, context.profiler.sampler().views_record(), || {
            super::heap_now::symbolized(context)
        })?;
    let losses = context.profiler.sampler().record().and_then(crate::sampler::record::losses);
    let mut explanation = memory::explanation(&reading, growth, stacks, sampling, losses, &bins, decay.as_ref());
    if let Some(error) = bins_unread
        && explanation.verdict.kind == memprof_wire::VerdictKind::Fragmentation
    {
        crate::process::messages::warn(&format!("explain could not read jemalloc's size classes: {error}"));
        explanation.verdict.summary.push_str(&format!(" (its size classes could not be read: {error})"));
    }
    Ok(Reply::json(&explanation))
}
