//! What explaining memory costs the host: one `explain` answer and one history reading on a process with
//! 100, 1,000 and 10,000 more mappings (src/bin/explained.rs `mappings N`), and the share of a core the
//! history's reader (the `memprof-stats` thread) takes.
//!
//! ```text
//! cargo bench -p memprof-tests --bench explain
//! ```
//!
//! For each size: the answer's wall time (median, lowest and highest of 15), the reading's own time as the
//! answer reports it (evidence "reading took (ms)", median), the peak extra RSS while answering (peak RSS
//! reset through `/proc/<pid>/clear_refs` before each request), and the `memprof-stats` thread's CPU time
//! over 20 s from `/proc/<pid>/task/<tid>/stat`, the dashboard's chart watching (it reads the resident set
//! by class only while watched).
//!
//! Then what jemalloc's background threads change (the measurement behind keeping them off by default):
//! the `retention` state (256 MiB written in 64 KiB blocks, then freed) with `background_thread` off and on,
//! RSS when the state is reached and 15 s later, the process's CPU share over those 15 s and its threads.
//!
//! Then what jemalloc's arenas cost with memprof (4 a CPU: 256 on a 64-core host): the example service with
//! `narenas:8`, `256` and `1024`, three fresh processes each, its RSS once the endpoints answer, the CPU of
//! memprof's threads over 20 s idle, and whether `explain`'s record of jemalloc's ranges is complete.
//!
//! Last, what sampling continuously costs an idle program (src/bin/explained.rs `idle`, the endpoints on):
//! memprof's threads' CPU over 60 s, with nobody watching and with the dashboard's chart watching.
//! `MEMPROF_BENCH_ONLY=idle` runs this table alone. Figures are printed, never asserted.

use std::time::{Duration, Instant};

use memprof_tests::process::Program;

const ANSWERS: usize = 15;

fn main() {
    if std::env::var("MEMPROF_BENCH_ONLY").is_ok_and(|only| only == "idle") {
        return idle_continuous_table();
    }
    println!(
        "{:>9} {:>12} {:>18} {:>11} {:>13} {:>14}",
        "mappings", "answer ms", "(lowest-highest)", "reading ms", "peak +RSS KiB", "sampler % core"
    );
    for count in [100, 1_000, 10_000] {
        measure(count);
    }
    println!();
    println!(
        "{:>18} {:>14} {:>14} {:>16} {:>8}",
        "background_thread", "RSS ready MiB", "RSS +15 s MiB", "process % core", "threads"
    );
    for on in [false, true] {
        background_threads(on);
    }
    println!();
    println!("{:>8} {:>14} {:>20} {:>16}", "narenas", "RSS at start", "memprof's threads", "record complete");
    for narenas in [8, 256, 1024] {
        for _ in 0..3 {
            arenas(narenas);
        }
    }
    println!();
    idle_continuous_table();
}

/// memprof's threads' CPU in an idle program sampling continuously, three processes each way.
fn idle_continuous_table() {
    println!("{:>22} {:>20}", "continuous, idle", "memprof's threads");
    for watched in [false, true] {
        for _ in 0..3 {
            idle_continuous(watched);
        }
    }
}

/// memprof's threads' CPU over 60 s in an idle program sampling continuously, the dashboard's chart
/// `watched` or not.
fn idle_continuous(watched: bool) {
    let program = Program::explained(&["idle"]).env("MEMPROF_SAMPLING", "continuous").spawn();
    program.wait_for_line(|line| line == "explained: ready");
    if watched {
        program.get_json("/memory-profiler/memory");
    }
    let share = memprofs_share(&program, Duration::from_secs(60));
    let who = if watched { "dashboard watching" } else { "nobody watching" };
    println!("{who:>22} {:>13.3} % core", share * 100.0);
}

/// The CPU time of every memprof thread of `program` over `window`, as a share of one core.
fn memprofs_share(program: &Program, window: Duration) -> f64 {
    let tasks: Vec<std::path::PathBuf> = std::fs::read_dir(format!("/proc/{}/task", program.pid()))
        .unwrap()
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|task| std::fs::read_to_string(task.join("comm")).is_ok_and(|name| name.starts_with("memprof")))
        .collect();
    std::thread::scope(|scope| {
        let measured: Vec<_> = tasks.iter().map(|task| scope.spawn(|| cpu_share(task, window))).collect();
        measured.into_iter().map(|share| share.join().unwrap()).sum::<f64>()
    })
}

/// The example service with `narenas` arenas: RSS at start, memprof's threads' CPU idle, explain's record.
fn arenas(narenas: u32) {
    let program = Program::service().env("MALLOC_CONF", format!("narenas:{narenas}")).spawn();
    let rss = status_number(&program, "VmRSS");
    let shares = memprofs_share(&program, Duration::from_secs(20));
    let explanation = program.get_json("/memory-profiler/explain");
    let complete = explanation["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["name"] == "record complete")
        .and_then(|item| item["value"].as_f64())
        .unwrap();
    println!(
        "{narenas:>8} {:>11.1} MB {:>13.3} % core {:>16}",
        rss as f64 * 1.024 / 1000.0,
        shares * 100.0,
        complete == 1.0
    );
}

/// The retention state with jemalloc's background threads `on` or not.
fn background_threads(on: bool) {
    let program = Program::explained(&["retention"]).env("MALLOC_CONF", format!("background_thread:{on}")).spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let ready = status_number(&program, "VmRSS");
    let process = std::path::PathBuf::from(format!("/proc/{}", program.pid()));
    let share = cpu_share(&process, Duration::from_secs(15));
    println!(
        "{:>18} {:>14.1} {:>14.1} {:>16.3} {:>8}",
        on,
        ready as f64 / 1024.0,
        status_number(&program, "VmRSS") as f64 / 1024.0,
        share * 100.0,
        status_number(&program, "Threads")
    );
}

fn measure(count: usize) {
    let program = Program::explained(&["mappings", &count.to_string()]).spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let mut answers = Vec::new();
    let mut readings = Vec::new();
    let mut peaks = Vec::new();
    for _ in 0..ANSWERS {
        let before = status_number(&program, "VmRSS");
        std::fs::write(format!("/proc/{}/clear_refs", program.pid()), "5").expect("reset the peak RSS");
        let began = Instant::now();
        let explanation = program.get_json("/memory-profiler/explain");
        answers.push(began.elapsed());
        peaks.push(status_number(&program, "VmHWM").saturating_sub(before));
        let took = explanation["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["name"] == "reading took (ms)")
            .and_then(|item| item["value"].as_f64())
            .unwrap();
        readings.push(Duration::from_secs_f64(took / 1000.0));
    }
    // The dashboard's chart watching: the resident set by class is read with the counters.
    program.get_json("/memory-profiler/memory");
    let share = sampler_share(&program, Duration::from_secs(20));
    answers.sort();
    readings.sort();
    peaks.sort();
    println!(
        "{count:>9} {:>12.2} {:>18} {:>11.2} {:>13} {:>14.3}",
        millis(answers[ANSWERS / 2]),
        format!("({:.2}-{:.2})", millis(answers[0]), millis(answers[ANSWERS - 1])),
        millis(readings[ANSWERS / 2]),
        peaks[ANSWERS / 2],
        share * 100.0
    );
}

/// The `memprof-stats` thread's CPU time over `window`, as a share of one core.
fn sampler_share(program: &Program, window: Duration) -> f64 {
    let tasks = format!("/proc/{}/task", program.pid());
    let stats_thread = std::fs::read_dir(&tasks)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|task| std::fs::read_to_string(task.join("comm")).is_ok_and(|name| name.trim() == "memprof-stats"))
        .expect("the memprof-stats thread");
    cpu_share(&stats_thread, window)
}

/// The CPU time of the process or thread at `task` (a `/proc` directory) over `window`, as a share of a core.
fn cpu_share(task: &std::path::Path, window: Duration) -> f64 {
    let ticks = || {
        let stat = std::fs::read_to_string(task.join("stat")).unwrap();
        // stat(5) after the command's closing parenthesis, numbers only (the state letter is skipped): from
        // ppid (field 4) on, so utime (14) and stime (15) are the 11th and 12th.
        let fields: Vec<u64> =
            stat.rsplit_once(')').unwrap().1.split_whitespace().filter_map(|field| field.parse().ok()).collect();
        fields[10] + fields[11]
    };
    let (before, began) = (ticks(), Instant::now());
    std::thread::sleep(window);
    let ticks_per_second = 100.0; // USER_HZ on Linux
    (ticks() - before) as f64 / ticks_per_second / began.elapsed().as_secs_f64()
}

/// A number of `/proc/<pid>/status` (kB for sizes).
fn status_number(program: &Program, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", program.pid())).unwrap();
    let line = status.lines().find(|line| line.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn millis(time: Duration) -> f64 {
    time.as_secs_f64() * 1000.0
}
