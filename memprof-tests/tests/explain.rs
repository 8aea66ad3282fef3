//! `explain` on real processes in known memory states (src/bin/explained.rs): the leaves add up to the
//! resident set, each state lands in its class, the verdict names its cause; the kernel's own figures are
//! read from `/proc/<pid>/status`, not taken from memprof (src/explained.rs). How its answers hold over
//! time, sampled continuously, is tests/growth.rs.

use std::time::{Duration, Instant};

use memprof_tests::explained::{explain, explained, kernel_rss};
use memprof_tests::http;
use memprof_tests::process::{Program, memprof_tool};
use memprof_wire::{Explanation, VerdictKind, class};

const MIB: u64 = 1 << 20;

fn bytes(explanation: &Explanation, id: &str) -> u64 {
    explanation.class(id).unwrap_or_else(|| panic!("no class {id}")).bytes
}

fn assert_near(explanation: &Explanation, id: &str, expected: u64) {
    let got = bytes(explanation, id);
    assert!(got.abs_diff(expected) * 20 <= expected, "{id}: {got} is not within 5 % of {expected}\n{explanation:#?}");
}

#[test]
fn an_idle_service_is_healthy_and_accounts_for_nearly_everything() {
    let program = explained("idle");
    let explanation = explain(&program);
    assert_eq!(explanation.verdict.kind, VerdictKind::Healthy, "{explanation:#?}");
    assert!(bytes(&explanation, class::UNATTRIBUTED) * 100 <= explanation.rss_bytes, "{explanation:#?}");
    assert!(bytes(&explanation, class::CODE) > 0 && bytes(&explanation, class::HEAP) > 0, "{explanation:#?}");
    let stacks = explanation.class(class::STACKS).unwrap();
    assert!(stacks.count.unwrap() >= 2, "{stacks:?}");
}

#[test]
fn freed_pages_kept_are_retention_and_a_purge_returns_them() {
    let program = explained("retention");
    let explanation = explain(&program);
    assert_eq!(explanation.verdict.kind, VerdictKind::Retention, "{explanation:#?}");
    assert!(bytes(&explanation, class::HEAP_FREE) >= 240 * MIB, "{explanation:#?}");
    assert!(explanation.verdict.fix.contains("background_thread is off"), "{}", explanation.verdict.fix);
    let refused = program.get("/memory-profiler/purge");
    assert_eq!(refused.status, 405, "a GET never purges");
    every_get_and_render(&program);
    // A timed run, ended by its timer.
    let run = http::request(program.address(), "POST", "/memory-profiler/start?duration=1secs");
    assert_eq!(run.status, 200, "{}", run.text());
    memprof_tests::acceptance::wait_until_idle(&program);
    // memprof's threads going idle (ten seconds after the last request, when they used to end, which made
    // jemalloc decay the program's arena) leave the program's freed pages resident.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(15) {
        let rss = kernel_rss(&program);
        assert!(
            rss >= 240 * MIB,
            "{:?} after the last request, the program's freed pages went: {rss}",
            watched.elapsed()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let purged = http::request(program.address(), "POST", "/memory-profiler/purge");
    assert_eq!(purged.status, 200, "{}", purged.text());
    let purged: memprof_wire::Purged = serde_json::from_value(purged.json()).unwrap();
    assert!(purged.rss_before_bytes - purged.rss_after_bytes >= 200 * MIB, "{purged:?}");
    assert!(kernel_rss(&program) < purged.rss_before_bytes - 200 * MIB);
    assert_eq!(explain(&program).verdict.kind, VerdictKind::Healthy);
}

/// Every GET endpoint, and every render of a profile.
fn every_get_and_render(program: &Program) {
    let run = http::request(program.address(), "POST", "/memory-profiler/start?duration=1mins");
    assert_eq!(run.status, 200, "{}", run.text());
    assert_eq!(http::request(program.address(), "POST", "/memory-profiler/stop").status, 200);
    for path in [
        "/memory-profiler/",
        "/memory-profiler/state",
        "/memory-profiler/memory",
        "/memory-profiler/growing",
        "/memory-profiler/statistics",
        "/memory-profiler/statistics?format=json",
        "/memory-profiler/explain",
        "/memory-profiler/download/raw",
        "/memory-profiler/download/text",
        "/memory-profiler/download/graph",
        "/memory-profiler/download/flamegraph",
        "/memory-profiler/download/collapsed",
        "/memory-profiler/download/pprof",
        "/debug/pprof/heap",
        "/memory-profiler/pprof/heap",
        "/memory-profiler/pprof/cmdline",
        "/debug/pprof/allocs",
        "/debug/pprof/symbol",
        "/metrics",
    ] {
        let response = program.get(path);
        assert_eq!(response.status, 200, "GET {path}: {}", response.text());
    }
}

#[test]
fn thinly_used_slabs_are_fragmentation_named_by_size_class() {
    let program = explained("fragmentation");
    let explanation = explain(&program);
    assert_eq!(explanation.verdict.kind, VerdictKind::Fragmentation, "{explanation:#?}");
    assert!(bytes(&explanation, class::HEAP_UNUSED) >= 180 * MIB, "{explanation:#?}");
    assert!(explanation.verdict.summary.contains(": 128 B: 6 % of "), "{}", explanation.verdict.summary);
}

/// Every allocation sampled (`lg_prof_sample:0`): jemalloc gives each of 32 Ki small objects a large extent
/// of its own while it lives, some 117 MiB resident for 4 MiB of data. That is the profiler's cost, said as
/// such in memprof's class with the fix (sample less often), not fragmentation the program should fix.
#[test]
fn pages_of_sampled_small_objects_are_memprofs_cost_not_fragmentation() {
    let program = Program::explained(&["small", "32768"])
        .env("MALLOC_CONF", "lg_prof_sample:0")
        .env("MEMPROF_SAMPLING", "continuous")
        // Every allocation sampled, as the budget of sampling work would not let it be.
        .env("MEMPROF_SAMPLING_BUDGET", "off")
        .spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let explanation = explain(&program);
    assert_ne!(explanation.verdict.kind, VerdictKind::Fragmentation, "{explanation:#?}");
    assert!(bytes(&explanation, class::HEAP_PROFILER) >= 64 * MIB, "{explanation:#?}");
    assert!(bytes(&explanation, class::HEAP_UNUSED) < 16 * MIB, "{explanation:#?}");
    let said = "memprof's own cost: pages jemalloc's profiling gives each sampled small object";
    assert!(explanation.verdict.summary.contains(said), "{}", explanation.verdict.summary);
    assert!(explanation.verdict.fix.contains("lg_prof_sample:19"), "{}", explanation.verdict.fix);
}

#[test]
fn thread_stacks_are_outside_the_heap_with_their_count() {
    let program = explained("threads");
    let explanation = explain(&program);
    assert_eq!(explanation.verdict.kind, VerdictKind::OutsideHeap, "{explanation:#?}");
    let stacks = explanation.class(class::STACKS).unwrap();
    assert!(stacks.bytes >= 64 * MIB && stacks.count >= Some(65), "{stacks:?}");
    assert!(explanation.verdict.summary.contains(" threads hold "), "{}", explanation.verdict.summary);
}

/// With 256 arenas each of 64 threads takes an arena jemalloc makes for it after memprof started, hooked as
/// it is made: what the threads hold is the heap's, not memory outside it, and the record is complete.
#[test]
fn the_heap_of_threads_on_arenas_made_later_is_the_heaps() {
    let program = Program::explained(&["threads-heap"]).env("MALLOC_CONF", "narenas:256").spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let explanation = explain(&program);
    assert!(bytes(&explanation, class::HEAP_OBJECTS) >= 250 * MIB, "{explanation:#?}");
    assert!(bytes(&explanation, class::OTHER) < 16 * MIB, "{explanation:#?}");
    let complete = explanation.evidence.iter().find(|reading| reading.name == "record complete").unwrap();
    assert_eq!(complete.value, 1.0, "{explanation:#?}");
}

#[test]
fn a_direct_mapping_is_other() {
    let program = explained("mmap");
    let explanation = explain(&program);
    assert_eq!(explanation.verdict.kind, VerdictKind::OutsideHeap, "{explanation:#?}");
    assert_near(&explanation, class::OTHER, 128 * MIB);
}

#[test]
fn heap_and_a_mapping_together_are_told_apart_within_five_percent() {
    let program = explained("heap-and-mmap");
    let explanation = explain(&program);
    assert_near(&explanation, class::HEAP_OBJECTS, 256 * MIB);
    assert_near(&explanation, class::OTHER, 128 * MIB);
}

#[test]
fn a_steady_leak_with_sampling_on_names_the_growing_function() {
    // On demand: the leak named from a run's own history (continuously: tests/growth.rs).
    let program = Program::explained(&["leak"]).env("MEMPROF_SAMPLING", "on-demand").spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let started = http::request(program.address(), "POST", "/memory-profiler/start?duration=5mins");
    assert_eq!(started.status, 200, "{}", started.text());
    // First the stacks holding the most, then (2 s on) those that grew since.
    for wording in ["holding the most live memory", "grew the most over the last"] {
        let (patience, every) = (Duration::from_secs(90), Duration::from_millis(500));
        let explanation =
            memprof_tests::waiting::wait_every(&format!("a leak verdict saying {wording:?}"), patience, every, || {
                let explanation = explain(&program);
                let said = explanation.verdict.kind == VerdictKind::Leak && explanation.verdict.fix.contains(wording);
                if said {
                    Ok(explanation)
                } else {
                    Err(format!("{:?}: {}", explanation.verdict.kind, explanation.verdict.fix))
                }
            });
        let named = &explanation.verdict.stacks[0];
        assert!(named.function.ends_with("leak_slowly"), "{:#?}", explanation.verdict);
        assert!(explanation.verdict.fix.contains("leak_slowly"), "{}", explanation.verdict.fix);
    }
    // One history of what grew, on demand too: the dashboard's Growing panel names what `explain` named (it
    // was a second history, by function over 2-300 s, and the panel showed nothing on demand).
    let growing: memprof_wire::Growing = serde_json::from_value(program.get_json("/memory-profiler/growing")).unwrap();
    let first = growing.series.first().map(|series| (series.function.as_str(), series.stopped));
    assert_eq!(first, Some(("explained::leak_slowly", false)), "{growing:#?}");
    assert!(!growing.continuous);
}

#[test]
fn the_cli_explains_purges_and_sets_decay() {
    let program = explained("retention");
    let (code, out, err) = memprof_tool(&program, &["explain"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("RSS "), "{out}");
    assert!(out.contains("\n    heap/free ") && out.contains("\nVerdict: retention: jemalloc keeps "), "{out}");
    assert!(out.contains("\nFix: background_thread is off"), "{out}");
    let (code, out, _) = memprof_tool(&program, &["--json", "explain"]);
    assert_eq!(code, 0);
    let explanation: Explanation = serde_json::from_str(&out).unwrap();
    assert_eq!(explanation.verdict.kind, VerdictKind::Retention);
    // Five purges at once: one returns the freed pages; each other one joined it and says so, with its
    // figures, or came after it and returned what was left.
    let address = program.address();
    let purges: Vec<_> = (0..5)
        .map(|_| std::thread::spawn(move || http::request(address, "POST", "/memory-profiler/purge").json()))
        .collect();
    let purges: Vec<memprof_wire::Purged> =
        purges.into_iter().map(|purge| serde_json::from_value(purge.join().unwrap()).unwrap()).collect();
    let returned = |purged: &memprof_wire::Purged| purged.rss_before_bytes.saturating_sub(purged.rss_after_bytes);
    let big: Vec<_> = purges
        .iter()
        .filter(|purged| !purged.message.starts_with("Joined"))
        .filter(|purged| returned(purged) >= 200 * MIB)
        .collect();
    assert_eq!(big.len(), 1, "{purges:#?}");
    for purged in &purges {
        if purged.message.starts_with("Joined a purge already running: Returned ") {
            assert_eq!(
                (purged.rss_before_bytes, purged.rss_after_bytes),
                (big[0].rss_before_bytes, big[0].rss_after_bytes)
            );
        } else {
            assert!(purged.message.starts_with("Returned "), "{purged:#?}");
        }
    }
    let (code, out, err) = memprof_tool(&program, &["purge"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Returned ") && out.contains(" to the system in "), "{out}");
    let (code, out, err) = memprof_tool(&program, &["decay", "--dirty-ms", "1000", "--background-thread", "true"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "dirty pages are returned after 1000 ms, muzzy pages after 0 ms; background threads are on\n");
    let (code, out, _) = memprof_tool(&program, &["decay", "--dirty-ms", "-1"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "dirty pages are returned never, muzzy pages after 0 ms; background threads are on\n")
    );
    // A decay time of zero is taken, with what it costs, in the answer and in state.
    let (code, out, _) = memprof_tool(&program, &["decay", "--dirty-ms", "0"]);
    assert_eq!(code, 0);
    assert!(out.contains("\nCost: dirty_decay_ms=0: freed pages go back to the system at once"), "{out}");
    let warnings = program.state().warnings;
    assert!(warnings.iter().any(|warning| warning.contains("dirty_decay_ms=0: freed pages go back")), "{warnings:?}");
    let refused = http::request(program.address(), "POST", "/memory-profiler/decay?dirty_ms=soon");
    assert_eq!(refused.status, 400);
    assert!(refused.text().contains("Invalid parameter 'dirty_ms': 'soon' is not a decay time"), "{}", refused.text());
    assert_eq!(http::request(program.address(), "POST", "/memory-profiler/decay").status, 400);
    assert_eq!(program.get("/memory-profiler/decay?dirty_ms=0").status, 405);
}

/// README's `memprof explain` session is what the tool prints for a program in the same state: the same
/// classes in the same order, the same verdict and fix (figures aside), the same purge message.
#[test]
fn the_readmes_explain_session_is_what_the_tool_prints() {
    let blocks = memprof_tests::docs::checked_by("the_readmes_explain_session_is_what_the_tool_prints");
    let session: Vec<&str> = blocks[0].text.lines().collect();
    assert!(session[0].starts_with("$ memprof explain"), "{}", blocks[0].text);
    let purge = session.iter().position(|line| *line == "$ memprof purge").expect("README purges");
    let program = explained("retention");
    let (_, explained_now, _) = memprof_tool(&program, &["explain"]);
    let shape = |line: &str| -> String {
        // A line without its figures: words only.
        line.split_whitespace().filter(|word| !word.starts_with(|c: char| c.is_ascii_digit() || c == '(')).collect()
    };
    let printed: Vec<String> =
        explained_now.lines().filter(|line| !line.starts_with("Container: ")).map(shape).collect();
    let shown: Vec<String> = session[1..purge].iter().map(|line| shape(line)).collect();
    assert_eq!(printed, shown);
    let (_, purged, _) = memprof_tool(&program, &["purge"]);
    assert_eq!(shape(&purged), shape(session[purge + 1]));
}

/// What memprof holds (the names of a large symbol lookup, statistics reports) is never the program's: the
/// live bytes in the memory history, which the leak rule reads, do not grow by it.
#[test]
fn memprofs_own_memory_is_never_the_programs_live_bytes() {
    let program = explained("idle");
    let newest = |after: u64| {
        memprof_tests::waiting::wait_until(
            &format!("a reading after {after}"),
            memprof_tests::process::PATIENCE,
            || {
                let memory: memprof_wire::Memory =
                    serde_json::from_value(program.get_json(&format!("/memory-profiler/memory?since={after}")))
                        .unwrap();
                memory.readings.last().copied().ok_or_else(|| "no reading".to_owned())
            },
        )
    };
    let memprofs = || {
        let explanation = explain(&program);
        explanation.evidence.iter().find(|reading| reading.name == "memprof's arena: allocated").unwrap().value as u64
    };
    let before = newest(0);
    let held_before = memprofs();
    let body = memprof_tests::sockets::spread_addresses(program.pid(), 1 << 14);
    let lookup = http::request_with_body(program.address(), "POST", "/debug/pprof/symbol", &body);
    assert_eq!(lookup.status, 200);
    for path in ["/memory-profiler/statistics", "/memory-profiler/statistics?format=text"] {
        assert_eq!(program.get(path).status, 200);
    }
    let held = memprofs();
    assert!(held >= held_before + MIB, "memprof's arena holds {held_before} -> {held} bytes");
    let asked = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let after = newest(asked);
    assert!(
        (after.counters.allocated as u64) < before.counters.allocated as u64 + (held - held_before) / 2,
        "the program's live bytes went {} -> {} while memprof's arena went {held_before} -> {held}",
        before.counters.allocated,
        after.counters.allocated
    );
}
