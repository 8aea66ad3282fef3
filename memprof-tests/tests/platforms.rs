//! The example service on other platforms. As a static musl binary: jemalloc's musl build has no libgcc, and
//! its own stack walk (gcc's `__builtin_frame_address`) crashed the program at the first sample it took;
//! memprof walks those samples with the program's own `_Unwind_Backtrace` instead, and names the walk
//! truthfully. Built for aarch64 and run under qemu-user: it walks by frame pointers and names every frame as
//! binutils' `aarch64-linux-gnu-addr2line` does.

use memprof_tests::process::Launch;

#[test]
fn a_static_musl_service_profiles_with_either_walk_and_names_it() {
    let Some(service) = memprof_tests::platforms::musl_service() else {
        return;
    };
    let walks = [
        (None, "frame pointers"),
        (Some("unwind-tables"), "unwind tables"),
        (Some("libgcc"), "the program's _Unwind_Backtrace"),
    ];
    for (unwinder, walk) in walks {
        let mut launch =
            Launch::new(service).env("LIBPROCESS_MEMORY_PROFILING", "true").env("MEMPROF_HTTP", "127.0.0.1:0");
        if let Some(unwinder) = unwinder {
            launch = launch.env("MEMPROF_UNWINDER", unwinder);
        }
        let mut program = launch.spawn();
        let state = program.state();
        assert_eq!(state.stack_walk.method, walk, "{state:?}");
        let started = program.get("/memory-profiler/start?duration=1mins");
        assert_eq!(started.status, 200, "{}", started.text());
        memprof_tests::acceptance::wait_for_sampled(&program, &["service::open_session"]);
        let stopped = program.get("/memory-profiler/stop");
        assert_eq!(stopped.status, 200, "{}", stopped.text());
        assert!(program.is_running(), "{unwinder:?}: {:#?}", program.output());
        let text = program.get("/memory-profiler/download/text").text();
        assert!(text.contains("service::open_session"), "{unwinder:?}: {text}");
    }
}

#[test]
fn an_aarch64_service_under_qemu_walks_and_names_its_frames_as_binutils_does() {
    let Some(aarch64) = memprof_tests::platforms::aarch64_service() else {
        return;
    };
    for (unwinder, walk) in [("", "frame pointers"), ("unwind-tables", "unwind tables")] {
        let program = Launch::new(&aarch64.qemu)
            .args([&aarch64.service])
            .env("QEMU_LD_PREFIX", memprof_tests::platforms::AARCH64_LIBRARIES)
            .env("LIBPROCESS_MEMORY_PROFILING", "true")
            .env("MEMPROF_HTTP", "127.0.0.1:0")
            .env("MALLOC_CONF", "lg_prof_sample:14")
            .env("MEMPROF_UNWINDER", unwinder)
            .spawn();
        let state = program.state();
        assert_eq!(state.stack_walk.method, walk, "{state:?}");
        // Until the emulated service's own allocations are sampled, not for a fixed time: under qemu and a
        // loaded host, a 2-second run could end before the service allocated anything (CI saw it once).
        let id = memprof_tests::acceptance::start(&program, "1mins");
        memprof_tests::acceptance::wait_for_sampled(&program, &["service::open_session"]);
        assert_eq!(program.get("/memory-profiler/stop").status, 200);
        let text = program.get(&format!("/memory-profiler/download/text?id={id}")).text();
        assert!(text.contains("service::open_session") && text.contains("service::main"), "{walk}: {text}");
        let dump = program.get(&format!("/memory-profiler/download/raw?id={id}")).text();
        let compared = memprof_tests::binutils::compare_with(&aarch64.addr2line, &dump, &aarch64.service);
        println!("{walk}: {compared} aarch64 addresses compared");
    }
}
