//! Instructions counted by valgrind's callgrind (Debian's `valgrind`), for the benchmarks that count them:
//! deterministic where wall-clock on shared cores cannot show a per cent.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

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
    /// memprof's threads (see [`MEMPROF_THREAD`]): its HTTP threads among them.
    pub memprof: u64,
}

/// The frame every memprof thread runs under (never inlined): a thread whose profile names it is memprof's.
const MEMPROF_THREAD: &str = "memprof_runtime::process::threads::memprofs_own_thread";

/// As [`instructions`], each thread counted apart (`--separate-threads=yes`) and summed by whose it is.
pub fn instructions_by_thread(run: &Command, options: &[&str], input: &str) -> (ByThread, Output) {
    let options: Vec<&str> = options.iter().copied().chain(["--separate-threads=yes"]).collect();
    let (profiles, output) = profiles(run, &options, input);
    (by_thread(&profiles), output)
}

/// A program started under callgrind, each thread counted apart, and not yet ended: a server, driven from
/// outside (the benchmark sends its load, then a signal ends it).
pub struct Running {
    child: Child,
    scratch: PathBuf,
}

impl Running {
    /// Starts `run` under callgrind with `options`, each thread counted apart; its input is empty.
    pub fn start(run: &Command, options: &[&str]) -> Running {
        let options: Vec<&str> = options.iter().copied().chain(["--separate-threads=yes"]).collect();
        let (mut child, scratch) = spawn(run, &options);
        drop(child.stdin.take());
        Running { child, scratch }
    }

    /// The process's id (valgrind runs the program in its own process): for a signal.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the program to end: its instructions by whose threads counted them, and its output.
    pub fn counted(self) -> (ByThread, Output) {
        let (profiles, output) = ended(self.child, &self.scratch);
        (by_thread(&profiles), output)
    }
}

/// Threads' profiles summed by whose they are. With threads apart, the file named as asked holds no count:
/// each thread's has one.
fn by_thread(profiles: &[String]) -> ByThread {
    let mut counted = ByThread::default();
    for (profile, total) in profiles.iter().filter_map(|profile| Some((profile, total(profile)?))) {
        let whose = if profile.contains(MEMPROF_THREAD) { &mut counted.memprof } else { &mut counted.program };
        *whose += total;
    }
    counted
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
    let (mut child, scratch) = spawn(run, options);
    // Dropped after the write: the run reads to the end of its input.
    child.stdin.take().expect("piped").write_all(input.as_bytes()).expect("the run reads its input");
    ended(child, &scratch)
}

/// Starts `run` under callgrind, its profiles written in a scratch directory of its own (returned), its
/// output piped.
fn spawn(run: &Command, options: &[&str]) -> (Child, PathBuf) {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let scratch = std::env::temp_dir().join(format!(
        "memprof-callgrind-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
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
    // Standard output and error to files: a program that writes much while nobody reads never blocks.
    let (stdout, stderr) = (scratch.join("stdout"), scratch.join("stderr"));
    let file_for = |path: &PathBuf| Stdio::from(std::fs::File::create(path).expect("a scratch file"));
    valgrind.stdin(Stdio::piped()).stdout(file_for(&stdout)).stderr(file_for(&stderr));
    (valgrind.spawn().expect("valgrind runs (Debian's valgrind)"), scratch)
}

/// Waits for a run started by [`spawn`] to end: its profiles and its output; the scratch directory removed.
fn ended(mut child: Child, scratch: &Path) -> (Vec<String>, Output) {
    drop(child.stdin.take());
    let status = child.wait().expect("valgrind ends");
    let read = |name: &str| std::fs::read(scratch.join(name)).unwrap_or_default();
    let output = Output { status, stdout: read("stdout"), stderr: read("stderr") };
    let profiles: Vec<String> = std::fs::read_dir(scratch)
        .expect("the scratch directory")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?;
            name.starts_with("profile").then(|| std::fs::read_to_string(&path).ok())?
        })
        .collect();
    let _ = std::fs::remove_dir_all(scratch);
    let counted = profiles.iter().any(|profile| total(profile).is_some());
    assert!(counted, "callgrind wrote no count: {}", String::from_utf8_lossy(&output.stderr));
    (profiles, output)
}
