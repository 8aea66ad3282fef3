//! Where the real example service keeps its profiles when no directory is writable: in memory.

use memprof_tests::process::Program;

#[test]
fn profiles_are_kept_in_memory_when_no_directory_is_writable() {
    let service = Program::service().env("MEMPROF_DIR", "/proc/memprof-read-only").spawn();
    let id = service.get_json("/memory-profiler/start?duration=1mins")["id"].as_u64().unwrap();
    let stopped = service.get_json("/memory-profiler/stop");
    assert_eq!(stopped["id"].as_u64(), Some(id));
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
