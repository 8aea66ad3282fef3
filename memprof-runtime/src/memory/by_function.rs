//! What each of the program's functions grew by: the record's growing stacks grouped by the function that
//! allocated them, their bytes split by the labels in force, with the sampling error. The one rule
//! `explain`, `/growing`, `memprof_growing_bytes` and the dashboard give their figures by, so that at one
//! moment they name the same functions with the same bytes. Pure: tested on made-up stacks.

use memprof_analysis::LabelSet;
use memprof_wire::{GrowingStack, LabelledBytes};

/// One of the record's stacks that grew, its function named.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GrownStack {
    /// The program's function that allocated, and the frames as the text download shows them.
    pub(crate) function: String,
    pub(crate) frames: Vec<String>,
    /// The labels its samples carry.
    pub(crate) labels: LabelSet,
    /// What it grew by.
    pub(crate) grown: f64,
    /// Whether it grew and stopped (else it grows now).
    pub(crate) stopped: bool,
    /// What it holds now, the variance of that estimate, and how much of it is older than the age asked.
    pub(crate) held_bytes: f64,
    pub(crate) held_variance: f64,
    pub(crate) older_bytes: f64,
}

/// What one of the program's functions grew by, over its stacks that grew in the same way: those that
/// still grow when any does (what a leak's answers name and `memprof_growing_bytes` gauges), else those that
/// grew and stopped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FunctionGrowth {
    /// The function, its frames, what its stacks grew by with its error, and its split by label.
    pub(crate) stack: GrowingStack,
    /// Whether every stack of it that grew has stopped.
    pub(crate) stopped: bool,
    /// The positions of the stacks counted, in those grouped.
    pub(crate) growers: Vec<usize>,
    /// What those stacks hold now, and how much of it is older than the age asked.
    pub(crate) held_bytes: f64,
    pub(crate) older_bytes: f64,
}

/// `stacks` by their function ([`FunctionGrowth`]), the most grown first. A function's error is that of
/// what its stacks counted hold now ([`sampling_error`]): what grew is held now, and objects held since
/// before the growth was measured from count alike in both readings, so it bounds the growth's error.
pub(crate) fn group(stacks: Vec<GrownStack>) -> Vec<FunctionGrowth> {
    // Each function's stacks' positions, in the order the functions come.
    let mut grouped: Vec<Vec<usize>> = Vec::new();
    for (position, stack) in stacks.iter().enumerate() {
        match grouped.iter_mut().find(|members| stacks[members[0]].function == stack.function) {
            Some(members) => members.push(position),
            None => grouped.push(vec![position]),
        }
    }
    let mut by_function: Vec<FunctionGrowth> = grouped
        .into_iter()
        .map(|members| {
            let stopped = members.iter().all(|&position| stacks[position].stopped);
            let counted: Vec<usize> =
                members.into_iter().filter(|&position| stacks[position].stopped == stopped).collect();
            let first = &stacks[counted[0]];
            let mut stack = GrowingStack {
                function: first.function.clone(),
                frames: first.frames.clone(),
                bytes: 0.0,
                error_bytes: None,
                age: None,
                by_label: Vec::new(),
            };
            let (mut held_bytes, mut older_bytes, mut variance) = (0.0, 0.0, 0.0);
            for &position in &counted {
                let grown = &stacks[position];
                stack.bytes += grown.grown;
                add_by_label(&mut stack.by_label, &grown.labels, grown.grown);
                held_bytes += grown.held_bytes;
                older_bytes += grown.older_bytes;
                variance += grown.held_variance;
            }
            stack.error_bytes = Some(sampling_error(variance));
            finish_by_label(&mut stack.by_label);
            FunctionGrowth { stack, stopped, growers: counted, held_bytes, older_bytes }
        })
        .collect();
    by_function.sort_by(|a, b| b.stack.bytes.total_cmp(&a.stack.bytes));
    by_function
}

/// The error answers give for an estimate of `variance`: two standard errors (the truth is within it of
/// the estimate about 95 times in 100).
pub(crate) fn sampling_error(variance: f64) -> f64 {
    2.0 * variance.max(0.0).sqrt()
}

/// Counts `bytes` under `labels` (the empty set as [`memprof_analysis::NO_LABEL`]).
pub(crate) fn add_by_label(split: &mut Vec<LabelledBytes>, labels: &LabelSet, bytes: f64) {
    let labels = if labels.is_empty() { memprof_analysis::NO_LABEL.to_owned() } else { labels.to_string() };
    match split.iter_mut().find(|share| share.labels == labels) {
        Some(share) => share.bytes += bytes,
        None => split.push(LabelledBytes { labels, bytes }),
    }
}

/// The split as answered: the most first, and none at all when nothing was labelled (a program that does
/// not label gets no split of one line).
pub(crate) fn finish_by_label(split: &mut Vec<LabelledBytes>) {
    if split.iter().all(|share| share.labels == memprof_analysis::NO_LABEL) {
        split.clear();
    }
    split.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = (1 << 20) as f64;

    fn grown(function: &str, grown: f64, stopped: bool, labels: &[(&str, &str)]) -> GrownStack {
        GrownStack {
            function: function.to_owned(),
            frames: vec![function.to_owned()],
            labels: LabelSet::new(labels.iter().copied()),
            grown: grown * MIB,
            stopped,
            held_bytes: grown * MIB,
            held_variance: (grown * MIB / 10.0).powi(2),
            older_bytes: 0.0,
        }
    }

    /// A function with a stack still growing counts only its stacks still growing (what the gauge and a
    /// leak name); one whose stacks all stopped counts them all; the error adds their variances. On the
    /// main of the day issue 61 was filed, `/growing` summed both kinds (12.06 MB) where the gauge summed
    /// the growing (3.67 MB).
    #[test]
    fn a_function_counts_the_stacks_that_grew_as_it_did() {
        let grouped = group(vec![
            grown("app::cache", 3.0, false, &[("tenant", "acme")]),
            grown("app::index", 10.0, true, &[]),
            grown("app::cache", 8.0, true, &[]),
            grown("app::cache", 4.0, false, &[]),
            grown("app::index", 2.0, true, &[]),
        ]);
        let said: Vec<(&str, f64, bool, &[usize])> = grouped
            .iter()
            .map(|function| {
                (function.stack.function.as_str(), function.stack.bytes / MIB, function.stopped, &function.growers[..])
            })
            .collect();
        assert_eq!(said, [("app::index", 12.0, true, &[1, 4][..]), ("app::cache", 7.0, false, &[0, 3][..])]);
        let cache = &grouped[1];
        assert_eq!(cache.held_bytes, 7.0 * MIB);
        let error = cache.stack.error_bytes.unwrap();
        assert!((error - 2.0 * (0.09_f64 + 0.16).sqrt() * MIB).abs() < 1.0, "{error}");
        let split: Vec<(&str, f64)> =
            cache.stack.by_label.iter().map(|share| (share.labels.as_str(), share.bytes / MIB)).collect();
        assert_eq!(split, [("(none)", 4.0), ("tenant=acme", 3.0)]);
    }

    #[test]
    fn bytes_split_by_label_only_when_something_is_labelled() {
        let mut split = Vec::new();
        add_by_label(&mut split, &LabelSet::default(), 4.0);
        finish_by_label(&mut split);
        assert!(split.is_empty(), "{split:?}");
        let acme = LabelSet::new([("tenant", "acme")]);
        for (labels, bytes) in [(&acme, 1.0), (&LabelSet::default(), 1.0), (&acme, 2.0)] {
            add_by_label(&mut split, labels, bytes);
        }
        finish_by_label(&mut split);
        let said: Vec<(&str, f64)> = split.iter().map(|share| (share.labels.as_str(), share.bytes)).collect();
        assert_eq!(said, [("tenant=acme", 3.0), ("(none)", 1.0)]);
    }
}
