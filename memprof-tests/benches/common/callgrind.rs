//! Instructions counted by valgrind's callgrind (Debian's `valgrind`), for the benchmarks that count them:
//! deterministic where wall-clock on shared cores cannot show a per cent.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `run` (its program, arguments and environment) under callgrind with `options` (such as
/// `--toggle-collect=FUNCTION`, to count only inside a function), `input` on its standard input: the
/// instructions counted, and the run's output. Panics where valgrind cannot run or writes no profile.
pub fn instructions(run: &Command, options: &[&str], input: &str) -> (u64, Output) {
    let file = std::env::temp_dir().join(format!("memprof-callgrind-{}", std::process::id()));
    let mut valgrind = Command::new("valgrind");
    valgrind.args(["--tool=callgrind", "--quiet"]).arg(format!("--callgrind-out-file={}", file.display()));
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
    let profile = std::fs::read_to_string(&file).unwrap_or_else(|_| {
        panic!("callgrind wrote no profile: {}", String::from_utf8_lossy(&output.stderr));
    });
    let _ = std::fs::remove_file(&file);
    let total = profile
        .lines()
        .find_map(|line| line.strip_prefix("summary: ").or_else(|| line.strip_prefix("totals: ")))
        .and_then(|count| count.split_whitespace().next()?.parse().ok())
        .expect("callgrind's total");
    (total, output)
}
