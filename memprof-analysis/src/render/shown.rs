//! What the readable formats show of a sample and of its bytes: its frames' names (split by a label key
//! when asked), megabytes and percentages as jeprof prints them.

use super::options::RenderOptions;
use crate::analysis::{Analysis, Sample};

/// The names a readable format shows for a sample's frames, innermost first: its shown frames
/// ([`Analysis::shown_frames`]) by function, or by `function file:line` with `options.lines`; split by a
/// label key ([`RenderOptions::by`]), under one more, outermost frame `KEY=value` (`KEY=(none)` for a sample
/// without the key), so that the totals stay those of the whole.
pub(super) fn shown_names(analysis: &Analysis, sample: &Sample, options: &RenderOptions) -> Vec<String> {
    let mut names: Vec<String> =
        analysis.shown_frames(sample, options.full).into_iter().map(|frame| frame.label(options.lines)).collect();
    if let Some(key) = &options.by {
        // A label value is whatever the program passed (a tenant or route from its own requests): a
        // newline in it must not start a forged stack, nor an escape byte reach a terminal or an SVG.
        let value = sample.labels.get(key).unwrap_or(crate::labels::NO_LABEL);
        names.push(crate::analysis::without_control_characters(format!("{key}={value}")));
    }
    names
}

/// Bytes as jeprof prints them: MB with one decimal.
pub(super) fn megabytes(bytes: f64) -> String {
    let megabytes = bytes / 1_048_576.0;
    // Less than what one decimal shows, either way, is 0.0 (not -0.0).
    if megabytes.abs() < 0.05 { "0.0".to_owned() } else { format!("{megabytes:.1}") }
}

/// `part` as a percentage of `whole`, as jeprof prints it.
pub(super) fn percent(part: f64, whole: f64) -> String {
    if whole == 0.0 { "nan%".to_owned() } else { format!("{:.1}%", part * 100.0 / whole) }
}
