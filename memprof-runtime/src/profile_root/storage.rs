//! Where heap profiles live: one owner-only directory under `MEMPROF_DIR` (else `TMPDIR`, else `/tmp`),
//! created when the first profile is written, re-created if something deletes it, and removed when the
//! program ends. Where no directory can be created (a read-only root filesystem in a container), profiles
//! are kept in memory instead, in anonymous files (`memfd_create`) that jemalloc writes through
//! `/proc/self/fd/<n>`. Each directory records its owner, locked for this process's life (see
//! [`crate::profile_root::stale`]), so that the next memprof process can tell one left behind by a killed process, and keep
//! its evidence (see [`crate::profile_root::evidence`]).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::process::messages;
use crate::profile_root::files::{self, Beside};
use crate::profile_root::stale;

/// Writes a `heap_v2` profile at the path it is given: jemalloc's `prof.dump`, or the record's window.
pub(crate) type Dump<'a> = &'a dyn Fn(&Path) -> io::Result<()>;

use crate::process::environment::DIRECTORY as DIRECTORY_VARIABLE;

/// Makes `directory` (`MEMPROF_DIR`, where profile directories are made) and its missing parents
/// owner-only when it does not exist, so that profiles and their views go to disk rather than into memory;
/// answers the directory made, or why it could not be (`None` when there was nothing to make).
pub(crate) fn make_parent_directory(directory: &Path) -> Option<Result<PathBuf, String>> {
    if directory.as_os_str().is_empty() || directory.exists() {
        return None;
    }
    let made = fs::DirBuilder::new().recursive(true).mode(0o700).create(directory);
    Some(made.map(|()| directory.to_path_buf()).map_err(|error| {
        format!("{DIRECTORY_VARIABLE}={} does not exist and cannot be made ({error})", directory.display())
    }))
}

/// The profile store. Writing a profile goes through a temporary name and a rename, so a download never
/// sees a partial file and a failed dump never touches an earlier profile.
#[derive(Debug)]
pub(crate) struct ProfileStore {
    /// The text of the label table written beside each profile, when labels were entered (given by the
    /// store's maker: the labels are theirs, not the store's).
    label_table: fn() -> Option<String>,
    /// Where its directory is made (`MEMPROF_DIR`, else `TMPDIR`, else `/tmp`).
    parent: PathBuf,
    directory: Option<TempDir>,
    /// The directory's `owner` file, locked while this process lives (see [`crate::profile_root::stale`]).
    owner_lock: Option<File>,
    /// Profiles kept in memory, by the `/proc/self/fd/<n>` path that reads them; closing the file frees it.
    in_memory: HashMap<PathBuf, File>,
    /// Whether the fall-back to memory was reported already.
    reported_in_memory: bool,
    /// Why profiles are not where they were (a directory the process can no longer write, say after it
    /// changed its user), for `state`'s warnings.
    moved: Option<String>,
}

impl ProfileStore {
    /// An empty store, making its directory in `parent` and writing `label_table`'s text beside each
    /// profile.
    pub(crate) fn new(parent: PathBuf, label_table: fn() -> Option<String>) -> Self {
        ProfileStore {
            parent,
            label_table,
            directory: None,
            owner_lock: None,
            in_memory: HashMap::new(),
            reported_in_memory: false,
            moved: None,
        }
    }

    /// Why profiles are kept elsewhere than they were, or in memory, if they are.
    pub(crate) fn warning(&self) -> Option<&str> {
        self.moved.as_deref()
    }

    /// Where the profiles are: the directory, or `None` before the first one or when they are in memory.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.directory.as_ref().map(TempDir::path)
    }

    /// Whether profiles are being kept in memory, for want of a writable directory.
    pub(crate) fn in_memory(&self) -> bool {
        !self.in_memory.is_empty() && self.directory.is_none()
    }

    /// The directory, created (mode 0700, a fresh random name) if it does not exist yet or was deleted.
    fn ensure_directory(&mut self) -> io::Result<&Path> {
        if self.path().is_some_and(|path| !path.is_dir()) {
            self.directory = None;
        }
        if self.directory.is_none() {
            let parent = &self.parent;
            let directory = tempfile::Builder::new()
                .prefix(stale::DIRECTORY_PREFIX)
                .permissions(fs::Permissions::from_mode(0o700))
                .tempdir_in(parent)
                .map_err(|error| {
                    io::Error::new(
                        error.kind(),
                        format!(
                            "cannot create a profile directory in {} ({error}); point {DIRECTORY_VARIABLE} or TMPDIR at a writable directory",
                            parent.display()
                        ),
                    )
                })?;
            // Without its owner on record and locked, a directory left by a killed process could never be
            // told from a live one's.
            self.owner_lock = Some(stale::claim(directory.path())?);
            self.directory = Some(directory);
        }
        Ok(self.directory.as_ref().map(TempDir::path).expect("created above"))
    }

    /// Writes `bytes` as the file `name` of the directory (made if need be), owner-only, under a temporary
    /// name then renamed: a reader sees the previous file or this one, never half of one.
    pub(crate) fn write_small_file(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let directory = self.ensure_directory()?.to_owned();
        let partial = directory.join(format!(".{name}.partial"));
        let written = write_owner_only(&partial, bytes).and_then(|()| fs::rename(&partial, directory.join(name)));
        if written.is_err() {
            // A full disk leaves nothing half-written behind.
            let _ = fs::remove_file(&partial);
        }
        written
    }

    /// Writes run `id`'s profile with `dump` (which writes a `heap_v2` profile at the path it is given) and
    /// returns the finished file's path.
    pub(crate) fn dump(&mut self, id: u64, dump: Dump<'_>) -> io::Result<PathBuf> {
        self.dump_as(&format!("profile.{id}.heap"), dump)
    }

    /// Writes automatic dump `id` with `dump`.
    pub(crate) fn automatic(&mut self, id: u64, dump: Dump<'_>) -> io::Result<PathBuf> {
        self.dump_as(&format!("automatic.{id}.heap"), dump)
    }

    /// Writes a profile with `dump`, outside any run, and returns it open, already removed from the store.
    pub(crate) fn snapshot(&mut self, id: u64, dump: Dump<'_>) -> io::Result<(File, String)> {
        let name = format!("snapshot.{id}.heap");
        let path = self.dump_as(&name, dump)?;
        let file = crate::profile_root::untrusted::open_regular(&path);
        self.remove(&path);
        Ok((file?, name))
    }

    fn dump_as(&mut self, name: &str, dump: Dump<'_>) -> io::Result<PathBuf> {
        match self.dump_in_directory(name, dump) {
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied && self.directory.is_some() => {
                // The directory was writable and is no longer: the process changed its user (a daemon that
                // drops root after binding), or someone changed its mode. A new one is made as the process
                // now is, else the profiles go to memory; the profiles kept in the old one stay there.
                let old = self.directory.take().map(TempDir::keep);
                self.owner_lock = None;
                let old = old.map_or_else(String::new, |old| old.display().to_string());
                let moved = match self.dump_in_directory(name, dump) {
                    Ok(finished) => {
                        self.say_moved(format!(
                            "The profile directory {old} can no longer be written ({error}: did the process change its user?); profiles are kept in {} from now on, and those kept before stay in the old one",
                            self.path().map_or_else(String::new, |path| path.display().to_string())
                        ));
                        return Ok(finished);
                    }
                    Err(again) => format!(
                        "the profile directory {old} can no longer be written ({error}: did the process change its user?), nor can a new one be made ({again})"
                    ),
                };
                self.directory = None;
                // Said as the profiles go to memory; kept for `state`.
                let finished = self.dump_in_memory(name, &io::Error::new(error.kind(), moved.clone()), dump)?;
                self.moved = Some(format!("Heap profiles are kept in memory: {moved}"));
                Ok(finished)
            }
            Err(error) if self.directory.is_none() => self.dump_in_memory(name, &error, dump),
            written => written,
        }
    }

    /// Says why profiles moved, and keeps it for `state`.
    fn say_moved(&mut self, why: String) {
        messages::warn(&why);
        self.moved = Some(why);
    }

    /// Writes a profile with `dump` in the directory (made if need be).
    fn dump_in_directory(&mut self, name: &str, dump: Dump<'_>) -> io::Result<PathBuf> {
        let directory = self.ensure_directory()?.to_owned();
        let partial = directory.join(format!(".{name}.partial"));
        let finished = directory.join(name);
        let written = dump(&partial).and_then(|()| check_profile(&partial));
        let (partial_variance, variance) = (files::variance_of(&partial), files::variance_of(&finished));
        if let Err(error) = written.and_then(|()| fs::rename(&partial, &finished)) {
            let _ = fs::remove_file(&partial);
            let _ = fs::remove_file(&partial_variance);
            return Err(error);
        }
        // The variance its maker wrote beside it, if any, goes with it (none: readers estimate the error).
        if fs::rename(&partial_variance, &variance).is_err() {
            let _ = fs::remove_file(&variance);
        }
        // The label table travels beside the profile, for readers outside this process (`memprof
        // analyze`, the next process after a crash); a profile without it still reads, unlabelled.
        if let Some(table) = (self.label_table)() {
            let written = write_owner_only(&Beside::Labels.of(&finished), table.as_bytes());
            if let Err(error) = written {
                messages::warn(&format!("Cannot write the label table beside {} ({error})", finished.display()));
            }
        }
        Ok(finished)
    }

    /// Dumps into an anonymous in-memory file, because `why` says no directory can be used.
    fn dump_in_memory(&mut self, name: &str, why: &io::Error, dump: Dump<'_>) -> io::Result<PathBuf> {
        let file = File::from(rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?);
        let path = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file)));
        dump(&path).and_then(|()| check_profile(&path))?;
        if !self.reported_in_memory {
            self.reported_in_memory = true;
            messages::warn(&format!("Heap profiles are kept in memory: {why}"));
        }
        self.in_memory.insert(path.clone(), file);
        Ok(path)
    }

    /// Deletes a profile that is no longer kept, and every file beside it. A file already gone is not an
    /// error.
    pub(crate) fn remove(&mut self, path: &Path) {
        if self.in_memory.remove(path).is_none() {
            crate::profile_root::files::remove_all(path);
        }
    }

    /// Removes the directory and every profile in it.
    pub(crate) fn remove_all(&mut self) {
        self.in_memory.clear();
        if let Some(directory) = self.directory.take() {
            let _ = directory.close();
        }
        self.owner_lock = None;
    }
}

/// Writes `variance` as the known sampling variance of the profile at `file` ([`files::variance_of`]), with
/// what its calibration left out where it was calibrated. Best effort: where it cannot be written (a
/// profile kept in memory), readers estimate the error instead.
pub(crate) fn write_variance(file: &Path, variance: f64, calibrated: Option<memprof_analysis::Calibrated>) {
    let text = memprof_analysis::variance_text(variance, calibrated);
    let _ = write_owner_only(&files::variance_of(file), text.as_bytes());
}

/// Writes `bytes` to a new file at `path` that only the owner can read.
pub(crate) fn write_owner_only(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?.write_all(bytes)
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
