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
//! over 20 s from `/proc/<pid>/task/<tid>/stat`. Figures are printed, never asserted.

use std::time::{Duration, Instant};

use memprof_tests::process::{Launch, Program, built_binary};

const ANSWERS: usize = 15;

fn main() {
    println!(
        "{:>9} {:>12} {:>18} {:>11} {:>13} {:>14}",
        "mappings", "answer ms", "(lowest-highest)", "reading ms", "peak +RSS KiB", "sampler % core"
    );
    for count in [100, 1_000, 10_000] {
        measure(count);
    }
}

fn measure(count: usize) {
    let program = Launch::new(built_binary("explained"))
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_ADDR", "127.0.0.1:0")
        .args(["mappings".to_owned(), count.to_string()])
        .spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let mut answers = Vec::new();
    let mut readings = Vec::new();
    let mut peaks = Vec::new();
    for _ in 0..ANSWERS {
        let before = status_kilobytes(&program, "VmRSS");
        std::fs::write(format!("/proc/{}/clear_refs", program.pid()), "5").expect("reset the peak RSS");
        let began = Instant::now();
        let explanation = program.get_json("/memory-profiler/explain");
        answers.push(began.elapsed());
        peaks.push(status_kilobytes(&program, "VmHWM").saturating_sub(before));
        let took = explanation["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["name"] == "reading took (ms)")
            .and_then(|item| item["value"].as_f64())
            .unwrap();
        readings.push(Duration::from_secs_f64(took / 1000.0));
    }
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
    let ticks = || {
        let stat = std::fs::read_to_string(stats_thread.join("stat")).unwrap();
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

fn status_kilobytes(program: &Program, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", program.pid())).unwrap();
    let line = status.lines().find(|line| line.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn millis(time: Duration) -> f64 {
    time.as_secs_f64() * 1000.0
}
