//! Where heap profiles live: one owner-only directory under `TMPDIR` (else `/tmp`), created when the first
//! profile is written, re-created if something deletes it, and removed when the program ends.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::jemalloc;

/// The run directory. Writing a profile goes through a temporary name and a rename, so a download never
/// sees a partial file and a failed dump never touches an earlier profile.
#[derive(Debug, Default)]
pub(crate) struct ProfileStore {
    directory: Option<TempDir>,
}

impl ProfileStore {
    /// The directory, if one has been created.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.directory.as_ref().map(TempDir::path)
    }

    /// The directory, created (mode 0700, a fresh random name) if it does not exist yet or was deleted.
    fn ensure_directory(&mut self) -> io::Result<&Path> {
        if self.path().is_some_and(|path| !path.is_dir()) {
            self.directory = None;
        }
        if self.directory.is_none() {
            let parent = std::env::temp_dir();
            let directory = tempfile::Builder::new()
                .prefix("memprof.")
                .permissions(fs::Permissions::from_mode(0o700))
                .tempdir_in(&parent)
                .map_err(|error| {
                    io::Error::new(
                        error.kind(),
                        format!(
                            "cannot create a profile directory in {} ({error}); point TMPDIR at a writable directory",
                            parent.display()
                        ),
                    )
                })?;
            self.directory = Some(directory);
        }
        Ok(self.directory.as_ref().map(TempDir::path).expect("created above"))
    }

    /// Dumps the current heap profile as run `id` and returns the finished file's path.
    pub(crate) fn dump(&mut self, id: u64) -> io::Result<PathBuf> {
        self.dump_as(&format!("profile.{id}.heap"))
    }

    /// Dumps the current heap profile, outside any run, into a file of its own that the caller deletes.
    pub(crate) fn snapshot(&mut self, id: u64) -> io::Result<PathBuf> {
        self.dump_as(&format!("snapshot.{id}.heap"))
    }

    /// Dumps the current heap profile as automatic dump `id`.
    pub(crate) fn automatic(&mut self, id: u64) -> io::Result<PathBuf> {
        self.dump_as(&format!("automatic.{id}.heap"))
    }

    fn dump_as(&mut self, name: &str) -> io::Result<PathBuf> {
        let directory = self.ensure_directory()?;
        let partial = directory.join(format!(".{name}.partial"));
        let finished = directory.join(name);
        let written = jemalloc::dump_profile(&partial).and_then(|()| check_profile(&partial));
        if let Err(error) = written.and_then(|()| fs::rename(&partial, &finished)) {
            let _ = fs::remove_file(&partial);
            return Err(error);
        }
        Ok(finished)
    }

    /// Removes the directory and every profile in it.
    pub(crate) fn remove_all(&mut self) {
        if let Some(directory) = self.directory.take() {
            let _ = directory.close();
        }
    }
}

/// Checks that jemalloc wrote a whole heap profile: it starts with `heap_v2/` and is not truncated.
fn check_profile(path: &Path) -> io::Result<()> {
    let text = fs::read(path)?;
    if text.starts_with(b"heap_v2/") && text.windows(18).any(|window| window == b"\nMAPPED_LIBRARIES:") {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "jemalloc wrote an incomplete heap profile to {} ({} bytes); is the disk full?",
            path.display(),
            text.len()
        )))
    }
}

/// Deletes a profile that is no longer kept. A file already gone is not an error.
pub(crate) fn remove_profile(path: &Path) {
    let _ = fs::remove_file(path);
}
