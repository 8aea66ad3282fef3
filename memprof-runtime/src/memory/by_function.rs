//! What each of the program's functions grew by: the record's growing stacks grouped by the function that
//! allocated them, their bytes split by the labels in force. Pure: tested on made-up stacks.

use memprof_analysis::LabelSet;
use memprof_wire::LabelledBytes;

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
