//! The example service built for other targets than the machine's own: a static musl binary (as services
//! ship in scratch containers) and an aarch64 one (Graviton and the like, run here under qemu-user), built
//! for the tests that run them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The musl target.
pub const MUSL: &str = "x86_64-unknown-linux-musl";

/// The aarch64 target.
pub const AARCH64: &str = "aarch64-unknown-linux-gnu";

/// Where Debian's aarch64 cross libraries are: qemu-user's `QEMU_LD_PREFIX` for the aarch64 service.
pub const AARCH64_LIBRARIES: &str = "/usr/aarch64-linux-gnu";

/// Builds the example service for [`MUSL`] once per test process (debug, in `target/musl`, where `.ci/run`
/// builds the runtime's unit tests for musl too with the same compiler, so jemalloc is compiled once) and
/// returns its path; `None`, with the reason said ([`crate::tools::skipped`]), without `musl-gcc` or the
/// Rust target.
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
            let variable = format!("CC_{}", MUSL.replace('-', "_"));
            let compiler = set_or_found(&variable, "musl-gcc", "musl-tools")?;
            if !rust_target_installed(MUSL) {
                return None;
            }
            Some(example_service_for(MUSL, "musl", &[(variable, compiler)]))
        })
        .as_deref()
}

/// What the aarch64 tests need: the example service built for [`AARCH64`] (debug, in `target/aarch64`, where
/// `.ci/run` builds it too), `qemu-aarch64` to run it and binutils' `aarch64-linux-gnu-addr2line` to check
/// its frames; `None`, with the reason said, where one is missing.
///
/// ```no_run
/// if let Some(aarch64) = memprof_tests::platforms::aarch64_service() {
///     assert!(aarch64.service.is_file() && aarch64.qemu.is_file());
/// }
/// ```
pub fn aarch64_service() -> Option<&'static Aarch64> {
    static BUILT: OnceLock<Option<Aarch64>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let compiler =
                set_or_found("CC_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu")?;
            let linker = set_or_found(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
                "aarch64-linux-gnu-gcc",
                "gcc-aarch64-linux-gnu",
            )?;
            let qemu = crate::tools::find("qemu-aarch64", "qemu-user")?;
            let addr2line = crate::tools::find("aarch64-linux-gnu-addr2line", "binutils-aarch64-linux-gnu")?;
            if !rust_target_installed(AARCH64) {
                return None;
            }
            let variables = [
                ("CC_aarch64_unknown_linux_gnu".to_owned(), compiler),
                ("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER".to_owned(), linker),
            ];
            let service = example_service_for(AARCH64, "aarch64", &variables);
            Some(Aarch64 { service, qemu, addr2line })
        })
        .as_ref()
}

/// The example service for aarch64 and the tools that run and check it ([`aarch64_service`]).
#[derive(Debug)]
pub struct Aarch64 {
    /// The service's binary.
    pub service: PathBuf,
    /// `qemu-aarch64`.
    pub qemu: PathBuf,
    /// `aarch64-linux-gnu-addr2line`.
    pub addr2line: PathBuf,
}

/// Builds the example service for `target` (debug, in `target/<directory>`, as `.ci/run` does), with the
/// C compiler and linker the environment `variables` name, and answers its path.
fn example_service_for(target: &str, directory: &str, variables: &[(String, PathBuf)]) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target_directory = workspace.join("target").join(directory);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .current_dir(workspace)
        .args(["build", "--locked", "-p", "memprof", "--example", "service", "--target", target, "--target-dir"])
        .arg(&target_directory)
        .envs(variables.iter().map(|(name, value)| (name, value)))
        .output()
        .unwrap();
    assert!(output.status.success(), "building the example for {target}: {}", String::from_utf8_lossy(&output.stderr));
    target_directory.join(target).join("debug").join("examples").join("service")
}

/// The program the environment's `variable` names (`.ci/run` names the cross compilers once, for its own
/// builds and these: the same value, so that jemalloc's build script, which watches it, is not run again),
/// else `name` found on the `PATH` (or said missing, from `debian_package`).
fn set_or_found(variable: &str, name: &str, debian_package: &str) -> Option<PathBuf> {
    std::env::var_os(variable).map(PathBuf::from).or_else(|| crate::tools::find(name, debian_package))
}

/// Whether rustup installed the standard library for `target` (else said, as a skip).
fn rust_target_installed(target: &str) -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let Ok(sysroot) = Command::new(rustc).args(["--print", "sysroot"]).output() else { return false };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    let installed = sysroot.join("lib/rustlib").join(target).is_dir();
    if !installed {
        crate::tools::skipped(&format!("the Rust target {target} is not installed (rustup target add {target})"));
    }
    installed
}
