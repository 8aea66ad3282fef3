//! What memprof keeps of processes that ended without cleaning up (killed at an OOM, by SIGKILL, or
//! crashed): their automatic dumps and their latest run's profile, the evidence an operator needs after a
//! restart ("here is the heap before the kill"). At start-up, each directory whose owner provably ended
//! ([`crate::profile_root::stale`]) keeps those and loses the rest (partial dumps, snapshots, older runs); a directory
//! with nothing worth keeping is removed. The kept profiles of all earlier processes together stay within
//! the automatic dumps' bounds (`MEMPROF_DUMP_KEEP` files, `MEMPROF_DUMP_MAX_BYTES` bytes), the oldest
//! removed first. They stay until an operator clears them (`clear_earlier`).
//!
//! Beside each profile a process keeps, it writes its provenance (`<name>.json`, [`Provenance`]): who started
//! it, when, and the program and its build, so that a later build does not symbolize it wrongly, and a
//! process lists only its own program's earlier processes (another program sharing the directory, `/tmp`
//! say, finds its own at its next start; its directories are salvaged, never listed or bounded here).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use memprof_wire::{LastSeen, Provenance};

use crate::profile_root::files::Beside;
use crate::profile_root::last_seen;
use crate::profile_root::stale;
use crate::profile_root::untrusted;
use crate::run_model::{KeptProfile, Owner};

/// How the reason of the growth kept beside an automatic dump begins (`Owner::Automatic`).
pub(crate) const GROWTH_REASON: &str = "growth over the last ";

/// The file that marks a directory as an ended process's, holding when that was found (Unix seconds).
const ENDED_FILE: &str = "ended";

/// An earlier process and its kept profiles.
#[derive(Debug, Clone)]
pub(crate) struct EarlierProcess {
    pub(crate) pid: u32,
    pub(crate) directory: PathBuf,
    /// When this was found to have ended (it ended before).
    pub(crate) ended_before: SystemTime,
    /// Newest first.
    pub(crate) profiles: Vec<EarlierProfile>,
    /// What it last wrote of itself, if it did.
    pub(crate) last_seen: Option<LastSeen>,
}

impl EarlierProcess {
    /// Why the process is thought to have ended, when its newest profile tells: an automatic dump at the
    /// resident threshold, just before the limit.
    pub(crate) fn why(&self) -> Option<String> {
        // The growth kept beside a dump in continuous mode is newer than the dump, and says no reason.
        let newest = self
            .profiles
            .iter()
            .map(|earlier| earlier.profile.owner.name())
            .find(|name| !name.starts_with(&format!("automatic: {GROWTH_REASON}")))?;
        let reason = newest.strip_prefix("automatic: ")?;
        (reason.contains("% of the ") && reason.ends_with(" limit"))
            .then(|| format!("most likely killed for memory (the OOM killer): its last dump was taken as its {reason}"))
    }
}

/// A kept profile of an earlier process.
#[derive(Debug, Clone)]
pub(crate) struct EarlierProfile {
    pub(crate) profile: KeptProfile,
    pub(crate) binary: Option<String>,
    /// Written by this very build (or by a memprof that recorded no build: assumed so).
    pub(crate) same_build: bool,
    pub(crate) bytes: u64,
    /// The process's live bytes when it was written, when recorded.
    pub(crate) allocated: Option<u64>,
}

/// What the start-up sweep did.
#[derive(Debug, Default)]
pub(crate) struct Sweep {
    /// Every earlier process with profiles kept, newest first.
    pub(crate) kept: Vec<EarlierProcess>,
    /// Directories of ended processes removed, for they held nothing worth keeping.
    pub(crate) removed_directories: usize,
    /// Profiles removed to stay within the bounds.
    pub(crate) removed_profiles: usize,
    /// Directories that could not be judged (their owner file is not one), with why: left alone.
    pub(crate) left_alone: Vec<stale::Unjudged>,
}

/// Salvages the directories of ended processes in `parent`, then bounds what all earlier processes keep
/// to `keep` profiles and `max_bytes` bytes.
pub(crate) fn sweep(parent: &Path, keep: usize, max_bytes: u64) -> Sweep {
    let mut sweep = Sweep::default();
    sweep.left_alone = stale::for_each_ended(parent, |ended| {
        if !salvage(ended) {
            let _ = fs::remove_dir_all(ended);
            sweep.removed_directories += 1;
        }
    });
    let mut kept = earlier_processes(parent, max_bytes);
    sweep.removed_profiles = bound(&mut kept, keep, max_bytes);
    kept.retain(|process| {
        !process.profiles.is_empty()
            || process.last_seen.as_ref().is_some_and(|seen| seen.active_run.is_some())
            || fs::remove_dir_all(&process.directory).is_err()
    });
    sweep.kept = kept;
    sweep
}

/// Keeps an ended process's evidence in its directory (automatic dumps, the newest run's profile, their
/// provenance) and removes the rest; `false` when there is no evidence (the directory is left to remove).
fn salvage(directory: &Path) -> bool {
    if directory.join(ENDED_FILE).is_file() {
        return true;
    }
    let Ok(entries) = fs::read_dir(directory) else {
        return false;
    };
    let names: Vec<String> = entries.flatten().filter_map(|entry| entry.file_name().into_string().ok()).collect();
    let newest_run = names.iter().filter_map(|name| profile_id(name, "profile.")).max();
    let keeps = |name: &str| {
        name == stale::OWNER_FILE
            || name == last_seen::FILE
            || profile_id(name, "automatic.").is_some()
            || newest_run.is_some_and(|newest| profile_id(name, "profile.") == Some(newest))
            || beside_of(name).is_some_and(|heap| profile_id(&heap, "automatic.").is_some())
            || newest_run
                .is_some_and(|newest| beside_of(name).is_some_and(|heap| heap == profile_name("profile.", newest)))
    };
    for name in names.iter().filter(|name| !keeps(name)) {
        let _ = fs::remove_file(directory.join(name));
    }
    // A run active when the process ended is evidence too, although its profile is lost.
    let lost_run = last_seen::read(directory).is_some_and(|seen| seen.active_run.is_some());
    let evidence = lost_run || names.iter().any(|name| name.ends_with(".heap") && keeps(name));
    evidence
        && fs::write(directory.join(ENDED_FILE), format!("{}\n", untrusted::unix_seconds(SystemTime::now()) as u64))
            .is_ok()
}

/// `N` of a profile named `<prefix>N.heap`, as memprof names them (`automatic.007.heap` is not one: one id,
/// one file).
fn profile_id(name: &str, prefix: &str) -> Option<u64> {
    let id = name.strip_prefix(prefix)?.strip_suffix(".heap")?.parse().ok()?;
    (name == profile_name(prefix, id)).then_some(id)
}

/// The longest provenance read beside a profile: a few hundred bytes when memprof writes it.
const PROVENANCE_LIMIT: u64 = 64 * 1024;

fn profile_name(prefix: &str, id: u64) -> String {
    format!("{prefix}{id}.heap")
}

/// The profile that file `name` is kept beside: its provenance (`X.json` is `X.heap`'s) or its label table
/// (`X.heap.labels`).
fn beside_of(name: &str) -> Option<String> {
    match name.strip_suffix(".labels") {
        Some(heap) => heap.ends_with(".heap").then(|| heap.to_owned()),
        None => Some(format!("{}.heap", name.strip_suffix(".json")?)),
    }
}

/// Records who made `profile` and with which build, beside it.
pub(crate) fn write_provenance(profile: &KeptProfile) {
    let provenance = Provenance {
        id: profile.id,
        started_by: profile.owner.name(),
        started: untrusted::unix_seconds(profile.started),
        stopped: untrusted::unix_seconds(profile.stopped),
        pid: std::process::id(),
        binary: crate::process::executable::path(),
        build_id: crate::process::executable::build_id(),
        allocated: crate::jemalloc::heap_stats().ok().map(|counters| counters.allocated as u64),
    };
    if let Ok(json) = serde_json::to_vec(&provenance) {
        let _ = fs::write(Beside::Provenance.of(&profile.path), json);
    }
}

/// The earlier processes of this program whose directories in `parent` are marked ended, newest first;
/// a file larger than `max_bytes` (all kept profiles together) is not taken for one of their profiles.
fn earlier_processes(parent: &Path, max_bytes: u64) -> Vec<EarlierProcess> {
    let (this_program, this_build) = (crate::process::executable::path(), crate::process::executable::build_id());
    let mut processes: Vec<EarlierProcess> = stale::ours(parent)
        .into_iter()
        .filter_map(|(directory, owner)| {
            let ended = untrusted::read_small_text(&directory.join(ENDED_FILE), 64).ok()?;
            let ended_before = untrusted::unix_time(ended.trim().parse::<u64>().ok()? as f64)?;
            let mut profiles = profiles_in(&directory, this_build.as_deref(), max_bytes);
            let last_seen = last_seen::read(&directory);
            // Another program's (or, without provenance, nobody can tell whose): left for its own program.
            let program = profiles
                .iter()
                .find_map(|profile| profile.binary.clone())
                .or_else(|| last_seen.as_ref().and_then(|seen| seen.binary.clone()));
            if !same_service(program.as_deref(), this_program.as_deref()) {
                return None;
            }
            profiles.sort_by_key(|profile| std::cmp::Reverse(profile.profile.stopped));
            Some(EarlierProcess { pid: owner.pid, directory, ended_before, profiles, last_seen })
        })
        .collect();
    processes.sort_by_key(|process| std::cmp::Reverse(newest(process)));
    processes
}

/// Whether a profile written by `theirs` is this service's: the same program file name, wherever it is
/// installed (`/opt/app-1.2/bin/app` and `/opt/app-1.3/bin/app`: a new version in a versioned directory or a
/// new container image is the same service, and its other build is flagged as such by the build id).
/// Without its provenance, nobody can tell whose it is: left for its own program.
fn same_service(theirs: Option<&str>, ours: Option<&str>) -> bool {
    let name = |path: &str| Path::new(path).file_name().map(std::ffi::OsStr::to_owned);
    match (theirs, ours) {
        (Some(theirs), Some(ours)) => name(theirs).is_some() && name(theirs) == name(ours),
        _ => false,
    }
}

fn newest(process: &EarlierProcess) -> SystemTime {
    process.profiles.first().map_or(process.ended_before, |profile| profile.profile.stopped)
}

/// The profiles kept in an ended process's directory, with what their provenance says: regular files named as
/// memprof names them, of at most `max_bytes`.
fn profiles_in(directory: &Path, this_build: Option<&str>, max_bytes: u64) -> Vec<EarlierProfile> {
    let Ok(entries) = fs::read_dir(directory) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let id = profile_id(&name, "automatic.").or_else(|| profile_id(&name, "profile."))?;
            // `DirEntry::metadata` does not follow a link: only regular files are profiles.
            let metadata =
                entry.metadata().ok().filter(|metadata| metadata.is_file() && metadata.len() <= max_bytes)?;
            let path = entry.path();
            let provenance = read_provenance(&Beside::Provenance.of(&path));
            let modified = metadata.modified().unwrap_or(UNIX_EPOCH);
            let (started_by, (started, stopped)) = match &provenance {
                Some((provenance, times)) => (provenance.started_by.clone(), *times),
                None => (String::from("unknown"), (modified, modified)),
            };
            let provenance = provenance.map(|(provenance, _)| provenance);
            let same_build =
                match (provenance.as_ref().and_then(|provenance| provenance.build_id.as_deref()), this_build) {
                    (Some(theirs), Some(ours)) => theirs == ours,
                    _ => true,
                };
            Some(EarlierProfile {
                profile: KeptProfile { id, owner: Owner::Earlier(started_by), started, stopped, path },
                allocated: provenance.as_ref().and_then(|provenance| provenance.allocated),
                binary: provenance.and_then(|provenance| provenance.binary),
                same_build,
                bytes: metadata.len(),
            })
        })
        .collect()
}

/// The provenance beside a kept profile, with its start and stop times; `None` when it is not one memprof wrote
/// (too long, not a provenance, or a time out of range: judged as missing).
fn read_provenance(path: &Path) -> Option<(Provenance, (SystemTime, SystemTime))> {
    let provenance: Provenance = serde_json::from_slice(&untrusted::read_small(path, PROVENANCE_LIMIT).ok()?).ok()?;
    let times = (untrusted::unix_time(provenance.started)?, untrusted::unix_time(provenance.stopped)?);
    Some((provenance, times))
}

/// Removes the oldest profiles beyond `keep` files or `max_bytes` bytes in all (the newest always stays);
/// how many were removed.
fn bound(processes: &mut [EarlierProcess], keep: usize, max_bytes: u64) -> usize {
    let mut all: Vec<(SystemTime, usize, u64)> = processes
        .iter()
        .enumerate()
        .flat_map(|(index, process)| {
            process.profiles.iter().map(move |profile| (profile.profile.stopped, index, profile.profile.id))
        })
        .collect();
    all.sort_by_key(|(stopped, _, _)| std::cmp::Reverse(*stopped));
    let mut removed = 0;
    let mut total = 0u64;
    for (rank, (_, index, id)) in all.into_iter().enumerate() {
        let process = &mut processes[index];
        let Some(position) = process.profiles.iter().position(|profile| profile.profile.id == id) else {
            continue;
        };
        total = total.saturating_add(process.profiles[position].bytes);
        if rank == 0 || (rank < keep && total <= max_bytes) {
            continue;
        }
        let profile = process.profiles.remove(position);
        let _ = fs::remove_file(&profile.profile.path);
        let _ = fs::remove_file(Beside::Provenance.of(&profile.profile.path));
        let _ = fs::remove_file(Beside::Labels.of(&profile.profile.path));
        removed += 1;
    }
    removed
}

/// Removes every earlier process's directory; how many profiles went with them.
pub(crate) fn clear(processes: &[EarlierProcess]) -> usize {
    processes
        .iter()
        .filter(|process| fs::remove_dir_all(&process.directory).is_ok())
        .map(|process| process.profiles.len())
        .sum()
}

#[cfg(test)]
mod tests;
