//! How the program's environment shapes memprof: the switch variable, the address, jemalloc's own
//! configuration, and a temporary directory that cannot be written.

use std::net::{TcpListener, TcpStream};

use memprof_tests::process::{Program, built_binary};
use memprof_tests::tools::Scratch;

#[test]
fn without_the_switch_variable_there_is_no_thread_and_no_port() {
    for setting in [None, Some("false")] {
        // A port held here: a service that tried to listen on it would say it cannot (a port merely free
        // when checked could be taken by anything meanwhile).
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let launch = Program::service().env("MEMPROF_HTTP", taken.local_addr().unwrap().to_string());
        let launch = match setting {
            Some(value) => launch.env("LIBPROCESS_MEMORY_PROFILING", value),
            None => launch.env_remove("LIBPROCESS_MEMORY_PROFILING"),
        };
        let service = launch.spawn();
        service.wait_for_line(|line| line.starts_with("service: 0 requests handled"));
        // The one thread of memprof's is its watch, for the signal the example opted in to (`dump_on_sigterm`):
        // waited for by name, as a thread names itself once it runs.
        wait_for_threads(&service, "memprof-watch", 1);
        let names = service.thread_names();
        let memprofs: Vec<&String> = names.iter().filter(|name| name.starts_with("memprof")).collect();
        assert_eq!(memprofs, ["memprof-watch"], "{setting:?}: {names:?}");
        assert!(!service.output().iter().any(|line| line.starts_with("[memprof]")), "{:?}", service.output());
    }
}

/// A command-line tool with the attribute, run with the switch off (unset or `false`) and nothing else set,
/// says nothing: twenty runs print the tool's own line alone and nothing on stderr (a walk chosen by a
/// variable is not even installed: nothing samples). `MEMPROF_LOG=info` makes memprof speak (here of the
/// profile root it made, `MEMPROF_DIR`); with the switch on it speaks, and `state` keeps what it said.
#[test]
fn a_program_whose_switch_is_off_says_nothing_unless_asked() {
    let run = |environment: &[(&str, &str)]| {
        let output = std::process::Command::new(built_binary("quiet"))
            .env_clear()
            .envs(environment.iter().copied())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let scratch = Scratch::new("quiet-profile-root");
    let root = scratch.join("made");
    let root = root.to_str().unwrap();
    for round in 0..20 {
        let environment: &[(&str, &str)] = match round % 4 {
            0 => &[],
            1 => &[("LIBPROCESS_MEMORY_PROFILING", "false")],
            2 => &[("MEMPROF_UNWINDER", "libgcc")],
            _ => &[("MEMPROF_DIR", root)],
        };
        assert_eq!(run(environment), ("quiet: hello\n".to_owned(), String::new()), "{environment:?}");
    }
    std::fs::remove_dir(root).unwrap();
    let (_, said) = run(&[("MEMPROF_DIR", root), ("MEMPROF_LOG", "info")]);
    assert_eq!(said, format!("[memprof] INFO Made the profile root {root} (owner-only)\n"));
    let service = Program::service().spawn();
    let messages = service.state().messages;
    assert!(messages.iter().any(|message| message.starts_with("INFO Serving heap profiling endpoints on http://")));
    assert!(service.output().iter().any(|line| line.starts_with("[memprof] INFO Serving")), "{:?}", service.output());
}

#[test]
fn an_unrecognised_switch_value_is_reported_and_serves_nothing() {
    // A port held here: a service that tried to listen on it would say it cannot.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let service = Program::service()
        .env("MEMPROF_HTTP", taken.local_addr().unwrap().to_string())
        .env("LIBPROCESS_MEMORY_PROFILING", "yes")
        .without_waiting_for_endpoints()
        .spawn();
    service.wait_for_line(|line| {
        line == "[memprof] ERROR LIBPROCESS_MEMORY_PROFILING=\"yes\" is not `true` or `false`; heap profiling endpoints are not served"
    });
    service.wait_for_line(|line| line.starts_with("service: 0 requests handled"));
    let names = service.thread_names();
    assert!(!names.iter().any(|name| name.starts_with("memprof-http")), "no server thread: {names:?}");
    assert!(!service.output().iter().any(|line| line.contains("cannot listen")), "{:?}", service.output());
}

/// Waits until `count` of the service's threads have exactly `name` (a thread names itself once it runs, so
/// the names may lag the spawn for a moment).
fn wait_for_threads(service: &Program, name: &str, count: usize) {
    memprof_tests::waiting::wait_until(&format!("{count} x {name}"), memprof_tests::process::PATIENCE, || {
        let names = service.thread_names();
        if names.iter().filter(|thread| *thread == name).count() == count { Ok(()) } else { Err(format!("{names:?}")) }
    });
}

/// The threads memprof starts with, three: the accept loop, the one reading the memory counters, and the
/// watch, which hooks jemalloc's new arenas and waits for the example's `dump_on_sigterm` (names may lag);
/// no connection thread before a connection.
fn wait_for_memprofs_at_start(service: &Program) {
    for name in ["memprof-http", "memprof-stats", "memprof-watch"] {
        wait_for_threads(service, name, 1);
    }
    let memprofs = service.thread_names().into_iter().filter(|name| name.starts_with("memprof")).count();
    assert_eq!(memprofs, 3, "an idle service: {:?}", service.thread_names());
}

/// How many of memprof's connection threads `service` runs.
fn connection_threads(service: &Program) -> usize {
    service.thread_names().iter().filter(|name| *name == "memprof-http-c").count()
}

/// Three connections at once, each answered.
fn three_connections(service: &Program) {
    use std::io::{Read, Write};
    let connections: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut stream = TcpStream::connect(service.address()).unwrap();
            stream.write_all(b"GET /memory-profiler/state HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
            let mut status = [0; 12];
            stream.read_exact(&mut status).unwrap();
            assert_eq!(&status, b"HTTP/1.1 200");
            stream
        })
        .collect();
    drop(connections);
}

#[test]
fn an_idle_service_keeps_few_threads_and_a_run_starts_none_for_its_pool() {
    let service = Program::service().spawn();
    wait_for_memprofs_at_start(&service);
    // Connections get threads born for them, at most one each.
    three_connections(&service);
    let born = connection_threads(&service);
    assert!((1..=4).contains(&born), "{:?}", service.thread_names());
    // A run starts no connection thread (they were all started here before sampling could come on).
    // A run started: the answer is memprof-wire's `Started`.
    service.start("?duration=1mins");
    assert_eq!(service.get("/memory-profiler/stop").status, 200);
    // They stay: a thread's end would make jemalloc return the program's freed pages (tests/explain.rs),
    // and a timed run's timer is one thread for every run.
    for _ in 0..2 {
        assert_eq!(service.get("/memory-profiler/start?duration=1secs").status, 200);
        assert_eq!(service.get("/memory-profiler/stop").status, 200);
    }
    wait_for_threads(&service, "memprof-timer", 1);
    assert!(connection_threads(&service) <= born + 1, "{:?}", service.thread_names());
}

/// Sampling continuously, a service runs the threads it runs on demand: a connection's thread is born when
/// the connection comes, sampling paused for the birth (`state` counts the pauses), and the allocations of
/// its birth unsampled.
#[test]
fn sampling_continuously_a_service_starts_threads_as_on_demand_pausing_sampling_for_each_birth() {
    let service = Program::service().env("MEMPROF_SAMPLING", "continuous").spawn();
    wait_for_memprofs_at_start(&service);
    // Sampling comes on last in start-up, after the endpoints: until then births do not pause it.
    memprof_tests::waiting::wait_until("sampling on", memprof_tests::process::PATIENCE, || {
        let state = service.whole_state();
        if state.jemalloc.profiling_active { Ok(()) } else { Err(format!("{state:?}")) }
    });
    three_connections(&service);
    let sampling = service.state().sampling;
    // Counted after that request, which may have needed one more.
    let born = connection_threads(&service);
    assert!((1..=5).contains(&born), "{:?}", service.thread_names());
    assert_eq!(sampling.mode, "continuous", "{sampling:?}");
    // Every birth after the first paused sampling: the three connections held at once needed threads.
    let pauses = sampling.paused_for_threads;
    assert!(pauses >= 2 && pauses <= born as u64, "{born} threads born, {pauses} pauses: {sampling:?}");
    assert!(sampling.paused_for_threads_us > 0, "{sampling:?}");
    // Sampling is on again: the service's own allocations are sampled.
    assert!(sampling.record.is_some(), "{sampling:?}");
    memprof_tests::acceptance::wait_for_sampled(&service, &["service::open_session"]);
}

/// With the switch on and nothing else set, sampling is continuous from start-up, and says so and why;
/// on demand is one setting away.
#[test]
fn with_the_switch_on_and_nothing_else_set_sampling_is_continuous() {
    let service = Program::service().spawn();
    let said = service.wait_for_line(|line| line.starts_with("[memprof] INFO Sampling is continuous ("));
    assert!(said.contains("(the default with the switch on"), "{said}");
    let state = service.whole_state();
    let sampling = &state.memory_profiler.sampling;
    assert_eq!(sampling.mode, "continuous", "{sampling:?}");
    assert!(sampling.because.starts_with("the default with the switch on"), "{sampling:?}");
    assert!(sampling.budget.is_some(), "the default budget comes with it: {sampling:?}");
    assert!(state.jemalloc.profiling_active);

    let on_demand = Program::service().env("MEMPROF_SAMPLING", "on-demand").spawn();
    let state = on_demand.whole_state();
    assert_eq!(state.memory_profiler.sampling.mode, "on-demand");
    assert!(!state.jemalloc.profiling_active, "nothing sampled until a run");
}

#[test]
fn a_port_in_use_is_reported_and_the_program_runs_on() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap();
    let mut service =
        Program::service().env("MEMPROF_HTTP", address.to_string()).without_waiting_for_endpoints().spawn();
    let warning = service.wait_for_line(|line| line.contains("Heap profiling endpoints are not served"));
    assert!(
        warning.starts_with(&format!(
            "[memprof] ERROR Heap profiling endpoints are not served: cannot listen on {address}: "
        )),
        "{warning}"
    );
    assert!(warning.ends_with("; the program runs on"), "{warning}");
    service.wait_for_line(|line| line.starts_with("service: 0 requests handled"));
    assert!(service.is_running());
}

#[test]
fn a_bad_address_is_reported_and_the_program_runs_on() {
    let mut service = Program::service().env("MEMPROF_HTTP", "not-an-address").without_waiting_for_endpoints().spawn();
    service.wait_for_line(|line| {
        line.starts_with("[memprof] ERROR Heap profiling endpoints are not served: cannot listen on not-an-address")
    });
    service.wait_for_line(|line| line.starts_with("service: 0 requests handled"));
    assert!(service.is_running());
}

/// A value `MEMPROF_UNWINDER` does not take is said, not ignored, and the walk is memprof's choice.
#[test]
fn an_unknown_unwinder_is_reported_and_the_walk_is_memprofs_choice() {
    let service = Program::service().env("MEMPROF_UNWINDER", "fast").spawn();
    service.wait_for_line(|line| {
        line == "[memprof] ERROR MEMPROF_UNWINDER=\"fast\" is not `unwind-tables` or `libgcc`; samples walk the stack as memprof chooses"
    });
    let walk = service.state().stack_walk;
    assert_eq!(walk.method, "frame pointers", "{walk:?}");
}

/// A `MEMPROF_*` variable memprof does not read, within two edits of one it does, is said with the one
/// meant, rather than silently doing nothing: here sampling stays continuous. One far from any
/// (`MEMPROF_URL`, the command-line tool's) is left alone.
#[test]
fn a_misspelt_variable_is_reported_with_the_one_meant() {
    let service = Program::service().env("MEMPROF_SAMPLNG", "on-demand").env("MEMPROF_URL", "http://x").spawn();
    service.wait_for_line(|line| {
        line == "[memprof] WARN MEMPROF_SAMPLNG is not a variable memprof reads: did you mean MEMPROF_SAMPLING?"
    });
    assert_eq!(service.state().sampling.mode, "continuous");
    let said = service.output();
    assert!(!said.iter().any(|line| line.contains("MEMPROF_URL")), "{said:#?}");
}

/// `MALLOC_CONF=prof_active:true`, the way Traffic Server documents always-on sampling, asks for continuous
/// sampling: runs are windows over it, started and stopped without a conflict.
#[test]
fn prof_active_in_malloc_conf_asks_for_continuous_sampling() {
    let service = Program::service().env("MALLOC_CONF", "prof_active:true").spawn();
    service.wait_for_line(|line| {
        line.starts_with("[memprof] INFO Sampling is continuous (MALLOC_CONF's prof_active:true): every 2^19 bytes")
    });
    let started = service.get("/memory-profiler/start?duration=5secs");
    assert_eq!(started.status, 200, "{}", started.text());
    let stopped = service.stop();
    assert!(stopped.id.is_some(), "{stopped:?}");
    let state = service.whole_state();
    assert_eq!(state.memory_profiler.sampling.mode, "continuous");
    assert!(!state.memory_profiler.started_externally);
    assert!(state.jemalloc.profiling_active, "the window's end leaves sampling on");
}

/// On demand by the operator's word (`MEMPROF_SAMPLING=on-demand`), sampling switched on by jemalloc's
/// configuration is never clobbered: no run starts or stops over it.
#[test]
fn profiling_started_by_malloc_conf_is_never_clobbered_on_demand() {
    let service =
        Program::service().env("MALLOC_CONF", "prof_active:true").env("MEMPROF_SAMPLING", "on-demand").spawn();
    service.wait_for_line(|line| {
        line == "[memprof] WARN Heap profiling was switched on at start-up by the jemalloc configuration, but sampling is on demand (MEMPROF_SAMPLING=on-demand): memprof will not start or stop runs over it."
    });
    let message = "Heap profiling was started externally (by the jemalloc configuration, such as MALLOC_CONF=prof_active:true); memprof does not start or stop runs over it.\n";
    for endpoint in ["start?duration=5secs", "stop"] {
        let response = service.get(&format!("/memory-profiler/{endpoint}"));
        assert_eq!((response.status, response.text().as_str()), (409, message), "{endpoint}");
    }
    let state = service.whole_state();
    assert!(state.memory_profiler.started_externally);
    assert_eq!(state.memory_profiler.sampling.mode, "on-demand");
    assert!(state.jemalloc.profiling_active);
    assert_eq!(state.jemalloc.malloc_conf.environment.as_deref(), Some("prof_active:true"));
}

/// With sampling on from the first allocation, memprof's own start-up (reading jemalloc's configuration and
/// the allocator's code, starting its threads) and serving leave nothing in the heap profile.
#[test]
fn memprofs_own_work_is_not_in_a_profile_sampled_from_the_start() {
    let service = Program::service().env("MALLOC_CONF", "prof_active:true,lg_prof_sample:10").spawn();
    for _ in 0..20 {
        assert_eq!(service.get("/memory-profiler/state").status, 200);
    }
    let dump = service.get("/memory-profiler/heap_profile?trigger_dump=true");
    assert_eq!(dump.status, 200, "{}", dump.text());
    let scratch = Scratch::new("unsampled-start");
    let path = scratch.join("now.heap");
    std::fs::write(&path, &dump.body).unwrap();
    let output = std::process::Command::new(memprof_tests::process::built_binary("memprof-tool"))
        .args(["analyze", path.to_str().unwrap(), "--full"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("service::open_session"), "the program's own allocations are there: {text}");
    // The example's own calls into `memprof::labels` are its code; memprof's work is not there.
    for line in text.lines().filter(|line| !line.contains("memprof_runtime::labels::")) {
        assert!(!line.contains("memprof_runtime::") && !line.contains("memprof_analysis::"), "{line}\n{text}");
    }
}

#[test]
fn profiling_disabled_by_malloc_conf_is_reported_and_answers_503() {
    let service = Program::service().env("MALLOC_CONF", "prof:false").spawn();
    let warning =
        "Heap profiling is disabled by the environment (MALLOC_CONF=\"prof:false\"); remove `prof:false` to enable it.";
    service.wait_for_line(|line| line == format!("[memprof] ERROR {warning}"));
    for endpoint in ["start", "stop"] {
        let response = service.get(&format!("/memory-profiler/{endpoint}"));
        assert_eq!((response.status, response.text()), (503, format!("{warning}\n")), "{endpoint}");
    }
    let state = service.whole_state();
    assert!(!state.jemalloc.profiling_enabled);
    assert_eq!(state.memory_profiler.warnings, [warning]);
}

#[test]
fn the_prefixed_variable_is_reported_as_ignored() {
    let service = Program::service().env("_RJEM_MALLOC_CONF", "prof:false").spawn();
    service.wait_for_line(|line| {
        line == "[memprof] WARN _RJEM_MALLOC_CONF=\"prof:false\" is set but ignored: this jemalloc build reads MALLOC_CONF."
    });
    assert!(service.whole_state().jemalloc.profiling_enabled);
}

#[test]
fn malloc_conf_overrides_the_sampling_rate_key_by_key() {
    // On demand: the program's prof_active:false stands (sampled continuously, memprof switches it on).
    let service =
        Program::service().env("MALLOC_CONF", "lg_prof_sample:17").env("MEMPROF_SAMPLING", "on-demand").spawn();
    service.wait_for_line(|line| {
        line == "[memprof] INFO Sampling every 2^17 bytes on average, as the environment asks (the program's malloc_conf asks for 2^19)"
    });
    let state = service.whole_state();
    assert_eq!(state.memory_profiler.sample_period_bytes, Some(131072));
    assert!(state.jemalloc.profiling_enabled);
    assert!(!state.jemalloc.profiling_active);
}

#[test]
fn an_unwritable_tmpdir_keeps_profiles_in_memory_until_a_directory_can_be_made() {
    let scratch = Scratch::new("unwritable");
    let missing = scratch.join("not-yet");
    let service = Program::service().env("TMPDIR", &missing).spawn();
    let id = service.start("?duration=1mins").id;
    let stopped = service.stop();
    assert_eq!(stopped.id, Some(id));
    let state = service.state();
    assert_eq!(state.tmp_dir, "In memory (no writable directory)");
    assert!(state.latest_run.expect("the run kept").path.starts_with("/proc/self/fd/"));
    assert_eq!(state.last_failure, None);
    assert!(service.get(&format!("/memory-profiler/download/raw?id={id}")).text().starts_with("heap_v2/524288\n"));

    std::fs::create_dir(&missing).unwrap();
    let second = service.start("?duration=1mins").id;
    service.get_json("/memory-profiler/stop");
    let path = service.state().latest_run.expect("the run kept").path;
    assert!(
        path.starts_with(missing.to_str().unwrap()) && path.ends_with(&format!("/profile.{second}.heap")),
        "{path}"
    );
    assert!(
        service.get(&format!("/memory-profiler/download/raw?id={id}")).text().starts_with("heap_v2/"),
        "the in-memory one is still kept"
    );
}

#[test]
fn profiles_are_removed_when_main_returns_and_an_active_run_can_leave_a_final_dump() {
    let scratch = Scratch::new("cleanup");
    let elsewhere = Scratch::new("final-dump");
    let final_dump = elsewhere.join("final.heap");
    let mut service = Program::service()
        .env("TMPDIR", scratch.path())
        .env("SERVICE_SECONDS", "3")
        .env("MEMPROF_FINAL_DUMP", &final_dump)
        .spawn();
    service.get_json("/memory-profiler/start?duration=1mins");
    service.get_json("/memory-profiler/stop");
    let active = service.start("?duration=1mins").id;
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 1, "one run directory");
    assert!(service.wait(), "{:?}", service.output());
    assert!(service.output().contains(&"service: done".to_owned()));
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0, "nothing left in TMPDIR");
    let expected = format!(
        "[memprof] INFO Heap profiling run {active} was active when the program ended; its profile is at {}",
        final_dump.display()
    );
    assert!(service.output().contains(&expected), "{:#?}", service.output());
    assert!(std::fs::read_to_string(&final_dump).unwrap().starts_with("heap_v2/524288\n"));
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&final_dump).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the final dump is the owner's only");
}

/// What answers keep for the next ones (the names of a large symbol lookup, statistics reports) is let go once the
/// endpoints' threads have all been idle ten seconds: memprof's own arena returns to what it held before.
#[test]
fn what_answers_keep_goes_when_the_endpoints_are_idle() {
    use memprof_wire::Explanation;
    // On demand: sampled continuously, memprof's arena also holds the record's history, which grows and is
    // trimmed by the minute whatever the endpoints do.
    let service = Program::service().env("MEMPROF_SAMPLING", "on-demand").spawn();
    let profiler_bytes = || {
        let explanation: Explanation = serde_json::from_value(service.get_json("/memory-profiler/explain")).unwrap();
        let reading = explanation.evidence.iter().find(|reading| reading.name == "memprof's arena: allocated");
        reading.unwrap().value as u64
    };
    let before = profiler_bytes();
    let body = memprof_tests::sockets::spread_addresses(service.pid(), 1 << 14);
    let lookup = memprof_tests::http::request_with_body(service.address(), "POST", "/debug/pprof/symbol", &body);
    assert_eq!(lookup.status, 200);
    // Statistics reports are kept a second for the next asker, then until the endpoints are idle.
    for path in ["/memory-profiler/statistics", "/memory-profiler/statistics?format=text"] {
        assert_eq!(service.get(path).status, 200);
    }
    let keeping = profiler_bytes();
    assert!(keeping >= before + (1 << 20), "the names are kept for the next lookup: {before} -> {keeping} bytes");
    // Each reading is a request, after which the endpoints are idle again ten seconds later: read every 12 s.
    let (patience, every) = (memprof_tests::process::PATIENCE, std::time::Duration::from_secs(12));
    memprof_tests::waiting::wait_every("memprof's arena back where it began, once idle", patience, every, || {
        let idle = profiler_bytes();
        // Within 256 KiB: what memprof's threads' caches hold counts as allocated too, more or less as they last
        // ran (a whole .ci/run read 71 KiB above, the names kept were over 1 MiB).
        (idle <= before + (256 << 10)).then_some(()).ok_or(format!("{before} -> {keeping} -> {idle} bytes"))
    });
}

/// memprof's cost does not grow with jemalloc's arenas (4 a CPU; it initialized every one of them at start,
/// 90 KiB each): with 256 of them an idle program serving the endpoints is within 2 MiB of its size with 8
/// (jemalloc's own control table, a page a possible arena, is the whole difference), its arenas made later
/// are hooked as they are made, and `explain` adds up with the record of jemalloc's ranges complete. The
/// program is idle once ready (the example service's own 20 MiB would still be growing when RSS is read).
#[test]
fn two_hundred_and_fifty_six_arenas_cost_what_eight_do_and_explain_adds_up() {
    use memprof_wire::Explanation;
    let started = |narenas: u32| {
        let service = Program::explained(&["idle"]).env("MALLOC_CONF", format!("narenas:{narenas}")).spawn();
        service.wait_for_line(|line| line == "explained: ready");
        // Anonymous memory alone: the executable's pages memprof's threads read meanwhile count in VmRSS as
        // they happen to be read when this looks. Read once memprof's start-up work is done (its symbol
        // table read, judged within a second of start: some 1.1 MiB more): five readings over a second
        // alike. Read at once, on a loaded machine, 8 arenas read 2.3 MB before it and 256 4.9 MB after.
        let anonymous = || {
            let status = std::fs::read_to_string(format!("/proc/{}/status", service.pid())).unwrap();
            let line = status.lines().find(|line| line.starts_with("RssAnon:")).unwrap();
            line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
        };
        let mut readings: Vec<u64> = Vec::new();
        let every = std::time::Duration::from_millis(250);
        let rss = memprof_tests::waiting::wait_every(
            "the start-up's work done",
            memprof_tests::process::PATIENCE,
            every,
            || {
                readings.push(anonymous());
                let last = &readings[readings.len().saturating_sub(5)..];
                let (least, most) = (last.iter().min().unwrap(), last.iter().max().unwrap());
                if last.len() == 5 && most - least <= 64 << 10 { Ok(*most) } else { Err(format!("{readings:?} bytes")) }
            },
        );
        (service, rss)
    };
    let (few, few_rss) = started(8);
    drop(few);
    let (many, many_rss) = started(256);
    assert!(many_rss <= few_rss + (2 << 20), "anonymous RSS at start: {few_rss} with 8 arenas, {many_rss} with 256");
    // Clients at once: the service's connection threads are born, on an arena memprof already hooked.
    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn({
                let address = many.address();
                move || memprof_tests::http::request(address, "GET", "/memory-profiler/state").status
            })
        })
        .collect();
    assert!(threads.into_iter().all(|thread| thread.join().unwrap() == 200));
    let explanation: Explanation = serde_json::from_value(many.get_json("/memory-profiler/explain")).unwrap();
    let leaves: u64 = explanation.leaves().iter().map(|leaf| leaf.bytes).sum();
    assert_eq!(leaves, explanation.rss_bytes, "{explanation:#?}");
    let complete = explanation.evidence.iter().find(|reading| reading.name == "record complete").unwrap();
    assert_eq!(complete.value, 1.0, "{explanation:#?}");
    assert_ne!(explanation.verdict.kind, memprof_wire::VerdictKind::Retention, "{explanation:#?}");
}
