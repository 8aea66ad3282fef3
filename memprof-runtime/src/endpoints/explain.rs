//! The process's memory explained (`explain`): the resident set by class, the verdict and the figures
//! behind them. Acting on it is [`super::freed_pages`]'s.

use memprof_wire::GrowingStack;

use super::context::Context;
use super::jobs::Permit;
use crate::http::{HttpError, Query, Reply};
use crate::leak_naming::holders;
use crate::memory::Holders;
use crate::{jemalloc, memory, memory::history};

/// How many stacks a leak verdict names.
const STACKS_NAMED: usize = 5;

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
    // The stacks are named only for a leak or a step, and only while sampling is on: by the record's one
    // history of what grew (sampled continuously, its last hour; on demand, the run's time), else, before it
    // can tell, by the stacks holding the most now.
    let grown_in_the_record = match (growth, context.profiler.views_record()) {
        (Some(growth), Some(record)) if sampling => {
            use crate::leak_naming::Growing;
            let which = if growth.flat_seconds.is_none() { Growing::Now } else { Growing::Stopped };
            crate::leak_naming::grown_in_the_record(record, STACKS_NAMED, which)?
        }
        _ => None,
    };
    let stacks = match (growth, grown_in_the_record) {
        (Some(_), Some(grown)) if sampling => grown,
        (Some(_), None) if sampling => {
            let heap = super::heap_now::symbolized(context)?;
            Holders {
                stacks: top(holders(&heap)),
                grown_over: None,
                grown_in_all: None,
                unsure: !heap.knows_the_programs_code(),
            }
        }
        _ => Holders::default(),
    };
    let losses = context.profiler.record().and_then(crate::sampler::record::losses);
    let mut explanation = memory::explanation(&reading, growth, stacks, sampling, losses, &bins, decay.as_ref());
    if let Some(error) = bins_unread
        && explanation.verdict.kind == memprof_wire::VerdictKind::Fragmentation
    {
        crate::process::messages::warn(&format!("explain could not read jemalloc's size classes: {error}"));
        explanation.verdict.summary.push_str(&format!(" (its size classes could not be read: {error})"));
    }
    Ok(Reply::json(&explanation))
}

/// The first [`STACKS_NAMED`] of `stacks`.
fn top(mut stacks: Vec<GrowingStack>) -> Vec<GrowingStack> {
    stacks.truncate(STACKS_NAMED);
    stacks
}
