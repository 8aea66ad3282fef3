//! memprof in a service shaped like production ones: tokio and axum, its own jemalloc allocator, its
//! logger set up first, memprof's endpoints nested in its own router (`examples/axum-service`, a
//! workspace of its own so that memprof's `axum` feature does not unify with this one's). The acceptance
//! checks of the built-in server pass against it too.

use std::path::Path;

use memprof_tests::acceptance;
use memprof_tests::adopters::adopters;
use memprof_tests::process::Launch;
use memprof_tests::tools;

/// The axum service on a free port, waited for until it listens.
fn axum_service() -> Launch {
    Launch::new(adopters().join("axum-service"))
        .env("ADDR", "127.0.0.1:0")
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .serving_at("axum-service: listening on http://")
}

const ALLOCATING: [&str; 2] = ["new_session", "new_index_block"];

#[test]
fn a_run_round_trips_through_the_mounted_router() {
    // Mesos's round trip, sampling on demand (continuous sampling's windows: tests/continuous.rs).
    let service = axum_service().env("MEMPROF_SAMPLING", "on-demand").spawn();
    assert_eq!(service.get("/").text(), "axum-service\n", "the service's own routes are its own");
    acceptance::a_run_round_trips(&service, &adopters().join("axum-service"), &ALLOCATING);
}

#[test]
fn the_timer_ends_a_run_through_the_mounted_router() {
    acceptance::the_timer_ends_a_run(&axum_service().spawn());
}

#[test]
fn concurrent_starts_through_the_mounted_router_make_one_run() {
    acceptance::concurrent_starts_make_one_run(&axum_service().spawn());
}

#[test]
fn stop_without_a_run_through_the_mounted_router_says_so() {
    acceptance::stop_without_a_run_says_so(&axum_service().spawn());
}

#[test]
fn statistics_through_the_mounted_router_are_jemallocs_json() {
    acceptance::statistics_are_jemallocs_json(&axum_service().spawn());
}

#[test]
fn bad_requests_through_the_mounted_router_are_refused_as_by_the_built_in_server() {
    acceptance::bad_requests_are_refused_clearly(&axum_service().spawn());
}

#[test]
fn memprofs_messages_go_to_the_programs_logger_and_its_work_is_never_sampled() {
    let service = axum_service().spawn();
    let id = acceptance::start(&service, "2secs");
    for _ in 0..50 {
        assert_eq!(service.get("/memory-profiler/state").status, 200);
    }
    acceptance::wait_until_idle(&service);
    let text = service.get(&format!("/memory-profiler/download/text?id={id}")).text();
    assert!(text.contains("axum_service::new_session"), "{text}");
    assert!(!text.contains("memprof_runtime::"), "memprof's own work was sampled:\n{text}");
    // env_logger's format, not memprof's stand-in for programs without a logger.
    let ended = service.wait_for_line(|line| line.contains(&format!("Heap profiling run {id} ended")));
    assert!(ended.starts_with('[') && ended.contains(" INFO  memprof] Heap profiling run"), "{ended}");
    assert!(!service.output().iter().any(|line| line.starts_with("[memprof]")), "{:#?}", service.output());
}

#[test]
fn parca_and_alloy_scrape_the_mounted_debug_pprof_paths() {
    let service = axum_service().env("MALLOC_CONF", "prof_active:true,lg_prof_sample:14").spawn();
    acceptance::wait_for_sampled(&service, &["axum_service::new_session"]);
    let head = memprof_tests::http::request(service.address(), "HEAD", "/memory-profiler/state");
    assert_eq!((head.status, head.body.len()), (200, 0));
    let responses: Vec<_> = ["/debug/pprof/heap", "/debug/pprof/allocs"]
        .into_iter()
        .map(|path| {
            let response = service.get(path);
            assert_eq!(response.status, 200, "{path}: {}", response.text());
            assert_eq!(response.header("content-type"), Some("application/octet-stream"), "{path}");
            (path, response)
        })
        .collect();
    // What pprof reads of them, where it is installed (a skip is said, and fails under MEMPROF_REQUIRE_PEERS).
    for (path, response) in responses {
        let Some(top) = tools::pprof_top(&response.body, "inuse_space") else { return };
        assert!(top.lines().any(|line| line.ends_with("axum_service::new_session")), "{path}:\n{top}");
    }
}

#[test]
fn mounted_endpoints_are_off_without_the_switch_and_say_so_once() {
    let service = axum_service()
        .env_remove("LIBPROCESS_MEMORY_PROFILING")
        .serving_at("axum-service: listening on http://")
        .spawn();
    assert_eq!(service.get("/").status, 200);
    for path in
        ["/memory-profiler/state", "/memory-profiler/start?duration=1hrs", "/memory-profiler", "/debug/pprof/heap"]
    {
        let response = service.get(path);
        assert_eq!(response.status, 404, "{path}: {}", response.text());
        assert!(
            response.text().ends_with("heap profiling endpoints are off (set LIBPROCESS_MEMORY_PROFILING=true).\n")
        );
    }
    let said = |line: &str| line.contains("Heap profiling endpoints mounted on the program's own server are off");
    service.wait_for_line(said);
    assert_eq!(service.output().iter().filter(|line| said(line)).count(), 1, "{:#?}", service.output());
}

#[test]
fn the_token_guards_the_mounted_endpoints_and_nothing_else() {
    let service = axum_service().env("MEMPROF_TOKEN", "s3cret").spawn();
    assert_eq!(service.get("/").status, 200, "the service's own routes are untouched");
    let refused = service.get("/memory-profiler/state");
    assert_eq!(refused.status, 401);
    assert_eq!(refused.header("www-authenticate"), Some("Bearer realm=\"memprof\""));
    assert_eq!(service.get("/debug/pprof/heap").status, 401);
    // The dashboard page holds no data; merged, it is at the README's address, with and without the slash.
    assert_eq!(service.get("/memory-profiler").status, 200, "the dashboard page holds no data");
    assert_eq!(service.get("/memory-profiler/").status, 200, "the dashboard page holds no data");
    assert_eq!(service.get("/metrics").status, 401, "the metrics are there, behind the token");
    // The scheme's name in any case (RFC 9110), which the http helpers would not send.
    let request =
        b"GET /memory-profiler/state HTTP/1.1\r\nHost: x\r\nAuthorization: bearer s3cret\r\nConnection: close\r\n\r\n";
    let allowed = memprof_tests::http::exchange(service.address(), request);
    assert_eq!(allowed.status, 200);
    assert!(allowed.parsed::<memprof_wire::State>("state").memory_profiler.auth_required);
}

#[test]
fn sigterm_is_the_services_own_and_its_graceful_end_cleans_up() {
    let scratch = tools::Scratch::new("axum-sigterm");
    let final_dump = scratch.join("final.heap");
    let mut service = axum_service().env("MEMPROF_FINAL_DUMP", &final_dump).spawn();
    acceptance::start(&service, "1mins");
    service.get_json("/memory-profiler/stop");
    let directory = service.state().tmp_dir;
    acceptance::start(&service, "1mins");
    service.signal("TERM");
    assert!(service.wait(), "graceful shutdown: {:#?}", service.output());
    assert_eq!(service.output().iter().filter(|line| *line == "axum-service: done").count(), 1);
    assert!(!Path::new(&directory).exists(), "{directory} was left behind");
    assert!(std::fs::read_to_string(&final_dump).unwrap().starts_with("heap_v2/"));
}

#[test]
fn a_service_with_its_own_allocator_and_no_malloc_conf_is_told_what_to_add() {
    let missing = || {
        Launch::new(adopters().join("missing-conf"))
            .env("LIBPROCESS_MEMORY_PROFILING", "true")
            .env("MEMPROF_HTTP", "127.0.0.1:0")
    };
    let advice = "Heap profiling is disabled: jemalloc was not asked to profile. Add `memprof::malloc_conf!();` at the crate root of the binary (beside its #[global_allocator]), which exports malloc_conf=\"prof:true,prof_active:false\"; or start the program with MALLOC_CONF=prof:true,prof_active:false.";
    let shown =
        memprof_tests::docs::checked_by("a_service_with_its_own_allocator_and_no_malloc_conf_is_told_what_to_add");
    assert_eq!(shown[0].text, format!("[memprof] ERROR {advice}\n"), "{}", shown[0].place());
    let service = missing().spawn();
    service.wait_for_line(|line| line == format!("[memprof] ERROR {advice}"));
    let state = service.whole_state();
    assert_eq!(state.memory_profiler.warnings, [advice.to_owned()]);
    assert!(!state.jemalloc.profiling_enabled);
    let refused = service.get("/memory-profiler/start?duration=1mins");
    assert_eq!((refused.status, refused.text()), (503, format!("{advice}\n")));

    // Told through the environment instead, it profiles (every 16 KiB: the program allocates slowly).
    let told = missing().env("MALLOC_CONF", "prof:true,prof_active:false,lg_prof_sample:14").spawn();
    assert_eq!(told.state().warnings, Vec::<String>::new());
    let id = acceptance::start(&told, "1mins");
    acceptance::wait_for_sampled(&told, &["missing_conf::main"]);
    assert_eq!(told.stop().id, Some(id));
    let text = told.get(&format!("/memory-profiler/download/text?id={id}")).text();
    assert!(text.contains("missing_conf::main"), "{text}");
}

/// A tokio service's stacks start at its async fns: the worker threads' start-up and tokio's scheduling
/// are cut (`full=true` keeps them), and its handlers lead the text profile.
#[test]
fn a_tokio_services_stacks_start_at_its_async_fns() {
    let service = axum_service().spawn();
    let id = acceptance::start(&service, "1mins");
    acceptance::wait_for_sampled(&service, &["axum_service::new_"]);
    service.get_json("/memory-profiler/stop");
    let loaded = service.get(&format!("/memory-profiler/download/collapsed?id={id}")).text();
    let handlers: Vec<&str> = loaded.lines().filter(|line| line.contains("axum_service::new_")).collect();
    assert!(!handlers.is_empty(), "{loaded}");
    for stack in &handlers {
        assert!(stack.starts_with("axum_service::"), "the stack starts at the service's async fn: {stack}");
        assert!(!stack.contains("tokio::"), "no tokio machinery above the service's code: {stack}");
    }
    let full = service.get(&format!("/memory-profiler/download/collapsed?id={id}&full=true")).text();
    assert!(full.contains("tokio::runtime::task::core::Core<T,S>::poll;"), "{full}");
    let text = service.get(&format!("/memory-profiler/download/text?id={id}")).text();
    let top: Vec<&str> = text.lines().skip(1).take(2).map(|row| row.split_whitespace().last().unwrap()).collect();
    // Requests that come through axum: hyper's connection and tokio's task are cut (the stack starts at the
    // service's outermost frame: its tenant middleware, then axum's routing to the handler), and kept with
    // `full=true`.
    let id = acceptance::start(&service, "1mins");
    for _ in 0..200 {
        assert_eq!(memprof_tests::http::request(service.address(), "POST", "/sessions").status, 200);
    }
    service.get_json("/memory-profiler/stop");
    let is_connection_or_task = |frame: &str| {
        ["hyper::", "tokio::"]
            .iter()
            .any(|prefix| frame.starts_with(prefix) || frame.starts_with(&format!("<{prefix}")))
    };
    let collapsed = service.get(&format!("/memory-profiler/download/collapsed?id={id}")).text();
    // (A stack of hyper's own buffers, with no frame of the service's, may be sampled too: it is whole.)
    for stack in collapsed.lines().filter(|stack| stack.contains("axum_service::")) {
        let (frames, _) = stack.rsplit_once(' ').unwrap();
        assert!(frames.starts_with("axum_service::"), "the stack starts at the service's code: {stack}");
        assert!(!frames.split(';').any(is_connection_or_task), "hyper's or tokio's frame: {stack}");
    }
    assert!(collapsed.contains("axum_service::open_session::{{closure}};axum_service::new_session "), "{collapsed}");
    let full = service.get(&format!("/memory-profiler/download/collapsed?id={id}&full=true")).text();
    let through_axum = full.lines().filter(|stack| stack.contains("open_session::{{closure}}"));
    assert!(through_axum.clone().any(|stack| stack.split(';').any(|frame| frame.starts_with("hyper::"))), "{full}");
    let mut top = top;
    top.sort();
    assert_eq!(top, ["axum_service::new_index_block", "axum_service::new_session"], "{text}");
    // What docs/adoption.md shows of this service's profile: the same functions in the text table, the same
    // stacks folded.
    let shown = &memprof_tests::docs::checked_by("a_tokio_services_stacks_start_at_its_async_fns")[0];
    for row in shown.text.lines().filter(|row| row.contains('%')) {
        let function = row.split_whitespace().last().unwrap();
        assert!(text.contains(&format!("% {function}\n")), "{}: {function} is not in\n{text}", shown.place());
    }
    for folded in shown.text.lines().filter(|line| !line.starts_with('$') && line.contains(';')) {
        let (stack, _) = folded.rsplit_once(' ').unwrap();
        assert!(loaded.lines().any(|line| line.starts_with(&format!("{stack} "))), "{}: {stack}", shown.place());
    }
}

/// The README's quick start for a service with its own allocator, logger and router, followed as written:
/// its dependencies are the example's, its code is `examples/axum-service/src/bin/readme-quick-start.rs`
/// (but for the port), and that program serves its own route and memprof's merged ones, runs a profile,
/// answers what Parca and Prometheus scrape, ends gracefully on SIGTERM, and is off without the switch.
#[test]
fn the_readmes_axum_quick_start_works_as_written() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let blocks = memprof_tests::docs::checked_by("the_readmes_axum_quick_start_works_as_written");
    let block = |language: &str| {
        let mut written = blocks.iter().filter(|block| block.language == language);
        let block = written.next().expect("the quick start's block");
        assert!(written.next().is_none(), "one {language} block");
        block.text.clone()
    };
    let manifest = std::fs::read_to_string(workspace.join("examples/axum-service/Cargo.toml")).unwrap();
    let dependencies = block("toml");
    assert!(dependencies.contains(r#"memprof = { version = "0.1", features = ["axum"] }"#), "{dependencies}");
    assert!(manifest.contains(r#"memprof = { path = "../..", features = ["axum"] }"#), "{manifest}");
    for line in dependencies.lines().filter(|line| !line.starts_with("memprof ") && !line.starts_with('[')) {
        let dependency = line.split('#').next().unwrap().trim();
        assert!(manifest.lines().any(|line| line == dependency), "{dependency} is not the example's");
    }
    let program = std::fs::read_to_string(workspace.join("examples/axum-service/src/bin/readme-quick-start.rs"));
    let program = program.unwrap();
    // After the file's doc comment: the README's code.
    let code = program.split_once("\n\n").unwrap().1;
    assert_eq!(code, block("rust").replace("\"127.0.0.1:3000\"", "\"127.0.0.1:0\""));

    let quick_start = || Launch::new(adopters().join("readme-quick-start"));
    let mut service = quick_start().env("LIBPROCESS_MEMORY_PROFILING", "true").serving_where_it_listens().spawn();
    assert_eq!(service.get("/").text(), "hello");
    let id = acceptance::start(&service, "1mins");
    assert_eq!(service.stop().id, Some(id));
    let text = service.get(&format!("/memory-profiler/download/text?id={id}"));
    assert!(text.status == 200 && text.text().starts_with("Total: "), "{}", text.text());
    assert_eq!(service.get("/debug/pprof/heap").status, 200);
    assert!(service.get("/metrics").text().contains("memprof_profiling_enabled 1\n"));
    service.signal("TERM");
    let ended = service.wait_for_exit();
    assert!(ended.success(), "{ended:?}: {:#?}", service.output());

    let off = quick_start().serving_where_it_listens().spawn();
    assert_eq!(off.get("/").text(), "hello");
    assert_eq!(off.get("/memory-profiler/state").status, 404);
}

/// Memory by route and tenant in the axum service (without its load task, whose sessions would push the
/// requests' out): requests through its router are labelled with the route they matched (memprof's layer)
/// and the tenant their header names (the service's own middleware).
#[test]
fn requests_through_axum_are_labelled_by_route_and_tenant() {
    let service = axum_service().env("MALLOC_CONF", "lg_prof_sample:14").env("LOAD", "off").spawn();
    let id = acceptance::start(&service, "1mins");
    for tenant in ["acme", "initech", "acme"] {
        for _ in 0..100 {
            let headers = [("X-Tenant", tenant)];
            let response =
                memprof_tests::http::request_with_headers(service.address(), "POST", "/sessions", &headers, b"");
            assert_eq!(response.status, 200);
        }
    }
    service.get_json("/memory-profiler/stop");
    let by_route = service.get(&format!("/memory-profiler/download/collapsed?id={id}&by=route")).text();
    // Every session was opened through the router: each is under its route.
    let sessions: Vec<&str> = by_route.lines().filter(|line| line.contains("axum_service::new_session ")).collect();
    assert!(!sessions.is_empty(), "{by_route}");
    assert!(sessions.iter().all(|stack| stack.starts_with("route=/sessions;")), "{by_route}");

    let by_tenant = service.get(&format!("/memory-profiler/download/text?id={id}&by=tenant")).text();
    for tenant in ["acme", "initech"] {
        assert!(by_tenant.lines().any(|line| line.ends_with(&format!("% tenant={tenant}"))), "{by_tenant}");
    }
    assert!(!by_tenant.contains("tenant=unknown"), "every request named its tenant: {by_tenant}");
}
