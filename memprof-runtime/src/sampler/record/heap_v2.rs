//! The record's readings written as jemalloc writes a dump (`heap_v2`), so that every reader of a run's
//! profile (jeprof, `memprof analyze`, every format the endpoints render) reads a window's alike.
//!
//! jemalloc keeps unbiased totals and writes, for each stack, the counts that jeprof's unbiasing (the
//! average size's, `1/(1-exp(-(bytes/count)/R))`) turns back into them (`prof_do_unbias`, prof_data.c); so
//! does this.

use std::fmt::Write;

use super::table::{StackReading, Totals};

/// What a profile written from the record holds of each stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Content {
    /// What it holds (of the reading's objects); cumulative pairs `[0: 0]`.
    Live,
    /// What it holds and, as the cumulative pair, everything it allocated since start-up (`prof_accum`'s
    /// meaning).
    LiveAndAllocated,
}

/// `stacks` as a `heap_v2` dump at sampling period `sample_period`, with `maps` (this process's
/// `/proc/self/maps`) as its `MAPPED_LIBRARIES`. Stacks with nothing to show are left out.
pub(crate) fn write(stacks: &[StackReading], content: Content, sample_period: u64, maps: &str) -> String {
    let shown: Vec<(&StackReading, Totals)> = stacks
        .iter()
        .map(|stack| (stack, if content == Content::Live { Totals::default() } else { stack.allocated }))
        .filter(|(stack, allocated)| stack.live.objects > 0 || allocated.objects > 0)
        .collect();
    let mut total_live = Totals::default();
    let mut total_allocated = Totals::default();
    for (stack, allocated) in &shown {
        total_live.absorb(&stack.live);
        total_allocated.absorb(allocated);
    }
    let mut text = format!("heap_v2/{sample_period}\n");
    counts_line(&mut text, &total_live, &total_allocated, sample_period);
    // A stack walked before its leading functions were judged still has the allocator's frames: left out.
    let code = crate::allocator_code::AllocatorCode::if_read();
    for (stack, allocated) in &shown {
        text.push('@');
        let leading = code.map_or(0, |code| code.leading_frames(&stack.frames));
        for frame in &stack.frames[leading..] {
            let _ = write!(text, " {frame:#x}");
        }
        text.push('\n');
        counts_line(&mut text, &stack.live, allocated, sample_period);
    }
    text.push_str("\nMAPPED_LIBRARIES:\n");
    text.push_str(maps);
    text
}

fn counts_line(text: &mut String, live: &Totals, allocated: &Totals, sample_period: u64) {
    let (objects, bytes) = biased(live, sample_period);
    let (allocated_objects, allocated_bytes) = biased(allocated, sample_period);
    let _ = writeln!(text, "  t*: {objects}: {bytes} [{allocated_objects}: {allocated_bytes}]");
}

/// The counts jeprof's unbiasing turns into `totals`' unbiased ones (jemalloc's `prof_do_unbias`): `o`
/// objects and `b` bytes read back as `b / (1 - exp(-(b / o) / period))` bytes. The objects are whole,
/// so the bytes are solved for with them (by bisection: what is read back grows with `b`), and what is
/// read back is the unbiased bytes (jemalloc rounds the objects and keeps the bytes, which moves the mean
/// size the reader unbiases at: a stack of six 32 KiB samples read 5 % low). A total below what its whole
/// objects can say (each reads back at least one period) is said as jemalloc says it.
fn biased(totals: &Totals, sample_period: u64) -> (u64, u64) {
    if totals.unbiased_objects <= 0.0 || totals.unbiased_bytes <= 0.0 {
        return (0, 0);
    }
    if sample_period <= 1 {
        return (totals.objects, totals.bytes);
    }
    let (period, unbiased) = (sample_period as f64, totals.unbiased_bytes);
    let average = unbiased / totals.unbiased_objects;
    let bytes = unbiased * (1.0 - (-average / period).exp());
    let objects = (bytes / average).round().max(1.0);
    if unbiased <= objects * period {
        return ((bytes / average).round() as u64, bytes.round() as u64);
    }
    let read_back = |bytes: f64| bytes / (1.0 - (-(bytes / objects) / period).exp());
    let (mut low, mut high) = (0.0, unbiased);
    for _ in 0..64 {
        let middle = (low + high) / 2.0;
        if read_back(middle) < unbiased { low = middle } else { high = middle }
    }
    (objects as u64, high.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(objects: &[u64], period: f64) -> Totals {
        let mut totals = Totals::default();
        objects.iter().for_each(|&bytes| totals.add(bytes, period));
        totals
    }

    fn reading(frames: Vec<usize>, live: Totals, allocated: Totals) -> StackReading {
        StackReading { frames, born: 1, live, allocated, live_older_bytes: 0.0 }
    }

    /// What the analysis reads back is what the record holds, unbiased (exactly for a stack of one size:
    /// a mix of sizes loses what the format's whole counts round away, as jemalloc's own dumps do).
    #[test]
    fn the_analysis_reads_back_the_unbiased_totals() {
        let period = 1u64 << 19;
        let live = totals(&[64 << 10, 64 << 10], period as f64);
        let allocated = totals(&[64 << 10, 64 << 10, 64 << 10, 64 << 10, 64 << 10], period as f64);
        let stacks = [
            reading(vec![0x1000, 0x2000], live, allocated),
            reading(vec![0x3000], Totals::default(), Totals::default()),
        ];
        let maps = "00400000-00500000 r-xp 00000000 00:00 0 /bin/program\n";
        let text = write(&stacks, Content::LiveAndAllocated, period, maps);
        assert!(text.starts_with("heap_v2/524288\n  t*: "), "{text}");
        assert!(!text.contains("0x3000"), "a stack with nothing is left out:\n{text}");
        assert!(text.contains("@ 0x1000 0x2000\n"), "{text}");
        let profile = memprof_analysis::HeapProfile::parse(&text).unwrap();
        let stack = &profile.stacks[0];
        let (objects, bytes) = stack.unbiased(period);
        assert!((objects - live.unbiased_objects).abs() < 0.01 * live.unbiased_objects, "{objects} {live:?}");
        assert!((bytes - live.unbiased_bytes).abs() < 0.01 * live.unbiased_bytes, "{bytes} {live:?}");
        let (_, allocated_bytes) = stack.allocated.unbiased(period);
        assert!((allocated_bytes - allocated.unbiased_bytes).abs() < 0.01 * allocated.unbiased_bytes);
        let live_only = write(&stacks, Content::Live, period, maps);
        // Whole objects and the bytes read back exact: samples of sizes from a word to a few periods, some
        // standing for more than their chance says (a stack's share of a class calibrated).
        for (samples, size, calibrated) in
            [(6, 32768, 1.7), (3, 8, 1.0), (1, 300, 1.0), (40, 4096, 1.1), (2, 3 << 19, 1.3)]
        {
            let objects = f64::from(samples) * crate::sampler::record::table::unbias(size, period as f64) * calibrated;
            let size = size as f64;
            let totals =
                Totals { unbiased_objects: objects, unbiased_bytes: objects * size, ..Totals::unsampled(1.0, 1.0) };
            let text = write(&[reading(vec![0x1000], totals, Totals::default())], Content::Live, period, maps);
            let read = memprof_analysis::HeapProfile::parse(&text).unwrap();
            let (_, bytes) = read.stacks[0].unbiased(period);
            assert!((bytes / (objects * size) - 1.0).abs() < 1e-3, "{objects} of {size}: read {bytes}");
        }
        assert!(live_only.contains("[0: 0]") && !live_only.contains("[5"), "{live_only}");
    }
}
