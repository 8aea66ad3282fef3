//! libmtev- and Traffic Server-style controls against the real example service: sampling switched by
//! hand, a dump on demand, jemalloc's statistics.

use memprof_tests::process::Program;

#[test]
fn heap_profile_switches_sampling_by_hand_and_dumps_on_demand() {
    // libmtev's switch turns sampling itself on and off: sampling on demand (continuously, sampling is on
    // from start-up and the switch opens a window: tests/continuous.rs).
    let service = Program::service().env("MEMPROF_SAMPLING", "on-demand").spawn();
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
    let current = service.state().current_run;
    assert!(
        matches!(&current, memprof_wire::CurrentRun::Active { started_by, .. } if started_by == "manual"),
        "{current:?}"
    );

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
