//! What an earlier process's kept profiles show of its end, in words, for `state` and the dashboard: when
//! the newest was taken against when the process was last seen ([`crate::profile_root::last_seen`]), how much of its last
//! heap it holds, the run that was active at the end and is lost, and, when the kept profiles are far from
//! the end, the switch that would have kept a profile near it. Pure: tested on made-up processes.

use memprof_wire::ActiveRun;

use crate::memory::mib;
use crate::profile_root::evidence::{EarlierProcess, EarlierProfile};
use crate::profile_root::untrusted::unix_seconds;

/// A newest profile taken longer than this before the process was last seen is "far from the end".
const FAR_SECONDS: f64 = 60.0;

/// A newest profile holding less than this share of the last-seen heap is "far from the end".
const FAR_SHARE: f64 = 0.5;

/// The run active when the process was last seen, unless it ended with a profile kept after all.
pub(crate) fn lost_run(process: &EarlierProcess) -> Option<ActiveRun> {
    let run = process.last_seen.as_ref()?.active_run.as_ref()?;
    (!process.profiles.iter().any(|profile| profile.profile.id == run.id)).then(|| run.clone())
}

/// How long before the process was last seen `profile` was written, in seconds; `None` when that is not
/// known, or when the profile is newer than the last record (the record is written every few seconds).
pub(crate) fn before_end(process: &EarlierProcess, profile: &EarlierProfile) -> Option<f64> {
    let seen = process.last_seen.as_ref()?;
    let before = seen.time - unix_seconds(profile.profile.stopped);
    (before >= 0.0).then_some(before)
}

/// `3 min 12 s`, `45 s`, `2 h 5 min`.
fn duration(seconds: f64) -> String {
    let seconds = seconds.round() as u64;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {} s", seconds / 60, seconds % 60),
        _ => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
    }
}

/// The caption of `process`.
pub(crate) fn caption(process: &EarlierProcess) -> String {
    let mut sentences = vec![format!(
        "The previous process ({}) was killed or crashed: it ended without cleaning up{}.",
        process.pid,
        process.why().map(|why| format!(", {why}")).unwrap_or_default()
    )];
    let seen = process.last_seen.as_ref();
    if let Some(seen) = seen {
        sentences.push(format!(
            "It was last seen with {} live ({} resident).",
            mib(seen.allocated_bytes),
            mib(seen.rss_bytes)
        ));
    }
    let mut far = false;
    match (process.profiles.first(), seen) {
        (Some(newest), Some(_)) if before_end(process, newest).is_none() => sentences.push(format!(
            "Its newest profile ({}) was taken after its last record{}: it is the latest sign of it.",
            newest.profile.owner.name(),
            newest.allocated.map(|allocated| format!(" and holds {} live", mib(allocated))).unwrap_or_default()
        )),
        (Some(newest), Some(seen)) => {
            let before = before_end(process, newest).unwrap_or(0.0);
            let share = newest.allocated.map(|allocated| allocated as f64 / seen.allocated_bytes.max(1) as f64);
            far = before > FAR_SECONDS || share.is_some_and(|share| share < FAR_SHARE);
            let holds = match (newest.allocated, share) {
                (Some(allocated), Some(share)) => {
                    format!(" and holds {} live, {:.0} % of that", mib(allocated), share * 100.0)
                }
                _ => String::new(),
            };
            sentences.push(format!(
                "Its newest profile ({}) was taken {} before it was last seen{holds}.",
                newest.profile.owner.name(),
                duration(before)
            ));
        }
        (Some(_), None) => sentences.push(
            "Here is its newest profile; when the process was last seen is not known (it predates the last-seen note)."
                .to_owned(),
        ),
        (None, _) => sentences.push("No profile of it was kept.".to_owned()),
    }
    if let (Some(run), Some(seen)) = (lost_run(process), seen) {
        far = true;
        sentences.push(format!(
            "Run {} (started by {}, {} before it was last seen) was active when it ended and is lost: a run's \
             profile is written when the run stops.",
            run.id,
            run.started_by,
            duration((seen.time - run.started).max(0.0))
        ));
    }
    if far {
        sentences.push(
            "These profiles do not show the heap at its end: sampled continuously (MEMPROF_SAMPLING=continuous), \
             memprof dumps the heap by itself each time it grows by half and at 90 % of the memory limit, and \
             keeps what grew beside it; MEMPROF_DUMP_HIGH_WATER=10% dumps closer to the end."
                .to_owned(),
        );
    }
    sentences.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_model::{KeptProfile, Owner};
    use memprof_wire::LastSeen;
    use std::time::{Duration, UNIX_EPOCH};

    const MIB: u64 = 1 << 20;

    fn process(profiles: Vec<(u64, &str, f64, Option<u64>)>, last_seen: Option<LastSeen>) -> EarlierProcess {
        EarlierProcess {
            pid: 4242,
            directory: "/tmp/memprof.x".into(),
            ended_before: UNIX_EPOCH,
            profiles: profiles
                .into_iter()
                .map(|(id, by, stopped, allocated)| EarlierProfile {
                    profile: KeptProfile {
                        id,
                        owner: Owner::Earlier(by.to_owned()),
                        started: UNIX_EPOCH,
                        stopped: UNIX_EPOCH + Duration::from_secs_f64(stopped),
                        path: format!("/tmp/memprof.x/profile.{id}.heap").into(),
                    },
                    binary: None,
                    same_build: true,
                    bytes: 1000,
                    allocated,
                })
                .collect(),
            last_seen,
        }
    }

    fn seen(time: f64, allocated: u64, active_run: Option<u64>) -> LastSeen {
        LastSeen {
            time,
            allocated_bytes: allocated,
            resident_bytes: allocated,
            rss_bytes: allocated + 10 * MIB,
            active_run: active_run.map(|id| ActiveRun { id, started_by: "http".into(), started: time - 30.0 }),
            binary: None,
        }
    }

    #[test]
    fn an_old_profile_and_a_lost_run_are_said_with_the_switch_that_keeps_the_end() {
        let process = process(vec![(5, "http", 1000.0, Some(65 * MIB))], Some(seen(1192.0, 294 * MIB, Some(9))));
        assert_eq!(lost_run(&process).map(|run| run.id), Some(9));
        assert_eq!(before_end(&process, &process.profiles[0]), Some(192.0));
        assert_eq!(
            caption(&process),
            "The previous process (4242) was killed or crashed: it ended without cleaning up. It was last seen \
             with 294.0 MiB live (304.0 MiB resident). Its newest profile (http) was taken 3 min 12 s before it \
             was last seen and holds 65.0 MiB live, 22 % of that. Run 9 (started by http, 30 s before it was last \
             seen) was active when it ended and is lost: a run's profile is written when the run stops. These \
             profiles do not show the heap at its end: sampled continuously (MEMPROF_SAMPLING=continuous), \
             memprof dumps the heap by itself each time it grows by half and at 90 % of the memory limit, and \
             keeps what grew beside it; MEMPROF_DUMP_HIGH_WATER=10% dumps closer to the end."
        );
    }

    #[test]
    fn a_profile_near_the_end_needs_no_advice_and_a_finished_run_is_not_lost() {
        let near = process(vec![(9, "http", 1190.0, Some(280 * MIB))], Some(seen(1192.0, 294 * MIB, Some(9))));
        assert_eq!(lost_run(&near), None);
        let said = caption(&near);
        assert!(
            said.ends_with("was taken 2 s before it was last seen and holds 280.0 MiB live, 95 % of that."),
            "{said}"
        );
        let after = caption(&process(vec![(9, "http", 1195.0, Some(23 * MIB))], Some(seen(1192.0, MIB / 2, None))));
        assert!(after.ends_with("Its newest profile (http) was taken after its last record and holds 23.0 MiB live: it is the latest sign of it."), "{after}");
        let unknown = caption(&process(vec![(1, "automatic: high water", 10.0, None)], None));
        assert!(unknown.ends_with("when the process was last seen is not known (it predates the last-seen note)."));
    }
}
