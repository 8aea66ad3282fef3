//! Which mapping of `/proc/self/maps` holds an address, read without locks or allocation: the walk looks
//! its thread's stack up there at the thread's first sample, wherever the allocator was called from.

/// The mapping in `/proc/self/maps` that holds `address`, `(start, end)`.
///
/// Reads the file through a buffer on the stack and parses as it goes: no lock, no allocation, so it is
/// safe wherever the allocator is called from.
pub(super) fn mapping_containing(address: usize) -> Option<(usize, usize)> {
    use std::io::Read;
    let mut maps = std::fs::File::open("/proc/self/maps").ok()?;
    let mut buffer = [0u8; 4096];
    let mut range = MapsRange::default();
    loop {
        let read = maps.read(&mut buffer).ok()?;
        if read == 0 {
            return None;
        }
        for &byte in &buffer[..read] {
            if let Some((start, end)) = range.push(byte)
                && (start..end).contains(&address)
            {
                return Some((start, end));
            }
        }
    }
}

/// The address range at the start of each line of `/proc/self/maps` (`start-end perms ...`), fed a byte at
/// a time.
#[derive(Default)]
pub(super) struct MapsRange {
    start: usize,
    end: usize,
    /// 0: reading the start, 1: reading the end, 2: past the range until the end of the line.
    field: u8,
}

impl MapsRange {
    /// Takes the next byte; returns a line's range when its end is read.
    pub(super) fn push(&mut self, byte: u8) -> Option<(usize, usize)> {
        match (self.field, byte) {
            (_, b'\n') => *self = Self::default(),
            (0, b'-') => self.field = 1,
            (1, b' ') => {
                self.field = 2;
                return Some((self.start, self.end));
            }
            (0 | 1, _) => {
                let digit = (byte as char).to_digit(16).map(|digit| digit as usize);
                let value = if self.field == 0 { &mut self.start } else { &mut self.end };
                match digit.and_then(|digit| value.checked_mul(16)?.checked_add(digit)) {
                    Some(next) => *value = next,
                    None => self.field = 2,
                }
            }
            _ => {}
        }
        None
    }
}
