//! Symbolized analysis, memprof against jeprof, on the same dumps: time and peak memory.
//!
//! ```text
//! cargo bench -p memprof-tests --features large-binary --bench analysis
//! ```
//!
//! For the example service and for a large tokio binary (a thousand generated modules, ~100 MB of DWARF),
//! it takes a few profiling runs and measures:
//! - in the process: the time of `download/text` for a run not rendered yet (the first one with a cold
//!   symbol cache, the others warm), and the process's peak extra RSS while rendering (peak RSS reset
//!   through `/proc/<pid>/clear_refs` before each request, minus the RSS before it);
//! - offline, on the same raw dump: `memprof analyze` as text, SVG call graph, flame graph and pprof, against
//!   `jeprof --text` and `jeprof --svg` (which needs graphviz's `dot`): wall time and peak RSS (GNU time's
//!   `%M`; jeprof's includes its `addr2line`, `nm` and `dot` children).
//!
//! - a tokio server of the tutorial's shape built as services ship it (release; fat LTO, one codegen unit),
//!   profiled by Debian's jemalloc: the offline figures only;
//! - for every dump, that each address memprof named has binutils' `addr2line -f -i` frames (a panic if not);
//! - the price of a label split: each readable format rendered from the same symbolized profile of the
//!   example service (which labels by tenant) with `by=tenant` and without, in this process: the render
//!   alone, and an endpoint's whole answer from the dump.
//!
//! Medians of several runs; the figures are printed, never asserted (the machine is noisy).

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use memprof_analysis::{Analysis, Binaries, Format, LabelSets, RenderOptions};
use memprof_tests::process::{Launch, Program, built_binary};
use memprof_tests::tools::{self, Scratch};

const RUNS: usize = 5;

fn main() {
    let scratch = Scratch::new("bench-analysis");
    let mut programs = vec![("example service", built_binary("service"))];
    let large = built_binary("large");
    if large.is_file() {
        programs.push(("large binary", large));
    } else {
        println!("(the large binary is not built: add --features large-binary)");
    }
    println!(
        "{:<16} {:>9} {:>11} {:>11} {:>12} {:>12}",
        "program", "binary MB", "debug MB", "cold ms", "warm ms", "extra RSS MB"
    );
    for (name, binary) in programs {
        measure(name, &binary, &scratch);
    }
    // A tokio server of the tutorial's shape, as services ship it (release, and fat LTO with one codegen
    // unit), profiled by Debian's jemalloc: offline only.
    let Some(jemalloc) = memprof_tests::binutils::system_jemalloc() else { return };
    for profile in ["release", "lto"] {
        let (binary, dump) = memprof_tests::binutils::profiled_tokio_server(profile, &jemalloc, &scratch);
        let raw = scratch.join(&format!("tokio-server-{profile}.heap"));
        std::fs::write(&raw, &dump).unwrap();
        let name = format!("tokio {profile}");
        println!(
            "{name:<16} {:>9.1} {:>11.1} {:>11} {:>12} {:>12}",
            megabytes(std::fs::metadata(&binary).unwrap().len()),
            megabytes(debug_info_bytes(&binary)),
            "-",
            "-",
            "-"
        );
        offline(&name, &binary, &raw);
    }
}

fn measure(name: &str, binary: &Path, scratch: &Scratch) {
    let program =
        Launch::new(binary).env("LIBPROCESS_MEMORY_PROFILING", "true").env("MEMPROF_HTTP", "127.0.0.1:0").spawn();
    let mut render_times = Vec::new();
    let mut extra_rss = Vec::new();
    let mut last = 0;
    for _ in 0..RUNS {
        last = finished_run(&program);
        let before = status_kilobytes(program.pid(), "VmRSS");
        std::fs::write(format!("/proc/{}/clear_refs", program.pid()), "5").expect("reset the peak RSS");
        let started = Instant::now();
        let text = program.get(&format!("/memory-profiler/download/text?id={last}"));
        render_times.push(started.elapsed());
        assert_eq!(text.status, 200, "{}", text.text());
        extra_rss.push(status_kilobytes(program.pid(), "VmHWM").saturating_sub(before));
    }
    let raw = scratch.join(&format!("{}.heap", binary.file_name().unwrap().to_string_lossy()));
    std::fs::write(&raw, program.get(&format!("/memory-profiler/download/raw?id={last}")).body).unwrap();
    let labels = program.get(&format!("/memory-profiler/download/labels?id={last}")).text();
    drop(program);
    let dump = std::fs::read_to_string(&raw).unwrap();

    println!(
        "{name:<16} {:>9.1} {:>11.1} {:>11.1} {:>12.1} {:>12.1}",
        megabytes(std::fs::metadata(binary).unwrap().len()),
        megabytes(debug_info_bytes(binary)),
        millis(render_times[0]),
        millis(median(render_times[1..].to_vec())),
        *extra_rss.iter().max().unwrap() as f64 / 1024.0,
    );

    offline(name, binary, &raw);
    split_renders(&dump, &labels);
}

/// Offline, on `raw`: `memprof analyze` in each format, against jeprof's text and SVG call graph; then every
/// address memprof named checked against binutils' `addr2line`.
fn offline(name: &str, binary: &Path, raw: &Path) {
    let memprof = built_binary("memprof-tool");
    let jeprof = tools::find("jeprof", "libjemalloc-dev");
    let dot = tools::find("dot", "graphviz");
    println!(
        "{:<16} {:<12} {:>22} {:>22} {:>9}",
        "", "offline", "memprof ms, peak MB", "jeprof ms, peak MB", "speed-up"
    );
    for (format, jeprof_format) in
        [("text", Some("--text")), ("graph", Some("--svg")), ("flamegraph", None), ("pprof", None)]
    {
        let ours = repeated(
            RUNS,
            &memprof,
            &["analyze", path(raw), "--binary", path(binary), "--format", format, "-o", "/dev/null"],
        );
        // jeprof draws its SVG with graphviz's dot.
        let runnable = jeprof_format.filter(|option| *option != "--svg" || dot.is_some());
        let theirs = match (&jeprof, runnable) {
            (Some(jeprof), Some(option)) => Some(repeated(3, jeprof, &[option, path(binary), path(raw)])),
            _ => None,
        };
        let cell =
            |(time, kilobytes): (Duration, u64)| format!("{:.0}, {:.1}", millis(time), kilobytes as f64 / 1024.0);
        let (jeprof_cell, speed_up) = match theirs {
            Some(theirs) => (cell(theirs), format!("{:.0}x", theirs.0.as_secs_f64() / ours.0.as_secs_f64())),
            None => ("-".to_owned(), "-".to_owned()),
        };
        println!("{:<16} {format:<12} {:>22} {jeprof_cell:>22} {speed_up:>9}", "", cell(ours));
    }
    let compared = memprof_tests::binutils::compare(&std::fs::read_to_string(raw).unwrap(), binary);
    println!("{name:<16} all {compared} sampled addresses named as binutils' addr2line -f -i names them");
}

/// Each readable format rendered from one symbolized profile with `by=tenant` and without, its stacks from
/// the user's code and whole: the median times of [`SPLIT_RENDERS`] renders each, their ratio, and the
/// ratios of the outputs' sizes and of what they draw ([`drawn`]); then the same for an endpoint's whole
/// answer to a profile not rendered yet: reading the dump, naming its frames (the symbol cache warm) and
/// rendering.
fn split_renders(dump: &str, labels: &str) {
    const SPLIT_RENDERS: usize = 21;
    let labels = LabelSets::parse(labels).unwrap();
    if labels.is_empty() {
        return;
    }
    let binaries = Binaries::as_mapped();
    let analysis = Analysis::of_dump(dump, &binaries, &labels).unwrap();
    let median_time = |work: &dyn Fn() -> Vec<u8>| {
        median(
            (0..SPLIT_RENDERS)
                .map(|_| {
                    let started = Instant::now();
                    std::hint::black_box(work());
                    started.elapsed()
                })
                .collect(),
        )
    };
    for full in [false, true] {
        let shown: usize = analysis.samples.iter().map(|sample| analysis.shown_frames(sample, full).len()).sum();
        println!(
            "{:<16} by=tenant, {} ({} stacks, {:.1} frames each)",
            "",
            if full { "every frame" } else { "from the user's code" },
            analysis.samples.len(),
            shown as f64 / analysis.samples.len() as f64
        );
        println!(
            "{:<16} {:<12} {:>11} {:>9} {:>6} {:>12} {:>12} {:>10} {:>9} {:>6}",
            "",
            "format",
            "unsplit ms",
            "split ms",
            "ratio",
            "bytes ratio",
            "drawn ratio",
            "answer ms",
            "split ms",
            "ratio"
        );
        for format in [Format::Text, Format::Collapsed, Format::FlameGraph, Format::Graph] {
            let unsplit = RenderOptions { full, ..RenderOptions::default() };
            let split = RenderOptions { by: Some("tenant".to_owned()), ..unsplit.clone() };
            let render = |options: &RenderOptions| format.render(&analysis, None, options).unwrap();
            let answer = |options: &RenderOptions| {
                let analysis = Analysis::of_dump(dump, &binaries, &labels).unwrap();
                format.render(&analysis, None, options).unwrap()
            };
            let (unsplit_output, split_output) = (render(&unsplit), render(&split));
            let rendered = [&unsplit, &split].map(|options| median_time(&|| render(options)));
            let answered = [&unsplit, &split].map(|options| median_time(&|| answer(options)));
            let ratio = |[unsplit, split]: [Duration; 2]| split.as_secs_f64() / unsplit.as_secs_f64();
            println!(
                "{:<16} {:<12} {:>11.3} {:>9.3} {:>6.2} {:>12.2} {:>12.2} {:>10.3} {:>9.3} {:>6.2}",
                "",
                format.name(),
                millis(rendered[0]),
                millis(rendered[1]),
                ratio(rendered),
                split_output.len() as f64 / unsplit_output.len() as f64,
                drawn(format, &split_output) as f64 / drawn(format, &unsplit_output) as f64,
                millis(answered[0]),
                millis(answered[1]),
                ratio(answered),
            );
        }
    }
}

/// What a rendered `output` draws: its rows (text, folded stacks), or its SVG groups (a flame graph's
/// frames, a call graph's nodes and edges).
fn drawn(format: Format, output: &[u8]) -> usize {
    let output = String::from_utf8_lossy(output);
    match format {
        Format::FlameGraph | Format::Graph => output.matches("<g").count(),
        _ => output.lines().count(),
    }
}

/// The median wall time and the largest peak RSS (KiB) of `runs` runs of a command.
fn repeated(runs: usize, program: &Path, arguments: &[&str]) -> (Duration, u64) {
    let measured: Vec<(Duration, u64)> = (0..runs).map(|_| timed(program, arguments)).collect();
    (
        median(measured.iter().map(|(time, _)| *time).collect()),
        measured.iter().map(|(_, kilobytes)| *kilobytes).max().unwrap_or(0),
    )
}

/// Starts a 1-second run, waits for its end, returns its id.
fn finished_run(program: &Program) -> u64 {
    let id = program.get_json("/memory-profiler/start?duration=1secs")["id"].as_u64().unwrap();
    while program.state().current_run.id().is_some() {
        thread::sleep(Duration::from_millis(50));
    }
    id
}

/// Wall time and peak RSS (KiB) of a command, through GNU time.
fn timed(program: &Path, arguments: &[&str]) -> (Duration, u64) {
    let started = Instant::now();
    let output = Command::new("/usr/bin/time").arg("-f").arg("%M").arg(program).args(arguments).output().unwrap();
    let elapsed = started.elapsed();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let kilobytes = stderr.lines().last().and_then(|line| line.trim().parse().ok()).unwrap_or(0);
    (elapsed, kilobytes)
}

fn status_kilobytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|line| line.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The size of the `.debug_*` sections, from `readelf -S` (0 when it is not installed).
fn debug_info_bytes(binary: &Path) -> u64 {
    let Ok(output) = Command::new("readelf").args(["-SW", path(binary)]).output() else { return 0 };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let position = fields.iter().position(|field| field.starts_with(".debug_"))?;
            u64::from_str_radix(fields.get(position + 4)?, 16).ok()
        })
        .sum()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn millis(time: Duration) -> f64 {
    time.as_secs_f64() * 1000.0
}

fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap()
}
