//! The example service built for other targets than the machine's own: a static musl binary (as services
//! ship in scratch containers), built for the tests that run it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The musl target.
pub const MUSL: &str = "x86_64-unknown-linux-musl";

/// Builds the example service for [`MUSL`] once per test process (debug, in `target/musl`, where `.ci/run`
/// builds the runtime's unit tests for musl too, so jemalloc is compiled once) and returns its path; `None`,
/// with the reason said ([`crate::tools::skipped`]), without `musl-gcc` or the Rust target.
///
/// ```no_run
/// if let Some(service) = memprof_tests::platforms::musl_service() {
///     assert!(service.is_file());
/// }
/// ```
pub fn musl_service() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let compiler = crate::tools::find("musl-gcc", "musl-tools")?;
            let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
            let sysroot = Command::new(rustc).args(["--print", "sysroot"]).output().ok()?;
            let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
            if !sysroot.join("lib/rustlib").join(MUSL).is_dir() {
                crate::tools::skipped(&format!("the Rust target {MUSL} is not installed (rustup target add {MUSL})"));
                return None;
            }
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
            let target = workspace.join("target").join("musl");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let output = Command::new(cargo)
                .current_dir(workspace)
                .args(["build", "--locked", "-p", "memprof", "--example", "service", "--target", MUSL, "--target-dir"])
                .arg(&target)
                .env(format!("CC_{}", MUSL.replace('-', "_")), compiler)
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "building the example for {MUSL}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            Some(target.join(MUSL).join("debug").join("examples").join("service"))
        })
        .as_deref()
}
