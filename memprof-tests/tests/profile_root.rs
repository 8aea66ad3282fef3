//! The profile root is not memprof's alone: what anyone who can write there as the service's user puts in
//! a dead process's directory (a FIFO or a link as its owner file, a link to a secret, a FIFO, a directory
//! or a 10 GiB sparse file as a profile, a second name for one id, hundreds of dead directories) must
//! neither stall nor grow the next start, nor be served. Real processes, real files.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use memprof_tests::acceptance::{start, wait_until_idle};
use memprof_tests::process::{Launch, Program, built_binary};
use memprof_tests::tools::Scratch;

/// A scratch directory with an empty profile root in it.
fn profile_root(name: &str) -> (Scratch, PathBuf) {
    let scratch = Scratch::new(name);
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    (scratch, parent)
}

/// The service keeping its profiles in `parent`.
fn service_in(parent: &Path) -> Launch {
    // On demand: what an earlier process kept is its runs alone (sampled continuously, automatic dumps are
    // on by default and kept beside them: tests/automatic_dumps.rs).
    Program::service().env("MEMPROF_DIR", parent).env("MEMPROF_SAMPLING", "on-demand")
}

/// The directory a killed service left in `parent`, with its finished run's profile; and the run's id.
fn killed_directory(parent: &Path) -> (PathBuf, u64) {
    let mut killed = service_in(parent).spawn();
    let id = start(&killed, "2secs");
    wait_until_idle(&killed);
    let directory = PathBuf::from(killed.state().tmp_dir);
    killed.signal("KILL");
    killed.wait_for_exit();
    (directory, id)
}

fn mkfifo(path: &Path) {
    let name = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

fn rss_kilobytes(program: &Program) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", program.pid())).unwrap();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_fifo_or_a_link_as_an_owner_file_neither_stalls_nor_grows_the_next_start() {
    let (_scratch, parent) = profile_root("root-owner");
    let (fifo_owner, _) = killed_directory(&parent);
    std::fs::remove_file(fifo_owner.join("owner")).unwrap();
    mkfifo(&fifo_owner.join("owner"));
    let (zero_owner, _) = killed_directory(&parent);
    std::fs::remove_file(zero_owner.join("owner")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_owner.join("owner")).unwrap();

    // `spawn` waits (with a deadline) for the endpoints: the start did not block.
    let restarted = service_in(&parent).spawn();
    restarted.wait_for_line(|line| line.contains("Left 2 profile directories in ") && line.contains(" alone: "));
    assert_eq!(restarted.get("/memory-profiler/state").status, 200);
    assert!(rss_kilobytes(&restarted) < 200 * 1024, "{} KiB", rss_kilobytes(&restarted));
    // Neither directory can be judged: both are left alone, listed nowhere.
    assert!(fifo_owner.is_dir() && zero_owner.is_dir());
    let state = restarted.state();
    assert!(state.earlier_processes.is_empty(), "{state:#?}");
}

#[test]
fn only_regular_profiles_named_as_memprof_names_them_are_listed_and_served() {
    let (scratch, parent) = profile_root("root-profiles");
    let (directory, id) = killed_directory(&parent);
    let record = std::fs::read_to_string(directory.join(format!("profile.{id}.json"))).unwrap();
    let secret = scratch.join("secret");
    std::fs::write(&secret, "root:TOP-SECRET-HASH:19000:0:99999:7:::\n").unwrap();
    // Each planted profile has a record claiming it is the newest, so a sweep that took it would list it.
    let plant = |name: &str, make: &dyn Fn(&Path)| {
        let fake_id: u64 = name.split('.').nth(1).unwrap().parse().unwrap();
        make(&directory.join(format!("{name}.heap")));
        let planted =
            record.replace(&id.to_string(), &fake_id.to_string()).replace("\"stopped\":", "\"stopped\":1e11,\"x\":");
        std::fs::write(directory.join(format!("{name}.json")), planted).unwrap();
    };
    plant("automatic.7", &|path| std::os::unix::fs::symlink(&secret, path).unwrap());
    plant("automatic.8", &|path| mkfifo(path));
    plant("automatic.9", &|path| std::fs::create_dir(path).unwrap());
    plant("automatic.10", &|path| std::fs::File::create(path).unwrap().set_len(10 << 30).unwrap());
    let real = std::fs::read(directory.join(format!("profile.{id}.heap"))).unwrap();
    plant("automatic.011", &|path| std::fs::write(path, &real).unwrap());

    let restarted = service_in(&parent).spawn();
    let state = restarted.state();
    let listed: Vec<u64> = state
        .earlier_processes
        .iter()
        .flat_map(|process| &process.profiles)
        .map(|profile| profile.profile.id)
        .collect();
    assert_eq!(listed, [id], "{state:#?}");
    for planted in [7, 8, 9, 10, 11] {
        for format in ["raw", "text"] {
            let download = restarted.get(&format!("/memory-profiler/download/{format}?id={planted}"));
            assert_eq!(download.status, 404, "{format} of {planted}: {}", download.text());
            assert!(!download.text().contains("TOP-SECRET"));
        }
    }
    assert_eq!(restarted.get(&format!("/memory-profiler/download/text?id={id}")).status, 200);
    // A profile swapped for a link after the listing is not followed either.
    std::fs::remove_file(directory.join(format!("profile.{id}.heap"))).unwrap();
    std::os::unix::fs::symlink(&secret, directory.join(format!("profile.{id}.heap"))).unwrap();
    let raw = restarted.get(&format!("/memory-profiler/download/raw?id={id}"));
    assert_ne!(raw.status, 200);
    assert!(!raw.text().contains("TOP-SECRET"), "{}", raw.text());
    assert!(rss_kilobytes(&restarted) < 200 * 1024);
}

#[test]
fn hundreds_of_dead_directories_are_swept_under_a_low_open_files_limit() {
    let (_scratch, parent) = profile_root("root-many");
    let (directory, _) = killed_directory(&parent);
    // The dead owner's file in 600 directories with nothing worth keeping.
    let owner = std::fs::read(directory.join("owner")).unwrap();
    std::fs::remove_dir_all(&directory).unwrap();
    for index in 0..600 {
        let dead = parent.join(format!("memprof.dead{index:03}"));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join("owner"), &owner).unwrap();
        std::fs::write(dead.join(".snapshot.1.heap.partial"), "heap_v2/").unwrap();
    }
    let service = built_binary("service");
    let restarted = Launch::new("/bin/sh")
        .args(["-c", &format!("ulimit -n 256 && exec {}", service.display())])
        .env("MEMPROF_DIR", &parent)
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .spawn();
    restarted.wait_for_line(|line| line.contains("Removed 600 profile directories left in "));
    let left = std::fs::read_dir(&parent)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().starts_with("memprof.dead"))
        .count();
    assert_eq!(left, 0);
}
