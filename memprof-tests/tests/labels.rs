//! Allocation labels on real programs: the example service's two tenants (3:1) through every format and
//! pprof's tags, a labelled tokio task across workers, and more label sets than the bound.

use std::collections::BTreeSet;

use memprof_analysis::{Analysis, Binaries, HeapProfile, LabelSets, NO_LABEL, label_id, labels_path};
use memprof_tests::acceptance::{self, wait_for_sampled};
use memprof_tests::docs;
use memprof_tests::http::request_with_body;
use memprof_tests::process::{Launch, Program, built_binary, memprof_tool};
use memprof_tests::tools::{self, Scratch};

/// The example service sampled every 16 KiB: its 256 sessions of 64 KiB and 128 index blocks of 32 KiB
/// are nearly all sampled, so the tenants' shares come out close to 3:1.
fn finely_sampled_service() -> Program {
    Program::service().env("MALLOC_CONF", "lg_prof_sample:14").spawn()
}

/// A finished run of `service` that sampled `functions`, long enough to hold the service's steady state
/// (every session replaced: 16 MiB of them, sampled every 16 KiB, 2048 samples and more).
fn finished_run(service: &Program, functions: &[&str]) -> u64 {
    let id = acceptance::start(service, "1mins");
    acceptance::wait_for_run_samples(service, 2048);
    wait_for_sampled(service, functions);
    assert_eq!(service.stop().id, Some(id));
    id
}

/// The `MB` total of a text table.
fn total_megabytes(text: &str) -> f64 {
    text.lines().next().and_then(|line| line.strip_prefix("Total: ")?.strip_suffix(" MB")?.parse().ok()).unwrap()
}

#[test]
fn the_services_tenants_split_its_heap_three_to_one_in_every_format() {
    let service = finely_sampled_service();
    let id = finished_run(&service, &["service::open_session", "service::index_document"]);
    let download = |query: &str| {
        let response = service.get(&format!("/memory-profiler/download/{query}"));
        assert_eq!(response.status, 200, "{query}: {}", response.text());
        response
    };

    // Split by tenant: one root row per tenant, adding up to the whole.
    let whole = download(&format!("text?id={id}")).text();
    let split = download(&format!("text?id={id}&by=tenant")).text();
    assert_eq!(split.lines().next(), whole.lines().next(), "the same total:\n{split}");
    let tenant_row = |tenant: &str| {
        split.lines().find(|line| line.ends_with(&format!("% tenant={tenant}"))).unwrap_or_else(|| panic!("{split}"))
    };
    let cumulative = |row: &str| row.split_whitespace().nth(3).unwrap().parse::<f64>().unwrap();
    let (acme, initech) = (cumulative(tenant_row("acme")), cumulative(tenant_row("initech")));
    // Each figure is rounded to 0.1 MB.
    assert!((acme + initech - total_megabytes(&whole)).abs() <= 0.2, "{acme} + {initech}:\n{split}");
    assert!((2.5..3.5).contains(&(acme / initech)), "acme {acme} MB, initech {initech} MB:\n{split}");
    assert!(!whole.contains("tenant=") && !whole.contains("memprof_runtime::labels"), "{whole}");

    // Filtered: only initech's samples.
    let only = download(&format!("text?id={id}&label=tenant:initech")).text();
    assert!((total_megabytes(&only) - initech).abs() <= 0.1, "{only}");
    // What the service allocates outside the labelled block (a few KiB in `main`) is all that has none.
    let none = download(&format!("text?id={id}&label=tenant:(none)")).text();
    assert!(total_megabytes(&none) <= 0.1, "every session and block has a tenant:\n{none}");
    assert!(!none.contains("service::open_session") && !none.contains("service::index_document"), "{none}");

    // Folded stacks and the flame graph start at the tenant.
    let collapsed = download(&format!("collapsed?id={id}&by=tenant")).text();
    let labelled = collapsed
        .lines()
        .filter(|line| line.contains("service::open_session") || line.contains("service::index_document"));
    assert!(
        labelled.clone().count() >= 4
            && labelled.into_iter().all(|line| line.starts_with("tenant=acme;") || line.starts_with("tenant=initech;")),
        "{collapsed}"
    );
    let flame_graph = download(&format!("flamegraph?id={id}&by=tenant")).text();
    assert!(flame_graph.contains("tenant=initech"), "the flame graph has the tenant frames");
    let graph = download(&format!("graph?id={id}&by=tenant")).text();
    assert!(graph.contains("tenant=acme"), "the call graph has the tenant frames");

    // pprof: tags, as go tool pprof lists them.
    let pprof = download(&format!("pprof?id={id}")).body;
    if let Some(tags) = tools::pprof(&pprof, &["-tags"]) {
        let share = |tenant: &str| -> f64 {
            let line = tags.lines().find(|line| line.trim_end().ends_with(&format!(": {tenant}")));
            let line = line.unwrap_or_else(|| panic!("{tenant} is not among the tags:\n{tags}"));
            line.split('(').nth(1).and_then(|rest| rest.split('%').next()).unwrap().parse().unwrap()
        };
        assert!(tags.contains(" tenant: Total "), "{tags}");
        let ratio = share("acme") / share("initech");
        assert!((2.5..3.5).contains(&ratio), "{ratio}:\n{tags}");
        let focused = tools::pprof(&pprof, &["-top", "-tagfocus=tenant=initech"]).unwrap();
        assert!(focused.contains("service::open_session"), "{focused}");
    }

    // The bytes by label, as the dashboard shows them: the same split, adding up to the whole.
    let summary: memprof_wire::LabelBytes = service.get_as(&format!("/memory-profiler/labels?id={id}"));
    let tenants = summary.keys.get("tenant").unwrap_or_else(|| panic!("{summary:?}"));
    // A sample of what `main` allocates outside the labelled block may be there too, under `(none)`.
    let named: Vec<_> = tenants.keys().filter(|tenant| *tenant != NO_LABEL).collect();
    assert_eq!(named, ["acme", "initech"], "{summary:?}");
    let unlabelled = tenants.get(NO_LABEL).copied().unwrap_or(0.0);
    assert!(unlabelled / 1048576.0 <= 0.1, "every session and block has a tenant: {summary:?}");
    let summed: f64 = tenants.values().sum();
    assert!((summed - summary.total_bytes).abs() < 1.0, "{summary:?}");
    assert!((summed / 1048576.0 - total_megabytes(&whole)).abs() <= 0.1, "{summary:?}");

    // Bad keys and filters are refused, saying what is expected.
    let refused = service.get(&format!("/memory-profiler/download/text?id={id}&by=the%20tenant"));
    assert_eq!(
        (refused.status, refused.text()),
        (
            400,
            "Invalid parameter 'by': 'the tenant' is not a label key; expected letters, digits and '_' (at most 64).\n"
                .to_owned()
        )
    );
    let refused = service.get(&format!("/memory-profiler/download/text?id={id}&label=tenant"));
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(refused.text().contains("'tenant' is not KEY:VALUE (for example tenant:acme)"), "{}", refused.text());
}

#[test]
fn the_label_table_travels_beside_the_raw_profile_and_the_symbol_service_names_label_frames() {
    let service = finely_sampled_service();
    let id = finished_run(&service, &["service::open_session"]);
    let state = service.state();
    let directory = std::path::Path::new(&state.tmp_dir);
    let profile = directory.join(format!("profile.{id}.heap"));
    let table = std::fs::read_to_string(labels_path(&profile)).unwrap();
    let table = LabelSets::parse(&table).unwrap();

    // Offline, with the table beside it, the raw profile splits as the service splits it.
    let raw = HeapProfile::parse(&service.get(&format!("/memory-profiler/download/raw?id={id}")).text()).unwrap();
    let analysis = Analysis::with_labels(&raw, &Binaries::as_mapped(), &table);
    let bytes = |tenant: &str| -> f64 {
        analysis
            .samples
            .iter()
            .filter(|sample| sample.labels.get("tenant") == Some(tenant))
            .map(|sample| sample.bytes)
            .sum()
    };
    assert!((2.5..3.5).contains(&(bytes("acme") / bytes("initech"))), "{} {}", bytes("acme"), bytes("initech"));
    let in_sessions = |sample: &&memprof_analysis::Sample| {
        analysis.shown_frames(sample, false).iter().any(|frame| &*frame.function == "service::open_session")
    };
    assert!(analysis.samples.iter().filter(in_sessions).all(|sample| sample.labels.get("tenant").is_some()));

    // The symbol service names the label frames as jeprof asks for them (moved back by one).
    let label_frames: BTreeSet<u64> = raw
        .stacks
        .iter()
        .filter_map(|stack| stack.addresses.last().copied().filter(|&address| label_id(address).is_some()))
        .collect();
    assert!(!label_frames.is_empty(), "every sample ends in its label frame");
    let asked: Vec<String> = label_frames.iter().map(|address| format!("{:#x}", address - 1)).collect();
    let names = request_with_body(service.address(), "POST", "/debug/pprof/symbol", asked.join("+").as_bytes()).text();
    let named: BTreeSet<&str> = names.lines().filter_map(|line| line.split_once(' ').map(|(_, name)| name)).collect();
    assert_eq!(named, BTreeSet::from(["memprof label tenant=acme", "memprof label tenant=initech"]), "{names}");
}

/// jeprof, through the endpoint, names the label frames as the symbol service answers them.
#[test]
fn jeprof_through_the_endpoint_shows_the_tenants() {
    let (Some(jeprof), Some(_)) = (tools::find("jeprof", "libjemalloc-dev"), tools::find("curl", "curl")) else {
        return;
    };
    let service = finely_sampled_service();
    finished_run(&service, &["service::open_session"]);
    let scratch = Scratch::new("jeprof-labels");
    let url = format!("http://{}/memory-profiler/pprof/heap", service.address());
    let report = tools::run(
        &jeprof,
        &["--text", "--cum", &url],
        &[("JEPROF_TMPDIR", &scratch.join("tmp")), ("HOME", &scratch.join("home"))],
    );
    let report = String::from_utf8_lossy(&report.stdout);
    for tenant in ["acme", "initech"] {
        assert!(report.contains(&format!("memprof label tenant={tenant}")), "{report}");
    }
}

/// The labelled program, in `mode`, with its endpoints on.
fn labelled(mode: &str) -> Launch {
    Launch::new(built_binary("labelled")).args([mode]).env("LIBPROCESS_MEMORY_PROFILING", "true")
}

#[test]
fn a_labelled_tokio_task_keeps_its_labels_on_every_worker_and_an_unlabelled_one_never_gets_them() {
    let service = labelled("tokio").env("MALLOC_CONF", "lg_prof_sample:14").spawn();
    service.wait_for_line(|line| line == "labelled task polled on 2 threads");
    let id = acceptance::start(&service, "1mins");
    wait_for_sampled(&service, &["labelled::labelled_allocation", "labelled::unlabelled_allocation"]);
    service.get_json("/memory-profiler/stop");
    let collapsed = service.get(&format!("/memory-profiler/download/collapsed?id={id}&by=task")).text();
    let stacks = |function: &str| -> Vec<&str> {
        collapsed.lines().filter(|line| line.contains(&format!("labelled::{function} "))).collect()
    };
    let (labelled, unlabelled) = (stacks("labelled_allocation"), stacks("unlabelled_allocation"));
    assert!(!labelled.is_empty() && !unlabelled.is_empty(), "{collapsed}");
    assert!(labelled.iter().all(|stack| stack.starts_with("task=labelled;")), "{collapsed}");
    assert!(unlabelled.iter().all(|stack| stack.starts_with("task=(none);")), "{collapsed}");
}

#[test]
fn more_label_sets_than_the_bound_are_recorded_as_one_overflow_set_counted_and_reported_once() {
    let service = labelled("overflow").env("MALLOC_CONF", "prof_active:true,lg_prof_sample:10").spawn();
    service.wait_for_line(|line| line == "entered 1100 label sets");
    let labels = service.state().labels;
    assert_eq!((labels.sets, labels.max_sets, labels.overflowed), (1024, 1024, 76), "{labels:?}");
    let metrics = service.get("/metrics").text();
    assert!(metrics.contains("\nmemprof_label_sets 1024\n"), "{metrics}");
    assert!(metrics.contains("\nmemprof_label_sets_overflowed_total 76\n"), "{metrics}");
    let warning = "[memprof] WARN More than 1024 distinct label sets: new ones are recorded as memprof_overflow=too many label sets. Label by values that repeat (a tenant, a route), not by ones that never do (a request id, a user id)";
    let warned = service.output().iter().filter(|line| *line == warning).count();
    assert_eq!(warned, 1, "{:#?}", service.output());
    let live = service.get("/debug/pprof/heap");
    assert_eq!(live.status, 200, "{}", live.text());
    if let Some(tags) = tools::pprof(&live.body, &["-tags"]) {
        assert!(tags.contains(" memprof_overflow: Total"), "{tags}");
        assert!(tags.contains(" request: Total"), "{tags}");
    }
}

/// The tool: a raw download brings its label table beside it, `analyze --by` and `--label` read it
/// offline, and `download --by`/`--label` ask the service for the same.
#[test]
fn the_tool_splits_and_filters_by_label_offline_and_through_the_service() {
    let service = finely_sampled_service();
    let id = finished_run(&service, &["service::open_session"]).to_string();
    let scratch = Scratch::new("labels-cli");
    let raw = scratch.join("run.heap");
    let (code, _, stderr) =
        memprof_tool(&service, &["download", "--id", &id, "--format", "raw", "-o", raw.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(labels_path(&raw).is_file(), "the label table is written beside the raw profile");
    let (code, offline, stderr) = memprof_tool(&service, &["analyze", raw.to_str().unwrap(), "--by", "tenant"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, served, _) = memprof_tool(&service, &["download", "--id", &id, "--by", "tenant"]);
    assert_eq!(code, 0);
    for tenant in ["acme", "initech"] {
        let row = format!("% tenant={tenant}");
        assert!(offline.lines().any(|line| line.ends_with(&row)), "{offline}");
        assert!(served.lines().any(|line| line.ends_with(&row)), "{served}");
    }
    let (code, only, _) =
        memprof_tool(&service, &["download", "--id", &id, "--label", "tenant:initech", "--format", "collapsed"]);
    assert_eq!(code, 0);
    let (_, offline_only, _) = memprof_tool(
        &service,
        &["analyze", raw.to_str().unwrap(), "--label", "tenant:initech", "--format", "collapsed"],
    );
    assert_eq!(only, offline_only, "the service and the tool filter alike");
    let (code, _, refused) = memprof_tool(&service, &["download", "--id", &id, "--label", "tenant"]);
    assert_eq!(code, 2, "{refused}");
    assert!(refused.contains("'tenant' is not KEY:VALUE (for example tenant:acme)"), "{refused}");
}

/// A task instrumented with a `tracing` span is labelled by memprof's layer with the span's name and its
/// chosen fields, on every poll, with no label code of its own.
#[test]
fn a_task_instrumented_with_a_tracing_span_is_labelled_with_its_name_and_fields() {
    let service = labelled("tracing").env("MALLOC_CONF", "lg_prof_sample:14").spawn();
    service.wait_for_line(|line| line == "tracing ready");
    let id = acceptance::start(&service, "1mins");
    wait_for_sampled(&service, &["labelled::traced_allocation"]);
    service.get_json("/memory-profiler/stop");
    for (key, root) in [("span", "span=job;"), ("tenant", "tenant=acme;")] {
        let collapsed = service.get(&format!("/memory-profiler/download/collapsed?id={id}&by={key}")).text();
        let traced: Vec<&str> =
            collapsed.lines().filter(|line| line.contains("labelled::traced_allocation ")).collect();
        assert!(!traced.is_empty() && traced.iter().all(|stack| stack.starts_with(root)), "{collapsed}");
    }
}

/// With libgcc's walk (`MEMPROF_UNWINDER=libgcc`) memprof's hook wraps it, so samples carry their labels
/// the same.
#[test]
fn samples_walked_by_libgcc_carry_their_labels_too() {
    let service = Program::service().env("MALLOC_CONF", "lg_prof_sample:14").env("MEMPROF_UNWINDER", "libgcc").spawn();
    let walk = service.state().stack_walk;
    assert_eq!(walk.method, "libgcc", "{walk:?}");
    let id = finished_run(&service, &["service::open_session"]);
    let collapsed = service.get(&format!("/memory-profiler/download/collapsed?id={id}&by=tenant")).text();
    let sessions: Vec<&str> = collapsed.lines().filter(|line| line.contains("service::open_session")).collect();
    for tenant in ["acme", "initech"] {
        let root = format!("tenant={tenant};");
        assert!(sessions.iter().any(|stack| stack.starts_with(&root)), "{root}\n{collapsed}");
    }
    let labelled = |stack: &&str| ["tenant=acme;", "tenant=initech;"].iter().any(|root| stack.starts_with(root));
    assert!(sessions.iter().all(labelled), "every session has its tenant:\n{collapsed}");
}

/// When the walk fills jemalloc's buffer (`prof_bt_max` frames), the allocator's frames are not among
/// them (they are dropped as the walk goes) and the label takes the outermost frame's place instead of
/// being dropped: a deep stack keeps its allocating function and its tenant.
#[test]
fn a_stack_that_fills_the_buffer_keeps_its_allocating_function_and_its_label() {
    let service = Program::service().env("MALLOC_CONF", "lg_prof_sample:14,prof_bt_max:4").spawn();
    let id = finished_run(&service, &["service::open_session"]);
    let raw = HeapProfile::parse(&service.get(&format!("/memory-profiler/download/raw?id={id}")).text()).unwrap();
    assert!(raw.stacks.iter().all(|stack| stack.addresses.len() <= 4), "jemalloc keeps at most 4 frames");
    let split = service.get(&format!("/memory-profiler/download/text?id={id}&by=tenant")).text();
    for row in ["% tenant=acme", "% tenant=initech", "% service::open_session"] {
        assert!(split.lines().any(|line| line.ends_with(row)), "{row}:\n{split}");
    }
}

/// Under a filter on the whole subscriber at `warn` (what `RUST_LOG=warn` through an `EnvFilter` does), the
/// span memprof's layer reads is disabled: nothing is labelled, and after a minute of sampling `state` says
/// why and what to do. With the filter given to the log's layer alone, as docs/labels.md says, the span
/// labels again, and nothing is said. On the main of the day this was filed, every byte showed as
/// `tenant=(none)` without a word.
#[test]
fn a_global_filter_silencing_the_label_layer_is_said_and_a_per_layer_filter_labels() {
    let launch = |mode: &str| {
        let program =
            labelled(mode).env("MALLOC_CONF", "lg_prof_sample:14").env("MEMPROF_SAMPLING", "continuous").spawn();
        program.wait_for_line(|line| line == "tracing ready");
        program
    };
    let documented =
        docs::checked_by("a_global_filter_silencing_the_label_layer_is_said_and_a_per_layer_filter_labels");
    docs::assert_blocks_are_in(&documented, "memprof-tests/src/bin/labelled.rs");
    let (filtered, per_layer) = (launch("tracing-filtered"), launch("tracing-per-layer"));
    let warnings = |program: &Program| {
        let state: memprof_wire::State = serde_json::from_value(program.get_json("/memory-profiler/state")).unwrap();
        state.memory_profiler.warnings
    };
    let said = "The tracing LabelLayer has labelled nothing in the ";
    let warning = memprof_tests::waiting::wait_every(
        "the silent label layer to be said",
        std::time::Duration::from_secs(150),
        std::time::Duration::from_secs(1),
        || {
            let warnings = warnings(&filtered);
            warnings.iter().find(|warning| warning.starts_with(said)).cloned().ok_or_else(|| format!("{warnings:?}"))
        },
    );
    assert!(warning.contains("carrying its fields (tenant)") && warning.contains(".with_filter("), "{warning}");
    let not_said = warnings(&per_layer);
    assert!(not_said.iter().all(|warning| !warning.starts_with(said)), "{not_said:?}");
    let id = acceptance::start(&per_layer, "1mins");
    wait_for_sampled(&per_layer, &["labelled::traced_allocation"]);
    per_layer.get_json("/memory-profiler/stop");
    let collapsed = per_layer.get(&format!("/memory-profiler/download/collapsed?id={id}&by=tenant")).text();
    let traced: Vec<&str> = collapsed.lines().filter(|line| line.contains("labelled::traced_allocation ")).collect();
    assert!(!traced.is_empty() && traced.iter().all(|stack| stack.starts_with("tenant=acme;")), "{collapsed}");
}

/// A real tonic gRPC server (src/bin/tenants_grpc.rs) whose calls memprof's tower layer labels by the
/// caller's `x-tenant` metadata, as docs/labels.md gives it: what the calls keep splits 3:1 by tenant, as
/// stored. (`route_labels()` was axum's alone; a tonic service had no way but a layer of its own.)
#[test]
fn a_tonic_servers_calls_are_labelled_per_tenant_by_the_tower_layer() {
    let documented = docs::checked_by("a_tonic_servers_calls_are_labelled_per_tenant_by_the_tower_layer");
    docs::assert_blocks_are_in(&documented, "memprof-tests/src/bin/tenants_grpc.rs");
    let service = Launch::new(built_binary("tenants_grpc"))
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MALLOC_CONF", "lg_prof_sample:14")
        .spawn();
    service.wait_for_line(|line| line.starts_with("grpc ready"));
    let id = acceptance::start(&service, "2secs");
    memprof_tests::waiting::wait_until("the timed run to end", memprof_tests::process::PATIENCE, || {
        let state: memprof_wire::State = serde_json::from_value(service.get_json("/memory-profiler/state")).unwrap();
        match state.memory_profiler.current_run {
            memprof_wire::CurrentRun::Idle { .. } => Ok(()),
            running => Err(format!("{running:?}")),
        }
    });
    let collapsed = service.get(&format!("/memory-profiler/download/collapsed?id={id}&by=tenant")).text();
    let bytes_of = |tenant: &str| -> f64 {
        let root = format!("tenant={tenant};");
        collapsed
            .lines()
            .filter(|line| line.starts_with(&root) && line.contains("tenants_grpc::open_session "))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let (acme, initech) = (bytes_of("acme"), bytes_of("initech"));
    assert!(acme > 0.0 && initech > 0.0, "{collapsed}");
    let share = acme / (acme + initech);
    assert!((0.68..=0.82).contains(&share), "acme's share {share:.3}:\n{collapsed}");
}
