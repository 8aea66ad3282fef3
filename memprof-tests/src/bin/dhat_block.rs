//! dhat, the peer for exact heap measures, measuring a block of [`memprof_tests::blocks`] with its own
//! global allocator: prints `allocated_objects allocated_bytes live_bytes peak_bytes` of the block, for
//! tests/budgets.rs to hold memprof's measure of the same block to. `dhat_block parse_records <records>`.

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let records: usize = match arguments.get(1..).unwrap_or_default() {
        [block, records] if block == "parse_records" => records.parse().expect("a count of records"),
        _ => panic!("usage: dhat_block parse_records <records>"),
    };
    let _profiler = dhat::Profiler::builder().testing().build();
    let start = dhat::HeapStats::get();
    let kept = memprof_tests::blocks::parse_records(records);
    let end = dhat::HeapStats::get();
    assert!(end.max_bytes > start.max_bytes, "the block's peak is above the profiler's own");
    println!(
        "{} {} {} {}",
        end.total_blocks - start.total_blocks,
        end.total_bytes - start.total_bytes,
        end.curr_bytes as i64 - start.curr_bytes as i64,
        end.max_bytes - start.curr_bytes
    );
    drop(kept);
}
