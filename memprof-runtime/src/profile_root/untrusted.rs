//! Opening and reading files of the profile root, which is not memprof's alone: anyone who can write there
//! as the service's user (a shared volume, a sidecar, a compromised neighbour) can put a link, a FIFO, a
//! directory or a 10 GiB sparse file where memprof expects its own files. Every file is opened without
//! following a link and without blocking (a FIFO with no writer would hold the thread for good), must be a
//! regular file, and is read up to a size that fits its kind.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Opens `path` for reading if it is a regular file reached without a link; never blocks.
///
/// ```ignore
/// let profile = untrusted::open_regular(&directory.join("profile.7.heap"))?;
/// ```
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    // Profiles kept in memory are read through `/proc/self/fd/<n>`, a link to memprof's own memfd.
    let own_memory = path.starts_with("/proc/self/fd");
    let no_follow = if own_memory { 0 } else { libc::O_NOFOLLOW };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => io::Error::new(io::ErrorKind::InvalidData, format!("{} is a link", path.display())),
            _ => error,
        })?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a regular file", path.display())));
    }
    Ok(file)
}

/// A profile to serve or read (see [`open_regular`]), refused when longer than `limit` (a profile larger
/// than every kept profile together may be, `MEMPROF_DUMP_MAX_BYTES`, is not one memprof wrote: a sparse
/// 10 GiB file would otherwise be read whole).
pub(crate) fn open_profile(path: &Path, limit: u64) -> io::Result<File> {
    let file = open_regular(path)?;
    let length = file.metadata()?.len();
    if length > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} holds {length} bytes, more than the {limit} a kept profile may (MEMPROF_DUMP_MAX_BYTES)",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// The bytes of `path` (see [`open_regular`]), refused when longer than `limit`.
pub(crate) fn read_small(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is longer than the {limit} bytes such a file has", path.display()),
        ));
    }
    Ok(bytes)
}

/// The text of `path` (see [`read_small`]); invalid UTF-8 is an error.
pub(crate) fn read_small_text(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_small(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{} is not text", path.display())))
}

/// The latest time a file of the profile root may name, in Unix seconds (2100-01-01): a record claiming a
/// later one was not written by memprof on a working clock.
pub(crate) const LATEST_UNIX_SECONDS: f64 = 4_102_444_800.0;

/// The time `seconds` after the Unix epoch, as a file of the profile root names one (a profile's provenance, the
/// last-seen note, an `ended` mark); `None` when it is not a time such a file can hold (negative, not a
/// number, or after [`LATEST_UNIX_SECONDS`]), so that no number read there reaches arithmetic that panics
/// (`UNIX_EPOCH + Duration::from_secs(u64::MAX)` does).
///
/// ```ignore
/// assert!(untrusted::unix_time(1e19).is_none());
/// ```
pub(crate) fn unix_time(seconds: f64) -> Option<SystemTime> {
    if !(0.0..=LATEST_UNIX_SECONDS).contains(&seconds) {
        return None;
    }
    UNIX_EPOCH.checked_add(Duration::try_from_secs_f64(seconds).ok()?)
}

/// `time` in Unix seconds, as the profile root's records and the answers give times ([`unix_time`]'s
/// inverse).
pub(crate) fn unix_seconds(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}

/// `text` for a log line or a caption: control characters (an escape sequence that would rewrite the
/// operator's terminal) shown escaped.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|character| {
            let escaped: Vec<char> =
                if character.is_control() { character.escape_default().collect() } else { vec![character] };
            escaped
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_directories_and_long_files_are_refused_without_blocking() {
        let directory = tempfile::tempdir().unwrap();
        let path = |name: &str| directory.path().join(name);
        std::fs::write(path("owner"), "4242 1 boot\n").unwrap();
        assert_eq!(read_small_text(&path("owner"), 64).unwrap(), "4242 1 boot\n");
        assert!(read_small(&path("owner"), 4).unwrap_err().to_string().contains("longer than the 4 bytes"));
        std::os::unix::fs::symlink("/dev/zero", path("link")).unwrap();
        assert!(open_regular(&path("link")).unwrap_err().to_string().ends_with("link is a link"));
        rustix::fs::mkfifoat(rustix::fs::CWD, path("fifo"), rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR).unwrap();
        assert!(open_regular(&path("fifo")).unwrap_err().to_string().ends_with("fifo is not a regular file"));
        std::fs::create_dir(path("directory")).unwrap();
        assert!(open_regular(&path("directory")).is_err());
        assert_eq!(printable("http\u{1b}[2J\n"), "http\\u{1b}[2J\\n");
    }

    #[test]
    fn only_times_a_working_clock_gives_are_times() {
        assert_eq!(unix_time(1_795_000_000.5), UNIX_EPOCH.checked_add(Duration::from_secs_f64(1_795_000_000.5)));
        assert_eq!(unix_time(0.0), Some(UNIX_EPOCH));
        for planted in [1e19, u64::MAX as f64, -1.0, f64::NAN, f64::INFINITY, LATEST_UNIX_SECONDS + 1.0] {
            assert_eq!(unix_time(planted), None, "{planted}");
        }
    }
}
