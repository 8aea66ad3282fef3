//! Filling jemalloc's buffer with a walk's return addresses, the allocator's leading frames left out.

use std::ffi::{c_uint, c_void};

use crate::allocator_code::AllocatorCode;

/// A walk's return addresses written into jemalloc's buffer as they come. The walk starts in jemalloc (the
/// hook's caller) and goes through Rust's allocation plumbing: the stack recorded starts at the allocator's
/// caller. Those leading frames are dropped as the walk goes, so they never take the place of the
/// program's own when the stack is deeper than the buffer.
pub(super) struct Filling {
    pub(super) frames: *mut usize,
    pub(super) max: usize,
    pub(super) count: usize,
    /// While true, every frame written is the allocator's.
    pub(super) in_leading: bool,
    /// When the buffer is full: the frames that did not fit (counted up to
    /// [`memprof_analysis::MOST_COUNTED`]).
    pub(super) cut: Option<u32>,
    code: Option<&'static AllocatorCode>,
}

impl Filling {
    /// # Safety
    /// `frames` must have room for `max` pointers, for as long as the filling is used.
    #[inline(always)]
    pub(super) unsafe fn new(frames: *mut *mut c_void, max: c_uint) -> Self {
        let code = AllocatorCode::if_read();
        Self { frames: frames as *mut usize, max: max as usize, count: 0, in_leading: true, cut: None, code }
    }

    /// Takes the walk's next return address; answers whether the walk should go on.
    #[inline(always)]
    pub(super) fn push(&mut self, address: usize) -> bool {
        if let Some(cut) = &mut self.cut {
            *cut += 1;
            return *cut < memprof_analysis::MOST_COUNTED;
        }
        if self.in_leading && !self.code.is_some_and(|code| code.returns_into(address)) {
            self.in_leading = false;
            self.count = 0;
        } else if self.in_leading && self.count == self.max && self.max > 0 {
            // Only the allocator's frames so far: keep the newest one, in case no other comes.
            // SAFETY: `count - 1 < max` pointers were written.
            unsafe { *self.frames = *self.frames.add(self.count - 1) };
            self.count = 1;
        }
        if self.count == self.max {
            self.cut = Some(1);
            return 1 < memprof_analysis::MOST_COUNTED;
        }
        // SAFETY: `count < max`, and `frames` has room for `max` pointers.
        unsafe { *self.frames.add(self.count) = address };
        self.count += 1;
        true
    }
}
