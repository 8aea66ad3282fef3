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
    for absent in
        ["tikv-jemalloc", "httparse", "memprof-runtime", "memprof-analysis", "inferno", "gimli", "addr2line", "ureq"]
    {
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
        // Measures, and installs memprof's allocator (nothing, compiled out).
        "--example",
        "measure",
        "--target-dir",
        target.to_str().unwrap(),
    ]);
    let binary = target.join("debug").join("examples").join("service");

    let data = std::fs::read(&binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    // Code and data only: the linker keeps the name of every object file it opened (`memprof_wire.<hash>-cgu.0`
    // when built without incremental caches, as CI does) even when none of its sections is kept.
    let profiler_symbols: Vec<String> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|symbol| symbol.kind() != object::SymbolKind::File)
        .filter_map(|symbol| symbol.name().ok().map(str::to_owned))
        .filter(|name| {
            name == "malloc_conf" || name.contains("jemalloc") || name.contains("rjem") || name.contains("memprof")
        })
        .collect();
    assert_eq!(profiler_symbols, Vec::<String>::new());

    let mut service = Launch::new(&binary)
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_HTTP", "127.0.0.1:0")
        .env("SERVICE_SECONDS", "1")
        .without_waiting_for_endpoints()
        .spawn();
    assert!(service.wait());
    let output = service.output();
    assert_eq!(output.first().map(String::as_str), Some("service: serving requests"), "{output:#?}");
    assert_eq!(output.last().map(String::as_str), Some("service: done"), "{output:#?}");
    assert!(!output.iter().any(|line| line.contains("memprof")), "{output:#?}");

    // A measure runs its block and says it measured nothing.
    let measure = std::process::Command::new(target.join("debug").join("examples").join("measure")).output().unwrap();
    assert!(measure.status.success());
    let printed = String::from_utf8(measure.stdout).unwrap();
    assert!(printed.starts_with("an index of 1000 entries: not measured: memprof is compiled out"), "{printed}");
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

/// rustdoc's JSON of `package`'s library with `arguments` (features), in the compiled-out target
/// directory: stable rustdoc writes it with `RUSTC_BOOTSTRAP=1`. jemalloc is not compiled for it where the
/// system's is there to stand in (`JEMALLOC_OVERRIDE`; documentation links nothing).
fn rustdoc_json(package: &str, arguments: &[&str]) -> serde_json::Value {
    let target = workspace().join("target").join("compile-out");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.args(["rustdoc", "-p", package, "--lib", "--target-dir", target.to_str().unwrap()]).args(arguments);
    command.args(["--", "-Z", "unstable-options", "--output-format", "json"]).current_dir(workspace());
    command.env("RUSTC_BOOTSTRAP", "1").env_remove("RUSTDOCFLAGS");
    let system_jemalloc = Path::new("/usr/lib/x86_64-linux-gnu/libjemalloc_pic.a");
    if system_jemalloc.exists() {
        command.env("JEMALLOC_OVERRIDE", system_jemalloc);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "cargo rustdoc -p {package}: {}", String::from_utf8_lossy(&output.stderr));
    let json = std::fs::read_to_string(target.join("doc").join(format!("{}.json", package.replace('-', "_")))).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// What the facade offers under each public path: the item's kind (a type, whatever it is made of, a
/// function, a module's items under their own paths...) and, where rustdoc's JSON holds it (the item is
/// the facade's own, or `others`' by its path), its members: variants, public fields, trait items and the
/// methods of its own `impl` blocks.
struct Surface<'a> {
    doc: &'a serde_json::Value,
    others: &'a [serde_json::Value],
    items: std::collections::BTreeMap<String, (String, Vec<String>)>,
}

impl<'a> Surface<'a> {
    fn of(doc: &'a serde_json::Value, others: &'a [serde_json::Value]) -> Surface<'a> {
        let mut surface = Surface { doc, others, items: Default::default() };
        surface.module(doc, &doc["root"].to_string(), "memprof");
        surface
    }

    fn module(&mut self, doc: &'a serde_json::Value, id: &str, prefix: &str) {
        for child in doc["index"][id]["inner"]["module"]["items"].as_array().unwrap() {
            let child = &doc["index"][child.to_string()];
            let (kind, inner) = child["inner"].as_object().unwrap().iter().next().unwrap();
            let (name, target) = match kind.as_str() {
                "use" => (inner["name"].as_str().unwrap(), inner["id"].to_string()),
                "impl" => continue,
                _ => (child["name"].as_str().unwrap(), child["id"].to_string()),
            };
            let path = format!("{prefix}::{name}");
            match self.resolve(&target) {
                Some((doc, item)) if item["inner"].get("module").is_some() => {
                    self.module(doc, &item["id"].to_string(), &path)
                }
                Some((doc, item)) => {
                    let shape = shape(doc, item);
                    self.items.insert(path, shape);
                }
                None => {
                    let kind = self.doc["paths"][&target]["kind"].as_str().unwrap_or("unknown");
                    self.items.insert(path, (class(kind).to_owned(), Vec::new()));
                }
            }
        }
    }

    /// The item `id` names, in the facade's JSON or in another crate's (found by its path).
    fn resolve(&self, id: &str) -> Option<(&'a serde_json::Value, &'a serde_json::Value)> {
        let (doc, others) = (self.doc, self.others);
        if let Some(item) = doc["index"].get(id) {
            return Some((doc, item));
        }
        let path = &doc["paths"].get(id)?["path"];
        others.iter().find_map(|other| {
            let (id, _) = other["paths"]
                .as_object()?
                .iter()
                .find(|(_, summary)| summary["crate_id"] == 0 && summary["path"] == *path)?;
            Some((other, other["index"].get(id)?))
        })
    }
}

/// A type is a type (a struct compiled in may be an alias compiled out); other kinds are themselves.
fn class(kind: &str) -> &str {
    match kind {
        "struct" | "enum" | "union" | "type_alias" => "type",
        other => other,
    }
}

/// An item's kind and its members' names, sorted.
fn shape(doc: &serde_json::Value, item: &serde_json::Value) -> (String, Vec<String>) {
    let (kind, inner) = item["inner"].as_object().unwrap().iter().next().unwrap();
    let index = &doc["index"];
    let name = |id: &serde_json::Value| index[id.to_string()]["name"].as_str().map(str::to_owned);
    let public = |id: &serde_json::Value| index[id.to_string()]["visibility"] == "public";
    let ids = |value: &serde_json::Value| value.as_array().cloned().unwrap_or_default();
    let mut members: Vec<String> = match kind.as_str() {
        "enum" => ids(&inner["variants"]).iter().filter_map(name).collect(),
        "struct" => ids(&inner["kind"]["plain"]["fields"]).iter().filter(|id| public(id)).filter_map(name).collect(),
        "trait" => ids(&inner["items"]).iter().filter_map(name).collect(),
        _ => Vec::new(),
    };
    for implementation in ids(&inner["impls"]).iter().map(|id| &index[id.to_string()]["inner"]["impl"]) {
        if implementation["trait"].is_null() && implementation["blanket_impl"].is_null() {
            members.extend(ids(&implementation["items"]).iter().filter(|id| public(id)).filter_map(name));
        }
    }
    members.sort();
    (class(kind).to_owned(), members)
}

/// A program built with memprof compiled out builds whatever of memprof it names: the facade compiled out
/// has every public item of the facade compiled in (every feature) and no other, each of the same kind with
/// the same members, rustdoc's JSON of both builds compared path by path (the compiled-in items read in the
/// runtime's and memprof-wire's own JSON). `Options::dump_on_sigint`, `Error`'s variants, `DumpOf`, the
/// route and request labels' types, `axum::MAX_IN_FLIGHT` and the `analysis` module once were missing.
#[test]
fn the_facade_compiled_out_has_every_item_of_the_compiled_in_one() {
    let features = ["--features", "axum tracing http tower"];
    // `analysis` kept on compiled out: `memprof::analysis` is the same crate either way.
    let compiled_out = rustdoc_json(
        "memprof",
        &[&["--no-default-features"][..], &["--features", "axum tracing http tower analysis"]].concat(),
    );
    let compiled_in = rustdoc_json("memprof", &features);
    let others = [rustdoc_json("memprof-runtime", &features), rustdoc_json("memprof-wire", &[])];
    let (out, inside) = (Surface::of(&compiled_out, &others), Surface::of(&compiled_in, &others));
    assert!(inside.items.len() >= 50, "{:#?}", inside.items);
    assert!(
        inside.items.get("memprof::Options").is_some_and(|(_, members)| members.contains(&"dump_on_sigint".into())),
        "the members of the runtime's items are read: {:#?}",
        inside.items
    );
    let paths: std::collections::BTreeSet<&String> = inside.items.keys().chain(out.items.keys()).collect();
    let differences: Vec<String> = paths
        .into_iter()
        .filter(|path| inside.items.get(*path) != out.items.get(*path))
        .map(|path| format!("{path}: compiled in {:?}, compiled out {:?}", inside.items.get(path), out.items.get(path)))
        .collect();
    assert!(differences.is_empty(), "the facade compiled out differs:\n{}", differences.join("\n"));
}
