//! What memprof adds to a program's start (issue: `rg --version` took 12 ms with memprof, 1.5 ms without):
//! the benchmarks' baseline program doing nothing (`baseline start`), built with memprof compiled out
//! (`default-features = false`) and compiled in (`#[memprof::main]`, jemalloc armed): the switch off, and
//! the endpoints on with sampling on demand and continuous; each started `RUNS` times by `hyperfine -N`
//! after a warm-up (a start is the whole run: the line printed and the exit).
//!
//! ```text
//! cargo bench -p memprof-tests --bench startup
//! ```
//!
//! Figures only, nothing is asserted.

#[path = "common/baseline.rs"]
mod baseline;

use std::process::Command;

/// How many starts hyperfine times for each build.
const RUNS: &str = "300";

/// Variables memprof reads, with their values.
type Environment = &'static [(&'static str, &'static str)];

/// The starts timed: a name, the build's features and the environment memprof reads.
const STARTS: [(&str, &str, Environment); 4] = [
    ("compiled out", "memprof-compiled-out", &[]),
    ("switch off", "memprof-compiled-in", &[]),
    ("on demand", "memprof-compiled-in", &[("MEMPROF_SAMPLING", "on-demand")]),
    ("continuous", "memprof-compiled-in", &[("MEMPROF_SAMPLING", "continuous")]),
];

fn main() {
    let Some(hyperfine) = memprof_tests::tools::find("hyperfine", "hyperfine") else {
        return;
    };
    println!("{:>14} {:>10} {:>10} {:>10} {:>10}", "start", "mean ms", "median ms", "min ms", "max ms");
    let mut medians = Vec::new();
    for (name, features, environment) in STARTS {
        let program = baseline::build(features);
        let scratch = memprof_tests::tools::Scratch::new("startup");
        let json = scratch.join("hyperfine.json");
        let mut command = Command::new(&hyperfine);
        command
            .args(["-N", "--warmup", "20", "--runs", RUNS, "--export-json"])
            .arg(&json)
            .arg(format!("{} start", program.display()))
            .env_remove("LIBPROCESS_MEMORY_PROFILING")
            .env_remove("MEMPROF_SCOPES")
            .env_remove("MEMPROF_WHOLE_RUN")
            .env_remove("MEMPROF_SAMPLING");
        // With a sampling mode named, the endpoints are on (an ephemeral port), as a service's are.
        if !environment.is_empty() {
            command.env("LIBPROCESS_MEMORY_PROFILING", "true").env("MEMPROF_ADDR", "127.0.0.1:0");
        }
        let status = command.envs(environment.iter().copied()).output().expect("hyperfine runs");
        assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let result = &report["results"][0];
        let milliseconds = |field: &str| result[field].as_f64().unwrap() * 1000.0;
        println!(
            "{name:>14} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            milliseconds("mean"),
            milliseconds("median"),
            milliseconds("min"),
            milliseconds("max")
        );
        medians.push(milliseconds("median"));
    }
    println!("memprof, switch off, adds {:.2} ms to the median start", medians[1] - medians[0]);
    println!("continuous sampling adds {:.2} ms to the median start on demand", medians[3] - medians[2]);
}
