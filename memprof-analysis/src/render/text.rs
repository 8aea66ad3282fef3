//! jeprof's `--text` table.
//!
//! ```text
//! Total: 20.3 MB
//!     16.0  78.9%  78.9%     16.0  78.9% service::open_session
//!      4.0  19.7%  98.6%      4.0  19.7% service::index_document
//! ```

use std::collections::{HashMap, HashSet};

use super::options::RenderOptions;
use super::shown::{megabytes, percent, shown_names};
use crate::analysis::Analysis;

/// The bytes a function allocated itself (flat) and with its callees (cumulative).
#[derive(Debug, Default, Clone, Copy)]
struct Row {
    flat: f64,
    cumulative: f64,
}

/// What an empty in-use profile says, instead of an empty table.
const NOTHING_LIVE: &str = "# No sampled allocation was live when this profile was taken: an in-use profile holds what was \
still allocated at its dump. Profile while the load runs (a run that ends during it), or start the program with \
MALLOC_CONF=prof_accum:true and read what was allocated in all (/debug/pprof/allocs).\n";

/// The table, one row per function (per `function file:line` with `options.lines`), largest flat first.
/// For a difference, `base_total` is the base profile's bytes: percentages are of it (a net total near zero
/// would make them meaningless), and the first line says so.
pub(super) fn render(analysis: &Analysis, options: &RenderOptions, base_total: Option<f64>) -> String {
    let mut rows: HashMap<String, Row> = HashMap::new();
    for sample in &analysis.samples {
        let labels = shown_names(analysis, sample, options);
        if let Some(allocating) = labels.first() {
            rows.entry(allocating.clone()).or_default().flat += sample.bytes;
        }
        let mut counted = HashSet::new();
        for label in labels {
            if counted.insert(label.clone()) {
                rows.entry(label).or_default().cumulative += sample.bytes;
            }
        }
    }
    // In a difference, what both profiles hold cancels out: such rows say nothing.
    let mut rows: Vec<(String, Row)> =
        rows.into_iter().filter(|(_, row)| row.flat.abs() >= 0.5 || row.cumulative.abs() >= 0.5).collect();
    rows.sort_by(|(a_name, a), (b_name, b)| {
        b.flat.total_cmp(&a.flat).then(b.cumulative.total_cmp(&a.cumulative)).then_with(|| a_name.cmp(b_name))
    });
    let (_, net) = analysis.total();
    let (total, mut table) = match base_total {
        // A base that held nothing gives no percentages: they are of this total instead.
        Some(base) if base.abs() < 0.5 => (
            net,
            format!("Total: {} MB (a difference from an empty base; percentages of this total)\n", megabytes(net)),
        ),
        Some(base) => (
            base,
            format!("Total: {} MB (a difference; percentages of the base's {} MB)\n", megabytes(net), megabytes(base)),
        ),
        None => (net, format!("Total: {} MB\n", megabytes(net))),
    };
    if rows.is_empty() && analysis.samples.iter().any(|sample| sample.bytes != 0.0) {
        table.push_str("# No difference: both profiles hold the same bytes at every stack\n");
    } else if rows.is_empty() && base_total.is_none() {
        table.push_str(NOTHING_LIVE);
    }
    let mut running = 0.0;
    for (name, row) in rows {
        running += row.flat;
        table.push_str(&format!(
            "{:>8} {:>6} {:>6} {:>8} {:>6} {name}\n",
            megabytes(row.flat),
            percent(row.flat, total),
            percent(running, total),
            megabytes(row.cumulative),
            percent(row.cumulative, total),
        ));
    }
    for note in analysis.notes().into_iter().chain(analysis.sampling_note()) {
        table.push_str(&format!("# {note}\n"));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Frame, Location, Sample};

    fn analysis(bytes: &[f64]) -> Analysis {
        let frame = |function: &str| Frame { function: function.into(), file: None, line: None };
        Analysis {
            sample_period: 524288,
            known_variance: None,
            calibrated: None,
            samples: bytes
                .iter()
                .enumerate()
                .map(|(index, &bytes)| Sample {
                    locations: vec![index],
                    objects: 1.0,
                    bytes,
                    allocated_objects: 0.0,
                    allocated_bytes: 0.0,
                    labels: Default::default(),
                })
                .collect(),
            locations: (0..bytes.len())
                .map(|index| Location {
                    address: 0x10 * (index as u64 + 1),
                    module: None,
                    frames: vec![frame(&format!("app::f{index}"))].into(),
                })
                .collect(),
            modules: Vec::new(),
            has_allocations: false,
            cautions: Vec::new(),
            measure: Default::default(),
        }
    }

    #[test]
    fn a_difference_of_equal_profiles_says_there_is_none() {
        let profile = analysis(&[3e6, 1e6]);
        let text = render(&profile.minus(&profile), &RenderOptions::default(), None);
        assert_eq!(text, "Total: 0.0 MB\n# No difference: both profiles hold the same bytes at every stack\n");
        let grown = analysis(&[3e6, 2e6]);
        let text = render(&grown.minus(&profile), &RenderOptions::default(), None);
        assert_eq!(text, "Total: 1.0 MB\n     1.0 100.0% 100.0%      1.0 100.0% app::f1\n");
    }

    #[test]
    fn an_empty_profile_says_why_and_an_empty_base_gives_percentages_of_the_total() {
        let empty = analysis(&[]);
        let text = render(&empty, &RenderOptions::default(), None);
        assert!(
            text.starts_with("Total: 0.0 MB\n# No sampled allocation was live when this profile was taken"),
            "{text}"
        );
        let later = analysis(&[3e6, 1e6]);
        let text = render(&later.minus(&empty), &RenderOptions::default(), Some(0.0));
        assert!(!text.contains("nan"), "{text}");
        assert!(
            text.starts_with("Total: 3.8 MB (a difference from an empty base; percentages of this total)\n"),
            "{text}"
        );
        assert!(text.contains("  2.9  75.0%  75.0%      2.9  75.0% app::f0\n"), "{text}");
    }

    #[test]
    fn a_difference_gives_percentages_of_its_base() {
        let base = analysis(&[3e6, 1e6]);
        // One grew by as much as the other shrank: the net total is zero, the base is 4 MB.
        let later = analysis(&[2e6, 2e6]);
        let text = render(&later.minus(&base), &RenderOptions::default(), Some(base.total().1));
        assert_eq!(
            text,
            "Total: 0.0 MB (a difference; percentages of the base's 3.8 MB)\n\
             \x20    1.0  25.0%  25.0%      1.0  25.0% app::f1\n\
             \x20   -1.0 -25.0%   0.0%     -1.0 -25.0% app::f0\n"
        );
    }
}
