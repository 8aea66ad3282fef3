//! The formats an [`Analysis`] is served in: jeprof's text table, folded stacks, flame graphs, a call
//! graph, and pprof's protobuf. Each can show the difference from a base profile.
//!
//! ```no_run
//! use memprof_analysis::{Analysis, Binaries, Format, HeapProfile, RenderOptions};
//!
//! let profile = HeapProfile::parse(&std::fs::read_to_string("memprof.1795354618996.heap")?)?;
//! let analysis = Analysis::new(&profile, &Binaries::this_process());
//! let svg = Format::FlameGraph.render(&analysis, None, &RenderOptions::default())?;
//! std::fs::write("heap.svg", svg)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod folded;
mod graph;
mod pprof;
mod text;

use std::borrow::Cow;
use std::fmt;

use crate::analysis::Analysis;

/// An output format. With the `clap` feature, a command-line value named as [`Format::name`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// jeprof's `--text` table: flat, flat%, sum%, cum, cum% and the function, in MB.
    Text,
    /// Folded stacks, `outer;...;allocating function <bytes>` per line (Brendan Gregg's format).
    Collapsed,
    /// An interactive SVG flame graph.
    #[cfg_attr(feature = "clap", value(name = "flamegraph"))]
    FlameGraph,
    /// An SVG call graph: boxes sized by the bytes a function allocated, edges weighted by bytes.
    Graph,
    /// gzip-compressed pprof `profile.proto`, for `go tool pprof`, Pyroscope and Parca.
    Pprof,
}

/// Choices that change what a format shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RenderOptions {
    /// One row or node per source line (`function file:line`) instead of per function.
    pub lines: bool,
    /// A title for the formats that show one.
    pub title: String,
    /// Every frame, down to `_start`: without it, text, folded stacks, flame graphs and call graphs stop at
    /// the frame that starts the user's code, as Rust's short backtraces do (pprof always keeps every frame,
    /// as Go's heap profiles keep `runtime.main`; Pyroscope and Parca filter there).
    pub full: bool,
    /// pprof only, for a profile with allocation totals: make `alloc_space` the default sample type, as
    /// in Go's `allocs` profile (else `inuse_space`, as in `heap`).
    pub allocations_first: bool,
    /// Split the readable formats by this label key: each stack under a root frame `KEY=value`
    /// (`KEY=(none)` for samples without it). pprof carries every label as a tag instead (`-tags`).
    pub by: Option<String>,
    /// Keep only the samples whose label `.0` is `.1` (`(none)`: the samples without `.0`), in every format.
    pub label: Option<(String, String)>,
    /// pprof only: comments to carry (`go tool pprof -comments`), before the notes on the binaries.
    pub comments: Vec<String>,
}

/// Why a profile could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError(String);

impl fmt::Display for RenderError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for RenderError {}

impl Format {
    /// Every format, in the order the endpoints list them.
    pub const ALL: [Format; 5] = [Format::Text, Format::Collapsed, Format::FlameGraph, Format::Graph, Format::Pprof];

    /// The name used in URLs and on the command line.
    ///
    /// ```
    /// use memprof_analysis::Format;
    /// assert_eq!(Format::FlameGraph.name(), "flamegraph");
    /// assert_eq!(Format::from_name("pprof"), Some(Format::Pprof));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Collapsed => "collapsed",
            Format::FlameGraph => "flamegraph",
            Format::Graph => "graph",
            Format::Pprof => "pprof",
        }
    }

    /// The format with this [`name`](Format::name).
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|format| format.name() == name)
    }

    /// The HTTP content type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text | Format::Collapsed => "text/plain; charset=utf-8",
            Format::FlameGraph | Format::Graph => "image/svg+xml",
            Format::Pprof => "application/octet-stream",
        }
    }

    /// The usual file name extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => "txt",
            Format::Collapsed => "folded",
            Format::FlameGraph | Format::Graph => "svg",
            Format::Pprof => "pb.gz",
        }
    }

    /// Renders `analysis`, or its difference from `base` when given.
    pub fn render(
        self,
        analysis: &Analysis,
        base: Option<&Analysis>,
        options: &RenderOptions,
    ) -> Result<Vec<u8>, RenderError> {
        let analysis = &*filtered(analysis, options);
        let base = base.map(|base| filtered(base, options));
        let base = base.as_deref();
        let difference = || base.map(|base| analysis.minus(base));
        let rendered = match self {
            Format::Text => {
                let base_total = base.map(|base| base.total().1);
                Ok(text::render(difference().as_ref().unwrap_or(analysis), options, base_total).into_bytes())
            }
            Format::Collapsed => Ok(folded::collapsed(analysis, base, options).into_bytes()),
            Format::FlameGraph => folded::flame_graph(analysis, base, options),
            Format::Graph => Ok(graph::render(difference().as_ref().unwrap_or(analysis), options).into_bytes()),
            Format::Pprof => {
                pprof::render(difference().as_ref().unwrap_or(analysis), options.allocations_first, &options.comments)
            }
        };
        rendered.map_err(|error| RenderError(format!("Cannot render the {} format: {error}", self.name())))
    }
}

/// `analysis` as `options` filter it by label (see [`RenderOptions::label`]); the split by a key
/// ([`RenderOptions::by`]) is made where frames are named ([`shown_names`]), without a copy of the profile.
fn filtered<'a>(analysis: &'a Analysis, options: &RenderOptions) -> Cow<'a, Analysis> {
    match &options.label {
        Some((key, value)) => Cow::Owned(analysis.only_labelled(key, value)),
        None => Cow::Borrowed(analysis),
    }
}

/// The names a readable format shows for a sample's frames, innermost first: its shown frames
/// ([`Analysis::shown_frames`]) by function, or by `function file:line` with `options.lines`; split by a
/// label key ([`RenderOptions::by`]), under one more, outermost frame `KEY=value` (`KEY=(none)` for a sample
/// without the key), so that the totals stay those of the whole.
fn shown_names(analysis: &Analysis, sample: &crate::analysis::Sample, options: &RenderOptions) -> Vec<String> {
    let mut names: Vec<String> =
        analysis.shown_frames(sample, options.full).into_iter().map(|frame| frame.label(options.lines)).collect();
    if let Some(key) = &options.by {
        // A label value is whatever the program passed (a tenant or route from its own requests): a
        // newline in it must not start a forged stack, nor an escape byte reach a terminal or an SVG.
        let value = sample.labels.get(key).unwrap_or(crate::analysis::NO_LABEL);
        names.push(crate::analysis::without_control_characters(format!("{key}={value}")));
    }
    names
}

/// Bytes as jeprof prints them: MB with one decimal.
fn megabytes(bytes: f64) -> String {
    let megabytes = bytes / 1_048_576.0;
    // Less than what one decimal shows, either way, is 0.0 (not -0.0).
    if megabytes.abs() < 0.05 { "0.0".to_owned() } else { format!("{megabytes:.1}") }
}

/// `part` as a percentage of `whole`, as jeprof prints it.
fn percent(part: f64, whole: f64) -> String {
    if whole == 0.0 { "nan%".to_owned() } else { format!("{:.1}%", part * 100.0 / whole) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::labelled_analysis;
    use crate::labels::{LabelSets, label_address};

    #[test]
    fn a_split_puts_each_stack_under_its_value_and_keeps_the_totals() {
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", "acme")]);
        sets.insert(2, [("tenant", "initech"), ("route", "/")]);
        let analysis = labelled_analysis(&[&[0x1000, label_address(1)], &[0x2000], &[0x1000, label_address(2)]], &sets);
        let collapsed = |options: &RenderOptions| {
            String::from_utf8(Format::Collapsed.render(&analysis, None, options).unwrap()).unwrap()
        };
        let whole = collapsed(&RenderOptions::default());
        let split = collapsed(&RenderOptions { by: Some("tenant".to_owned()), ..RenderOptions::default() });
        let roots: Vec<(&str, &str)> = split
            .lines()
            .map(|line| {
                let (stack, bytes) = line.rsplit_once(' ').unwrap();
                (stack.split(';').next().unwrap(), bytes)
            })
            .collect();
        assert_eq!(roots, [("tenant=(none)", "1024"), ("tenant=acme", "1024"), ("tenant=initech", "1024")]);
        assert_eq!(whole.lines().count(), 2, "unsplit, the two tenants' identical stacks are one:\n{whole}");
        let by_route = collapsed(&RenderOptions { by: Some("route".to_owned()), ..RenderOptions::default() });
        assert!(by_route.starts_with(&format!("route={};", crate::analysis::NO_LABEL)), "{by_route}");
        assert!(by_route.contains("\nroute=/;"), "{by_route}");
    }

    #[test]
    fn a_label_value_cannot_forge_a_stack_nor_break_an_svg() {
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", "acme\nINJECTED,frame 999999999\u{1b}[2J\u{7}")]);
        let analysis = labelled_analysis(&[&[0x1000, label_address(1)]], &sets);
        let options = RenderOptions { by: Some("tenant".to_owned()), ..RenderOptions::default() };
        let render = |format: Format| String::from_utf8(format.render(&analysis, None, &options).unwrap()).unwrap();
        let collapsed = render(Format::Collapsed);
        assert_eq!(collapsed.lines().count(), 1, "{collapsed}");
        assert!(
            collapsed.starts_with("tenant=acme\u{fffd}INJECTED,frame 999999999\u{fffd}[2J\u{fffd};"),
            "{collapsed}"
        );
        for format in [Format::Text, Format::FlameGraph, Format::Graph] {
            let rendered = render(format);
            assert!(!rendered.contains(['\u{1b}', '\u{7}']), "{format:?}: {rendered}");
            assert!(!rendered.contains("\nINJECTED"), "{format:?}: {rendered}");
        }
    }
}
