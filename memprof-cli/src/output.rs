//! Where a result goes: a file (`-o FILE`), standard output as it is (`-o -`, or a pipe), or the terminal,
//! where text is shown through [`crate::terminal::for_terminal`] and binary data is refused.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::Failure;
use crate::terminal::{for_terminal, stdout_is_terminal};

/// What a result is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Content {
    /// Text a person reads: a table, folded stacks, SVG.
    Text,
    /// pprof's gzip, a raw dump: bytes that would garble a terminal.
    Binary,
}

/// Writes what `write` produces to `path` (`-`: standard output, whatever it is), or to standard output.
pub(crate) fn write_to(
    path: Option<&Path>,
    content: Content,
    write: impl FnOnce(&mut dyn Write) -> Result<(), Failure>,
) -> Result<(), Failure> {
    match path {
        Some(path) if path != Path::new("-") => write_file(path, write),
        None if stdout_is_terminal() && content == Content::Binary => Err(Failure::Usage(
            "this is binary data, which would garble the terminal: write it to a file with -o FILE, or pass -o - to send it to the terminal anyway".to_owned(),
        )),
        None if stdout_is_terminal() => {
            let mut text = Vec::new();
            write(&mut text)?;
            print_text(&for_terminal(&String::from_utf8_lossy(&text)))
        }
        _ => {
            let mut out = std::io::stdout().lock();
            write(&mut out)?;
            out.flush().map_err(|error| output_failure(&error))
        }
    }
}

/// Writes what `write` produces to a file beside `path`, renamed to `path` once whole: a failed download
/// (an unknown id, the service gone mid-way) leaves no empty or partial file, and an earlier file at `path`
/// stays as it was.
fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<(), Failure>) -> Result<(), Failure> {
    let refused = |error: std::io::Error| Failure::Refused(format!("{}: {error}", path.display()));
    let name = path.file_name().map_or_else(|| "output".into(), |name| name.to_string_lossy().into_owned());
    let partial = path.with_file_name(format!(".{name}.{}.partial", std::process::id()));
    let written = File::create(&partial).map_err(refused).and_then(|file| {
        let mut file = BufWriter::new(file);
        write(&mut file)?;
        file.flush().map_err(refused)
    });
    let renamed = written.and_then(|()| std::fs::rename(&partial, path).map_err(refused));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    renamed
}

/// Writes `bytes` as [`write_to`] does.
pub(crate) fn write_bytes(bytes: &[u8], path: Option<&Path>, content: Content) -> Result<(), Failure> {
    write_to(path, content, |out| out.write_all(bytes).map_err(|error| output_failure(&error)))
}

/// Prints text for a person (already made safe for a terminal).
pub(crate) fn print_text(text: &str) -> Result<(), Failure> {
    std::io::stdout().lock().write_all(text.as_bytes()).map_err(|error| output_failure(&error))
}

/// A write to the output that failed: a reader that closed the pipe (`| head`) is no error.
pub(crate) fn output_failure(error: &std::io::Error) -> Failure {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::Closed
    } else {
        Failure::Refused(format!("standard output: {error}"))
    }
}
