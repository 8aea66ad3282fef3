//! What memprof adds to a service's binary: `examples/axum-service` built for release and stripped three
//! ways: as it is (memprof compiled in), with memprof compiled out (`default-features = false`, the
//! `axum` feature kept, so every `memprof::` line of the service still compiles), and without memprof
//! (its dependency and each use of it removed).
//!
//! ```text
//! cargo bench -p memprof-tests --bench binary_size
//! ```
//!
//! Each variant is a copy of the example in `target/binary-size/<variant>`, built into one shared target
//! directory there (the first run builds tokio and axum; later runs are quick). Figures only.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Each use the example's `main.rs` makes of memprof, with what it becomes without memprof (its own tenant
/// middleware stays, without the label).
const MEMPROF_USES: [(&str, &str); 9] = [
    ("use memprof::axum::RouterExt;\n", ""),
    ("use memprof::labels::WithLabels;\n", ""),
    ("memprof::malloc_conf!();\n", ""),
    ("    let _memprof = memprof::start(memprof::Options::new().built_in_server(false));\n", ""),
    ("        .memprof_route_labels()\n", ""),
    (
        "\n        // Every endpoint at its own path: the dashboard at /memory-profiler/, Go's /debug/pprof/*, /metrics.\n        // Compiled out, these two calls are the router itself.\n        .memprof_endpoints();",
        ";",
    ),
    (
        "next.run(request).with_labels(&[(\"tenant\", &tenant)]).await",
        "{\n    let _ = tenant;\n    next.run(request).await\n}",
    ),
    (
        "open_session(State(Arc::clone(&memory))).with_labels(&tenant).await",
        "open_session(State(Arc::clone(&memory))).await",
    ),
    (
        "index_document(State(Arc::clone(&memory))).with_labels(&tenant).await",
        "index_document(State(Arc::clone(&memory))).await",
    ),
];

fn main() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let example = workspace.join("examples").join("axum-service");
    let root = workspace.join("target").join("binary-size");
    let manifest = std::fs::read_to_string(example.join("Cargo.toml")).unwrap();
    let dependency = r#"memprof = { path = "../..", features = ["axum"] }"#;
    assert!(manifest.contains(dependency), "the example's memprof dependency changed: {manifest}");
    let at = |rest: &str| format!(r#"memprof = {{ path = "{}"{rest} }}"#, workspace.display());
    let main = std::fs::read_to_string(example.join("src").join("main.rs")).unwrap();
    let without_memprof = MEMPROF_USES.iter().fold(main.clone(), |code, (line, replacement)| {
        assert!(code.contains(line), "the example no longer has {line:?}");
        code.replace(line, replacement)
    });
    assert!(!without_memprof.contains("memprof::"), "a use of memprof is left:\n{without_memprof}");

    let variants = [
        ("compiled in", manifest.replace(dependency, &at(r#", features = ["axum"]"#)), main.clone()),
        ("compiled out", manifest.replace(dependency, &at(r#", default-features = false, features = ["axum"]"#)), main),
        ("without memprof", manifest.replace(&format!("{dependency}\n"), ""), without_memprof),
    ];
    let sizes: Vec<(&str, u64)> = variants
        .iter()
        .map(|(name, manifest, main)| (*name, stripped_size(&example, &root, name, manifest, main)))
        .collect();
    let without = sizes[2].1;
    println!("{:<16} {:>14} {:>14} {:>9}", "axum-service", "stripped bytes", "vs without", "ratio");
    for (name, size) in &sizes {
        let added = *size as i64 - without as i64;
        println!("{name:<16} {size:>14} {added:>+14} {:>9.4}", *size as f64 / without as f64);
    }
}

/// Builds the example as `variant` (its manifest and `main.rs` replaced) and returns its stripped size.
fn stripped_size(example: &Path, root: &Path, variant: &str, manifest: &str, main: &str) -> u64 {
    let copy = root.join(variant.replace(' ', "-"));
    std::fs::create_dir_all(copy.join("src")).unwrap();
    std::fs::copy(example.join("Cargo.lock"), copy.join("Cargo.lock")).unwrap();
    std::fs::write(copy.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(copy.join("src").join("main.rs"), main).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "--bin", "axum-service", "--manifest-path"])
        .arg(copy.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(root.join("target"))
        .status()
        .unwrap();
    assert!(status.success(), "{variant} does not build");
    let stripped: PathBuf = copy.join("axum-service.stripped");
    let built = root.join("target").join("release").join("axum-service");
    let status = Command::new("strip").arg("-o").arg(&stripped).arg(&built).status().expect("strip (binutils)");
    assert!(status.success(), "strip {}", built.display());
    std::fs::metadata(&stripped).unwrap().len()
}
