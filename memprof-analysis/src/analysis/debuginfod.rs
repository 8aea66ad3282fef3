//! Debug info from debuginfod servers, by GNU build id: `DEBUGINFOD_URLS` (space-separated base URLs), the
//! convention of elfutils, gdb, perf, Parca and systemd, with elfutils' client cache
//! (`DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`,
//! each file at `<build id>/debuginfo`), its bound on a download's size (`DEBUGINFOD_MAXSIZE`, bytes) and
//! its timeout (`DEBUGINFOD_TIMEOUT`, seconds without progress; 30 here, not elfutils' 90, since a
//! profile's answer waits for it).
//!
//! What a server sends, and what the cache holds, is input: a file is used only if it is an ELF file whose
//! build id is the one asked for, written to a temporary file in the owner-only cache and renamed into place.
//! A build id no server had is not asked for again for ten minutes (in this process).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use object::Object;

/// How long a build id no server had is not asked for again.
const MISS_REMEMBERED: Duration = Duration::from_secs(600);
/// The timeout without `DEBUGINFOD_TIMEOUT`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest download without `DEBUGINFOD_MAXSIZE`: 4 GiB.
const DEFAULT_MAX_SIZE: u64 = 4 << 30;

/// Build ids that no server had, and when.
static MISSES: Mutex<Option<HashMap<String, Instant>>> = Mutex::new(None);

/// The debug file of the binary with GNU build id `build_id`, from the cache or a server of
/// `DEBUGINFOD_URLS`, with where it came from (said beside the names); `None` when none is set, none has
/// it, or what came is not that binary's.
pub(crate) fn find(build_id: &[u8]) -> Option<(PathBuf, String)> {
    let urls = std::env::var("DEBUGINFOD_URLS").ok()?;
    let servers: Vec<&str> = urls.split_whitespace().filter(|url| url.starts_with("http")).collect();
    if servers.is_empty() || build_id.is_empty() {
        return None;
    }
    let id: String = build_id.iter().map(|byte| format!("{byte:02x}")).collect();
    let file = cache_directory()?.join(&id).join("debuginfo");
    if is_the_debug_file(&file, build_id) {
        let from = format!("debuginfod's cache ({})", file.display());
        return Some((file, from));
    }
    if missed_lately(&id) {
        return None;
    }
    let found = servers
        .iter()
        .find_map(|server| {
            download(server, &id, &file, build_id).ok().map(|()| format!("the debuginfod server {server}"))
        })
        .map(|from| (file, from));
    if found.is_none() {
        MISSES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get_or_insert_default()
            .insert(id, Instant::now());
    }
    found
}

fn missed_lately(id: &str) -> bool {
    let mut misses = MISSES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let misses = misses.get_or_insert_default();
    misses.retain(|_, when| when.elapsed() < MISS_REMEMBERED);
    misses.contains_key(id)
}

/// elfutils' client cache directory.
fn cache_directory() -> Option<PathBuf> {
    let variable = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    variable("DEBUGINFOD_CACHE_PATH")
        .or_else(|| variable("XDG_CACHE_HOME").map(|cache| cache.join("debuginfod_client")))
        .or_else(|| variable("HOME").map(|home| home.join(".cache/debuginfod_client")))
        .filter(|path| path.is_absolute())
}

/// Whether `path` is a regular file that is an ELF file with build id `build_id`.
fn is_the_debug_file(path: &Path, build_id: &[u8]) -> bool {
    let Ok(metadata) = std::fs::symlink_metadata(path) else { return false };
    if !metadata.is_file() {
        return false;
    }
    let Ok(map) = super::mapped::map_file(path) else { return false };
    object::File::parse(&*map).ok().and_then(|binary| binary.build_id().ok().flatten()) == Some(build_id)
}

/// Downloads `<server>/buildid/<id>/debuginfo` into `file` (through a temporary file beside it), kept only
/// if it is the debug file of `build_id`.
fn download(server: &str, id: &str, file: &Path, build_id: &[u8]) -> Result<(), String> {
    let directory = file.parent().ok_or("no cache directory")?;
    make_owner_only(directory).map_err(|error| format!("{}: {error}", directory.display()))?;
    let url = format!("{}/buildid/{id}/debuginfo", server.trim_end_matches('/'));
    let timeout = std::env::var("DEBUGINFOD_TIMEOUT")
        .ok()
        .and_then(|seconds| seconds.trim().parse::<u64>().ok())
        .filter(|&seconds| seconds > 0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let max_size = std::env::var("DEBUGINFOD_MAXSIZE")
        .ok()
        .and_then(|bytes| bytes.trim().parse::<u64>().ok())
        .filter(|&bytes| bytes > 0)
        .unwrap_or(DEFAULT_MAX_SIZE);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(timeout))
        .timeout_recv_response(Some(timeout))
        .timeout_recv_body(Some(timeout.saturating_mul(20)))
        .max_redirects(4)
        .build()
        .into();
    let mut response = agent.get(&url).call().map_err(|error| format!("{url}: {error}"))?;
    let mut temporary = tempfile::NamedTempFile::new_in(directory).map_err(|error| error.to_string())?;
    let mut body = response.body_mut().as_reader().take(max_size + 1);
    let copied = std::io::copy(&mut body, temporary.as_file_mut()).map_err(|error| format!("{url}: {error}"))?;
    if copied > max_size {
        return Err(format!("{url}: larger than DEBUGINFOD_MAXSIZE ({max_size} bytes)"));
    }
    temporary.as_file_mut().flush().map_err(|error| error.to_string())?;
    if !is_the_debug_file(temporary.path(), build_id) {
        return Err(format!("{url}: not the debug file of build id {id}"));
    }
    temporary.persist(file).map_err(|error| error.to_string())?;
    Ok(())
}

/// Makes `directory` and its missing parents, the last one readable by its owner only (where modes exist).
fn make_owner_only(directory: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(directory)?;
    let metadata = std::fs::symlink_metadata(directory)?;
    if !metadata.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(directory, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_file_counts_only_if_it_is_the_binary_asked_for() {
        let directory = tempfile::tempdir().unwrap();
        let this = std::fs::read("/proc/self/exe").unwrap();
        let binary = object::File::parse(&*this).unwrap();
        let id = binary.build_id().unwrap().expect("a build id");
        let copy = directory.path().join("debuginfo");
        std::fs::write(&copy, &this).unwrap();
        assert!(is_the_debug_file(&copy, id));
        assert!(!is_the_debug_file(&copy, &[0xab; 20]));
        std::fs::write(&copy, b"not an ELF file").unwrap();
        assert!(!is_the_debug_file(&copy, id));
        assert!(!is_the_debug_file(directory.path(), id));
    }
}
