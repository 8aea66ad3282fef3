//! What continuous sampling costs a tokio server under load: `programs/tokio-server` built with memprof
//! (its `memprof` feature: `#[memprof::main]` below `#[tokio::main]`, two worker threads), its own four
//! clients setting keys over TCP as fast as the server answers, each key a line parsed, a `Bytes` value and
//! a map entry. Configurations: armed and inactive (on demand, no run) and sampled continuously at
//! `lg_prof_sample` 21, 20 and 19.
//!
//! ```text
//! cargo bench -p memprof-tests --bench tokio_server
//! MEMPROF_BENCH_CALLGRIND=1 cargo bench -p memprof-tests --bench tokio_server
//! ```
//!
//! Five rounds (`MEMPROF_BENCH_ROUNDS`) each run every configuration once, in turn; each ratio is taken
//! within a round, and the median and spread of the rounds' ratios are printed. With
//! `MEMPROF_BENCH_CALLGRIND=1` it prints instead instructions per key under callgrind: two runs of 2,000
//! and 6,000 keys a client, differenced, so start-up cancels out; the server's threads (its runtime's
//! workers and clients, and its main thread) apart from memprof's (whose work by the second runs some 50
//! times more often per key under valgrind's slowdown). The first run builds the server with
//! jemalloc (~2.5 min); later runs are quick. Figures only, nothing is asserted.
//!
//! `MEMPROF_BENCH_FRAME_POINTERS=no` builds the server as Rust builds by default, without frame pointers
//! (this workspace keeps them): its samples are then walked by the unwind tables.

use std::path::{Path, PathBuf};
use std::process::Command;

// Only the per-thread counts are used here.
#[allow(dead_code)]
#[path = "common/callgrind.rs"]
mod callgrind;

/// A configuration: its name, `MEMPROF_SAMPLING` and `MALLOC_CONF`.
const CONFIGURATIONS: [(&str, &str, &str); 4] = [
    ("inactive", "on-demand", ""),
    ("cont 21", "continuous", "lg_prof_sample:21"),
    ("cont 20", "continuous", "lg_prof_sample:20"),
    ("cont 19", "continuous", "lg_prof_sample:19"),
];

/// Keys a client sets in a timed run.
const KEYS: u64 = 50_000;

fn main() {
    let server = build();
    if std::env::var_os("MEMPROF_BENCH_CALLGRIND").is_some() {
        println!("\nInstructions per key under callgrind (ratio to inactive): the server's threads, memprof's, all");
        let counts: Vec<[f64; 3]> = CONFIGURATIONS
            .iter()
            .map(|configuration| {
                let (short, long) = (counted(&server, configuration, 2_000), counted(&server, configuration, 6_000));
                let per_key =
                    |of: fn(&callgrind::ByThread) -> u64| (of(&long) as f64 - of(&short) as f64) / (4.0 * 4_000.0);
                [
                    per_key(|count| count.program),
                    per_key(|count| count.memprof),
                    per_key(|count| count.program + count.memprof),
                ]
            })
            .collect();
        for (index, (name, ..)) in CONFIGURATIONS.iter().enumerate() {
            let [program, memprof, all] = counts[index];
            println!(
                "{name:<10} {program:>10.0} ({:.3}) {memprof:>8.0} {all:>10.0} ({:.3})",
                program / counts[0][0],
                all / counts[0][2]
            );
        }
        return;
    }
    let rounds = std::env::var("MEMPROF_BENCH_ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(5usize);
    let measured: Vec<Vec<f64>> = (0..rounds)
        .map(|_| CONFIGURATIONS.iter().map(|configuration| keys_per_second(&server, configuration)).collect())
        .collect();
    println!("\nKeys set per second, 4 clients, 2 worker threads: median of {rounds} rounds; ratio to inactive");
    for (index, (name, ..)) in CONFIGURATIONS.iter().enumerate() {
        let mut rates: Vec<f64> = measured.iter().map(|round| round[index]).collect();
        let mut ratios: Vec<f64> = measured.iter().map(|round| round[index] / round[0]).collect();
        rates.sort_by(f64::total_cmp);
        ratios.sort_by(f64::total_cmp);
        println!(
            "{name:<10} {:>10.0}  {:.3} ({:.2}-{:.2})",
            rates[rounds / 2],
            ratios[rounds / 2],
            ratios[0],
            ratios[rounds - 1]
        );
    }
}

/// Builds the server with memprof, in release, into `target/bench-tokio-server`.
fn build() -> PathBuf {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"));
    let without_frame_pointers = std::env::var("MEMPROF_BENCH_FRAME_POINTERS").is_ok_and(|value| value == "no");
    let name = if without_frame_pointers { "bench-tokio-server-no-frame-pointers" } else { "bench-tokio-server" };
    let target = tests.parent().unwrap().join("target").join(name);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--release", "--quiet", "--locked", "--features", "memprof", "--target-dir"])
        .arg(&target)
        .current_dir(tests.join("programs").join("tokio-server"));
    if without_frame_pointers {
        // RUSTFLAGS replaces the workspace's rustflags (.cargo/config.toml's frame pointers).
        build.env("RUSTFLAGS", "-C force-frame-pointers=no");
    }
    let status = build.status().expect("cargo runs");
    assert!(status.success(), "the tokio server does not build");
    target.join("release").join("tokio-server")
}

/// The server under `configuration`, its clients setting `keys` keys each.
fn command(server: &Path, (_, sampling, malloc_conf): &(&str, &str, &str), keys: u64) -> Command {
    let mut command = Command::new(server);
    command
        .env("MEMPROF_SAMPLING", sampling)
        .env("MALLOC_CONF", malloc_conf)
        .env("TOKIO_SERVER_KEYS", keys.to_string());
    command
}

/// One timed run: keys set per second.
fn keys_per_second(server: &Path, configuration: &(&str, &str, &str)) -> f64 {
    let output = command(server, configuration, KEYS).output().expect("the server runs");
    let said = String::from_utf8_lossy(&output.stdout);
    let milliseconds: f64 = said
        .lines()
        .find_map(|line| {
            line.strip_prefix("tokio-server: ")?.split(" keys in ").nth(1)?.strip_suffix(" ms")?.parse().ok()
        })
        .unwrap_or_else(|| panic!("{} said: {said}{}", configuration.0, String::from_utf8_lossy(&output.stderr)));
    (4 * KEYS) as f64 / (milliseconds / 1000.0)
}

/// The instructions callgrind counts in a whole run with `keys` keys a client, the server's threads apart
/// from memprof's.
fn counted(server: &Path, configuration: &(&str, &str, &str), keys: u64) -> callgrind::ByThread {
    let (counted, output) = callgrind::instructions_by_thread(&command(server, configuration, keys), &[], "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    counted
}
