//! What memprof adds to a program's start (issue: `rg --version` took 12 ms with memprof, 1.5 ms without):
//! the benchmarks' baseline program doing nothing (`baseline start`), built with memprof compiled out
//! (`default-features = false`) and compiled in (`#[memprof::main]`, jemalloc armed, nothing asked at run
//! time), each started `RUNS` times by `hyperfine -N` after a warm-up.
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

fn main() {
    let Some(hyperfine) = memprof_tests::tools::find("hyperfine", "hyperfine") else {
        return;
    };
    println!("{:>22} {:>10} {:>10} {:>10} {:>10}", "build", "mean ms", "median ms", "min ms", "max ms");
    let mut means = Vec::new();
    for features in ["memprof-compiled-out", "memprof-compiled-in"] {
        let program = baseline::build(features);
        let scratch = memprof_tests::tools::Scratch::new("startup");
        let json = scratch.join("hyperfine.json");
        let status = Command::new(&hyperfine)
            .args(["-N", "--warmup", "20", "--runs", RUNS, "--export-json"])
            .arg(&json)
            .arg(format!("{} start", program.display()))
            .env_remove("LIBPROCESS_MEMORY_PROFILING")
            .env_remove("MEMPROF_SCOPES")
            .env_remove("MEMPROF_WHOLE_RUN")
            .output()
            .expect("hyperfine runs");
        assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let result = &report["results"][0];
        let milliseconds = |field: &str| result[field].as_f64().unwrap() * 1000.0;
        println!(
            "{features:>22} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            milliseconds("mean"),
            milliseconds("median"),
            milliseconds("min"),
            milliseconds("max")
        );
        means.push(milliseconds("median"));
    }
    println!("memprof adds {:.2} ms to the median start", means[1] - means[0]);
}
