//! What memprof adds to a program's start (issue: `rg --version` took 12 ms with memprof, 1.5 ms without):
//! the benchmarks' baseline program doing nothing (`baseline start`), built with memprof compiled out
//! (`default-features = false`) and compiled in (`#[memprof::main]`, jemalloc armed): the switch off, and
//! the endpoints on with sampling on demand and continuous; each started `RUNS` times by `hyperfine -N`
//! after a warm-up (a start is the whole run: the line printed and the exit).
//!
//! ```text
//! cargo bench -p memprof-tests --bench startup
//! MEMPROF_BENCH_CALLGRIND=1 cargo bench -p memprof-tests --bench startup
//! ```
//!
//! Under callgrind (`MEMPROF_BENCH_CALLGRIND=1`) it counts instructions instead, each thread apart: the
//! program's (its main thread, which runs memprof's start) in a start that ends at once, and memprof's own
//! threads in one that waits two seconds (`baseline start 2`), so the work they begin at start-up (the
//! allocator's code read from the symbol table, the profile root's sweep, the first readings) is done and
//! counted whole, with two seconds of idle work.
//!
//! Figures only, nothing is asserted.

#[path = "common/baseline.rs"]
mod baseline;
#[allow(dead_code)]
#[path = "common/callgrind.rs"]
mod callgrind;
#[path = "common/spread.rs"]
mod spread;

use std::process::Command;

use spread::Spread;

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

/// How many times each start is counted under callgrind.
const COUNTED_RUNS: usize = 3;

fn main() {
    if std::env::var_os("MEMPROF_BENCH_CALLGRIND").is_some() {
        return counted();
    }
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
            .arg(format!("{} start", program.display()));
        let status = with_environment(&mut command, environment).output().expect("hyperfine runs");
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

/// The variable that switches the baseline program's endpoints on (`#[memprof::main(env = ..)]`).
const SWITCH: &str = "MEMPROF_BENCH_NO_ENDPOINTS";

/// `command` with the environment memprof reads for a start: `environment`, and nothing else of memprof's.
/// With a sampling mode named, the endpoints are on (an ephemeral port), as a service's are.
fn with_environment(command: &mut Command, environment: Environment) -> &mut Command {
    for name in [SWITCH, "LIBPROCESS_MEMORY_PROFILING", "MEMPROF_SCOPES", "MEMPROF_WHOLE_RUN", "MEMPROF_SAMPLING"] {
        command.env_remove(name);
    }
    if !environment.is_empty() {
        command.env(SWITCH, "true").env("MEMPROF_HTTP", "127.0.0.1:0");
    }
    command.envs(environment.iter().copied())
}

/// The starts under callgrind: the program's instructions in a start that ends at once, memprof's threads'
/// in one that waits two seconds; each the median of [`COUNTED_RUNS`], with its range.
fn counted() {
    println!(
        "instructions under callgrind, median of {COUNTED_RUNS} (range): the program's threads in a start, memprof's threads in a start that waits 2 s"
    );
    println!("{:>14} {:>26} {:>26}", "start", "program's threads", "memprof's threads");
    let mut medians = Vec::new();
    for (name, features, environment) in STARTS {
        let program = baseline::build(features);
        let count = |arguments: &[&str]| -> Vec<callgrind::ByThread> {
            (0..COUNTED_RUNS)
                .map(|_| {
                    let mut command = Command::new(&program);
                    command.args(arguments);
                    let (counted, output) =
                        callgrind::instructions_by_thread(with_environment(&mut command, environment), &[], "");
                    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
                    counted
                })
                .collect()
        };
        let program_threads = Spread::of(count(&["start"]).iter().map(|counted| counted.program).collect());
        let memprof_threads = Spread::of(count(&["start", "2"]).iter().map(|counted| counted.memprof).collect());
        println!("{name:>14} {:>26} {:>26}", program_threads.text(), memprof_threads.text());
        medians.push((program_threads.median, memprof_threads.median));
    }
    let (on_demand, continuous) = (medians[2], medians[3]);
    println!(
        "continuous sampling adds {} instructions to the program's threads and {} to memprof's (2 s idle included)",
        continuous.0 as i64 - on_demand.0 as i64,
        continuous.1 as i64 - on_demand.1 as i64
    );
}
