//! Where this program's allocator code lies: jemalloc's functions and Rust's allocation plumbing
//! (`__rust_alloc`, `alloc::raw_vec`, the global allocator, ...), judged from the executable's symbol
//! table. The walks drop the frames in it from the start of every recorded stack, so the first frame of a
//! raw dump is the allocator's caller: jeprof, reading the dump as it is (the Mesos workflow), then shows
//! the program's allocating functions in its flat column instead of jemalloc's own `prof_backtrace`, and
//! samples carry fewer frames.
//!
//! Judging a function means reading its name and demangling it, some 9,000 instructions each, and an
//! executable has thousands of candidates (every `Vec` and `BTreeMap` method instantiated): judging them
//! all took some 23 M instructions. So the table is read as addresses only
//! ([`AllocatorCode::of_this_program`]), and a function is judged when a walk first meets it at the start
//! of a stack: the walk marks it asked for (an atomic store; it keeps the frame meanwhile), and memprof's
//! counters' thread judges the functions asked for ([`AllocatorCode::judge_asked`]); a profile written from
//! the record leaves out the leading frames judged then ([`AllocatorCode::leading_frames`]). A run on
//! demand, whose dumps jemalloc writes from the walks' stacks as they were, judges every function before
//! sampling starts ([`AllocatorCode::judge_all`]).

use std::fs::File;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use object::read::elf::{ElfFile, FileHeader, Sym};
use object::{Object, ObjectSymbol, SymbolIndex};

/// A function not judged, and no walk asked for it.
const UNKNOWN: u8 = 0;
/// A function a walk met at the start of a stack, to be judged.
const ASKED: u8 = 1;
/// The allocator's code.
const ALLOCATOR: u8 = 2;
/// Not the allocator's code.
const PROGRAM: u8 = 3;

/// What a walk knows of a frame's function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judged {
    /// The allocator's code: its frame is left out of the start of a stack.
    Allocator,
    /// The program's code (or no function of the executable's).
    Program,
    /// Not judged yet: asked for, and the frame kept meanwhile.
    NotYet,
}

/// The executable's functions, each judged allocator code or not when first needed.
pub(crate) struct AllocatorCode {
    /// Sorted `[start, end)` address ranges in this process, one per address (aliases share it).
    functions: Vec<(usize, usize)>,
    /// Where each function's symbols begin in `symbols` (and the next's, after the last).
    first_symbol: Vec<u32>,
    /// The symbol table's indexes of each function's names, function after function.
    symbols: Vec<u32>,
    /// Each function's verdict: [`UNKNOWN`], [`ASKED`], [`ALLOCATOR`] or [`PROGRAM`].
    verdicts: Box<[AtomicU8]>,
    /// A walk asked for a function since the last [`AllocatorCode::judge_asked`].
    asked: AtomicBool,
    /// The executable, mapped for the life of the process: names are read from it when judged.
    executable: Option<memmap2::Mmap>,
    /// Verdicts reached, by return address ([`Remembered`]).
    remembered: Remembered,
}

/// The allocator's code of this process, once read.
static OF_THIS_PROGRAM: OnceLock<AllocatorCode> = OnceLock::new();

impl AllocatorCode {
    /// Reads this program's symbol table (`/proc/self/exe`) as addresses, once; empty where it cannot be
    /// read or has no symbols (a stripped binary), so that nothing is dropped.
    pub(crate) fn of_this_program() -> &'static Self {
        OF_THIS_PROGRAM.get_or_init(|| Self::read().unwrap_or_else(Self::empty))
    }

    /// The allocator's code of this process, if read already.
    pub(crate) fn if_read() -> Option<&'static Self> {
        OF_THIS_PROGRAM.get()
    }

    fn empty() -> Self {
        Self {
            functions: Vec::new(),
            first_symbol: vec![0],
            symbols: Vec::new(),
            verdicts: Box::new([]),
            asked: AtomicBool::new(false),
            executable: None,
            remembered: Remembered::new(),
        }
    }

    fn read() -> Option<Self> {
        let file = File::open("/proc/self/exe").ok()?;
        // SAFETY: the map is only read. A running executable cannot be written to (ETXTBSY), and a binary
        // replaced by another file leaves this one mapped; wrong bytes would be checked by the parser.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        // The symbol table's entries read as they lie (some 10 instructions each, against some 100 through
        // `object`'s format-independent symbols: a few million on a large executable).
        let found = match object::FileKind::parse(&*map).ok()? {
            object::FileKind::Elf64 => functions::<object::elf::FileHeader64<object::Endianness>>(&map)?,
            object::FileKind::Elf32 => functions::<object::elf::FileHeader32<object::Endianness>>(&map)?,
            _ => return None,
        };
        // Sorted by address as plain integers (the address above, where in `found` below: a file's addresses
        // fit in 40 bits).
        let mut order: Vec<u64> =
            found.iter().enumerate().map(|(at, &(address, ..))| ((address as u64) << 24) | at as u64).collect();
        if found.len() >= 1 << 24 || found.iter().any(|&(address, ..)| address as u64 >= 1 << 40) {
            return None;
        }
        sort_by_address(&mut order);
        // The load bias of a position-independent executable: where its code is against where the file says.
        let bias = executable_bias()?;
        let mut code = Self::empty();
        code.first_symbol = Vec::with_capacity(found.len() + 1);
        code.functions = Vec::with_capacity(found.len());
        code.symbols = Vec::with_capacity(found.len());
        for key in order {
            let (address, size, symbol) = found[(key & ((1 << 24) - 1)) as usize];
            let (start, end) = (address.wrapping_add(bias), address.wrapping_add(bias).wrapping_add(size));
            match code.functions.last_mut() {
                // Aliases of one function (`malloc`, `_rjem_malloc`): one range, judged by all its names.
                Some((last_start, last_end)) if *last_start == start => *last_end = (*last_end).max(end),
                _ => {
                    code.first_symbol.push(code.symbols.len() as u32);
                    code.functions.push((start, end));
                }
            }
            code.symbols.push(symbol);
        }
        code.first_symbol.push(code.symbols.len() as u32);
        code.verdicts = code.functions.iter().map(|_| AtomicU8::new(UNKNOWN)).collect();
        code.executable = Some(map);
        Some(code)
    }

    /// The function the instruction at `address` lies in.
    fn function_at(&self, address: usize) -> Option<usize> {
        let after = self.functions.partition_point(|&(start, _)| start <= address);
        (after > 0 && address < self.functions[after - 1].1).then(|| after - 1)
    }

    /// What is known of the function a frame with this return address is in (a return address is the
    /// instruction after the call, the call itself is the byte before). For the walks: no lock, no
    /// allocation; a function not judged yet is asked for ([`Judged::NotYet`]).
    pub(crate) fn judged_at(&self, return_address: usize) -> Judged {
        if let Some(judged) = self.remembered.get(return_address) {
            return judged;
        }
        let Some(function) = self.function_at(return_address.wrapping_sub(1)) else {
            self.remembered.put(return_address, Judged::Program);
            return Judged::Program;
        };
        let verdict = &self.verdicts[function];
        match verdict.load(Ordering::Relaxed) {
            ALLOCATOR => {
                self.remembered.put(return_address, Judged::Allocator);
                Judged::Allocator
            }
            PROGRAM => {
                self.remembered.put(return_address, Judged::Program);
                Judged::Program
            }
            UNKNOWN => {
                verdict.store(ASKED, Ordering::Relaxed);
                self.asked.store(true, Ordering::Release);
                Judged::NotYet
            }
            _ => Judged::NotYet,
        }
    }

    /// Judges the functions walks asked for since the last call; cheap when none was.
    pub(crate) fn judge_asked(&self) {
        if self.asked.swap(false, Ordering::Acquire) {
            self.judge(|verdict| verdict == ASKED);
        }
    }

    /// Judges every function not judged yet (before a run on demand, whose dumps jemalloc writes).
    pub(crate) fn judge_all(&self) {
        self.judge(|verdict| verdict == UNKNOWN || verdict == ASKED);
    }

    /// Judges the functions whose verdict is `wanted`.
    fn judge(&self, wanted: impl Fn(u8) -> bool) {
        self.judged(
            (0..self.verdicts.len()).filter(|&function| wanted(self.verdicts[function].load(Ordering::Relaxed))),
        );
    }

    /// Reads the names of `functions` and records whether each is the allocator's code.
    fn judged(&self, functions: impl Iterator<Item = usize>) {
        let Some(binary) = self.executable.as_deref().and_then(|map| object::File::parse(map).ok()) else { return };
        for function in functions {
            let verdict = if self.names_allocator_code(&binary, function) { ALLOCATOR } else { PROGRAM };
            self.verdicts[function].store(verdict, Ordering::Relaxed);
        }
    }

    /// Whether any of the function's names is the allocator's code.
    fn names_allocator_code(&self, binary: &object::File<'_>, function: usize) -> bool {
        let names = &self.symbols[self.first_symbol[function] as usize..self.first_symbol[function + 1] as usize];
        names.iter().any(|&index| {
            binary
                .symbol_by_index(SymbolIndex(index as usize))
                .ok()
                .and_then(|symbol| symbol.name_bytes().ok())
                .is_some_and(|name| {
                    may_be_allocator_code(name) && std::str::from_utf8(name).is_ok_and(is_allocator_code)
                })
        })
    }

    /// How many of `frames` (return addresses, innermost first) lead the stack in the allocator's code,
    /// judging those not judged yet; never all of them (the last is kept, as the walks keep it).
    pub(crate) fn leading_frames(&self, frames: &[usize]) -> usize {
        let mut leading = 0;
        while leading + 1 < frames.len() {
            let Some(function) = self.function_at(frames[leading].wrapping_sub(1)) else { break };
            if matches!(self.verdicts[function].load(Ordering::Relaxed), UNKNOWN | ASKED) {
                self.judged(std::iter::once(function));
            }
            if self.verdicts[function].load(Ordering::Relaxed) != ALLOCATOR {
                break;
            }
            leading += 1;
        }
        leading
    }

    /// Functions at `ranges`, each judged the allocator's (`Some(true)`), the program's (`Some(false)`) or not
    /// yet (`None`), with no executable to read names from: for tests of what reads the verdicts.
    #[cfg(test)]
    pub(crate) fn judged_already(ranges: &[(usize, usize)], verdicts: &[Option<bool>]) -> Self {
        let verdict = |judged: &Option<bool>| match judged {
            Some(true) => ALLOCATOR,
            Some(false) => PROGRAM,
            None => UNKNOWN,
        };
        Self {
            functions: ranges.to_vec(),
            first_symbol: vec![0; ranges.len() + 1],
            symbols: Vec::new(),
            verdicts: verdicts.iter().map(|judged| AtomicU8::new(verdict(judged))).collect(),
            asked: AtomicBool::new(false),
            executable: None,
            remembered: Remembered::new(),
        }
    }

    /// Whether the function at `address` was asked for and is not judged yet.
    #[cfg(test)]
    pub(crate) fn asked_for(&self, address: usize) -> bool {
        self.function_at(address).is_some_and(|function| self.verdicts[function].load(Ordering::Relaxed) == ASKED)
    }

    /// Whether the instruction at `address` is in a function judged the allocator's code.
    #[cfg(test)]
    fn contains(&self, address: usize) -> bool {
        self.function_at(address).is_some_and(|function| self.verdicts[function].load(Ordering::Relaxed) == ALLOCATOR)
    }
}

/// Verdicts reached (final: the allocator's or the program's), by the return address they were asked for,
/// so that a walk meeting an address again finds its verdict in one read. The walks meet the same few dozen
/// return addresses at the start of every stack (the allocator's plumbing and its callers), and finding
/// the function of one is a binary search of the executable's sorted functions, a cache line a level (some
/// 15 on a large executable), each level a likely miss right after the program's own work has filled the
/// caches: on the example service (`vec!`s of 64 and 32 KiB, sampled 1,500 times a second) those searches
/// were three quarters of the walk's time and a third of a sample's.
///
/// A direct-mapped table of [`Remembered::SLOTS`] words, each the return address shifted left by one and
/// the verdict in the lowest bit (0: empty). Addresses that share a slot replace each other; one not found
/// is searched for as before. Nothing locked, nothing allocated after it is made.
struct Remembered {
    slots: Box<[AtomicU64]>,
}

impl Remembered {
    /// How many return addresses it holds at most: 8 KiB.
    const SLOTS: usize = 1024;

    fn new() -> Self {
        Self { slots: (0..Self::SLOTS).map(|_| AtomicU64::new(0)).collect() }
    }

    /// The slot of `return_address`: a multiplicative hash's top bits (nearby addresses spread apart).
    fn slot(&self, return_address: usize) -> &AtomicU64 {
        let hashed = (return_address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.slots[(hashed >> (64 - Self::SLOTS.trailing_zeros())) as usize]
    }

    /// The verdict remembered for `return_address`, if it is.
    fn get(&self, return_address: usize) -> Option<Judged> {
        let entry = self.slot(return_address).load(Ordering::Relaxed);
        (entry != 0 && entry >> 1 == return_address as u64).then_some(if entry & 1 == 1 {
            Judged::Allocator
        } else {
            Judged::Program
        })
    }

    /// Remembers a final verdict for `return_address` (one whose top bit is set, never a return address in
    /// user space, is not remembered: the shift would lose it).
    fn put(&self, return_address: usize, judged: Judged) {
        let address = return_address as u64;
        if address >> 63 == 0 && address != 0 {
            self.slot(return_address).store(address << 1 | u64::from(judged == Judged::Allocator), Ordering::Relaxed);
        }
    }
}

/// Sorts `keys` (an address above bit 24, a position below it, positions in increasing order) by address,
/// and so wholly: a stable radix sort of the address's 40 bits, least significant digit first, 10 bits a
/// pass (mini-redis's 13,000 functions: 1.0 M instructions, against 1.7 M by `sort_unstable`).
fn sort_by_address(keys: &mut Vec<u64>) {
    const DIGIT: u32 = 10;
    let mut sorted = vec![0u64; keys.len()];
    for shift in (24..64).step_by(DIGIT as usize) {
        let digit = |key: u64| ((key >> shift) & ((1 << DIGIT) - 1)) as usize;
        let mut starts = [0usize; 1 << DIGIT];
        for &key in keys.iter() {
            starts[digit(key)] += 1;
        }
        if starts.contains(&keys.len()) {
            continue; // one digit for all: the pass would move nothing
        }
        let mut start = 0;
        for count in &mut starts {
            (start, *count) = (start + *count, start);
        }
        for &key in keys.iter() {
            let at = &mut starts[digit(key)];
            sorted[*at] = key;
            *at += 1;
        }
        std::mem::swap(keys, &mut sorted);
    }
}

/// The functions of the ELF file `data` (`Elf`: its class): each defined function symbol of its symbol
/// table (`.symtab`) with a size (what `object` calls text symbols), as (address in the file, size, index).
fn functions<Elf: FileHeader<Endian = object::Endianness>>(data: &[u8]) -> Option<Vec<(usize, usize, u32)>> {
    let file = ElfFile::<Elf>::parse(data).ok()?;
    let endian = file.endian();
    let symbols = file.elf_symbol_table().symbols();
    let mut found = Vec::with_capacity(symbols.len());
    for (index, symbol) in symbols.iter().enumerate() {
        let size: u64 = symbol.st_size(endian).into();
        if matches!(symbol.st_type(), object::elf::STT_FUNC | object::elf::STT_GNU_IFUNC) && size > 0 {
            let address: u64 = symbol.st_value(endian).into();
            found.push((address as usize, size as usize, index as u32));
        }
    }
    Some(found)
}

/// The executable's load bias (the dynamic loader's `dlpi_addr` for the first object it lists, the
/// executable itself).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn executable_bias() -> Option<usize> {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid `dl_phdr_info`; `data` is the `Option<usize>` passed below.
        unsafe { *(data as *mut Option<usize>) = Some((*info).dlpi_addr as usize) };
        1 // the first object is the executable: stop there
    }
    let mut bias: Option<usize> = None;
    // SAFETY: `first` matches the callback's type and treats `data` as the `Option<usize>` it is.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut bias as *mut Option<usize> as *mut libc::c_void) };
    bias
}

/// Elsewhere there is no `/proc/self/exe` to read the symbols from either.
#[cfg(not(target_os = "linux"))]
fn executable_bias() -> Option<usize> {
    None
}

/// Whether a symbol (mangled as the table has it) is the allocator's or Rust's allocation plumbing. Only
/// names that can be are demangled (the table has tens of thousands), and only as far as the plumbing's
/// names reach ([`DEMANGLED_PREFIX`]): std's symbols are mangled in Rust's v0 scheme, whose generic
/// arguments made demangling whole names most of start-up's cost.
fn is_allocator_code(name: &str) -> bool {
    if !may_be_allocator_code(name.as_bytes()) {
        return false;
    }
    let prefix = DemangledPrefix::of(name);
    if prefix.trait_cut_off() {
        // A trait method whose self type is longer than the prefix (v0 mangling's generic arguments): the
        // trait it belongs to decides, so the whole name is read (rare: an allocation here is no cost).
        return memprof_analysis::is_allocation_plumbing(&format!("{:#}", rustc_demangle::demangle(name)));
    }
    memprof_analysis::is_allocation_plumbing(prefix.as_str())
}

/// Whether a mangled name can be the allocator's code (the others are never demangled): a search for
/// each word over the name's bytes (memchr's vectorised substring search).
fn may_be_allocator_code(name: &[u8]) -> bool {
    use std::sync::LazyLock;
    static WORDS: LazyLock<[memchr::memmem::Finder<'static>; 3]> =
        LazyLock::new(|| ["alloc", "rjem", "collect"].map(memchr::memmem::Finder::new));
    name.starts_with(b"je_") || WORDS.iter().any(|word| word.find(name).is_some())
}

/// How much of a demangled name is kept: every plumbing name and prefix fits, with the self type of a
/// trait method (`<alloc::vec::Vec<T> as core::clone::Clone>::clone`) and most trait paths after it.
const DEMANGLED_PREFIX: usize = 192;

/// The first [`DEMANGLED_PREFIX`] bytes of a demangled name, on the stack: the demangler stops writing
/// when it is full.
struct DemangledPrefix {
    bytes: [u8; DEMANGLED_PREFIX],
    len: usize,
    /// Whether the name went on past the prefix.
    cut: bool,
}

impl DemangledPrefix {
    fn of(name: &str) -> Self {
        use std::fmt::Write;
        let mut prefix = Self { bytes: [0; DEMANGLED_PREFIX], len: 0, cut: false };
        // Full: the demangler is told to stop, and what was written is kept.
        let _ = write!(prefix, "{:#}", rustc_demangle::demangle(name));
        prefix
    }

    /// Whether the name is a trait method's (`<Self as Trait>::method`) cut off before its trait: a self
    /// type that is plumbing judges it already, any other leaves it to the trait.
    fn trait_cut_off(&self) -> bool {
        let text = self.as_str();
        self.cut && text.starts_with('<') && !text.contains(" as ") && !memprof_analysis::is_allocation_plumbing(text)
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
        self.cut |= fits < text.len();
        if self.cut { Err(std::fmt::Error) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests;
