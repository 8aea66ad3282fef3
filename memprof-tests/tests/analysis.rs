//! In-process analysis of real dumps of the example service, checked against what the service really keeps
//! alive (256 sessions of 64 KiB in `open_session`, 128 blocks of 32 KiB in `index_document`) and against the
//! real peers: jeprof's totals, `go tool pprof`, an XML parser.

use std::io::Read;
use std::thread;

use memprof_tests::http::request_with_body;
use memprof_tests::process::{Program, built_binary};
use memprof_tests::tools::{self, Scratch};
use memprof_wire::StackWalk;

const MIB: f64 = 1_048_576.0;

/// Sampling every 8 KiB: each 64 KiB session is then sampled with probability 99.97% and each 32 KiB block
/// with 98.2%, so the unbiased estimate of the index's 4 MiB has a standard deviation of 1.2% (at 16 KiB it
/// is 3.6%; at the default 512 KiB, a few dozen samples would make it ±20%).
const FINE_SAMPLING: &str = "lg_prof_sample:13";

/// The service, finely sampled.
fn finely_sampled_service() -> Program {
    Program::service().env("MALLOC_CONF", FINE_SAMPLING).spawn()
}

/// Runs a 2-second profiling run to its end and returns its id (one that holds the service's sessions).
fn finished_run(service: &Program) -> u64 {
    memprof_tests::acceptance::finished_run_holding(service, "2secs", "service::open_session")
}

fn download(service: &Program, target: &str) -> memprof_tests::http::Response {
    let response = service.get(target);
    assert_eq!(response.status, 200, "GET {target}: {}", response.text());
    response
}

/// The MB in `Total: <MB> MB` (followed, for a difference, by what its percentages are of), the first line
/// of the text format.
fn total_megabytes(text: &str) -> f64 {
    let line = text.lines().find(|line| line.starts_with("Total: ")).unwrap_or_else(|| panic!("no total: {text}"));
    let megabytes = line.trim_start_matches("Total: ").split(" MB").next().unwrap();
    megabytes.parse().unwrap_or_else(|error| panic!("{error}: {line}"))
}

/// The flat MB of the row whose function (last column) is `function`.
fn flat_megabytes(text: &str, function: &str) -> f64 {
    let row = text
        .lines()
        .find(|line| line.ends_with(&format!("% {function}")))
        .unwrap_or_else(|| panic!("no {function}: {text}"));
    row.split_whitespace().next().unwrap().parse().unwrap()
}

/// An SVG document, checked to be well-formed XML (inferno's carries the SVG 1.1 DOCTYPE).
fn parse_svg(svg: &str) -> roxmltree::Document<'_> {
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..roxmltree::ParsingOptions::default() };
    roxmltree::Document::parse_with_options(svg, options).unwrap_or_else(|error| panic!("{error}: {svg}"))
}

fn assert_near(actual: f64, expected: f64, tolerance: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= expected * tolerance,
        "{what}: {actual} is not within {tolerance} of {expected}"
    );
}

#[test]
fn text_shows_the_allocating_functions_with_the_bytes_they_keep() {
    let service = finely_sampled_service();
    let id = finished_run(&service);
    let response = download(&service, &format!("/memory-profiler/download/text?id={id}"));
    assert_eq!(response.header("content-type"), Some("text/plain; charset=utf-8"));
    let text = response.text();
    // Within 5%: more than 4 standard deviations. The index churns (a block replaced every request), so a
    // profile that missed the last moments of the run, as one dumped after sampling stopped does, reads low.
    assert_near(flat_megabytes(&text, "service::open_session"), 16.0, 0.05, "open_session");
    assert_near(flat_megabytes(&text, "service::index_document"), 4.0, 0.05, "index_document");
    assert_near(total_megabytes(&text), 20.0, 0.05, "total");
    // The allocator and Rust's allocation plumbing are trimmed: nothing is allocated "by" them.
    for plumbing in ["__rust_alloc", "prof_backtrace_impl", "malloc", "alloc::vec::from_elem"] {
        assert!(!text.lines().any(|line| line.ends_with(&format!("% {plumbing}"))), "{plumbing}: {text}");
    }
    let lines = download(&service, &format!("/memory-profiler/download/text?id={id}&lines=true")).text();
    let row = lines.lines().find(|line| line.contains("service::open_session ")).unwrap();
    assert!(row.contains("examples/service.rs:"), "{row}");
}

/// The stack (outermost frame first) under which the service's sessions are allocated, from a run's
/// collapsed stacks.
fn open_session_stack(service: &Program) -> Vec<String> {
    let id = finished_run(service);
    // Every frame, down to the C start-up code, which is what the two walks differ in.
    let folded = download(service, &format!("/memory-profiler/download/collapsed?id={id}&full=true")).text();
    let line = folded.lines().find(|line| line.rsplit_once(' ').unwrap().0.ends_with(";service::open_session"));
    let (stack, _) = line.unwrap_or_else(|| panic!("no open_session: {folded}")).rsplit_once(' ').unwrap();
    stack.split(';').map(str::to_owned).collect()
}

#[test]
fn the_frame_pointer_and_unwind_table_walks_find_the_stacks_libgcc_finds() {
    let by_frame_pointers = finely_sampled_service();
    let walk = by_frame_pointers.state().stack_walk;
    let expected = |method: &str, why: Option<&str>| StackWalk {
        method: method.to_owned(),
        why: why.map(str::to_owned),
        completed_by_unwinder: 0,
    };
    assert_eq!(walk, expected("frame pointers", None));
    let by_libgcc = Program::service().env("MALLOC_CONF", FINE_SAMPLING).env("MEMPROF_UNWINDER", "libgcc").spawn();
    by_libgcc
        .wait_for_line(|line| line == "[memprof] INFO Samples walk the stack with libgcc: MEMPROF_UNWINDER=libgcc");
    let walk = by_libgcc.state().stack_walk;
    assert_eq!(walk, expected("libgcc", Some("MEMPROF_UNWINDER=libgcc")));

    // The walk programs built without frame pointers get: the unwind tables, each return address's rule cached.
    let by_tables =
        Program::service().env("MALLOC_CONF", FINE_SAMPLING).env("MEMPROF_UNWINDER", "unwind-tables").spawn();
    by_tables.wait_for_line(|line| {
        line == "[memprof] INFO Samples walk the stack with unwind tables: MEMPROF_UNWINDER=unwind-tables"
    });
    let walk = by_tables.state().stack_walk;
    assert_eq!(walk, expected("unwind tables", Some("MEMPROF_UNWINDER=unwind-tables")));

    let (fast, slow) = (open_session_stack(&by_frame_pointers), open_session_stack(&by_libgcc));
    // The same frames, but for the C start-up code below `main` that glibc builds without frame pointers.
    assert!(slow.ends_with(&fast), "frame pointers: {fast:?}\nlibgcc: {slow:?}");
    let main = slow.iter().position(|frame| frame == "main").unwrap();
    assert!(fast.len() >= slow.len() - main, "frame pointers: {fast:?}\nlibgcc: {slow:?}");
    // The tables find every frame libgcc finds, the C start-up code included.
    assert_eq!(open_session_stack(&by_tables), slow, "unwind tables against libgcc");
    // The example's stacks are Rust's, frame pointers all the way: no walk needed the unwinder.
    let walk = by_frame_pointers.state().stack_walk;
    assert_eq!(walk.completed_by_unwinder, 0, "{walk:?}");
}

/// `jeprof --text` of run `id`'s raw dump, as an operator runs it on a downloaded profile.
fn jeprof_text(jeprof: &std::path::Path, service: &Program, id: u64) -> String {
    let scratch = Scratch::new("jeprof");
    let raw = scratch.join("profile.heap");
    std::fs::write(&raw, download(service, &format!("/memory-profiler/download/raw?id={id}")).body).unwrap();
    let binary = built_binary("service");
    let report = tools::run(jeprof, &["--text", binary.to_str().unwrap(), raw.to_str().unwrap()], &[]);
    String::from_utf8_lossy(&report.stdout).into_owned()
}

#[test]
fn text_totals_agree_with_jeprof() {
    let Some(jeprof) = tools::find("jeprof", "libjemalloc-dev") else { return };
    let service = finely_sampled_service();
    let id = finished_run(&service);
    let theirs = total_megabytes(&jeprof_text(&jeprof, &service, id));
    let ours = total_megabytes(&download(&service, &format!("/memory-profiler/download/text?id={id}")).text());
    assert_near(ours, theirs, 0.01, "our total against jeprof's");
}

/// The Mesos workflow: download the raw dump and read it with jeprof. The frame-pointer walk records each
/// stack from the allocator's caller, so jeprof's flat column names the program's allocating functions,
/// not jemalloc's own.
#[test]
fn jeprof_shows_the_programs_allocating_functions_flat_in_a_raw_dump() {
    let Some(jeprof) = tools::find("jeprof", "libjemalloc-dev") else { return };
    let service = finely_sampled_service();
    let id = finished_run(&service);
    let report = jeprof_text(&jeprof, &service, id);
    let mut flat: Vec<&str> = report.lines().skip(1).take(2).filter_map(|row| row.split_whitespace().nth(5)).collect();
    flat.sort();
    assert_eq!(flat, ["service::index_document", "service::open_session"], "{report}");
}

#[test]
fn pprof_output_is_read_by_go_tool_pprof() {
    let service = finely_sampled_service();
    let id = finished_run(&service);
    let response = download(&service, &format!("/memory-profiler/download/pprof?id={id}"));
    assert_eq!(
        response.header("content-disposition"),
        Some(format!("attachment; filename=\"memprof.{id}.pb.gz\"").as_str())
    );
    let mut protobuf = Vec::new();
    flate2::read::GzDecoder::new(&response.body[..]).read_to_end(&mut protobuf).expect("gzip");
    assert!(String::from_utf8_lossy(&protobuf).contains("inuse_space"));
    let Some(report) = tools::pprof_top(&response.body, "inuse_space") else { return };
    let session =
        report.lines().find(|line| line.ends_with("service::open_session")).unwrap_or_else(|| panic!("{report}"));
    let megabytes: f64 = session.split_whitespace().next().unwrap().trim_end_matches("MB").parse().unwrap();
    assert_near(megabytes, 16.0, 0.10, "go tool pprof's open_session");
    // Every frame as go tool pprof shows it keeps its type and trait (pprof strips `<...>` from a name it
    // takes for undemangled C++): no `::push_str`, no `alloc::slice::::to_vec`.
    let raw = tools::pprof(&response.body, &["-raw"]).unwrap();
    let locations = raw.split("Locations").nth(1).unwrap_or_else(|| panic!("{raw}"));
    let shown: Vec<&str> = locations
        .lines()
        .filter_map(|line| {
            line.split_once(" M=").map_or(Some(line), |(_, rest)| rest.split_once(' ').map(|(_, name)| name))
        })
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect();
    let lost: Vec<&&str> = shown.iter().filter(|name| name.starts_with("::") || name.contains("::::")).collect();
    assert!(lost.is_empty(), "names that lost their type or trait: {lost:#?}");
    // std's start-up frame, under every stack of the main thread (was `::call_once`).
    let call_once = "<&dyn core::ops::function::Fn + core::marker::Sync + core::panic::unwind_safe::RefUnwindSafe as core::ops::function::FnOnce>::call_once ";
    assert!(raw.contains(call_once), "{raw}");
}

#[test]
fn flame_graph_and_call_graph_are_svg_naming_the_functions() {
    let service = finely_sampled_service();
    let id = finished_run(&service);
    for format in ["flamegraph", "graph"] {
        let response = download(&service, &format!("/memory-profiler/download/{format}?id={id}"));
        assert_eq!(response.header("content-type"), Some("image/svg+xml"), "{format}");
        let svg = response.text();
        let document = parse_svg(&svg);
        assert_eq!(document.root_element().tag_name().name(), "svg", "{format}");
        let texts: Vec<&str> = document.descendants().filter_map(|node| node.text()).collect();
        for function in ["service::open_session", "service::index_document"] {
            assert!(texts.iter().any(|text| text.contains(function)), "{format} lacks {function}");
        }
    }
}

#[test]
fn collapsed_stacks_add_up_to_the_total() {
    let service = finely_sampled_service();
    let id = finished_run(&service);
    let folded = download(&service, &format!("/memory-profiler/download/collapsed?id={id}")).text();
    let mut sum = 0.0;
    for line in folded.lines() {
        let (stack, bytes) = line.rsplit_once(' ').unwrap();
        // One frame is a stack too: what the service's `main` allocates itself, when it is sampled.
        assert!(stack.split(';').all(|frame| !frame.is_empty()), "{line}");
        let bytes = bytes.parse::<f64>().unwrap();
        assert!(bytes > 0.0, "{line}");
        sum += bytes;
    }
    assert!(folded.lines().any(|line| line.rsplit_once(' ').unwrap().0.ends_with(";service::open_session")));
    let total = total_megabytes(&download(&service, &format!("/memory-profiler/download/text?id={id}")).text());
    assert_near(sum / MIB, total, 0.01, "folded bytes against the text total");
}

#[test]
fn a_base_run_gives_differences_in_every_format() {
    let service = finely_sampled_service();
    let first = finished_run(&service);
    let second = finished_run(&service);
    let query = format!("id={second}&base={first}");
    // The service's live heap is the same at both ends: the difference is near zero.
    let text = download(&service, &format!("/memory-profiler/download/text?{query}")).text();
    assert!(total_megabytes(&text).abs() < 2.0, "{text}");
    let folded = download(&service, &format!("/memory-profiler/download/collapsed?{query}")).text();
    for line in folded.lines() {
        let fields: Vec<&str> = line.rsplitn(3, ' ').collect();
        assert!(fields.len() == 3 && fields[0].parse::<f64>().is_ok() && fields[1].parse::<f64>().is_ok(), "{line}");
    }
    let flame = download(&service, &format!("/memory-profiler/download/flamegraph?{query}")).text();
    parse_svg(&flame);
    let pprof = download(&service, &format!("/memory-profiler/download/pprof?{query}"));
    assert_eq!(&pprof.body[..2], [0x1f, 0x8b], "gzip");
}

#[test]
fn concurrent_requests_for_one_render_get_the_same_bytes() {
    let service = finely_sampled_service();
    let id = finished_run(&service);
    let address = service.address();
    let target = format!("/memory-profiler/download/graph?id={id}");
    let bodies: Vec<Vec<u8>> = thread::scope(|scope| {
        let requests: Vec<_> =
            (0..4).map(|_| scope.spawn(|| memprof_tests::http::request(address, "GET", &target).body)).collect();
        requests.into_iter().map(|request| request.join().unwrap()).collect()
    });
    assert!(bodies.windows(2).all(|pair| pair[0] == pair[1]) && !bodies[0].is_empty());
}

#[test]
fn the_symbol_service_names_the_live_processs_functions() {
    let service = finely_sampled_service();
    let id = finished_run(&service);
    for path in ["/debug/pprof/symbol", "/memory-profiler/pprof/symbol"] {
        assert_eq!(service.get(path).text(), "num_symbols: 1\n");
    }
    let raw = download(&service, &format!("/memory-profiler/download/raw?id={id}")).text();
    let addresses: Vec<&str> =
        raw.lines().filter_map(|line| line.strip_prefix("@ ")).flat_map(str::split_whitespace).collect();
    let response = request_with_body(service.address(), "POST", "/debug/pprof/symbol", addresses.join("+").as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
    let names: Vec<String> = response.text().lines().map(|line| line.split_once(' ').unwrap().1.to_owned()).collect();
    assert!(names.iter().any(|name| name == "service::open_session"), "{names:?}");
    // An address asked 65,536 times is named once: the answer's size is that of its distinct names.
    let repeated = vec![addresses[0]; 1 << 16].join("+");
    let once = request_with_body(service.address(), "POST", "/debug/pprof/symbol", repeated.as_bytes());
    assert_eq!((once.status, once.text().lines().count()), (200, 1), "{}", once.text());
    let bad = request_with_body(service.address(), "POST", "/debug/pprof/symbol", b"0x10+zz");
    assert_eq!((bad.status, bad.text()), (400, "'zz' is not a hexadecimal address.\n".to_owned()));
    let program = service.get("/memory-profiler/pprof/cmdline").text();
    assert!(program.lines().next().unwrap().ends_with("/service"), "{program}");
}

#[test]
fn jeprof_symbolizes_against_the_live_process() {
    let (Some(jeprof), Some(_)) = (tools::find("jeprof", "libjemalloc-dev"), tools::find("curl", "curl")) else {
        return;
    };
    let service = finely_sampled_service();
    finished_run(&service);
    let scratch = Scratch::new("jeprof-remote");
    let url = format!("http://{}/memory-profiler/pprof/heap", service.address());
    let report = tools::run(
        &jeprof,
        &["--text", &url],
        &[("JEPROF_TMPDIR", &scratch.join("tmp")), ("HOME", &scratch.join("home"))],
    );
    let report = String::from_utf8_lossy(&report.stdout);
    assert!(report.contains("service::open_session"), "{report}");
}

/// A deploy replaces the program's file while it runs: the profile is still symbolized with the running image.
#[test]
fn a_program_whose_file_was_replaced_is_symbolized_from_its_running_image() {
    let scratch = Scratch::new("replaced");
    let copy = scratch.join("service");
    std::fs::copy(built_binary("service"), &copy).unwrap();
    let service = memprof_tests::process::Launch::new(&copy)
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .spawn();
    let id = finished_run(&service);
    // A new build in its place: written beside it and renamed over it, as deploys do.
    let next = scratch.join("service.next");
    std::fs::copy(built_binary("scope"), &next).unwrap();
    std::fs::rename(&next, &copy).unwrap();
    let text = download(&service, &format!("/memory-profiler/download/text?id={id}")).text();
    for function in ["service::open_session", "service::index_document"] {
        assert!(text.lines().any(|line| line.ends_with(&format!("% {function}"))), "{function}: {text}");
    }
}
