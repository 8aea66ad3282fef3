//! Issue 66's bar, "quiet off": what a program that is only the attribute costs when its switch is off and
//! nothing else is set (a command-line tool run thousands of times a day), against the same program on
//! plain jemalloc. The benchmarks' baseline program doing nothing (`baseline start`), release builds, the
//! environment cleared, `RUNS` starts each, every start's page faults and peak resident set read from the
//! kernel as it is reaped (`wait4`), its wall-clock time from spawn to reaped, and its stderr kept:
//!
//! - `system`: the system allocator, no memprof;
//! - `jemalloc`: plain tikv-jemallocator;
//! - `jemalloc prof`: tikv-jemallocator built as memprof builds it, with memprof's configuration
//!   (`MALLOC_CONF=prof:true,prof_active:false`): what jemalloc's profiling itself costs at start;
//! - `compiled out`: `#[memprof::main]` with the profiler compiled out;
//! - `switch off`: `#[memprof::main]` compiled in, its switch unset.
//!
//! ```text
//! cargo bench -p memprof-tests --bench quiet_off
//! ```
//!
//! Figures only (medians, with the range over the runs), and how many runs printed anything on stderr.

#[path = "common/baseline.rs"]
mod baseline;
#[path = "common/spread.rs"]
mod spread;

use std::io::Read;
use std::process::{Command, Stdio};

use spread::Spread;

/// How many starts each build is measured over.
const RUNS: usize = 20;

/// The builds measured: a name, the baseline's features, and jemalloc's configuration.
const BUILDS: [(&str, &str, Option<&str>); 5] = [
    ("system", "", None),
    ("jemalloc", "jemalloc", None),
    ("jemalloc prof", "jemalloc-as-memprof", Some("prof:true,prof_active:false")),
    ("compiled out", "memprof-compiled-out", None),
    ("switch off", "memprof-compiled-in", None),
];

/// What one start cost, as the kernel counted it.
struct Start {
    /// Minor and major page faults.
    faults: u64,
    /// The peak resident set, in KiB.
    max_rss_kib: u64,
    /// From spawned to reaped, in microseconds.
    wall_micros: u64,
    /// Whether the program wrote anything on stderr.
    said_something: bool,
}

fn main() {
    println!("{RUNS} starts each, environment cleared: median (least-most)");
    println!("{:>14} {:>18} {:>22} {:>18} {:>8}", "build", "page faults", "max RSS KiB", "wall us", "stderr");
    let mut medians = Vec::new();
    for (name, features, malloc_conf) in BUILDS {
        let program = baseline::build(features);
        let starts: Vec<Start> = (0..RUNS).map(|_| start(&program, malloc_conf)).collect();
        let faults = Spread::of(starts.iter().map(|start| start.faults).collect());
        let rss = Spread::of(starts.iter().map(|start| start.max_rss_kib).collect());
        let wall = Spread::of(starts.iter().map(|start| start.wall_micros).collect());
        let said = starts.iter().filter(|start| start.said_something).count();
        println!(
            "{name:>14} {:>18} {:>22} {:>18} {:>8}",
            faults.text(),
            rss.text(),
            wall.text(),
            format!("{said}/{RUNS}")
        );
        medians.push((faults.median, rss.median, wall.median));
    }
    let (prof, off) = (medians[2], medians[4]);
    println!(
        "switch off against jemalloc prof: {:+} page faults, {:+} KiB max RSS, {:+} us wall (issue 66's bar: 50 faults, 1024 KiB, 500 us)",
        off.0 as i64 - prof.0 as i64,
        off.1 as i64 - prof.1 as i64,
        off.2 as i64 - prof.2 as i64
    );
}

/// Starts `program` once (`baseline start`) with only jemalloc's configuration in its environment, and
/// reaps it with its resource usage.
fn start(program: &std::path::Path, malloc_conf: Option<&str>) -> Start {
    let mut command = Command::new(program);
    command.arg("start").env_clear().stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    if let Some(conf) = malloc_conf {
        command.env("MALLOC_CONF", conf);
    }
    let spawned = std::time::Instant::now();
    // Reaped below by `wait4`, which std's `wait` cannot do: it gives no resource usage.
    #[allow(clippy::zombie_processes)]
    let mut child = command.spawn().expect("the baseline starts");
    let mut said = Vec::new();
    child.stderr.take().unwrap().read_to_end(&mut said).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value, filled by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child is ours and not reaped yet (std reaps only in `wait`, never called here).
    let reaped = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall = spawned.elapsed();
    assert_eq!(reaped, child.id() as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{}: status {status}", program.display());
    Start {
        faults: (usage.ru_minflt + usage.ru_majflt) as u64,
        max_rss_kib: usage.ru_maxrss as u64,
        wall_micros: wall.as_micros() as u64,
        said_something: !said.is_empty(),
    }
}
