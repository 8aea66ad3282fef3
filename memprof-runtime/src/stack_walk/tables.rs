//! The walk by unwind tables, for programs built without frame pointers: the `.eh_frame` section every
//! object has (it is how panics unwind), read in place in the process's memory, with the rule found for
//! each return address cached so that a stack walked again costs a few loads a frame.
//!
//! libgcc's `_Unwind_Backtrace` reads the same tables but finds and interprets each frame's entry again
//! at every frame of every sample: some 75,000 instructions for a tokio stack of 40 frames. Here the
//! tables are indexed once, when memprof prepares for samples ([`prepare`]), and the interpretation is
//! framehop's, into caches made beforehand: a walk takes no lock (a cache is taken with one
//! compare-and-swap, the next one tried if it is in use) and allocates nothing.
//!
//! The objects known are those loaded when memprof prepared (the executable and its libraries); each
//! library is pinned (`RTLD_NODELETE`) so that its tables stay mapped while a walk may read them. A walk
//! that meets an address in no known object (a library loaded later, code made at run time) gives up, and
//! the sample is walked by libgcc's unwinder, which knows every object.

use std::cell::UnsafeCell;
use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use framehop::{
    CacheNative, ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, UnwindRegsNative,
    Unwinder, UnwinderNative,
};

/// The unwind tables of the objects loaded when memprof prepared for samples.
struct Known {
    tables: UnwinderNative<&'static [u8], MustNotAllocateDuringUnwind>,
    /// The executable segments of those objects, sorted: where a return address may lead.
    code: Vec<(usize, usize)>,
    /// The rules' caches, [`CACHES`] of them.
    caches: Box<[Slot]>,
}

impl Known {
    /// The executable segment holding `address`.
    fn code_around(&self, address: usize) -> Option<(usize, usize)> {
        let after = self.code.partition_point(|&(start, _)| start <= address);
        let (start, end) = *self.code.get(after.checked_sub(1)?)?;
        (address < end).then_some((start, end))
    }
}

/// How many walks may go on at once, each with its cache; one more waits for nothing: libgcc walks it.
const CACHES: usize = 4;

/// A cache of unwind rules, used by one walk at a time.
struct Slot {
    busy: AtomicBool,
    cache: UnsafeCell<CacheNative<MustNotAllocateDuringUnwind>>,
}

impl Slot {
    fn new() -> Self {
        Slot { busy: AtomicBool::new(false), cache: UnsafeCell::new(CacheNative::new_in()) }
    }
}

// SAFETY: `cache` is reached only by the thread that set `busy` (see `with_cache`).
unsafe impl Sync for Slot {}

static KNOWN: OnceLock<Result<Known, String>> = OnceLock::new();

/// Indexes the unwind tables of every object loaded now and makes the caches (once; cheap: the tables
/// are read where they lie, only their headers now). Errs where no object has tables to walk by.
pub(super) fn prepare() -> Result<(), String> {
    let known = KNOWN.get_or_init(|| crate::jemalloc::in_own_arena(index_loaded_objects));
    known.as_ref().map(|_| ()).map_err(Clone::clone)
}

/// Why a walk by the tables could not be made.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unwalked {
    /// Not prepared, every cache in use, or this thread's stack unknown: nothing was given.
    Unready,
    /// An address in no object known (after the addresses before it were given).
    UnknownCode,
}

/// Walks the current stack by the unwind tables, giving `each` the return addresses above the caller's
/// frame, newest first (as the frame-pointer walk does), until it answers `false` or the stack ends.
/// Allocates nothing and takes no lock.
#[inline(never)]
pub(super) fn walk(mut each: impl FnMut(usize) -> bool) -> Result<(), Unwalked> {
    let (pc, stack_pointer, registers) = registers();
    let Some(Ok(known)) = KNOWN.get() else { return Err(Unwalked::Unready) };
    let (_, top) = super::this_thread_stack(stack_pointer).ok_or(Unwalked::Unready)?;
    let word = std::mem::size_of::<u64>();
    let last_word = top.checked_sub(word).ok_or(Unwalked::Unready)?;
    let mut read_stack = |address: u64| {
        let address = usize::try_from(address).map_err(|_| ())?;
        if address < stack_pointer || address > last_word || !address.is_multiple_of(word) {
            return Err(());
        }
        // SAFETY: `address` and the word at it lie between the stack pointer and the top of this thread's
        // stack, which is mapped, and it is aligned.
        Ok(unsafe { *(address as *const u64) })
    };
    with_cache(&known.caches, |cache| {
        let mut registers = registers;
        let mut frame = FrameAddress::from_instruction_pointer(pc as u64);
        // The segment of the last address: most of a stack's frames are in one (the executable's code).
        let mut segment = (0, 0);
        // This function's own frame, then its caller's: what is above the caller starts after them.
        for step in 0.. {
            // An error ends the walk where it is, as libgcc's ends where the tables say no more.
            let Ok(Some(next)) = known.tables.unwind_frame(frame, &mut registers, cache, &mut read_stack) else {
                break;
            };
            let Some(next) = FrameAddress::from_return_address(next) else { break };
            frame = next;
            if step == 0 {
                continue;
            }
            let address = frame.address_for_lookup() as usize;
            if !(segment.0..segment.1).contains(&address) {
                segment = known.code_around(address).ok_or(Unwalked::UnknownCode)?;
            }
            if !each(frame.address() as usize) {
                break;
            }
        }
        Ok(())
    })
    .unwrap_or(Err(Unwalked::Unready))
}

/// Runs `work` with the first cache not in use; `None` when all are.
fn with_cache<T>(slots: &[Slot], work: impl FnOnce(&mut CacheNative<MustNotAllocateDuringUnwind>) -> T) -> Option<T> {
    let slot = slots
        .iter()
        .find(|slot| slot.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok())?;
    // SAFETY: this thread set `busy`: no other reaches the cache until it is cleared below.
    let answer = work(unsafe { &mut *slot.cache.get() });
    slot.busy.store(false, Ordering::Release);
    Some(answer)
}

/// The program counter, the stack pointer and the registers the walk starts from, all read at one
/// instruction of the function this is inlined into.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn registers() -> (usize, usize, UnwindRegsNative) {
    let (pc, stack, frame): (usize, usize, usize);
    // SAFETY: reads three registers; no memory is touched.
    unsafe {
        std::arch::asm!("lea {}, [rip]", "mov {}, rsp", "mov {}, rbp", out(reg) pc, out(reg) stack, out(reg) frame,
            options(nomem, nostack, preserves_flags));
    }
    (pc, stack, UnwindRegsNative::new(pc as u64, stack as u64, frame as u64))
}

/// The program counter, the stack pointer and the registers the walk starts from, all read at one
/// instruction of the function this is inlined into.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn registers() -> (usize, usize, UnwindRegsNative) {
    let (pc, stack, frame, link): (usize, usize, usize, usize);
    // SAFETY: reads four registers; no memory is touched.
    unsafe {
        std::arch::asm!("adr {}, .", "mov {}, sp", "mov {}, x29", "mov {}, x30", out(reg) pc, out(reg) stack,
            out(reg) frame, out(reg) link, options(nomem, nostack, preserves_flags));
    }
    (pc, stack, UnwindRegsNative::new(link as u64, stack as u64, frame as u64))
}

/// An object as the dynamic loader describes it: what indexing its tables needs.
struct LoadedObject {
    name: String,
    /// The load bias: the object's addresses in its file plus this are where they are in memory.
    bias: usize,
    /// Executable segments, as the file addresses them.
    code: Vec<(usize, usize)>,
    /// Segments with contents in the file, as it addresses them: `.eh_frame` lies in one.
    loaded: Vec<(usize, usize)>,
    /// `PT_GNU_EH_FRAME`: the `.eh_frame_hdr` section, its sorted index of `.eh_frame`.
    eh_frame_hdr: Option<(usize, usize)>,
}

/// Every object loaded now, its tables indexed; libraries pinned in memory.
fn index_loaded_objects() -> Result<Known, String> {
    let mut objects: Vec<LoadedObject> = Vec::new();
    // SAFETY: `each_object` matches the callback's type and treats `data` as the `Vec` it is.
    unsafe { libc::dl_iterate_phdr(Some(each_object), &mut objects as *mut Vec<LoadedObject> as *mut c_void) };
    let mut tables = UnwinderNative::new();
    let mut code = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        // The executable (the first object) is never unloaded; a library is pinned, or left out.
        if (index > 0 && !pin(&object.name)) || object.code.is_empty() {
            continue;
        }
        let Some(module) = module(object) else { continue };
        tables.add_module(module);
        code.extend(object.code.iter().map(|&(start, end)| (start + object.bias, end + object.bias)));
    }
    if code.is_empty() {
        return Err("no object loaded has unwind tables (.eh_frame_hdr) to walk by".to_owned());
    }
    code.sort_unstable();
    let caches = (0..CACHES).map(|_| Slot::new()).collect();
    Ok(Known { tables, code, caches })
}

/// The dynamic loader's description of one object, kept.
unsafe extern "C" fn each_object(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
    // SAFETY: the loader passes a valid `dl_phdr_info` with `dlpi_phnum` headers at `dlpi_phdr`, and
    // `data` is the `Vec` `index_loaded_objects` passed.
    let (info, objects) = unsafe { (&*info, &mut *(data as *mut Vec<LoadedObject>)) };
    let headers = if info.dlpi_phdr.is_null() {
        &[][..]
    } else {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
    };
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a loaded object's name is a NUL-terminated string the loader keeps.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
    };
    let mut object =
        LoadedObject { name, bias: info.dlpi_addr as usize, code: Vec::new(), loaded: Vec::new(), eh_frame_hdr: None };
    for header in headers {
        let range = (header.p_vaddr as usize, (header.p_vaddr + header.p_memsz) as usize);
        match header.p_type {
            libc::PT_LOAD => {
                object.loaded.push((header.p_vaddr as usize, (header.p_vaddr + header.p_filesz) as usize));
                if header.p_flags & libc::PF_X != 0 {
                    object.code.push(range);
                }
            }
            libc::PT_GNU_EH_FRAME => object.eh_frame_hdr = Some(range),
            _ => {}
        }
    }
    objects.push(object);
    0
}

/// Keeps a loaded library mapped for the life of the process (`RTLD_NOLOAD | RTLD_NODELETE`): a walk may
/// read its tables at any time. False where it cannot be pinned (the vDSO; a static program's loader).
fn pin(name: &str) -> bool {
    let Ok(name) = std::ffi::CString::new(name) else { return false };
    // SAFETY: `name` is a NUL-terminated string; RTLD_NOLOAD loads nothing new.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
    !handle.is_null()
}

/// The object's tables for framehop, read where the loader mapped them.
fn module(object: &LoadedObject) -> Option<Module<&'static [u8]>> {
    let in_memory = |(start, end): (usize, usize)| -> &'static [u8] {
        // SAFETY: the range lies in one of the object's loaded segments (checked by the callers), mapped
        // for as long as the object is loaded: for the life of the process, as it is pinned.
        unsafe { std::slice::from_raw_parts((start + object.bias) as *const u8, end - start) }
    };
    let within_loaded = |start: usize| object.loaded.iter().find(|&&(from, to)| from <= start && start < to).copied();
    let (hdr_start, hdr_end) = object.eh_frame_hdr?;
    let (_, hdr_segment_end) = within_loaded(hdr_start)?;
    let eh_frame_hdr = in_memory((hdr_start, hdr_end.min(hdr_segment_end)));
    let eh_frame_start = eh_frame_address(eh_frame_hdr, hdr_start)?;
    // `.eh_frame`'s length is in no header: to the end of its segment (its entries say their lengths).
    let (_, eh_frame_end) = within_loaded(eh_frame_start)?;
    let text = object.code.iter().copied().reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))?;
    let sections = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: Some(text.0 as u64..text.1 as u64),
        eh_frame_svma: Some(eh_frame_start as u64..eh_frame_end as u64),
        eh_frame: Some(in_memory((eh_frame_start, eh_frame_end))),
        eh_frame_hdr_svma: Some(hdr_start as u64..hdr_end as u64),
        eh_frame_hdr: Some(eh_frame_hdr),
        ..Default::default()
    };
    let avma = (text.0 + object.bias) as u64..(text.1 + object.bias) as u64;
    Some(Module::new(object.name.clone(), avma, object.bias as u64, sections))
}

/// Where `.eh_frame` starts, from the pointer at the head of `.eh_frame_hdr` (which lies at `hdr_address`):
/// version 1, then the pointer's encoding (DWARF's `DW_EH_PE_*`), two more encodings, then the pointer.
fn eh_frame_address(hdr: &[u8], hdr_address: usize) -> Option<usize> {
    let (&[version, encoding, ..], Some(field)) = (hdr, hdr.get(4..)) else { return None };
    if version != 1 {
        return None;
    }
    let value = match encoding & 0x0f {
        0x03 => u32::from_le_bytes(field.get(..4)?.try_into().ok()?) as usize,
        0x0b => i32::from_le_bytes(field.get(..4)?.try_into().ok()?) as isize as usize,
        0x04 | 0x0c => usize::try_from(u64::from_le_bytes(field.get(..8)?.try_into().ok()?)).ok()?,
        _ => return None,
    };
    match encoding & 0x70 {
        0x00 => Some(value),
        0x10 => Some((hdr_address + 4).wrapping_add(value)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
