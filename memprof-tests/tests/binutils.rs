//! memprof's frames against binutils' `addr2line -f -i -C`, for every sampled address of real programs: the
//! example service and a tokio program whose tasks run under `tracing` spans (async closures inlined into
//! tokio's and tracing's polls). Each address memprof looked up must give the same chain of functions, and
//! the same files and lines, as binutils gives for it (binutils' `??` excepted).

use memprof_analysis::{Analysis, Binaries, HeapProfile};
use memprof_tests::binutils::{compare, profiled_tokio_server, system_jemalloc};
use memprof_tests::process::{Launch, Program, built_binary};

/// A profile of `program`: the raw dump of a 2-second run, finely sampled.
fn dump_of(program: &Program) -> String {
    let id = memprof_tests::acceptance::start(program, "2secs");
    memprof_tests::acceptance::wait_until_idle(program);
    let response = program.get(&format!("/memory-profiler/download/raw?id={id}"));
    assert_eq!(response.status, 200, "{}", response.text());
    response.text()
}

#[test]
fn the_example_services_frames_are_binutils_frames() {
    let service = Program::service().env("MALLOC_CONF", "lg_prof_sample:13").spawn();
    let compared = compare(&dump_of(&service), &built_binary("service"));
    println!("{compared} addresses compared");
}

#[test]
fn a_tokio_programs_frames_under_tracing_spans_are_binutils_frames() {
    let program = Launch::new(built_binary("labelled"))
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .env("MALLOC_CONF", "lg_prof_sample:13")
        .args(["tracing"])
        .spawn();
    let compared = compare(&dump_of(&program), &built_binary("labelled"));
    println!("{compared} addresses compared");
}

/// The frames of every sampled address are binutils', and the default text starts at the program's own
/// connection handler, not at tracing's `Instrumented::poll` or tokio's task poll.
fn a_shipped_tokio_server_is_symbolized_as_binutils_does(profile: &str) {
    let Some(jemalloc) = system_jemalloc() else { return };
    let scratch = memprof_tests::tools::Scratch::new(&format!("tokio-server-{profile}"));
    let (binary, dump) = profiled_tokio_server(profile, &jemalloc, &scratch);
    let compared = compare(&dump, &binary);
    println!("{profile}: {compared} addresses compared");
    let analysis = Analysis::new(&HeapProfile::parse(&dump).unwrap(), &Binaries::as_mapped());
    let folded = String::from_utf8(
        memprof_analysis::Format::Collapsed
            .render(&analysis, None, &memprof_analysis::RenderOptions::default())
            .unwrap(),
    )
    .unwrap();
    let store = folded.lines().find(|line| line.contains("Command::parse")).unwrap_or_else(|| panic!("{folded}"));
    assert!(store.starts_with("tokio_server::handle::{{closure}};"), "{store}");
}

#[test]
fn a_release_tokio_server_is_symbolized_as_binutils_does() {
    a_shipped_tokio_server_is_symbolized_as_binutils_does("release");
}

#[test]
fn a_fat_lto_tokio_server_is_symbolized_as_binutils_does() {
    a_shipped_tokio_server_is_symbolized_as_binutils_does("lto");
}
