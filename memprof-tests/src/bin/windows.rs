//! A program sampled continuously (`sampling = "continuous"`; Ctrl-C and SIGTERM end memprof first,
//! `dump_on_sigint` and `dump_on_sigterm`) that
//! allocates in known functions when its standard input says so, for the windows and scrapes of tests/continuous.rs. At start it keeps 32 MiB
//! (`kept_before_the_window`) and prints `windows: ready`; then, a line at a time:
//!
//! - `grow`: keeps 16 MiB more, in 64 KiB blocks (`grown_in_the_window`);
//! - `churn`: allocates 64 MiB in 1 MiB blocks, each freed at once (`churned_in_the_window`);
//! - `scope`: keeps 8 MiB more under `memprof::scope!("scoped", ..)` (`grown_in_the_scope`);
//! - `free-before`: frees the first 32 MiB;
//! - `scopes N`: N `scope!` windows in a row, each keeping 4 KiB;
//! - `fork`: 20 times, forks a child that allocates 16 MiB and exits, while a thread allocates without
//!   pause (the record's lock is taken around `fork`, so no child inherits it held), and waits for each;
//! - `children N`: N times, forks a child that returns from `main` (dropping memprof's guard, as a
//!   daemonizing program's parent half or a worker pool's child does) and waits for it, at most 10 s
//!   (then kills it); prints `windows: children <ended> ended, <hung> hung`;
//! - `sigterm-child`: forks a child that sleeps, sends it SIGTERM half a second later and prints how it
//!   ended: `windows: child ended by signal 15 in <ms> ms`, `exited with <code>`, or `still running after 5 s`;
//! - `command-child`: spawns `sleep 30` with `std::process::Command`, sends it SIGTERM and runs `true`:
//!   `windows: command children: sleep <how it ended>, true <how it ended>`;
//! - `drop-root`: changes the process's user and group to nobody (65534), as a daemon does after binding
//!   (`setgid`, then `setuid`: every thread's); prints `windows: now uid <uid>`;
//! - `threads`: 1000 threads, four at a time, each holding 64 KiB until it ends;
//! - `hold N`: keeps N objects of 64 bytes more (`held_objects`), for the record's memory
//!   (benches/record.rs);
//! - `stacks N`: keeps one object from each of N distinct stacks (a binary tree of calls 17 deep);
//! - `paths N`: allocates and frees one object from each of N distinct stacks (the same tree);
//! - `deep N`: keeps 4 MiB in 1 MiB blocks allocated N calls deep (`deep_call`, then `allocated_deep`);
//! - `through-c`: keeps 16 MiB in 64 KiB blocks that a C function built without frame pointers allocates
//!   (`memprof_test_c_allocate`, c/allocate.c), called from `allocated_through_c`;
//! - `peak`: holds 48 MiB (`held_at_the_peak`), frees it, then keeps 8 MiB (`kept_after_the_peak`);
//! - `walks N D`: allocates and frees N blocks of 64 bytes one at a time, D calls deep (`walked`): a
//!   sampled allocation's walk at a chosen depth (benches/stacks.rs counts its instructions);
//! - `busy S`: allocates and frees 4 KiB blocks without pause for S seconds (`allocated_busily`): a load
//!   sampled past memprof's budget (tests/budget.rs); prints `windows: busy <bytes> bytes`;
//! - `storm T S N`: N threads allocate and free blocks of S bytes without pause for T seconds
//!   (`stormed`), then the main thread keeps 64 MiB in 1 MiB blocks (`kept_after_the_storm`): a burst
//!   sampling is thinned through, and what comes right after it (tests/budget.rs); prints
//!   `windows: storm <bytes> bytes`, what the threads allocated;
//! - `paced S`: the same, 16 blocks a millisecond (`allocated_at_a_pace`): a steady load sampling costs a
//!   few per cent of a core in a debug build; prints `windows: paced <bytes> bytes`;
//! - `latencies rust|c N`: allocates and frees N blocks of 4 KiB one at a time, by Rust or through the C
//!   function, and prints the median and 99th percentile of an allocation's time in ns
//!   (`windows: latencies <p50> <p99>`; benches/stacks.rs).
//!
//! After each it prints `windows: done <line>`.

use std::hint::black_box;
use std::io::BufRead;

const MIB: usize = 1 << 20;

#[memprof::main(
    env = "LIBPROCESS_MEMORY_PROFILING",
    sampling = "continuous",
    dump_on_sigint = true,
    dump_on_sigterm = true
)]
fn main() {
    let mut before = Some(kept_before_the_window(32 * MIB));
    let mut kept = Vec::new();
    let mut held = Vec::new();
    let mut through_c = Vec::new();
    println!("windows: ready");
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        match line.as_str() {
            "grow" => kept.push(grown_in_the_window(16 * MIB)),
            "churn" => churned_in_the_window(64 * MIB),
            "scope" => kept.push(memprof::scope!("scoped", grown_in_the_scope(8 * MIB))),
            "free-before" => drop(before.take()),
            "fork" => forks(20),
            "sigterm-child" => println!("windows: child {}", sigterm_child()),
            "command-child" => println!("windows: command children: {}", command_children()),
            "threads" => threads(1000),
            "drop-root" => {
                // SAFETY: plain system calls; glibc applies them to every thread of the process.
                let changed = unsafe {
                    libc::setgroups(0, std::ptr::null()) == 0 && libc::setgid(65534) == 0 && libc::setuid(65534) == 0
                };
                assert!(changed, "windows: cannot drop root: {}", std::io::Error::last_os_error());
                // SAFETY: reads the process's real user id.
                println!("windows: now uid {}", unsafe { libc::getuid() });
            }
            "through-c" => through_c.push(allocated_through_c(16 * MIB)),
            "peak" => {
                drop(held_at_the_peak(48 * MIB));
                kept.push(kept_after_the_peak(8 * MIB));
            }
            other if other.starts_with("hold ") => {
                let count: usize = other["hold ".len()..].parse().expect("hold N");
                held.push(held_objects(count));
            }
            other if other.starts_with("stacks ") => {
                let count: u32 = other["stacks ".len()..].parse().expect("stacks N");
                held.push((0..count).map(|path| branch(path, 17)).collect());
            }
            other if other.starts_with("walks ") => {
                let (count, depth) = other["walks ".len()..].split_once(' ').expect("walks N D");
                walked(depth.parse().expect("walks N D"), count.parse().expect("walks N D"));
            }
            other if other.starts_with("deep ") => {
                kept.push(deep_call(other["deep ".len()..].parse().expect("deep N")));
            }
            other if other.starts_with("paths ") => {
                let count: u32 = other["paths ".len()..].parse().expect("paths N");
                (0..count).for_each(|path| drop(branch(path, 17)));
            }
            other if other.starts_with("busy ") => {
                let bytes =
                    allocated_busily(std::time::Duration::from_secs(other["busy ".len()..].parse().expect("busy S")));
                println!("windows: busy {bytes} bytes");
            }
            other if other.starts_with("storm ") => {
                let words: Vec<u64> =
                    other["storm ".len()..].split(' ').map(|word| word.parse().expect("storm T S N")).collect();
                let [seconds, size, threads] = words[..] else { panic!("storm T S N") };
                let bytes = storm(std::time::Duration::from_secs(seconds), size as usize, threads as usize);
                kept.push(kept_after_the_storm(64 * MIB));
                println!("windows: storm {bytes} bytes");
            }
            other if other.starts_with("paced ") => {
                let bytes = allocated_at_a_pace(std::time::Duration::from_secs(
                    other["paced ".len()..].parse().expect("paced S"),
                ));
                println!("windows: paced {bytes} bytes");
            }
            other if other.starts_with("latencies ") => {
                let (how, count) = other["latencies ".len()..].split_once(' ').expect("latencies rust|c N");
                let (p50, p99) = latencies(how == "c", count.parse().expect("latencies rust|c N"));
                println!("windows: latencies {p50} {p99}");
            }
            other if other.starts_with("children ") => {
                let Some((ended, hung)) = children_returning(other["children ".len()..].parse().expect("children N"))
                else {
                    break; // this is a child: it returns from `main`
                };
                println!("windows: children {ended} ended, {hung} hung");
            }
            other if other.starts_with("scopes ") => {
                let count: usize = other["scopes ".len()..].parse().expect("scopes N");
                for _ in 0..count {
                    kept.push(memprof::scope!("many", vec![vec![1u8; 4096]]));
                }
            }
            other => panic!("windows: unknown command {other:?}"),
        }
        println!("windows: done {line}");
    }
    black_box((before, kept, held, through_c));
}

/// `total` bytes in 64 KiB blocks, every byte written.
fn blocks(total: usize) -> Vec<Vec<u8>> {
    (0..total / (64 * 1024)).map(|_| vec![1u8; 64 * 1024]).collect()
}

#[inline(never)]
fn kept_before_the_window(total: usize) -> Vec<Vec<u8>> {
    black_box(blocks(total))
}

#[inline(never)]
fn grown_in_the_window(total: usize) -> Vec<Vec<u8>> {
    black_box(blocks(total))
}

#[inline(never)]
fn grown_in_the_scope(total: usize) -> Vec<Vec<u8>> {
    black_box(blocks(total))
}

#[inline(never)]
fn held_at_the_peak(total: usize) -> Vec<Vec<u8>> {
    black_box(blocks(total))
}

#[inline(never)]
fn kept_after_the_peak(total: usize) -> Vec<Vec<u8>> {
    black_box(blocks(total))
}

#[inline(never)]
fn churned_in_the_window(total: usize) {
    for _ in 0..total / MIB {
        black_box(vec![1u8; MIB]);
    }
}

/// Forks `count` children, one at a time, each allocating 16 MiB (sampled, through the record's hooks)
/// then exiting, while another thread allocates and frees without pause.
fn forks(count: usize) {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                churned_in_the_window(4 * MIB);
            }
        });
        for _ in 0..count {
            // SAFETY: the child only allocates, frees and exits (`_exit`, no atexit handlers).
            let child = unsafe { libc::fork() };
            if child == 0 {
                black_box(blocks(16 * MIB));
                // SAFETY: ends the child without running the parent's exit handlers.
                unsafe { libc::_exit(0) };
            }
            let mut status = 0;
            // SAFETY: waits for the child just forked.
            unsafe { libc::waitpid(child, &mut status, 0) };
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "a child ended with {status}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

/// Forks `count` children one at a time, each returning from `main` (`None` in a child); in the parent,
/// how many ended by themselves and how many hung (killed after 10 s).
fn children_returning(count: usize) -> Option<(usize, usize)> {
    let (mut ended, mut hung) = (0, 0);
    for _ in 0..count {
        // SAFETY: the child returns from `main` on this thread, as a forking program's child does.
        let child = unsafe { libc::fork() };
        if child == 0 {
            return None;
        }
        match ended_within(child, std::time::Duration::from_secs(10)) {
            Some(status) if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 => ended += 1,
            Some(status) => panic!("a child returning from main ended with status {status}"),
            None => hung += 1,
        }
    }
    Some((ended, hung))
}

/// Forks a child that sleeps (20 s at most), sends it SIGTERM after half a second and says how it ended.
fn sigterm_child() -> String {
    // SAFETY: the child only sleeps, then `_exit`s.
    let child = unsafe { libc::fork() };
    if child == 0 {
        std::thread::sleep(std::time::Duration::from_secs(20));
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(7) };
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let sent = std::time::Instant::now();
    // SAFETY: signals the child just forked.
    assert_eq!(unsafe { libc::kill(child, libc::SIGTERM) }, 0);
    match ended_within(child, std::time::Duration::from_secs(5)) {
        Some(status) if libc::WIFSIGNALED(status) => {
            format!("ended by signal {} in {} ms", libc::WTERMSIG(status), sent.elapsed().as_millis())
        }
        Some(status) => format!("exited with {}", libc::WEXITSTATUS(status)),
        None => "still running after 5 s".to_owned(),
    }
}

/// Children started by `std::process::Command` (fork then exec): `sleep 30` sent SIGTERM, and `true`.
fn command_children() -> String {
    use std::os::unix::process::ExitStatusExt;
    let mut sleep = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
    // SAFETY: signals the child just spawned.
    assert_eq!(unsafe { libc::kill(sleep.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let slept = sleep.wait().expect("sleep");
    let truth = std::process::Command::new("true").status().expect("true");
    let said = |status: std::process::ExitStatus| match status.signal() {
        Some(signal) => format!("ended by signal {signal}"),
        None => format!("exited with {}", status.code().unwrap_or(-1)),
    };
    format!("sleep {}, true {}", said(slept), said(truth))
}

/// The status `child` ended with, polled every 10 ms for at most `deadline`; `None` when it still runs then
/// (it is killed and reaped).
fn ended_within(child: libc::pid_t, deadline: std::time::Duration) -> Option<libc::c_int> {
    let started = std::time::Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: polls the child this program forked.
        if unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == child {
            return Some(status);
        }
        if started.elapsed() > deadline {
            // SAFETY: kills and reaps the child this program forked.
            unsafe {
                libc::kill(child, libc::SIGKILL);
                libc::waitpid(child, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `count` threads, four at a time, each holding 64 KiB until it ends.
fn threads(count: usize) {
    for _ in 0..count / 4 {
        let handles: Vec<_> = (0..4).map(|_| std::thread::spawn(|| black_box(blocks(64 * 1024)).len())).collect();
        handles.into_iter().for_each(|handle| assert_eq!(handle.join().unwrap(), 1));
    }
}

#[link(name = "memprof_test_c", kind = "static")]
unsafe extern "C" {
    /// c/allocate.c: `size` bytes from `malloc`, every byte written; null when `malloc` fails.
    fn memprof_test_c_allocate(size: usize) -> *mut std::ffi::c_void;
}

/// `total` bytes in 64 KiB blocks allocated by C code without frame pointers, kept (as addresses: the
/// program never frees them).
#[inline(never)]
fn allocated_through_c(total: usize) -> Vec<usize> {
    // SAFETY: the C function only allocates and writes the block it returns.
    let blocks: Vec<usize> =
        (0..total / (64 * 1024)).map(|_| unsafe { memprof_test_c_allocate(64 * 1024) } as usize).collect();
    assert!(blocks.iter().all(|&block| block != 0), "malloc failed");
    black_box(blocks)
}

/// The median and 99th percentile, in ns, of `count` allocations of 4 KiB, each freed at once, through the
/// C function or by Rust.
fn latencies(through_c: bool, count: usize) -> (u128, u128) {
    let mut times: Vec<u128> = Vec::with_capacity(count);
    for _ in 0..count {
        let started = std::time::Instant::now();
        if through_c {
            // SAFETY: the C function only allocates and writes the block it returns, freed here.
            unsafe { libc::free(black_box(memprof_test_c_allocate(4096))) };
        } else {
            drop(black_box(vec![1u8; 4096]));
        }
        times.push(started.elapsed().as_nanos());
    }
    times.sort_unstable();
    (times[count / 2], times[count * 99 / 100])
}

/// `depth` calls of itself, then 4 MiB in 1 MiB blocks.
#[inline(never)]
fn deep_call(depth: u32) -> Vec<Vec<u8>> {
    if depth == 0 { allocated_deep() } else { black_box(deep_call(black_box(depth - 1))) }
}

/// `depth` calls of itself, then `count` blocks of 64 bytes allocated and freed one at a time.
#[inline(never)]
fn walked(depth: u32, count: usize) {
    if depth == 0 {
        (0..count).for_each(|_| drop(black_box(vec![1u8; 64])));
    } else {
        walked(black_box(depth - 1), count);
        black_box(());
    }
}

#[inline(never)]
fn allocated_deep() -> Vec<Vec<u8>> {
    (0..4).map(|_| vec![1u8; MIB]).collect()
}

/// Blocks of 4 KiB allocated and freed one at a time, for `time`: the bytes allocated.
#[inline(never)]
fn allocated_busily(time: std::time::Duration) -> usize {
    let started = std::time::Instant::now();
    let mut bytes = 0;
    while started.elapsed() < time {
        (0..256).for_each(|_| drop(black_box(vec![1u8; 4096])));
        bytes += 256 * 4096;
    }
    bytes
}

/// `threads` threads allocating and freeing blocks of `size` bytes in [`stormed`] for `time`: the bytes
/// they allocated.
fn storm(time: std::time::Duration, size: usize, threads: usize) -> u64 {
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads).map(|_| scope.spawn(move || stormed(started, time, size))).collect();
        workers.into_iter().map(|worker| worker.join().unwrap()).sum()
    })
}

/// Blocks of `size` bytes allocated and freed without pause until `time` after `started`: the bytes.
#[inline(never)]
fn stormed(started: std::time::Instant, time: std::time::Duration, size: usize) -> u64 {
    let mut bytes = 0;
    while started.elapsed() < time {
        (0..64).for_each(|_| drop(black_box(vec![1u8; size])));
        bytes += 64 * size as u64;
    }
    bytes
}

/// `total` bytes in 1 MiB blocks, every byte written (the result through `black_box`: a release build
/// would otherwise jump to `collect` in this function's place, and its frame would be in no stack).
#[inline(never)]
fn kept_after_the_storm(total: usize) -> Vec<Vec<u8>> {
    black_box((0..total / MIB).map(|_| black_box(vec![1u8; MIB])).collect())
}

/// Blocks of 4 KiB allocated and freed one at a time, 16 a millisecond, for `time`: the bytes allocated.
#[inline(never)]
fn allocated_at_a_pace(time: std::time::Duration) -> usize {
    let started = std::time::Instant::now();
    let mut bytes = 0;
    while started.elapsed() < time {
        let due = started + std::time::Duration::from_micros((bytes / (16 * 4096)) as u64 * 1000);
        std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        (0..16).for_each(|_| drop(black_box(vec![1u8; 4096])));
        bytes += 16 * 4096;
    }
    bytes
}

/// `count` objects of 64 bytes, kept.
#[inline(never)]
fn held_objects(count: usize) -> Vec<Vec<u8>> {
    (0..count).map(|_| vec![1u8; 64]).collect()
}

/// An object allocated at the end of a path of `depth` calls chosen by the bits of `path`: each path is a
/// stack of its own.
#[inline(never)]
fn branch(path: u32, depth: u32) -> Vec<u8> {
    match (depth, path & 1) {
        (0, _) => vec![1u8; 64],
        (_, 0) => black_box(left(path >> 1, depth - 1)),
        _ => black_box(right(path >> 1, depth - 1)),
    }
}

#[inline(never)]
fn left(path: u32, depth: u32) -> Vec<u8> {
    black_box(branch(path, depth))
}

#[inline(never)]
fn right(path: u32, depth: u32) -> Vec<u8> {
    black_box(branch(path, depth))
}
