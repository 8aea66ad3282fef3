//! The pull side read by the fleet engines' own code: memprof's `/debug/pprof/allocs` and `/heap` parsed and
//! checked by github.com/google/pprof/profile, the library Parca and Grafana Pyroscope ingest with, and two
//! scrapes' delta taken by it as Grafana Alloy takes it (memprof-tests/go/pprofcheck, built from its module);
//! the OTLP download read by the OpenTelemetry Collector's own pdata (memprof-tests/go/otlpcheck).

use memprof_tests::process::Program;
use memprof_tests::tools;

const MIB: f64 = (1 << 20) as f64;

/// The windows program sampled continuously every 16 KiB on average (64 MiB in 1 MiB blocks churned
/// between two scrapes: every block is sampled). Go's library reads both scrapes of `/debug/pprof/allocs`
/// and finds them valid, with Go's four sample types; their delta (the first scaled by -1, merged with the
/// second) has no sample below zero, and the churning function's `alloc_space` grew by the 64 MiB it
/// allocated, within sampling error. `/debug/pprof/heap` is read and found valid too, and a scrape less
/// itself is nothing.
#[test]
fn googles_pprof_library_reads_the_scrapes_and_their_delta_is_the_load() {
    let program = Program::windows().env("MALLOC_CONF", "lg_prof_sample:14").spawn();
    program.wait_for_line(|line| line == "windows: ready");
    let first = program.get("/debug/pprof/allocs");
    assert_eq!(first.status, 200, "{}", first.text());
    program.tell("churn", "windows: done churn");
    let second = program.get("/debug/pprof/allocs");
    let Some(delta) = tools::pprofcheck(&first.body, &second.body, "churned_in_the_window") else { return };
    let types = ["alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"];
    assert_eq!(delta.sample_types, types, "{delta:?}");
    assert!(delta.samples[0] > 0, "{delta:?}");
    for cumulative in ["alloc_objects", "alloc_space"] {
        assert!(!delta.negative.contains_key(cumulative), "{cumulative} went down: {delta:?}");
    }
    let churned = delta.function_delta["alloc_space"] as f64 / MIB;
    assert!((churned - 64.0).abs() <= 64.0 * 0.06, "{churned:.2} MiB churned between the scrapes: {delta:?}");
    assert!((delta.delta["alloc_space"] as f64) / MIB < 64.0 + 4.0, "{delta:?}");

    let heap = program.get("/debug/pprof/heap");
    assert_eq!(heap.status, 200, "{}", heap.text());
    let itself = tools::pprofcheck(&heap.body, &heap.body, "kept_before_the_window").unwrap();
    assert!(itself.samples[1] > 0, "{itself:?}");
    assert!(itself.delta.values().all(|value| *value == 0), "a scrape less itself: {itself:?}");
}

/// A run's OTLP download (`download/otlp`), read by the OpenTelemetry Collector's own pdata as its OTLP
/// receiver reads a request: pdata accepts it, its resource names the service as the SDK's variables say
/// (as a push does) and the process, one profile a sample type (Go's names) with the run's time and the
/// sampling period, the function that allocates named with what it holds, every live byte the run's other
/// answers count, the example's tenants as sample attributes (acme three times initech), and the
/// service's build id on its mapping.
#[test]
fn the_collectors_pdata_reads_a_runs_otlp_download() {
    let service = Program::service()
        .env("MALLOC_CONF", "lg_prof_sample:16")
        .env("OTEL_SERVICE_NAME", "checkout")
        .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,service.name=overridden")
        .spawn();
    let id = memprof_tests::acceptance::finished_run_holding(&service, "2secs", "service::open_session");
    let download = service.get(&format!("/memory-profiler/download/otlp?id={id}"));
    assert_eq!(download.status, 200, "{}", download.text());
    assert_eq!(download.header("content-type"), Some("application/x-protobuf"));
    let Some(summary) = tools::otlpcheck(&download.body) else { return };
    let resource = |key: &str| summary.resource.get(key).map(String::as_str);
    assert_eq!(resource("service.name"), Some("checkout"), "{summary:?}");
    assert_eq!(resource("deployment.environment"), Some("test"), "{summary:?}");
    assert_eq!(resource("process.pid"), Some(service.pid().to_string().as_str()), "{summary:?}");
    assert_eq!(resource("process.executable.name"), Some("service"), "{summary:?}");
    assert!(resource("host.name").is_some_and(|host| !host.is_empty()), "{summary:?}");
    assert!(summary.scope.starts_with("memprof "), "{summary:?}");
    let profiles = &summary.profiles;
    let types: Vec<String> = profiles.iter().map(|profile| format!("{}/{}", profile.kind, profile.unit)).collect();
    assert!(types.ends_with(&["inuse_objects/count".to_owned(), "inuse_space/bytes".to_owned()]), "{types:?}");
    for profile in profiles {
        assert_eq!(profile.period, 65536, "{profile:?}");
        let seconds = profile.duration_nano as f64 / 1e9;
        assert!((1.5..30.0).contains(&seconds), "the run's 2 s: {profile:?}");
        assert!(profile.time_unix_nano as f64 > 1.7e18, "{profile:?}");
    }
    let inuse_space = profiles.last().unwrap();
    let labels: memprof_wire::LabelBytes =
        serde_json::from_value(service.get_json(&format!("/memory-profiler/labels?id={id}"))).unwrap();
    let (total, samples) = (inuse_space.total as f64, inuse_space.samples as f64);
    assert!((total - labels.total_bytes).abs() <= samples, "{total} bytes in OTLP, {} in the run", labels.total_bytes);
    let sessions = summary.of_function("inuse_space", "service::open_session");
    assert!(sessions > total / 4.0, "open_session holds most: {sessions} of {total}: {summary:?}");
    let by_tenant = &summary.inuse_space_by_attribute;
    let (acme, initech) = (by_tenant["tenant=acme"] as f64, by_tenant["tenant=initech"] as f64);
    assert!(acme > initech * 1.5, "acme {acme}, initech {initech}");
    let build_ids = &summary.build_ids;
    let program = std::fs::read(memprof_tests::process::built_binary("service")).unwrap();
    let file = object::File::parse(&*program).unwrap();
    let expected: String = object::Object::build_id(&file)
        .unwrap()
        .expect("the example has a GNU build id")
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert!(build_ids.contains(&expected), "{expected} not in {build_ids:?}");
}
