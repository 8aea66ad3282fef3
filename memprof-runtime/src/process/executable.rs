//! This program's executable, as recorded beside each kept profile: its path and GNU build id, so that a
//! later process can tell whether it is the same build (and symbolize the profile) or not (and say which
//! binary `memprof analyze --binary` needs).

use std::fs::File;
use std::sync::LazyLock;

use object::Object;

/// What is read of the executable, each once, when first asked for.
struct Executable {
    /// Its path (unsampled: the first caller may be a dump, in a run).
    path: LazyLock<Option<String>>,
    /// Its build id: the parse of the executable's headers touches some 50 pages, which a program that
    /// never keeps a profile (the start-up's own owner line names the path only) never pays.
    build_id: LazyLock<Option<String>>,
}

static EXECUTABLE: Executable = Executable {
    path: LazyLock::new(|| {
        crate::jemalloc::unsampled(|| std::fs::read_link("/proc/self/exe").ok().map(|path| path.display().to_string()))
    }),
    build_id: LazyLock::new(|| crate::jemalloc::unsampled(read_build_id)),
};

/// The executable's path.
pub(crate) fn path() -> Option<String> {
    EXECUTABLE.path.clone()
}

/// The executable's GNU build id in hexadecimal; `None` when it has none (`-Wl,--build-id=none`).
pub(crate) fn build_id() -> Option<String> {
    EXECUTABLE.build_id.clone()
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
