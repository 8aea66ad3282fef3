//! `memprof::scope!` and `memprof::Run` in a real program: each run's profile, across panics and `?`.

use memprof_tests::process::Program;
use memprof_tests::tools::Scratch;

#[test]
fn scopes_and_runs_leave_profiles_and_nested_scopes_run_unprofiled() {
    let scratch = Scratch::new("scope");
    let keeping = Scratch::new("scope-kept");
    let kept = keeping.join("kept.heap");
    let mut program = Program::scope_example()
        .env("MEMPROF_SCOPES", "true")
        .env("TMPDIR", scratch.path())
        .env("KEEP_PROFILE", &kept)
        .spawn();
    assert!(program.wait(), "{:#?}", program.output());
    let output = program.output();

    let mut ids = Vec::new();

    for what in ["scope", "run", "panic", "early return"] {
        let line = output
            .iter()
            .find(|line| line.starts_with(&format!("{what}: run ")))
            .unwrap_or_else(|| panic!("{what}: {output:#?}"));
        let (id, rest) = line[what.len() + 6..].split_once(" at ").unwrap();
        let (path, header) = rest.split_once(' ').unwrap();
        assert!(path.starts_with(scratch.path().to_str().unwrap()), "{line}");
        assert!(path.ends_with(&format!("/profile.{id}.heap")), "{line}");
        assert_eq!(header, "(heap_v2/524288)", "{line}");
        ids.push(id.parse::<u64>().unwrap());
    }
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "four distinct runs in order: {ids:?}");

    let outer =
        output.iter().find_map(|line| line.strip_prefix("nested: inner ran unprofiled, outer is run ")).unwrap();
    assert!(
        output.contains(&format!(
            "[memprof] WARN memprof::scope!(\"inner\") runs unprofiled: Heap profiling run {outer} is already active; stop it or wait for it to end; one run profiles the whole process at a time, so concurrent blocks cannot each have their own: profile them together in one timed run (/memory-profiler/start) and tell them apart by their stacks"
        )),
        "{output:#?}"
    );
    assert!(output.contains(&"kept: 2 profiles on disk".to_owned()), "keep_runs = 2: {output:#?}");
    assert!(output.contains(&"done: 65536 32768 65536 Err(\"gave up after 8388608 bytes\")".to_owned()), "{output:#?}");
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0, "profiles removed when main returned");
    // But for the one saved elsewhere: the block's own profile.
    let saved = memprof::analysis::HeapProfile::parse(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    let functions = memprof_tests::heap::functions_in(&saved, &memprof_tests::process::built_binary("scope"));
    assert!(functions.iter().any(|name| name.contains("build_table")), "{functions:#?}");
}

/// Without `MEMPROF_SCOPES=true` or the endpoints' switch, `scope!` blocks run as plain blocks: no profile,
/// no message (a command-line tool run thousands of times a day pays nothing for them); the run the
/// example starts with `Run::start` still profiles, as code asked for it by name.
#[test]
fn scopes_profile_only_when_asked_at_run_time() {
    let scratch = Scratch::new("scope-off");
    for (variable, value) in [("MEMPROF_SCOPES", None), ("MEMPROF_SCOPES", Some("false"))] {
        let mut launch =
            Program::scope_example().env("TMPDIR", scratch.path()).env_remove("LIBPROCESS_MEMORY_PROFILING");
        launch = match value {
            Some(value) => launch.env(variable, value),
            None => launch.env_remove(variable),
        };
        let mut program = launch.spawn();
        assert!(program.wait(), "{:#?}", program.output());
        let output = program.output();
        assert!(output.contains(&"scope: no profile".to_owned()), "{value:?}: {output:#?}");
        assert!(output.iter().any(|line| line.starts_with("run: run ")), "{value:?}: {output:#?}");
        assert!(!output.iter().any(|line| line.contains("scope!(")), "no scope ran, none said why: {output:#?}");
    }
}

/// `MEMPROF_WHOLE_RUN=<dir>` keeps a batch program's whole run when it exits: sampled from start-up, what
/// it allocated (freed or not, by stack) and what was left at its end, each a `heap_v2` dump readable
/// offline, owner-only; the profile directory itself still goes.
#[test]
fn the_whole_run_is_kept_at_exit_where_asked() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("whole-run");
    let kept = scratch.join("kept");
    let temporary = scratch.join("tmp");
    std::fs::create_dir(&temporary).unwrap();
    let mut program = Program::scope_example()
        .env("MEMPROF_WHOLE_RUN", &kept)
        .env("MALLOC_CONF", "lg_prof_sample:14")
        .env("TMPDIR", &temporary)
        .env_remove("LIBPROCESS_MEMORY_PROFILING")
        .spawn();
    assert!(program.wait(), "{:#?}", program.output());
    // Automatic dumps come with the counters' readings (once a second): this run may end before one or after.
    let said = format!(
        "[memprof] INFO The whole run's profiles are in {}: whole-run.heap (live at the end), whole-run.allocated.heap (everything allocated), whole-run.peak.heap (at its high-water mark), ",
        kept.display()
    );
    let told = program.output().iter().any(|line| line.starts_with(&said) && line.contains(" automatic dump"));
    assert!(told, "{:#?}", program.output());
    assert_eq!(
        std::fs::read_dir(&temporary).unwrap().count(),
        0,
        "the profile directory went: {:#?}",
        program.output()
    );
    let collapsed = |name: &str| {
        let path = kept.join(name);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "{name}");
        let profile = memprof::analysis::HeapProfile::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let analysis = memprof::analysis::Analysis::new(&profile, &memprof::analysis::Binaries::as_mapped());
        let options = memprof::analysis::RenderOptions::default();
        String::from_utf8(memprof::analysis::Format::Collapsed.render(&analysis, None, &options).unwrap()).unwrap()
    };
    let allocated = collapsed("whole-run.allocated.heap");
    let under = |function: &str| -> f64 {
        let lines = allocated.lines().filter(|line| line.contains(function));
        lines.map(|line| line.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap()).sum::<f64>() / (1 << 20) as f64
    };
    // Two tables of 64 MiB of rows (the scope's and the inner one's) and their outer vectors (1.5 MiB each
    // as they grew by doubling), all freed before the end; records formatted into strings that grow as they
    // are written (allocated twice what they keep, 32 MiB).
    assert!((under("scope::build_table") - 131.0).abs() <= 131.0 * 0.06, "{allocated}");
    assert!(under("scope::parse_records") >= 32.0 * 0.94, "{allocated}");
    let left = collapsed("whole-run.heap");
    assert!(!left.contains("scope::build_table"), "freed before the end, not left: {left}");
    // At its highest the run held both tables (the scope's, kept by main, and the inner one), the records
    // and the 16 MiB the panicking and failing blocks kept: the peak's estimate, within its error.
    let peak = collapsed("whole-run.peak.heap");
    let held = |function: &str| -> f64 {
        let lines = peak.lines().filter(|line| line.contains(function));
        lines.map(|line| line.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap()).sum::<f64>() / (1 << 20) as f64
    };
    assert!((held("scope::build_table") - 128.0).abs() <= 128.0 * 0.1, "{peak}");
}

/// A `MEMPROF_DIR` that does not exist is made, owner-only, at start: the whole run keeps its three
/// profiles (before, the profiles went into memory and the views were lost, with a message saying none was
/// kept); a `MEMPROF_WHOLE_RUN` directory that cannot be made is said at start, and the program runs on.
#[test]
fn a_missing_profile_root_is_made_and_a_whole_run_directory_that_cannot_be_is_said_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("whole-run-missing-root");
    let (root, kept) = (scratch.join("not/yet"), scratch.join("kept"));
    let mut program = Program::scope_example()
        .env("MEMPROF_WHOLE_RUN", &kept)
        .env("MEMPROF_DIR", &root)
        .env("MALLOC_CONF", "lg_prof_sample:14")
        .env_remove("LIBPROCESS_MEMORY_PROFILING")
        .spawn();
    assert!(program.wait(), "{:#?}", program.output());
    let said = format!("[memprof] INFO Made the profile root {} (owner-only)", root.display());
    assert!(program.output().contains(&said), "{:#?}", program.output());
    assert_eq!(std::fs::metadata(&root).unwrap().permissions().mode() & 0o777, 0o700);
    for name in ["whole-run.heap", "whole-run.allocated.heap", "whole-run.peak.heap"] {
        assert!(kept.join(name).is_file(), "{name}: {:#?}", program.output());
    }

    let impossible = scratch.join("a-file");
    std::fs::write(&impossible, "").unwrap();
    let mut program = Program::scope_example()
        .env("MEMPROF_WHOLE_RUN", impossible.join("kept"))
        .env("MALLOC_CONF", "lg_prof_sample:14")
        .env_remove("LIBPROCESS_MEMORY_PROFILING")
        .spawn();
    assert!(program.wait(), "{:#?}", program.output());
    let output = program.output();
    let refused = format!(
        "[memprof] ERROR MEMPROF_WHOLE_RUN={}: the directory cannot be made",
        impossible.join("kept").display()
    );
    assert!(output.iter().any(|line| line.starts_with(&refused)), "{output:#?}");
    assert!(output.iter().any(|line| line.starts_with("done: ")), "the program ran on: {output:#?}");
}

/// A program that serves nothing and reads nothing of its memory (a command-line tool run thousands of
/// times a day) leaves the profile root alone at start: its sweep waits for the program's first run.
#[test]
fn the_profile_roots_sweep_waits_for_the_first_run_of_a_program_that_serves_nothing() {
    let scratch = Scratch::new("scope-deferred-sweep");
    // An ended process's directory with nothing worth keeping: its owner (this machine, lock free) is
    // provably gone, and the sweep removes it.
    let dead = scratch.join("memprof.dead");
    std::fs::create_dir(&dead).unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let machine = std::fs::read_to_string("/etc/machine-id").unwrap_or_else(|_| boot.clone());
    std::fs::write(dead.join("owner"), format!("1 1 {} {}\n", boot.trim(), machine.trim())).unwrap();
    std::fs::write(dead.join(".profile.9.heap.partial"), "heap_v2/524288\n").unwrap();
    let service =
        Program::service().env("MEMPROF_DIR", scratch.path()).env_remove("LIBPROCESS_MEMORY_PROFILING").spawn();
    service.wait_for_line(|line| line.starts_with("service: 0 requests handled"));
    assert!(dead.exists(), "a service with the switch off swept the profile root at start");
    drop(service);
    let mut program = Program::scope_example().env("MEMPROF_DIR", scratch.path()).spawn();
    assert!(program.wait(), "{:#?}", program.output());
    assert!(!dead.exists(), "the first run swept it: {:#?}", program.output());
}
