//! The stack walk behind every sample.
//!
//! jemalloc's own walk asks libgcc's `_Unwind_Backtrace` to interpret DWARF unwind tables, some 5 µs a
//! sample: on an allocation-heavy thread sampled every 512 KiB that is half of its time. When the program
//! keeps frame pointers (`-C force-frame-pointers=yes`; std and, built with debug info, jemalloc keep
//! them), each frame holds the address of its caller's frame and the walk is a few loads per frame.
//!
//! [`install`] checks at start-up that this process's stacks can be walked that way: the same stack walked
//! both ways must give the same return addresses. Only then does it walk by frame pointers; otherwise
//! samples are walked by the unwind tables every object has, with the rule of each return address cached
//! ([`tables`]: a few loads a frame once warm, against libgcc's 75,000 instructions a tokio stack), and
//! [`Unwinder::UnwindTables`] says why. libgcc's walk stays where the tables cannot be indexed, and takes
//! the samples the cached walk cannot (code in a library loaded after start-up). `MEMPROF_UNWINDER` chooses
//! whatever the check says: `unwind-tables`, or `libgcc` (jemalloc's own walk, wrapped).
//!
//! Either way memprof's hook is installed, so that each sample also records the labels in force on its
//! thread (see [`crate::labels`]): one synthetic outermost frame, written after the walk, in place of the
//! outermost frame when the walk filled the buffer.
//!
//! Where jemalloc was built without a DWARF unwinder (its musl builds: `config.prof_libgcc` false), its own
//! walk follows frames with gcc's `__builtin_frame_address` and faults on the first frame without a frame
//! pointer. There the samples the frame-pointer walk does not take are walked by the program's own
//! `_Unwind_Backtrace` (every Rust program links one, for panics), never by jemalloc's.
//!
//! The walk never reads outside the live part of the current thread's stack (from the stack pointer to
//! the top of the memory mapping that holds it), so a frame pointer a function reused as a plain register
//! ends the walk instead of faulting. The mapping is looked up in `/proc/self/maps` at a thread's first
//! sample, without locks or allocation: a sample can be taken anywhere, even inside glibc's
//! `pthread_getattr_np` while it holds the thread's own lock (as every new Rust thread does), so the walk
//! must not call it. Where the stack pointer leaves the known mapping more than a few times (stacks
//! switched by coroutines), libgcc's walk takes the sample.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::allocator_code::AllocatorCode;
use crate::process::environment::UNWINDER as UNWINDER_VARIABLE;

mod completion;
mod dwarf;
mod filling;
mod maps;
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tables;
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
#[path = "no_tables.rs"]
mod tables;
pub(crate) mod work_clock;

pub(crate) use completion::completed_walks;
use dwarf::{libgcc_backtrace, unwind_backtrace};
use filling::Filling;
use maps::mapping_containing;

/// How samples walk the stack, process-wide (jemalloc's backtrace hook reads it): chosen once, before
/// sampling first switches on.
struct Walk {
    /// Whether the samples the frame-pointer walk does not take are walked by [`unwind_backtrace`] (jemalloc's
    /// own walk is not an unwinder's), else by the hook before memprof's, `previous_hook`.
    own_unwind: AtomicBool,
    /// jemalloc's previous hook (libgcc's walk), for the samples the frame-pointer walk cannot take.
    previous_hook: AtomicUsize,
    /// Whether samples are walked by frame pointers.
    frame_pointers: AtomicBool,
    /// Whether samples are walked by the unwind tables (when not by frame pointers; else by `previous_hook`).
    unwind_tables: AtomicBool,
    /// Whether the hooks time each sample's work ([`work_clock`]).
    timed: AtomicBool,
}

static WALK: Walk = Walk {
    own_unwind: AtomicBool::new(false),
    previous_hook: AtomicUsize::new(0),
    frame_pointers: AtomicBool::new(false),
    unwind_tables: AtomicBool::new(false),
    timed: AtomicBool::new(false),
};

/// jemalloc's `prof_backtrace_hook_t`: fills `frames` with up to `max` return addresses and sets `len`.
type BacktraceHook = unsafe extern "C" fn(frames: *mut *mut c_void, len: *mut c_uint, max: c_uint);

/// The walk that samples use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unwinder {
    /// Frame pointers, installed as jemalloc's backtrace hook.
    FramePointers,
    /// The unwind tables, each return address's rule cached (see [`tables`]), for the reason given.
    UnwindTables(String),
    /// jemalloc's default, libgcc's DWARF unwinder, for the reason given.
    Libgcc(String),
}

impl Unwinder {
    /// The name `state` shows.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Unwinder::FramePointers => "frame pointers",
            Unwinder::UnwindTables(_) => "unwind tables",
            Unwinder::Libgcc(_) if WALK.own_unwind.load(Ordering::Relaxed) => "the program's _Unwind_Backtrace",
            Unwinder::Libgcc(_) => "libgcc",
        }
    }

    /// Why samples are not walked by frame pointers.
    pub(crate) fn why(&self) -> Option<&str> {
        match self {
            Unwinder::FramePointers => None,
            Unwinder::UnwindTables(reason) | Unwinder::Libgcc(reason) => Some(reason),
        }
    }
}

/// The walk an operator chose (`MEMPROF_UNWINDER`), whatever frame pointers allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WalkAsked {
    /// `unwind-tables`.
    UnwindTables,
    /// `libgcc`.
    Libgcc,
}

/// Chooses the walk for this process's samples (the one `asked`, else frame pointers where they agree with
/// libgcc, else the unwind tables) and installs memprof's hook; call once, when profiling is enabled.
/// Labels are recorded unless jemalloc refuses the hook (then the walk is libgcc's, unlabelled).
pub(crate) fn install(asked: Option<WalkAsked>) -> Unwinder {
    let mut unwinder = match asked {
        Some(WalkAsked::Libgcc) => Unwinder::Libgcc(format!("{UNWINDER_VARIABLE}=libgcc")),
        Some(WalkAsked::UnwindTables) => Unwinder::UnwindTables(format!("{UNWINDER_VARIABLE}=unwind-tables")),
        None => match frame_pointers_agree_with_libgcc() {
            Ok(()) => Unwinder::FramePointers,
            Err(reason) => Unwinder::UnwindTables(reason),
        },
    };
    // Every sample needs the tables then: indexed now (some microseconds: only their headers are read).
    if let Unwinder::UnwindTables(reason) = &unwinder {
        unwinder = match tables::prepare() {
            Ok(()) => {
                WALK.unwind_tables.store(true, Ordering::Release);
                unwinder
            }
            Err(error) => Unwinder::Libgcc(format!("{reason}, and {error}")),
        };
    }
    // The previous hook is published before memprof's is installed: a sample taken in between finds it.
    let previous = match crate::jemalloc::backtrace_hook() {
        Ok(previous) => previous,
        Err(error) => return Unwinder::Libgcc(format!("jemalloc does not show its backtrace hook ({error})")),
    };
    WALK.previous_hook.store(previous, Ordering::Release);
    WALK.own_unwind.store(!crate::jemalloc::walks_with_an_unwinder(), Ordering::Release);
    // Reading the symbol table for the allocator's code takes milliseconds on a large executable: it is
    // read off the program's start (see `prepare_for_samples`), and a program that never samples (a
    // command-line tool run thousands of times a day) never pays it.
    WALK.frame_pointers.store(unwinder == Unwinder::FramePointers, Ordering::Release);
    match crate::jemalloc::replace_backtrace_hook(labelling_hook as BacktraceHook as usize) {
        Ok(_) => unwinder,
        Err(error) => {
            Unwinder::Libgcc(format!("jemalloc refused the backtrace hook ({error}); labels are not recorded"))
        }
    }
}

/// Reads where the executable's functions lie (once), so that the walks leave the allocator's frames out
/// of every stack as its functions are judged ([`AllocatorCode`]): called before a run switches sampling
/// on, and by memprof's statistics thread while sampling is continuous (within a second of start-up).
/// Until then the walks keep those frames (the analysis leaves them out of its own answers anyway). Later
/// calls cost an atomic load.
pub(crate) fn prepare_for_samples() {
    AllocatorCode::of_this_program();
    // The frame-pointer walk completes broken chains by the tables where it can (else by libgcc's).
    let _ = tables::prepare();
}

/// The hook jemalloc calls for each sample (with its re-entrancy guard up: allocating here is allowed, but
/// nothing here allocates or locks): the walk, then the label frame; its work timed from here for the
/// budget ([`work_clock`]).
///
/// # Safety
/// `frames` must have room for `max` pointers and `len` must be writable, as jemalloc guarantees.
unsafe extern "C" fn labelling_hook(frames: *mut *mut c_void, len: *mut c_uint, max: c_uint) {
    work_clock::start();
    let walked = if WALK.frame_pointers.load(Ordering::Relaxed) {
        // SAFETY: jemalloc's contract, passed on.
        unsafe { walk_frame_pointers(frames, len, max) }
    } else if WALK.unwind_tables.load(Ordering::Relaxed) {
        // SAFETY: jemalloc's contract, passed on.
        unsafe { walk_unwind_tables(frames, len, max) }
    } else {
        None
    };
    if walked.is_none() {
        let previous = WALK.previous_hook.load(Ordering::Acquire);
        if WALK.own_unwind.load(Ordering::Acquire) {
            // SAFETY: jemalloc's contract, passed on.
            unsafe { unwind_backtrace(frames, len, max) };
        } else if previous != 0 {
            // SAFETY: `previous` is the hook jemalloc had installed, with the same signature and contract.
            unsafe { std::mem::transmute::<usize, BacktraceHook>(previous)(frames, len, max) };
        } else {
            // SAFETY: `len` is writable (jemalloc's contract).
            unsafe { *len = 0 };
        }
    }
    // How many frames the walk left out, when it filled the buffer (0: not counted, by another's walk).
    let cut = match walked {
        Some(cut) => cut,
        // SAFETY: `len` was written by the walk (jemalloc's contract).
        None if unsafe { *len } == max => Some(0),
        None => None,
    };
    let label = crate::labels::current();
    let label_room = c_uint::from(label != 0);
    if let Some(cut) = cut
        && max > label_room
    {
        // SAFETY: `len` was written by the walk, at most `max`; the mark goes over the outermost frames that
        // it and the label need, within the `max` pointers.
        unsafe {
            let kept = (*len).min(max - label_room - 1);
            let left_out = if cut == 0 { 0 } else { cut.saturating_add(*len - kept) };
            *frames.add(kept as usize) = memprof_analysis::truncated_address(left_out) as *mut c_void;
            *len = kept + 1;
        }
    }
    if label != 0 && max > 0 {
        // SAFETY: `len` was written by the walk, at most `max`; the label goes after the walk's frames, or
        // over the outermost one when they fill the buffer.
        unsafe {
            let at = (*len).min(max - 1);
            *frames.add(at as usize) = memprof_analysis::label_address(label) as *mut c_void;
            *len = at + 1;
        }
    }
}

/// The frame-pointer walk into `frames`, completed by the DWARF unwinder where the frame chain broke (see
/// [`completion`]); `None` (nothing written) where this thread's stack is unknown, else how many frames
/// were left out when the stack was deeper than `max` (counted up to [`memprof_analysis::MOST_COUNTED`]).
///
/// # Safety
/// `frames` must have room for `max` pointers and `len` must be writable, as jemalloc guarantees.
#[inline(always)]
unsafe fn walk_frame_pointers(frames: *mut *mut c_void, len: *mut c_uint, max: c_uint) -> Option<Option<u32>> {
    let walk = FrameWalk::here()?;
    // SAFETY: jemalloc's contract, passed on.
    let mut filling = unsafe { Filling::new(frames, max) };
    for address in walk {
        if !filling.push(address) {
            break;
        }
    }
    if filling.cut.is_none() && !filling.in_leading && filling.count > 0 {
        // SAFETY: `count` addresses are written, `0 < count <= max`, with room for `max`.
        filling.count = unsafe { completion::complete(filling.frames, filling.count, filling.max) };
    }
    // SAFETY: `len` is writable; `count <= max` fits in a `c_uint`.
    unsafe { *len = filling.count as c_uint };
    Some(filling.cut)
}

/// The walk by the unwind tables into `frames`; `None` (the sample left to libgcc's walk) where it cannot
/// be made, else how many frames were left out, as [`walk_frame_pointers`] answers.
///
/// # Safety
/// `frames` must have room for `max` pointers and `len` must be writable, as jemalloc guarantees.
#[inline(always)]
unsafe fn walk_unwind_tables(frames: *mut *mut c_void, len: *mut c_uint, max: c_uint) -> Option<Option<u32>> {
    // SAFETY: jemalloc's contract, passed on.
    let mut filling = unsafe { Filling::new(frames, max) };
    tables::walk(|address| filling.push(address)).ok()?;
    // SAFETY: `len` is writable; `count <= max` fits in a `c_uint`.
    unsafe { *len = filling.count as c_uint };
    Some(filling.cut)
}

/// The return addresses of the frames above the caller, newest first, found by following frame pointers
/// within the live part of this thread's stack.
struct FrameWalk {
    frame: usize,
    /// The stack pointer when the walk began: no live frame lies below it.
    low: usize,
    /// The top of this thread's stack.
    high: usize,
}

impl FrameWalk {
    /// A walk from the frame of the function this is inlined into; `None` where the mapping holding the
    /// stack is unknown.
    #[inline(always)]
    fn here() -> Option<Self> {
        let (frame, stack_pointer) = registers()?;
        let (_, top) = this_thread_stack(stack_pointer)?;
        Some(Self { frame, low: stack_pointer, high: top })
    }
}

impl Iterator for FrameWalk {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let frame = self.frame;
        let word = std::mem::size_of::<usize>();
        if frame < self.low || frame > self.high.checked_sub(2 * word)? || !frame.is_multiple_of(word) {
            return None;
        }
        // SAFETY: `frame` and the word after it lie between the stack pointer and the top of this thread's
        // stack, which is mapped and aligned; a frame record holds the caller's frame pointer, then the
        // return address.
        let (caller_frame, return_address) = unsafe { (*(frame as *const usize), *((frame + word) as *const usize)) };
        if return_address == 0 {
            return None;
        }
        // Callers' frames lie above their callees'; anything else is not a frame record.
        self.frame = if caller_frame > frame { caller_frame } else { usize::MAX };
        Some(return_address)
    }
}

/// The frame pointer and stack pointer registers of the function this is inlined into.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn registers() -> Option<(usize, usize)> {
    let (frame, stack): (usize, usize);
    // SAFETY: reads two registers; no memory is touched.
    unsafe {
        std::arch::asm!("mov {}, rbp", "mov {}, rsp", out(reg) frame, out(reg) stack,
            options(nomem, nostack, preserves_flags));
    }
    Some((frame, stack))
}

/// The frame pointer and stack pointer registers of the function this is inlined into.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn registers() -> Option<(usize, usize)> {
    let (frame, stack): (usize, usize);
    // SAFETY: reads two registers; no memory is touched.
    unsafe {
        std::arch::asm!("mov {}, x29", "mov {}, sp", out(reg) frame, out(reg) stack,
            options(nomem, nostack, preserves_flags));
    }
    Some((frame, stack))
}

/// Other architectures: no walk (libgcc's stays).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn registers() -> Option<(usize, usize)> {
    None
}

thread_local! {
    /// The mapping that held this thread's stack pointer at its last lookup, `(start, end)`, and how many
    /// lookups the thread has made.
    static STACK: Cell<((usize, usize), u8)> = const { Cell::new(((0, 0), 0)) };
}

/// How many times a thread looks its stack up: once, and again when the main thread's stack grows
/// below the mapping first seen.
const STACK_LOOKUPS: u8 = 4;

/// The memory mapping of this thread's stack that holds `stack_pointer`, `(start, end)`.
fn this_thread_stack(stack_pointer: usize) -> Option<(usize, usize)> {
    STACK.with(|stack| {
        let (known, lookups) = stack.get();
        if (known.0..known.1).contains(&stack_pointer) {
            return Some(known);
        }
        if lookups >= STACK_LOOKUPS {
            return None;
        }
        let found = mapping_containing(stack_pointer);
        stack.set((found.unwrap_or(known), lookups + 1));
        found
    })
}

/// How many return addresses the start-up check compares.
const CHECKED_FRAMES: usize = 6;

/// Walks the current stack both ways and compares them.
#[inline(never)]
fn frame_pointers_agree_with_libgcc() -> Result<(), String> {
    let by_frame_pointers: Vec<usize> = FrameWalk::here()
        .ok_or("the walk knows x86_64 and aarch64 stacks in mappings /proc/self/maps lists, not this one")?
        .take(CHECKED_FRAMES)
        .collect();
    agree(&by_frame_pointers, &libgcc_backtrace(CHECKED_FRAMES + 2))
}

/// Whether a frame-pointer walk from a function matches libgcc's walk from a function it calls
/// ([`libgcc_backtrace`]), which starts with that callee's and the function's own addresses: then comes
/// the return address into the function's caller, where the frame-pointer walk begins.
fn agree(by_frame_pointers: &[usize], by_libgcc: &[usize]) -> Result<(), String> {
    let advice = "build with RUSTFLAGS=\"-C force-frame-pointers=yes\" for the cheapest samples";
    match by_libgcc.get(2..2 + by_frame_pointers.len()) {
        _ if by_frame_pointers.len() < 3 => Err(format!("frame pointers lead nowhere from memprof's frames; {advice}")),
        Some(expected) if expected == by_frame_pointers => Ok(()),
        _ => Err(format!("frame pointers skip frames that libgcc finds; {advice}")),
    }
}

#[cfg(test)]
mod tests;
