//! Where the real example service keeps its profiles when no directory is writable: in memory; and where
//! a program that drops root keeps them after.

use memprof_tests::http::PATIENCE;
use memprof_tests::process::Program;
use memprof_tests::waiting::wait_until;

#[test]
fn profiles_are_kept_in_memory_when_no_directory_is_writable() {
    let service = Program::service().env("MEMPROF_DIR", "/proc/memprof-read-only").spawn();
    let id = service.start("?duration=1mins").id;
    let stopped = service.stop();
    assert_eq!(stopped.id, Some(id));
    service.wait_for_line(|line| {
        line.starts_with("[memprof] WARN Heap profiles are kept in memory: cannot create a profile directory in /proc/memprof-read-only (")
            && line.ends_with("); point MEMPROF_DIR or TMPDIR at a writable directory")
    });
    assert_eq!(service.state().tmp_dir, "In memory (no writable directory)");
    assert!(service.get(&format!("/memory-profiler/download/raw?id={id}")).text().starts_with("heap_v2/"));
    let text = service.get(&format!("/memory-profiler/download/text?id={id}"));
    assert_eq!(text.status, 200, "{}", text.text());
    let dump = service.get("/memory-profiler/heap_profile?trigger_dump=true");
    assert!(dump.text().starts_with("heap_v2/"));
    // Past keep_runs (4), the oldest in-memory profile is freed like a file would be deleted.
    for _ in 0..4 {
        service.get_json("/memory-profiler/start?duration=1mins");
        service.get_json("/memory-profiler/stop");
    }
    assert_eq!(service.get(&format!("/memory-profiler/download/raw?id={id}")).status, 404);
}

/// A program that starts as root, makes its profile directory, then drops to nobody (as DNS servers,
/// proxies and many daemons do after binding) keeps working: the next run's profile goes where the process
/// can now write (a new directory, else memory), downloads with and without its id, `explain` answers,
/// an immediate dump and an automatic one are served, `state` says why profiles moved, and a run active
/// at SIGTERM leaves its final dump where the operator said (a path the new user can write). Before, every write failed
/// ("Permission denied"), the download said "no heap profile yet" and `state` said nothing.
#[test]
fn after_the_program_drops_root_runs_explain_and_dumps_still_work() {
    // SAFETY: reads the test's effective user id.
    if unsafe { libc::geteuid() } != 0 {
        memprof_tests::tools::skipped("dropping root needs root");
        return;
    }
    // Profiles go to memory where nothing can be made (the test's TMPDIR is root's), to a new directory
    // where one can (a shared directory, world-writable and sticky as /tmp is).
    let shared = memprof_tests::tools::Scratch::new("shared-profile-root");
    std::fs::set_permissions(shared.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let final_dump = shared.join("final.heap");
    for (launch, moved) in [
        (Program::windows(), "Heap profiles are kept in memory: the profile directory "),
        (
            Program::windows().env("MEMPROF_DIR", shared.path()).env("MEMPROF_FINAL_DUMP", &final_dump),
            "; profiles are kept in ",
        ),
    ] {
        let mut program = launch.env("MEMPROF_DUMP_EVERY", "8MiB").spawn();
        program.wait_for_line(|line| line == "windows: ready");
        let before = program.start("?duration=1mins").id;
        program.get_json("/memory-profiler/stop");
        assert_eq!(program.get(&format!("/memory-profiler/download/raw?id={before}")).status, 200);
        program.tell("drop-root", "windows: done drop-root");
        program.wait_for_line(|line| line == "windows: now uid 65534");
        let id = program.start("?duration=1mins").id;
        program.tell("grow", "windows: done grow");
        let stopped = program.stop();
        assert_eq!(stopped.id, Some(id), "{stopped:?}");
        for download in [format!("/memory-profiler/download/text?id={id}"), "/memory-profiler/download/text".to_owned()]
        {
            let text = program.get(&download);
            assert_eq!(text.status, 200, "{download}: {}", text.text());
            assert!(text.text().contains("grown_in_the_window"), "{download}: {}", text.text());
        }
        let explain = program.get("/memory-profiler/explain");
        assert_eq!(explain.status, 200, "{}", explain.text());
        let dump = program.get("/memory-profiler/heap_profile?trigger_dump=true");
        assert!(dump.text().starts_with("heap_v2/"), "{}", dump.text());
        let warnings = program.state().warnings;
        assert!(
            warnings.iter().any(|warning| warning.contains("can no longer be written") && warning.contains(moved)),
            "{moved}: {warnings:?}"
        );
        // The automatic dump of what was allocated since (16 MiB, past 8 MiB): taken after the drop, served.
        let automatic = wait_until("an automatic dump after the drop", PATIENCE, || {
            let dumps = program.state().automatic_dumps.dumps;
            dumps.into_iter().find(|dump| dump.id > id).ok_or_else(|| "none yet".to_owned())
        });
        let raw = program.get(&format!("/memory-profiler/download/raw?id={}", automatic.id));
        assert!(raw.text().starts_with("heap_v2/"), "{}", raw.text());
        if moved.starts_with("; ") {
            // A run active as SIGTERM ends the program leaves its final dump where the operator said.
            program.get_json("/memory-profiler/start?duration=1mins");
            program.signal("TERM");
            program.wait_for_exit();
            let left = std::fs::read_to_string(&final_dump).unwrap_or_default();
            assert!(left.starts_with("heap_v2/"), "{:#?}", program.output());
        }
    }
}
