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
//!    function (the chain breaks: the DWARF unwinder completes it), walked by frame pointers, by the unwind
//!    tables (`MEMPROF_UNWINDER=unwind-tables`) or by libgcc (`MEMPROF_UNWINDER=libgcc`); without a run for the allocation alone. Median and 99th percentile of
//!    an allocation's time, the median of five fresh processes each (lowest-highest). Figures only.
//! 3. `MEMPROF_BENCH_CALLGRIND=1` prints instead the instructions a sample's walk costs (memprof's hook,
//!    which jemalloc calls for each sample: the walk and its label frame), counted by callgrind inside the
//!    hook alone, by frame pointers, by the unwind tables and by libgcc: the `windows` program allocating
//!    64 bytes 20 and 40 calls deep, every allocation sampled, 2,000 and 6,000 times, differenced so that
//!    the first walks (rules not yet cached) and start-up cancel out; the two depths give the cost of a
//!    frame, and of a 40-frame stack (a tokio handler's) counted from the allocator's caller.
//!    Deterministic, one process each. `MEMPROF_BENCH_WINDOWS` names another build of the program, such
//!    as one without frame pointers (Rust's default; its default walk is then the unwind tables'):
//!
//! ```text
//! MEMPROF_BENCH_CALLGRIND=1 cargo bench -p memprof-tests --bench stacks
//! CARGO_TARGET_DIR=target/no-frame-pointers RUSTFLAGS="-C force-frame-pointers=no" \
//!   cargo build --release -p memprof-tests --bin windows
//! MEMPROF_BENCH_CALLGRIND=1 MEMPROF_BENCH_WINDOWS=target/no-frame-pointers/release/windows \
//!   cargo bench -p memprof-tests --bench stacks
//! ```

use memprof_tests::process::Program;

/// The roots a stack that reaches its thread's start begins with (glibc's, for the main thread and
/// the others).
const THREAD_STARTS: [&str; 2] = ["__libc_start_call_main", "start_thread"];

// Per-thread counts are the tokio server benchmark's.
#[allow(dead_code)]
#[path = "common/callgrind.rs"]
mod callgrind;

/// The walks compared: their names and `MEMPROF_UNWINDER`.
const WALKS: [(&str, &str); 3] = [("default", ""), ("unwind tables", "unwind-tables"), ("libgcc", "libgcc")];

fn main() {
    if std::env::var_os("MEMPROF_BENCH_CALLGRIND").is_some() {
        let binary = std::env::var_os("MEMPROF_BENCH_WINDOWS")
            .map_or_else(|| memprof_tests::process::built_binary("windows"), std::path::PathBuf::from);
        println!("Instructions in memprof's hook per sampled allocation, under callgrind: {}", binary.display());
        println!("{:>15}  {:>9} {:>9} {:>9} {:>15}", "walk", "20 deep", "40 deep", "a frame", "40-frame stack");
        for (name, unwinder) in WALKS {
            let sample = |depth| {
                let count = |count| hook_instructions(&binary, unwinder, count, depth);
                (count(6_000) - count(2_000)) as f64 / 4_000.0
            };
            let (shallow, deep) = (sample(20), sample(40));
            let frame = (deep - shallow) / 20.0;
            // 40 deep, a sample's stack is 48 frames from the allocator's caller: the 40 calls, `walked`
            // itself, and the program's main and std's start-up (7, to glibc's `__libc_start_call_main`).
            let stack = deep - 8.0 * frame;
            println!("{name:>15}  {shallow:>9.0} {deep:>9.0} {frame:>9.0} {stack:>15.0}");
        }
        return;
    }
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
    for (what, unwinder, sampled) in [
        ("not sampled", None, false),
        ("frame pointers", None, true),
        ("unwind tables", Some("unwind-tables"), true),
        ("libgcc", Some("libgcc"), true),
    ] {
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
    let walk = program.state().stack_walk;
    println!(
        "{what:>18}: {:.1} % of {:.1} MiB; walks completed by the unwinder: {}",
        100.0 * reached / all,
        all / (1 << 20) as f64,
        walk.completed_by_unwinder
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

/// The instructions callgrind counts inside memprof's hook while a fresh `windows` program (`binary`) walks
/// `count` sampled allocations of 64 bytes `depth` calls deep, sampled continuously (the program's
/// default) with every allocation sampled.
fn hook_instructions(binary: &std::path::Path, unwinder: &str, count: usize, depth: u32) -> u64 {
    let mut run = std::process::Command::new(binary);
    run.env("LIBPROCESS_MEMORY_PROFILING", "true").env("MEMPROF_HTTP", "127.0.0.1:0");
    run.env("MALLOC_CONF", "lg_prof_sample:0").env("MEMPROF_UNWINDER", unwinder);
    // Every allocation walked: the budget of sampling work, which would thin them, is off.
    run.env("MEMPROF_SAMPLING_BUDGET", "off");
    let input = format!("walks {count} {depth}\n");
    let (total, output) = callgrind::instructions(&run, &["--toggle-collect=*labelling_hook*"], &input);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    total
}
