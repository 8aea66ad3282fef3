//! A program sampled continuously (`continuous = true`) that allocates in known functions when its
//! standard input says so, for the windows and scrapes of tests/continuous.rs. At start it keeps 32 MiB
//! (`kept_before_the_window`) and prints `windows: ready`; then, a line at a time:
//!
//! - `grow`: keeps 16 MiB more, in 64 KiB blocks (`grown_in_the_window`);
//! - `churn`: allocates 64 MiB in 1 MiB blocks, each freed at once (`churned_in_the_window`);
//! - `scope`: keeps 8 MiB more under `memprof::scope!("scoped", ..)` (`grown_in_the_scope`);
//! - `free-before`: frees the first 32 MiB.
//!
//! After each it prints `windows: done <line>`.

use std::hint::black_box;
use std::io::BufRead;

const MIB: usize = 1 << 20;

#[memprof::main(env = "LIBPROCESS_MEMORY_PROFILING", continuous = true)]
fn main() {
    let mut before = Some(kept_before_the_window(32 * MIB));
    let mut kept = Vec::new();
    println!("windows: ready");
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        match line.as_str() {
            "grow" => kept.push(grown_in_the_window(16 * MIB)),
            "churn" => churned_in_the_window(64 * MIB),
            "scope" => kept.push(memprof::scope!("scoped", grown_in_the_scope(8 * MIB))),
            "free-before" => drop(before.take()),
            other => panic!("windows: unknown command {other:?}"),
        }
        println!("windows: done {line}");
    }
    black_box((before, kept));
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
fn churned_in_the_window(total: usize) {
    for _ in 0..total / MIB {
        black_box(vec![1u8; MIB]);
    }
}
