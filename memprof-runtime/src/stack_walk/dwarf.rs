//! The DWARF walk: the program's own `_Unwind_Backtrace` (every Rust program links one, for panics), which
//! interprets the unwind tables every function has, with or without frame pointers. Some 5 µs a sample.

use std::ffi::{c_int, c_uint, c_void};

unsafe extern "C" {
    fn _Unwind_Backtrace(trace: extern "C" fn(*mut c_void, *mut c_void) -> c_int, data: *mut c_void) -> c_int;
    fn _Unwind_GetIP(context: *mut c_void) -> usize;
}

/// `_Unwind_Backtrace`'s answers to its callback: `_URC_NO_REASON` goes on, `_URC_END_OF_STACK` stops.
const GO_ON: c_int = 0;
const STOP: c_int = 5;

/// A sample's walk by the program's `_Unwind_Backtrace`, as jemalloc's libgcc walk does it: up to `max`
/// instruction addresses into `frames`, their count into `len`. Allocates nothing.
///
/// # Safety
/// `frames` must have room for `max` pointers and `len` must be writable, as jemalloc guarantees.
#[inline(never)]
pub(super) unsafe fn unwind_backtrace(frames: *mut *mut c_void, len: *mut c_uint, max: c_uint) {
    struct Filling {
        frames: *mut *mut c_void,
        count: c_uint,
        max: c_uint,
    }
    extern "C" fn fill(context: *mut c_void, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `Filling` passed below, alive for the whole walk; `context` is the unwinder's.
        let filling = unsafe { &mut *(data as *mut Filling) };
        let address = unsafe { _Unwind_GetIP(context) };
        if address == 0 || filling.count >= filling.max {
            return STOP;
        }
        // SAFETY: `count < max`, and `frames` has room for `max` pointers.
        unsafe { *filling.frames.add(filling.count as usize) = address as *mut c_void };
        filling.count += 1;
        if filling.count < filling.max { GO_ON } else { STOP }
    }
    let mut filling = Filling { frames, count: 0, max };
    // SAFETY: `fill` matches `_Unwind_Trace_Fn` and only uses `data` as the `Filling` it is.
    unsafe {
        _Unwind_Backtrace(fill, &mut filling as *mut Filling as *mut c_void);
        *len = filling.count;
    }
}

/// Up to `max` instruction addresses of the current stack, by libgcc's DWARF unwinder (the walk samples
/// use, [`unwind_backtrace`]), starting with this function's own.
#[inline(never)]
pub(super) fn libgcc_backtrace(max: usize) -> Vec<usize> {
    let mut frames = vec![std::ptr::null_mut::<c_void>(); max + 1];
    let mut len: c_uint = 0;
    // SAFETY: `frames` has room for `max + 1` pointers; `len` is writable.
    unsafe { unwind_backtrace(frames.as_mut_ptr(), &mut len, c_uint::try_from(max + 1).unwrap_or(c_uint::MAX)) };
    // The walk's own frame first: this function's comes next.
    frames[..len as usize].iter().skip(1).map(|frame| *frame as usize).collect()
}
