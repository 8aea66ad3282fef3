//! What hostile load costs the host: its resident size idle, at its peak, just after and once settled, while
//! 32 clients ask for the worst symbol lookup at once (65,536 addresses spread over the program's code),
//! while 32 clients ask for it and never read their answers, and while 64 clients ask at once for 32
//! different renders of a kept profile, each twice (none cached before); then how fast floods of 32 and 96
//! clients cycling start, stop and state are answered, and whether an operator's single `state` gets through.
//!
//! ```text
//! cargo bench -p memprof-tests --bench hostile
//! ```
//!
//! The host is this benchmark in child mode, with the endpoints on; its peak is the kernel's `VmHWM`, reset
//! before each phase (`/proc/PID/clear_refs`); "settled" is 11 s after the phase (idle pool threads end after
//! 10 s). Each client of the memory phases but the unread one retries a 503 until answered, so all the work
//! asked for is done. Figures only, nothing is asserted.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use memprof_tests::http::try_get;
use memprof_tests::process::{Launch, Program};

const LOOKUP_CLIENTS: usize = 32;
/// How long the unread lookups are held open: past the server's 10-second write deadline.
const HELD: Duration = Duration::from_secs(15);
/// How long each flood lasts.
const FLOOD: Duration = Duration::from_secs(5);
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
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>10} {:>8} {:>9}",
        "phase", "idle MB", "peak MB", "after MB", "settled MB", "503s", "seconds"
    );
    for _ in 0..REPEATS {
        let host = host();
        let first_idle = status_megabytes(host.pid(), "VmRSS:");
        phase(&host, "32 x 65,536-address lookups", || lookups(&host));
        phase(&host, "32 of them never read", || unread_lookups(&host));
        let id = kept_profile(&host);
        phase(&host, "64 requests, 32 cold renders", || renders(&host, id));
        let last = status_megabytes(host.pid(), "VmRSS:");
        println!("{:<34} {first_idle:>9.1} {:>9} {:>9} {last:>10.1}", "(the host: first idle, last settled)", "", "");
    }
    println!();
    println!(
        "{:<8} {:>12} {:>14} {:>8} {:>10} {:>14}",
        "clients", "answered/s", "state probes", "503s", "thrown out", "not answered"
    );
    for _ in 0..REPEATS {
        for clients in [32, 96] {
            flood(&host(), clients);
        }
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
    std::thread::sleep(Duration::from_secs(11));
    let settled = status_megabytes(pid, "VmRSS:");
    println!("{name:<34} {idle:>9.1} {peak:>9.1} {after:>9.1} {settled:>10.1} {refused:>8} {seconds:>9.1}");
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
        .env("MEMPROF_HTTP", "127.0.0.1:0")
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

/// Every client posts the whole lookup and never reads the answer, holding its connection for [`HELD`];
/// how many there were (each is answered, 503 or not, into a socket nobody reads).
fn unread_lookups(host: &Program) -> usize {
    let body = memprof_tests::sockets::spread_addresses(host.pid(), ADDRESSES);
    let head =
        format!("POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n", body.len());
    let held: Vec<std::net::TcpStream> = (0..LOOKUP_CLIENTS)
        .filter_map(|_| {
            let mut stream = std::net::TcpStream::connect(host.address()).ok()?;
            stream.write_all(head.as_bytes()).ok()?;
            stream.write_all(&body).ok()?;
            Some(stream)
        })
        .collect();
    std::thread::sleep(HELD);
    held.len()
}

/// `clients` clients cycle start, stop and state on fresh connections for [`FLOOD`], while an operator
/// asks for `state` once a tenth of a second; prints what was answered.
fn flood(host: &Program, clients: usize) {
    let address = host.address();
    let (flooding, answered, refused, thrown_out, unanswered) =
        (AtomicBool::new(true), AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    let probes: Vec<bool> = std::thread::scope(|scope| {
        for _ in 0..clients {
            scope.spawn(|| {
                while flooding.load(Ordering::Relaxed) {
                    for target in
                        ["/memory-profiler/start?duration=1hrs", "/memory-profiler/stop", "/memory-profiler/state"]
                    {
                        let counter = match try_get(address, target) {
                            Some(response) if response.text().contains("closed to make room") => &thrown_out,
                            Some(response) if response.status == 503 => &refused,
                            Some(_) => &answered,
                            None => &unanswered,
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        let deadline = Instant::now() + FLOOD;
        let mut probes = Vec::new();
        while Instant::now() < deadline {
            probes.push(try_get(address, "/memory-profiler/state").is_some_and(|response| response.status == 200));
            std::thread::sleep(Duration::from_millis(100));
        }
        flooding.store(false, Ordering::Relaxed);
        probes
    });
    let through = probes.iter().filter(|answered| **answered).count();
    println!(
        "{clients:<8} {:>12.0} {:>14} {:>8} {:>10} {:>14}",
        answered.into_inner() as f64 / FLOOD.as_secs_f64(),
        format!("{through} of {}", probes.len()),
        refused.into_inner(),
        thrown_out.into_inner(),
        unanswered.into_inner()
    );
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
