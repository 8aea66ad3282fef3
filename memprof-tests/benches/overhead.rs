//! What heap profiling costs the host program: allocation throughput with memprof compiled in and sampling
//! off, then on at `lg_prof_sample` 17, 19 and 21, on one thread and on all cores, for two workloads.
//!
//! ```text
//! cargo bench -p memprof-tests --bench overhead
//! ```
//!
//! Each configuration runs in a child process of this benchmark (the sampling rate is fixed at start-up, by
//! `MALLOC_CONF`), five times; the table shows medians and their ratio to "sampling off". Figures only:
//! the machine is noisy, nothing is asserted. Not covered yet (issue 5): the system allocator, plain
//! tikv-jemallocator and memprof compiled out, which need builds of their own.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

const REPEATS: usize = 5;
const WORKLOAD_TIME: Duration = Duration::from_millis(1500);

#[memprof::main(env = "MEMPROF_BENCH_NO_ENDPOINTS")]
fn main() {
    if let Ok(configuration) = std::env::var("MEMPROF_BENCH_CHILD") {
        return child(&configuration);
    }
    let threads = std::thread::available_parallelism().map_or(2, |count| count.get());
    println!(
        "{:<14} {:>7} {:>16} {:>16} {:>16} {:>16}",
        "workload", "threads", "sampling off", "lg 21", "lg 19", "lg 17"
    );
    for workload in ["mixed-sizes", "json-handler"] {
        for thread_count in [1, threads] {
            let mut figures = BTreeMap::new();
            for (name, malloc_conf, active) in [
                ("off", "", false),
                ("21", "lg_prof_sample:21", true),
                ("19", "lg_prof_sample:19", true),
                ("17", "lg_prof_sample:17", true),
            ] {
                let mut runs: Vec<f64> =
                    (0..REPEATS).map(|_| measure(workload, thread_count, malloc_conf, active)).collect();
                runs.sort_by(f64::total_cmp);
                figures.insert(name, runs[REPEATS / 2]);
            }
            let off = figures["off"];
            let cell = |name: &str| format!("{:.2}M/s ({:.2})", figures[name] / 1e6, figures[name] / off);
            println!(
                "{workload:<14} {thread_count:>7} {:>16} {:>16} {:>16} {:>16}",
                format!("{:.2}M/s", off / 1e6),
                cell("21"),
                cell("19"),
                cell("17")
            );
        }
    }
}

/// Operations per second of one child process.
fn measure(workload: &str, threads: usize, malloc_conf: &str, active: bool) -> f64 {
    let output = Command::new(std::env::current_exe().unwrap())
        .env("MEMPROF_BENCH_CHILD", format!("{workload},{threads},{active}"))
        .env("MALLOC_CONF", malloc_conf)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .last()
        .and_then(|line| line.parse().ok())
        .unwrap_or_else(|| panic!("child failed: {text} {}", String::from_utf8_lossy(&output.stderr)))
}

/// In the child: run the workload on `threads` threads, sampling on or off, and print operations/second.
fn child(configuration: &str) {
    let mut fields = configuration.split(',');
    let (workload, threads, active) =
        (fields.next().unwrap(), fields.next().unwrap().parse::<usize>().unwrap(), fields.next() == Some("true"));
    let run = active.then(|| memprof::Run::start("overhead").expect("profiling is enabled"));
    let started = Instant::now();
    let operations: u64 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|seed| {
                scope.spawn(move || match workload {
                    "mixed-sizes" => mixed_sizes(seed as u64),
                    _ => json_handler(seed as u64),
                })
            })
            .collect();
        workers.into_iter().map(|worker| worker.join().unwrap()).sum()
    });
    let rate = operations as f64 / started.elapsed().as_secs_f64();
    drop(run);
    println!("{rate}");
}

/// Allocations of 16 B to 64 KiB, a window of them alive, freed in another order than allocated.
fn mixed_sizes(seed: u64) -> u64 {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut live: Vec<Vec<u8>> = (0..256).map(|_| Vec::new()).collect();
    let started = Instant::now();
    let mut operations = 0;
    while started.elapsed() < WORKLOAD_TIME {
        for _ in 0..1024 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let size = 16usize << (state % 13);
            live[(state >> 16) as usize % 256] = Vec::with_capacity(size);
            operations += 1;
        }
    }
    black_box(live);
    operations
}

/// A request handler: a map of fields built, serialised to JSON, parsed back.
fn json_handler(seed: u64) -> u64 {
    let started = Instant::now();
    let mut operations = 0;
    while started.elapsed() < WORKLOAD_TIME {
        let request: BTreeMap<String, serde_json::Value> = (0..16)
            .map(|field| {
                (
                    format!("field-{field}"),
                    serde_json::json!({ "id": seed + operations, "tags": ["a", "b", field.to_string()] }),
                )
            })
            .collect();
        let body = serde_json::to_string(&request).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        black_box(parsed);
        operations += 1;
    }
    operations
}
