//! libmtev- and Traffic Server-style controls against the real example service: sampling switched by
//! hand, a dump on demand, jemalloc's statistics.

use memprof::analysis::HeapProfile;
use memprof_tests::acceptance::start;
use memprof_tests::heap::functions_in;
use memprof_tests::process::{Program, built_binary};

#[test]
fn heap_profile_switches_sampling_by_hand_and_dumps_on_demand() {
    // libmtev's switch turns sampling itself on and off: sampling on demand (continuously, sampling is on
    // from start-up and the switch opens a window: tests/continuous.rs).
    let service = Program::service().env("MEMPROF_SAMPLING", "on-demand").spawn();
    let switches: memprof_wire::Switches = service.get_as("/memory-profiler/heap_profile");
    assert_eq!(
        (switches.profiling_enabled, switches.profiling_active, switches.new_threads_sampled),
        (true, Some(false), Some(true))
    );

    let on: memprof_wire::RunAnswer = service.get_as("/memory-profiler/heap_profile?active=true");
    let id = on.id.unwrap();
    assert_eq!(
        on.message,
        format!("Heap profiling switched on as run {id}; switch it off with heap_profile?active=false")
    );
    let again: memprof_wire::RunAnswer = service.get_as("/memory-profiler/heap_profile?active=true");
    assert_eq!((again.id, again.message.starts_with("Heap profiling is already on")), (Some(id), true));
    let switches: memprof_wire::Switches = service.get_as("/memory-profiler/heap_profile");
    assert_eq!(switches.profiling_active, Some(true));
    let current = service.state().current_run;
    assert!(
        matches!(&current, memprof_wire::CurrentRun::Active { started_by, .. } if started_by == "manual"),
        "{current:?}"
    );

    let dump = service.get("/memory-profiler/heap_profile?trigger_dump=true");
    assert_eq!(dump.status, 200);
    assert!(dump.text().starts_with("heap_v2/524288\n") && dump.text().contains("\nMAPPED_LIBRARIES:\n"));
    assert!(dump.header("content-disposition").unwrap().starts_with("attachment; filename=\"memprof.snapshot."));

    let off: memprof_wire::RunAnswer = service.get_as("/memory-profiler/heap_profile?active=false");
    assert_eq!((off.active, off.id), (Some(false), Some(id)));
    assert_eq!(off.urls.map(|urls| urls.url_raw_profile), Some(format!("/memory-profiler/download/raw?id={id}")));
    assert_eq!(service.get(&format!("/memory-profiler/download/raw?id={id}")).status, 200);
    let off_again: memprof_wire::RunAnswer = service.get_as("/memory-profiler/heap_profile?active=false");
    assert_eq!(off_again.message, "Heap profiling is already off");

    let timed = service.start("?duration=1mins").id;
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

/// Sampled continuously, a run's profile holds what was sampled since it began, not the heap:
/// `trigger_dump=true&run=<id>` shows it so far, and `state` counts the samples it has.
#[test]
fn a_run_in_progress_shows_what_it_holds_so_far_and_counts_its_samples() {
    let program = Program::windows().spawn();
    program.wait_for_line(|line| line == "windows: ready");
    let id = start(&program, "1mins");
    let samples = || match program.state().current_run {
        memprof_wire::CurrentRun::Active { samples: Some(samples), .. } => samples,
        other => panic!("no samples counted for the run in progress: {other:?}"),
    };
    let binary = built_binary("windows");
    let functions = |query: &str| {
        let dump = program.get(&format!("/memory-profiler/heap_profile?{query}"));
        assert_eq!(dump.status, 200, "{}", dump.text());
        functions_in(&HeapProfile::parse(&dump.text()).unwrap(), &binary)
    };
    let so_far = format!("trigger_dump=true&run={id}");
    assert!(!functions(&so_far).iter().any(|name| name.contains("kept_before_the_window")), "{:?}", functions(&so_far));
    let before = samples();
    program.tell("grow", "windows: done grow");
    // 16 MiB in 64 KiB blocks, sampled every 512 KiB on average: some 30 samples, 8 far below.
    assert!(samples() >= before + 8, "{before} samples, then {}", samples());
    let held = functions(&so_far);
    assert!(held.iter().any(|name| name.contains("grown_in_the_window")), "{held:?}");
    assert!(!held.iter().any(|name| name.contains("kept_before_the_window")), "{held:?}");
    let heap = functions("trigger_dump=true");
    assert!(heap.iter().any(|name| name.contains("kept_before_the_window")), "{heap:?}");

    let alone = program.get(&format!("/memory-profiler/heap_profile?run={id}"));
    let said = "'run' names the run in progress a trigger_dump=true is of.\n";
    assert_eq!((alone.status, alone.text()), (400, said.to_owned()));
    program.get_json("/memory-profiler/stop");
    let ended = program.get(&format!("/memory-profiler/heap_profile?{so_far}"));
    let said = format!(
        "No heap profiling run {id} is in progress; an ended run's profile is at /memory-profiler/download/raw?id={id}.\n"
    );
    assert_eq!((ended.status, ended.text()), (404, said));
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
