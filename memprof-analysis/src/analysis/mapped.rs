//! A file mapped read-only, for the parsers of binaries and their debug info (the symbolizer, and the check
//! of what a debuginfod server sent).

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

/// `path` mapped read-only; why not, said.
#[allow(unsafe_code)]
pub(super) fn map_file(path: &Path) -> Result<Mmap, String> {
    let file = File::open(path).map_err(|error| format!("cannot open {} ({error})", path.display()))?;
    // SAFETY: the map is only read, and only while its reader runs. A binary rewritten in place meanwhile
    // would show wrong bytes to the parser, which checks every offset it reads (object and gimli never
    // trust the data), so the worst case is a wrong or missing name, never memory unsafety beyond the map.
    unsafe { Mmap::map(&file) }.map_err(|error| format!("cannot map {} ({error})", path.display()))
}
