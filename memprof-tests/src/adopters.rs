//! The programs of `examples/axum-service` (a workspace of its own), built for the tests that drive them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Builds `examples/axum-service` once per test process, in a target directory of its own (cargo holds
/// a lock on the one running this test), and returns the directory of its binaries.
///
/// ```no_run
/// let service = memprof_tests::adopters::adopters().join("axum-service");
/// assert!(service.is_file());
/// ```
pub fn adopters() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let target = workspace.join("target").join("adopters");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let manifest = workspace.join("examples").join("axum-service").join("Cargo.toml");
        let output = Command::new(cargo)
            .args(["build", "--bins", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "building {}: {}",
            manifest.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        target.join("debug")
    })
}
