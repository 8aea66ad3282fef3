//! `memprof analyze`: a raw jemalloc dump, symbolized offline with the unstripped binary, in any format.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Args;
use memprof_analysis::{Analysis, Binaries, Format, LabelSets, RenderOptions, labels_path};

use crate::failure::Failure;
use crate::output::{self, Content};
use crate::terminal::for_terminal;

/// A label key, as `--by` takes it.
pub(crate) fn label_key(key: &str) -> Result<String, memprof_wire::InvalidLabel> {
    memprof_wire::label_key(key).map(str::to_owned)
}

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
    /// Split by this label key: each stack under a root frame KEY=value (text, graph, flamegraph,
    /// collapsed; pprof carries every label as a tag).
    #[arg(long, value_name = "KEY", value_parser = label_key)]
    by: Option<String>,
    /// Only the samples with this label: KEY:VALUE (KEY:(none) for the samples without KEY).
    #[arg(long, value_name = "KEY:VALUE", value_parser = memprof_wire::label_filter)]
    label: Option<(String, String)>,
    /// Where to write the result (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// The largest dump read: a million sampled stacks take some 60 MiB.
const MAX_DUMP: u64 = 256 << 20;

impl Analyze {
    pub(crate) fn run(self) -> Result<(), Failure> {
        for binary in &self.binaries {
            regular_file(binary, "--binary")?;
        }
        let binaries = Binaries::replacing(self.binaries.iter().cloned());
        let analysis = analyze(&self.profile, &binaries)?;
        let base = self.base.as_deref().map(|base| analyze(base, &binaries)).transpose()?;
        let options = RenderOptions {
            lines: self.lines,
            full: self.full,
            by: self.by,
            label: self.label,
            ..RenderOptions::default()
        };
        let rendered = self
            .format
            .render(&analysis, base.as_ref(), &options)
            .map_err(|error| Failure::Refused(error.to_string()))?;
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
                eprintln!("memprof: note: {}", for_terminal(&note));
            }
        }
        let content = if self.format.is_binary() { Content::Binary } else { Content::Text };
        output::write_bytes(&rendered, self.output.as_deref(), content)
    }
}

/// Refuses what is not a regular file (a directory, a FIFO, `/dev/zero`), saying what it is.
fn regular_file(path: &Path, what: &str) -> Result<(), Failure> {
    let metadata = fs::metadata(path).map_err(|error| Failure::Refused(format!("{}: {error}", path.display())))?;
    if metadata.is_file() {
        return Ok(());
    }
    let kind = if metadata.is_dir() { "a directory" } else { "not a regular file (a device, a FIFO or a socket)" };
    Err(Failure::Usage(format!("{}: {what} needs a file, and this is {kind}", path.display())))
}

fn analyze(path: &Path, binaries: &Binaries) -> Result<Analysis, Failure> {
    regular_file(path, "the profile")?;
    let refused = |error: &dyn std::fmt::Display| Failure::Refused(format!("{}: {error}", path.display()));
    let file = fs::File::open(path).map_err(|error| refused(&error))?;
    let mut text = String::new();
    file.take(MAX_DUMP + 1).read_to_string(&mut text).map_err(|error| refused(&error))?;
    if text.len() as u64 > MAX_DUMP {
        return Err(refused(&format!(
            "larger than {} MiB, more than memprof reads as a dump; it was not analyzed",
            MAX_DUMP >> 20
        )));
    }
    let mut analysis = Analysis::of_dump(&text, binaries, &label_table(path)?).map_err(|error| refused(&error))?;
    if let Some((variance, calibrated)) = variance_file(path).as_deref().and_then(memprof_analysis::parse_variance_file)
    {
        (analysis.known_variance, analysis.calibrated) = (Some(variance), calibrated);
    }
    Ok(analysis)
}

/// The file its maker kept beside the profile (`<profile>.variance`): the variance of its total, each sample
/// weighed by the interval it was drawn at, and what a calibration by size class left out, for the error
/// the readable formats say; none when there is no such file (the error is then estimated from the
/// profile's own counts, as where it does not read as one).
fn variance_file(profile: &Path) -> Option<String> {
    let mut text = String::new();
    let file = fs::File::open(memprof_analysis::variance_path(profile)).ok()?;
    file.take(memprof_analysis::MAX_VARIANCE_FILE).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The label table kept beside the profile (`<profile>.labels`, written by the service and downloaded by
/// `memprof download --format raw`); none when there is no such file (an unlabelled profile).
fn label_table(profile: &Path) -> Result<LabelSets, Failure> {
    let path = labels_path(profile);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(LabelSets::default()),
        Err(error) => return Err(Failure::Refused(format!("{}: {error}", path.display()))),
    };
    LabelSets::parse(&text).map_err(|error| Failure::Refused(format!("{}: {error}", path.display())))
}
