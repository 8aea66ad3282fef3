//! Profile directories left behind by memprof processes that ended without cleaning up: killed by a signal
//! they did not handle (SIGTERM from systemd, Kubernetes or `docker stop`; SIGKILL at an OOM), or crashed.
//!
//! Each directory holds an `owner` file naming the process that made it (pid, start time in clock ticks
//! since boot, boot id). At start-up memprof removes the directories, in the parent it writes profiles to,
//! whose owner no longer exists. It never touches a directory of a live process (a pid reused by another
//! program has another start time), one of another user, or one it cannot prove is stale (no owner file).

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::report;

/// The file in each profile directory that names its owner.
pub(crate) const OWNER_FILE: &str = "owner";

/// Where profile directories start their names.
pub(crate) const DIRECTORY_PREFIX: &str = "memprof.";

/// A process, told apart from any later one with the same pid.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    pid: u32,
    /// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot.
    start_time: u64,
    /// `/proc/sys/kernel/random/boot_id`: start times restart from zero at each boot.
    boot_id: String,
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
        Some(Owner { pid, start_time, boot_id: boot_id.to_owned() })
    }

    fn to_line(&self) -> String {
        format!("{} {} {}\n", self.pid, self.start_time, self.boot_id)
    }

    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        let owner = Owner {
            pid: fields.next()?.parse().ok()?,
            start_time: fields.next()?.parse().ok()?,
            boot_id: fields.next()?.to_owned(),
        };
        fields.next().is_none().then_some(owner)
    }
}

/// The state (field 3) and start time (field 22) in a `/proc/<pid>/stat` line; the command name (field 2)
/// may hold spaces and parentheses, so fields are counted from the last `)`.
fn state_and_start_time(stat: &str) -> Option<(&str, u64)> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

fn boot_id() -> Option<String> {
    Some(fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?.trim().to_owned())
}

/// Writes the `owner` file of a new profile directory: this process.
pub(crate) fn claim(directory: &Path) -> io::Result<()> {
    let me = boot_id()
        .and_then(|boot_id| Owner::of(std::process::id(), &boot_id))
        .ok_or_else(|| io::Error::other("cannot read this process's start time from /proc/self/stat"))?;
    fs::write(directory.join(OWNER_FILE), me.to_line())
}

/// Removes the profile directories in `parent` whose owners ended, and reports how many there were.
pub(crate) fn remove_directories_of_ended_processes(parent: &Path) {
    // Read once: every process of a scan shares this boot.
    let Some(boot_id) = boot_id() else {
        return;
    };
    let removed = remove_stale(parent, |pid| Owner::of(pid, &boot_id));
    if removed > 0 {
        report::info(&format!(
            "Removed {removed} profile director{} left in {} by memprof processes that no longer run",
            if removed == 1 { "y" } else { "ies" },
            parent.display()
        ));
    }
}

/// Removes the stale directories in `parent`, asking `living` what runs now under a pid; returns how many.
fn remove_stale(parent: &Path, living: impl Fn(u32) -> Option<Owner>) -> usize {
    let Ok(entries) = fs::read_dir(parent) else {
        return 0;
    };
    let uid = rustix::process::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let is_ours = entry.file_name().to_str().is_some_and(|name| name.starts_with(DIRECTORY_PREFIX));
        // Not following links: a link named memprof.* is not a directory memprof made.
        let Ok(metadata) = fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !is_ours || !metadata.is_dir() || metadata.uid() != uid {
            continue;
        }
        let Some(owner) = fs::read_to_string(entry.path().join(OWNER_FILE)).ok().and_then(|line| Owner::parse(&line))
        else {
            continue;
        };
        if living(owner.pid).as_ref() != Some(&owner) && fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
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
    fn only_directories_of_ended_processes_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let boot = "b00t".to_owned();
        let make = |name: &str, owner: Option<&str>| {
            let directory = parent.path().join(name);
            fs::create_dir(&directory).unwrap();
            fs::write(directory.join("profile.1.heap"), "heap_v2/524288\n").unwrap();
            if let Some(owner) = owner {
                fs::write(directory.join(OWNER_FILE), owner).unwrap();
            }
            directory
        };
        let live = make("memprof.live", Some("100 5000 b00t\n"));
        let ended = make("memprof.ended", Some("200 6000 b00t\n"));
        let reused = make("memprof.reused", Some("100 4000 b00t\n"));
        let earlier_boot = make("memprof.reboot", Some("100 5000 0ld\n"));
        let unknown = make("memprof.unknown", None);
        let garbled = make("memprof.garbled", Some("100 x\n"));
        let not_ours = make("other.dir", Some("200 6000 b00t\n"));
        std::os::unix::fs::symlink(&ended, parent.path().join("memprof.link")).unwrap();
        let living = |pid: u32| (pid == 100).then(|| Owner { pid, start_time: 5000, boot_id: boot.clone() });
        assert_eq!(remove_stale(parent.path(), living), 3);
        for kept in [&live, &unknown, &garbled, &not_ours] {
            assert!(kept.is_dir(), "{} was removed", kept.display());
        }
        for gone in [&ended, &reused, &earlier_boot] {
            assert!(!gone.exists(), "{} was kept", gone.display());
        }
        assert!(fs::symlink_metadata(parent.path().join("memprof.link")).is_ok(), "links are left alone");
    }
}
