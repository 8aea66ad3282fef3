//! Filling jemalloc's buffer with a walk's return addresses, the allocator's leading frames left out.

use std::ffi::{c_uint, c_void};

use crate::allocator_code::{AllocatorCode, Judged};

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
    /// How many more frames are asked about: the leading frames ended at a function not judged yet, and the
    /// ones after it may be the allocator's too (asked for now, all are judged at once, not one a reading).
    asking: u8,
}

/// How many frames after one not judged yet are asked about (Rust's allocation plumbing is some ten deep).
const ASKED_AHEAD: u8 = 16;

impl Filling {
    /// # Safety
    /// `frames` must have room for `max` pointers, for as long as the filling is used.
    #[inline(always)]
    pub(super) unsafe fn new(frames: *mut *mut c_void, max: c_uint) -> Self {
        let code = AllocatorCode::if_read();
        Self { frames: frames as *mut usize, max: max as usize, count: 0, in_leading: true, cut: None, code, asking: 0 }
    }

    /// Takes the walk's next return address; answers whether the walk should go on.
    #[inline(always)]
    pub(super) fn push(&mut self, address: usize) -> bool {
        if let Some(cut) = &mut self.cut {
            *cut += 1;
            return *cut < memprof_analysis::MOST_COUNTED;
        }
        let judged = match self.code {
            Some(code) if self.in_leading || self.asking > 0 => code.judged_at(address),
            _ => Judged::Program,
        };
        if !self.in_leading {
            self.asking = self.asking.saturating_sub(1);
        } else if judged != Judged::Allocator {
            self.in_leading = false;
            self.count = 0;
            self.asking = if judged == Judged::NotYet { ASKED_AHEAD } else { 0 };
        } else if self.count == self.max && self.max > 0 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allocators_leading_frames_are_left_out_and_those_not_judged_asked_for_ahead() {
        let functions = [(0x100, 0x180), (0x200, 0x280), (0x300, 0x380), (0x400, 0x480)];
        // jemalloc's function judged, two of the plumbing's not yet, the program's.
        let verdicts = [Some(true), None, None, Some(false)];
        let code: &'static AllocatorCode = Box::leak(Box::new(AllocatorCode::judged_already(&functions, &verdicts)));
        let mut buffer = [0usize; 8];
        let mut filling = Filling {
            frames: buffer.as_mut_ptr(),
            max: buffer.len(),
            count: 0,
            in_leading: true,
            cut: None,
            code: Some(code),
            asking: 0,
        };
        for address in [0x101, 0x201, 0x301, 0x401] {
            assert!(filling.push(address));
        }
        let count = filling.count;
        assert_eq!(&buffer[..count], &[0x201, 0x301, 0x401], "the judged frame left out, the others kept");
        assert!(code.asked_for(0x200) && code.asked_for(0x300), "both asked for in one walk, not one a reading");
        assert!(!code.asked_for(0x400), "judged already");
    }
}
