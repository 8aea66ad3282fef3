//! `/growing`: the functions whose stacks grow, over time, for the dashboard's chart ([`crate::leak_naming`]).

use super::context::Context;
use crate::http::{HttpError, Query, Reply};
use crate::leak_naming::{Unnamed, growing_series};

impl From<Unnamed> for HttpError {
    fn from(unnamed: Unnamed) -> Self {
        HttpError::internal(unnamed.to_string())
    }
}

/// How many growing functions the dashboard's chart shows.
const GROWING_SHOWN: usize = 5;

/// `growing`: the functions that grew steadily over the record's one history (sampled continuously, its
/// last hour; on demand, the run's time), with what each held at every reading, for the dashboard's chart
/// (symbolizing them is an expensive job).
pub(super) fn growing(context: &Context, _: &Query) -> Result<Reply, HttpError> {
    let continuous = context.profiler.sampler().record().is_some();
    let Some(record) = context.profiler.sampler().views_record() else {
        let nothing = memprof_wire::Growing { continuous: false, series: Vec::new(), missed: None, unsure: None };
        return Ok(Reply::json(&nothing));
    };
    let _permit = super::jobs::Permit::or_busy()?;
    let (series, unsure) = growing_series(record, GROWING_SHOWN)?;
    let missed = crate::sampler::record::losses(record);
    let unsure = unsure.then(|| crate::memory::UNSURE.to_owned());
    Ok(Reply::json(&memprof_wire::Growing { continuous, series, missed, unsure }))
}
