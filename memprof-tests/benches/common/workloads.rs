//! The workloads the overhead benchmark measures, shared with the baseline programs built without memprof
//! (`benches/baseline`), so that every configuration runs the very same code.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// How long each workload runs in one measurement: `MEMPROF_BENCH_SECONDS` (a fraction allowed), else 1.5 s.
/// Longer measurements narrow the spread of the ratios.
pub fn workload_time() -> Duration {
    std::env::var("MEMPROF_BENCH_SECONDS")
        .ok()
        .and_then(|text| text.parse::<f64>().ok())
        .filter(|seconds| *seconds > 0.0 && *seconds < 3600.0)
        .map_or(Duration::from_millis(1500), Duration::from_secs_f64)
}
/// One operation in this many is timed on its own, for the latency percentiles (timing them all would
/// cost more than the operations).
const TIMED_EVERY: u64 = 16;

/// What one measurement gives.
#[derive(Clone)]
pub struct Figures {
    /// Operations per second, all threads together.
    pub rate: f64,
    /// Median and 99th percentile of an operation's latency, in nanoseconds.
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Peak resident set of the process, in KiB (`VmHWM`).
    pub peak_rss_kib: u64,
    /// Operations run, all threads together.
    pub operations: u64,
}

impl Figures {
    /// One line for the parent to read: rate, p50, p99, peak RSS, operations.
    pub fn line(&self) -> String {
        format!("{} {} {} {} {}", self.rate, self.p50_ns, self.p99_ns, self.peak_rss_kib, self.operations)
    }
}

/// How each operation is run: as it is ([`Plain`]), or inside something a configuration measures the cost
/// of (labels set around each, in the overhead benchmark).
pub trait Around: Sync {
    /// Runs the `number`-th operation of a thread.
    fn run<F: FnMut()>(&self, number: u64, operation: &mut F);
}

/// Each operation as it is.
pub struct Plain;

impl Around for Plain {
    #[inline(always)]
    fn run<F: FnMut()>(&self, _: u64, operation: &mut F) {
        operation();
    }
}

/// Runs `workload` ("mixed-sizes" or "json-handler") on `threads` threads for [`workload_time`].
pub fn measure(workload: &str, threads: usize) -> Figures {
    measure_for(workload, threads, workload_time(), &Plain)
}

/// Runs `workload` on `threads` threads for `time`, each operation through `around`.
pub fn measure_for(workload: &str, threads: usize, time: Duration, around: &impl Around) -> Figures {
    let started = Instant::now();
    let results: Vec<(u64, Vec<u64>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|seed| {
                scope.spawn(move || match workload {
                    "mixed-sizes" => repeat(mixed_sizes_operation(seed as u64), time, around),
                    _ => repeat(json_handler_operation(seed as u64), time, around),
                })
            })
            .collect();
        workers.into_iter().map(|worker| worker.join().unwrap()).collect()
    });
    let operations = results.iter().map(|(operations, _)| *operations).sum::<u64>();
    let rate = operations as f64 / started.elapsed().as_secs_f64();
    let mut latencies: Vec<u64> = results.into_iter().flat_map(|(_, latencies)| latencies).collect();
    latencies.sort_unstable();
    let percentile =
        |share: f64| latencies.get(((latencies.len() as f64 - 1.0) * share) as usize).copied().unwrap_or(0);
    Figures { rate, p50_ns: percentile(0.50), p99_ns: percentile(0.99), peak_rss_kib: peak_rss_kib(), operations }
}

/// Runs `operation` until `time` is up; returns how many ran and the latencies of the timed ones.
fn repeat(mut operation: impl FnMut(), time: Duration, around: &impl Around) -> (u64, Vec<u64>) {
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(1 << 20);
    let mut operations = 0u64;
    while started.elapsed() < time {
        for _ in 0..64 {
            if operations.is_multiple_of(TIMED_EVERY) {
                let begun = Instant::now();
                around.run(operations, &mut operation);
                latencies.push(begun.elapsed().as_nanos() as u64);
            } else {
                around.run(operations, &mut operation);
            }
            operations += 1;
        }
    }
    (operations, latencies)
}

/// Allocations of 16 B to 64 KiB, a window of 256 alive, freed in another order than allocated.
fn mixed_sizes_operation(seed: u64) -> impl FnMut() {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut live: Vec<Vec<u8>> = (0..256).map(|_| Vec::new()).collect();
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = 16usize << (state % 13);
        live[(state >> 16) as usize % 256] = black_box(Vec::with_capacity(size));
    }
}

/// A request handler: a map of fields built, serialised to JSON, parsed back.
fn json_handler_operation(seed: u64) -> impl FnMut() {
    let mut request_number = seed << 32;
    move || {
        request_number += 1;
        let request: BTreeMap<String, serde_json::Value> = (0..16)
            .map(|field| {
                (
                    format!("field-{field}"),
                    serde_json::json!({ "id": request_number, "tags": ["a", "b", field.to_string()] }),
                )
            })
            .collect();
        let body = serde_json::to_string(&request).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        black_box(parsed);
    }
}

/// `VmHWM` of this process, in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}
