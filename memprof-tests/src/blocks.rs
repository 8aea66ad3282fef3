//! Blocks whose heap use is known exactly, measured by memprof in tests/budgets.rs and by dhat in a
//! program of its own (src/bin/dhat_block.rs): every size asked for is one of jemalloc's size classes, so
//! what dhat counts (sizes asked for) and what jemalloc counts (size classes) are the same bytes.

/// A parser's shape: a line buffer grown by doubling (reallocations), records kept, scratch freed. Returns
/// what it keeps.
///
/// ```
/// let kept = memprof_tests::blocks::parse_records(8);
/// assert_eq!(kept.len(), 8);
/// ```
#[inline(never)]
pub fn parse_records(records: usize) -> Vec<Box<[u8; 48]>> {
    let mut kept = Vec::with_capacity(records);
    let mut line: Vec<u8> = Vec::with_capacity(64);
    for record in 0..records {
        // 64, 128, 256 and 512 bytes: each growth a reallocation to the next power of two.
        line.clear();
        let wanted = 64 << (record % 4);
        if line.capacity() < wanted {
            line.reserve_exact(wanted);
        }
        line.extend(std::iter::repeat_n(b'x', 16));
        let scratch = vec![0u8; 4096];
        std::hint::black_box(&scratch);
        kept.push(Box::new([record as u8; 48]));
    }
    kept
}

/// A cache filled with `entries` buffers of 1 KiB, the most a function of the program allocates: the
/// function a broken budget names.
#[inline(never)]
pub fn fill_the_cache(entries: usize) -> Vec<Vec<u8>> {
    (0..entries).map(|entry| vec![entry as u8; 1024]).collect()
}
