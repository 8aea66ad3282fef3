//! Issue 66's bar, "quiet off": what a program that is only the attribute costs when its switch is off and
//! nothing else is set (a command-line tool run thousands of times a day), against the same program on
//! plain jemalloc. Release builds, the environment cleared, `RUNS` starts each, every start's page faults
//! and peak resident set read from the kernel as it is reaped (`wait4`), its wall-clock time from spawn to
//! reaped, and its stderr kept. First the benchmarks' baseline program doing nothing (`baseline start`):
//!
//! - `system`: the system allocator, no memprof;
//! - `jemalloc`: plain tikv-jemallocator;
//! - `jemalloc prof`: tikv-jemallocator built as memprof builds it, with memprof's configuration
//!   (`MALLOC_CONF=prof:true,prof_active:false`): what jemalloc's profiling itself costs at start;
//! - `compiled out`: `#[memprof::main]` with the profiler compiled out;
//! - `switch off`: `#[memprof::main]` compiled in, its switch unset;
//! - `jemalloc prof, packed` and `switch off, packed`: the same two linked with packed relative
//!   relocations (`-Wl,-z,pack-relative-relocs`, glibc 2.36's DT_RELR), what a user can choose.
//!
//! Then ripgrep 14.1.1 from crates.io (`cargo vendor`, into `target/bench-ripgrep`), `rg --version`,
//! adopted as a user would, its own musl-only jemallocator taken out (cargo allows one crate linking
//! jemalloc): `rg compiled out` (`#[memprof::main]`, `default-features = false`), `rg jemalloc prof`
//! (tikv-jemallocator as memprof builds it, memprof's configuration) and `rg switch off` (the attribute,
//! compiled in). The first run builds them (some ten minutes); later runs are quick.
//!
//! ```text
//! cargo bench -p memprof-tests --bench quiet_off
//! ```
//!
//! Figures only (medians, with the range over the runs), and how many runs printed anything on stderr.

#[path = "common/baseline.rs"]
mod baseline;
#[path = "common/spread.rs"]
mod spread;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use spread::Spread;

/// How many starts each build is measured over.
const RUNS: usize = 20;

/// memprof's configuration, as jemalloc's own variable gives it to a build without memprof.
const PROF: Option<&str> = Some("prof:true,prof_active:false");

/// The baseline's builds measured: a name, the baseline's features, and jemalloc's configuration.
const BUILDS: [(&str, &str, Option<&str>); 5] = [
    ("system", "", None),
    ("jemalloc", "jemalloc", None),
    ("jemalloc prof", "jemalloc-as-memprof", PROF),
    ("compiled out", "memprof-compiled-out", None),
    ("switch off", "memprof-compiled-in", None),
];

/// Relative relocations packed (DT_RELR, glibc 2.36): the loader reads a few KiB of them instead of 24
/// bytes for each pointer in the executable's tables, which memprof's code makes several thousand more.
const PACKED_RELOCATIONS: &str = "-Wl,-z,pack-relative-relocs";

/// What one start cost, as the kernel counted it.
struct Start {
    /// Minor and major page faults.
    faults: u64,
    /// The peak resident set, in KiB.
    max_rss_kib: u64,
    /// From spawned to reaped, in microseconds.
    wall_micros: u64,
    /// Whether the program wrote anything on stderr.
    said_something: bool,
}

/// A build's medians: page faults, max RSS (KiB), wall-clock (us).
type Medians = (u64, u64, u64);

fn main() {
    println!("{RUNS} starts each, environment cleared: median (least-most)");
    println!("{:>18} {:>18} {:>22} {:>18} {:>8}", "build", "page faults", "max RSS KiB", "wall us", "stderr");
    let baseline: Vec<Medians> = BUILDS
        .iter()
        .map(|(name, features, malloc_conf)| measured(name, &baseline::build(features), &["start"], *malloc_conf))
        .collect();
    compare("switch off", baseline[4], baseline[2]);
    let packed: Vec<Medians> =
        [("jemalloc prof, packed", "jemalloc-as-memprof", PROF), ("switch off, packed", "memprof-compiled-in", None)]
            .iter()
            .map(|(name, features, malloc_conf)| {
                measured(name, &baseline::build_linked(features, Some(PACKED_RELOCATIONS)), &["start"], *malloc_conf)
            })
            .collect();
    compare("switch off, packed", packed[1], packed[0]);
    compare("switch off, packed (jemalloc prof not packed)", packed[1], baseline[2]);
    let ripgrep: Vec<Medians> = RIPGREP_BUILDS
        .iter()
        .map(|adoption| measured(adoption.name, &build_ripgrep(adoption), &["--version"], adoption.malloc_conf))
        .collect();
    compare("rg switch off", ripgrep[2], ripgrep[1]);
}

/// Starts `program` with `arguments` [`RUNS`] times, prints its line, and returns its medians.
fn measured(name: &str, program: &Path, arguments: &[&str], malloc_conf: Option<&str>) -> Medians {
    let starts: Vec<Start> = (0..RUNS).map(|_| start(program, arguments, malloc_conf)).collect();
    let faults = Spread::of(starts.iter().map(|start| start.faults).collect());
    let rss = Spread::of(starts.iter().map(|start| start.max_rss_kib).collect());
    let wall = Spread::of(starts.iter().map(|start| start.wall_micros).collect());
    let said = starts.iter().filter(|start| start.said_something).count();
    println!("{name:>18} {:>18} {:>22} {:>18} {:>8}", faults.text(), rss.text(), wall.text(), format!("{said}/{RUNS}"));
    (faults.median, rss.median, wall.median)
}

/// Prints what `off` costs over `prof`, against issue 66's bar.
fn compare(name: &str, off: Medians, prof: Medians) {
    println!(
        "{name} against jemalloc prof: {:+} page faults, {:+} KiB max RSS, {:+} us wall (issue 66's bar: 50 faults, 1024 KiB, 500 us)",
        off.0 as i64 - prof.0 as i64,
        off.1 as i64 - prof.1 as i64,
        off.2 as i64 - prof.2 as i64
    );
}

/// How ripgrep is adopted: a name, the dependency added to its manifest, what goes before its `main`, and
/// jemalloc's configuration at a start.
struct Adoption {
    name: &'static str,
    dependency: &'static str,
    before_main: &'static str,
    malloc_conf: Option<&'static str>,
}

/// The attribute as a user writes it.
const ATTRIBUTE: &str = "#[memprof::main(http = \"127.0.0.1:5050\", env = \"LIBPROCESS_MEMORY_PROFILING\")]\n";

const RIPGREP_BUILDS: [Adoption; 3] = [
    Adoption {
        name: "rg compiled out",
        dependency: "[dependencies.memprof]\npath = \"MEMPROF\"\ndefault-features = false\n",
        before_main: ATTRIBUTE,
        malloc_conf: None,
    },
    Adoption {
        name: "rg jemalloc prof",
        dependency: "[dependencies.tikv-jemallocator]\nversion = \"0.7\"\nfeatures = [\"profiling\", \"stats\", \"unprefixed_malloc_on_supported_platforms\"]\n",
        before_main: "#[global_allocator]\nstatic ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;\n\n",
        malloc_conf: PROF,
    },
    Adoption {
        name: "rg switch off",
        dependency: "[dependencies.memprof]\npath = \"MEMPROF\"\n",
        before_main: ATTRIBUTE,
        malloc_conf: None,
    },
];

/// ripgrep's own allocator, for musl builds, which cargo refuses beside memprof's jemalloc (one crate may
/// link it): taken out of its manifest and its `main.rs` in every adoption alike.
const RIPGREP_MUSL_DEPENDENCY: &str = "[target.'cfg(all(target_env = \"musl\", target_pointer_width = \"64\"))'.dependencies.jemallocator]\nversion = \"0.5.0\"\n";
const RIPGREP_MUSL_ALLOCATOR: &str = "#[cfg(all(target_env = \"musl\", target_pointer_width = \"64\"))]\n#[global_allocator]\nstatic ALLOC: jemallocator::Jemalloc = jemallocator::Jemalloc;\n";
const RIPGREP_MAIN: &str = "fn main() -> ExitCode {";

/// ripgrep 14.1.1 adopted as `adoption` says, built (release, ripgrep's own profile), its path.
fn build_ripgrep(adoption: &Adoption) -> PathBuf {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = tests.parent().unwrap();
    let root = workspace.join("target").join("bench-ripgrep");
    let source = root.join("vendor").join("ripgrep");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    if !source.join("Cargo.toml").exists() {
        let fetch = root.join("fetch");
        std::fs::create_dir_all(fetch.join("src")).unwrap();
        std::fs::write(
            fetch.join("Cargo.toml"),
            "[package]\nname = \"fetch-ripgrep\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\nripgrep = \"=14.1.1\"\n\n[workspace]\n",
        )
        .unwrap();
        std::fs::write(fetch.join("src").join("main.rs"), "fn main() {}\n").unwrap();
        let vendored = Command::new(&cargo)
            .args(["vendor", "--quiet", "--manifest-path"])
            .arg(fetch.join("Cargo.toml"))
            .arg(root.join("vendor"))
            .stdout(Stdio::null())
            .status()
            .expect("cargo runs");
        assert!(vendored.success(), "ripgrep 14.1.1 cannot be fetched from crates.io");
    }
    let adopted = root.join(adoption.name.replace(' ', "-"));
    let _ = std::fs::remove_dir_all(&adopted);
    let copied = Command::new("cp").arg("-r").arg(&source).arg(&adopted).status().expect("cp runs");
    assert!(copied.success());
    for generated in [".cargo-checksum.json", "Cargo.lock"] {
        let _ = std::fs::remove_file(adopted.join(generated));
    }
    let edit = |path: PathBuf, edit: &dyn Fn(String) -> String| {
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(path, edit(text)).unwrap();
    };
    let memprof = workspace.to_str().unwrap();
    edit(adopted.join("Cargo.toml"), &|manifest| {
        assert!(manifest.contains(RIPGREP_MUSL_DEPENDENCY), "ripgrep's manifest changed");
        manifest.replace(RIPGREP_MUSL_DEPENDENCY, "")
            + "\n"
            + &adoption.dependency.replace("MEMPROF", memprof)
            // A workspace of its own: it lies under memprof's target directory, inside memprof's workspace.
            + "\n[workspace]\n"
    });
    edit(adopted.join("crates").join("core").join("main.rs"), &|main| {
        assert!(main.contains(RIPGREP_MUSL_ALLOCATOR) && main.contains(RIPGREP_MAIN), "ripgrep's main.rs changed");
        main.replace(RIPGREP_MUSL_ALLOCATOR, "")
            .replace(RIPGREP_MAIN, &format!("{}{RIPGREP_MAIN}", adoption.before_main))
    });
    let built = Command::new(&cargo)
        .args(["build", "--release", "--quiet", "--target-dir"])
        .arg(root.join("target").join(adoption.name.replace(' ', "-")))
        .current_dir(&adopted)
        .status()
        .expect("cargo runs");
    assert!(built.success(), "{} does not build", adoption.name);
    root.join("target").join(adoption.name.replace(' ', "-")).join("release").join("rg")
}

/// Starts `program` once with `arguments` and only jemalloc's configuration in its environment, and reaps
/// it with its resource usage.
fn start(program: &Path, arguments: &[&str], malloc_conf: Option<&str>) -> Start {
    let mut command = Command::new(program);
    command.args(arguments).env_clear().stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    if let Some(conf) = malloc_conf {
        command.env("MALLOC_CONF", conf);
    }
    let spawned = std::time::Instant::now();
    // Reaped below by `wait4`, which std's `wait` cannot do: it gives no resource usage.
    #[allow(clippy::zombie_processes)]
    let mut child = command.spawn().expect("the baseline starts");
    let mut said = Vec::new();
    child.stderr.take().unwrap().read_to_end(&mut said).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value, filled by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child is ours and not reaped yet (std reaps only in `wait`, never called here).
    let reaped = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall = spawned.elapsed();
    assert_eq!(reaped, child.id() as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{}: status {status}", program.display());
    Start {
        faults: (usage.ru_minflt + usage.ru_majflt) as u64,
        max_rss_kib: usage.ru_maxrss as u64,
        wall_micros: wall.as_micros() as u64,
        said_something: !said.is_empty(),
    }
}
