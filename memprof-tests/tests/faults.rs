//! Faults the profiler survives: a full or read-only disk, its directory deleted, clients that go away, a timer that
//! fires while `stop` is served, samples taken where glibc holds a lock. Each time: a clear error, a consistent
//! state, the next run works, and the latest good profile is still there.

use std::io::{Read, Write};
use std::process::Command;

use memprof_tests::process::Program;
use memprof_tests::tools::Scratch;

fn run(service: &Program) -> memprof_tests::http::Response {
    service.get_json("/memory-profiler/start?duration=1mins");
    service.get("/memory-profiler/stop")
}

/// A small tmpfs, unmounted when dropped; `None` (with the reason printed) where mounting is not allowed.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(path: std::path::PathBuf, size: &str) -> Option<Self> {
        std::fs::create_dir_all(&path).unwrap();
        let mounted =
            Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&path).status();
        if mounted.is_ok_and(|status| status.success()) {
            Some(Self(path))
        } else {
            memprof_tests::tools::skipped("cannot mount a tmpfs here (needs root) for the full-disk check");
            None
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

impl SmallDisk {
    /// Makes the disk read-only (`true`) or writable again, as an administrator would with `mount -o remount`.
    fn set_read_only(&self, read_only: bool) {
        let option = if read_only { "remount,ro" } else { "remount,rw" };
        let status = Command::new("mount").args(["-o", option]).arg(&self.0).status().unwrap();
        assert!(status.success(), "mount -o {option} failed");
    }
}

/// On a disk that `break_disk` makes refuse writes, a run's profile cannot be written: `stop` says so
/// (with `reason` in the message), the previous profile stays available, no partial file is left, and
/// once `repair_disk` has run the next run works.
fn a_disk_refusing_writes_fails_one_run(
    name: &str,
    reason: &str,
    break_disk: impl FnOnce(&SmallDisk),
    repair_disk: impl FnOnce(&SmallDisk),
) {
    let scratch = Scratch::new(name);
    let Some(disk) = SmallDisk::mount(scratch.join("disk"), "2m") else { return };
    // On demand: sampling continuously, automatic dumps (on by default) would write to the broken disk too,
    // and the previous profile could be one of them.
    let service = Program::service().env("MEMPROF_DIR", &disk.0).env("MEMPROF_SAMPLING", "on-demand").spawn();
    let first = run(&service);
    assert_eq!(first.status, 200, "{}", first.text());
    let first = first.parsed::<memprof_wire::Started>("start").id;

    let directory = service.state().tmp_dir;
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(&directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    // The first profile's files: its dump and record, and its label table when the service had labelled
    // an allocation by then.
    let before = files();
    assert!(before.contains(&format!("profile.{first}.heap")), "{before:?}");

    let id = service.start("?duration=1mins").id;
    break_disk(&disk);
    let failed = service.get("/memory-profiler/stop");
    assert_eq!(failed.status, 500, "{}", failed.text());
    let message = failed.text();
    assert!(message.starts_with(&format!("The heap profile of run {id} could not be written: ")), "{message}");
    assert!(message.contains(reason), "{message}");
    assert!(message.ends_with(&format!("the previous profile (id {first}) is still available.\n")), "{message}");
    let state = service.whole_state();
    assert_eq!(state.memory_profiler.last_failure.map(|failure| failure.id), Some(id));
    assert_eq!(state.memory_profiler.current_run.id(), None);
    assert!(!state.jemalloc.profiling_active);
    assert!(service.get(&format!("/memory-profiler/download/raw?id={first}")).text().starts_with("heap_v2/"));
    assert_eq!(files(), before, "no partial file left");

    repair_disk(&disk);
    let after = run(&service);
    assert_eq!(after.status, 200, "{}", after.text());
    drop(service);
}

#[test]
fn a_full_disk_fails_one_run_clearly_and_keeps_the_previous_profile() {
    let filler = |disk: &SmallDisk| disk.0.join("filler");
    a_disk_refusing_writes_fails_one_run(
        "full-disk",
        "its file system has ",
        |disk| {
            // Fill the disk but for a few bytes.
            let mut file = std::fs::File::create(filler(disk)).unwrap();
            while file.write_all(&[0; 4096]).is_ok() {}
            let _ = file.sync_all();
        },
        |disk| std::fs::remove_file(filler(disk)).unwrap(),
    );
}

#[test]
fn a_read_only_profile_directory_fails_one_run_clearly_and_keeps_the_previous_profile() {
    a_disk_refusing_writes_fails_one_run(
        "read-only-disk",
        "Read-only file system",
        |disk| disk.set_read_only(true),
        |disk| disk.set_read_only(false),
    );
}

#[test]
fn a_deleted_profile_directory_is_made_again() {
    let service = Program::service().spawn();
    let first = run(&service).parsed::<memprof_wire::Started>("start").id;
    let directory = service.state().tmp_dir;
    std::fs::remove_dir_all(&directory).unwrap();
    let gone = service.get(&format!("/memory-profiler/download/raw?id={first}"));
    assert_eq!(gone.status, 500);
    assert!(
        gone.text()
            .starts_with(&format!("Cannot read the profile of run {first} at {directory}/profile.{first}.heap (")),
        "{}",
        gone.text()
    );
    let second = run(&service);
    assert_eq!(second.status, 200, "{}", second.text());
    let second = second.parsed::<memprof_wire::Started>("start").id;
    let download = service.get(&format!("/memory-profiler/download/raw?id={second}"));
    assert!(download.text().starts_with("heap_v2/"));
}

#[test]
fn clients_that_go_away_mid_download_harm_nothing() {
    let service = finely_sampled();
    let id = run(&service).parsed::<memprof_wire::Started>("start").id;
    let raw = service.get(&format!("/memory-profiler/download/raw?id={id}"));
    for target in
        [format!("/memory-profiler/download/raw?id={id}"), format!("/memory-profiler/download/flamegraph?id={id}")]
    {
        for _ in 0..8 {
            let mut stream = std::net::TcpStream::connect(service.address()).unwrap();
            write!(stream, "GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
            let mut first_bytes = [0; 64];
            let _ = stream.read(&mut first_bytes);
            drop(stream);
        }
    }
    assert_eq!(service.get("/memory-profiler/state").status, 200);
    // The profile is intact, and renders.
    assert_eq!(service.get(&format!("/memory-profiler/download/raw?id={id}")).body, raw.body);
    let text = service.get(&format!("/memory-profiler/download/text?id={id}"));
    assert!(text.status == 200 && text.text().starts_with("Total: "), "{}: {}", text.status, text.text());
}

#[test]
fn a_timer_firing_while_stop_is_served_ends_the_run_once() {
    let service = Program::service().spawn();
    for _ in 0..5 {
        let id = service.start("?duration=1secs").id;
        // Stop requests hammer the run until after its timer fired.
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(1500);
        while std::time::Instant::now() < deadline {
            let stopped = service.get("/memory-profiler/stop");
            assert_eq!(stopped.status, 200, "{}", stopped.text());
        }
        let state = service.whole_state();
        assert_eq!(state.memory_profiler.current_run.id(), None);
        assert!(state.memory_profiler.last_failure.is_none(), "{state:?}");
        assert_eq!(state.memory_profiler.latest_run.map(|run| run.id), Some(id));
        // Sampled continuously (the default with the switch on), a run's end leaves sampling on.
        assert_eq!(state.jemalloc.profiling_active, state.memory_profiler.sampling.mode == "continuous");
    }
}

/// Sampling every allocation (`lg_prof_sample:0`) samples each new thread's first allocation, made inside
/// glibc's `pthread_getattr_np` (Rust calls it as a thread starts) while that holds the thread's own lock: the
/// stack walk must not take the lock again. Each request is a new connection, served by a new thread.
#[test]
fn threads_born_while_every_allocation_is_sampled_start_and_serve() {
    let service = Program::service().env("MALLOC_CONF", "lg_prof_sample:0").spawn();
    service.get_json("/memory-profiler/start?duration=1mins");
    for _ in 0..50 {
        assert!(service.whole_state().jemalloc.profiling_active);
    }
    let stopped = service.get("/memory-profiler/stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text());
}

fn finely_sampled() -> Program {
    Program::service().env("MALLOC_CONF", "lg_prof_sample:14").spawn()
}
