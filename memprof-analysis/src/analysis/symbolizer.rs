//! Addresses to functions, files and lines, for one binary at a time.
//!
//! The binary is memory-mapped, never read whole: one pass keeps each DWARF unit's address ranges, and
//! `addr2line` reads, a bounded group at a time, the units the requested addresses fall in and those they
//! refer to (see `units`); everything is released when [`resolve`] returns. Without DWARF the
//! symbol table gives the function; without either, the caller shows `module+offset`. Split debug info is
//! found as gdb finds it (see [`super::debug_file`]). Results are cached per binary and address, so the
//! next profile of the same process opens the binary only for addresses it has not seen.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use memmap2::Mmap;
use object::{Object, ObjectSegment};
use parking_lot::Mutex;

use std::sync::LazyLock;

use super::debug_file;
use super::mapped::map_file;
use super::model::Frame;
use dwarf::{DwarfSections, Names, has_dwarf};
use short_names::ShortNames;

/// What one binary told about the addresses asked.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    /// The GNU build id of the binary, for pprof's mapping table.
    pub(crate) build_id: Option<Vec<u8>>,
    /// For each address asked, its frames, innermost (inlined) first; empty when nothing is known.
    pub(crate) frames: Vec<Arc<[Frame]>>,
    /// Whether function names came from somewhere (DWARF or the symbol table).
    pub(crate) has_functions: bool,
    /// Whether file and line numbers came from DWARF.
    pub(crate) has_lines: bool,
    /// An inlined Rust function that DWARF names without its path, if one was met (see [`ShortNames`]).
    pub(crate) short_inline_name: Option<String>,
    /// A section not read for the size it claims (its names are missing), said in the notes.
    pub(crate) refused: Option<String>,
    /// Where the debug info came from when a debuginfod server (or its cache) gave it, said in the notes.
    pub(crate) debug_info_from: Option<String>,
}

/// Resolves `file_offsets` (offsets into the file at `path`, already moved back into the calling
/// instruction for return addresses).
pub(crate) fn resolve(path: &Path, file_offsets: &[u64]) -> Result<Resolved, String> {
    let identity = Identity::of(path)?;
    let missing = CACHE.lock().missing(&identity, file_offsets);
    if let Some(missing) = missing {
        let resolved = resolve_uncached(path, &missing)?;
        CACHE.lock().store(identity.clone(), &missing, &resolved);
    }
    let cached = CACHE.lock().lookup(&identity, file_offsets);
    match cached {
        Some(resolved) => Ok(resolved),
        // The cache started over while storing, or the answer is larger than the cache: resolve in one go.
        None => resolve_uncached(path, file_offsets),
    }
}

fn resolve_uncached(path: &Path, file_offsets: &[u64]) -> Result<Resolved, String> {
    let map = map_file(path)?;
    let binary = object::File::parse(&*map).map_err(|error| format!("{} is not a binary ({error})", path.display()))?;
    let addresses: Vec<Option<u64>> = file_offsets.iter().map(|&offset| virtual_address(&binary, offset)).collect();
    let found = if has_dwarf(&binary) { None } else { debug_file::find(path, &binary) };
    let (separate_debug, debug_info_from) = match found {
        Some((file, from)) => (map_file(&file).ok(), from),
        None => (None, None),
    };
    let debug_binary = separate_debug.as_deref().and_then(|data| object::File::parse(data).ok());
    let dwarf_source = debug_binary.as_ref().filter(|debug| has_dwarf(debug)).unwrap_or(&binary);

    // A stripped binary keeps its dynamic symbols only; its separate debug file has the whole table.
    let debug_symbols = debug_binary.as_ref().map(object::Object::symbol_map);
    let symbols = match debug_symbols {
        Some(debug_symbols) if !debug_symbols.symbols().is_empty() => debug_symbols,
        _ => binary.symbol_map(),
    };
    // What symbolizing reads of the maps counts in this process's resident set until dropped: the symbol
    // table once read, then a unit or a group at a time, never the whole DWARF.
    let release = |read: Option<&[u8]>| {
        release_pages(&map, read);
        if let Some(debug) = &separate_debug {
            release_pages(debug, read);
        }
    };
    release(None);
    let sections = DwarfSections::load(dwarf_source);
    let mut short_names = ShortNames::default();
    let mut names = Names::default();
    let mut frames = sections.resolve(&addresses, &mut short_names, &mut names, &release);
    let mut resolved = Resolved {
        build_id: binary.build_id().ok().flatten().map(<[u8]>::to_vec),
        frames: Vec::with_capacity(addresses.len()),
        has_functions: !symbols.symbols().is_empty() || sections.has_dwarf(),
        has_lines: sections.has_dwarf(),
        short_inline_name: short_names.example(),
        refused: sections.refused.take(),
        debug_info_from,
    };
    for (address, frames) in addresses.iter().zip(frames.iter_mut()) {
        let symbol =
            address.and_then(|address| symbols.containing(address)).map(|symbol| names.get(&demangle(symbol.name())));
        // The symbol table names the real (outermost) function with its whole path; DWARF's own name for
        // it may be short (`-C debuginfo=line-tables-only` keeps no namespaces).
        match (frames.last_mut(), symbol) {
            (Some(outer), Some(symbol)) => outer.function = symbol,
            (None, Some(symbol)) => frames.push(Frame { function: symbol, file: None, line: None }),
            _ => {}
        }
        frames.retain(|frame| !frame.function.is_empty());
        resolved.frames.push(std::mem::take(frames).into());
    }
    Ok(resolved)
}

/// Drops the pages of `map` this process has read (those of `read`, a slice of it, or all of them) from its
/// page tables: the kernel keeps them in its page cache (the next read finds them there), but they no
/// longer count in the process's resident set. A slice that is not in `map` is left alone.
#[allow(unsafe_code)]
fn release_pages(map: &Mmap, read: Option<&[u8]>) {
    let (start, length) = match read {
        None => (0, map.len()),
        Some(read) => {
            let Some(offset) = (read.as_ptr() as usize).checked_sub(map.as_ptr() as usize) else { return };
            if offset + read.len() > map.len() {
                return;
            }
            // Whole pages inside the slice only: its neighbours may be in use.
            let page = 4096;
            let start = offset.div_ceil(page) * page;
            let end = (offset + read.len()) / page * page;
            if end <= start {
                return;
            }
            (start, end - start)
        }
    };
    // SAFETY: the mapping is read-only and never written: dropping its pages loses nothing, they are read
    // again from the file when touched. (Unix only: elsewhere, where profiles are read but not made, the
    // pages stay until the map is dropped.)
    #[cfg(unix)]
    let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, length) };
    #[cfg(not(unix))]
    let _ = (start, length);
}

/// The ELF virtual address of a file offset: through the loadable segment that maps it.
fn virtual_address(binary: &object::File<'_>, file_offset: u64) -> Option<u64> {
    binary.segments().find_map(|segment| {
        let (start, size) = segment.file_range();
        // A file's numbers are claims: sums that overflow match nothing.
        let end = start.checked_add(size)?;
        (start..end).contains(&file_offset).then(|| segment.address().checked_add(file_offset - start)).flatten()
    })
}

fn demangle(name: &str) -> String {
    match rustc_demangle::try_demangle(name) {
        Ok(demangled) => format!("{demangled:#}"),
        Err(_) => addr2line::demangle_auto(Cow::Borrowed(name), None).into_owned(),
    }
}

/// Identifies a binary on disk: its path, size and modification time, so a rebuilt or replaced binary is
/// not answered from the cache of the old one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Identity {
    path: PathBuf,
    length: u64,
    modified: Option<SystemTime>,
}

impl Identity {
    fn of(path: &Path) -> Result<Self, String> {
        let metadata = std::fs::metadata(path).map_err(|error| format!("cannot open {} ({error})", path.display()))?;
        // A dump names its binaries; one from elsewhere could name a FIFO or a device. Only files are read.
        if !metadata.is_file() {
            return Err(format!("{} is not a regular file", path.display()));
        }
        Ok(Self { path: path.to_owned(), length: metadata.len(), modified: metadata.modified().ok() })
    }
}

/// The most memory the cache's entries take, as [`entry_bytes`] counts them; past it the cache starts over.
pub(crate) const CACHED_BYTES: usize = 8 << 20;

/// What caching one address's frames takes: the map's slot, the shared slice and the names' text.
fn entry_bytes(frames: &[Frame]) -> usize {
    let text: usize =
        frames.iter().map(|frame| frame.function.len() + frame.file.as_ref().map_or(0, |file| file.len())).sum();
    // The hash map's slot (key, fat pointer, control byte, at its load factor), the Arc's counts.
    let slot = 2 * (std::mem::size_of::<u64>() + std::mem::size_of::<Arc<[Frame]>>() + 1);
    slot + 2 * std::mem::size_of::<usize>() + std::mem::size_of_val(frames) + text
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Cache::default()));

/// Empties the cache of names: what it held is freed, and the next lookups read the binaries again.
pub(crate) fn forget_cached() {
    let forgotten = std::mem::take(&mut *CACHE.lock());
    drop(forgotten);
}

/// Resolved addresses per binary, and what the binary said about itself.
#[derive(Default)]
struct Cache {
    binaries: HashMap<Identity, CachedBinary>,
    /// What the cached frames take, as [`entry_bytes`] counts.
    bytes: usize,
}

struct CachedBinary {
    build_id: Option<Vec<u8>>,
    refused: Option<String>,
    debug_info_from: Option<String>,
    has_functions: bool,
    has_lines: bool,
    short_inline_name: Option<String>,
    frames: HashMap<u64, Arc<[Frame]>>,
}

impl Cache {
    /// The offsets not cached yet, or `None` when all are (and the binary was opened before).
    fn missing(&self, identity: &Identity, file_offsets: &[u64]) -> Option<Vec<u64>> {
        let Some(binary) = self.binaries.get(identity) else {
            return Some(file_offsets.to_vec());
        };
        let missing: Vec<u64> =
            file_offsets.iter().copied().filter(|offset| !binary.frames.contains_key(offset)).collect();
        (!missing.is_empty()).then_some(missing)
    }

    /// The answer for all of `file_offsets`, if every one of them is cached.
    fn lookup(&self, identity: &Identity, file_offsets: &[u64]) -> Option<Resolved> {
        let binary = self.binaries.get(identity)?;
        let frames = file_offsets.iter().map(|offset| binary.frames.get(offset).cloned()).collect::<Option<_>>()?;
        Some(Resolved {
            build_id: binary.build_id.clone(),
            refused: binary.refused.clone(),
            debug_info_from: binary.debug_info_from.clone(),
            frames,
            has_functions: binary.has_functions,
            has_lines: binary.has_lines,
            short_inline_name: binary.short_inline_name.clone(),
        })
    }

    fn store(&mut self, identity: Identity, file_offsets: &[u64], resolved: &Resolved) {
        let adding: usize = resolved.frames.iter().map(|frames| entry_bytes(frames)).sum();
        if adding > CACHED_BYTES {
            return;
        }
        if self.bytes + adding > CACHED_BYTES {
            *self = Cache::default();
        }
        let binary = self.binaries.entry(identity).or_insert_with(|| CachedBinary {
            build_id: resolved.build_id.clone(),
            refused: resolved.refused.clone(),
            debug_info_from: resolved.debug_info_from.clone(),
            has_functions: resolved.has_functions,
            has_lines: resolved.has_lines,
            short_inline_name: None,
            frames: HashMap::new(),
        });
        if binary.short_inline_name.is_none() {
            binary.short_inline_name.clone_from(&resolved.short_inline_name);
        }
        for (offset, frames) in file_offsets.iter().zip(&resolved.frames) {
            if binary.frames.insert(*offset, frames.clone()).is_none() {
                self.bytes += entry_bytes(frames);
            }
        }
    }
}

mod dwarf;
mod reader;
mod short_names;
mod units;

#[cfg(test)]
mod inlined_names;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_stays_within_its_bytes() {
        let frame = |index: u64| Frame {
            function: format!("some::module::Type::method_with_a_long_name_{index}").into(),
            file: Some(format!("/src/some/module/file_{index}.rs").into()),
            line: Some(7),
        };
        let identity = Identity { path: PathBuf::from("/bin/x"), length: 1, modified: None };
        let mut cache = Cache::default();
        let mut stored = 0u64;
        for batch in 0..200u64 {
            let offsets: Vec<u64> = (batch * 1000..(batch + 1) * 1000).collect();
            let resolved = Resolved {
                frames: offsets.iter().map(|&offset| Arc::from(vec![frame(offset), frame(offset + 1)])).collect(),
                ..Resolved::default()
            };
            cache.store(identity.clone(), &offsets, &resolved);
            stored += 1000;
            assert!(cache.bytes <= CACHED_BYTES, "{} bytes after {stored} addresses", cache.bytes);
        }
        let cached: usize = cache.binaries.values().map(|binary| binary.frames.len()).sum();
        assert!(cached >= 1000 && (cached as u64) < stored, "{cached} of {stored} addresses cached");
        // An answer larger than the whole cache is not kept, and leaves what is there.
        let offsets: Vec<u64> = (0..100_000).collect();
        let huge = Resolved {
            frames: offsets.iter().map(|&offset| Arc::from(vec![frame(offset)])).collect(),
            ..Resolved::default()
        };
        let before = cache.bytes;
        cache.store(identity, &offsets, &huge);
        assert_eq!(cache.bytes, before);
    }
}
