//! Stacks through C code built without frame pointers (issue: a sample allocated under glibc's `opendir`
//! had no caller): what share of the sampled bytes reaches `main` or the thread's start, and what a walk
//! costs, by frame pointers (completed by the DWARF unwinder where the chain breaks) and by libgcc.
//!
//! ```text
//! cargo bench -p memprof-tests --bench stacks
//! ```
//!
//! 1. The share: the example service under load, and the `windows` test program keeping 16 MiB that a C
//!    function without frame pointers allocates (c/allocate.c), each over a run; the bytes of the run's
//!    stacks (every frame) that start at the thread's start.
//! 2. The walk: the `windows` program allocating and freeing 4 KiB blocks 200,000 times, every allocation
//!    sampled (`lg_prof_sample:0`, a run on), by Rust (frame pointers all the way) or through the C
//!    function (the chain breaks: the DWARF unwinder completes it), walked by frame pointers or by libgcc
//!    (`MEMPROF_UNWINDER=libgcc`); without a run for the allocation alone. Median and 99th percentile of
//!    an allocation's time, the median of five fresh processes each (lowest-highest). Figures only.

use memprof_tests::process::Program;

/// The roots a stack that reaches its thread's start begins with (glibc's, for the main thread and
/// the others).
const THREAD_STARTS: [&str; 2] = ["__libc_start_call_main", "start_thread"];

fn main() {
    println!("Share of sampled bytes whose stack reaches main or the thread's start");
    let service = Program::service().env("MALLOC_CONF", "lg_prof_sample:14").spawn();
    let id = service.get_json("/memory-profiler/start?duration=3secs")["id"].as_u64().unwrap();
    memprof_tests::acceptance::wait_until_idle(&service);
    print_share("example service", &service, id);
    let windows = Program::windows().env("MALLOC_CONF", "lg_prof_sample:14").spawn();
    windows.wait_for_line(|line| line == "windows: ready");
    let id = windows.get_json("/memory-profiler/start")["id"].as_u64().unwrap();
    windows.tell("through-c", "windows: done through-c");
    assert_eq!(windows.get("/memory-profiler/stop").status, 200);
    print_share("16 MiB through C", &windows, id);

    println!("\nAn allocation of 4 KiB, every one sampled: median / 99th percentile in ns (lowest-highest of 5)");
    for (what, unwinder, sampled) in
        [("not sampled", None, false), ("frame pointers", None, true), ("libgcc", Some("libgcc"), true)]
    {
        for path in ["rust", "c"] {
            let rounds: Vec<(u128, u128)> = (0..5).map(|_| latencies(path, unwinder, sampled)).collect();
            println!("{what:>15} {path:>5}: {}", spread(&rounds));
        }
    }
}

/// The share of run `id`'s sampled bytes (every frame kept) whose stack starts at a thread's start.
fn print_share(what: &str, program: &Program, id: u64) {
    let folded = program.get(&format!("/memory-profiler/download/collapsed?id={id}&full=true")).text();
    let (mut reached, mut all) = (0.0, 0.0);
    for (stack, bytes) in folded.lines().filter_map(|line| line.rsplit_once(' ')) {
        let bytes: f64 = bytes.parse().unwrap();
        all += bytes;
        if THREAD_STARTS.iter().any(|start| stack.starts_with(&format!("{start};"))) {
            reached += bytes;
        }
    }
    let walk = &program.get_json("/memory-profiler/state")["memory_profiler"]["stack_walk"];
    println!(
        "{what:>18}: {:.1} % of {:.1} MiB; walks completed by the unwinder: {}",
        100.0 * reached / all,
        all / (1 << 20) as f64,
        walk["completed_by_unwinder"]
    );
}

/// A fresh `windows` program's allocation latencies (p50, p99) in ns, through `path`.
fn latencies(path: &str, unwinder: Option<&str>, sampled: bool) -> (u128, u128) {
    let mut launch = Program::windows().env("MALLOC_CONF", "lg_prof_sample:0").env("MEMPROF_SAMPLING", "on-demand");
    if let Some(unwinder) = unwinder {
        launch = launch.env("MEMPROF_UNWINDER", unwinder);
    }
    let program = launch.spawn();
    program.wait_for_line(|line| line == "windows: ready");
    if sampled {
        assert_eq!(program.get("/memory-profiler/start").status, 200);
    }
    let command = format!("latencies {path} 200000");
    program.tell(&command, &format!("windows: done {command}"));
    let said = program.wait_for_line(|line| line.starts_with("windows: latencies "));
    let mut figures = said["windows: latencies ".len()..].split(' ').map(|figure| figure.parse().unwrap());
    (figures.next().unwrap(), figures.next().unwrap())
}

/// `p50 / p99` as the medians of the rounds, with their lowest and highest.
fn spread(rounds: &[(u128, u128)]) -> String {
    let median = |mut values: Vec<u128>| -> String {
        values.sort_unstable();
        format!("{} ({}-{})", values[values.len() / 2], values[0], values[values.len() - 1])
    };
    format!(
        "{} / {}",
        median(rounds.iter().map(|round| round.0).collect()),
        median(rounds.iter().map(|round| round.1).collect())
    )
}
