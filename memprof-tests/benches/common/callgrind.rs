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
    (profiles.iter().filter_map(|(_, profile)| total(profile)).sum(), output)
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
    let whole = by_thread(&profiles).into_iter().next().expect("one part: the run undumped");
    (whole, output)
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

    /// Ends a part of the count here (`callgrind_control --dump`): what the program did since the run
    /// began or the part before is counted apart (see [`Running::parts`]). Returns once callgrind wrote it.
    pub fn dump(&self) {
        let output = Command::new("callgrind_control")
            .arg("--dump")
            .arg(self.child.id().to_string())
            .output()
            .expect("callgrind_control runs (Debian's valgrind)");
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && said.contains("OK"), "callgrind did not dump: {said}");
    }

    /// Waits for the program to end: its instructions by whose threads counted them, and its output.
    pub fn counted(self) -> (ByThread, Output) {
        let (parts, output) = self.parts();
        let whole = parts.iter().fold(ByThread::default(), |whole, part| ByThread {
            program: whole.program + part.program,
            memprof: whole.memprof + part.memprof,
        });
        (whole, output)
    }

    /// Waits for the program to end: its instructions by whose threads counted them in each part, in order
    /// (one a [`Running::dump`], then the last up to the program's end), and its output.
    pub fn parts(self) -> (Vec<ByThread>, Output) {
        let (profiles, output) = ended(self.child, &self.scratch);
        (by_thread(&profiles), output)
    }
}

/// Threads' profiles summed by whose they are, a part a dump. With threads apart, the file named as asked
/// holds no count: each thread's has one a part (`profile.<part>-<thread>`, the last part's
/// `profile-<thread>`). A thread is memprof's when any of its parts names memprof's frame (a part where
/// the frame did not run may not).
fn by_thread(profiles: &[(String, String)]) -> Vec<ByThread> {
    let numbered = |name: &str| -> Option<(usize, String)> {
        let rest = name.strip_prefix("profile")?;
        match rest.strip_prefix('.') {
            Some(dumped) => {
                let (part, thread) = dumped.split_once('-')?;
                Some((part.parse().ok()?, thread.to_owned()))
            }
            None => Some((usize::MAX, rest.strip_prefix('-').unwrap_or(rest).to_owned())),
        }
    };
    let memprofs: std::collections::HashSet<String> = profiles
        .iter()
        .filter(|(_, profile)| profile.contains(MEMPROF_THREAD))
        .filter_map(|(name, _)| Some(numbered(name)?.1))
        .collect();
    let mut parts = std::collections::BTreeMap::<usize, ByThread>::new();
    for (name, profile) in profiles {
        let (Some((part, thread)), Some(total)) = (numbered(name), total(profile)) else { continue };
        let counted = parts.entry(part).or_default();
        let whose = if memprofs.contains(&thread) { &mut counted.memprof } else { &mut counted.program };
        *whose += total;
    }
    parts.into_values().collect()
}

/// The instructions a callgrind profile counts, where it says.
fn total(profile: &str) -> Option<u64> {
    profile
        .lines()
        .find_map(|line| line.strip_prefix("summary: ").or_else(|| line.strip_prefix("totals: ")))
        .and_then(|count| count.split_whitespace().next()?.parse().ok())
}

/// Runs `run` under callgrind: its profiles (one, or one a thread), each with its file's name, and its output.
fn profiles(run: &Command, options: &[&str], input: &str) -> (Vec<(String, String)>, Output) {
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

/// Waits for a run started by [`spawn`] to end: its profiles, each with its file's name, and its output;
/// the scratch directory removed.
fn ended(mut child: Child, scratch: &Path) -> (Vec<(String, String)>, Output) {
    drop(child.stdin.take());
    let status = child.wait().expect("valgrind ends");
    let read = |name: &str| std::fs::read(scratch.join(name)).unwrap_or_default();
    let output = Output { status, stdout: read("stdout"), stderr: read("stderr") };
    let profiles: Vec<(String, String)> = std::fs::read_dir(scratch)
        .expect("the scratch directory")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.to_owned();
            name.starts_with("profile").then(|| Some((name, std::fs::read_to_string(&path).ok()?)))?
        })
        .collect();
    let _ = std::fs::remove_dir_all(scratch);
    let counted = profiles.iter().any(|(_, profile)| total(profile).is_some());
    assert!(counted, "callgrind wrote no count: {}", String::from_utf8_lossy(&output.stderr));
    (profiles, output)
}
