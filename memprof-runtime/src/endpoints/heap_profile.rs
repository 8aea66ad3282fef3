//! Switches by hand, as libmtev's `/mtev/heap_profile` and Traffic Server's `memory_profile` plugin offer
//! them: read the switches, turn sampling on and off by hand, dump the heap right now.
//!
//! Switching on by hand is a run like the others (owner `manual`, no timer): it gets an id, and switching
//! off dumps its profile among the kept ones. A timed run or one started in code is never switched off
//! from here (409).

use super::context::Context;
use super::to_wire::profile_urls;
use crate::http::{HttpError, Query, Reply};
use crate::jemalloc;
use crate::profiler::{Owner, Started, Stopped};
use memprof_wire::{RunAnswer, RunOwner, Switches};

/// `heap_profile`: the switches; `?active=true|false` to switch; `?trigger_dump=true` for the heap now, or
/// with `&run=<id>` for what that run in progress holds so far.
pub(super) fn heap_profile(context: &Context, query: &Query) -> Result<Reply, HttpError> {
    let dump = query.flag("trigger_dump")?;
    let run = query.parse_id("run")?;
    if run.is_some() && !dump {
        return Err(HttpError::bad_request("'run' names the run in progress a trigger_dump=true is of"));
    }
    match (query.get("active"), dump) {
        (Some(_), true) => Err(HttpError::bad_request("Pass either 'active' or 'trigger_dump', not both")),
        (Some(_), false) => switch(context, query.flag("active")?),
        (None, true) => trigger_dump(context, run),
        (None, false) => Ok(Reply::json(&switches(context))),
    }
}

fn switches(context: &Context) -> Switches {
    let overview = context.profiler.overview();
    Switches {
        profiling_enabled: context.profiler.sampler().config().profiling_enabled,
        profiling_active: crate::sampler::throttle::sampling_on().ok(),
        new_threads_sampled: jemalloc::new_threads_sampled().ok(),
        current_run: overview.current.as_ref().map(|run| RunOwner { id: run.id, started_by: run.owner.name() }),
    }
}

fn switch(context: &Context, on: bool) -> Result<Reply, HttpError> {
    let profiler = context.profiler;
    if on {
        let (run, message) = match profiler.start(Owner::Manual, None)? {
            Started::New(run) => (run, "Heap profiling switched on"),
            Started::AlreadyActive(run) if run.owner == Owner::Manual => (run, "Heap profiling is already on"),
            Started::AlreadyActive(run) => return Err(owned_by_another(run.id, &run.owner)),
        };
        let message = format!("{message} as run {}; switch it off with heap_profile?active=false", run.id);
        return Ok(Reply::json(&RunAnswer { active: Some(true), id: Some(run.id), message, urls: None }));
    }
    match profiler.stop_owned_by(&Owner::Manual)? {
        Stopped::Profile(finished) => Ok(Reply::json(&RunAnswer {
            active: Some(false),
            id: Some(finished.id),
            message: format!("Heap profiling switched off; the profile of run {} is kept", finished.id),
            urls: Some(profile_urls(finished.id)),
        })),
        Stopped::OwnedBy(run) => Err(owned_by_another(run.id, &run.owner)),
        Stopped::NoRun => Ok(Reply::json(&RunAnswer {
            active: Some(false),
            id: None,
            message: "Heap profiling is already off".to_owned(),
            urls: None,
        })),
    }
}

fn owned_by_another(id: u64, owner: &Owner) -> HttpError {
    let by = match owner {
        Owner::Http => "by /memory-profiler/start; stop it with /memory-profiler/stop or wait for its timer".to_owned(),
        Owner::Code(label) => format!("by the program's code ({label:?}); it ends when that code is done"),
        Owner::Manual | Owner::Automatic(_) | Owner::Earlier(_) => "by hand".to_owned(),
    };
    HttpError::conflict(format!("Heap profiling run {id} owns profiling, started {by}"))
}

/// The heap as it is now, or what run `run` in progress holds so far (its profile, were it stopped now),
/// streamed back (its file is already deleted, or freed when in memory).
fn trigger_dump(context: &Context, run: Option<u64>) -> Result<Reply, HttpError> {
    let (file, name) = context.profiler.snapshot(run).map_err(|error| match (error, run) {
        (crate::profiler::Error::UnknownRun(_), Some(run)) => HttpError::not_found(format!(
            "No heap profiling run {run} is in progress; an ended run's profile is at /memory-profiler/download/raw?id={run}"
        )),
        (error, _) => error.into(),
    })?;
    Ok(Reply::download(file, format!("memprof.{name}")))
}
