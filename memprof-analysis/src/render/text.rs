//! jeprof's `--text` table.
//!
//! ```text
//! Total: 20.3 MB
//!     16.0  78.9%  78.9%     16.0  78.9% service::open_session
//!      4.0  19.7%  98.6%      4.0  19.7% service::index_document
//! ```

use std::collections::{HashMap, HashSet};

use super::{RenderOptions, megabytes, percent};
use crate::analysis::Analysis;

/// The bytes a function allocated itself (flat) and with its callees (cumulative).
#[derive(Debug, Default, Clone, Copy)]
struct Row {
    flat: f64,
    cumulative: f64,
}

/// The table, one row per function (per `function file:line` with `options.lines`), largest flat first.
pub(super) fn render(analysis: &Analysis, options: &RenderOptions) -> String {
    let mut rows: HashMap<String, Row> = HashMap::new();
    for sample in &analysis.samples {
        let labels: Vec<String> =
            analysis.shown_frames(sample, options.full).into_iter().map(|frame| frame.label(options.lines)).collect();
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
    let mut rows: Vec<(String, Row)> = rows.into_iter().collect();
    rows.sort_by(|(a_name, a), (b_name, b)| {
        b.flat.total_cmp(&a.flat).then(b.cumulative.total_cmp(&a.cumulative)).then_with(|| a_name.cmp(b_name))
    });
    let (_, total) = analysis.total();
    let mut table = format!("Total: {} MB\n", megabytes(total));
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
    for note in analysis.notes() {
        table.push_str(&format!("# {note}\n"));
    }
    table
}
