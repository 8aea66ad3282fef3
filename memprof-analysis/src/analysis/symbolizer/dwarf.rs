//! A binary's DWARF, read as binutils' `addr2line` reads it: its `.debug_*` sections (borrowed from the
//! map, or inflated within a bound when compressed) and the frames addr2line gives an address, from a
//! context over the units it needs ([`super::units`]).

use std::borrow::Cow;
use std::cell::{Cell, OnceCell};
use std::sync::Arc;

use addr2line::gimli;
use object::{Object, ObjectSection};

use super::reader::Reader;
use super::short_names::{ShortNames, short_rust_name};
use super::units::{Release, Units};
use crate::analysis::model::Frame;

pub(super) fn has_dwarf(binary: &object::File<'_>) -> bool {
    binary.section_by_name(".debug_info").is_some_and(|section| section.size() > 0)
}

/// The `.debug_*` sections of a binary: borrowed from the map, or decompressed when they are compressed.
pub(super) struct DwarfSections<'data, 'file> {
    binary: &'file object::File<'data>,
    /// Each section of [`READ`], decompressed on first use.
    sections: [OnceCell<Option<Cow<'data, [u8]>>>; READ.len()],
    endian: gimli::RunTimeEndian,
    /// A section refused for its claimed size, said in the profile's notes.
    pub(super) refused: Cell<Option<String>>,
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
    pub(super) fn load(binary: &'file object::File<'data>) -> Self {
        let endian = if binary.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        Self { binary, sections: Default::default(), endian, refused: Cell::new(None) }
    }

    pub(super) fn has_dwarf(&self) -> bool {
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

    /// The frames of each address (empty where DWARF knows nothing), as binutils' `addr2line` gives them:
    /// from addr2line contexts each over the units a group of the addresses needs ([`Units`]), so a unit's
    /// inlined functions defined in another unit (`DW_FORM_ref_addr`, which fat LTO makes common) and the
    /// units without `.debug_aranges` entries are read as over the whole `.debug_info`, while what is
    /// parsed at once is bounded by a group.
    /// What is read of the mapped binary is `release`d as it goes (a unit, a group), so that it never
    /// counts in the process's resident set all at once.
    pub(super) fn resolve(
        &self,
        addresses: &[Option<u64>],
        short_names: &mut ShortNames,
        names: &mut Names,
        release: Release<'_>,
    ) -> Vec<Vec<Frame>> {
        let mut frames = vec![Vec::new(); addresses.len()];
        let (true, Some(dwarf), Some(info)) = (self.has_dwarf(), self.dwarf(None), self.section(".debug_info")) else {
            return frames;
        };
        let units = Units::index(&dwarf, info, release);
        let big_endian = self.endian == gimli::RunTimeEndian::Big;
        for group in units.groups(&dwarf, addresses) {
            release(None);
            let Some(view) = units.view(&group.units, big_endian) else { continue };
            let Some(context) = self.dwarf(Some(&view)).and_then(|dwarf| addr2line::Context::from_dwarf(dwarf).ok())
            else {
                continue;
            };
            for (done, index) in group.addresses.into_iter().enumerate() {
                // Line programs, names and ranges are read in the binary as lookups go: let their pages go
                // every few addresses, not once a group (they are found again in the page cache).
                if done % RELEASE_AFTER_ADDRESSES == RELEASE_AFTER_ADDRESSES - 1 {
                    release(None);
                }
                if let Some(address) = addresses[index] {
                    frames[index] = dwarf_frames(&context, address, short_names, names);
                }
            }
        }
        release(None);
        frames
    }

    /// The binary's DWARF, with `info` as its `.debug_info` when given.
    fn dwarf<'a>(&'a self, info: Option<&'a [u8]>) -> Option<gimli::Dwarf<Reader<'a>>> {
        gimli::Dwarf::load(|id| -> Result<Reader<'a>, gimli::Error> {
            let data = match (id, info) {
                (gimli::SectionId::DebugInfo, Some(info)) => info,
                _ => self.section(id.name()).unwrap_or_default(),
            };
            Ok(gimli::EndianSlice::new(data, self.endian))
        })
        .ok()
    }
}

/// How many addresses are looked up between two drops of the binary's pages from the resident set.
const RELEASE_AFTER_ADDRESSES: usize = 64;

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
pub(super) struct Names(std::collections::HashSet<Arc<str>>);

impl Names {
    pub(super) fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(name) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(name);
        self.0.insert(Arc::clone(&shared));
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The groups name every address as one addr2line context over the whole `.debug_info` does, on this
    /// test program (18 groups; tests/binutils.rs checks fat LTO binaries against binutils).
    #[test]
    fn groups_of_units_name_addresses_as_the_whole_dwarf_does() {
        let map = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let binary = object::File::parse(&*map).unwrap();
        let text = binary.section_by_name(".text").unwrap();
        let step = (text.size() / 20_000).max(1);
        let addresses: Vec<Option<u64>> = (0..20_000).map(|index| Some(text.address() + index * step)).collect();
        let sections = DwarfSections::load(&binary);
        let (mut short_names, mut names) = (ShortNames::default(), Names::default());
        let grouped = sections.resolve(&addresses, &mut short_names, &mut names, &|_| {});
        let whole = addr2line::Context::from_dwarf(sections.dwarf(None).unwrap()).unwrap();
        let mut named = 0;
        for (address, frames) in addresses.iter().zip(&grouped) {
            assert_eq!(frames, &dwarf_frames(&whole, address.unwrap(), &mut short_names, &mut names), "{address:x?}");
            named += usize::from(!frames.is_empty());
        }
        assert!(named > 19_000, "{named} of 20,000 addresses named");
    }

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
}
