//! Where a result goes: a file (`-o FILE`), standard output as it is (`-o -`, or a pipe), or the terminal,
//! where text is shown through [`crate::terminal::for_terminal`] and binary data is refused.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::failure::Failure;
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
/// stays as it was. A link to a file is kept (the file it names is replaced). Something at `path` that is not
/// a file (`/dev/null`, a FIFO, a terminal) is written to as it is: renaming over it would replace it.
fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<(), Failure>) -> Result<(), Failure> {
    let refused = |error: std::io::Error| Failure::Refused(format!("{}: {error}", path.display()));
    let written = |file: File| {
        let mut file = BufWriter::new(file);
        write(&mut file)?;
        file.flush().map_err(refused)
    };
    if std::fs::metadata(path).is_ok_and(|metadata| !metadata.is_file()) {
        return File::create(path).map_err(refused).and_then(written);
    }
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let name = real.file_name().map_or_else(|| "output".into(), |name| name.to_string_lossy().into_owned());
    let partial = real.with_file_name(format!(".{name}.{}.partial", std::process::id()));
    let renamed = File::create(&partial)
        .map_err(refused)
        .and_then(written)
        .and_then(|()| std::fs::rename(&partial, &real).map_err(refused));
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt;

    use super::*;

    fn hello(out: &mut dyn Write) -> Result<(), Failure> {
        out.write_all(b"hello").map_err(|error| output_failure(&error))
    }

    #[test]
    fn dev_null_stays_a_device_and_a_fifo_a_fifo() {
        write_file(Path::new("/dev/null"), hello).unwrap();
        assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device(), "/dev/null was replaced");
        let directory = std::env::temp_dir().join(format!("memprof-cli-output-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let fifo = directory.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_file(&fifo, hello).unwrap();
        assert_eq!(reader.join().unwrap(), b"hello");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn a_link_to_a_file_is_kept_and_the_file_replaced() {
        let directory = std::env::temp_dir().join(format!("memprof-cli-link-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let (file, link) = (directory.join("profile.txt"), directory.join("latest.txt"));
        std::fs::write(&file, "old").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_file(&link, hello).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello");
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
