//! `--no-default-features`: the attribute leaves `main` alone, `scope!` is its block, and neither jemalloc
//! nor the HTTP server (httparse) is compiled. Built with cargo in a target directory of its own (cargo holds a lock on
//! the one running this test).

use std::path::{Path, PathBuf};
use std::process::Command;

use memprof_tests::process::Launch;
use object::{Object, ObjectSymbol};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn cargo(arguments: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo).args(arguments).current_dir(workspace()).output().unwrap();
    assert!(output.status.success(), "cargo {arguments:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn without_the_enabled_feature_nothing_of_the_profiler_is_compiled() {
    let tree = cargo(&["tree", "-p", "memprof", "--no-default-features", "-e", "normal", "--prefix", "none"]);
    for absent in ["tikv-jemalloc", "httparse", "memprof-runtime"] {
        assert!(!tree.contains(absent), "{absent} in:\n{tree}");
    }

    let target = workspace().join("target").join("compile-out");
    cargo(&[
        "build",
        "-p",
        "memprof",
        "--no-default-features",
        "--example",
        "service",
        // Names `Run`, `Profile` and `Error`, whose stand-ins compile in their place.
        "--example",
        "scope",
        "--target-dir",
        target.to_str().unwrap(),
    ]);
    let binary = target.join("debug").join("examples").join("service");

    let data = std::fs::read(&binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let profiler_symbols: Vec<String> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter_map(|symbol| symbol.name().ok().map(str::to_owned))
        .filter(|name| {
            name == "malloc_conf" || name.contains("jemalloc") || name.contains("rjem") || name.contains("memprof")
        })
        .collect();
    assert_eq!(profiler_symbols, Vec::<String>::new());

    let mut service = Launch::new(&binary)
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_ADDR", "127.0.0.1:0")
        .env("SERVICE_SECONDS", "1")
        .without_waiting_for_endpoints()
        .spawn();
    assert!(service.wait());
    let output = service.output();
    assert_eq!(output.first().map(String::as_str), Some("service: serving requests"), "{output:#?}");
    assert_eq!(output.last().map(String::as_str), Some("service: done"), "{output:#?}");
    assert!(!output.iter().any(|line| line.contains("memprof")), "{output:#?}");
}

/// The axum example compiled out (memprof's `axum` feature kept, `enabled` off): every use it makes of
/// memprof (the routes, the route labels, labelled futures, `malloc_conf!`, `start`) still compiles.
#[test]
fn the_axum_example_compiles_with_the_profiler_compiled_out() {
    let example = workspace().join("examples").join("axum-service");
    let scratch = memprof_tests::tools::Scratch::new("axum-compiled-out");
    let copy = scratch.join("axum-service");
    std::fs::create_dir_all(&copy).unwrap();
    let manifest = std::fs::read_to_string(example.join("Cargo.toml")).unwrap();
    let dependency = r#"memprof = { path = "../..", features = ["axum"] }"#;
    assert!(manifest.contains(dependency), "{manifest}");
    let compiled_out =
        format!(r#"memprof = {{ path = "{}", default-features = false, features = ["axum"] }}"#, workspace().display());
    std::fs::write(copy.join("Cargo.toml"), manifest.replace(dependency, &compiled_out)).unwrap();
    std::fs::copy(example.join("Cargo.lock"), copy.join("Cargo.lock")).unwrap();
    copy_tree(&example.join("src"), &copy.join("src"));
    let target = workspace().join("target").join("compile-out");
    let manifest_path = copy.join("Cargo.toml");
    cargo(&[
        "check",
        "--offline",
        "--bins",
        "--manifest-path",
        manifest_path.to_str().unwrap(),
        "--target-dir",
        target.to_str().unwrap(),
    ]);
}

/// Copies the files under `from` to `to`, directories included.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().map(Result::unwrap) {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The public methods of `impl <name>` blocks in `source` (not their trait impls), by name.
fn methods_of(source: &str, name: &str) -> std::collections::BTreeSet<String> {
    let mut methods = std::collections::BTreeSet::new();
    let mut rest = source;
    while let Some(start) = rest.find(&format!("\nimpl {name} {{")) {
        rest = &rest[start + 1..];
        let mut depth = 0;
        let mut end = rest.len();
        for (index, character) in rest.char_indices() {
            match character {
                '{' => depth += 1,
                '}' if depth == 1 => {
                    end = index;
                    break;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        for line in rest[..end].lines().map(str::trim) {
            if let Some(signature) = line.strip_prefix("pub fn ") {
                methods.insert(signature.split(['(', '<']).next().unwrap().to_owned());
            }
        }
        rest = &rest[end..];
    }
    methods
}

/// A program that calls a method of `Options`, `Run` or `Profile` builds with memprof compiled out too:
/// every public method of the compiled-in types has its stand-in (`Options::dump_on_sigint` had none).
#[test]
fn the_compiled_out_stand_ins_have_every_method_of_the_compiled_in_types() {
    let read = |path: &str| std::fs::read_to_string(workspace().join(path)).unwrap();
    let pairs = [
        ("Options", "memprof-runtime/src/startup/options.rs", "src/disabled/mod.rs"),
        ("Run", "memprof-runtime/src/profiler/run.rs", "src/disabled/runs.rs"),
        ("Profile", "memprof-runtime/src/profiler/run.rs", "src/disabled/runs.rs"),
    ];
    for (name, compiled_in, compiled_out) in pairs {
        let (methods, stand_ins) = (methods_of(&read(compiled_in), name), methods_of(&read(compiled_out), name));
        assert!(methods.len() >= 3, "{name}: {methods:?} read from {compiled_in}");
        let missing: Vec<&String> = methods.difference(&stand_ins).collect();
        assert!(missing.is_empty(), "{name} compiled out lacks {missing:?} ({compiled_out})");
    }
}
