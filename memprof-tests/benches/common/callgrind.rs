//! Instructions counted by valgrind's callgrind (Debian's `valgrind`), for the benchmarks that count them:
//! deterministic where wall-clock on shared cores cannot show a per cent.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `run` (its program, arguments and environment) under callgrind with `options` (such as
/// `--toggle-collect=FUNCTION`, to count only inside a function), `input` on its standard input: the
/// instructions counted, and the run's output. Panics where valgrind cannot run or writes no profile.
pub fn instructions(run: &Command, options: &[&str], input: &str) -> (u64, Output) {
    let (profiles, output) = profiles(run, options, input);
    (profiles.iter().filter_map(|profile| total(profile)).sum(), output)
}

/// Instructions counted apart: the program's own threads, and memprof's.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByThread {
    /// The program's threads (its main thread, its runtime's, its own).
    pub program: u64,
    /// memprof's threads (see [`MEMPROF_THREADS`]).
    pub memprof: u64,
}

/// Functions only memprof's threads run (their loops are inlined into the thread's start, so each is
/// known by what it calls): a thread whose profile names one is memprof's. The HTTP threads are not known
/// here (the benchmarks that count by thread serve no endpoints).
const MEMPROF_THREADS: [&str; 4] = [
    // The arenas' watcher.
    "memprof_runtime::jemalloc::extents::watch_new_arenas",
    // The counters' thread (statistics, history, automatic dumps).
    "memprof_runtime::profiler::autodump::check",
    "memprof_runtime::process::signals::",
    "memprof_runtime::profiler::timer::",
];

/// As [`instructions`], each thread counted apart (`--separate-threads=yes`) and summed by whose it is.
pub fn instructions_by_thread(run: &Command, options: &[&str], input: &str) -> (ByThread, Output) {
    let options: Vec<&str> = options.iter().copied().chain(["--separate-threads=yes"]).collect();
    let (profiles, output) = profiles(run, &options, input);
    let mut counted = ByThread::default();
    // With threads apart, the file named as asked holds no count: each thread's has one.
    for (profile, total) in profiles.iter().filter_map(|profile| Some((profile, total(profile)?))) {
        let whose = if MEMPROF_THREADS.iter().any(|name| profile.contains(name)) {
            &mut counted.memprof
        } else {
            &mut counted.program
        };
        *whose += total;
    }
    (counted, output)
}

/// The instructions a callgrind profile counts, where it says.
fn total(profile: &str) -> Option<u64> {
    profile
        .lines()
        .find_map(|line| line.strip_prefix("summary: ").or_else(|| line.strip_prefix("totals: ")))
        .and_then(|count| count.split_whitespace().next()?.parse().ok())
}

/// Runs `run` under callgrind: its profiles (one, or one a thread), and its output.
fn profiles(run: &Command, options: &[&str], input: &str) -> (Vec<String>, Output) {
    let scratch = std::env::temp_dir().join(format!("memprof-callgrind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let file = scratch.join("profile");
    let mut valgrind = Command::new("valgrind");
    // Fair scheduling: valgrind runs one thread at a time, and without it a busy thread starves the others,
    // memprof's pacer among them (continuous sampling's budget would never be judged within a run).
    valgrind
        .args(["--tool=callgrind", "--quiet", "--fair-sched=yes"])
        .arg(format!("--callgrind-out-file={}", file.display()));
    valgrind.args(options).arg(run.get_program()).args(run.get_args());
    for (name, value) in run.get_envs() {
        match value {
            Some(value) => valgrind.env(name, value),
            None => valgrind.env_remove(name),
        };
    }
    valgrind.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = valgrind.spawn().expect("valgrind runs (Debian's valgrind)");
    // Dropped after the write: the run reads to the end of its input.
    child.stdin.take().expect("piped").write_all(input.as_bytes()).expect("the run reads its input");
    let output = child.wait_with_output().expect("valgrind ends");
    let profiles: Vec<String> = std::fs::read_dir(&scratch)
        .expect("the scratch directory")
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
        .collect();
    let _ = std::fs::remove_dir_all(&scratch);
    let counted = profiles.iter().any(|profile| total(profile).is_some());
    assert!(counted, "callgrind wrote no count: {}", String::from_utf8_lossy(&output.stderr));
    (profiles, output)
}
