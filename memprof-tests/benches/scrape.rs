//! What a continuous profiler's scrapes cost the host: the JSON handler workload on all cores for 20 s,
//! sampled continuously at the default rate, with `/debug/pprof/allocs` scraped every 10 s (Parca's
//! interval), every 1 s (a stress), and not at all. For each: the host's throughput and the p99 latency of
//! its operations (one in 16 timed: the latency of the program's allocations while a scrape dumps the
//! record), against no scrapes; the CPU memprof's threads took, in % of a core; and the scrapes' own time.
//!
//! ```text
//! cargo bench -p memprof-tests --bench scrape
//! ```
//!
//! The host is this benchmark in child mode; each configuration runs three times, in turn, medians shown.
//! Figures only, nothing is asserted.

// Only the long measurement of the module is used here.
#[allow(dead_code)]
#[path = "common/workloads.rs"]
mod workloads;

use std::time::{Duration, Instant};

use memprof_tests::process::{Launch, Program};

/// How long the host works in each measurement.
const HOST_SECONDS: u64 = 20;
const REPEATS: usize = 3;
/// Scrape intervals measured: none, Parca's 10 s, and 1 s.
const INTERVALS: [Option<u64>; 3] = [None, Some(10), Some(1)];

#[memprof::main(env = "LIBPROCESS_MEMORY_PROFILING", sampling = "continuous")]
fn main() {
    if std::env::var_os("MEMPROF_BENCH_HOST").is_some() {
        let threads = std::thread::available_parallelism().map_or(2, |count| count.get());
        let figures =
            workloads::measure_for("json-handler", threads, Duration::from_secs(HOST_SECONDS), &workloads::Plain);
        println!("figures {} {} {}", figures.rate, figures.p50_ns, figures.p99_ns);
        return;
    }
    // (rate, p99 ns, memprof's CPU %, scrape ms) of each repeat, per interval.
    let mut measured: Vec<Vec<(f64, f64, f64, f64)>> = vec![Vec::new(); INTERVALS.len()];
    for _ in 0..REPEATS {
        for (index, interval) in INTERVALS.iter().enumerate() {
            measured[index].push(measure(*interval));
        }
    }
    let median = |index: usize, field: fn(&(f64, f64, f64, f64)) -> f64| {
        let mut values: Vec<f64> = measured[index].iter().map(field).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!(
        "{:<16} {:>14} {:>8} {:>10} {:>8} {:>16} {:>12}",
        "scraped", "operations/s", "ratio", "p99 ns", "ratio", "memprof % core", "scrape ms"
    );
    for (index, interval) in INTERVALS.iter().enumerate() {
        let label = interval.map_or("never".to_owned(), |seconds| format!("every {seconds} s"));
        let (rate, p99) = (median(index, |figures| figures.0), median(index, |figures| figures.1));
        println!(
            "{label:<16} {rate:>14.0} {:>8.3} {p99:>10.0} {:>8.3} {:>16.2} {:>12.1}",
            rate / median(0, |figures| figures.0),
            p99 / median(0, |figures| figures.1),
            median(index, |figures| figures.2),
            median(index, |figures| figures.3)
        );
    }
}

/// One host run, scraped every `interval` seconds (never with `None`): its rate and p99, memprof's
/// threads' CPU in % of a core, and the scrapes' median time in ms.
fn measure(interval: Option<u64>) -> (f64, f64, f64, f64) {
    let mut host = Launch::new(std::env::current_exe().unwrap())
        .env("MEMPROF_BENCH_HOST", "1")
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .spawn();
    let cpu_before = memprof_cpu_ticks(&host);
    let started = Instant::now();
    let mut scrapes = Vec::new();
    if let Some(seconds) = interval {
        let mut due = started + Duration::from_secs(seconds);
        while due < started + Duration::from_secs(HOST_SECONDS - 1) {
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let sent = Instant::now();
            let response = memprof_tests::http::request(host.address(), "GET", "/debug/pprof/allocs");
            assert_eq!(response.status, 200, "{}", response.text());
            scrapes.push(sent.elapsed().as_secs_f64() * 1e3);
            due += Duration::from_secs(seconds);
        }
    }
    let cpu_after = memprof_cpu_ticks(&host);
    let elapsed = started.elapsed().as_secs_f64();
    assert!(host.wait(), "the host failed: {:?}", host.output());
    let output = host.output();
    let line = output.iter().find_map(|line| line.strip_prefix("figures ")).expect("the host prints its figures");
    let fields: Vec<f64> = line.split_whitespace().map(|field| field.parse().unwrap()).collect();
    scrapes.sort_by(f64::total_cmp);
    let scrape = scrapes.get(scrapes.len() / 2).copied().unwrap_or(0.0);
    let ticks_per_second = 100.0;
    (fields[0], fields[2], (cpu_after - cpu_before) as f64 / ticks_per_second / elapsed * 100.0, scrape)
}

/// The CPU time memprof's threads (named `memprof-*`) of `host` have used, in clock ticks.
fn memprof_cpu_ticks(host: &Program) -> u64 {
    let tasks = format!("/proc/{}/task", host.pid());
    std::fs::read_dir(&tasks)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|task| {
                    let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
                    if !name.starts_with("memprof") {
                        return None;
                    }
                    let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
                    // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
                    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
                    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
                })
                .sum()
        })
        .unwrap_or(0)
}
