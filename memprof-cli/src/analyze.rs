//! `memprof analyze`: a raw jemalloc dump, symbolized offline with the unstripped binary, in any format.

use std::fs;
use std::path::{Path, PathBuf};

use clap::Args;
use memprof_analysis::{Analysis, Binaries, Format, HeapProfile, RenderOptions};

/// Symbolize a raw heap profile (download/raw) and write it as text, folded stacks, a flame graph, a
/// call graph or pprof.
///
/// Production binaries are often stripped: pass the unstripped build of the same source with
/// `--binary`; it stands in for the mapped binary of the same file name, else for the main program.
#[derive(Debug, Args)]
pub(crate) struct Analyze {
    /// The raw profile (jemalloc's heap_v2 format).
    profile: PathBuf,
    /// Binaries to read symbols from instead of the paths in the profile's memory map (repeatable).
    #[arg(long = "binary", value_name = "FILE")]
    binaries: Vec<PathBuf>,
    /// The output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Show what grew since this earlier raw profile of the same program.
    #[arg(long, value_name = "PROFILE")]
    base: Option<PathBuf>,
    /// One row or node per source line instead of per function.
    #[arg(long)]
    lines: bool,
    /// Every frame, down to the program's start (pprof always has them).
    #[arg(long)]
    full: bool,
    /// Where to write the result (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

impl Analyze {
    pub(crate) fn run(self) -> Result<(), String> {
        let binaries = Binaries::replacing(self.binaries.iter().cloned());
        for binary in &self.binaries {
            if !binary.is_file() {
                return Err(format!("{}: no such file", binary.display()));
            }
        }
        let analysis = analyze(&self.profile, &binaries)?;
        let base = self.base.as_deref().map(|base| analyze(base, &binaries)).transpose()?;
        let options = RenderOptions { lines: self.lines, full: self.full, ..RenderOptions::default() };
        let rendered = self.format.render(&analysis, base.as_ref(), &options).map_err(|error| error.to_string())?;
        // The text table ends with its notes; the other formats are read by programs (or carry the notes
        // where only a viewer shows them): say them here too.
        if self.format != Format::Text {
            let mut notes = analysis.notes();
            for note in base.iter().flat_map(Analysis::notes) {
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            for note in notes {
                eprintln!("memprof: note: {note}");
            }
        }
        crate::write_output(&rendered, self.output.as_deref())
    }
}

fn analyze(path: &Path, binaries: &Binaries) -> Result<Analysis, String> {
    let text = fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let profile = HeapProfile::parse(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(Analysis::new(&profile, binaries))
}
