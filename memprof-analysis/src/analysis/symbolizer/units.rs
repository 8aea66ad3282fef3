//! Which of a binary's DWARF units naming some addresses needs, and a `.debug_info` that holds only those.
//!
//! addr2line reads every unit's header, abbreviations and line program header up front (for a binary of
//! 2,000 units, some 35 MB of parsed data before the first lookup), then the lines and functions of the units
//! an address falls in. Here one pass over the units keeps only each unit's address ranges (its root
//! entry's `DW_AT_ranges` or `low_pc`/`high_pc`, and its `.debug_aranges`: their union, so no unit addr2line
//! would pick is missed); the units an address falls in are chosen with those their entries refer to
//! (`DW_FORM_ref_addr`, which fat LTO makes common, followed to the end); and addr2line is given a
//! `.debug_info` in which each chosen unit is where it was and each stretch between them is one empty type
//! unit, which addr2line skips. Addresses are taken in groups whose units' bytes stay within a budget, each
//! group's view dropped before the next: the memory is bounded by a group, not by the binary.

use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::ops::Range;

use addr2line::gimli;
use gimli::{AttributeValue, constants};

use super::reader::Reader;

/// The most bytes of `.debug_info` one group's units may take (a single unit larger than this is a group
/// of its own).
const GROUP_BUDGET: usize = 1 << 20;

/// Drops pages of the mapped binary that were read from the process's resident set: those of a slice of
/// it, or (`None`) all of them.
pub(super) type Release<'a> = &'a dyn Fn(Option<&[u8]>);

/// How many bytes of `.debug_info` the index reads before it lets their pages go.
const RELEASE_EVERY: usize = 1 << 20;

/// The units of a binary's `.debug_info`, in section order.
pub(super) struct Units<'a> {
    units: Vec<Unit>,
    /// The whole `.debug_info`.
    info: &'a [u8],
    release: Release<'a>,
}

struct Unit {
    /// Where the unit starts in `.debug_info`, and its length with its header.
    bytes: Range<usize>,
    /// The addresses its code takes; `None` when they could not be read (the unit is then always chosen).
    ranges: Option<Vec<Range<u64>>>,
    /// The units its entries refer to (indexes), read when first needed.
    references: OnceCell<Vec<usize>>,
}

/// Addresses to resolve together, and the units they need.
pub(super) struct Group {
    /// Indexes of the units, in section order.
    pub(super) units: Vec<usize>,
    /// Indexes of the addresses (into the caller's list).
    pub(super) addresses: Vec<usize>,
}

impl<'a> Units<'a> {
    /// Reads each unit's place and address ranges in `info` (the `.debug_info` of `dwarf`), keeping nothing
    /// else; what it reads is `release`d as it goes.
    pub(super) fn index(dwarf: &gimli::Dwarf<Reader<'_>>, info: &'a [u8], release: Release<'a>) -> Self {
        let mut aranges: Vec<(usize, Range<u64>)> = Vec::new();
        let mut headers = dwarf.debug_aranges.headers();
        while let Ok(Some(header)) = headers.next() {
            let mut entries = header.entries();
            while let Ok(Some(entry)) = entries.next() {
                let range = entry.range();
                aranges.push((header.debug_info_offset().0, range.begin..range.end));
            }
        }
        aranges.sort_unstable_by_key(|(offset, range)| (*offset, range.start));
        let mut units = Vec::new();
        let mut released = 0;
        let mut headers = dwarf.units();
        while let Ok(Some(header)) = headers.next() {
            let Some(offset) = header.debug_info_offset() else { continue };
            if offset.0 - released > RELEASE_EVERY {
                // The units' bytes, and what their root entries point to (abbreviations, range lists).
                release(None);
                released = offset.0;
            }
            let bytes = offset.0..offset.0 + header.length_including_self();
            let ranges = root_ranges(dwarf, &header).map(|mut ranges| {
                let first = aranges.partition_point(|(unit, _)| *unit < offset.0);
                let listed = aranges[first..].iter().take_while(|(unit, _)| *unit == offset.0);
                ranges.extend(listed.map(|(_, range)| range.clone()));
                ranges
            });
            units.push(Unit { bytes, ranges, references: OnceCell::new() });
        }
        release(None);
        Self { units, info, release }
    }

    /// The addresses (indexes into `addresses`) in groups, each with the units it needs; an address no unit
    /// holds is in none (DWARF knows nothing of it).
    pub(super) fn groups(&self, dwarf: &gimli::Dwarf<Reader<'_>>, addresses: &[Option<u64>]) -> Vec<Group> {
        let holders = self.holders(addresses);
        let always: Vec<usize> = (0..self.units.len()).filter(|&unit| self.units[unit].ranges.is_none()).collect();
        // Addresses held by the same units go together, in the order of those units.
        let mut by_holders: Vec<(Vec<usize>, usize)> = holders
            .into_iter()
            .enumerate()
            .filter(|(_, holders)| !holders.is_empty() || !always.is_empty())
            .map(|(address, holders)| (holders, address))
            .collect();
        by_holders.sort_unstable();
        let mut groups: Vec<Group> = Vec::new();
        let mut current = (BTreeSet::new(), Vec::new());
        let mut start = 0;
        while start < by_holders.len() {
            let end =
                start + by_holders[start..].iter().take_while(|(holders, _)| *holders == by_holders[start].0).count();
            let needed = self.closure(dwarf, by_holders[start].0.iter().chain(&always).copied());
            let mut joined: BTreeSet<usize> = current.0.union(&needed).copied().collect();
            if !current.1.is_empty() && self.size(&joined) > GROUP_BUDGET {
                groups.push(Group { units: current.0.into_iter().collect(), addresses: current.1 });
                current = (BTreeSet::new(), Vec::new());
                joined = needed;
            }
            current.0 = joined;
            current.1.extend(by_holders[start..end].iter().map(|(_, address)| *address));
            start = end;
        }
        if !current.1.is_empty() {
            groups.push(Group { units: current.0.into_iter().collect(), addresses: current.1 });
        }
        groups
    }

    /// A copy of the `.debug_info` where only `chosen` units are left and every stretch between them is an
    /// empty type unit; pages nobody writes are never made resident. `None` when no memory could be mapped
    /// for it.
    pub(super) fn view(&self, chosen: &[usize], big_endian: bool) -> Option<memmap2::MmapMut> {
        let info = self.info;
        let mut view = memmap2::MmapMut::map_anon(info.len().max(1)).ok()?;
        let mut at = 0;
        for &unit in chosen {
            let bytes = self.units[unit].bytes.clone();
            let (Some(kept), true) = (info.get(bytes.clone()), bytes.start >= at) else { continue };
            skip(&mut view, info, at..bytes.start, big_endian);
            view[bytes.clone()].copy_from_slice(kept);
            (self.release)(Some(kept));
            at = bytes.end;
        }
        skip(&mut view, info, at..info.len(), big_endian);
        Some(view)
    }

    /// For each address, the units whose ranges hold it (a sweep over both, sorted).
    fn holders(&self, addresses: &[Option<u64>]) -> Vec<Vec<usize>> {
        let mut ranges: Vec<(u64, u64, usize)> = Vec::new();
        for (index, unit) in self.units.iter().enumerate() {
            let known = unit.ranges.iter().flatten();
            ranges.extend(known.filter(|range| range.start < range.end).map(|range| (range.start, range.end, index)));
        }
        ranges.sort_unstable();
        let mut order: Vec<(u64, usize)> =
            addresses.iter().enumerate().filter_map(|(index, address)| Some(((*address)?, index))).collect();
        order.sort_unstable();
        let mut holders = vec![Vec::new(); addresses.len()];
        let (mut next, mut open): (usize, Vec<(u64, usize)>) = (0, Vec::new());
        for (address, index) in order {
            while next < ranges.len() && ranges[next].0 <= address {
                open.push((ranges[next].1, ranges[next].2));
                next += 1;
            }
            open.retain(|(end, _)| *end > address);
            let mut units: Vec<usize> = open.iter().map(|(_, unit)| *unit).collect();
            units.sort_unstable();
            units.dedup();
            holders[index] = units;
        }
        holders
    }

    /// `units` and every unit their entries refer to, directly or not.
    fn closure(&self, dwarf: &gimli::Dwarf<Reader<'_>>, units: impl Iterator<Item = usize>) -> BTreeSet<usize> {
        let mut closure = BTreeSet::new();
        let mut pending: Vec<usize> = units.collect();
        while let Some(unit) = pending.pop() {
            if closure.insert(unit) {
                pending.extend(self.references(dwarf, unit).iter().copied());
            }
        }
        closure
    }

    /// The units `unit`'s entries refer to with `DW_FORM_ref_addr`.
    fn references(&self, dwarf: &gimli::Dwarf<Reader<'_>>, unit: usize) -> &[usize] {
        self.units[unit].references.get_or_init(|| {
            // Each unit once as it comes: a large unit refers hundreds of thousands of times to a few others.
            let mut referenced = BTreeSet::new();
            referenced_offsets(dwarf, self.units[unit].bytes.start, &mut |offset| {
                if let Some(other) = self.unit_at(offset).filter(|&other| other != unit) {
                    referenced.insert(other);
                }
            });
            (self.release)(self.info.get(self.units[unit].bytes.clone()));
            referenced.into_iter().collect()
        })
    }

    /// The unit whose bytes hold `offset`.
    fn unit_at(&self, offset: usize) -> Option<usize> {
        let after = self.units.partition_point(|unit| unit.bytes.start <= offset);
        let unit = after.checked_sub(1)?;
        self.units[unit].bytes.contains(&offset).then_some(unit)
    }

    fn size(&self, units: &BTreeSet<usize>) -> usize {
        units.iter().map(|&unit| self.units[unit].bytes.len()).sum()
    }
}

/// The address ranges a unit's root entry gives (`DW_AT_ranges`, or `DW_AT_low_pc` and `DW_AT_high_pc`);
/// `None` when they cannot be read without the unit's other bases (indexed forms), or at all.
fn root_ranges(dwarf: &gimli::Dwarf<Reader<'_>>, header: &gimli::UnitHeader<Reader<'_>>) -> Option<Vec<Range<u64>>> {
    match header.type_() {
        // Type and partial units hold no code of their own: they are chosen only when referred to.
        gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. } | gimli::UnitType::Partial => {
            return Some(Vec::new());
        }
        _ => {}
    }
    let abbreviations = header.abbreviations(&dwarf.debug_abbrev).ok()?;
    let mut entries = header.entries_raw(&abbreviations, None).ok()?;
    let abbreviation = entries.read_abbreviation().ok()??;
    let (mut low, mut high, mut size, mut list) = (None, None, None, None);
    for spec in abbreviation.attributes() {
        let attribute = entries.read_attribute(*spec).ok()?;
        match (attribute.name(), attribute.value()) {
            (constants::DW_AT_low_pc, AttributeValue::Addr(address)) => low = Some(address),
            (constants::DW_AT_high_pc, AttributeValue::Addr(address)) => high = Some(address),
            (constants::DW_AT_high_pc, AttributeValue::Udata(length)) => size = Some(length),
            (constants::DW_AT_ranges, AttributeValue::RangeListsRef(offset)) => list = Some(offset.0),
            (constants::DW_AT_ranges, AttributeValue::SecOffset(offset)) => list = Some(offset),
            // Indexed forms need the unit's bases: its ranges are not read here.
            (constants::DW_AT_low_pc | constants::DW_AT_high_pc | constants::DW_AT_ranges, _) => return None,
            _ => {}
        }
    }
    if let Some(offset) = list {
        let base = low.unwrap_or(0);
        let mut iter = dwarf
            .ranges
            .ranges(
                gimli::RangeListsOffset(offset),
                header.encoding(),
                base,
                &dwarf.debug_addr,
                gimli::DebugAddrBase(0),
            )
            .ok()?;
        let mut ranges = Vec::new();
        while let Some(range) = iter.next().ok()? {
            ranges.push(range.begin..range.end);
        }
        return Some(ranges);
    }
    let end = match (low, high, size) {
        (Some(_), Some(high), _) => high,
        (Some(low), None, Some(size)) => low.saturating_add(size),
        _ => return Some(Vec::new()),
    };
    Some(Vec::from_iter(low.map(|low| low..end)))
}

/// Gives `found` each `.debug_info` offset the entries of the unit at `offset` refer to with
/// `DW_FORM_ref_addr`, up to the end of the unit or the first entry that cannot be read.
fn referenced_offsets(dwarf: &gimli::Dwarf<Reader<'_>>, offset: usize, found: &mut dyn FnMut(usize)) -> Option<()> {
    let header = dwarf.debug_info.header_from_offset(gimli::DebugInfoOffset(offset)).ok()?;
    let abbreviations = header.abbreviations(&dwarf.debug_abbrev).ok()?;
    let mut entries = header.entries_raw(&abbreviations, None).ok()?;
    while !entries.is_empty() {
        let Some(abbreviation) = entries.read_abbreviation().ok()? else { continue };
        for spec in abbreviation.attributes() {
            if matches!(spec.form(), constants::DW_FORM_ref_addr | constants::DW_FORM_indirect) {
                if let AttributeValue::DebugInfoRef(target) = entries.read_attribute(*spec).ok()?.value() {
                    found(target.0);
                }
            } else {
                entries.skip_attributes(std::slice::from_ref(spec)).ok()?;
            }
        }
    }
    Some(())
}

/// Makes `stretch` of `view` one empty type unit (DWARF 5, 32-bit: 24 bytes of header, the rest unread);
/// a stretch too short for that header keeps its units as they are in `info`.
fn skip(view: &mut [u8], info: &[u8], stretch: Range<usize>, big_endian: bool) {
    const HEADER: usize = 24;
    // The largest 32-bit unit length, and so the longest stretch one header skips.
    const LONGEST: usize = 0xffff_ff00;
    let mut at = stretch.start;
    while at < stretch.end {
        let left = stretch.end - at;
        if left < HEADER {
            view[at..stretch.end].copy_from_slice(&info[at..stretch.end]);
            return;
        }
        // What a first header leaves must fit a header too.
        let length = if left > LONGEST && left - LONGEST < HEADER { LONGEST - HEADER } else { left.min(LONGEST) };
        let unit_length = u32::try_from(length - 4).unwrap_or(u32::MAX);
        let (unit_length, version) = if big_endian {
            (unit_length.to_be_bytes(), 5u16.to_be_bytes())
        } else {
            (unit_length.to_le_bytes(), 5u16.to_le_bytes())
        };
        view[at..at + 4].copy_from_slice(&unit_length);
        view[at + 4..at + 6].copy_from_slice(&version);
        view[at + 6] = constants::DW_UT_type.0;
        view[at + 7] = 8;
        // Abbreviation offset, type signature and type offset: zero, as the mapping is.
        at += length;
    }
}
