//! Heap budgets in tests: `memprof::measure` and `measure_future` exact while other tests run beside
//! them, agreeing with dhat (a program of its own), and `#[memprof::test]` holding budgets, failing a
//! broken one with the function that allocated. This file is a test crate as a user's is: memprof's
//! allocator at its root, tests in parallel.

use std::process::Command;

use memprof::{Measured, Usage};
use memprof_tests::blocks::{fill_the_cache, parse_records};

memprof::global_allocator!();

/// What `parse_records(records)` uses, worked out by hand: the kept `Vec` of pointers and its 48-byte
/// records, the line buffer (64 bytes, reallocated to 128, 256 and 512), a 4 KiB scratch buffer a record.
fn parse_records_usage(records: usize) -> (u64, u64, i64, u64) {
    let records = records as u64;
    let kept = 8 * records + 48 * records;
    let objects = 1 + 1 + 3 + 2 * records;
    let bytes = kept + 64 + 128 + 256 + 512 + 4096 * records;
    // At the last record: the kept Vec, every record, the line at 512 bytes and the scratch buffer.
    let peak = kept + 512 + 4096;
    (objects, bytes, kept as i64, peak)
}

#[test]
fn a_block_is_measured_exactly_in_size_classes_and_objects() {
    let (kept, usage) = memprof::measure(|| {
        let kept = vec![0u8; 100];
        let scratch = vec![0u64; 512];
        drop(scratch);
        kept
    });
    assert_eq!(usage.measured, Measured::Exactly, "{usage}");
    // 100 bytes take jemalloc's 112-byte class; the scratch is 4096 bytes.
    assert_eq!((usage.allocated_bytes, usage.allocated_objects), (112 + 4096, 2), "{usage}");
    assert_eq!((usage.freed_bytes, usage.freed_objects), (4096, 1), "{usage}");
    assert_eq!((usage.live_bytes, usage.peak_bytes), (112, 112 + 4096), "{usage}");
    drop(kept);
}

#[test]
fn sixteen_measures_in_parallel_are_each_exact() {
    let threads: Vec<_> = (0..16)
        .map(|thread| {
            std::thread::spawn(move || {
                let records = 8 << (thread % 4);
                (0..20)
                    .map(|_| {
                        let (kept, usage) = memprof::measure(|| parse_records(records));
                        drop(kept);
                        (records, usage)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for thread in threads {
        for (records, usage) in thread.join().unwrap() {
            let measured = (usage.allocated_objects, usage.allocated_bytes, usage.live_bytes, usage.peak_bytes);
            assert_eq!(measured, parse_records_usage(records), "{records} records: {usage}");
            assert_eq!(usage.freed_objects, usage.allocated_objects - 1 - records as u64, "{usage}");
        }
    }
}

#[test]
fn dhat_measures_the_same_block_alike() {
    for records in [8, 64] {
        let output = Command::new(env!("CARGO_BIN_EXE_dhat_block"))
            .args(["parse_records", &records.to_string()])
            .output()
            .expect("dhat_block runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let dhat = String::from_utf8(output.stdout).unwrap();
        let figures: Vec<i64> = dhat.split_whitespace().map(|figure| figure.parse().unwrap()).collect();
        let (kept, usage) = memprof::measure(|| parse_records(records));
        drop(kept);
        let memprof =
            [usage.allocated_objects as i64, usage.allocated_bytes as i64, usage.live_bytes, usage.peak_bytes as i64];
        println!("{records} records: dhat {figures:?}, memprof {memprof:?}");
        assert_eq!(figures, memprof, "dhat against memprof: {usage}");
    }
}

#[test]
fn nested_measures_each_see_their_own_and_the_outer_sees_the_inners_peak() {
    let (((), inner), outer) = memprof::measure(|| {
        let held = vec![0u8; 8192];
        let inner = memprof::measure(|| drop(vec![0u8; 16384]));
        drop(held);
        inner
    });
    assert_eq!((inner.allocated_bytes, inner.peak_bytes), (16384, 16384), "{inner}");
    assert_eq!((outer.allocated_bytes, outer.peak_bytes, outer.live_bytes), (8192 + 16384, 8192 + 16384, 0), "{outer}");
}

#[test]
fn a_panicking_block_leaves_the_outer_measure_whole() {
    let ((), outer) = memprof::measure(|| {
        let caught = std::panic::catch_unwind(|| memprof::measure(|| -> () { panic!("inside") }));
        assert!(caught.is_err());
    });
    assert_eq!(outer.measured, Measured::Exactly);
    let ((), after) = memprof::measure(|| drop(vec![0u8; 64]));
    assert_eq!((after.allocated_bytes, after.peak_bytes), (64, 64), "{after}");
}

/// A future on a multi-threaded runtime, yielding between its allocations so that it may be polled on
/// any worker: its measure is its own, whichever threads ran it, while other tasks allocate beside it.
#[test]
fn a_future_is_measured_across_a_runtimes_threads() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    let (usage, threads) = runtime.block_on(async {
        let noise = tokio::spawn(async {
            for _ in 0..200 {
                drop(std::hint::black_box(vec![0u8; 1 << 20]));
                tokio::task::yield_now().await;
            }
        });
        let measured = tokio::spawn(memprof::measure_future(async {
            let mut threads = std::collections::BTreeSet::new();
            let mut held: Vec<Vec<u8>> = Vec::with_capacity(16);
            for _ in 0..16 {
                threads.insert(format!("{:?}", std::thread::current().id()));
                held.push(vec![0u8; 4096]);
                tokio::task::yield_now().await;
            }
            (held, threads.len())
        }));
        let ((held, threads), usage) = measured.await.unwrap();
        noise.await.unwrap();
        drop(held);
        (usage, threads)
    });
    println!("the future ran on {threads} threads: {usage}");
    // The BTreeSet's nodes and the thread ids' text are the future's too: count the buffers exactly, and
    // what else it allocated within a bound.
    let buffers = 16 * 4096 + 16 * 24;
    assert!(usage.allocated_bytes >= buffers && usage.allocated_bytes < buffers + 8192, "{usage}");
    assert!(usage.peak_bytes >= buffers && usage.live_bytes >= buffers as i64, "{usage}");
    assert!(usage.allocated_bytes < 1 << 20, "another task's 1 MiB buffers are not the future's: {usage}");
}

#[memprof::test(allocated <= "64 KiB", peak <= "8 KiB", live == 0, allocated_objects == 21)]
fn a_budget_that_holds_passes() {
    drop(parse_records(8));
}

#[memprof::test(allocated <= "1 KiB")]
#[should_panic(expected = "broke its heap budget:\n  allocated <= \"1 KiB\": 34176 B (33.4 KiB) allocated")]
fn a_broken_budget_fails_the_test_with_the_budget_and_the_measure() {
    drop(parse_records(8));
}

#[memprof::test(allocated == "4 KiB", peak == "4 KiB", live == 0)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_test_is_measured_over_its_polls() {
    let buffer = vec![0u8; 4096];
    tokio::task::yield_now().await;
    drop(buffer);
}

/// What another thread allocated is its own: a buffer it hands over, freed by the test, counts as freed
/// only (the test's own spawning of the thread leaves some 500 bytes).
#[memprof::test(allocated < "1 KiB", live <= -3584)]
#[tokio::test]
async fn what_another_task_allocated_is_not_the_tests() {
    let handle = tokio::runtime::Handle::current();
    let buffer = std::thread::spawn(move || handle.block_on(async { vec![0u8; 4096] })).join().unwrap();
    drop(buffer);
}

#[memprof::test(freed_objects >= 1)]
fn a_test_returning_a_result_keeps_its_result() -> Result<(), std::num::ParseIntError> {
    let number: u32 = "42".parse()?;
    drop(vec![number; 4]);
    Ok(())
}

/// A broken budget names the function that allocated most, from the block's own samples (64 KiB apart by
/// default in a test binary), while other tests allocate beside it.
#[test]
fn a_broken_budget_names_the_function_that_allocated() {
    use memprof::__private::{Budget, Comparison, Quantity, budgeted};
    let budget = Budget {
        quantity: Quantity::Allocated,
        comparison: Comparison::AtMost,
        limit: 1 << 20,
        written: "allocated <= \"1 MiB\"",
    };
    let failure = std::panic::catch_unwind(|| budgeted("budgets::cache", &[budget], || drop(fill_the_cache(16_384))))
        .expect_err("16 MiB breaks a budget of 1 MiB");
    let message = failure.downcast_ref::<String>().expect("a formatted message");
    println!("{message}");
    assert!(message.starts_with("budgets::cache broke its heap budget:\n  allocated <= \"1 MiB\": "), "{message}");
    let stacks = message.split_once("the functions that allocated the most").map(|(_, stacks)| stacks);
    let first = stacks.and_then(|stacks| stacks.lines().nth(1)).unwrap_or_default();
    assert!(first.contains("memprof_tests::blocks::fill_the_cache"), "{message}");
    assert!(!message.contains("memprof_runtime::"), "memprof's own frames are not shown: {message}");
}

#[test]
fn usage_prints_its_figures() {
    let (_, usage): (Vec<u8>, Usage) = memprof::measure(|| Vec::with_capacity(4096));
    assert!(usage.to_string().starts_with("allocated 4096 B (4.0 KiB) in 1 object, freed 0 B"), "{usage}");
}

/// The example measures exactly: the scratch buffer is 64 KiB, one object, freed.
#[test]
fn the_measure_example_prints_exact_figures() {
    let output = Command::new(env!("CARGO_BIN_EXE_measure")).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = String::from_utf8(output.stdout).unwrap();
    let scratch = "a scratch buffer: allocated 65536 B (64.0 KiB) in 1 object, freed 65536 B (64.0 KiB) in 1 object, \
                   live 0 B, peak 65536 B (64.0 KiB)";
    assert!(printed.lines().any(|line| line == scratch), "{printed}");
    assert!(printed.starts_with("an index of 1000 entries: allocated "), "{printed}");
}

/// A measure's stacks are its own: not those of a measure before it (whose label number it may reuse),
/// also past the bound on label sets (more measures than a process records label sets).
#[test]
fn each_measure_names_only_its_own_functions_past_the_bound_on_label_sets() {
    for _ in 0..memprof::labels::MAX_LABEL_SETS + 100 {
        drop(memprof::measure(|| drop(vec![0u8; 64])));
    }
    let (cache, first) = memprof::measure(|| fill_the_cache(16_384));
    drop(cache);
    let (records, second) = memprof::measure(|| parse_records(1024));
    drop(records);
    let named = |usage: &Usage| usage.stacks.iter().map(|stack| stack.function.clone()).collect::<Vec<_>>();
    assert!(named(&first).iter().any(|function| function.contains("fill_the_cache")), "{first}");
    assert!(named(&second).iter().any(|function| function.contains("parse_records")), "{second}");
    assert!(!named(&second).iter().any(|function| function.contains("fill_the_cache")), "{second}");
}
