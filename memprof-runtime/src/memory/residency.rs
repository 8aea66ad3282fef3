//! How many pages of an address range the kernel has resident (`mincore(2)`): what the kernel holds of
//! jemalloc's ranges, which a mapping's `Rss` cannot say when the kernel merged them with other memory.
#![allow(unsafe_code)]

use std::io;

/// Pages asked about per call: the answer's buffer is this many bytes, reused.
const PAGES_PER_CALL: usize = 16 * 1024;

/// Counts resident pages of address ranges with one fixed buffer.
pub(crate) struct Residency {
    page: usize,
    answer: Vec<u8>,
}

impl Residency {
    /// A counter for pages of the system's size.
    pub(crate) fn new() -> Residency {
        let page = rustix::param::page_size();
        Residency { page, answer: vec![0; PAGES_PER_CALL] }
    }

    /// Resident bytes of `[start, end)`, whose pages must be mapped (a range that is not answers an error).
    pub(crate) fn resident_bytes(&mut self, start: usize, end: usize) -> io::Result<u64> {
        let start = start - start % self.page;
        let mut resident = 0u64;
        let mut at = start;
        while at < end {
            let pages = ((end - at).div_ceil(self.page)).min(PAGES_PER_CALL);
            // SAFETY: `at` is page-aligned; the answer buffer holds one byte for each of the `pages` pages
            // asked about; mincore only writes to it.
            let code = unsafe { libc::mincore(at as *mut libc::c_void, pages * self.page, self.answer.as_mut_ptr()) };
            if code != 0 {
                return Err(io::Error::last_os_error());
            }
            resident += self.answer[..pages].iter().filter(|&&page| page & 1 == 1).count() as u64;
            at += pages * self.page;
        }
        Ok(resident * self.page as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_pages_are_resident_and_untouched_ones_are_not() {
        let page = rustix::param::page_size();
        let mut block = std::hint::black_box(Vec::<u8>::with_capacity(64 * page));
        let base = block.as_ptr() as usize;
        let start = base.next_multiple_of(page);
        block.resize(start - base + 8 * page, 1);
        let mut residency = Residency::new();
        assert_eq!(residency.resident_bytes(start, start + 8 * page).unwrap(), 8 * page as u64);
        assert!(residency.resident_bytes(0, page).is_err());
    }
}
