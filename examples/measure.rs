//! `memprof::measure`: what one block allocates, exactly, on its own thread (the figures heap budgets in
//! tests hold code to: `#[memprof::test(...)]`, docs/budgets.md).
//!
//! ```text
//! cargo run --release --example measure
//! ```
//!
//! Compiled out (`default-features = false`), the block runs and nothing is measured.

memprof::global_allocator!();

fn main() {
    let (index, usage) = memprof::measure(|| (0..1000u64).map(|n| (n, n.to_string())).collect::<Vec<_>>());
    println!("an index of {} entries: {usage}", index.len());
    let ((), usage) = memprof::measure(|| {
        let scratch = vec![0u8; 64 << 10];
        std::hint::black_box(&scratch);
    });
    println!("a scratch buffer: {usage}");
}
