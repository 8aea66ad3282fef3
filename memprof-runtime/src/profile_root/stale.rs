//! Who owns a profile directory, and whether that owner has provably ended.
//!
//! Each directory holds an `owner` file naming the process that made it (pid, start time in clock ticks
//! since boot, boot id, machine id), which that process keeps locked (`flock`) for its whole life: the
//! kernel releases the lock when the process ends, however it ends (SIGKILL at an OOM included). So a lock
//! that can be taken proves the owner ended, across PID namespaces on one host (a container's sidecar, a
//! restarted container with a new namespace), where a pid looked up in this process's `/proc` proves
//! nothing. A directory made on another machine (shared storage: another machine id) is never judged, nor
//! one of another user, nor one without an owner file. Directories of memprof versions that wrote no
//! machine id (and held no lock) are judged as they were then: by their pid and start time.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

/// The file in each profile directory that names its owner.
pub(crate) const OWNER_FILE: &str = "owner";

/// The longest owner file read: `pid start_time boot_id machine_id` and a newline.
const OWNER_LIMIT: u64 = 256;

/// Where profile directories start their names.
pub(crate) const DIRECTORY_PREFIX: &str = "memprof.";

/// A process, told apart from any later one with the same pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) pid: u32,
    /// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot.
    start_time: u64,
    /// `/proc/sys/kernel/random/boot_id`: start times restart from zero at each boot.
    boot_id: String,
    /// `/etc/machine-id` (or the boot id where there is none); `None` in owner files of memprof versions
    /// that held no lock.
    machine_id: Option<String>,
}

impl Owner {
    /// The process `pid` as it is now, in the boot `boot_id`, if it exists and has not ended (a zombie
    /// has: its parent has yet to reap it, and in a container whose first process reaps nothing, it never
    /// will).
    fn of(pid: u32, boot_id: &str) -> Option<Self> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (state, start_time) = state_and_start_time(&stat)?;
        if state == "Z" || state == "X" {
            return None;
        }
        Some(Owner { pid, start_time, boot_id: boot_id.to_owned(), machine_id: None })
    }

    fn to_line(&self) -> String {
        let machine = self.machine_id.as_deref().map_or_else(String::new, |machine| format!(" {machine}"));
        format!("{} {} {}{machine}\n", self.pid, self.start_time, self.boot_id)
    }

    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        let owner = Owner {
            pid: fields.next()?.parse().ok()?,
            start_time: fields.next()?.parse().ok()?,
            boot_id: fields.next()?.to_owned(),
            machine_id: fields.next().map(str::to_owned),
        };
        fields.next().is_none().then_some(owner)
    }
}

/// The state (field 3) and start time (field 22) in a `/proc/<pid>/stat` line; the command name (field 2)
/// may hold spaces and parentheses, so fields are counted from the last `)`.
/// Parses an owner line (for the fuzz targets: whether it parses, nothing more).
#[cfg(feature = "fuzzing")]
pub(crate) fn parse_owner(line: &str) -> bool {
    Owner::parse(line).is_some()
}

fn state_and_start_time(stat: &str) -> Option<(&str, u64)> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

fn boot_id() -> Option<String> {
    Some(fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?.trim().to_owned())
}

/// This machine: `/etc/machine-id`, else the boot id (a machine without one is told apart by boot).
fn machine_id() -> Option<String> {
    let id = fs::read_to_string("/etc/machine-id").ok().map(|id| id.trim().to_owned());
    id.filter(|id| !id.is_empty()).or_else(boot_id)
}

/// Writes the `owner` file of a new profile directory (this process) and locks it; the lock lasts as long
/// as the returned file is open, which the profile store keeps for the process's life.
pub(crate) fn claim(directory: &Path) -> io::Result<File> {
    let me = boot_id()
        .and_then(|boot_id| Owner::of(std::process::id(), &boot_id))
        .map(|me| Owner { machine_id: machine_id(), ..me })
        .ok_or_else(|| io::Error::other("cannot read this process's start time from /proc/self/stat"))?;
    let path = directory.join(OWNER_FILE);
    fs::write(&path, me.to_line())?;
    let file = File::open(&path)?;
    rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive)?;
    Ok(file)
}

/// Calls `visit` with each profile directory in `parent` (memprof's, this user's, not links) whose owner
/// provably ended, holding the lock on its owner file while `visit` runs, so two processes starting at once
/// do not both take it: one directory at a time, so that a sweep of hundreds holds one open file, not one
/// per directory (which ran out of file descriptors under a low `RLIMIT_NOFILE`).
///
/// Answers the directories that could not be judged, with why (their owner file is not one).
pub(crate) fn for_each_ended(parent: &Path, mut visit: impl FnMut(&Path)) -> Vec<Unjudged> {
    let (Some(boot_id), Some(machine)) = (boot_id(), machine_id()) else {
        return Vec::new();
    };
    let (ours, unreadable) = ours_and_unreadable(parent);
    for (path, owner) in ours {
        if let Some(_lock) = judge(&path, &owner, &machine, |pid| Owner::of(pid, &boot_id)) {
            visit(&path);
        }
    }
    unreadable
}

/// memprof's directories in `parent` that this user made, with their owners.
pub(crate) fn ours(parent: &Path) -> Vec<(PathBuf, Owner)> {
    ours_and_unreadable(parent).0
}

/// A directory that cannot be judged, and why.
pub(crate) type Unjudged = (PathBuf, String);

/// [`ours`], and the directories whose owner file exists but is not one (a link, a FIFO, garbage), with
/// why: they cannot be judged, and are left alone.
fn ours_and_unreadable(parent: &Path) -> (Vec<(PathBuf, Owner)>, Vec<Unjudged>) {
    let mut unreadable = Vec::new();
    let Ok(entries) = fs::read_dir(parent) else {
        return (Vec::new(), unreadable);
    };
    let uid = rustix::process::geteuid().as_raw();
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let is_ours = entry.file_name().to_str().is_some_and(|name| name.starts_with(DIRECTORY_PREFIX));
        // Not following links: a link named memprof.* is not a directory memprof made.
        let Ok(metadata) = fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !is_ours || !metadata.is_dir() || metadata.uid() != uid {
            continue;
        }
        // An owner line is some 100 bytes; a FIFO, a link or a huge file in its place is not one.
        let owner_file = entry.path().join(OWNER_FILE);
        match crate::profile_root::untrusted::read_small_text(&owner_file, OWNER_LIMIT) {
            Ok(line) => match Owner::parse(&line) {
                Some(owner) => found.push((entry.path(), owner)),
                None => unreadable.push((entry.path(), "its owner file is not memprof's".to_owned())),
            },
            // No owner file: a directory being made this instant, or not memprof's; nothing to say.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => unreadable.push((entry.path(), error.to_string())),
        }
    }
    (found, unreadable)
}

/// Whether the owner of the directory at `path` provably ended: `Some`, with the lock taken (none for
/// directories of memprof versions without locks, judged by `living`, what runs now under a pid).
#[allow(clippy::option_option)]
fn judge(path: &Path, owner: &Owner, machine: &str, living: impl Fn(u32) -> Option<Owner>) -> Option<Option<File>> {
    match &owner.machine_id {
        // Another machine's: nothing here can tell whether its owner runs.
        Some(other) if other != machine => None,
        Some(_) => {
            let file = crate::profile_root::untrusted::open_regular(&path.join(OWNER_FILE)).ok()?;
            rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).ok()?;
            Some(Some(file))
        }
        None => {
            let now = living(owner.pid).map(|now| Owner { machine_id: None, ..now });
            (now.as_ref() != Some(owner)).then_some(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_are_read_after_the_command_name() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(state_and_start_time(stat).map(|(_, start)| start), Some(987654));
        let boot_id = boot_id().unwrap();
        assert!(Owner::of(std::process::id(), &boot_id).is_some_and(|me| me.start_time > 0 && !me.boot_id.is_empty()));
    }

    #[test]
    fn a_directory_is_ended_only_when_its_owner_provably_is() {
        let parent = tempfile::tempdir().unwrap();
        let make = |name: &str, owner: Option<&str>| {
            let directory = parent.path().join(name);
            fs::create_dir(&directory).unwrap();
            fs::write(directory.join("profile.1.heap"), "heap_v2/524288\n").unwrap();
            if let Some(owner) = owner {
                fs::write(directory.join(OWNER_FILE), owner).unwrap();
            }
            directory
        };
        let machine = machine_id().unwrap();
        // Locked by a live owner (this process, through another open file: flock locks are per open file).
        let live = make("memprof.live", None);
        let _held = claim(&live).unwrap();
        let unlocked = make("memprof.unlocked", Some(&format!("200 6000 b00t {machine}\n")));
        let elsewhere = make("memprof.elsewhere", Some("200 6000 b00t another-machine\n"));
        // Owner files of memprof versions without locks: judged by pid and start time.
        let old_live = make("memprof.old-live", Some("100 5000 b00t\n"));
        let old_ended = make("memprof.old-ended", Some("200 6000 b00t\n"));
        let old_reused = make("memprof.old-reused", Some("100 4000 b00t\n"));
        let unknown = make("memprof.unknown", None);
        let garbled = make("memprof.garbled", Some("100 x\n"));
        let not_ours = make("other.dir", Some(&format!("200 6000 b00t {machine}\n")));
        std::os::unix::fs::symlink(&unlocked, parent.path().join("memprof.link")).unwrap();
        let living = |pid: u32| {
            (pid == 100).then(|| Owner { pid, start_time: 5000, boot_id: "b00t".to_owned(), machine_id: None })
        };
        let mut ended: Vec<PathBuf> = ours(parent.path())
            .into_iter()
            .filter(|(path, owner)| judge(path, owner, &machine, living).is_some())
            .map(|(path, _)| path)
            .collect();
        ended.sort();
        let mut expected = vec![old_ended, old_reused, unlocked];
        expected.sort();
        assert_eq!(ended, expected);
        for kept in [&live, &elsewhere, &old_live, &unknown, &garbled, &not_ours] {
            assert!(!ended.contains(kept), "{} was judged ended", kept.display());
        }
    }
}
