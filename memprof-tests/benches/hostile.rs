//! What hostile load costs the host in memory: resident size idle, at its peak and after, while 32 clients
//! ask for the worst symbol lookup at once (65,536 addresses spread over the program's code), and while 64
//! clients ask at once for 32 different renders of a kept profile, each twice (none cached before).
//!
//! ```text
//! cargo bench -p memprof-tests --bench hostile
//! ```
//!
//! The host is this benchmark in child mode, with the endpoints on; its peak is the kernel's `VmHWM`, reset
//! before each phase (`/proc/PID/clear_refs`). Each client retries a 503 until answered, so all the work
//! asked for is done. Figures only, nothing is asserted.

use std::time::{Duration, Instant};

use memprof_tests::process::{Launch, Program};

const LOOKUP_CLIENTS: usize = 32;
const ADDRESSES: usize = 1 << 16;
const RENDER_CLIENTS: usize = 64;
const REPEATS: usize = 3;

#[memprof::main(env = "LIBPROCESS_MEMORY_PROFILING")]
fn main() {
    if std::env::var_os("MEMPROF_BENCH_HOST").is_some() {
        // A heap worth profiling, renewed piece by piece so a run samples it, until killed.
        let mut kept: Vec<Vec<u8>> = (0..2000).map(|index| vec![index as u8; 4096 + index]).collect();
        println!("host ready with {} buffers", kept.len());
        for turn in 0usize.. {
            kept[turn % 2000] = vec![turn as u8; 4096 + turn % 2000];
            if turn % 100 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    println!("{:<34} {:>9} {:>9} {:>9} {:>8} {:>9}", "phase", "idle MB", "peak MB", "after MB", "503s", "seconds");
    for _ in 0..REPEATS {
        let host = host();
        phase(&host, "32 x 65,536-address lookups", || lookups(&host));
        let id = kept_profile(&host);
        phase(&host, "64 requests, 32 cold renders", || renders(&host, id));
    }
}

/// Runs `work` against the host and prints the host's resident size before, at its peak and after.
fn phase(host: &Program, name: &str, work: impl FnOnce() -> usize) {
    let pid = host.pid();
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak resident size");
    let idle = status_megabytes(pid, "VmRSS:");
    let started = Instant::now();
    let refused = work();
    let seconds = started.elapsed().as_secs_f64();
    let peak = status_megabytes(pid, "VmHWM:");
    // What stays once the work is done: jemalloc gave back what the jobs freed (no decay wait).
    std::thread::sleep(Duration::from_millis(200));
    let after = status_megabytes(pid, "VmRSS:");
    println!("{name:<34} {idle:>9.1} {peak:>9.1} {after:>9.1} {refused:>8} {seconds:>9.1}");
}

fn status_megabytes(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|line| line.strip_prefix(field)).unwrap();
    let kilobytes: f64 = line.trim().trim_end_matches("kB").trim().parse().unwrap();
    kilobytes / 1024.0
}

/// The host program, serving the endpoints.
fn host() -> Program {
    let host = Launch::new(std::env::current_exe().unwrap())
        .env("MEMPROF_BENCH_HOST", "1")
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_ADDR", "127.0.0.1:0")
        .spawn();
    host.wait_for_line(|line| line.starts_with("host ready"));
    host
}

/// Every client posts the whole lookup, retrying 503s; how many 503s there were.
fn lookups(host: &Program) -> usize {
    let body = memprof_tests::sockets::spread_addresses(host.pid(), ADDRESSES);
    let address = host.address();
    until_answered(LOOKUP_CLIENTS, |_| {
        memprof_tests::http::request_with_body(address, "POST", "/debug/pprof/symbol", &body).status
    })
}

/// A finished run's id.
fn kept_profile(host: &Program) -> u64 {
    let id = host.get_json("/memory-profiler/start?duration=10secs")["id"].as_u64().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(host.get("/memory-profiler/stop").status, 200);
    id
}

/// 64 requests for 32 different renders: every format and option, and differences from the run itself;
/// how many 503s there were.
fn renders(host: &Program, id: u64) -> usize {
    let formats = ["text", "graph", "flamegraph", "collapsed"];
    let options = ["", "&lines=true", "&full=true", "&lines=true&full=true"];
    let mut targets: Vec<String> = Vec::new();
    for format in formats {
        for option in options {
            for base in ["", &format!("&base={id}")] {
                targets.push(format!("/memory-profiler/download/{format}?id={id}{option}{base}"));
            }
        }
    }
    let address = host.address();
    // So many clients at once that some find no place: a connection closed before its answer counts as a 503.
    until_answered(RENDER_CLIENTS, |client| {
        memprof_tests::http::try_get(address, &targets[client % targets.len()]).map_or(503, |response| response.status)
    })
}

/// Runs `clients` clients at once, each asking (`ask(client)`) until it gets something else than 503;
/// how many 503s they got in all.
fn until_answered(clients: usize, ask: impl Fn(usize) -> u16 + Sync) -> usize {
    let refused = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for client in 0..clients {
            let (ask, refused) = (&ask, &refused);
            scope.spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(600);
                loop {
                    match ask(client) {
                        503 => {
                            refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        200 => return,
                        status => panic!("client {client}: status {status}"),
                    }
                    assert!(Instant::now() < deadline, "client {client} never got through");
                }
            });
        }
    });
    refused.into_inner()
}
