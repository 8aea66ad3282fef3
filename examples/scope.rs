//! `memprof::scope!` and `memprof::Run`: profile exactly one piece of code, without HTTP.
//!
//! ```text
//! MEMPROF_SCOPES=true cargo run --release --example scope
//! ```
//!
//! `scope!` blocks profile only when asked at run time (`MEMPROF_SCOPES=true`, or the endpoints' switch
//! `LIBPROCESS_MEMORY_PROFILING=true`); without either they are plain blocks. `Run::start` always profiles.
//!
//! Each profile is a jemalloc `heap_v2` file; this program prints where they are and their first line.
//! Only the two newest are kept (`keep_runs = 2`), and those are removed when `main` returns.

use std::hint::black_box;

#[memprof::main(keep_runs = 2)]
fn main() -> Result<(), memprof::Error> {
    // A block profiled by the macro; it evaluates to the block's value.
    let table = memprof::scope!("build table", build_table());
    report("scope", memprof::Profile::latest());
    // Profiles are removed when `main` returns; one saved elsewhere stays (`KEEP_PROFILE=/path/table.heap`).
    if let (Some(path), Some(profile)) = (std::env::var_os("KEEP_PROFILE"), memprof::Profile::latest()) {
        profile.save(&path).expect("the profile is saved");
        println!("saved: {}", std::path::Path::new(&path).display());
    }

    // The same without a macro.
    let run = memprof::Run::start("parse")?;
    let parsed = parse_records();
    report("run", Some(run.stop()?));

    // A panic inside the block still ends the run, and its profile is kept.
    #[allow(clippy::redundant_closure, reason = "compiled out, `scope!` is its block alone")]
    let outcome = std::panic::catch_unwind(|| memprof::scope!("panicking", panic_midway()));
    assert!(outcome.is_err());
    report("panic", memprof::Profile::latest());

    // So does `?` leaving the block early.
    let early = load_settings();
    report("early return", memprof::Profile::latest());

    // A scope inside another run is not profiled on its own; the reason is logged.
    let outer = memprof::Run::start("outer")?;
    let inner = memprof::scope!("inner", build_table());
    let outer = outer.stop()?;
    println!("nested: inner ran unprofiled, outer is run {}", outer.id());
    let directory = outer.path().parent().expect("profiles live in a directory");
    let is_profile = |entry: &std::fs::DirEntry| entry.file_name().to_string_lossy().ends_with(".heap");
    let kept = std::fs::read_dir(directory).map_or(0, |entries| entries.flatten().filter(is_profile).count());
    println!("kept: {kept} profiles on disk");

    println!("done: {} {} {} {:?}", table.len(), parsed.len(), inner.len(), early);
    Ok(())
}

fn report(what: &str, profile: Option<memprof::Profile>) {
    // None when memprof is compiled out (`default-features = false`): then `Run::start` fails below.
    let Some(profile) = profile else { return println!("{what}: no profile") };
    let text = std::fs::read_to_string(profile.path()).unwrap_or_default();
    let header = text.lines().next().unwrap_or("(empty)");
    println!("{what}: run {} at {} ({header})", profile.id(), profile.path().display());
}

/// 64 MiB in 1 KiB rows.
#[inline(never)]
fn build_table() -> Vec<Vec<u8>> {
    (0..64 * 1024).map(|row| vec![row as u8; 1024]).collect()
}

/// 32 MiB of records.
#[inline(never)]
fn parse_records() -> Vec<String> {
    (0..32 * 1024).map(|record| format!("{record:01024}")).collect()
}

#[inline(never)]
fn panic_midway() -> usize {
    let kept = black_box(vec![7u8; 8 << 20]);
    panic!("failed after allocating {} bytes", kept.len());
}

/// `?` inside the profiled block returns from this function; the run still ends.
fn load_settings() -> Result<usize, String> {
    let doubled = memprof::scope!("early return", {
        let size = fail_after_allocating()?;
        size * 2
    });
    Ok(doubled)
}

#[inline(never)]
fn fail_after_allocating() -> Result<usize, String> {
    let kept = black_box(vec![1u8; 8 << 20]);
    Err(format!("gave up after {} bytes", kept.len()))
}
