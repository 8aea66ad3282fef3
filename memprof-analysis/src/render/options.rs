//! What a caller may choose of a rendering: lines or functions, every frame, a title, a split or filter by
//! label, pprof's default sample type and comments.

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
    /// OTLP only: where the profiles come from (the resource's attributes) and the time they cover.
    pub resource: super::OtlpResource,
}
