//! The profiler's values as the endpoints say them ([`memprof_wire`]'s types): kept profiles, their
//! downloads, who started a run.

use memprof_analysis::Format;
use memprof_wire::ProfileUrls;

use crate::http::HttpError;
use crate::profile_root::end_caption;
use crate::profile_root::evidence::EarlierProcess;
use crate::profile_root::untrusted::unix_seconds;
use crate::profiler::{Error, KeptProfile};

/// Where profile `id` is downloaded, in every format.
pub(super) fn profile_urls(id: u64) -> ProfileUrls {
    ProfileUrls::of(id, Format::ALL.iter().map(|format| format.name()))
}

/// A kept profile, as `state` lists it.
pub(super) fn describe_run(run: &KeptProfile) -> memprof_wire::KeptProfile {
    memprof_wire::KeptProfile {
        id: run.id,
        started_by: run.owner.name(),
        started: unix_seconds(run.started),
        stopped: unix_seconds(run.stopped),
        path: run.path.display().to_string(),
        urls: profile_urls(run.id),
    }
}

/// An earlier process's kept profiles, as `state` lists them.
pub(crate) fn describe_earlier(process: &EarlierProcess) -> memprof_wire::EarlierProcess {
    memprof_wire::EarlierProcess {
        pid: process.pid,
        ended_before: unix_seconds(process.ended_before),
        directory: process.directory.display().to_string(),
        why: process.why(),
        profiles: process
            .profiles
            .iter()
            .map(|earlier| memprof_wire::EarlierProfile {
                profile: describe_run(&earlier.profile),
                binary: earlier.binary.clone(),
                same_build: earlier.same_build,
                allocated_bytes: earlier.allocated,
                before_end_seconds: end_caption::before_end(process, earlier),
            })
            .collect(),
        last_seen: process.last_seen.clone(),
        lost_run: end_caption::lost_run(process),
        caption: end_caption::caption(process),
    }
}

/// A profiler's error as the HTTP error that says it.
impl From<Error> for HttpError {
    fn from(error: Error) -> Self {
        Self::new(error.status(), error.to_string())
    }
}
