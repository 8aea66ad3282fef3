//! What each crate pulls in: the analysis, and the offline tool built on it, need no jemalloc and no
//! server, so `memprof analyze` builds without jemalloc's C sources and on any platform.

use std::path::Path;
use std::process::Command;

fn normal_dependencies(package: &str) -> String {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none", "--all-features"])
        .current_dir(workspace)
        .output()
        .unwrap();
    assert!(output.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_analysis_and_the_command_line_tool_need_no_jemalloc_and_no_server() {
    for package in ["memprof-analysis", "memprof-cli"] {
        let tree = normal_dependencies(package);
        assert!(tree.contains("memprof-analysis"), "{package}:\n{tree}");
        for absent in ["tikv-jemalloc", "memprof-runtime", "signal-hook"] {
            assert!(!tree.contains(absent), "{absent} is a dependency of {package}:\n{tree}");
        }
    }
    assert!(normal_dependencies("memprof-runtime").contains("tikv-jemalloc-sys"), "the check can fail");
}
