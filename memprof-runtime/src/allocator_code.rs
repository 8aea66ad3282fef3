//! Where this program's allocator code lies: jemalloc's functions and Rust's allocation plumbing
//! (`__rust_alloc`, `alloc::raw_vec`, the global allocator, ...), read once from the executable's symbol
//! table. The frame-pointer walk drops the frames in it from the start of every recorded stack, so the
//! first frame of a raw dump is the allocator's caller: jeprof, reading the dump as it is (the Mesos
//! workflow), then shows the program's allocating functions in its flat column instead of jemalloc's own
//! `prof_backtrace`, and samples carry fewer frames.

use std::fs::File;

use object::{Object, ObjectSymbol, SymbolKind};

/// The allocator's code: sorted, non-overlapping address ranges in this process.
#[derive(Debug, Default)]
pub(crate) struct AllocatorCode {
    ranges: Vec<(usize, usize)>,
}

impl AllocatorCode {
    /// Reads this program's symbol table (`/proc/self/exe`); empty where it cannot be read or has no
    /// symbols (a stripped binary), so that nothing is dropped.
    pub(crate) fn of_this_program() -> Self {
        Self::read().unwrap_or_default()
    }

    fn read() -> Option<Self> {
        let file = File::open("/proc/self/exe").ok()?;
        // SAFETY: the map is only read, here; a binary rewritten in place would give wrong bytes, which the
        // parser checks as it reads them.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let binary = object::File::parse(&*map).ok()?;
        // The load bias of a position-independent executable: where `malloc` is against where the file says.
        let malloc = binary.symbols().find(|symbol| symbol.name() == Ok(MALLOC))?;
        let bias = (tikv_jemalloc_sys::malloc as *const () as usize).wrapping_sub(malloc.address() as usize);
        let mut ranges: Vec<(usize, usize)> = binary
            .symbols()
            .filter(|symbol| symbol.kind() == SymbolKind::Text && symbol.size() > 0)
            .filter(|symbol| symbol.name().is_ok_and(is_allocator_code))
            .map(|symbol| {
                let start = (symbol.address() as usize).wrapping_add(bias);
                (start, start + symbol.size() as usize)
            })
            .collect();
        ranges.sort_unstable();
        Some(Self { ranges })
    }

    /// Whether the instruction at `address` is in the allocator's code.
    pub(crate) fn contains(&self, address: usize) -> bool {
        let after = self.ranges.partition_point(|&(start, _)| start <= address);
        after > 0 && address < self.ranges[after - 1].1
    }

    /// Whether a frame with this return address is in the allocator's code: a return address is the
    /// instruction after the call, the call itself is the byte before.
    pub(crate) fn returns_into(&self, return_address: usize) -> bool {
        self.contains(return_address.wrapping_sub(1))
    }

    /// How many functions are known.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.ranges.len()
    }
}

/// jemalloc's `malloc` as this build names it.
const MALLOC: &str = if cfg!(any(target_os = "android", target_os = "dragonfly", target_vendor = "apple")) {
    "_rjem_malloc"
} else {
    "malloc"
};

/// Whether a symbol (mangled as the table has it) is the allocator's or Rust's allocation plumbing. Only
/// names that can be are demangled (the table has tens of thousands), and only as far as the plumbing's
/// names reach ([`DEMANGLED_PREFIX`]): std's symbols are mangled in Rust's v0 scheme, whose generic
/// arguments made demangling whole names most of start-up's cost.
fn is_allocator_code(name: &str) -> bool {
    may_be_allocator_code(name) && memprof_analysis::is_allocation_plumbing(DemangledPrefix::of(name).as_str())
}

/// Whether a mangled name can be the allocator's code (the others are never demangled).
fn may_be_allocator_code(name: &str) -> bool {
    name.contains("alloc") || name.contains("rjem") || name.contains("collect") || name.starts_with("je_")
}

/// How much of a demangled name is kept: every plumbing name and prefix fits, with the self type of a
/// trait method (`<alloc::vec::Vec<T> as core::clone::Clone>::clone`) and most trait paths after it.
const DEMANGLED_PREFIX: usize = 192;

/// The first [`DEMANGLED_PREFIX`] bytes of a demangled name, on the stack: the demangler stops writing
/// when it is full.
struct DemangledPrefix {
    bytes: [u8; DEMANGLED_PREFIX],
    len: usize,
}

impl DemangledPrefix {
    fn of(name: &str) -> Self {
        use std::fmt::Write;
        let mut prefix = Self { bytes: [0; DEMANGLED_PREFIX], len: 0 };
        // Full: the demangler is told to stop, and what was written is kept.
        let _ = write!(prefix, "{:#}", rustc_demangle::demangle(name));
        prefix
    }

    fn as_str(&self) -> &str {
        // Cut at a character boundary by `write_str`.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for DemangledPrefix {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        let room = DEMANGLED_PREFIX - self.len;
        let fits = if text.len() <= room {
            text.len()
        } else {
            (0..=room).rev().find(|&at| text.is_char_boundary(at)).unwrap_or(0)
        };
        self.bytes[self.len..self.len + fits].copy_from_slice(&text.as_bytes()[..fits]);
        self.len += fits;
        if fits < text.len() { Err(std::fmt::Error) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_looked_up_and_return_addresses_moved_into_the_call() {
        let code = AllocatorCode { ranges: vec![(0x100, 0x180), (0x200, 0x210)] };
        assert!(code.contains(0x100) && code.contains(0x17f) && code.contains(0x20f));
        assert!(!code.contains(0xff) && !code.contains(0x180) && !code.contains(0x210));
        assert!(code.returns_into(0x180) && !code.returns_into(0x100));
    }

    #[test]
    fn names_are_demangled_only_as_far_as_the_plumbing_reaches() {
        let legacy = "_ZN5alloc7raw_vec11finish_grow17h0123456789abcdefE";
        assert_eq!(DemangledPrefix::of(legacy).as_str(), "alloc::raw_vec::finish_grow");
        let long = format!("_ZN5alloc3vec300{}E", "x".repeat(300));
        let cut = DemangledPrefix::of(&long);
        assert_eq!(cut.as_str().len(), DEMANGLED_PREFIX);
        assert!(cut.as_str().starts_with("alloc::vec::xxx"), "{}", cut.as_str());
        assert!(is_allocator_code(legacy) && is_allocator_code(&long));
        assert!(!is_allocator_code("_ZN7service12open_session17h0123456789abcdefE"));
    }

    #[test]
    fn this_programs_symbols_are_judged_alike_by_their_demangled_prefix_and_whole_name() {
        let file = File::open("/proc/self/exe").unwrap();
        // SAFETY: only read, in this test.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        let binary = object::File::parse(&*map).unwrap();
        let names: Vec<&str> = binary.symbols().filter_map(|symbol| symbol.name().ok()).collect();
        assert!(names.len() > 1000, "{} symbols", names.len());
        for name in names {
            let whole = memprof_analysis::is_allocation_plumbing(&format!("{:#}", rustc_demangle::demangle(name)));
            assert_eq!(is_allocator_code(name), may_be_allocator_code(name) && whole, "{name}");
        }
    }

    #[test]
    fn this_programs_allocator_is_found() {
        let code = AllocatorCode::of_this_program();
        assert!(code.len() > 10, "{} functions", code.len());
        assert!(code.contains(tikv_jemalloc_sys::malloc as *const () as usize));
        assert!(!code.contains(ranges_are_looked_up_and_return_addresses_moved_into_the_call as *const () as usize));
    }
}
