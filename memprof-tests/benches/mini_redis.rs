//! What memprof costs a released tokio server nobody here wrote: mini-redis 0.4.1 from crates.io
//! (`programs/mini-redis`: its server's `main` with `#[memprof::main]` added, nothing else), built as Rust
//! builds by default (release, no frame pointers: samples are walked by the unwind tables), its endpoints
//! on. This benchmark is its client: four connections, each command answered before the next is sent.
//! Two loads: `1 KiB`, SETs of 1 KiB values then GETs of them; `churn`, SETs of 64 B expiring after 50 ms.
//! Two configurations: sampling on demand (`MEMPROF_SAMPLING=on-demand`, no run) and continuous (nothing
//! set: memprof's default).
//!
//! ```text
//! cargo bench -p memprof-tests --bench mini_redis
//! MEMPROF_BENCH_CALLGRIND=1 cargo bench -p memprof-tests --bench mini_redis
//! ```
//!
//! Under callgrind (`MEMPROF_BENCH_CALLGRIND=1`) each run counts the server started, loaded and ended by
//! SIGINT in three parts (start-up, the load, shutdown: a dump ends each of the first two), and gives
//! instructions per command on the server's threads (tokio's workers and its main thread: the request
//! threads) and on the whole process (memprof's threads too) two ways: by difference (the run less the
//! server given a quarter of that load, so start-up, shutdown and what is done once cancel out) and
//! between the two dumps (the load as a whole); and the instructions of start-up and shutdown. Each round runs every configuration once, in
//! turn; five rounds (`MEMPROF_BENCH_ROUNDS`): the median and the spread of the rounds' ratios. Without it,
//! commands answered per second, in the same rounds. Under callgrind it also counts an idle server's
//! threads a second (idle 40 s less idle 10 s; alone with `MEMPROF_BENCH_ONLY=idle`). The first run builds the server with jemalloc
//! (~3 min); later runs are quick. Figures only, nothing is asserted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

// Only the per-thread counts of a server driven from outside are used here.
#[allow(dead_code)]
#[path = "common/callgrind.rs"]
mod callgrind;

/// A configuration: its name and `MEMPROF_SAMPLING` (`None`: unset, memprof's default).
const CONFIGURATIONS: [(&str, Option<&str>); 2] = [("on demand", Some("on-demand")), ("continuous", None)];

/// A load: its name, the value's size, whether the keys expire (no GETs then) and commands a connection
/// sends (timed, and under callgrind).
struct Load {
    name: &'static str,
    value: usize,
    expiring: bool,
    commands: [usize; 2],
}

const LOADS: [Load; 2] = [
    Load { name: "1 KiB", value: 1024, expiring: false, commands: [20_000, 20_000] },
    Load { name: "churn", value: 64, expiring: true, commands: [50_000, 25_000] },
];

/// Connections the load is sent over, at once.
const CONNECTIONS: usize = 4;

fn main() {
    let server = build();
    let callgrind = std::env::var_os("MEMPROF_BENCH_CALLGRIND").is_some();
    let rounds = std::env::var("MEMPROF_BENCH_ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(5usize);
    // `MEMPROF_BENCH_ONLY=idle`: the idle counts alone.
    let loads = if std::env::var("MEMPROF_BENCH_ONLY").is_ok_and(|only| only == "idle") { &[][..] } else { &LOADS[..] };
    for load in loads {
        if callgrind {
            // Per round and configuration.
            let counted: Vec<Vec<PerCommand>> = (0..rounds)
                .map(|_| CONFIGURATIONS.iter().map(|configuration| per_command(&server, configuration, load)).collect())
                .collect();
            let column = |of: &dyn Fn(&PerCommand) -> f64| -> Vec<Vec<f64>> {
                counted.iter().map(|round| round.iter().map(of).collect()).collect()
            };
            println!(
                "\n{}: instructions per command under callgrind, {rounds} runs (median, ratio to on demand with its spread)",
                load.name
            );
            println!("  by difference (the load's run less a quarter of it):");
            report("request threads", &column(&|counted| counted.by_difference[0]));
            report("whole process", &column(&|counted| counted.by_difference[1]));
            println!("  between two dumps (the load as a whole, what is done once in it included):");
            report("request threads", &column(&|counted| counted.between_dumps[0]));
            report("whole process", &column(&|counted| counted.between_dumps[1]));
            println!("  instructions a run, whole process (memprof's start-up: continuous less on demand):");
            report("start-up", &column(&|counted| counted.start_up));
            report("shutdown", &column(&|counted| counted.shutdown));
            let start_up = column(&|counted| counted.start_up);
            let mut added: Vec<f64> = start_up.iter().map(|round| round[1] - round[0]).collect();
            added.sort_by(f64::total_cmp);
            println!(
                "  start-up added by continuous sampling: {:.2} M instructions (median; {:.2}-{:.2} M)",
                added[added.len() / 2] / 1e6,
                added[0] / 1e6,
                added[added.len() - 1] / 1e6
            );
            let [on_demand, continuous] = [0, 1].map(|index| in_sampling(&server, &CONFIGURATIONS[index], load));
            println!(
                "  in sampling's code (jemalloc's and memprof's, one run each): {:.0} per command continuous, {:.0} on demand",
                continuous, on_demand
            );
        } else {
            let rates: Vec<Vec<f64>> = (0..rounds)
                .map(|_| CONFIGURATIONS.iter().map(|configuration| per_second(&server, configuration, load)).collect())
                .collect();
            println!(
                "\n{}: commands answered per second, {CONNECTIONS} connections, {rounds} rounds (median, ratio to on demand with its spread)",
                load.name
            );
            report("commands per second", &rates);
        }
    }
    if callgrind {
        println!("\nIdle: instructions a second on memprof's threads and the server's (40 s less 10 s idle)");
        for configuration in &CONFIGURATIONS {
            let (short, long) = (idle(&server, configuration, 10), idle(&server, configuration, 40));
            let per_second = |of: fn(&callgrind::ByThread) -> u64| (of(&long) as f64 - of(&short) as f64) / 30.0;
            println!(
                "  {:<11} memprof's {:>10.0}  the server's {:>10.0}",
                configuration.0,
                per_second(|count| count.memprof),
                per_second(|count| count.program)
            );
        }
    }
}

/// A run idle for `seconds` after start-up (one connection made, no command), counted by thread.
fn idle(server: &Path, configuration: &(&str, Option<&str>), seconds: u64) -> callgrind::ByThread {
    let port = free_port();
    let running = callgrind::Running::start(&command(server, configuration, port), &[]);
    drop(connect(port, running.id()));
    // The idle time is what is measured: a fixed length, not a wait for a condition.
    std::thread::sleep(Duration::from_secs(seconds));
    interrupt(running.id());
    let (counted, output) = running.counted();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    counted
}

/// Prints, for each configuration, the median of `figures` (a row a round, a column a configuration) and
/// the median, lowest and highest of its ratio to the first configuration, taken within each round.
fn report(what: &str, figures: &[Vec<f64>]) {
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        (values[values.len() / 2], values[0], values[values.len() - 1])
    };
    for (index, (name, _)) in CONFIGURATIONS.iter().enumerate() {
        let (figure, ..) = median(figures.iter().map(|round| round[index]).collect());
        let (ratio, lowest, highest) = median(figures.iter().map(|round| round[index] / round[0]).collect());
        println!("  {what:<20} {name:<11} {figure:>10.0}  {ratio:.4} ({lowest:.4}-{highest:.4})");
    }
}

/// Builds the server as released (release, no frame pointers), into `target/bench-mini-redis`.
fn build() -> PathBuf {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = tests.parent().unwrap().join("target").join("bench-mini-redis");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "--locked", "--target-dir"])
        .arg(&target)
        .current_dir(tests.join("programs").join("mini-redis"))
        // RUSTFLAGS replaces the workspace's rustflags (.cargo/config.toml's frame pointers).
        .env("RUSTFLAGS", "-C force-frame-pointers=no")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "mini-redis does not build");
    target.join("release").join("mini-redis-memprof")
}

/// The server under `configuration`, listening on `port`, its endpoints on.
fn command(server: &Path, (_, sampling): &(&str, Option<&str>), port: u16) -> Command {
    let mut command = Command::new(server);
    command.args(["--port", &port.to_string()]).env("MINI_REDIS_MEMORY_PROFILING", "true");
    match sampling {
        Some(mode) => command.env("MEMPROF_SAMPLING", mode),
        None => command.env_remove("MEMPROF_SAMPLING"),
    };
    // RUST_LOG unset: mini-redis's tracing-subscriber 0.2 cannot parse a filter with today's regex.
    command.env_remove("MALLOC_CONF").env_remove("MEMPROF_SAMPLING_BUDGET").env_remove("RUST_LOG");
    command
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("a free port").port()
}

/// Connects once the server (process `pid`) listens: it may take seconds under valgrind.
fn connect(port: u16, pid: u32) -> TcpStream {
    memprof_tests::waiting::wait_until("mini-redis to listen", Duration::from_secs(120), || {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ended = state.rsplit_once(") ").is_none_or(|(_, rest)| rest.starts_with('Z'));
        assert!(!ended, "the server ended before it listened");
        TcpStream::connect(("127.0.0.1", port)).map_err(|error| error.to_string())
    })
}

/// Sends `load`, `commands` commands a connection over [`CONNECTIONS`] connections at once; returns when
/// every answer is read.
fn send(port: u16, pid: u32, load: &Load, commands: usize) {
    let first = connect(port, pid);
    std::thread::scope(|scope| {
        let mut streams = vec![first];
        streams.extend((1..CONNECTIONS).map(|_| connect(port, pid)));
        for (connection, stream) in streams.into_iter().enumerate() {
            scope.spawn(move || client(stream, connection, load, commands));
        }
    });
}

/// One connection's share: SETs (then as many GETs, unless the keys expire).
fn client(stream: TcpStream, connection: usize, load: &Load, commands: usize) {
    let mut writer = stream.try_clone().expect("the stream");
    let mut reader = BufReader::new(stream);
    let value = vec![b'v'; load.value];
    let sets = if load.expiring { commands } else { commands / 2 };
    for index in 0..commands {
        let key = format!("key:{connection}:{}", index % sets);
        let mut parts: Vec<&[u8]> = Vec::with_capacity(5);
        if index < sets {
            parts.extend([b"SET".as_slice(), key.as_bytes(), &value]);
            if load.expiring {
                parts.extend([b"PX".as_slice(), b"50"]);
            }
        } else {
            parts.extend([b"GET".as_slice(), key.as_bytes()]);
        }
        writer.write_all(&encoded(&parts)).expect("mini-redis reads");
        let answer = answer(&mut reader);
        let expected = if index < sets { b"+OK".as_slice() } else { &value };
        assert_eq!(answer, expected, "mini-redis answered {:?}", String::from_utf8_lossy(&answer));
    }
}

/// A command as RESP: an array of bulk strings.
fn encoded(parts: &[&[u8]]) -> Vec<u8> {
    let mut bytes = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        bytes.extend(format!("${}\r\n", part.len()).as_bytes());
        bytes.extend_from_slice(part);
        bytes.extend(b"\r\n");
    }
    bytes
}

/// One answer: a simple string as sent (`+OK`), a bulk string's bytes.
fn answer(reader: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut line = String::new();
    reader.read_line(&mut line).expect("mini-redis answers");
    let line = line.trim_end();
    match line.strip_prefix('$').map(str::parse::<usize>) {
        Some(Ok(length)) => {
            let mut bytes = vec![0; length + 2];
            reader.read_exact(&mut bytes).expect("the bulk string");
            bytes.truncate(length);
            bytes
        }
        _ => line.as_bytes().to_vec(),
    }
}

/// Ends the server as Ctrl-C does (mini-redis shuts down gracefully on SIGINT).
fn interrupt(pid: u32) {
    let status = Command::new("kill").args(["-INT", &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "the server is gone before its end");
}

/// One timed run: commands answered per second.
fn per_second(server: &Path, configuration: &(&str, Option<&str>), load: &Load) -> f64 {
    let port = free_port();
    let mut child =
        command(server, configuration, port).stderr(std::process::Stdio::null()).spawn().expect("the server runs");
    drop(connect(port, child.id()));
    let started = Instant::now();
    send(port, child.id(), load, load.commands[0]);
    let rate = (CONNECTIONS * load.commands[0]) as f64 / started.elapsed().as_secs_f64();
    interrupt(child.id());
    assert!(child.wait().expect("the server ends").success(), "{} did not end well", configuration.0);
    rate
}

/// The instructions per command in the code that sampled allocations run (counted alone, with
/// `--toggle-collect`, in one loaded run): jemalloc's entries for a sample (its stack, which runs memprof's
/// walk; its bookkeeping, which runs the record's sample hook; the free of a sampled object, the record's free
/// hook; the promotion of a sampled small object to a page) and its large allocations (the promoted
/// objects', beside the program's own, which on demand counts alone). Free of the scheduling's noise.
fn in_sampling(server: &Path, configuration: &(&str, Option<&str>), load: &Load) -> f64 {
    let port = free_port();
    let entries = [
        "--toggle-collect=_rjem_je_prof_tctx_create",
        "--toggle-collect=_rjem_je_prof_malloc_sample_object",
        "--toggle-collect=_rjem_je_prof_free_sampled_object",
        "--toggle-collect=_rjem_je_arena_prof_promote",
        "--toggle-collect=_rjem_je_large_palloc",
    ];
    let running = callgrind::Running::start(&command(server, configuration, port), &entries);
    send(port, running.id(), load, load.commands[1]);
    interrupt(running.id());
    let (counted, output) = running.counted();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    counted.program as f64 / (CONNECTIONS * load.commands[1]) as f64
}

/// What one configuration's two counted runs (a load and a quarter of it) read: instructions per command on
/// the request threads and on the whole process, by the runs' difference and over the load alone (between
/// two dumps); and the whole process's start-up and shutdown (the load's run).
struct PerCommand {
    by_difference: [f64; 2],
    between_dumps: [f64; 2],
    start_up: f64,
    shutdown: f64,
}

/// Two counted runs of `configuration` under `load`: the whole load and a quarter of it. Each is counted in
/// three parts, a dump ending each of the first two: start-up (to the first connection), the load, and
/// shutdown (SIGINT to the end). By difference, the commands of the long run beyond the short one: start-up,
/// shutdown and what is done once (the first sample's reading of the allocator's code, say) cancel out;
/// between dumps, the long run's load as a whole, what was done once in it included.
fn per_command(server: &Path, configuration: &(&str, Option<&str>), load: &Load) -> PerCommand {
    let counted = |commands: usize| {
        let port = free_port();
        let running = callgrind::Running::start(&command(server, configuration, port), &[]);
        drop(connect(port, running.id()));
        running.dump();
        send(port, running.id(), load, commands);
        running.dump();
        interrupt(running.id());
        let (parts, output) = running.parts();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let parts: [callgrind::ByThread; 3] = parts.try_into().expect("three parts: start-up, the load, shutdown");
        parts
    };
    let whole = |counted: &callgrind::ByThread| (counted.program + counted.memprof) as f64;
    let (short, long) = (counted(load.commands[1] / 4), counted(load.commands[1]));
    let total = |parts: &[callgrind::ByThread; 3]| {
        parts.iter().fold((0.0, 0.0), |(program, all), part| (program + part.program as f64, all + whole(part)))
    };
    let ((short_program, short_whole), (long_program, long_whole)) = (total(&short), total(&long));
    let beyond = (CONNECTIONS * (load.commands[1] - load.commands[1] / 4)) as f64;
    let all = (CONNECTIONS * load.commands[1]) as f64;
    PerCommand {
        by_difference: [(long_program - short_program) / beyond, (long_whole - short_whole) / beyond],
        between_dumps: [long[1].program as f64 / all, whole(&long[1]) / all],
        start_up: whole(&long[0]),
        shutdown: whole(&long[2]),
    }
}
