//! Tables whose entries are kept once each, entry 0 the empty one, as pprof's string table and OTLP's
//! dictionary tables are: [`Interned`] gives each key its index, [`StringTable`] keeps the strings too.

use std::collections::HashMap;
use std::hash::Hash;

/// The index of each key of a table, entry 0 the empty key; the caller keeps the entries.
pub(super) struct Interned<K> {
    index: HashMap<K, usize>,
    next: usize,
}

impl<K: Hash + Eq> Interned<K> {
    /// With `empty` as entry 0.
    pub(super) fn new(empty: K) -> Self {
        Interned { index: HashMap::from([(empty, 0)]), next: 1 }
    }

    /// The index of `key`, and whether it is new (then the caller pushes its entry).
    pub(super) fn index<I: TryFrom<usize> + Default>(&mut self, key: K) -> (I, bool) {
        let next = self.next;
        let index = *self.index.entry(key).or_insert(next);
        let new = index == next;
        self.next += usize::from(new);
        (narrowed(index), new)
    }
}

/// A string table: each string once, `""` first.
pub(super) struct StringTable {
    /// The strings, in index order.
    pub(super) table: Vec<String>,
    index: HashMap<String, usize>,
}

impl StringTable {
    /// Holding `""` alone.
    pub(super) fn new() -> Self {
        StringTable { table: vec![String::new()], index: HashMap::from([(String::new(), 0)]) }
    }

    /// The index of `text` (in the type the format's field has), added if new; a string already there
    /// is looked up without being copied.
    pub(super) fn intern<I: TryFrom<usize> + Default>(&mut self, text: &str) -> I {
        let index = match self.index.get(text) {
            Some(&index) => index,
            None => {
                self.table.push(text.to_owned());
                self.index.insert(text.to_owned(), self.table.len() - 1);
                self.table.len() - 1
            }
        };
        narrowed(index)
    }
}

/// An index in the format's integer type; a table past its range (billions of entries, which a
/// profile's bounds never reach) would name entry 0.
fn narrowed<I: TryFrom<usize> + Default>(index: usize) -> I {
    I::try_from(index).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kept_once_each_after_the_empty_one() {
        let mut strings = StringTable::new();
        assert_eq!((strings.intern::<i64>("a"), strings.intern::<i64>(""), strings.intern::<i64>("a")), (1, 0, 1));
        assert_eq!(strings.intern::<i32>("b"), 2);
        assert_eq!(strings.table, ["", "a", "b"]);
        let mut pairs = Interned::new((0, String::new()));
        assert_eq!(pairs.index::<i32>((1, "x".to_owned())), (1, true));
        assert_eq!(pairs.index::<i32>((1, "x".to_owned())), (1, false));
        assert_eq!(pairs.index::<i32>((0, String::new())), (0, false));
    }
}
