//! The endpoints under load: latency (p50, p99) of `state`, `statistics` and `metrics` while 200 requests a
//! second hit them and the host program allocates flat out on all cores (the JSON handler workload), and
//! what the host loses in throughput meanwhile.
//!
//! ```text
//! cargo bench -p memprof-tests --bench endpoints
//! ```
//!
//! The host is this benchmark in child mode, with the endpoints on; it runs twice, without and with the
//! load (medians of three each). Figures only, nothing is asserted.

// Only the long measurement of the module is used here.
#[allow(dead_code)]
#[path = "common/workloads.rs"]
mod workloads;

use std::time::{Duration, Instant};

use memprof_tests::process::{Launch, Program};

/// How long the host works in each measurement.
const HOST_SECONDS: u64 = 10;
/// Requests per second, all endpoints together.
const RATE: u64 = 200;
const CLIENTS: u64 = 4;
const ENDPOINTS: [&str; 3] = ["/memory-profiler/state", "/memory-profiler/statistics", "/metrics"];
const REPEATS: usize = 3;

#[memprof::main(env = "LIBPROCESS_MEMORY_PROFILING")]
fn main() {
    if std::env::var_os("MEMPROF_BENCH_HOST").is_some() {
        let threads = std::thread::available_parallelism().map_or(2, |count| count.get());
        let figures =
            workloads::measure_for("json-handler", threads, Duration::from_secs(HOST_SECONDS), &workloads::Plain);
        println!("rate {}", figures.rate);
        return;
    }
    let mut quiet = Vec::new();
    let mut loaded = Vec::new();
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); ENDPOINTS.len()];
    for _ in 0..REPEATS {
        quiet.push(host_rate(host()));
        let service = host();
        for (endpoint, measured) in load(&service).into_iter().enumerate() {
            latencies[endpoint].extend(measured);
        }
        loaded.push(host_rate(service));
    }
    println!("{:<30} {:>10} {:>10} {:>10}", "endpoint", "requests", "p50 ms", "p99 ms");
    for (endpoint, mut measured) in ENDPOINTS.iter().zip(latencies) {
        measured.sort();
        let percentile = |share: f64| measured[((measured.len() - 1) as f64 * share) as usize].as_secs_f64() * 1e3;
        println!("{endpoint:<30} {:>10} {:>10.2} {:>10.2}", measured.len(), percentile(0.5), percentile(0.99));
    }
    let (quiet, loaded) = (median(quiet), median(loaded));
    println!(
        "host throughput: {:.0} operations/s alone, {:.0} under {RATE} requests/s (ratio {:.3})",
        quiet,
        loaded,
        loaded / quiet
    );
}

/// The host program, serving the endpoints.
fn host() -> Program {
    Launch::new(std::env::current_exe().unwrap())
        .env("MEMPROF_BENCH_HOST", "1")
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .spawn()
}

/// Waits for the host to finish and reads its throughput.
fn host_rate(mut host: Program) -> f64 {
    assert!(host.wait(), "the host failed: {:?}", host.output());
    let output = host.output();
    let line = output.iter().find_map(|line| line.strip_prefix("rate ")).expect("the host prints its rate");
    line.parse().unwrap()
}

/// Sends [`RATE`] requests a second, round robin over the endpoints, while the host works; each
/// endpoint's latencies.
fn load(host: &Program) -> Vec<Vec<Duration>> {
    let started = Instant::now();
    let interval = Duration::from_micros(1_000_000 * CLIENTS / RATE);
    let per_client = HOST_SECONDS * RATE / CLIENTS - RATE / CLIENTS;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let address = host.address();
            std::thread::spawn(move || {
                let mut measured = vec![Vec::new(); ENDPOINTS.len()];
                for request in 0..per_client {
                    let due = started + interval * request as u32 + interval / CLIENTS as u32 * client as u32;
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    let endpoint = ((request + client) % ENDPOINTS.len() as u64) as usize;
                    let sent = Instant::now();
                    let response = memprof_tests::http::request(address, "GET", ENDPOINTS[endpoint]);
                    assert_eq!(response.status, 200, "{}", ENDPOINTS[endpoint]);
                    measured[endpoint].push(sent.elapsed());
                }
                measured
            })
        })
        .collect();
    let mut all = vec![Vec::new(); ENDPOINTS.len()];
    for client in clients {
        for (endpoint, measured) in client.join().unwrap().into_iter().enumerate() {
            all[endpoint].extend(measured);
        }
    }
    all
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
