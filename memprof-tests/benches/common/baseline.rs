//! The benchmarks' baseline program (`benches/baseline`), built with the features that choose its allocator
//! and whether memprof is in it, into `target/bench-baseline`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the baseline program with `features` and returns its path (a copy per feature set).
pub fn build(features: &str) -> PathBuf {
    build_linked(features, None)
}

/// [`build`], with `link_arg` given to the linker too (`-C link-arg`, after the workspace's own flags), into
/// a target directory of its own.
#[allow(dead_code)]
pub fn build_linked(features: &str, link_arg: Option<&str>) -> PathBuf {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = tests.parent().unwrap().join("target").join(if link_arg.is_some() {
        "bench-baseline-linked"
    } else {
        "bench-baseline"
    });
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.args(["build", "--release", "--quiet", "--manifest-path"]).arg(tests.join("benches/baseline/Cargo.toml"));
    command.arg("--target-dir").arg(&target);
    if let Some(link_arg) = link_arg {
        // Arrays given with `--config` are joined to the configuration files' (the frame pointers).
        command.args(["--config", &format!("build.rustflags = [\"-C\", \"link-arg={link_arg}\"]")]);
    }
    if !features.is_empty() {
        command.args(["--features", features]);
    }
    let status = command.status().expect("cargo runs");
    assert!(status.success(), "the baseline with features '{features}' does not build");
    let copy = target.join(format!("baseline-{}", if features.is_empty() { "system" } else { features }));
    std::fs::copy(target.join("release").join("baseline"), &copy).unwrap();
    copy
}
