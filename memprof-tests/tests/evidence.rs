//! What a process that ended without cleaning up leaves for the next one: the heap before an OOM kill,
//! served after the restart in every format; never a live process's profiles, even in another PID
//! namespace; bounded across processes; cleared on request.

use std::path::{Path, PathBuf};

use memprof_tests::acceptance::{start, wait_until_idle};
use memprof_tests::process::{Launch, PATIENCE, Program, built_binary};
use memprof_tests::tools::{self, Scratch};
use memprof_tests::waiting::wait_until;

/// The service keeping its profiles in `parent`.
fn service_in(parent: &Path) -> Launch {
    // On demand: what an earlier process kept is its runs alone (sampled continuously, automatic dumps are
    // on by default and kept beside them: tests/automatic_dumps.rs).
    Program::service().env("MEMPROF_DIR", parent).env("MEMPROF_SAMPLING", "on-demand")
}

/// A finished two-second run's profile directory.
fn directory_with_a_run(service: &Program) -> PathBuf {
    start(service, "2secs");
    wait_until_idle(service);
    service.state().tmp_dir.into()
}

fn earlier(service: &Program) -> Vec<memprof_wire::EarlierProcess> {
    service.state().earlier_processes
}

/// Waits until nobody holds the lock on `directory`'s owner file (its process ended).
fn wait_until_unlocked(directory: &Path) {
    wait_until(&format!("{}'s owner file to be unlocked", directory.display()), PATIENCE, || {
        let free =
            std::process::Command::new("flock").args(["-n", "-x"]).arg(directory.join("owner")).arg("true").status();
        if free.as_ref().is_ok_and(|status| status.success()) { Ok(()) } else { Err(format!("{free:?}")) }
    });
}

#[test]
fn a_killed_processs_latest_run_is_served_after_the_restart_until_cleared() {
    let scratch = Scratch::new("evidence-kill");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    let mut killed = service_in(&parent).spawn();
    directory_with_a_run(&killed);
    let directory = directory_with_a_run(&killed);
    let killed_pid = killed.pid();
    killed.signal("KILL");
    killed.wait_for_exit();

    let restarted = service_in(&parent).spawn();
    restarted.wait_for_line(|line| {
        line.starts_with("[memprof] WARN Kept 1 profile of 1 earlier process that ended without cleaning up (killed or crashed), in ")
    });
    let processes = earlier(&restarted);
    assert_eq!(processes.len(), 1, "{processes:#?}");
    assert_eq!(processes[0].pid, killed_pid);
    let profiles = &processes[0].profiles;
    assert_eq!(profiles.len(), 1, "only the newest run is kept: {profiles:#?}");
    assert_eq!((profiles[0].profile.started_by.as_str(), profiles[0].same_build), ("http", true));
    let id = profiles[0].profile.id;
    for format in ["text", "collapsed", "flamegraph", "graph", "pprof", "raw"] {
        let download = restarted.get(&format!("/memory-profiler/download/{format}?id={id}"));
        assert_eq!(download.status, 200, "{format}: {}", download.text());
    }
    let text = restarted.get(&format!("/memory-profiler/download/text?id={id}")).text();
    assert!(text.contains("% service::open_session\n"), "{text}");
    // Before the new process has a profile of its own, the newest is the one the killed process left.
    let newest = restarted.get("/memory-profiler/download/raw");
    assert_eq!(newest.status, 200, "{}", newest.text());
    assert_eq!(newest.body, restarted.get(&format!("/memory-profiler/download/raw?id={id}")).body);

    // The operator's tool lists them and downloads them by id.
    let cli = |arguments: &[&str]| {
        let output = std::process::Command::new(built_binary("memprof-tool"))
            .args(["--url", &format!("http://{}", restarted.address())])
            .args(arguments)
            .env_remove("MEMPROF_TOKEN")
            .output()
            .unwrap();
        assert!(output.status.success(), "{arguments:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    assert_eq!(cli(&["earlier"]), format!("process {killed_pid} ({})\n  {id} (http)\n", directory.display()));
    assert!(
        cli(&["state"]).contains("earlier processes: 1 ended without cleaning up, 1 profiles kept (memprof earlier)\n")
    );
    assert!(cli(&["download", "--id", &id.to_string()]).contains("% service::open_session\n"));

    // Cleared on request (POST only): the directory goes.
    assert_eq!(restarted.get("/memory-profiler/clear_earlier").status, 405);
    assert_eq!(cli(&["clear-earlier"]), "Deleted 1 profile of earlier processes\n");
    assert!(earlier(&restarted).is_empty());
    assert!(!directory.exists());
    assert_eq!(restarted.get(&format!("/memory-profiler/download/raw?id={id}")).status, 404);
}

/// The last-seen note in `directory`, once it satisfies `wanted` (it is rewritten every 5 s).
fn last_seen_when(directory: &Path, wanted: impl Fn(&memprof_wire::LastSeen) -> bool) -> memprof_wire::LastSeen {
    wait_until(&format!("such a last-seen note in {}", directory.display()), PATIENCE, || {
        let bytes = std::fs::read(directory.join("last-seen.json")).map_err(|error| error.to_string())?;
        let note: memprof_wire::LastSeen = serde_json::from_slice(&bytes).map_err(|error| error.to_string())?;
        if wanted(&note) { Ok(note) } else { Err(format!("{note:?}")) }
    })
}

#[test]
fn a_run_active_at_a_kill_is_reported_lost_and_the_older_profile_is_captioned_against_the_end() {
    let scratch = Scratch::new("evidence-lost-run");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    let mut killed = service_in(&parent).spawn();
    let directory = directory_with_a_run(&killed);
    let older = killed.state().latest_run.expect("a latest run").id;
    let active = start(&killed, "1mins");
    let seen = last_seen_when(&directory, |note| note.active_run.as_ref().map(|run| run.id) == Some(active));
    let killed_pid = killed.pid();
    killed.signal("KILL");
    killed.wait_for_exit();

    let restarted = service_in(&parent).spawn();
    let processes = earlier(&restarted);
    assert_eq!(processes.len(), 1, "{processes:#?}");
    let process = &processes[0];
    assert_eq!(process.pid, killed_pid);
    assert_eq!(process.last_seen.as_ref(), Some(&seen), "the last-seen note survives the restart");
    assert!(seen.allocated_bytes > 1 << 20 && seen.rss_bytes > 1 << 20);
    assert_eq!(process.lost_run.as_ref().map(|run| run.id), Some(active), "{process:#?}");
    let profile = &process.profiles[0];
    assert_eq!(profile.profile.id, older);
    let before_end = profile.before_end_seconds.unwrap();
    let expected = seen.time - profile.profile.stopped;
    assert!((before_end - expected).abs() < 0.01 && before_end > 0.0, "{before_end} against {expected}");
    assert!(profile.allocated_bytes.is_some_and(|bytes| bytes > 1 << 20), "{profile:#?}");
    let caption = &process.caption;
    for said in [
        format!(
            "The previous process ({killed_pid}) was killed or crashed: it ended without cleaning up. It was last seen with "
        ),
        " Its newest profile (http) was taken ".to_owned(),
        format!(" Run {active} (started by http, "),
        " was active when it ended and is lost: a run's profile is written when the run stops.".to_owned(),
        " sampled continuously (MEMPROF_SAMPLING=continuous), memprof dumps the heap by itself".to_owned(),
    ] {
        assert!(caption.contains(&said), "{said:?} is not in {caption:?}");
    }
}

/// The last-seen note is written when a run starts (not only every 5 s): a run started just before a
/// `kill -9` is named after the restart, and its directory is kept as evidence.
#[test]
fn a_run_started_just_before_a_kill_is_named_after_the_restart() {
    let scratch = Scratch::new("evidence-quick-kill");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    let mut killed = service_in(&parent).spawn();
    let active = start(&killed, "1mins");
    killed.signal("KILL");
    killed.wait_for_exit();
    let restarted = service_in(&parent).spawn();
    let processes = earlier(&restarted);
    assert_eq!(processes.len(), 1, "{processes:#?}");
    assert_eq!(processes[0].lost_run.as_ref().map(|run| run.id), Some(active), "{processes:#?}");
}

#[test]
fn a_profile_of_another_build_is_served_raw_and_not_symbolized() {
    let scratch = Scratch::new("evidence-build");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    let mut killed = service_in(&parent).spawn();
    let directory = directory_with_a_run(&killed);
    killed.signal("KILL");
    killed.wait_for_exit();
    // As if the program had been upgraded since: the record beside the profile names another build.
    let record = std::fs::read_dir(&directory)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("profile.") && name.ends_with(".json")
        })
        .expect("a record beside the profile");
    let mut fields: memprof_wire::Provenance = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(fields.binary, Some(built_binary("service").canonicalize().unwrap().display().to_string()));
    assert!(fields.build_id.as_ref().is_some_and(|id| id.len() >= 16), "{fields:?}");
    fields.build_id = Some("0123456789abcdef0123456789abcdef".to_owned());
    std::fs::write(&record, serde_json::to_vec(&fields).unwrap()).unwrap();

    let restarted = service_in(&parent).spawn();
    let processes = earlier(&restarted);
    let profile = &processes[0].profiles[0];
    assert!(!profile.same_build);
    let id = profile.profile.id;
    let text = restarted.get(&format!("/memory-profiler/download/text?id={id}"));
    assert_eq!(text.status, 409);
    assert!(
        text.text().starts_with(&format!("Profile {id} was written by another build of this program (")),
        "{}",
        text.text()
    );
    assert!(text.text().contains("memprof analyze --binary"), "{}", text.text());
    assert_eq!(restarted.get(&format!("/memory-profiler/download/raw?id={id}")).status, 200);
}

/// A live process in another PID namespace (another container sharing the volume, say) keeps its
/// profiles: its pid means nothing here, but it holds the lock on its directory. Once it is killed, the
/// next start treats its directory as ended.
#[test]
fn a_live_process_in_another_pid_namespace_keeps_its_profiles() {
    let scratch = Scratch::new("evidence-namespace");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    let probe = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--kill-child", "true"])
        .status();
    if !probe.is_ok_and(|status| status.success()) {
        tools::skipped("cannot make a PID namespace here (`unshare --pid` needs root)");
        return;
    }
    let mut contained = Launch::new("unshare")
        .args([
            OsArg::from("--pid"),
            "--fork".into(),
            "--mount-proc".into(),
            "--kill-child".into(),
            built_binary("service").into(),
        ])
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .env("MEMPROF_DIR", &parent)
        .spawn();
    let directory = directory_with_a_run(&contained);

    let outside = service_in(&parent).spawn();
    start(&outside, "1mins");
    assert!(directory.is_dir(), "the contained process's directory was judged ended");
    assert!(earlier(&outside).is_empty());
    assert!(
        !outside.output().iter().any(|line| line.contains("Removed") || line.contains("Kept")),
        "{:#?}",
        outside.output()
    );
    assert_eq!(contained.get("/memory-profiler/download/raw").status, 200, "its profile is still there");

    contained.signal("KILL");
    contained.wait_for_exit();
    wait_until_unlocked(&directory);
    let next = service_in(&parent).spawn();
    let processes = earlier(&next);
    assert_eq!(processes.len(), 1, "{processes:#?}");
    assert_eq!(processes[0].directory, directory.display().to_string());
}

type OsArg = std::ffi::OsString;

/// A memory cgroup made for one test (v2 `memory.max`, else v1 `memory.limit_in_bytes`), removed when
/// dropped.
struct MemoryCgroup(PathBuf);

impl MemoryCgroup {
    /// A cgroup limited to `bytes`, below this process's own; `None` (with the reason given to
    /// [`tools::skipped`]) where none can be made.
    fn make(name: &str, bytes: u64) -> Option<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let unified = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
        let (base, limit_file) = if unified.split_whitespace().any(|controller| controller == "memory") {
            let own = own.lines().find_map(|line| line.strip_prefix("0::")).unwrap_or("/");
            (format!("/sys/fs/cgroup{own}"), "memory.max")
        } else {
            let own = own.lines().find_map(|line| line.split_once(":memory:").map(|(_, path)| path));
            (format!("/sys/fs/cgroup/memory{}", own.unwrap_or("/")), "memory.limit_in_bytes")
        };
        let path = PathBuf::from(base.trim_end_matches('/')).join(format!("{name}-{}", std::process::id()));
        let made = std::fs::create_dir(&path).and_then(|()| std::fs::write(path.join(limit_file), bytes.to_string()));
        match made {
            Ok(()) => Some(Self(path)),
            Err(error) => {
                let _ = std::fs::remove_dir(&path);
                tools::skipped(&format!("cannot make a memory cgroup at {} ({error})", path.display()));
                None
            }
        }
    }

    /// `program` started inside the cgroup (a shell joins it, then becomes the program).
    fn launch(&self, program: &Path) -> Launch {
        Launch::new("/bin/sh").args([
            OsArg::from("-c"),
            "echo $$ > \"$0/cgroup.procs\" && exec \"$1\"".into(),
            self.0.clone().into(),
            program.into(),
        ])
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Runs `grow` in `cgroup` until the kernel kills it, dumping at 80 % of the limit into `parent`.
fn grown_until_killed(cgroup: &MemoryCgroup, parent: &Path, keep: &str) {
    let mut grow = cgroup
        .launch(&built_binary("grow"))
        .env("MEMPROF_DIR", parent)
        .env("MEMPROF_DUMP_AT_RESIDENT", "80%")
        // 40 MiB between 80 % and the limit take 1.6 s: the resident size, read every second, is seen there.
        .env("GROW_EVERY_MS", "40")
        .env("MEMPROF_DUMP_KEEP", keep)
        .env("MALLOC_CONF", "prof_active:true,lg_prof_sample:16")
        .spawn();
    let status = grow.wait_for_exit();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "the kernel's OOM killer ends it: {status:?}\n{:#?}", grow.output());
    assert!(
        grow.output().iter().any(|line| line.starts_with("[memprof] INFO Automatic heap dump ")),
        "{:#?}",
        grow.output()
    );
}

#[test]
fn the_heap_before_an_oom_kill_survives_the_restart_and_kills_stay_within_the_bounds() {
    let Some(cgroup) = MemoryCgroup::make("memprof-oom", 200 << 20) else { return };
    let scratch = Scratch::new("evidence-oom");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    grown_until_killed(&cgroup, &parent, "2");

    let restarted = || {
        Launch::new(built_binary("grow"))
            .env("GROW", "0")
            .env("MEMPROF_DIR", &parent)
            .env("LIBPROCESS_MEMORY_PROFILING", "true")
            .env("MEMPROF_HTTP", "127.0.0.1:0")
    };
    let service = restarted().spawn();
    let said = service.wait_for_line(|line| line.contains("earlier process that ended without cleaning up"));
    assert!(said.contains("(automatic: resident "), "{said}");
    assert!(said.contains("% of the 200 MiB limit)"), "{said}");
    let processes = earlier(&service);
    let why = processes[0].why.as_deref().unwrap();
    assert!(
        why.starts_with("most likely killed for memory (the OOM killer): its last dump was taken as its resident "),
        "{why}"
    );
    // Sampled continuously (prof_active:true), the growth may be kept beside the dump, and newer than it.
    let profiles = &processes[0].profiles;
    let profile = profiles
        .iter()
        .find(|profile| profile.profile.started_by.starts_with("automatic: resident "))
        .unwrap_or_else(|| panic!("{profiles:#?}"));
    let reason = &profile.profile.started_by;
    assert!(reason.ends_with(" crossed 80% of the 200 MiB limit"), "{reason}");
    let id = profile.profile.id;
    let text = service.get(&format!("/memory-profiler/download/text?id={id}")).text();
    let top = text.lines().nth(1).unwrap_or_default();
    assert!(top.ends_with(" grow::grow_cache"), "the growing function is on top:\n{text}");
    let pprof = service.get(&format!("/memory-profiler/download/pprof?id={id}"));
    assert_eq!(pprof.status, 200);
    if let Some(report) = tools::pprof_top(&pprof.body, "inuse_space") {
        assert!(report.lines().any(|line| line.ends_with("grow::grow_cache")), "{report}");
    }
    drop(service);

    // Two more kills: what the three processes left stays within MEMPROF_DUMP_KEEP=2, newest first.
    grown_until_killed(&cgroup, &parent, "2");
    grown_until_killed(&cgroup, &parent, "2");
    let service = restarted().env("MEMPROF_DUMP_KEEP", "2").spawn();
    let kept: usize = earlier(&service).iter().map(|process| process.profiles.len()).sum();
    assert_eq!(kept, 2, "{:#?}", earlier(&service));
}

/// Sampled continuously with no `MEMPROF_DUMP_*` at all, a process that grows for some 20 s until the OOM
/// killer ends it leaves the heap at 90 % of its limit and, beside it, what grew steadily over the
/// record's readings; the restarted process lists both and names the growing function in each.
#[test]
fn sampled_continuously_an_oom_killed_process_leaves_its_heap_and_what_grew_unasked() {
    let Some(cgroup) = MemoryCgroup::make("memprof-oom-continuous", 200 << 20) else { return };
    let scratch = Scratch::new("evidence-oom-continuous");
    let parent = scratch.join("profiles");
    std::fs::create_dir(&parent).unwrap();
    let mut grow = cgroup
        .launch(&built_binary("grow"))
        .env("MEMPROF_DIR", &parent)
        .env("MEMPROF_SAMPLING", "continuous")
        // 10 MiB a second: the record's readings (every 5 s) see it grow for some 20 s.
        .env("GROW_EVERY_MS", "100")
        .spawn();
    let status = grow.wait_for_exit();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "the kernel's OOM killer ends it: {status:?}\n{:#?}", grow.output());
    let service = Launch::new(built_binary("grow"))
        .env("GROW", "0")
        .env("MEMPROF_DIR", &parent)
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .spawn();
    let processes = earlier(&service);
    let profiles = &processes[0].profiles;
    let named = |part: &str| {
        profiles
            .iter()
            .find(|profile| profile.profile.started_by.contains(part))
            .unwrap_or_else(|| panic!("no profile started by ...{part}...: {profiles:#?}"))
    };
    let dump = named(" crossed 90% of the 200 MiB limit");
    // Each automatic dump may have its growth beside it (a high-water dump can come just before or after
    // the 90 % one): the one beside the 90 % dump is there.
    let beside = format!(", beside dump {}", dump.profile.id);
    let growth = named(&beside);
    assert!(growth.profile.started_by.starts_with("automatic: growth over the last "), "{growth:#?}");
    for profile in [dump, growth] {
        let text = service.get(&format!("/memory-profiler/download/text?id={}", profile.profile.id)).text();
        let top = text.lines().nth(1).unwrap_or_default();
        assert!(top.ends_with(" grow::grow_cache"), "the growing function is on top:\n{text}");
    }
}
