//! Padding to cache lines, for the table's shared counters and locks.

/// A value on cache lines of its own (two, as adjacent-line prefetching pairs them): threads taking
/// different shards' locks do not take each other's cache lines.
#[repr(align(128))]
pub(super) struct Padded<T>(pub(super) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
