//! The acceptance checks of the Mesos-compatible endpoints, written once and run against every way a program
//! serves them: the built-in server of the example service (`tests/endpoints.rs`) and the axum service that
//! mounts memprof's routers on its own (`tests/adoption.rs`).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;

use memprof::analysis::HeapProfile;
use serde_json::Value;

use crate::heap::functions_in;
use crate::http::request_with_body;
use crate::process::{PATIENCE, Program};
use crate::waiting::wait_until;

/// Starts a run of `duration` and returns its id, checking Mesos's message.
pub fn start(service: &Program, duration: &str) -> u64 {
    let started = service.get_json(&format!("/memory-profiler/start?duration={duration}"));
    assert_eq!(
        started["message"].as_str().unwrap(),
        format!(
            "Successfully started new heap profiling run. After the run ends, download its profile from /memory-profiler/download/raw?id={}.",
            started["id"]
        )
    );
    started["id"].as_u64().unwrap()
}

/// Waits until what the run in progress holds so far (`heap_profile?trigger_dump=true&run=<id>`: its
/// profile were it stopped now), or the heap as it is now when no run is, holds a sample allocated under
/// each of `functions`, as the service's own symbol service names its frames: what follows can then count
/// on those samples however slow the machine, with no fixed sleep. Sampled continuously, the heap holds
/// samples from before the run, which its profile does not: the run's own are waited for.
///
/// ```no_run
/// let service = memprof_tests::process::Program::service().spawn();
/// memprof_tests::acceptance::start(&service, "1mins");
/// memprof_tests::acceptance::wait_for_sampled(&service, &["service::open_session"]);
/// ```
pub fn wait_for_sampled(service: &Program, functions: &[&str]) {
    let what = match service.state().current_run.id() {
        Some(run) => format!("run {run} so far"),
        None => "the heap".to_owned(),
    };
    wait_until(&format!("a sample under each of {functions:?} in {what}"), PATIENCE, || {
        let state = service.state();
        let query = match state.current_run.id() {
            Some(run) => format!("trigger_dump=true&run={run}"),
            None => "trigger_dump=true".to_owned(),
        };
        let dump = service.get(&format!("/memory-profiler/heap_profile?{query}")).text();
        let profile = HeapProfile::parse(&dump).unwrap_or_else(|error| panic!("{error}:\n{dump}"));
        let addresses: BTreeSet<u64> = profile.stacks.iter().flat_map(|stack| stack.addresses.clone()).collect();
        let asked = addresses.iter().map(|address| format!("{address:#x}")).collect::<Vec<_>>().join("+");
        let names = request_with_body(service.address(), "POST", "/debug/pprof/symbol", asked.as_bytes()).text();
        let missing: Vec<&str> = functions.iter().copied().filter(|function| !names.contains(function)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let sampling = serde_json::to_string(&state.sampling).unwrap_or_default();
        Err(format!(
            "none under {missing:?} ({query}; sampling: {sampling}; {:?}); the frames:\n{names}",
            state.current_run
        ))
    });
}

/// Waits until the run in progress counts `at_least` samples (`state`'s `current_run.samples`): a run that
/// must hold the program's steady state, not its first moments, waits for enough of them.
///
/// ```no_run
/// let service = memprof_tests::process::Program::service().spawn();
/// memprof_tests::acceptance::start(&service, "1mins");
/// memprof_tests::acceptance::wait_for_run_samples(&service, 100);
/// ```
pub fn wait_for_run_samples(service: &Program, at_least: u64) {
    wait_until(&format!("the run in progress to count {at_least} samples"), PATIENCE, || {
        match service.state().current_run {
            memprof_wire::CurrentRun::Active { samples: Some(samples), .. } if samples >= at_least => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
}

/// Runs of `duration` started and awaited until one ends holding `function` (its text download names it):
/// on a saturated machine a debug-built example may allocate nothing in a first short run. Its id.
///
/// ```no_run
/// let service = memprof_tests::process::Program::service().spawn();
/// let id = memprof_tests::acceptance::finished_run_holding(&service, "2secs", "service::open_session");
/// ```
pub fn finished_run_holding(service: &Program, duration: &str, function: &str) -> u64 {
    wait_until(&format!("a run holding {function}"), PATIENCE, || {
        let id = start(service, duration);
        wait_until_idle(service);
        let text = service.get(&format!("/memory-profiler/download/text?id={id}")).text();
        if text.contains(&format!("% {function}\n")) { Ok(id) } else { Err(text) }
    })
}

/// Polls `state` until no run is active.
pub fn wait_until_idle(service: &Program) -> memprof_wire::ProfilerState {
    wait_until("the run to end", PATIENCE, || {
        let state = service.state();
        if state.current_run.id().is_none() { Ok(state) } else { Err(format!("{state:?}")) }
    })
}

/// The heap profiles in a profile directory (beside them: the `owner` file).
pub fn profiles_in(directory: &str) -> Vec<std::fs::DirEntry> {
    std::fs::read_dir(directory)
        .unwrap()
        .map(Result::unwrap)
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".heap"))
        .collect()
}

/// A run from `start` to its raw dump, whose stacks pass through each of `allocating`, functions of the
/// program at `binary`; state, stop's answer, downloads and the profile directory along the way.
///
/// ```no_run
/// let service = memprof_tests::process::Program::service().spawn();
/// let binary = memprof_tests::process::built_binary("service");
/// memprof_tests::acceptance::a_run_round_trips(&service, &binary, &["open_session"]);
/// ```
pub fn a_run_round_trips(service: &Program, binary: &Path, allocating: &[&str]) {
    let id = start(service, "1mins");

    let state = service.whole_state();
    let memprof_wire::CurrentRun::Active { id: current, remaining_seconds: Some(remaining), .. } =
        state.memory_profiler.current_run
    else {
        panic!("no timed run: {:?}", state.memory_profiler.current_run)
    };
    assert_eq!(current, id);
    assert!(remaining > 0.0 && remaining <= 60.0, "{remaining}");
    assert!(state.jemalloc.profiling_active);
    assert!(state.jemalloc.profiling_enabled);
    assert_eq!(state.jemalloc.malloc_conf.exported.as_deref(), Some("prof:true,prof_active:false"));

    let while_active = service.get("/memory-profiler/download/raw");
    assert_eq!(while_active.status, 409);
    assert_eq!(
        while_active.text(),
        format!(
            "Heap profiling run {id} is active; pass an 'id' explicitly to download an earlier profile, or stop the run first.\n"
        )
    );
    let same_run = service.get(&format!("/memory-profiler/download/raw?id={id}"));
    assert_eq!(
        (same_run.status, same_run.text()),
        (409, format!("Run {id} is still active; stop it first or wait for it to end.\n"))
    );

    wait_for_sampled(service, allocating);
    let stopped = service.get_json("/memory-profiler/stop");
    assert_eq!(stopped["id"].as_u64(), Some(id));
    assert_eq!(stopped["message"], format!("Successfully stopped heap profiling run {id}."));
    assert_eq!(stopped["url_raw_profile"], format!("/memory-profiler/download/raw?id={id}"));
    assert_eq!(stopped["url_graph_profile"], format!("/memory-profiler/download/graph?id={id}"));
    assert_eq!(stopped["url_symbolized_profile"], format!("/memory-profiler/download/text?id={id}"));

    let download = service.get(&format!("/memory-profiler/download/raw?id={id}"));
    assert_eq!(download.status, 200);
    assert_eq!(download.header("content-type"), Some("application/octet-stream"));
    assert_eq!(
        download.header("content-disposition"),
        Some(format!("attachment; filename=\"memprof.{id}.heap\"").as_str())
    );
    let profile = HeapProfile::parse(&download.text()).unwrap();
    assert_eq!(profile.sample_period, 524288);
    let functions = functions_in(&profile, binary);
    for wanted in allocating {
        assert!(
            functions.iter().any(|name| name.contains(wanted)),
            "{wanted} missing from {functions:#?}; the profile:\n{}",
            download.text()
        );
    }
    // Without an id, the latest profile; the same bytes.
    let latest = service.get("/memory-profiler/download/raw");
    assert_eq!((latest.status, latest.body), (200, download.body));

    let state = service.whole_state();
    let latest_run = state.memory_profiler.latest_run.expect("the run kept");
    assert_eq!((latest_run.id, latest_run.started_by.as_str()), (id, "http"));
    assert!(!state.jemalloc.profiling_active);
    let directory = state.memory_profiler.tmp_dir.as_str();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(directory).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{directory}");
    let files: Vec<_> = profiles_in(directory).iter().map(|entry| entry.metadata().unwrap()).collect();
    assert_eq!(files.len(), 1, "only the finished profile, no partial file");
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into())
        .collect();
    // Both programs the checks run against label their allocations: the label table is kept beside; and
    // the process's last-seen note, which the next start reads if this process is killed; and the run's
    // views from the record of samples (net growth, allocations, peak), each with the variance of its
    // estimate (a run on demand is jemalloc's dump: its own counts say its error).
    names.sort();
    let id = latest_run.id;
    let views = [
        "allocated",
        "allocated.variance",
        "net-grown",
        "net-grown.variance",
        "net-shrunk",
        "net-shrunk.variance",
        "peak",
        "peak.variance",
    ];
    let mut expected: Vec<String> = ["heap", "heap.labels", "json"]
        .into_iter()
        .chain(views)
        .map(|suffix| format!("profile.{id}.{suffix}"))
        .chain(["last-seen.json".to_owned(), "owner".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(
        names, expected,
        "the profile, its provenance, its label table, its views, the last-seen note and the owner file, nothing else"
    );
    // jemalloc's own dump has no variance beside it: its error is estimated from its counts at its interval,
    // never said as the record's per-sample one.
    let text = service.get(&format!("/memory-profiler/download/text?id={id}")).text();
    let said = text.lines().find(|line| line.starts_with("# sampled: the total is within ")).unwrap_or_default();
    assert!(said.contains("a mean interval of 512 KiB") && !said.contains("drawn at"), "{text}");
    assert_eq!(files[0].permissions().mode() & 0o777, 0o600, "the profile is the owner's only");
    let last_seen = std::fs::metadata(Path::new(directory).join("last-seen.json")).unwrap();
    assert_eq!(last_seen.permissions().mode() & 0o777, 0o600, "the last-seen note is the owner's only");
}

/// A timed run ends by itself; its profile stays downloadable during the next run.
pub fn the_timer_ends_a_run(service: &Program) {
    let first = start(service, "1secs");
    let state = wait_until_idle(service);
    assert_eq!(state.latest_run.map(|run| run.id), Some(first));

    let second = start(service, "0.5mins");
    assert!(second > first, "ids increase: {first} then {second}");
    let download = service.get(&format!("/memory-profiler/download/raw?id={first}"));
    assert_eq!(download.status, 200);
    assert_eq!(HeapProfile::parse(&download.text()).unwrap().sample_period, 524288);
}

/// 32 simultaneous starts make exactly one run.
pub fn concurrent_starts_make_one_run(service: &Program) {
    let address = service.address();
    let barrier = Arc::new(Barrier::new(32));
    let answers: Vec<Value> = (0..32)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                crate::http::request(address, "GET", "/memory-profiler/start?duration=1mins").json()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|handle| handle.join().unwrap())
        .collect();
    let ids: std::collections::BTreeSet<u64> = answers.iter().map(|answer| answer["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), 1, "{answers:#?}");
    let new_runs =
        answers.iter().filter(|answer| answer["message"].as_str().unwrap().starts_with("Successfully started")).count();
    assert_eq!(new_runs, 1, "{answers:#?}");
    let already = answers
        .iter()
        .filter(|answer| answer["message"].as_str().unwrap().starts_with("Heap profiling is already active."))
        .count();
    assert_eq!(already, 31);
}

/// `stop` without a run is a no-op that says so, also after a run.
pub fn stop_without_a_run_says_so(service: &Program) {
    let nothing = service.get_json("/memory-profiler/stop");
    assert_eq!(
        nothing,
        serde_json::json!({ "id": null, "message": "No heap profiling run is active; nothing was stopped." })
    );

    let id = start(service, "1mins");
    service.get_json("/memory-profiler/stop");
    let again = service.get_json("/memory-profiler/stop");
    assert_eq!(again["id"].as_u64(), Some(id));
    assert_eq!(
        again["message"],
        format!("No heap profiling run is active; nothing was stopped. The latest profile is run {id}.")
    );
}

/// `statistics` is jemalloc's JSON.
pub fn statistics_are_jemallocs_json(service: &Program) {
    let response = service.get("/memory-profiler/statistics");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json; charset=utf-8"));
    let statistics = response.json();
    let jemalloc = &statistics["jemalloc"];
    assert!(jemalloc["version"].as_str().unwrap().starts_with("5.3"), "{}", jemalloc["version"]);
    assert_eq!(jemalloc["config"]["prof"], true);
    assert_eq!(jemalloc["opt"]["prof"], true);
    assert_eq!(jemalloc["opt"]["prof_active"], false);
    assert_eq!(jemalloc["opt"]["lg_prof_sample"], 19);
    assert!(jemalloc["stats"]["allocated"].as_u64().unwrap() > 0);
}

/// Before any run, no profile is kept but the automatic dumps: sampled continuously, a service that grew
/// half again since start-up has one, taken at a reading of the counters' own, which may fall between two
/// requests. So each answer is checked against the dumps `state` listed just before it and just after:
/// none, "no heap profile yet"; else the latest is served, and an id not kept lists them.
fn before_any_run_the_profiles_kept_are_the_automatic_dumps(service: &Program) {
    let dumps = || -> Vec<u64> { service.state().automatic_dumps.dumps.iter().rev().map(|dump| dump.id).collect() };
    let (before, latest, after) = (dumps(), service.get("/memory-profiler/download/raw"), dumps());
    let none_yet = "No heap profile has been generated yet; start a run with /memory-profiler/start?duration=30secs.\n";
    let answer = (latest.status, latest.text());
    assert!(
        (before.is_empty() && answer == (404, none_yet.to_owned()))
            || (!after.is_empty() && answer.0 == 200 && answer.1.starts_with("heap_v2/")),
        "the latest profile: {} {} (dumps: {before:?}, then {after:?})",
        answer.0,
        answer.1
    );
    let (before, named, after) = (dumps(), service.get("/memory-profiler/download/raw?id=42"), dumps());
    let said = |dumps: &[u64]| match dumps {
        [] => "No heap profile with id 42; none has been generated yet.\n".to_owned(),
        ids => {
            let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
            format!("No heap profile with id 42; the profiles kept are {}.\n", ids.join(", "))
        }
    };
    let text = named.text();
    assert!(
        named.status == 404 && (text == said(&before) || text == said(&after)),
        "id 42: {} {text} (dumps: {before:?}, then {after:?})",
        named.status
    );
}

/// Every error path, with its exact status and message.
pub fn bad_requests_are_refused_clearly(service: &Program) {
    let units = "'ns', 'us', 'ms', 's' or 'secs', 'm' or 'mins', 'h' or 'hrs', 'd' or 'days', 'w' or 'weeks'";
    let cases: &[(&str, &str, u16, String)] = &[
        ("GET", "/memory-profiler/download/raw?id=abc", 400, "Invalid parameter 'id': 'abc' is not a run id; ids are whole numbers, listed by /memory-profiler/state.".into()),
        ("GET", "/memory-profiler/download/text?id=-1", 400, "Invalid parameter 'id': '-1' is not a run id; ids are whole numbers, listed by /memory-profiler/state.".into()),
        ("GET", "/memory-profiler/start?duration=600", 400, format!("Could not parse parameter 'duration': '600' has no unit; write a number followed by one of {units}, such as '30secs'.")),
        ("GET", "/memory-profiler/start?duration=5x", 400, format!("Could not parse parameter 'duration': unknown duration unit 'x' in '5x'; supported units are {units}.")),
        ("GET", "/memory-profiler/start?duration=-5mins", 400, "Could not parse parameter 'duration': '-5mins' does not start with a non-negative decimal number, such as '30secs' or '1.5hrs'.".into()),
        ("GET", "/memory-profiler/start?duration=0.5secs", 400, "Duration '0.5secs' must be between 1secs and 1days.".into()),
        ("GET", "/memory-profiler/start?duration=25hrs", 400, "Duration '25hrs' must be between 1secs and 1days.".into()),
        ("GET", "/memory-profiler/start?duration=1secs&duration=2secs", 400, "Parameter 'duration' is given more than once.".into()),
        ("GET", "/memory-profiler/start?duration=99999999999999999999999days", 400, "Could not parse parameter 'duration': '99999999999999999999999days' is too long to represent.".into()),
        ("GET", "/memory-profiler/start?duration=1e9secs", 400, format!("Could not parse parameter 'duration': unknown duration unit 'e9secs' in '1e9secs'; supported units are {units}.")),
        ("GET", "/memory-profiler/start?duration=%EF%BC%95secs", 400, "Could not parse parameter 'duration': '５secs' does not start with a non-negative decimal number, such as '30secs' or '1.5hrs'.".into()),
        ("GET", "/memory-profiler/start?duration=5%C2%A0mins", 400, format!("Could not parse parameter 'duration': unknown duration unit '\u{a0}mins' in '5\u{a0}mins'; supported units are {units}.")),
        ("GET", "/memory-profiler/start?duration=infsecs", 400, "Could not parse parameter 'duration': 'infsecs' does not start with a non-negative decimal number, such as '30secs' or '1.5hrs'.".into()),
        ("GET", "/memory-profiler/download/raw?id=99999999999999999999", 400, "Invalid parameter 'id': '99999999999999999999' is not a run id; ids are whole numbers, listed by /memory-profiler/state.".into()),
        ("GET", "/memory-profiler/download/raw?id=%F0%9F%92%A5", 400, "Invalid parameter 'id': '💥' is not a run id; ids are whole numbers, listed by /memory-profiler/state.".into()),
        ("GET", "/memory-profiler/state?%FF=1", 400, "Unknown parameter '\u{fffd}'; this endpoint takes no parameters.".into()),
        ("GET", "/memory-profiler/start?time=5mins", 400, "Unknown parameter 'time'; expected 'duration'.".into()),
        ("GET", "/memory-profiler/state?verbose=1", 400, "Unknown parameter 'verbose'; this endpoint takes no parameters.".into()),
        ("PUT", "/memory-profiler/start", 405, "Method PUT is not allowed here; use GET, HEAD, POST.".into()),
        ("POST", "/memory-profiler/statistics", 405, "Method POST is not allowed here; use GET, HEAD.".into()),
        ("GET", "/memory-profiler/../etc/passwd", 404, "No endpoint at '/memory-profiler/../etc/passwd'; the endpoints are /memory-profiler, /memory-profiler/memory, /memory-profiler/start, /memory-profiler/stop, /memory-profiler/state, /memory-profiler/statistics, /memory-profiler/heap_profile, /memory-profiler/download/raw, /memory-profiler/download/labels, /memory-profiler/labels, /memory-profiler/download/text, /memory-profiler/download/graph, /memory-profiler/download/flamegraph, /memory-profiler/download/collapsed, /memory-profiler/download/pprof, /memory-profiler/download/otlp, /memory-profiler/pprof/heap, /memory-profiler/pprof/cmdline, /memory-profiler/pprof/symbol, /debug/pprof/heap, /debug/pprof/allocs, /metrics, /debug/pprof/symbol, /memory-profiler/clear_earlier, /memory-profiler/explain, /memory-profiler/purge, /memory-profiler/decay, /memory-profiler/growing.".into()),
    ];
    before_any_run_the_profiles_kept_are_the_automatic_dumps(service);
    for (method, target, status, message) in cases {
        let response = crate::http::request(service.address(), method, target);
        assert_eq!((response.status, response.text()), (*status, format!("{message}\n")), "{method} {target}");
        assert_eq!(response.header("content-type"), Some("text/plain; charset=utf-8"), "{method} {target}");
    }
    let not_allowed = crate::http::request(service.address(), "DELETE", "/memory-profiler/stop");
    assert_eq!(not_allowed.header("allow"), Some("GET, HEAD, POST"));

    // Nothing above started a run; a trailing slash and POST are accepted, as in Mesos.
    let started = crate::http::request(service.address(), "POST", "/memory-profiler/start/?duration=1secs");
    assert_eq!(started.status, 200, "{}", started.text());
    let id = started.json()["id"].as_u64().unwrap();
    wait_until_idle(service);
    // The profiles kept: the run's, then the automatic dumps', oldest first. Sampled continuously, a service
    // that grew half again since start-up has one, taken at a reading of the counters' own, which may fall
    // between two requests: the answer lists what state listed just before it or just after.
    let kept = || {
        let dumps = service.state().automatic_dumps.dumps;
        format!("{id}{}", dumps.iter().rev().map(|dump| format!(", {}", dump.id)).collect::<String>())
    };
    let lists_what_is_kept = |target: &str, named: &str| {
        let before = kept();
        let response = service.get(target);
        let after = kept();
        let text = response.text();
        let listed = [&before, &after]
            .iter()
            .any(|kept| text == format!("No heap profile with {named}; the profiles kept are {kept}.\n"));
        assert!(
            response.status == 404 && listed,
            "{target}: {} {text} (kept: {before}, then {after})",
            response.status
        );
    };
    lists_what_is_kept(&format!("/memory-profiler/download/text?id={id}&base=7"), "base 7");
    for (target, message) in [
        (
            format!("/memory-profiler/download/flamegraph?id={id}&lines=1"),
            "Invalid parameter 'lines': '1' is neither true nor false.\n".to_owned(),
        ),
        (
            "/memory-profiler/download/pprof?lines=true".to_owned(),
            "Unknown parameter 'lines'; expected 'id', 'base', 'net', 'view', 'label'.\n".to_owned(),
        ),
    ] {
        let response = service.get(&target);
        assert_eq!((response.status, response.text()), (400, message), "{target}");
    }
    lists_what_is_kept("/memory-profiler/download/raw?id=7", "id 7");
}
