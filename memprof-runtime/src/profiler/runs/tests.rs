//! The bookkeeping of runs, on its own: ids, the rings of kept profiles, lookups, stops, windows.

use super::*;

fn profile(id: u64) -> KeptProfile {
    let now = SystemTime::now();
    KeptProfile { id, owner: Owner::Http, started: now, stopped: now, path: format!("/p/{id}.heap").into() }
}

fn ids(profiles: &[KeptProfile]) -> Vec<u64> {
    profiles.iter().map(|profile| profile.id).collect()
}

/// Starts a run, as the profiler does once sampling is on.
fn begin(runs: &mut Runs, owner: Owner) -> u64 {
    let id = runs.next_id();
    runs.begin(id, owner, None, None).id
}

/// Ends the run in progress with a profile, as the profiler does after a dump.
fn finish(runs: &mut Runs) -> (u64, Vec<KeptProfile>) {
    let run = runs.end().expect("a run is in progress");
    (run.id, runs.finished(profile(run.id)))
}

#[test]
fn ids_increase_even_within_a_millisecond() {
    let mut runs = Runs::new(4);
    let first = runs.next_id();
    let ids: Vec<u64> = (0..100).map(|_| runs.next_id()).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    assert!(first < ids[0]);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(first <= now + 1 && first + 10_000 > now, "ids are milliseconds since the epoch");
}

#[test]
fn the_oldest_runs_beyond_the_number_kept_are_handed_back() {
    let mut runs = Runs::new(2);
    let mut evicted = Vec::new();
    let mut started = Vec::new();
    for _ in 0..4 {
        started.push(begin(&mut runs, Owner::Http));
        evicted.extend(finish(&mut runs).1);
    }
    assert_eq!(ids(&evicted), started[..2]);
    assert_eq!(runs.lookup(None).map(|profile| profile.id), Ok(started[3]));
    assert_eq!(ids(&runs.keep_runs(0)), [started[2]], "at least one stays");
    assert_eq!(runs.counts, RunCounts { started: 4, finished: 4, failed: 0 });
}

/// Code's runs (`scope!`, `Run`) and the operators' are kept in quotas of their own: four scopes after an
/// operator's run leave it downloadable, and the oldest scope goes instead.
#[test]
fn scopes_never_push_out_an_operators_profile() {
    let mut runs = Runs::new(2);
    let kept = |runs: &mut Runs, owner: Owner| {
        let id = runs.next_id();
        let now = SystemTime::now();
        let evicted =
            runs.finished(KeptProfile { id, owner, started: now, stopped: now, path: format!("/p/{id}").into() });
        (id, ids(&evicted))
    };
    let (operators, _) = kept(&mut runs, Owner::Http);
    let scopes: Vec<(u64, Vec<u64>)> = (0..4).map(|_| kept(&mut runs, Owner::Code("many".to_owned()))).collect();
    assert_eq!(scopes[2].1, [scopes[0].0], "the oldest scope goes, not the operator's run");
    assert_eq!(scopes[3].1, [scopes[1].0]);
    assert_eq!(runs.lookup(Some(operators)).map(|profile| profile.id), Ok(operators));
    let (manual, evicted) = kept(&mut runs, Owner::Manual);
    assert!(evicted.is_empty(), "two of the operators' now: {evicted:?}");
    let (_, evicted) = kept(&mut runs, Owner::Http);
    assert_eq!(evicted, [operators]);
    assert_eq!(runs.lookup(None).map(|profile| profile.id).ok(), runs.finished.back().map(|latest| latest.id));
    assert!(runs.lookup(Some(manual)).is_ok());
}

#[test]
fn lookups_say_why_a_profile_cannot_be_served() {
    let mut runs = Runs::new(4);
    assert_eq!(runs.lookup(None), Err(LookupError::NoneYet));
    let first = begin(&mut runs, Owner::Manual);
    assert_eq!(runs.lookup(None), Err(LookupError::RunActive(first)));
    assert_eq!(runs.lookup(Some(first)), Err(LookupError::StillActive(first)));
    finish(&mut runs);
    assert_eq!(runs.lookup(Some(first)).map(|profile| profile.id), Ok(first));
    let second = begin(&mut runs, Owner::Http);
    runs.end();
    let error = runs.failed(second, Cause::message("disk full"));
    let disk_full = Cause::message("disk full");
    assert_eq!(error, Error::Dump { of: DumpOf::Run { id: second, previous: Some(first) }, error: disk_full });
    assert_eq!(runs.lookup(Some(second)), Err(LookupError::Failed(error.clone())));
    assert_eq!(runs.lookup(Some(7)), Err(LookupError::NotKept { id: 7, kept: vec![first] }));
    assert_eq!(runs.lookup(None).map(|profile| profile.id), Ok(first), "the failed run left the latest");
    let warnings: Vec<String> = runs.overview(None, false).warnings().collect();
    assert_eq!(warnings, [format!("Run {second} failed: {error}")], "failed after the latest: said in state");
    // With nothing kept, the download without an id says why the run failed, never "none yet".
    let mut fresh = Runs::new(4);
    let only = begin(&mut fresh, Owner::Http);
    fresh.end();
    let error = fresh.failed(only, Cause::message("Permission denied"));
    assert_eq!(fresh.lookup(None), Err(LookupError::Failed(error)));
    let next = begin(&mut fresh, Owner::Http);
    finish(&mut fresh);
    assert_eq!(fresh.lookup(None).map(|profile| profile.id), Ok(next));
    assert_eq!(fresh.overview(None, false).warnings().count(), 0, "a later run succeeded");
}

#[test]
fn a_stop_names_the_current_run_an_ended_one_or_none() {
    let mut runs = Runs::new(4);
    assert_eq!(runs.stop_target(None), StopTarget::NoRun);
    assert_eq!(runs.stop_target(Some(3)), StopTarget::Ended(Err(Error::UnknownRun(3))));
    let id = begin(&mut runs, Owner::Http);
    assert_eq!(runs.stop_target(None), StopTarget::Current);
    assert_eq!(runs.stop_target(Some(id)), StopTarget::Current);
    assert_eq!(runs.stop_target(Some(id - 1)), StopTarget::Ended(Err(Error::UnknownRun(id - 1))));
    finish(&mut runs);
    let kept = runs.lookup(Some(id)).unwrap();
    assert_eq!(runs.stop_target(Some(id)), StopTarget::Ended(Ok(kept)));
}

#[test]
fn windows_open_beside_the_current_run_and_close_by_id() {
    let mut runs = Runs::new(4);
    let run = begin(&mut runs, Owner::Http);
    let first = runs.next_id();
    runs.open_window(first, Owner::Code("a".into()), 10);
    let second = runs.next_id();
    runs.open_window(second, Owner::Code("b".into()), 20);
    assert_eq!(runs.lookup(Some(first)), Err(LookupError::StillActive(first)));
    assert_eq!(runs.current().map(|current| current.id), Some(run), "the current run is left alone");
    assert_eq!(runs.close_window(first).and_then(|window| window.window_start), Some(10));
    assert_eq!(runs.close_window(first), None, "closed twice");
    assert_eq!(runs.overview(None, false).windows.iter().map(|window| window.id).collect::<Vec<_>>(), [second]);
    assert_eq!(runs.counts.started, 3);
}

#[test]
fn automatic_dumps_are_bounded_by_count_and_bytes_but_the_newest_stays() {
    let mut runs = Runs::new(4);
    let size = |dump: &KeptProfile| if dump.id == 5 { 1000 } else { 10 };
    let mut dropped = Vec::new();
    for id in 1..=4 {
        dropped.extend(runs.automatic_dump(profile(id), 3, 100, size));
    }
    assert_eq!(ids(&dropped), [1], "beyond three dumps");
    assert_eq!(ids(&runs.automatic_dump(profile(5), 3, 100, size)), [2, 3, 4], "beyond 100 bytes");
    assert_eq!(runs.lookup(None).map(|profile| profile.id), Ok(5));
    assert_eq!(ids(&runs.close()), [5]);
    assert_eq!(runs.check_open(), Err(Error::Ending));
}
