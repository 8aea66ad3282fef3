//! Folded stacks and the flame graph drawn from them by inferno.

use std::collections::BTreeMap;

use super::options::RenderOptions;
use super::shown::shown_names;
use crate::analysis::Analysis;

/// Bytes per folded stack, outermost frame first; identical stacks merged.
fn fold(analysis: &Analysis, options: &RenderOptions) -> BTreeMap<String, f64> {
    let mut stacks = BTreeMap::new();
    for sample in &analysis.samples {
        let mut frames: Vec<String> =
            shown_names(analysis, sample, options).into_iter().map(|name| name.replace(';', ",")).collect();
        frames.reverse();
        *stacks.entry(frames.join(";")).or_insert(0.0) += sample.bytes;
    }
    stacks
}

/// One line per stack: `outer;...;allocating <bytes>`; with a base, `... <base bytes> <bytes>` (the
/// differential form inferno and Brendan Gregg's `difffolded.pl` use).
pub(super) fn collapsed(analysis: &Analysis, base: Option<&Analysis>, options: &RenderOptions) -> String {
    let current = fold(analysis, options);
    let lines: Vec<String> = match base {
        None => current
            .iter()
            .filter(|(_, bytes)| bytes.round() > 0.0)
            .map(|(stack, bytes)| format!("{stack} {}", bytes.round()))
            .collect(),
        Some(base) => {
            let mut both: BTreeMap<String, (f64, f64)> = BTreeMap::new();
            for (stack, bytes) in fold(base, options) {
                both.entry(stack).or_default().0 = bytes;
            }
            for (stack, bytes) in current {
                both.entry(stack).or_default().1 = bytes;
            }
            both.iter()
                .filter(|(_, (before, after))| before.round() > 0.0 || after.round() > 0.0)
                .map(|(stack, (before, after))| format!("{stack} {} {}", before.round(), after.round()))
                .collect()
        }
    };
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// inferno's interactive SVG; with a base, a differential flame graph (red grew, blue shrank).
pub(super) fn flame_graph(
    analysis: &Analysis,
    base: Option<&Analysis>,
    options: &RenderOptions,
) -> Result<Vec<u8>, String> {
    let folded = collapsed(analysis, base, options);
    let mut settings = inferno::flamegraph::Options::default();
    settings.title = match (&options.title, base) {
        (title, _) if !title.is_empty() => title.clone(),
        (_, None) => "Live heap by allocation stack".to_owned(),
        (_, Some(_)) => "Live heap growth since the base profile".to_owned(),
    };
    let notes: Vec<String> = analysis.notes().into_iter().chain(analysis.sampling_note()).collect();
    settings.subtitle = (!notes.is_empty()).then(|| notes.join("; "));
    settings.count_name = "bytes".to_owned();
    settings.name_type = "Function:".to_owned();
    settings.colors = inferno::flamegraph::color::Palette::Multi(inferno::flamegraph::color::MultiPalette::Rust);
    let mut svg = Vec::new();
    let lines: Vec<&str> = folded.lines().collect();
    if lines.is_empty() {
        return Ok(empty_svg(&settings.title));
    }
    inferno::flamegraph::from_lines(&mut settings, lines, &mut svg).map_err(|error| error.to_string())?;
    Ok(svg)
}

/// A valid SVG that says there is nothing to draw (inferno refuses empty input).
fn empty_svg(title: &str) -> Vec<u8> {
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"600\" height=\"60\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"30\">{}: no live sampled allocations</text></svg>\n",
        super::graph::escape(title)
    )
    .into_bytes()
}
