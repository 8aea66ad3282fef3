//! A bounded load test, loopback only: 200 requests a second on a mix of endpoints for 60 seconds, runs
//! started and stopped among them, while the service allocates flat out. Only the expected statuses come
//! back, nothing leaks (threads, file descriptors, profiles on disk), and the service's own work goes on.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use memprof_tests::process::{PATIENCE, Program};

const CLIENTS: u32 = 4;
const REQUESTS_PER_SECOND_EACH: u32 = 50;
const LENGTH: Duration = Duration::from_secs(60);

/// Each endpoint of the mix, with the statuses it may answer under load.
const MIX: &[(&str, &[u16])] = &[
    ("/memory-profiler/state", &[200]),
    // Printing statistics is an expensive job, bounded with renders: 503 while two others run.
    ("/memory-profiler/statistics", &[200, 503]),
    ("/metrics", &[200]),
    ("/memory-profiler/heap_profile", &[200]),
    ("/memory-profiler/start?duration=1secs", &[200]),
    ("/memory-profiler/download/raw", &[200, 404, 409]),
    ("/memory-profiler/download/text", &[200, 404, 409, 503]),
    ("/memory-profiler/download/flamegraph", &[200, 404, 409, 503]),
    ("/memory-profiler/stop", &[200]),
];

fn count_entries(path: &str) -> usize {
    std::fs::read_dir(path).map_or(0, |entries| entries.count())
}

fn handled(service: &Program) -> usize {
    service.output().iter().filter(|line| line.ends_with(" requests handled")).count()
}

#[test]
fn two_hundred_requests_a_second_for_a_minute_leave_nothing_behind() {
    let service = Program::service().spawn();
    let pid = service.pid();
    let address: SocketAddr = service.address();
    service.get_json("/memory-profiler/state");
    let (threads_before, fds_before) =
        (count_entries(&format!("/proc/{pid}/task")), count_entries(&format!("/proc/{pid}/fd")));
    let handled_before = handled(&service);

    let unexpected: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());
    let answered = Mutex::new(0usize);
    thread::scope(|scope| {
        for client in 0..CLIENTS {
            let (unexpected, answered) = (&unexpected, &answered);
            scope.spawn(move || {
                let started = Instant::now();
                let period = Duration::from_secs(1) / REQUESTS_PER_SECOND_EACH;
                let mut sent = 0u32;
                while started.elapsed() < LENGTH {
                    let (target, allowed) = MIX[(sent as usize + client as usize) % MIX.len()];
                    let response = memprof_tests::http::request(address, "GET", target);
                    if !allowed.contains(&response.status) {
                        *unexpected
                            .lock()
                            .unwrap()
                            .entry(format!("{target} -> {}: {}", response.status, response.text()))
                            .or_default() += 1;
                    }
                    *answered.lock().unwrap() += 1;
                    sent += 1;
                    if let Some(wait) = (period * sent).checked_sub(started.elapsed()) {
                        thread::sleep(wait);
                    }
                }
            });
        }
    });
    let unexpected = unexpected.into_inner().unwrap();
    assert!(unexpected.is_empty(), "unexpected answers: {unexpected:#?}");
    let answered = answered.into_inner().unwrap();
    println!("{answered} requests answered in {LENGTH:?}");
    assert!(answered > 1000, "{answered}");

    // The service's own work went on meanwhile.
    assert!(handled(&service) > handled_before, "the service's loop made no progress");
    // No run left behind, at most the kept profiles on disk: four runs, and the automatic dumps kept
    // (sampling continuously, the default, they are on).
    service.get("/memory-profiler/stop");
    let state = service.state();
    let kept = 4 + state.automatic_dumps.dumps.len();
    assert!(memprof_tests::acceptance::profiles_in(&state.tmp_dir).len() <= kept, "{}", state.tmp_dir);
    // Descriptors return to where they were (a kept-alive connection's is closed when its client leaves, or
    // after ten idle seconds), but for the profile directory's owner file, which the process keeps open
    // (locked) for its life once the directory exists. Threads stay within the server's pool (36) and the
    // runs' timer: memprof's threads never end (a thread's end makes jemalloc return the program's freed
    // pages), so a load leaves at most those.
    memprof_tests::waiting::wait_until("threads and descriptors to come back", PATIENCE, || {
        let (threads, fds) = (count_entries(&format!("/proc/{pid}/task")), count_entries(&format!("/proc/{pid}/fd")));
        let back = threads <= threads_before + 36 + 1 && fds <= fds_before + 2;
        if back {
            Ok(())
        } else {
            Err(format!("threads {threads_before} -> {threads}, descriptors {fds_before} -> {fds}"))
        }
    });
}

/// More clients than the server has places, all kept alive, while runs are started and stopped: requests
/// may be refused (503, or a connection closed before its request was read), but a request that was read
/// is answered, so every run that was started was told to the client that started it.
#[test]
fn under_overload_every_started_run_got_its_answer() {
    const HOGS: usize = 48;
    const LENGTH: Duration = Duration::from_secs(15);
    let service = Program::service().spawn();
    let address = service.address();
    let starts_answered = std::sync::atomic::AtomicUsize::new(0);
    let (cut, refused) = (std::sync::atomic::AtomicUsize::new(0), std::sync::atomic::AtomicUsize::new(0));
    thread::scope(|scope| {
        for hog in 0..HOGS {
            scope.spawn(move || {
                let mut client = memprof_tests::http::KeptAlive::new(address);
                let started = Instant::now();
                while started.elapsed() < LENGTH {
                    let target = if hog % 2 == 0 { "/memory-profiler/state" } else { "/metrics" };
                    if let Some(response) = client.get(target) {
                        assert!(matches!(response.status, 200 | 503), "{target}: {}", response.status);
                    }
                }
            });
        }
        let started = Instant::now();
        while started.elapsed() < LENGTH {
            for target in ["/memory-profiler/start?duration=1hrs", "/memory-profiler/stop"] {
                match memprof_tests::http::try_get(address, target) {
                    Some(response) if response.status == 200 => {
                        if response.text().contains("Successfully started new heap profiling run") {
                            starts_answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                    Some(response) => {
                        assert_eq!(response.status, 503, "{target}: {}", response.text());
                        refused.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    None => {
                        cut.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            }
        }
    });
    let metrics = service.get("/metrics").text();
    let runs_started: usize = metrics
        .lines()
        .find_map(|line| line.strip_prefix("memprof_runs_started_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    let answered = starts_answered.into_inner();
    println!(
        "{answered} runs started and answered; {} start or stop requests refused with 503, {} closed unread",
        refused.into_inner(),
        cut.into_inner()
    );
    assert!(answered > 0, "no start got through the overload");
    assert_eq!(runs_started, answered, "every run started was answered 200 to the client that started it");
}
