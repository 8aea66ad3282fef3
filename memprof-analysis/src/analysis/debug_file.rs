//! Split debug info, found where gdb looks for it: by GNU build id under `/usr/lib/debug/.build-id/`, then by
//! the `.gnu_debuglink` name beside the binary, in its `.debug/` directory and under `/usr/lib/debug/`.
//! A debuglink candidate counts only if its CRC-32 is the one the binary recorded. Then, by build id, from
//! the debuginfod servers of `DEBUGINFOD_URLS` ([`super::debuginfod`]).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use object::Object;

/// Where distributions install debug info.
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The separate debug file of `binary` (at `path`), if one is installed, or a debuginfod server has it
/// (then with where it came from, for the notes).
pub(crate) fn find(path: &Path, binary: &object::File<'_>) -> Option<(PathBuf, Option<String>)> {
    let found = by_build_id(binary).or_else(|| by_debuglink(path, binary)).map(|file| (file, None));
    #[cfg(all(feature = "debuginfod", target_os = "linux"))]
    let found = found.or_else(|| {
        let (file, from) = super::debuginfod::find(binary.build_id().ok()??)?;
        Some((file, Some(from)))
    });
    found
}

fn by_build_id(binary: &object::File<'_>) -> Option<PathBuf> {
    let id = binary.build_id().ok()??;
    let (first, rest) = id.split_first()?;
    let rest: String = rest.iter().map(|byte| format!("{byte:02x}")).collect();
    let candidate = Path::new(DEBUG_ROOT).join(".build-id").join(format!("{first:02x}")).join(format!("{rest}.debug"));
    candidate.is_file().then_some(candidate)
}

fn by_debuglink(path: &Path, binary: &object::File<'_>) -> Option<PathBuf> {
    let (name, crc) = binary.gnu_debuglink().ok()??;
    let name = Path::new(std::str::from_utf8(name).ok()?);
    if name.components().count() != 1 {
        return None;
    }
    let directory = path.parent()?;
    let under_root = Path::new(DEBUG_ROOT).join(directory.strip_prefix("/").unwrap_or(directory));
    [directory.join(name), directory.join(".debug").join(name), under_root.join(name)]
        .into_iter()
        .find(|candidate| candidate != path && crc32_of(candidate) == Some(crc))
}

/// The CRC-32 of a whole file, read through a small buffer (the file is not mapped).
fn crc32_of(path: &Path) -> Option<u32> {
    let mut file = File::open(path).ok()?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buffer = vec![0; 1 << 16];
    loop {
        match file.read(&mut buffer).ok()? {
            0 => return Some(hasher.finalize()),
            read => hasher.update(&buffer[..read]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crc_is_gnu_debuglinks() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), b"123456789").unwrap();
        // The CRC-32 check value of "123456789", as in `.gnu_debuglink` (IEEE polynomial).
        assert_eq!(crc32_of(file.path()), Some(0xCBF4_3926));
    }
}
