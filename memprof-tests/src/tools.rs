//! The peers memprof is checked against (jeprof, go tool pprof, objcopy): found on `PATH`, or skipped with
//! a reason printed on stderr (which the test harness shows, unlike stdout of a passing test). `.ci/run`
//! installs them and sets `MEMPROF_REQUIRE_PEERS=1`, under which a missing peer fails the test instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The program `name` on `PATH`; `None`, with the reason printed, when it is not installed.
///
/// ```no_run
/// if let Some(jeprof) = memprof_tests::tools::find("jeprof", "libjemalloc-dev") {
///     println!("comparing with {}", jeprof.display());
/// }
/// ```
pub fn find(name: &str, debian_package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|directory| directory.join(name))
        .find(|candidate| candidate.is_file());
    if found.is_none() {
        skipped(&format!("`{name}` is not installed (Debian package {debian_package})"));
    }
    found
}

/// Says that a check did not run, and why; under `MEMPROF_REQUIRE_PEERS=1` (CI, which has every peer and
/// the rights these checks need), fails instead.
///
/// ```no_run
/// memprof_tests::tools::skipped("no cgroup memory controller can be made here");
/// ```
pub fn skipped(why: &str) {
    assert!(
        std::env::var_os("MEMPROF_REQUIRE_PEERS").is_none_or(|value| value != "1"),
        "MEMPROF_REQUIRE_PEERS=1, and a check cannot run: {why}"
    );
    eprintln!("SKIPPED: {why}; this check did not run");
}

/// Runs `program` with `arguments` and returns its output, panicking with its stderr when it fails.
pub fn run(program: &Path, arguments: &[&str], environment: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(program);
    command.args(arguments);
    for (name, value) in environment {
        command.env(name, value);
    }
    let output = command.output().unwrap_or_else(|error| panic!("{} does not run: {error}", program.display()));
    assert!(
        output.status.success(),
        "{} {arguments:?} failed: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `go tool pprof -top -sample_index=<index>` of a gzip pprof profile: its report, or `None` (with the
/// reason printed) where Go is not installed.
///
/// ```no_run
/// let profile = std::fs::read("heap.pb.gz").unwrap();
/// if let Some(report) = memprof_tests::tools::pprof_top(&profile, "inuse_space") {
///     assert!(report.contains("service::open_session"));
/// }
/// ```
pub fn pprof_top(profile: &[u8], sample_index: &str) -> Option<String> {
    pprof(profile, &["-top", &format!("-sample_index={sample_index}")])
}

/// `go tool pprof <options>` of a gzip pprof profile: its report, or `None` (with the reason printed) where
/// Go is not installed.
///
/// ```no_run
/// let profile = std::fs::read("heap.pb.gz").unwrap();
/// if let Some(comments) = memprof_tests::tools::pprof(&profile, &["-comments"]) {
///     println!("{comments}");
/// }
/// ```
pub fn pprof(profile: &[u8], options: &[&str]) -> Option<String> {
    let pprof = pprof_program()?;
    let scratch = Scratch::new("pprof");
    let file = scratch.join("profile.pb.gz");
    std::fs::write(&file, profile).unwrap();
    // pprof keeps what it fetches under $HOME/pprof: this report's own.
    let home = scratch.join("home");
    let arguments: Vec<&str> = options.iter().copied().chain([file.to_str().unwrap()]).collect();
    let report = run(&pprof, &arguments, &[("HOME", &home)]);
    Some(String::from_utf8_lossy(&report.stdout).into_owned())
}

/// The program `go tool pprof` runs (the toolchain's own `cmd/pprof`), built once a test process into
/// `target/go` with the build cache the other Go programs share. Since Go 1.24 the toolchain ships pprof
/// unbuilt, and `go tool pprof` builds it into the build cache on first use: run with a cache of its own,
/// each report built pprof afresh (some 30 s of CPU, measured on Go 1.26: most of CI's test time).
fn pprof_program() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| go_build("pprof", "cmd/pprof", None)).clone()
}

/// memprof-tests/go/pprofcheck run on two pprof profiles: github.com/google/pprof/profile (the library Parca
/// and Pyroscope ingest with) parses and checks each, and takes the second less the first as Grafana
/// Alloy's delta does; its JSON summary (sample types, samples, the delta of each type in all and under
/// stacks through a function whose name contains `function`, the merged samples below zero). Built once
/// from its module (the Go module proxy) into `target/go`, its modules and build cache kept there; `None`
/// (with the reason printed) where Go is not installed.
///
/// ```no_run
/// let (first, second) = (std::fs::read("allocs.1.pb.gz").unwrap(), std::fs::read("allocs.2.pb.gz").unwrap());
/// if let Some(summary) = memprof_tests::tools::pprofcheck(&first, &second, "open_session") {
///     println!("{:?}", summary.function_delta.get("alloc_space"));
/// }
/// ```
pub fn pprofcheck(first: &[u8], second: &[u8], function: &str) -> Option<PprofDelta> {
    let program = go_program("pprofcheck")?;
    let scratch = Scratch::new("pprofcheck");
    let (first_file, second_file) = (scratch.join("first.pb.gz"), scratch.join("second.pb.gz"));
    std::fs::write(&first_file, first).unwrap();
    std::fs::write(&second_file, second).unwrap();
    let arguments = [first_file.to_str().unwrap(), second_file.to_str().unwrap(), function];
    let output = run(&program, &arguments, &[]);
    Some(summary_of("pprofcheck", &output.stdout))
}

/// What `go/pprofcheck` says of two pprof profiles ([`pprofcheck`]): each sample type's delta, in all and
/// under the function asked about, by type name (`alloc_space`, ...).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct PprofDelta {
    /// The sample types, in order.
    pub sample_types: Vec<String>,
    /// Samples in the first and the second profile.
    pub samples: Vec<u64>,
    /// The second less the first, by sample type.
    pub delta: std::collections::BTreeMap<String, i64>,
    /// The same, under stacks through the function asked about.
    pub function_delta: std::collections::BTreeMap<String, i64>,
    /// Merged samples below zero, by sample type (none for a cumulative type that only grows).
    pub negative: std::collections::BTreeMap<String, u64>,
}

/// What `go/otlpcheck` reads in an OTLP export request with the Collector's pdata ([`otlpcheck`]).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct OtlpSummary {
    /// The resource's attributes.
    pub resource: std::collections::BTreeMap<String, String>,
    /// The instrumentation scope's name and version.
    pub scope: String,
    /// Each profile of the request.
    pub profiles: Vec<OtlpProfile>,
    /// In-use bytes by sample attribute (`tenant=acme`).
    pub inuse_space_by_attribute: std::collections::BTreeMap<String, i64>,
    /// The build ids of the mappings.
    pub build_ids: Vec<String>,
    /// Each sample type's total by function (`by_function["inuse_space"]["service::open_session"]`).
    pub by_function: std::collections::BTreeMap<String, std::collections::BTreeMap<String, i64>>,
}

impl OtlpSummary {
    /// What `function` counted of sample type `kind` (0 when nothing).
    pub fn of_function(&self, kind: &str, function: &str) -> f64 {
        self.by_function.get(kind).and_then(|functions| functions.get(function)).copied().unwrap_or(0) as f64
    }
}

/// One profile of an OTLP export, as [`OtlpSummary`] reads it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct OtlpProfile {
    /// Its sample type and unit.
    #[serde(rename = "type")]
    pub kind: String,
    /// The unit of its values.
    pub unit: String,
    /// The sum of its values.
    pub total: i64,
    /// Its samples.
    pub samples: u64,
    /// Its period.
    pub period: i64,
    /// When its interval began.
    pub time_unix_nano: u64,
    /// How long its interval was.
    pub duration_nano: u64,
    /// Its own attributes (how it was sampled).
    #[serde(default)]
    pub attributes: std::collections::BTreeMap<String, String>,
}

/// `bytes`, a Go checker's JSON summary, read as `T`.
fn summary_of<T: serde::de::DeserializeOwned>(checker: &str, bytes: &[u8]) -> T {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|error| panic!("{checker}'s summary ({error}): {}", String::from_utf8_lossy(bytes)))
}

/// An OTLP profiles export request read by the OpenTelemetry Collector's own pdata (`go/otlpcheck`, built
/// from its module, `go.opentelemetry.io/collector/pdata/pprofile` v0.165.0): its summary (the resource's
/// attributes, each profile's type, unit and total, totals by function and by sample attribute, the build
/// ids); `None` (with the reason printed) where Go is not installed. Panics where pdata refuses it.
///
/// ```no_run
/// let request = std::fs::read("profile.otlp.pb").unwrap();
/// if let Some(summary) = memprof_tests::tools::otlpcheck(&request) {
///     println!("{:?}", summary.resource.get("service.name"));
/// }
/// ```
pub fn otlpcheck(request: &[u8]) -> Option<OtlpSummary> {
    let program = go_program("otlpcheck")?;
    let scratch = Scratch::new("otlpcheck");
    let file = scratch.join("request.otlp.pb");
    std::fs::write(&file, request).unwrap();
    let output = run(&program, &[file.to_str().unwrap()], &[]);
    Some(summary_of("otlpcheck", &output.stdout))
}

/// The Go program `go/<name>` of this crate, built from its module into `target/go` (its modules and
/// build cache kept there between runs); `None` (with the reason printed) where Go is not installed.
pub(crate) fn go_program(name: &str) -> Option<PathBuf> {
    go_build(name, ".", Some(&Path::new(env!("CARGO_MANIFEST_DIR")).join("go").join(name)))
}

/// Builds the Go `package` (in `directory`, when given) into `target/go/<name>`, with the modules and the
/// build cache kept there between runs; `None` (with the reason printed) where Go is not installed.
fn go_build(name: &str, package: &str, directory: Option<&Path>) -> Option<PathBuf> {
    let go = find("go", "golang-go")?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned();
    let cache = workspace.join("target").join("go");
    let program = cache.join(name);
    let environment = [("GOMODCACHE", cache.join("mod")), ("GOCACHE", cache.join("build")), ("HOME", cache.clone())];
    let mut build = Command::new(&go);
    build.args(["build", "-o"]).arg(&program).arg(package);
    if let Some(directory) = directory {
        build.current_dir(directory);
    }
    build.envs(environment.iter().map(|(name, value)| (name, value))).env("GOFLAGS", "-mod=readonly");
    let built = build.output().unwrap_or_else(|error| panic!("go does not run: {error}"));
    assert!(built.status.success(), "go build {name}: {}", String::from_utf8_lossy(&built.stderr));
    Some(program)
}

/// `promtool check metrics` of Prometheus text: `Ok` when it accepts it, else what it said; `None` (with the
/// reason printed) where promtool is not installed.
///
/// ```no_run
/// let text = "# HELP up Whether up.\n# TYPE up gauge\nup 1\n";
/// if let Some(checked) = memprof_tests::tools::promtool_check_metrics(text) {
///     assert!(checked.is_ok(), "{checked:?}");
/// }
/// ```
pub fn promtool_check_metrics(text: &str) -> Option<Result<(), String>> {
    let promtool = find("promtool", "prometheus")?;
    let scratch = Scratch::new("promtool");
    let file = scratch.join("metrics.txt");
    std::fs::write(&file, text).unwrap();
    let checked = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
    Some(if checked.status.success() { Ok(()) } else { Err(said) })
}

/// `promtool check rules` of a Prometheus rules file: `Ok` when it accepts it, else what it said; `None` (with
/// the reason printed) where promtool is not installed.
///
/// ```no_run
/// let rules = "groups:\n  - name: g\n    rules:\n      - record: up_sum\n        expr: sum(up)\n";
/// if let Some(checked) = memprof_tests::tools::promtool_check_rules(rules) {
///     assert!(checked.is_ok(), "{checked:?}");
/// }
/// ```
pub fn promtool_check_rules(yaml: &str) -> Option<Result<(), String>> {
    let promtool = find("promtool", "prometheus")?;
    let scratch = Scratch::new("promtool-rules");
    let file = scratch.join("rules.yml");
    std::fs::write(&file, yaml).unwrap();
    let checked = std::process::Command::new(promtool).args(["check", "rules"]).arg(&file).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
    Some(if checked.status.success() { Ok(()) } else { Err(said) })
}

/// A fresh directory for one test's files, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// `$TMPDIR/memprof-test-<name>-<pid>-<n>`, empty; `n` tells apart the directories of one test process.
    pub fn new(name: &str) -> Self {
        static CREATED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let serial = CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("memprof-test-{name}-{}-{serial}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
