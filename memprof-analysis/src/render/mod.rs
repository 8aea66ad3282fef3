//! The formats an [`Analysis`] is served in: jeprof's text table, folded stacks, flame graphs, a call
//! graph, pprof's protobuf and OpenTelemetry's profiles (OTLP). Each can show the difference from a base
//! profile.
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
mod interned;
mod options;
mod otlp;
mod pprof;
mod rust_names;
mod shown;
mod text;

use std::borrow::Cow;
use std::fmt;

pub use options::RenderOptions;
pub use otlp::OtlpResource;

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
    /// OpenTelemetry's profiles signal: an OTLP `ExportProfilesServiceRequest` (protobuf), the body of a
    /// `POST /v1development/profiles` to an OpenTelemetry Collector or Pyroscope.
    Otlp,
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
    pub const ALL: [Format; 6] =
        [Format::Text, Format::Collapsed, Format::FlameGraph, Format::Graph, Format::Pprof, Format::Otlp];

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
            Format::Otlp => "otlp",
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
            Format::Otlp => "application/x-protobuf",
        }
    }

    /// Whether it is binary (protobuf): downloaded as an attachment, never printed to a terminal.
    ///
    /// ```
    /// assert!(memprof_analysis::Format::Otlp.is_binary() && !memprof_analysis::Format::Text.is_binary());
    /// ```
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Pprof | Format::Otlp)
    }

    /// The usual file name extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => "txt",
            Format::Collapsed => "folded",
            Format::FlameGraph | Format::Graph => "svg",
            Format::Pprof => "pb.gz",
            Format::Otlp => "otlp.pb",
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
            Format::Otlp => Ok(otlp::render(difference().as_ref().unwrap_or(analysis), &options.resource)),
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
        assert!(by_route.starts_with(&format!("route={};", crate::labels::NO_LABEL)), "{by_route}");
        assert!(by_route.contains("\nroute=/;"), "{by_route}");
    }

    #[test]
    fn notes_on_the_binaries_head_the_text_and_the_flame_graph() {
        let module = crate::fixtures::module_with_short_names();
        let caution = "the recorder had no room for 3 samples".to_owned();
        let analysis = Analysis {
            modules: vec![module],
            cautions: vec![caution.clone()],
            ..labelled_analysis(&[&[0x1000]], &LabelSets::default())
        };
        assert_eq!(analysis.notes()[0], caution, "what the profile's maker knows it misses comes first");
        assert!(analysis.minus(&analysis).notes().contains(&caution), "a difference keeps it");
        let note = analysis.notes()[1].clone();
        assert!(note.starts_with("short names in /srv/service: inlined functions are named without their path"));
        let options = RenderOptions { full: true, ..RenderOptions::default() };
        let render = |format: Format| String::from_utf8(format.render(&analysis, None, &options).unwrap()).unwrap();
        let text = render(Format::Text);
        assert!(text.contains(&format!("# {caution}\n# {note}\n")), "{text}");
        let svg = render(Format::FlameGraph);
        let subtitle = svg.lines().find(|line| line.contains("id=\"subtitle\"")).unwrap_or_else(|| panic!("{svg}"));
        assert!(subtitle.contains("short names in ") && subtitle.contains(&caution), "{subtitle}");
    }

    /// A sampled profile says how far its total may be from the truth in every readable format; pprof does
    /// not (its scrapers are told by the profile's maker), nor does an unsampled one (period 1).
    #[test]
    fn a_sampled_total_says_its_error_in_the_readable_formats() {
        let unsampled = labelled_analysis(&[&[0x1000]], &LabelSets::default());
        assert_eq!(unsampled.sampling_note(), None);
        let mut analysis = Analysis { sample_period: 1 << 19, ..unsampled };
        analysis.samples[0].objects = 64.0;
        analysis.samples[0].bytes = 64.0 * 65536.0;
        let render = |format: Format| Format::render(format, &analysis, None, &RenderOptions::default()).unwrap();
        let said = "sampled: the total is within +- 2.7 MB of the truth about 95 times in 100";
        let text = String::from_utf8(render(Format::Text)).unwrap();
        assert!(text.starts_with("Total: 4.0 MB\n") && text.contains(&format!("\n# {said} (two ")), "{text}");
        let flame = String::from_utf8(render(Format::FlameGraph)).unwrap();
        assert!(flame.contains(said), "{flame}");
        let graph = String::from_utf8(render(Format::Graph)).unwrap();
        assert!(graph.contains(": 4.0 MB live +- 2.7 MB (sampling, two standard errors), "), "{graph}");
        let minus = analysis.minus(&Analysis { samples: Vec::new(), ..analysis.clone() });
        assert!(minus.sampling_error().is_some(), "growth from nothing is its samples'");
        let shrunk = Analysis { samples: Vec::new(), ..analysis.clone() }.minus(&analysis);
        assert_eq!(shrunk.sampling_error(), None, "a difference that fell is not said");
        // Where the maker knew the variance (each sample's own interval, thinned or not), it is what is said,
        // and a difference's is the sum of both.
        let known = Analysis { known_variance: Some(4.0e12), ..analysis.clone() };
        assert_eq!(known.sampling_error(), Some(4.0e6));
        assert!(
            known.sampling_note().unwrap().contains("+- 3.8 MB") && known.sampling_note().unwrap().contains("drawn at")
        );
        assert_eq!(known.minus(&known).sampling_error(), Some(2.0 * 8.0e12f64.sqrt()));
        assert_eq!(known.minus(&analysis).known_variance, None, "one side estimated: the difference is not said");
        // Counted whole by size class (the whole heap), what that left out is said after the error, in each.
        let calibrated = crate::Calibrated { unreached_bytes: 3 << 20, cached_bytes: 1 << 19 };
        let whole = Analysis { calibrated: Some(calibrated), ..known.clone() };
        let render =
            |format: Format| String::from_utf8(format.render(&whole, None, &RenderOptions::default()).unwrap());
        let left_out = "up to 3.0 MiB more in classes no live sample reached, in no stack; 0.5 MiB of what is counted";
        assert!(render(Format::Text).unwrap().contains(left_out));
        assert!(render(Format::FlameGraph).unwrap().contains(left_out));
        let graph = render(Format::Graph).unwrap();
        assert!(graph.contains("jemalloc: up to 3.0 MB more in classes no live sample reached), "), "{graph}");
        // Counted whole, its error nil: said, with what was left out.
        let exact = Analysis { known_variance: Some(0.0), ..whole.clone() };
        assert!(exact.sampling_note().unwrap().contains("within +- 0.0 MB"));
        assert!(exact.sampling_note().unwrap().contains(left_out));
        assert_eq!(Analysis { calibrated: None, ..exact }.sampling_note(), None, "an exact total, not calibrated");
        // Not of a difference, nor of one label's share.
        assert_eq!((whole.minus(&whole).calibrated, whole.only_labelled("tenant", "acme").calibrated), (None, None));
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
