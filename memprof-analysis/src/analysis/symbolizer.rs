//! Addresses to functions, files and lines, for one binary at a time.
//!
//! The binary is memory-mapped, never read whole: `addr2line` reads every unit's header and address ranges,
//! and the lines and functions only of the units the requested addresses fall in; everything is released
//! when [`resolve`] returns. Without DWARF the
//! symbol table gives the function; without either, the caller shows `module+offset`. Split debug info is
//! found as gdb finds it (see [`super::debug_file`]). Results are cached per binary and address, so the
//! next profile of the same process opens the binary only for addresses it has not seen.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use addr2line::gimli;
use memmap2::Mmap;
use object::{Object, ObjectSection, ObjectSegment};
use parking_lot::Mutex;
use std::cell::{Cell, OnceCell};
use std::sync::LazyLock;

use super::Frame;
use super::debug_file;
use short_names::{ShortNames, short_rust_name};

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
    let separate_debug = if has_dwarf(&binary) { None } else { debug_file::find(path, &binary) };
    let separate_debug = separate_debug.and_then(|path| map_file(&path).ok());
    let debug_binary = separate_debug.as_deref().and_then(|data| object::File::parse(data).ok());
    let dwarf_source = debug_binary.as_ref().filter(|debug| has_dwarf(debug)).unwrap_or(&binary);

    // A stripped binary keeps its dynamic symbols only; its separate debug file has the whole table.
    let debug_symbols = debug_binary.as_ref().map(object::Object::symbol_map);
    let symbols = match debug_symbols {
        Some(debug_symbols) if !debug_symbols.symbols().is_empty() => debug_symbols,
        _ => binary.symbol_map(),
    };
    let sections = DwarfSections::load(dwarf_source);
    let mut short_names = ShortNames::default();
    let mut names = Names::default();
    let mut frames = sections.resolve(&addresses, &mut short_names, &mut names);
    let mut resolved = Resolved {
        build_id: binary.build_id().ok().flatten().map(<[u8]>::to_vec),
        frames: Vec::with_capacity(addresses.len()),
        has_functions: !symbols.symbols().is_empty() || sections.has_dwarf(),
        has_lines: sections.has_dwarf(),
        short_inline_name: short_names.example(),
        refused: sections.refused.take(),
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

#[allow(unsafe_code)]
fn map_file(path: &Path) -> Result<Mmap, String> {
    let file = File::open(path).map_err(|error| format!("cannot open {} ({error})", path.display()))?;
    // SAFETY: the map is only read, and only while `resolve` runs. A binary rewritten in place meanwhile
    // would show wrong bytes to the parser, which checks every offset it reads (object and gimli never
    // trust the data), so the worst case is a wrong or missing name, never memory unsafety beyond the map.
    unsafe { Mmap::map(&file) }.map_err(|error| format!("cannot map {} ({error})", path.display()))
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

fn has_dwarf(binary: &object::File<'_>) -> bool {
    binary.section_by_name(".debug_info").is_some_and(|section| section.size() > 0)
}

fn demangle(name: &str) -> String {
    match rustc_demangle::try_demangle(name) {
        Ok(demangled) => format!("{demangled:#}"),
        Err(_) => addr2line::demangle_auto(Cow::Borrowed(name), None).into_owned(),
    }
}

type Reader<'data> = gimli::EndianSlice<'data, gimli::RunTimeEndian>;

/// The `.debug_*` sections of a binary: borrowed from the map, or decompressed when they are compressed.
struct DwarfSections<'data, 'file> {
    binary: &'file object::File<'data>,
    /// Each section of [`READ`], decompressed on first use.
    sections: [OnceCell<Option<Cow<'data, [u8]>>>; READ.len()],
    endian: gimli::RunTimeEndian,
    /// A section refused for its claimed size, said in the profile's notes.
    refused: Cell<Option<String>>,
}

/// The sections symbolizing reads; the others (location lists, macros, ...) are never loaded, and these only
/// when needed: a separate debug file's sections are often compressed, and inflating them costs more than
/// the lookups.
const READ: [&str; 10] = [
    ".debug_abbrev",
    ".debug_addr",
    ".debug_aranges",
    ".debug_info",
    ".debug_line",
    ".debug_line_str",
    ".debug_ranges",
    ".debug_rnglists",
    ".debug_str",
    ".debug_str_offsets",
];

impl<'data, 'file> DwarfSections<'data, 'file> {
    fn load(binary: &'file object::File<'data>) -> Self {
        let endian = if binary.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        Self { binary, sections: Default::default(), endian, refused: Cell::new(None) }
    }

    fn has_dwarf(&self) -> bool {
        has_dwarf(self.binary)
    }

    fn section(&self, name: &str) -> Option<&[u8]> {
        let index = READ.iter().position(|read| *read == name)?;
        let data = self.sections[index].get_or_init(|| {
            let compressed_name = format!(".zdebug_{}", &name[".debug_".len()..]);
            let section =
                self.binary.section_by_name(name).or_else(|| self.binary.section_by_name(&compressed_name))?;
            self.bounded_data(&section, name)
        });
        data.as_deref()
    }

    /// The frames of each address (empty where DWARF knows nothing), from one addr2line context over the
    /// whole `.debug_info`, as binutils' `addr2line` reads it: a unit's inlined functions may be defined in
    /// another unit (`DW_FORM_ref_addr`, which fat LTO makes common), and many units have no
    /// `.debug_aranges` entry, so neither the units nor the ranges can be taken one at a time. addr2line
    /// parses unit headers and ranges up front and each unit's lines and functions only when an address
    /// falls in it.
    fn resolve(&self, addresses: &[Option<u64>], short_names: &mut ShortNames, names: &mut Names) -> Vec<Vec<Frame>> {
        let mut frames = vec![Vec::new(); addresses.len()];
        if !self.has_dwarf() {
            return frames;
        }
        if let Some(context) = self.context() {
            for (address, frames) in addresses.iter().zip(frames.iter_mut()) {
                *frames =
                    address.map(|address| dwarf_frames(&context, address, short_names, names)).unwrap_or_default();
            }
        }
        frames
    }

    /// An addr2line context over the whole of the binary's DWARF.
    fn context(&self) -> Option<addr2line::Context<Reader<'_>>> {
        let dwarf = gimli::Dwarf::load(|id| -> Result<Reader<'_>, gimli::Error> {
            Ok(gimli::EndianSlice::new(self.section(id.name()).unwrap_or_default(), self.endian))
        })
        .ok()?;
        addr2line::Context::from_dwarf(dwarf).ok()
    }
}

/// The most bytes a compressed section may inflate to: 64 times its compressed size (DWARF compresses by a
/// few times; zlib can claim a thousand), at least 64 MiB, at most 2 GiB. A section that claims more is
/// refused, not inflated (a zlib bomb, or a size field that lies).
fn inflation_limit(compressed: usize) -> usize {
    compressed.saturating_mul(64).clamp(64 << 20, 2 << 30)
}

impl<'data> DwarfSections<'data, '_> {
    /// A section's bytes, inflated when compressed, unless its size is beyond [`inflation_limit`]: then
    /// `None`, and the refusal is noted.
    fn bounded_data(&self, section: &object::Section<'data, '_>, name: &str) -> Option<Cow<'data, [u8]>> {
        let compressed = section.compressed_data().ok()?;
        if compressed.format == object::CompressionFormat::None {
            return Some(Cow::Borrowed(compressed.data));
        }
        let limit = inflation_limit(compressed.data.len());
        let claimed = usize::try_from(compressed.uncompressed_size).unwrap_or(usize::MAX);
        if claimed > limit {
            self.refused.set(Some(format!(
                "its section {name} claims {claimed} bytes inflated from {} compressed, more than the {limit} memprof inflates; it was not read",
                compressed.data.len()
            )));
            return None;
        }
        match compressed.format {
            object::CompressionFormat::Zlib => inflate_prefix(compressed.data, claimed).map(Cow::Owned),
            _ => compressed.decompress().ok(),
        }
    }
}

/// The first `length` bytes of a zlib stream (fewer if it ends before). The buffer grows as bytes come,
/// from at most 1 MiB: `length` is a claim.
fn inflate_prefix(stream: &[u8], length: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(length.min(1 << 20));
    let mut inflater = flate2::Decompress::new(true);
    while out.len() < length {
        // `decompress_vec` fills the spare capacity only: grow it as the bytes come, doubling.
        if out.capacity() == out.len() {
            out.reserve((length - out.len()).min(out.len().max(1 << 20)));
        }
        let consumed = usize::try_from(inflater.total_in()).ok()?;
        let before = (consumed, out.len());
        let status = inflater.decompress_vec(stream.get(consumed..)?, &mut out, flate2::FlushDecompress::None).ok()?;
        let after = (usize::try_from(inflater.total_in()).ok()?, out.len());
        if status == flate2::Status::StreamEnd || after == before {
            break;
        }
    }
    out.truncate(length);
    Some(out)
}

/// The frames DWARF knows at `address`, innermost first; a frame whose function DWARF does not name has an
/// empty name (the caller names the outermost one from the symbol table).
fn dwarf_frames(
    context: &addr2line::Context<Reader<'_>>,
    address: u64,
    short_names: &mut ShortNames,
    names: &mut Names,
) -> Vec<Frame> {
    let Ok(mut iter) = context.find_frames(address).skip_all_loads() else {
        return Vec::new();
    };
    let mut frames = Vec::new();
    let mut short = Vec::new();
    while let Ok(Some(frame)) = iter.next() {
        short.push(frame.function.as_ref().and_then(short_rust_name));
        let function = frame.function.as_ref().and_then(|function| function.demangle().ok()).unwrap_or_default();
        let location = frame.location.as_ref();
        frames.push(Frame {
            function: names.get(&function),
            file: location.and_then(|location| location.file).map(|file| names.get(file)),
            line: location.and_then(|location| location.line),
        });
    }
    short_names.add_inlined(short);
    frames
}

/// Each function and file name once: a binary's many addresses in one function share its name.
#[derive(Default)]
struct Names(std::collections::HashSet<Arc<str>>);

impl Names {
    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(name) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(name);
        self.0.insert(Arc::clone(&shared));
        shared
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

mod short_names;

#[cfg(test)]
mod inlined_names;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zlib_prefix_is_inflated_alone() {
        use std::io::Write;
        let data: Vec<u8> = (0..100_000u32).flat_map(|value| (value % 251).to_le_bytes()).collect();
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&data).unwrap();
        let stream = encoder.finish().unwrap();
        assert_eq!(inflate_prefix(&stream, 12_345).unwrap(), &data[..12_345]);
        assert_eq!(inflate_prefix(&stream, data.len() + 10).unwrap(), data);
        assert_eq!(inflate_prefix(&stream[..stream.len() / 2], 10).unwrap(), &data[..10]);
    }

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
