//! How a service's life ends, as services really end: SIGTERM from systemd, Kubernetes or `docker stop`
//! (the opt-in final dump), and SIGKILL (whose leftovers the next memprof process removes when there is
//! nothing worth keeping; what is kept is in tests/evidence.rs).

use std::os::unix::process::ExitStatusExt;

use memprof::analysis::HeapProfile;
use memprof_tests::acceptance::{start, wait_for_sampled};
use memprof_tests::heap::functions_in;
use memprof_tests::process::{Program, built_binary};
use memprof_tests::tools::Scratch;

/// The profile directory of a service, as `state` names it.
fn profile_directory(service: &Program) -> std::path::PathBuf {
    service.state().tmp_dir.into()
}

#[test]
fn sigterm_leaves_the_active_runs_profile_and_no_directory() {
    let scratch = Scratch::new("sigterm");
    let final_dump = scratch.join("final.heap");
    let mut service = Program::service().env("MEMPROF_FINAL_DUMP", &final_dump).spawn();
    // A finished run makes the directory; a second one is active when the signal comes.
    start(&service, "1mins");
    service.get_json("/memory-profiler/stop");
    let directory = profile_directory(&service);
    assert!(directory.join("owner").is_file());
    let active = start(&service, "1mins");
    wait_for_sampled(&service, &["service::open_session"]);

    let run = (active, final_dump.as_path());
    ends_by_signal_leaving_the_run(&mut service, ("TERM", 15), &directory, run, ("service", "open_session"));
}

/// Sends `signal` (its name and number) to `program`, whose run `run.0` is active: the program ends as
/// that signal ends it, its profile directory is gone, and the run's profile is at `run.1`, naming
/// `allocating.1`, a function of the built binary `allocating.0`, as the log says.
fn ends_by_signal_leaving_the_run(
    program: &mut Program,
    signal: (&str, i32),
    directory: &std::path::Path,
    run: (u64, &std::path::Path),
    allocating: (&str, &str),
) {
    program.signal(signal.0);
    let status = program.wait_for_exit();
    assert_eq!(status.signal(), Some(signal.1), "the program still ends by the signal: {status:?}");
    assert!(!directory.exists(), "{} was left behind", directory.display());
    let profile = HeapProfile::parse(&std::fs::read_to_string(run.1).unwrap()).unwrap();
    let functions = functions_in(&profile, &built_binary(allocating.0));
    assert!(functions.iter().any(|name| name.contains(allocating.1)), "{functions:#?}");
    let said = format!(
        "[memprof] INFO Heap profiling run {} was active when the program ended; its profile is at {}",
        run.0,
        run.1.display()
    );
    assert!(program.output().contains(&said), "{:#?}", program.output());
}

/// Ctrl-C ends a batch program: with `dump_on_sigint`, memprof ends first (the run in progress leaves its
/// profile at `MEMPROF_FINAL_DUMP`, the profile directory is removed), then SIGINT ends the program.
#[test]
fn sigint_leaves_the_active_runs_profile_where_asked() {
    let scratch = Scratch::new("sigint");
    let final_dump = scratch.join("final.heap");
    let mut program = Program::windows().env("MEMPROF_FINAL_DUMP", &final_dump).spawn();
    program.wait_for_line(|line| line == "windows: ready");
    let active = start(&program, "1mins");
    program.tell("grow", "windows: done grow");
    let directory = profile_directory(&program);

    let run = (active, final_dump.as_path());
    ends_by_signal_leaving_the_run(&mut program, ("INT", 2), &directory, run, ("windows", "grown_in_the_window"));
}

#[test]
fn directories_of_killed_processes_with_nothing_worth_keeping_are_removed_at_the_next_start_and_live_ones_kept() {
    let scratch = Scratch::new("stale");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    let launch = || Program::service().env("MEMPROF_DIR", &parent);

    // A dump of the heap as it is makes the directory, and leaves no profile in it once read.
    let mut killed = launch().spawn();
    assert_eq!(killed.get("/memory-profiler/heap_profile?trigger_dump=true").status, 200);
    let killed_directory = profile_directory(&killed);
    killed.signal("KILL");
    killed.wait_for_exit();
    assert!(killed_directory.is_dir(), "SIGKILL leaves the directory, as nothing can run then");
    // Not memprof's: no owner on record.
    let unknown = parent.join("memprof.unknown");
    std::fs::create_dir(&unknown).unwrap();

    let alive = launch().spawn();
    alive.wait_for_line(|line| {
        line == format!(
            "[memprof] INFO Removed 1 profile directory left in {} by memprof processes that no longer run, with nothing worth keeping",
            parent.display()
        )
    });
    assert!(!killed_directory.exists());
    start(&alive, "1mins");
    alive.get_json("/memory-profiler/stop");
    let alive_directory = profile_directory(&alive);

    // A live process's directory is never touched.
    let next = launch().spawn();
    start(&next, "1mins");
    assert!(alive_directory.is_dir() && unknown.is_dir());
    assert!(
        !next.output().iter().any(|line| line.contains("Removed") || line.contains("Kept")),
        "{:#?}",
        next.output()
    );
    assert_eq!(alive.get("/memory-profiler/download/raw").status, 200, "the live service's profile is untouched");
}

/// `let _ = memprof::start(...)` drops the guard at once: memprof has shut down, so a later run is refused
/// with a message that names the mistake, and no profile directory is left behind.
#[test]
fn a_dropped_guard_refuses_later_runs_and_leaves_nothing() {
    let scratch = Scratch::new("dropped-guard");
    let output = std::process::Command::new(built_binary("dropped_guard"))
        .env("MEMPROF_DIR", scratch.join(""))
        .env_remove("MALLOC_CONF")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with("refused: memprof has shut down (memprof::shutdown was called, or the guard memprof::start returned was dropped: keep it in a variable until main returns, `let _memprof = memprof::start(...)`, not `let _ = ...`)"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_dir(scratch.join("")).unwrap().count(), 0, "nothing is left in MEMPROF_DIR");
}

/// A child of `fork` is not memprof's: ten children returning from `main` in a row (dropping the guard)
/// while the endpoints are kept busy all end (none waits for a lock a thread of the parent held at the
/// fork), and the parent's profile directory is as it was, its run still downloadable; SIGTERM ends a
/// forked child at once although memprof ends on it first in the parent (`dump_on_sigterm`, whose thread
/// the child has not); children of `std::process::Command` end as they would without memprof.
#[test]
fn forked_children_leave_the_parents_memprof_alone_and_die_of_sigterm() {
    let program = Program::windows().spawn();
    program.wait_for_line(|line| line == "windows: ready");
    let run = start(&program, "1mins");
    program.tell("grow", "windows: done grow");
    program.get_json("/memory-profiler/stop");
    let directory = profile_directory(&program);
    let files = || {
        let mut names: Vec<_> =
            std::fs::read_dir(&directory).unwrap().map(|entry| entry.unwrap().file_name()).collect();
        names.sort();
        names
    };
    let before = files();
    assert!(before.len() > 2, "{before:?}");

    let busy = std::sync::atomic::AtomicBool::new(true);
    let answered = std::thread::scope(|scope| {
        let requests = scope.spawn(|| {
            let mut answered = 0;
            while busy.load(std::sync::atomic::Ordering::Relaxed) {
                assert_eq!(program.get("/memory-profiler/state").status, 200);
                assert_eq!(program.get(&format!("/memory-profiler/download/text?id={run}")).status, 200);
                answered += 2;
            }
            answered
        });
        program.tell("children 10", "windows: done children 10");
        busy.store(false, std::sync::atomic::Ordering::Relaxed);
        requests.join().unwrap()
    });
    assert!(answered > 0);
    assert!(
        program.output().iter().any(|line| line == "windows: children 10 ended, 0 hung"),
        "{:#?}",
        program.output()
    );
    // The parent's own automatic dumps may add files meanwhile; none of its files goes.
    let kept = |now: Vec<std::ffi::OsString>| before.iter().all(|name| now.contains(name));
    assert!(kept(files()), "the parent's profile directory lost files: {before:?} then {:?}", files());
    let text = program.get(&format!("/memory-profiler/download/text?id={run}"));
    assert_eq!(text.status, 200, "{}", text.text());
    assert!(text.text().contains("grown_in_the_window"), "{}", text.text());

    program.tell("sigterm-child", "windows: done sigterm-child");
    let ended = program.output().into_iter().find(|line| line.starts_with("windows: child ")).unwrap();
    let millis: u64 = ended
        .strip_prefix("windows: child ended by signal 15 in ")
        .and_then(|rest| rest.strip_suffix(" ms")?.parse().ok())
        .unwrap_or_else(|| panic!("{ended}"));
    assert!(millis < 1000, "{ended}");

    program.tell("command-child", "windows: done command-child");
    let said = "windows: command children: sleep ended by signal 15, true exited with 0";
    assert!(program.output().iter().any(|line| line == said), "{:#?}", program.output());
    assert!(kept(files()), "{before:?} then {:?}", files());
}
