//! What the continuous record costs in memory: the `windows` test program (src/bin/windows.rs) sampling
//! every allocation (`lg_prof_sample:0`), holding 10,000, 100,000 and 1,000,000 live objects of 64 bytes,
//! and one object from each of 100,000 distinct stacks, the record sized for them
//! (`MEMPROF_RECORD_OBJECTS`: twice the objects, or 500,000 for the 125,000 stacks it then holds). Each is measured twice in fresh processes: sampled
//! continuously (the record kept), and on demand with a run over the same allocations (no record); the
//! difference of their resident sets is what the record costs. `state` says what the record holds and
//! reserves.
//!
//! ```text
//! cargo bench -p memprof-tests --bench record
//! ```
//!
//! Every sampled object is promoted to a page of its own by jemalloc, so a million take some 4 GiB of the
//! machine in each process. Figures only, nothing is asserted.

use memprof_tests::process::Program;

fn main() {
    println!(
        "{:>18} {:>12} {:>8} {:>13} {:>15} {:>18} {:>11}",
        "live sampled", "record live", "dropped", "reserved MiB", "RSS record MiB", "RSS no record MiB", "record MiB"
    );
    for (what, command, objects) in [
        ("10,000 objects", "hold 10000", 10_000),
        ("100,000 objects", "hold 100000", 100_000),
        ("1,000,000 objects", "hold 1000000", 1_000_000),
        ("100,000 stacks", "stacks 100000", 250_000),
    ] {
        let (live, dropped, reserved, with_record) = measure(command, objects, true);
        let (_, _, _, without) = measure(command, objects, false);
        println!(
            "{what:>18} {live:>12} {dropped:>8} {:>13.1} {:>15.1} {:>18.1} {:>11.1}",
            reserved as f64 / MIB,
            with_record as f64 / MIB,
            without as f64 / MIB,
            (with_record as f64 - without as f64) / MIB
        );
    }
}

const MIB: f64 = (1 << 20) as f64;

/// A fresh `windows` program told `command`: the record's live objects, the samples it dropped, its
/// reserved bytes (0 without a record), and the process's resident set once done.
fn measure(command: &str, objects: usize, continuous: bool) -> (u64, u64, u64, u64) {
    let program = Program::windows()
        .env("MALLOC_CONF", "lg_prof_sample:0")
        .env("MEMPROF_SAMPLING", if continuous { "continuous" } else { "on-demand" })
        // Every allocation in the record: the budget of sampling work, which would thin them, is off.
        .env("MEMPROF_SAMPLING_BUDGET", "off")
        .env("MEMPROF_RECORD_OBJECTS", (2 * objects).max(1 << 16).to_string())
        .spawn();
    program.wait_for_line(|line| line == "windows: ready");
    if !continuous {
        assert_eq!(program.get("/memory-profiler/start").status, 200);
    }
    program.tell(command, &format!("windows: done {command}"));
    let state = program.get_json("/memory-profiler/state");
    let record = &state["memory_profiler"]["sampling"]["record"];
    let rss = resident(&program);
    let field = |name: &str| record[name].as_u64().unwrap_or(0);
    (field("live_objects"), field("dropped_objects") + field("dropped_stacks"), field("capacity_bytes"), rss)
}

/// `VmRSS` of the program.
fn resident(program: &Program) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", program.pid())).unwrap();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}
