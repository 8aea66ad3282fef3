//! The operator's interface against the real example service: libmtev/Traffic Server-style controls,
//! Prometheus metrics, Go-style `/debug/pprof/heap`, and the `memprof` command-line client.

use std::io::Read;
use std::process::Command;

use memprof_tests::acceptance::wait_for_sampled;
use memprof_tests::process::{Program, built_binary};
use memprof_tests::tools::{self, Scratch};

/// `memprof --url <service> <arguments>`: exit code, stdout, stderr.
use memprof_tests::process::memprof_tool as memprof;

#[test]
fn heap_profile_switches_sampling_by_hand_and_dumps_on_demand() {
    let service = Program::service().spawn();
    let switches = service.get_json("/memory-profiler/heap_profile");
    assert_eq!(switches["opt.prof"], true);
    assert_eq!(switches["prof.active"], false);
    assert_eq!(switches["prof.thread_active_init"], true);

    let on = service.get_json("/memory-profiler/heap_profile?active=true");
    let id = on["id"].as_u64().unwrap();
    assert_eq!(
        on["message"],
        format!("Heap profiling switched on as run {id}; switch it off with heap_profile?active=false")
    );
    let again = service.get_json("/memory-profiler/heap_profile?active=true");
    assert_eq!(
        (again["id"].as_u64(), again["message"].as_str().unwrap().starts_with("Heap profiling is already on")),
        (Some(id), true)
    );
    assert_eq!(service.get_json("/memory-profiler/heap_profile")["prof.active"], true);
    assert_eq!(service.get_json("/memory-profiler/state")["memory_profiler"]["current_run"]["started_by"], "manual");

    let dump = service.get("/memory-profiler/heap_profile?trigger_dump=true");
    assert_eq!(dump.status, 200);
    assert!(dump.text().starts_with("heap_v2/524288\n") && dump.text().contains("\nMAPPED_LIBRARIES:\n"));
    assert!(dump.header("content-disposition").unwrap().starts_with("attachment; filename=\"memprof.snapshot."));

    let off = service.get_json("/memory-profiler/heap_profile?active=false");
    assert_eq!((off["active"].as_bool(), off["id"].as_u64()), (Some(false), Some(id)));
    assert_eq!(off["url_raw_profile"], format!("/memory-profiler/download/raw?id={id}"));
    assert_eq!(service.get(&format!("/memory-profiler/download/raw?id={id}")).status, 200);
    let off_again = service.get_json("/memory-profiler/heap_profile?active=false");
    assert_eq!(off_again["message"], "Heap profiling is already off");

    let timed = service.get_json("/memory-profiler/start?duration=1mins")["id"].as_u64().unwrap();
    for switch in ["true", "false"] {
        let refused = service.get(&format!("/memory-profiler/heap_profile?active={switch}"));
        assert_eq!(
            (refused.status, refused.text()),
            (
                409,
                format!(
                    "Heap profiling run {timed} owns profiling, started by /memory-profiler/start; stop it with /memory-profiler/stop or wait for its timer.\n"
                )
            )
        );
    }
    let both = service.get("/memory-profiler/heap_profile?active=true&trigger_dump=true");
    assert_eq!((both.status, both.text()), (400, "Pass either 'active' or 'trigger_dump', not both.\n".to_owned()));
}

#[test]
fn statistics_come_as_json_or_as_jemallocs_text_report() {
    let service = Program::service().spawn();
    let text = service.get("/memory-profiler/statistics?format=text");
    assert_eq!(text.header("content-type"), Some("text/plain; charset=utf-8"));
    assert!(text.text().starts_with("___ Begin jemalloc statistics ___\n"), "{}", text.text());
    let bad = service.get("/memory-profiler/statistics?format=xml");
    assert_eq!(
        (bad.status, bad.text()),
        (400, "Invalid parameter 'format': 'xml'; expected 'json' or 'text'.\n".to_owned())
    );
}

/// The value of the sample `name` in Prometheus text.
fn metric(text: &str, name: &str) -> f64 {
    let line =
        text.lines().find(|line| line.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name}: {text}"));
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

#[test]
fn metrics_are_prometheus_text_that_promtool_accepts() {
    let service = Program::service().spawn();
    service.get_json("/memory-profiler/heap_profile?active=true");
    service.get_json("/memory-profiler/heap_profile?active=false");
    // The service fills its 20 MiB of sessions and index blocks in its first milliseconds.
    let deadline = std::time::Instant::now() + memprof_tests::process::PATIENCE;
    let (response, text) = loop {
        let response = service.get("/metrics");
        let text = response.text();
        if metric(&text, "memprof_jemalloc_allocated_bytes") > 20.0 * 1_048_576.0 {
            break (response, text);
        }
        assert!(std::time::Instant::now() < deadline, "the service never held 20 MiB: {text}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(response.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    let value = |name: &str| metric(&text, name);
    assert!(value("memprof_jemalloc_resident_bytes") >= value("memprof_jemalloc_active_bytes"));
    assert_eq!(value("memprof_profiling_enabled"), 1.0);
    assert_eq!(value("memprof_runs_started_total"), 1.0);
    assert_eq!(value("memprof_runs_finished_total"), 1.0);
    assert_eq!(value("memprof_profiles_kept"), 1.0);
    assert_eq!(value("memprof_sample_period_bytes"), 524288.0);
    let Some(promtool) = tools::find("promtool", "prometheus") else { return };
    let scratch = Scratch::new("promtool");
    let file = scratch.join("metrics.txt");
    std::fs::write(&file, &text).unwrap();
    let checked =
        Command::new(promtool).args(["check", "metrics"]).stdin(std::fs::File::open(&file).unwrap()).output().unwrap();
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

#[test]
fn debug_pprof_heap_serves_the_live_heap_to_pprof_scrapers() {
    let service = Program::service().env("MALLOC_CONF", "lg_prof_sample:14").spawn();
    service.get_json("/memory-profiler/heap_profile?active=true");
    wait_for_sampled(&service, &["service::open_session"]);
    let response = service.get("/debug/pprof/heap?gc=1");
    assert_eq!(response.status, 200, "{}", response.text());
    let mut protobuf = Vec::new();
    flate2::read::GzDecoder::new(&response.body[..]).read_to_end(&mut protobuf).expect("gzip");
    assert!(String::from_utf8_lossy(&protobuf).contains("service::open_session"));
    let delta = service.get("/debug/pprof/heap?seconds=1");
    assert_eq!(delta.status, 200, "{}", delta.text());
    let bad = service.get("/debug/pprof/heap?seconds=0");
    assert_eq!(
        (bad.status, bad.text()),
        (400, "Invalid parameter 'seconds': '0'; expected a whole number from 1 to 60.\n".to_owned())
    );
    let Some(report) = tools::pprof_top(&response.body, "inuse_space") else { return };
    assert!(report.contains("service::open_session"), "{report}");
}

#[test]
fn the_cli_drives_a_service_from_start_to_download() {
    let service = Program::service().spawn();
    let (code, state, _) = memprof(&service, &["state"]);
    assert_eq!(code, 0);
    assert!(state.starts_with("profiling: enabled, sampling off (a sample every 512 KiB)\nrun: none\n"), "{state}");

    let (code, text, stderr) = memprof(&service, &["start", "--duration", "1s", "--wait", "--format", "text"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(text.starts_with("Total: ") && text.contains("% service::open_session\n"), "{text}");

    let (code, started, _) = memprof(&service, &["start", "--duration", "1m"]);
    assert!(code == 0 && started.starts_with("Successfully started new heap profiling run."), "{started}");
    let (code, stopped, _) = memprof(&service, &["stop"]);
    assert!(code == 0 && stopped.starts_with("Successfully stopped heap profiling run "), "{stopped}");

    let (code, json, _) = memprof(&service, &["--json", "state"]);
    assert_eq!(code, 0);
    let state: serde_json::Value = serde_json::from_str(&json).unwrap();
    let first = state["memory_profiler"]["latest_run"]["id"].as_u64().unwrap();

    let (code, on, _) = memprof(&service, &["activate"]);
    assert!(code == 0 && on.starts_with("Heap profiling switched on as run "), "{on}");
    let (code, off, _) = memprof(&service, &["deactivate"]);
    assert!(code == 0 && off.starts_with("Heap profiling switched off; the profile of run "), "{off}");
    let second = service.get_json("/memory-profiler/state")["memory_profiler"]["latest_run"]["id"].as_u64().unwrap();

    let (code, difference, stderr) = memprof(&service, &["diff", &first.to_string(), &second.to_string()]);
    assert!(code == 0 && difference.starts_with("Total: "), "{difference}{stderr}");
    let scratch = Scratch::new("cli");
    let pprof = scratch.join("second.pb.gz");
    let (code, _, stderr) = memprof(
        &service,
        &["download", "--id", &second.to_string(), "--format", "pprof", "-o", pprof.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(&std::fs::read(&pprof).unwrap()[..2], [0x1f, 0x8b]);
    let dump = scratch.join("now.heap");
    let (code, _, _) = memprof(&service, &["dump", "-o", dump.to_str().unwrap()]);
    assert!(code == 0 && std::fs::read_to_string(&dump).unwrap().starts_with("heap_v2/"));
    let (code, stats, _) = memprof(&service, &["stats", "--text"]);
    assert!(code == 0 && stats.starts_with("___ Begin jemalloc statistics ___"));

    let state = service.get_json("/memory-profiler/state");
    let mut kept: Vec<String> =
        state["memory_profiler"]["runs"].as_array().unwrap().iter().map(|run| run["id"].to_string()).collect();
    kept.reverse();
    let (code, _, stderr) = memprof(&service, &["download", "--id", "7"]);
    assert_eq!(code, 1);
    let expected =
        format!("memprof: No heap profile with id 7; the profiles kept are {} (HTTP 404 from http://", kept.join(", "));
    assert!(stderr.starts_with(&expected), "{stderr}");
    let (code, _, stderr) = memprof(&service, &["start", "--duration", "2x"]);
    assert_eq!(code, 2, "bad usage: {stderr}");
    assert!(stderr.contains("'2x' has an unknown unit 'x'"), "{stderr}");
}

#[test]
fn the_cli_says_when_the_service_cannot_be_reached() {
    let output =
        Command::new(built_binary("memprof-tool")).args(["--url", "http://127.0.0.1:9", "state"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("memprof: cannot reach http://127.0.0.1:9/memory-profiler/state: "), "{stderr}");
    assert!(
        stderr.ends_with(
            "is the service running, with its profiling endpoints switched on (LIBPROCESS_MEMORY_PROFILING=true)?\n"
        ),
        "{stderr}"
    );
}

/// The automatic dumps `state` lists, newest first, once at least `count` exist.
fn automatic_dumps(service: &Program, count: usize) -> Vec<serde_json::Value> {
    let deadline = std::time::Instant::now() + memprof_tests::process::PATIENCE;
    loop {
        let state = service.get_json("/memory-profiler/state");
        let dumps = state["memory_profiler"]["automatic_dumps"]["dumps"].as_array().unwrap().clone();
        if dumps.len() >= count {
            return dumps;
        }
        assert!(std::time::Instant::now() < deadline, "fewer than {count} automatic dumps: {state}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn automatic_dumps_every_n_bytes_stay_in_a_bounded_ring() {
    let service = Program::service()
        .env("MALLOC_CONF", "prof_active:true")
        .env("MEMPROF_DUMP_EVERY", "16MiB")
        .env("MEMPROF_DUMP_KEEP", "2")
        .spawn();
    let first = automatic_dumps(&service, 2);
    let oldest = first[1]["id"].as_u64().unwrap();
    // Wait for a third dump: the oldest leaves the ring, which still holds two.
    let deadline = std::time::Instant::now() + memprof_tests::process::PATIENCE;
    let later = loop {
        let dumps = automatic_dumps(&service, 2);
        if dumps.iter().all(|dump| dump["id"].as_u64() != Some(oldest)) {
            break dumps;
        }
        assert!(std::time::Instant::now() < deadline, "no third dump");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(later.len(), 2);
    let reason = later[0]["started_by"].as_str().unwrap();
    assert!(
        reason.starts_with("automatic: ") && reason.ends_with(" MiB allocated since the last interval dump"),
        "{reason}"
    );
    let newest = later[0]["id"].as_u64().unwrap();
    assert!(service.get(&format!("/memory-profiler/download/raw?id={newest}")).text().starts_with("heap_v2/"));
    let text = service.get(&format!("/memory-profiler/download/text?id={newest}"));
    assert!(text.status == 200 && text.text().contains("% service::open_session\n"), "{}", text.text());
    assert_eq!(service.get(&format!("/memory-profiler/download/raw?id={oldest}")).status, 404);
    let state = service.get_json("/memory-profiler/state");
    assert_eq!(state["memory_profiler"]["automatic_dumps"]["settings"]["every_bytes"], 16 << 20);
}

#[test]
fn a_resident_threshold_dumps_once_per_crossing() {
    let service = Program::service()
        .env("MALLOC_CONF", "prof_active:true")
        .env("MEMPROF_DUMP_AT_RESIDENT", "0.1%")
        .env("MEMPROF_DUMP_MAX_BYTES", "1")
        .spawn();
    let dumps = automatic_dumps(&service, 1);
    let reason = dumps[0]["started_by"].as_str().unwrap();
    assert!(reason.starts_with("automatic: resident ") && reason.contains(" MiB crossed 0.1% of the "), "{reason}");
    // The resident set stays above the threshold: no second dump, however long it stays there.
    service.wait_for_line(|line| line.starts_with("service: 50000 requests handled"));
    assert_eq!(automatic_dumps(&service, 1).len(), 1);
}

#[test]
fn malformed_automatic_dump_settings_are_reported_and_the_program_runs_on() {
    let service = Program::service().env("MEMPROF_DUMP_EVERY", "lots").spawn();
    service.wait_for_line(|line| {
        line == "[memprof] ERROR Automatic heap dumps are off: MEMPROF_DUMP_EVERY=\"lots\" is not a size such as 1GiB"
    });
    assert_eq!(
        service.get_json("/memory-profiler/state")["memory_profiler"]["automatic_dumps"]["settings"],
        serde_json::Value::Null
    );
}

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
    let state = service.get_json("/memory-profiler/state");
    assert_eq!(state["memory_profiler"]["tmp_dir"], "In memory (no writable directory)");
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

#[test]
fn debug_pprof_allocs_shows_what_was_allocated_and_freed_when_jemalloc_keeps_totals() {
    // Without totals (Parca's and Alloy's default scrape path): the in-use profile, and a comment saying why.
    let without = Program::service().env("MALLOC_CONF", "prof_active:true,lg_prof_sample:14").spawn();
    wait_for_sampled(&without, &["service::open_session"]);
    let in_use = without.get("/debug/pprof/allocs");
    assert_eq!(in_use.status, 200, "{}", in_use.text());
    if let Some(comments) = tools::pprof(&in_use.body, &["-comments"]) {
        assert_eq!(
            comments.trim(),
            "This is the in-use heap (inuse_objects, inuse_space): jemalloc keeps allocation totals (alloc_objects, alloc_space) only when the program starts with MALLOC_CONF=prof_accum:true"
        );
        let top = tools::pprof_top(&in_use.body, "inuse_space").unwrap();
        assert!(top.lines().any(|line| line.ends_with("service::open_session")), "{top}");
    }

    let service = Program::service().env("MALLOC_CONF", "prof_accum:true,prof_active:true,lg_prof_sample:14").spawn();
    // 50,000 responses (400 MB through `render_response`) are sampled at 1 in 16 KiB for certain; the first
    // few are not (a run of CI once scraped after 20 and found none).
    service.wait_for_line(|line| line == "service: 50000 requests handled");
    let response = service.get("/debug/pprof/allocs");
    assert_eq!(response.status, 200, "{}", response.text());
    // `render_response` frees its buffers at once: it is in what was allocated, not in what is live.
    let Some(allocated) = tools::pprof_top(&response.body, "alloc_space") else { return };
    assert!(allocated.lines().any(|line| line.ends_with("service::render_response")), "{allocated}");
    let live = tools::pprof_top(&response.body, "inuse_space").unwrap();
    assert!(
        live.contains("service::open_session") && !live.lines().any(|line| line.ends_with("service::render_response")),
        "{live}"
    );
}

#[test]
fn a_new_high_water_mark_of_allocated_bytes_makes_a_dump() {
    let service =
        Program::service().env("MALLOC_CONF", "prof_active:true").env("MEMPROF_DUMP_HIGH_WATER", "10%").spawn();
    let dumps = automatic_dumps(&service, 1);
    let reason = dumps.last().unwrap()["started_by"].as_str().unwrap();
    assert!(reason.starts_with("automatic: new high-water mark, ") && reason.ends_with(" MiB allocated"), "{reason}");
    let settings = &service.get_json("/memory-profiler/state")["memory_profiler"]["automatic_dumps"]["settings"];
    assert_eq!((settings["high_water_step"].as_f64(), settings["keep"].as_u64()), (Some(0.1), Some(8)));
}
