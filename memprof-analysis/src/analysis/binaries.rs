//! Which files a profile's symbols are read from: the binaries its memory map names, the running image, or
//! unstripped builds standing in for stripped ones.

use std::path::{Path, PathBuf};

/// Which files to read symbols from.
///
/// ```
/// use memprof_analysis::Binaries;
/// // The files the dump's memory map names.
/// let mapped = Binaries::as_mapped();
/// // In the profiled process: the same, but the running program's own image if its file was replaced.
/// let live = Binaries::this_process();
/// // Offline: an unstripped build stands in for the binary of the same file name (or the main program).
/// let offline = Binaries::replacing(["/builds/service.debug"]);
/// # let _ = (mapped, live, offline);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Binaries {
    replacements: Vec<PathBuf>,
    /// The dump was taken by this process: its main program can be read through `/proc/self/exe`.
    this_process: bool,
}

impl Binaries {
    /// Read each binary from the path in the dump's memory map.
    pub fn as_mapped() -> Self {
        Self::default()
    }

    /// In the process that took the dump: each binary from its mapped path, except the main program when
    /// the file at its path is no longer the one running (replaced by a deploy, or deleted): then the
    /// running image itself, through `/proc/self/exe`.
    pub fn this_process() -> Self {
        Self { this_process: true, ..Self::default() }
    }

    /// Read these files instead of the mapped binaries of the same file name; a file whose name matches no
    /// mapped binary replaces the main program (the first binary mapped).
    pub fn replacing<P: Into<PathBuf>>(files: impl IntoIterator<Item = P>) -> Self {
        Self { replacements: files.into_iter().map(Into::into).collect(), this_process: false }
    }

    pub(super) fn file_for(&self, mapped: &str, main_program: &str) -> PathBuf {
        let file_name = |path: &Path| path.file_name().map(|name| name.to_owned());
        let mapped_name = file_name(Path::new(mapped));
        let named = self.replacements.iter().find(|file| file_name(file) == mapped_name);
        let unmatched = || {
            (mapped == main_program)
                .then(|| self.replacements.iter().find(|file| file_name(file) != mapped_name))
                .flatten()
        };
        let running = || (self.this_process && mapped == main_program).then(|| running_image(mapped)).flatten();
        named.or_else(unmatched).cloned().or_else(running).unwrap_or_else(|| PathBuf::from(mapped))
    }
}

/// `/proc/self/exe` when the file at `mapped` is not this process's executable (a different file now, or
/// none: `/proc/self/maps` then says `(deleted)`).
#[cfg(unix)]
fn running_image(mapped: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    const EXE: &str = "/proc/self/exe";
    let running = std::fs::metadata(EXE).ok()?;
    let same = std::fs::metadata(mapped).is_ok_and(|file| (file.dev(), file.ino()) == (running.dev(), running.ino()));
    (!same).then(|| PathBuf::from(EXE))
}

/// Elsewhere there is no `/proc/self/exe`: the mapped file is read as it is.
#[cfg(not(unix))]
fn running_image(_mapped: &str) -> Option<PathBuf> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_stands_in_for_the_binary_of_its_name_else_for_the_main_program() {
        let binaries = Binaries::replacing(["/builds/service", "/builds/debug/libfoo.so"]);
        let file = |mapped: &str| binaries.file_for(mapped, "/srv/app/service");
        assert_eq!(file("/srv/app/service"), Path::new("/builds/service"), "same file name");
        assert_eq!(file("/usr/lib/libfoo.so"), Path::new("/builds/debug/libfoo.so"), "same file name");
        assert_eq!(file("/usr/lib/libc.so.6"), Path::new("/usr/lib/libc.so.6"), "no replacement: as mapped");
        let unnamed = Binaries::replacing(["/builds/service.debug"]);
        assert_eq!(unnamed.file_for("/srv/app/service", "/srv/app/service"), Path::new("/builds/service.debug"));
        assert_eq!(unnamed.file_for("/usr/lib/libc.so.6", "/srv/app/service"), Path::new("/usr/lib/libc.so.6"));
        assert_eq!(
            Binaries::as_mapped().file_for("/srv/app/service", "/srv/app/service"),
            Path::new("/srv/app/service")
        );
    }
}
