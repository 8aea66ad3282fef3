//! The stacks a leak is named by: those holding the most of a heap profile ([`holders`]), and those that
//! grew steadily over the continuous record's last hour, with how old what they hold is
//! ([`grown_in_the_record`]; over time, [`growing_series`]), each by the program's function that allocated
//! them: for `explain`'s leak verdict, `/metrics` and the dashboard (`/growing`).

use std::collections::HashMap;

use memprof_analysis::{Analysis, Binaries, LabelSet, Sample};
use memprof_wire::{GrowingStack, HeldAge};

use crate::memory::by_function::{self, FunctionGrowth, GrownStack, add_by_label, finish_by_label};
use crate::memory::{Growth, Holders};
use crate::sampler::record::table::Table;
use crate::sampler::record::{self, Grower};

/// Why stacks could not be named: this process's maps could not be read, or the record's stacks did not
/// read back as the samples written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unnamed(String);

impl std::fmt::Display for Unnamed {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// How many stacks a leak verdict names.
const STACKS_NAMED: usize = 5;

/// The stacks `explain` names for `growth` (the leak rule's, over the process's live bytes), while sampling
/// is on (`sampling`): by the record's one history of what grew (sampled continuously, its last hour; on
/// demand, the run's time), the still growing for a leak, the stopped for a step; else, before the record
/// can tell, by the stacks holding the most in the heap now (`heap_now`, symbolized only then). None
/// without growth or sampling.
pub(crate) fn named_for_explain<E: From<Unnamed>>(
    growth: Option<Growth>,
    sampling: bool,
    record: Option<&Table>,
    heap_now: impl FnOnce() -> Result<Analysis, E>,
) -> Result<Holders, E> {
    let Some(growth) = growth.filter(|_| sampling) else { return Ok(Holders::default()) };
    let which = if growth.flat_seconds.is_none() { Growing::Now } else { Growing::Stopped };
    if let Some(grown) = record.map(|record| grown_in_the_record(record, STACKS_NAMED, which)).transpose()?.flatten() {
        return Ok(grown);
    }
    let heap = heap_now()?;
    let mut stacks = holders(&heap);
    stacks.truncate(STACKS_NAMED);
    Ok(Holders { stacks, grown_over: None, grown_in_all: None, unsure: !heap.knows_the_programs_code() })
}

/// Which of the record's growing stacks an answer names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Growing {
    /// Those that still grow now (a leak's; what `/metrics` gauges).
    Now,
    /// Those that grew and stopped (a step's).
    Stopped,
}

/// The `named` functions whose stacks grew the most over the record's last hour ([`record::growers`]) and
/// grow now or stopped, as `which` says ([`by_function`]: the figures `/growing` and `/metrics` give), with
/// how old what they hold is: `None` when none did.
pub(crate) fn grown_in_the_record(record: &Table, named: usize, which: Growing) -> Result<Option<Holders>, Unnamed> {
    let Some((growers, older_than)) = growers_now(record) else { return Ok(None) };
    let watched = growers[0].growth.seconds;
    let (functions, unsure) = by_function(&growers)?;
    let mut chosen: Vec<FunctionGrowth> =
        functions.into_iter().filter(|function| function.stopped == (which == Growing::Stopped)).collect();
    if chosen.is_empty() {
        return Ok(None);
    }
    let grown_in_all = chosen.iter().map(|function| function.stack.bytes).sum();
    chosen.truncate(named);
    let stacks = chosen
        .into_iter()
        .map(|FunctionGrowth { mut stack, held_bytes, older_bytes, .. }| {
            stack.age = Some(HeldAge {
                held_bytes,
                older_share: if held_bytes > 0.0 { (older_bytes / held_bytes).min(1.0) } else { 0.0 },
                older_than_seconds: f64::from(older_than),
            });
            stack
        })
        .collect();
    Ok(Some(Holders { stacks, grown_over: Some(f64::from(watched)), grown_in_all: Some(grown_in_all), unsure }))
}

/// The functions that grew the most over the record's last hour ([`by_function`]), each with what its
/// stacks held at every reading (Unix milliseconds, bytes), for the dashboard's chart (empty when none
/// grew), and whether they may be dependencies' functions.
pub(crate) fn growing_series(
    record: &Table,
    named: usize,
) -> Result<(Vec<memprof_wire::GrowingSeries>, bool), Unnamed> {
    let Some((growers, _)) = growers_now(record) else { return Ok((Vec::new(), false)) };
    let (mut functions, unsure) = by_function(&growers)?;
    functions.truncate(named);
    let indexes: Vec<u32> = growers.iter().map(|grower| grower.growth.stack).collect();
    let readings = record::history_of(&indexes);
    let series = functions
        .into_iter()
        .map(|function| memprof_wire::GrowingSeries {
            stopped: function.stopped,
            grown_bytes: function.stack.bytes,
            grown_error_bytes: function.stack.error_bytes,
            points: readings
                .iter()
                .map(|(time, bytes)| memprof_wire::SeriesPoint {
                    time: *time,
                    bytes: function.growers.iter().map(|&position| f64::from(bytes[position])).sum(),
                })
                .collect(),
            function: function.stack.function,
        })
        .collect();
    Ok((series, unsure))
}

/// `growers` by the program's function that allocated them ([`by_function::group`]), the most grown first,
/// and whether those functions may be dependencies'.
fn by_function(growers: &[Grower]) -> Result<(Vec<FunctionGrowth>, bool), Unnamed> {
    let Named { functions, unsure } = functions_of(growers)?;
    let stacks: Vec<GrownStack> = growers
        .iter()
        .zip(functions)
        .map(|(grower, (function, frames, labels))| GrownStack {
            function,
            frames,
            labels,
            grown: grower.growth.grown,
            stopped: grower.growth.flat_seconds.is_some(),
            held_bytes: grower.held.live.unbiased_bytes,
            held_variance: grower.held.live.variance,
            older_bytes: grower.held.older_bytes,
        })
        .collect();
    Ok((by_function::group(stacks), unsure))
}

/// The stacks that grew steadily, with what they hold and the age [`HeldAge::older_share`] is of; `None`
/// when none did.
fn growers_now(record: &Table) -> Option<(Vec<Grower>, u32)> {
    let (growers, older_than) = record::growers(record, |watched| OLDER_THAN.min(watched / 2));
    (growers.first()?.growth.seconds > 0).then_some((growers, older_than))
}

/// Each grower's allocating function ([`Analysis::allocating_frame`]) and its frames as the text download
/// shows them, in order: one symbolization of all their frames, one sample each; and whether those
/// functions may be dependencies' ([`Analysis::knows_the_programs_code`]).
fn functions_of(growers: &[Grower]) -> Result<Named, Unnamed> {
    let text = record::growers_as_dump(growers, &|grower| grower.growth.grown)
        .map_err(|error| Unnamed(format!("Cannot read /proc/self/maps ({error})")))?;
    let analysis = Analysis::of_dump(&text, &Binaries::this_process(), &crate::labels::table_now())
        .map_err(|error| Unnamed(format!("The record's stacks do not read back: {error}")))?;
    if analysis.samples.len() != growers.len() {
        return Err(Unnamed(format!(
            "The record's {} growing stacks read back as {} samples",
            growers.len(),
            analysis.samples.len()
        )));
    }
    let functions = analysis
        .samples
        .iter()
        .map(|sample| {
            let function =
                analysis.allocating_frame(sample).map_or_else(|| "?".to_owned(), |frame| frame.function.to_string());
            let frames = frames_through(&analysis, sample, &function);
            (function, frames, sample.labels.clone())
        })
        .collect();
    Ok(Named { functions, unsure: !analysis.knows_the_programs_code() })
}

/// The growers' allocating functions, each with its frames and the labels its samples carry, in order, and
/// whether those may be dependencies' functions (the program has no debug info to tell its own code by).
struct Named {
    functions: Vec<(String, Vec<String>, LabelSet)>,
    unsure: bool,
}

/// The age [`HeldAge::older_share`] is of: ten minutes, or half the time the record watched when shorter.
const OLDER_THAN: u32 = 600;

/// The stacks holding the most live sampled bytes, grouped by the program's function that allocated
/// ([`Analysis::allocating_frame`]: the first frame of the program's own code).
fn holders(analysis: &Analysis) -> Vec<GrowingStack> {
    let mut by_function: HashMap<&str, GrowingStack> = HashMap::new();
    for sample in analysis.samples.iter().filter(|sample| sample.bytes > 0.0) {
        let Some(site) = analysis.allocating_frame(sample) else {
            continue;
        };
        let holder = by_function.entry(&site.function).or_insert_with(|| GrowingStack {
            function: site.function.to_string(),
            frames: frames_through(analysis, sample, &site.function),
            bytes: 0.0,
            error_bytes: None,
            age: None,
            by_label: Vec::new(),
        });
        holder.bytes += sample.bytes;
        add_by_label(&mut holder.by_label, &sample.labels, sample.bytes);
    }
    let mut holders: Vec<GrowingStack> = by_function.into_values().collect();
    holders.iter_mut().for_each(|holder| finish_by_label(&mut holder.by_label));
    holders.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
    holders
}

/// A stack's frames as the text download shows them, allocation site first, through the program's
/// allocating `function` and a few past it (12 at least): std's map code alone takes a dozen frames, and
/// the CLI starts a stack where the function is.
fn frames_through(analysis: &Analysis, sample: &Sample, function: &str) -> Vec<String> {
    let frames = analysis.shown_frames(sample, false);
    let through = frames.iter().position(|frame| &*frame.function == function).map_or(0, |at| at + 7);
    frames.iter().take(through.max(12)).map(|frame| frame.function.to_string()).collect()
}
