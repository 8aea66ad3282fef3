//! The benchmarks' baseline program (`benches/baseline`), built with the features that choose its allocator
//! and whether memprof is in it, into `target/bench-baseline`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the baseline program with `features` and returns its path (a copy per feature set).
pub fn build(features: &str) -> PathBuf {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = tests.parent().unwrap().join("target").join("bench-baseline");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.args(["build", "--release", "--quiet", "--manifest-path"]).arg(tests.join("benches/baseline/Cargo.toml"));
    command.arg("--target-dir").arg(&target);
    if !features.is_empty() {
        command.args(["--features", features]);
    }
    let status = command.status().expect("cargo runs");
    assert!(status.success(), "the baseline with features '{features}' does not build");
    let copy = target.join(format!("baseline-{}", if features.is_empty() { "system" } else { features }));
    std::fs::copy(target.join("release").join("baseline"), &copy).unwrap();
    copy
}
