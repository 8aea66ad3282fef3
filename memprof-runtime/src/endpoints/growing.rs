//! The stacks a leak is named by: those holding the most of a heap profile ([`holders`]), and those that
//! grew steadily over the continuous record's last hour, with how old what they hold is
//! ([`grown_in_the_record`]), each by the program's function that allocated them: for `explain`'s leak
//! verdict and `/metrics`.

use std::collections::HashMap;

use memprof_analysis::{Analysis, Binaries};
use memprof_wire::{GrowingStack, HeldAge};

use crate::http::HttpError;
use crate::memory::Holders;
use crate::profiler::record::table::Table;
use crate::profiler::record::{self, Grower};

/// The `named` stacks that grew the most over the record's last hour ([`record::growers`]), by the
/// program's function that allocated, with how old what they hold is: `None` when none grew.
pub(super) fn grown_in_the_record(record: &Table, named: usize) -> Result<Option<Holders>, HttpError> {
    let watched = record::growers(record, u32::MAX).first().map(|grower| grower.growth.seconds);
    let Some(watched) = watched.filter(|seconds| *seconds > 0) else { return Ok(None) };
    let older_than = OLDER_THAN.min(watched / 2);
    let growers = record::growers(record, older_than);
    let symbolized = |bytes: &dyn Fn(&Grower) -> f64| -> Result<HashMap<String, GrowingStack>, HttpError> {
        let text = record::growers_as_dump(&growers, bytes)
            .map_err(|error| HttpError::internal(format!("Cannot read /proc/self/maps ({error})")))?;
        let analysis = Analysis::of_dump(&text, &Binaries::this_process(), &crate::labels::table_now())
            .map_err(|error| HttpError::internal(format!("The record's stacks do not read back: {error}")))?;
        Ok(holders(&analysis).into_iter().map(|stack| (stack.function.clone(), stack)).collect())
    };
    let grown = symbolized(&|grower| grower.growth.grown)?;
    let held = symbolized(&|grower| grower.held.live.unbiased_bytes)?;
    let older = symbolized(&|grower| grower.held.older_bytes)?;
    let mut stacks: Vec<GrowingStack> = grown
        .into_values()
        .map(|mut stack| {
            let held_bytes = held.get(&stack.function).map_or(0.0, |held| held.bytes);
            let older_bytes = older.get(&stack.function).map_or(0.0, |older| older.bytes);
            stack.age = Some(HeldAge {
                held_bytes,
                older_share: if held_bytes > 0.0 { (older_bytes / held_bytes).min(1.0) } else { 0.0 },
                older_than_seconds: f64::from(older_than),
            });
            stack
        })
        .collect();
    stacks.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
    stacks.truncate(named);
    Ok(Some(Holders { stacks, grown_over: Some(f64::from(watched)) }))
}

/// The age [`HeldAge::older_share`] is of: ten minutes, or half the time the record watched when shorter.
const OLDER_THAN: u32 = 600;

/// The stacks holding the most live sampled bytes, grouped by the program's function that allocated
/// ([`Analysis::allocating_frame`]: the first frame of the program's own code).
pub(super) fn holders(analysis: &Analysis) -> Vec<GrowingStack> {
    let mut by_function: HashMap<&str, GrowingStack> = HashMap::new();
    for sample in analysis.samples.iter().filter(|sample| sample.bytes > 0.0) {
        let frames = analysis.shown_frames(sample, false);
        let Some(site) = analysis.allocating_frame(sample) else {
            continue;
        };
        let holder = by_function.entry(&site.function).or_insert_with(|| GrowingStack {
            function: site.function.to_string(),
            frames: frames.iter().take(12).map(|frame| frame.function.to_string()).collect(),
            bytes: 0.0,
            age: None,
        });
        holder.bytes += sample.bytes;
    }
    let mut holders: Vec<GrowingStack> = by_function.into_values().collect();
    holders.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
    holders
}
