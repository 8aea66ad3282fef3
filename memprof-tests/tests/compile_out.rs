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
