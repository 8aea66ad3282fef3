//! This program's executable, as recorded beside each kept profile: its path and GNU build id, so that a
//! later process can tell whether it is the same build (and symbolize the profile) or not (and say which
//! binary `memprof analyze --binary` needs).

use std::fs::File;
use std::sync::LazyLock;

use object::Object;

/// The executable's path and build id, read once (unsampled: the first caller is a dump, in a run).
static THIS: LazyLock<(Option<String>, Option<String>)> = LazyLock::new(|| {
    crate::jemalloc::unsampled(|| {
        let path = std::fs::read_link("/proc/self/exe").ok().map(|path| path.display().to_string());
        (path, read_build_id())
    })
});

/// The executable's path.
pub(crate) fn path() -> Option<String> {
    THIS.0.clone()
}

/// The executable's GNU build id in hexadecimal; `None` when it has none (`-Wl,--build-id=none`).
pub(crate) fn build_id() -> Option<String> {
    THIS.1.clone()
}

fn read_build_id() -> Option<String> {
    let file = File::open("/proc/self/exe").ok()?;
    // SAFETY: the map is only read, here; a binary rewritten in place would give wrong bytes, which the
    // parser checks as it reads them.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let id = object::File::parse(&*map).ok()?.build_id().ok()??;
    Some(id.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_program_has_a_build_id() {
        let id = super::build_id().expect("rustc links with --build-id on Linux");
        assert!(id.len() >= 16 && id.bytes().all(|byte| byte.is_ascii_hexdigit()), "{id}");
        assert!(super::path().is_some_and(|path| path.starts_with('/')));
    }
}
