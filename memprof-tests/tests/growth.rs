//! How `explain`, `/growing` and `/metrics` answer over time on the explained program (src/bin/explained.rs)
//! sampled continuously: a leak that goes on is named by the program's function, growth that stopped is a
//! step and no longer growing, std's maps are the program's functions' lines, and what cannot be told is
//! said.

use std::time::Duration;

use memprof_tests::explained::explain;
use memprof_tests::process::Program;
use memprof_wire::VerdictKind;

/// Sampled continuously, with no run started and no earlier `explain`, the record's last readings name the
/// leaking function, by how much it grew and how old what it holds is.
#[test]
fn a_leak_sampled_continuously_is_named_with_no_run_started() {
    let program = Program::explained(&["leak"]).env("MEMPROF_SAMPLING", "continuous").spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let explanation =
        memprof_tests::waiting::wait_until("the record to name the leak", Duration::from_secs(90), || {
            let explanation = explain(&program);
            let verdict = &explanation.verdict;
            let named = verdict.kind == VerdictKind::Leak && verdict.fix.contains("grew the most over the last");
            if named { Ok(explanation) } else { Err(format!("{verdict:#?}")) }
        });
    let named = &explanation.verdict.stacks[0];
    assert!(named.function.ends_with("leak_slowly"), "{:#?}", explanation.verdict);
    let age = named.age.as_ref().unwrap_or_else(|| panic!("{named:#?}"));
    assert!(age.held_bytes >= named.bytes * 0.9, "it holds what it grew by: {named:#?}");
    // Leaking steadily since start-up, about half of it is older than half the time watched.
    assert!((0.2..=0.8).contains(&age.older_share), "{named:#?}");
    assert!(
        explanation.verdict.fix.contains("% of the ") && explanation.verdict.fix.contains(" it holds is older than ")
    );
    let state = program.get_json("/memory-profiler/state");
    assert!(
        state["memory_profiler"]["current_run"]["id"].is_null()
            && state["memory_profiler"]["runs"] == serde_json::json!([])
    );
    // Prometheus is told too, and accepts it.
    let metrics = program.get("/metrics").text();
    let growing =
        metrics.lines().find(|line| line.starts_with("memprof_growing_bytes{function=\"explained::leak_slowly\"} "));
    assert!(growing.is_some(), "{metrics}");
    assert!(metrics.contains("\nmemprof_record_dropped_objects_total 0\n"), "{metrics}");
    if let Some(checked) = memprof_tests::tools::promtool_check_metrics(&metrics) {
        assert!(checked.is_ok(), "{checked:?}");
    }
}

/// A cache that filled in a burst (128 MiB), then flat: once flat for a minute, `explain` says it grew and
/// stopped (a step, not a leak), at the burst's own pace and naming what holds it, and the growing gauge
/// names nothing.
#[test]
fn growth_that_stopped_is_a_step_and_no_longer_growing() {
    let program = Program::explained(&["burst"]).env("MEMPROF_SAMPLING", "continuous").spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let explanation = memprof_tests::waiting::wait_every(
        "the burst to be called a step",
        Duration::from_secs(180),
        Duration::from_secs(2),
        || {
            let explanation = explain(&program);
            let stopped = explanation.verdict.kind == VerdictKind::Grew;
            if stopped { Ok(explanation) } else { Err(format!("{:#?}", explanation.verdict)) }
        },
    );
    let verdict = &explanation.verdict;
    let grown: f64 = verdict
        .summary
        .strip_prefix("live objects grew by ")
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{verdict:#?}"));
    // The burst's 128 MiB, and the record's pages continuous sampling touched meanwhile (memprof's, counted
    // as live bytes for now).
    assert!((128.0..=150.0).contains(&grown), "{verdict:#?}");
    assert!(verdict.summary.contains("then stopped: flat for the last "), "{verdict:#?}");
    let holds =
        verdict.stacks.iter().any(|stack| stack.frames.iter().any(|frame| frame == "explained::burst_into_cache"));
    assert!(holds, "{verdict:#?}");
    let metrics = program.get("/metrics").text();
    assert!(!metrics.contains("memprof_growing_bytes{"), "{metrics}");
    let growing = program.get_json("/memory-profiler/growing");
    let series = growing["series"].as_array().unwrap();
    assert!(series.iter().all(|series| series["stopped"] == true), "{growing}");
}

/// Two functions grow two std `HashMap`s: std's vendored hashbrown allocates both tables, yet the leak is
/// named by the program's two functions, two lines, none by `hashbrown::`.
#[test]
fn std_maps_grown_by_two_functions_are_two_lines_named_by_them() {
    let program = Program::explained(&["maps"]).env("MEMPROF_SAMPLING", "continuous").spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let explanation = memprof_tests::waiting::wait_every(
        "the leak to be named by both functions",
        Duration::from_secs(120),
        Duration::from_secs(2),
        || {
            let explanation = explain(&program);
            let named: Vec<&str> = explanation.verdict.stacks.iter().map(|stack| stack.function.as_str()).collect();
            let both = ["index_sessions", "cache_topics"].iter().all(|f| named.iter().any(|n| n.ends_with(f)));
            if explanation.verdict.kind == VerdictKind::Leak && both {
                Ok(explanation)
            } else {
                Err(format!("{named:?}"))
            }
        },
    );
    for stack in &explanation.verdict.stacks {
        assert!(!stack.function.contains("hashbrown"), "{:#?}", explanation.verdict);
    }
}

/// Built without debug info, a program's own code cannot be told from its dependencies': `explain` and
/// `/growing` say the function named may be a dependency's, with the fix (`debug = "limited"`).
#[test]
fn without_debug_info_the_function_named_is_said_to_maybe_be_a_dependencys() {
    let Some(objcopy) = memprof_tests::tools::find("objcopy", "binutils") else { return };
    let scratch = memprof_tests::tools::Scratch::new("no-debug-info");
    let stripped = scratch.join("explained");
    let original = memprof_tests::process::built_binary("explained");
    memprof_tests::tools::run(
        &objcopy,
        &["--strip-debug", original.to_str().unwrap(), stripped.to_str().unwrap()],
        &[],
    );
    let program = memprof_tests::process::Launch::new(&stripped)
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_ADDR", "127.0.0.1:0")
        .env("MEMPROF_SAMPLING", "continuous")
        .args(["leak"])
        .spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let said = "Without debug info in the program, memprof cannot tell its code from its dependencies'";
    memprof_tests::waiting::wait_every(
        "the leak named, and said unsure",
        Duration::from_secs(120),
        Duration::from_secs(2),
        || {
            let verdict = explain(&program).verdict;
            let named = verdict.kind == VerdictKind::Leak && !verdict.stacks.is_empty();
            if named && verdict.fix.contains(said) { Ok(()) } else { Err(format!("{verdict:#?}")) }
        },
    );
    let growing = program.get_json("/memory-profiler/growing");
    let series = growing["series"].as_array().unwrap();
    assert!(
        series.is_empty() || growing["unsure"].as_str().is_some_and(|unsure| unsure.starts_with(said)),
        "{growing}"
    );
}
