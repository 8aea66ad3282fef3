//! The profiler in this very process, against the real jemalloc (the runtime's tests run with profiling
//! armed): each test builds a fresh profiler of its own.

use std::time::Duration;

use super::outcomes::RunCounts;
use super::*;

use crate::testing::SAMPLING;

fn profiler() -> &'static Profiler {
    let settings = crate::settings::get();
    let profiler = Profiler::new(
        settings,
        ConfigReport::read(&settings.jemalloc_variables),
        OnceLock::from(Unwinder::FramePointers),
    );
    assert!(profiler.sampler().config().profiling_enabled, "the runtime's tests run with profiling armed");
    Box::leak(Box::new(profiler))
}

fn started(profiler: &'static Profiler, owner: Owner, length: Option<Duration>) -> ActiveRun {
    match profiler.start(owner, length) {
        Ok(Started::New(run)) => run,
        other => panic!("a new run was expected, not {other:?}"),
    }
}

fn is_heap_profile(profile: &KeptProfile) -> bool {
    std::fs::read_to_string(&profile.path).is_ok_and(|text| text.starts_with("heap_v2/"))
}

#[test]
fn a_run_starts_once_and_its_stop_keeps_a_profile() {
    let _turn = SAMPLING.lock();
    let profiler = profiler();
    let run = started(profiler, Owner::Http, None);
    assert_eq!(jemalloc::profiling_active(), Ok(true));
    assert_eq!(profiler.start(Owner::Manual, None), Ok(Started::AlreadyActive(run.clone())));
    assert_eq!(profiler.profile(Some(run.id)), Err(LookupError::StillActive(run.id)));
    let profile = profiler.stop(None).unwrap().expect("the run's profile");
    assert_eq!(jemalloc::profiling_active(), Ok(false));
    assert_eq!((profile.id, &profile.owner), (run.id, &Owner::Http));
    assert!(is_heap_profile(&profile), "{}", profile.path.display());
    assert_eq!(profiler.stop(None), Ok(None));
    assert_eq!(profiler.stop(Some(run.id)), Ok(Some(profile.clone())));
    assert_eq!(profiler.profile(None), Ok(profile));
    assert_eq!(profiler.overview().counts, RunCounts { started: 1, finished: 1, failed: 0 });
    profiler.shut_down();
}

/// A run on demand keeps, beside its profile, what it allocated and what it held at its peak: 64 MiB held
/// and freed, then 8 MiB kept.
#[test]
fn a_run_keeps_what_it_allocated_and_its_peak_beside_its_profile() {
    let _turn = SAMPLING.lock();
    let profiler = profiler();
    let run = started(profiler, Owner::Http, None);
    drop(std::hint::black_box(vec![vec![1u8; 1 << 20]; 64]));
    let kept = std::hint::black_box(vec![vec![1u8; 1 << 20]; 8]);
    let profile = super::code_runs::Profile::from(&profiler.stop(Some(run.id)).unwrap().expect("the run's profile"));
    let bytes = |path: Option<PathBuf>| {
        let text = std::fs::read_to_string(path.expect("kept beside the profile")).unwrap();
        let profile = memprof_analysis::HeapProfile::parse(&text).unwrap();
        profile.stacks.iter().map(|stack| stack.unbiased(profile.sample_period).1).sum::<f64>() / (1 << 20) as f64
    };
    // Sampled every 512 KiB on average, some 140 samples: within 30 % (three standard deviations).
    let (allocated, peak) = (bytes(profile.allocated_path()), bytes(profile.peak_path()));
    assert!((50.0..=94.0).contains(&allocated), "{allocated} MiB allocated, 72 expected");
    assert!((44.0..=84.0).contains(&peak), "{peak} MiB at the peak, 64 expected");
    drop(kept);
    profiler.shut_down();
}

#[test]
fn a_timed_run_is_ended_by_its_timer() {
    let _turn = SAMPLING.lock();
    let profiler = profiler();
    let run = started(profiler, Owner::Http, Some(Duration::from_millis(50)));
    let profile = crate::testing::wait_until(&format!("the timer to end run {}", run.id), || {
        match profiler.profile(Some(run.id)) {
            Ok(profile) => Ok(profile),
            Err(LookupError::StillActive(_)) => Err("still active".to_owned()),
            Err(error) => panic!("the timer did not end run {}: {error:?}", run.id),
        }
    });
    assert!(is_heap_profile(&profile));
    assert_eq!(jemalloc::profiling_active(), Ok(false));
    profiler.shut_down();
}

#[test]
fn a_run_is_stopped_only_by_its_owner() {
    let _turn = SAMPLING.lock();
    let profiler = profiler();
    let run = started(profiler, Owner::Code("load".to_owned()), None);
    assert_eq!(profiler.stop_owned_by(&Owner::Manual), Ok(Stopped::OwnedBy(run.clone())));
    match profiler.stop_owned_by(&Owner::Code("load".to_owned())) {
        Ok(Stopped::Profile(profile)) => assert_eq!(profile.id, run.id),
        other => panic!("the owner's stop was expected to end the run, not {other:?}"),
    }
    assert_eq!(profiler.stop_owned_by(&Owner::Manual), Ok(Stopped::NoRun));
    profiler.shut_down();
}

#[test]
fn sampling_switched_on_outside_memprof_is_left_alone() {
    let _turn = SAMPLING.lock();
    let profiler = profiler();
    jemalloc::set_profiling_active(true).unwrap();
    let start = profiler.start(Owner::Http, None);
    let stop = profiler.stop(None);
    jemalloc::set_profiling_active(false).unwrap();
    assert_eq!((start, stop), (Err(Error::StartedExternally), Err(Error::StartedExternally)));
    profiler.shut_down();
}

#[test]
fn profiles_pushed_out_are_deleted() {
    let _turn = SAMPLING.lock();
    let profiler = profiler();
    profiler.keep_runs(1);
    started(profiler, Owner::Http, None);
    let first = profiler.stop(None).unwrap().unwrap();
    started(profiler, Owner::Http, None);
    let second = profiler.stop(None).unwrap().unwrap();
    assert!(!first.path.exists() && is_heap_profile(&second));
    assert_eq!(profiler.profile(Some(first.id)), Err(LookupError::NotKept { id: first.id, kept: vec![second.id] }));
    let dumps: Vec<KeptProfile> =
        (0..3).map(|index| profiler.automatic_dump(format!("test {index}"), 2, u64::MAX).unwrap()).collect();
    assert!(!dumps[0].path.exists() && is_heap_profile(&dumps[1]) && is_heap_profile(&dumps[2]));
    assert_eq!(profiler.newest(), Ok(dumps[2].clone()));
    // Without an id, a download is the run that ended last, not the automatic dumps taken since.
    assert_eq!(profiler.profile(None), Ok(second));
    profiler.shut_down();
}

#[test]
fn after_shut_down_nothing_is_kept_or_started() {
    let profiler = profiler();
    let dump = profiler.automatic_dump("test".to_owned(), 8, u64::MAX).unwrap();
    profiler.shut_down();
    assert!(!dump.path.exists());
    assert_eq!(profiler.start(Owner::Http, None), Err(Error::Ending));
    assert_eq!(profiler.automatic_dump("late".to_owned(), 8, u64::MAX), Err(Error::Ending));
    assert_eq!(profiler.profile(None), Err(LookupError::NoneYet));
}

#[test]
fn without_profiling_every_control_says_why() {
    let settings = crate::settings::get();
    let config = ConfigReport {
        profiling_enabled: false,
        warnings: vec!["off, for a test".to_owned()],
        ..ConfigReport::read(&settings.jemalloc_variables)
    };
    let profiler: &'static Profiler =
        Box::leak(Box::new(Profiler::new(settings, config, OnceLock::from(Unwinder::FramePointers))));
    let unavailable = Err(Error::Unavailable("off, for a test".to_owned()));
    assert_eq!(profiler.start(Owner::Http, None).map(drop), unavailable);
    assert_eq!(profiler.stop(None).map(drop), unavailable);
    assert_eq!(profiler.snapshot(None).map(drop), unavailable);
}
