//! The Mesos-compatible endpoints, driven over real HTTP against the example service.

use memprof_tests::acceptance::{self, start};
use memprof_tests::process::{Program, built_binary};

#[test]
fn a_run_round_trips_from_start_to_a_dump_of_the_services_functions() {
    // Mesos's round trip, sampling on demand (as a window over continuous sampling: tests/continuous.rs).
    let service = Program::service().env("MEMPROF_SAMPLING", "on-demand").spawn();
    acceptance::a_run_round_trips(&service, &built_binary("service"), &["open_session", "index_document"]);
}

#[test]
fn the_timer_ends_a_run_and_the_profile_stays_downloadable_during_the_next() {
    acceptance::the_timer_ends_a_run(&Program::service().spawn());
}

#[test]
fn concurrent_starts_make_exactly_one_run() {
    acceptance::concurrent_starts_make_one_run(&Program::service().spawn());
}

#[test]
fn stop_without_a_run_is_a_no_op_that_says_so() {
    acceptance::stop_without_a_run_says_so(&Program::service().spawn());
}

#[test]
fn statistics_are_jemallocs_json() {
    acceptance::statistics_are_jemallocs_json(&Program::service().spawn());
}

#[test]
fn bad_requests_get_their_status_and_a_clear_message() {
    acceptance::bad_requests_are_refused_clearly(&Program::service().spawn());
}

#[test]
fn only_the_last_four_profiles_are_kept() {
    let service = Program::service().spawn();
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(start(&service, "1mins"));
        service.get_json("/memory-profiler/stop");
    }
    let state = service.state();
    let kept: Vec<u64> = state.runs.iter().map(|run| run.id).collect();
    assert_eq!(kept, ids[1..].iter().rev().copied().collect::<Vec<_>>());
    assert_eq!(state.keep_runs, 4);
    let directory = state.tmp_dir.as_str();
    // The runs' profiles: an automatic dump of the start-up's growth may sit beside them, by timing.
    let runs = acceptance::profiles_in(directory);
    let runs = runs.iter().filter(|profile| profile.file_name().to_string_lossy().starts_with("profile."));
    assert_eq!(runs.count(), 4);
    assert_eq!(service.get(&format!("/memory-profiler/download/raw?id={}", ids[0])).status, 404);
}

/// Rust's and libc's start-up frames are cut from the readable formats, as Rust's short backtraces cut
/// them; `full=true` keeps every frame.
#[test]
fn stacks_start_at_the_programs_main_unless_full_is_asked_for() {
    let service = Program::service().spawn();
    let id = start(&service, "1mins");
    acceptance::wait_for_sampled(&service, &["service::open_session"]);
    service.get_json("/memory-profiler/stop");
    let start_up = ["std::rt::lang_start_internal", "__rust_begin_short_backtrace", "std::panic::catch_unwind"];
    for format in ["collapsed", "text"] {
        let short = service.get(&format!("/memory-profiler/download/{format}?id={id}")).text();
        let full = service.get(&format!("/memory-profiler/download/{format}?id={id}&full=true")).text();
        for frame in start_up {
            assert!(!short.contains(frame), "{format}: {frame} shown by default:\n{short}");
            assert!(full.contains(frame), "{format}: {frame} missing with full=true:\n{full}");
        }
    }
    let collapsed = service.get(&format!("/memory-profiler/download/collapsed?id={id}")).text();
    let sessions: Vec<&str> = collapsed.lines().filter(|line| line.contains("service::open_session")).collect();
    assert!(!sessions.is_empty(), "{collapsed}");
    for stack in sessions {
        assert!(stack.starts_with("service::main;"), "the stack starts at the program's main: {stack}");
    }
}

/// jeprof passes no id (`jeprof http://host/memory-profiler/pprof/heap`): it gets the newest profile during a
/// run too, while Mesos's id-less downloads still ask for an id then. With automatic dumps alone (sampling
/// started by `MALLOC_CONF`), the id-less downloads serve the newest dump.
#[test]
fn id_less_downloads_serve_the_newest_profile() {
    let service = Program::service().spawn();
    let first = start(&service, "1mins");
    service.get_json("/memory-profiler/stop");
    start(&service, "1mins");
    let newest = service.get("/memory-profiler/pprof/heap");
    assert_eq!(newest.status, 200, "{}", newest.text());
    assert_eq!(newest.body, service.get(&format!("/memory-profiler/download/raw?id={first}")).body);
    assert_eq!(service.get("/memory-profiler/download/raw").status, 409);

    let dumping = Program::service().env("MALLOC_CONF", "prof_active:true").env("MEMPROF_DUMP_EVERY", "8MiB").spawn();
    let dump = memprof_tests::waiting::wait_until("an automatic dump", memprof_tests::process::PATIENCE, || {
        let dumps = dumping.state().automatic_dumps.dumps;
        dumps.first().map(|dump| dump.id).ok_or_else(|| format!("{dumps:?}"))
    });
    let text = dumping.get("/memory-profiler/download/text");
    assert_eq!(text.status, 200, "{}", text.text());
    // The newest automatic dump: the one seen, or a newer one taken since.
    let raw = dumping.get("/memory-profiler/download/raw");
    let served: u64 = raw
        .header("content-disposition")
        .and_then(|value| value.split("memprof.").nth(1)?.split('.').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{:?}", raw.headers));
    assert!(served >= dump, "served {served}, the newest seen was {dump}");
}
