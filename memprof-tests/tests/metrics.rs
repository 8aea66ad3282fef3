//! Prometheus metrics of the real example service, checked by promtool.

use memprof_tests::process::Program;
use memprof_tests::tools;

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
    let (response, text) =
        memprof_tests::waiting::wait_until("the service to hold 20 MiB", memprof_tests::process::PATIENCE, || {
            let response = service.get("/metrics");
            let text = response.text();
            if metric(&text, "memprof_jemalloc_allocated_bytes") > 20.0 * 1_048_576.0 {
                Ok((response, text))
            } else {
                Err(text)
            }
        });
    assert_eq!(response.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    let value = |name: &str| metric(&text, name);
    assert!(value("memprof_jemalloc_resident_bytes") >= value("memprof_jemalloc_active_bytes"));
    assert_eq!(value("memprof_profiling_enabled"), 1.0);
    assert_eq!(value("memprof_runs_started_total"), 1.0);
    assert_eq!(value("memprof_runs_finished_total"), 1.0);
    assert_eq!(value("memprof_profiles_kept"), 1.0);
    assert_eq!(value("memprof_sample_period_bytes"), 524288.0);
    let classes: Vec<(&str, f64)> = text
        .lines()
        .filter_map(|line| line.strip_prefix("memprof_memory_bytes{class=\""))
        .map(|line| {
            let (class, value) = line.split_once("\"} ").unwrap();
            (class, value.parse().unwrap())
        })
        .collect();
    let names: Vec<&str> = classes.iter().map(|(class, _)| *class).collect();
    assert_eq!(
        names,
        [
            "heap/objects",
            "heap/unused",
            "heap/free",
            "heap/metadata",
            "heap/profiler",
            "stacks",
            "code",
            "files",
            "other",
            "unattributed"
        ]
    );
    assert_eq!(classes.iter().map(|(_, bytes)| bytes).sum::<f64>(), value("memprof_resident_set_bytes"));
    if let Some(checked) = tools::promtool_check_metrics(&text) {
        assert!(checked.is_ok(), "{checked:?}");
    }
}
