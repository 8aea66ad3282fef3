//! The pull side read by the fleet engines' own code: memprof's `/debug/pprof/allocs` and `/heap` parsed and
//! checked by github.com/google/pprof/profile, the library Parca and Grafana Pyroscope ingest with, and two
//! scrapes' delta taken by it as Grafana Alloy takes it (memprof-tests/go/pprofcheck, built from its module).

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
    assert_eq!(delta["sample_types"], serde_json::json!(types), "{delta}");
    assert!(delta["samples"][0].as_u64().unwrap() > 0, "{delta}");
    for cumulative in ["alloc_objects", "alloc_space"] {
        assert!(delta["negative"].get(cumulative).is_none(), "{cumulative} went down: {delta}");
    }
    let churned = delta["function_delta"]["alloc_space"].as_f64().unwrap() / MIB;
    assert!((churned - 64.0).abs() <= 64.0 * 0.06, "{churned:.2} MiB churned between the scrapes: {delta}");
    assert!(delta["delta"]["alloc_space"].as_f64().unwrap() / MIB < 64.0 + 4.0, "{delta}");

    let heap = program.get("/debug/pprof/heap");
    assert_eq!(heap.status, 200, "{}", heap.text());
    let itself = tools::pprofcheck(&heap.body, &heap.body, "kept_before_the_window").unwrap();
    assert!(itself["samples"][1].as_u64().unwrap() > 0, "{itself}");
    let nothing: Vec<i64> =
        itself["delta"].as_object().unwrap().values().map(|value| value.as_i64().unwrap()).collect();
    assert!(nothing.iter().all(|value| *value == 0), "a scrape less itself: {itself}");
}
