//! A call graph in SVG, laid out here instead of by graphviz: the callers above their callees in layers,
//! each layer ordered to keep edges short (barycenter sweeps). As in jeprof and pprof, a box's font grows
//! with the bytes its function allocated itself; edges are as thick as the bytes that flowed through them;
//! functions under 0.5% of the heap (and beyond the 80 largest) are left out, and the calls through them
//! are drawn as direct edges between the functions kept.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use super::options::RenderOptions;
use super::shown::{megabytes, percent, shown_names};
use crate::analysis::Analysis;
use crate::known_variance::Calibrated;

const MAX_NODES: usize = 80;
const NODE_FRACTION: f64 = 0.005;
const EDGE_FRACTION: f64 = 0.001;
const CHAR_WIDTH: f64 = 0.6;
const LAYER_GAP: f64 = 70.0;
const NODE_GAP: f64 = 24.0;
const MARGIN: f64 = 20.0;

#[derive(Debug, Default)]
struct Node {
    label: String,
    flat: f64,
    cumulative: f64,
    layer: usize,
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    font: f64,
}

/// The SVG document.
pub(super) fn render(analysis: &Analysis, options: &RenderOptions) -> String {
    let (_, total) = analysis.total();
    let (mut nodes, edges) = graph(analysis, options, total);
    lay_out(&mut nodes, &edges);
    draw(&nodes, &edges, (total, analysis.said_error(), analysis.calibrated), options)
}

/// The kept functions, and the edges between them (caller, callee) with their bytes.
fn graph(analysis: &Analysis, options: &RenderOptions, total: f64) -> (Vec<Node>, BTreeMap<(usize, usize), f64>) {
    let stacks: Vec<(Vec<String>, f64)> = analysis
        .samples
        .iter()
        .map(|sample| {
            let mut labels = shown_names(analysis, sample, options);
            labels.reverse();
            (labels, sample.bytes)
        })
        .collect();
    let mut by_label: HashMap<&str, Node> = HashMap::new();
    for (labels, bytes) in &stacks {
        // A function that recurses counts once per stack; a set, so a deep stack costs its depth, not its
        // depth squared.
        let mut counted: HashSet<&str> = HashSet::new();
        for (depth, label) in labels.iter().enumerate() {
            let node = by_label.entry(label).or_insert_with(|| Node { label: label.clone(), ..Node::default() });
            if counted.insert(label) {
                node.cumulative += bytes;
            }
            if depth + 1 == labels.len() {
                node.flat += bytes;
            }
        }
    }
    let mut nodes: Vec<Node> =
        by_label.into_values().filter(|node| node.cumulative.abs() >= NODE_FRACTION * total.abs()).collect();
    nodes.sort_by(|a, b| b.cumulative.abs().total_cmp(&a.cumulative.abs()).then_with(|| a.label.cmp(&b.label)));
    nodes.truncate(MAX_NODES);
    let index: HashMap<String, usize> = nodes.iter().enumerate().map(|(i, node)| (node.label.clone(), i)).collect();
    let mut edges: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    for (labels, bytes) in &stacks {
        let kept: Vec<usize> = labels.iter().filter_map(|label| index.get(label).copied()).collect();
        let mut seen = HashSet::new();
        for pair in kept.windows(2) {
            let edge = (pair[0], pair[1]);
            if pair[0] != pair[1] && seen.insert(edge) {
                *edges.entry(edge).or_insert(0.0) += bytes;
            }
        }
    }
    edges.retain(|_, bytes| bytes.abs() >= EDGE_FRACTION * total.abs());
    (nodes, edges)
}

/// Layers by depth from the callers that nobody calls, then x by barycenter sweeps, then coordinates.
fn lay_out(nodes: &mut [Node], edges: &BTreeMap<(usize, usize), f64>) {
    let mut layer: Vec<Option<usize>> = vec![None; nodes.len()];
    let has_caller: Vec<bool> = (0..nodes.len()).map(|n| edges.keys().any(|&(_, callee)| callee == n)).collect();
    let mut frontier: Vec<usize> = (0..nodes.len()).filter(|&n| !has_caller[n]).collect();
    if frontier.is_empty() && !nodes.is_empty() {
        frontier.push(0);
    }
    let mut depth = 0;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &n in &frontier {
            if layer[n].is_none() {
                layer[n] = Some(depth);
                next.extend(edges.keys().filter(|&&(caller, _)| caller == n).map(|&(_, callee)| callee));
            }
        }
        frontier = next.into_iter().filter(|&n| layer[n].is_none()).collect();
        depth += 1;
        if frontier.is_empty() {
            // Nodes only reachable through a cycle: start again from the largest one left.
            frontier.extend((0..nodes.len()).find(|&n| layer[n].is_none()));
        }
    }
    let layers = layer.iter().flatten().max().map_or(0, |deepest| deepest + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layers];
    for (n, node) in nodes.iter_mut().enumerate() {
        node.layer = layer[n].unwrap_or(0);
        rows[node.layer].push(n);
    }
    order_rows(&mut rows, edges);
    place(nodes, &rows);
}

/// Orders each layer by the mean position of its neighbours in the layer above, then below, four times.
fn order_rows(rows: &mut [Vec<usize>], edges: &BTreeMap<(usize, usize), f64>) {
    for sweep in 0..4 {
        let downwards = sweep % 2 == 0;
        let mut position: HashMap<usize, f64> = HashMap::new();
        for row in rows.iter() {
            for (i, &n) in row.iter().enumerate() {
                position.insert(n, i as f64);
            }
        }
        let order: Vec<usize> = if downwards { (1..rows.len()).collect() } else { (0..rows.len()).rev().collect() };
        for r in order {
            let barycenter = |n: usize| {
                let neighbours: Vec<f64> = edges
                    .keys()
                    .filter_map(|&(caller, callee)| match downwards {
                        true if callee == n => position.get(&caller).copied(),
                        false if caller == n => position.get(&callee).copied(),
                        _ => None,
                    })
                    .collect();
                let own = position[&n];
                if neighbours.is_empty() { own } else { neighbours.iter().sum::<f64>() / neighbours.len() as f64 }
            };
            let mut keyed: Vec<(f64, usize)> = rows[r].iter().map(|&n| (barycenter(n), n)).collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            rows[r] = keyed.into_iter().map(|(_, n)| n).collect();
            for (i, &n) in rows[r].iter().enumerate() {
                position.insert(n, i as f64);
            }
        }
    }
}

/// Box sizes from the text in them; layers stacked, each centred on the widest.
fn place(nodes: &mut [Node], rows: &[Vec<usize>]) {
    let largest_flat = nodes.iter().map(|node| node.flat.abs()).fold(0.0, f64::max).max(1.0);
    for node in nodes.iter_mut() {
        node.font = 10.0 + 14.0 * (node.flat.abs() / largest_flat).sqrt();
        let longest = display_name(&node.label).chars().count().max(24) as f64;
        node.width = longest * node.font * CHAR_WIDTH + 16.0;
        node.height = node.font * 1.3 + 2.0 * 13.0 + 12.0;
    }
    let row_widths: Vec<f64> =
        rows.iter().map(|row| row.iter().map(|&n| nodes[n].width + NODE_GAP).sum::<f64>() - NODE_GAP).collect();
    let widest = row_widths.iter().copied().fold(0.0, f64::max);
    let mut y = MARGIN + 40.0;
    for (row, row_width) in rows.iter().zip(row_widths) {
        let mut x = MARGIN + (widest - row_width) / 2.0;
        let height = row.iter().map(|&n| nodes[n].height).fold(0.0, f64::max);
        for &n in row {
            nodes[n].x = x;
            nodes[n].y = y + (height - nodes[n].height) / 2.0;
            x += nodes[n].width + NODE_GAP;
        }
        y += height + LAYER_GAP;
    }
}

/// `total` is the bytes shown, with their sampling error where said ([`Analysis::said_error`]) and what a
/// calibration by size class left out where there was one.
fn draw(
    nodes: &[Node],
    edges: &BTreeMap<(usize, usize), f64>,
    (total, error, calibrated): (f64, Option<f64>, Option<Calibrated>),
    options: &RenderOptions,
) -> String {
    let calibrated = calibrated.map_or_else(String::new, |calibrated| {
        format!(
            "; each size class sampled counted whole by jemalloc: up to {} MB more in classes no live sample reached",
            megabytes(calibrated.unreached_bytes as f64)
        )
    });
    let width = nodes.iter().map(|node| node.x + node.width).fold(400.0, f64::max) + MARGIN;
    let height = nodes.iter().map(|node| node.y + node.height).fold(80.0, f64::max) + MARGIN;
    let title = if options.title.is_empty() { "Live heap call graph" } else { &options.title };
    let mut svg = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"Verdana, sans-serif\">\n<title>{}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{MARGIN}\" y=\"{}\" font-size=\"16\">{}: {} MB live{}, {} functions shown</text>\n",
        escape(title),
        MARGIN + 12.0,
        escape(title),
        megabytes(total),
        error
            .map(|error| format!(" +- {} MB (sampling, two standard errors{calibrated})", megabytes(error)))
            .unwrap_or_default(),
        nodes.len()
    );
    let heaviest = edges.values().map(|bytes| bytes.abs()).fold(0.0, f64::max).max(1.0);
    for (&(caller, callee), &bytes) in edges {
        let (from, to) = (&nodes[caller], &nodes[callee]);
        let (x1, y1) = (from.x + from.width / 2.0, from.y + from.height);
        let (x2, y2) = (to.x + to.width / 2.0, to.y);
        let bend = ((y2 - y1).abs() / 2.0).max(40.0);
        let stroke = 1.0 + 5.0 * bytes.abs() / heaviest;
        let _ = writeln!(
            svg,
            "<g class=\"edge\"><title>{} -&gt; {} ({} MB)</title><path d=\"M{x1:.1},{y1:.1} C{x1:.1},{:.1} {x2:.1},{:.1} {x2:.1},{y2:.1}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{stroke:.1}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{} MB</text></g>",
            escape(&from.label),
            escape(&to.label),
            megabytes(bytes),
            y1 + bend,
            y2 - bend,
            colour(bytes, total, 0.35),
            (x1 + x2) / 2.0 + 4.0,
            (y1 + y2) / 2.0,
            megabytes(bytes)
        );
    }
    for node in nodes {
        let cumulative = if node.cumulative == node.flat {
            String::new()
        } else {
            format!("of {} MB ({})", megabytes(node.cumulative), percent(node.cumulative, total))
        };
        let _ = writeln!(
            svg,
            "<g class=\"node\"><title>{}</title><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"4\" fill=\"{}\" stroke=\"#666\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"{:.1}\" text-anchor=\"middle\">{}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{} MB ({})</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{cumulative}</text></g>",
            escape(&node.label),
            node.x,
            node.y,
            node.width,
            node.height,
            colour(node.cumulative, total, 0.9),
            node.x + node.width / 2.0,
            node.y + node.font * 1.1 + 4.0,
            node.font,
            escape(&display_name(&node.label)),
            node.x + node.width / 2.0,
            node.y + node.font * 1.3 + 17.0,
            megabytes(node.flat),
            percent(node.flat, total),
            node.x + node.width / 2.0,
            node.y + node.font * 1.3 + 31.0,
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Long Rust paths are cut in the box (the full name is in its tooltip).
fn display_name(label: &str) -> String {
    const LONGEST: usize = 70;
    if label.chars().count() <= LONGEST {
        return label.to_owned();
    }
    let tail: String = label.chars().rev().take(LONGEST - 1).collect::<Vec<_>>().into_iter().rev().collect();
    format!("…{tail}")
}

/// Red for growth (the more bytes the deeper), green for shrinking in a difference.
fn colour(bytes: f64, total: f64, strength: f64) -> String {
    let share = if total == 0.0 { 0.0 } else { (bytes / total).abs().min(1.0) };
    let fade = (255.0 - 200.0 * share.sqrt() * strength).round() as u8;
    if bytes < 0.0 { format!("#{fade:02x}ff{fade:02x}") } else { format!("#ff{fade:02x}{fade:02x}") }
}

/// Text made safe for XML.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
