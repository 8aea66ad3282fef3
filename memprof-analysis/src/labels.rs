//! Allocation labels: which tenant, route or task a sample was allocated for.
//!
//! The process that takes the samples keeps a table of the label sets in force on its threads, each
//! interned to a small id, and its backtrace hook appends the id to each sampled stack as one synthetic
//! outermost frame, [`label_address`]: an address in the lower half of the address space where no mapping
//! can be, which jemalloc hashes, compares and prints like any other, and which jeprof keeps (it drops
//! upper-half addresses and misnames small ones). Dumps stay jemalloc's own; the table travels beside them
//! ([`LabelSets::to_text`], [`LabelSets::parse`]), and [`crate::analysis::Analysis::with_labels`] gives each sample
//! its labels back.
//!
//! ```
//! use memprof_analysis::{LabelSets, label_address, label_id};
//!
//! let mut sets = LabelSets::default();
//! sets.insert(1, [("tenant", "acme"), ("route", "/sessions")]);
//! assert_eq!(label_id(label_address(1)), Some(1));
//! // jeprof moves every return address back by one, the label's too: still label 1.
//! assert_eq!(label_id(label_address(1) - 1), Some(1));
//! let text = sets.to_text();
//! assert_eq!(LabelSets::parse(&text).unwrap(), sets);
//! assert_eq!(sets.get(1).unwrap().get("tenant"), Some("acme"));
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::heap_profile::ParseError;

/// The value a split shows for samples without the key.
pub const NO_LABEL: &str = "(none)";

/// What a label whose value spells [`NO_LABEL`] (a client's header, say) is kept as: quoted, so that it is
/// never merged with the samples that have no such label.
pub const NO_LABEL_SPELLED: &str = "\"(none)\"";

/// Where label addresses start: `LABEL\0` in ASCII, in the lower half of the address space and far above
/// any mapping a process can have.
pub const LABEL_ADDRESS_BASE: u64 = 0x4c41_4245_4c00_0000;

/// Label ids are spaced by 16 so that an address moved back by a reader (jeprof subtracts 1 from every
/// frame but the first) still names its own label.
const SPACING_BITS: u32 = 4;

/// The synthetic frame address of label set `id`.
pub fn label_address(id: u32) -> u64 {
    LABEL_ADDRESS_BASE + (u64::from(id) << SPACING_BITS)
}

/// The label set id `address` stands for, if it is a label frame (as written, or moved back by up to 15
/// as readers move return addresses); `None` for an address of code.
pub fn label_id(address: u64) -> Option<u32> {
    let offset = address.checked_sub(LABEL_ADDRESS_BASE)?;
    let id = (offset + (1 << SPACING_BITS) - 1) >> SPACING_BITS;
    u32::try_from(id).ok().filter(|&id| id > 0)
}

/// The file beside a kept profile that holds its label table: `<profile>.labels`.
pub fn labels_path(profile: &std::path::Path) -> std::path::PathBuf {
    let mut path = profile.as_os_str().to_owned();
    path.push(".labels");
    path.into()
}

/// The labels in force when a sample was taken: `key = value` pairs, sorted by key, each key once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSet(Arc<[(Arc<str>, Arc<str>)]>);

impl LabelSet {
    /// The set of `pairs`; a later pair replaces an earlier one of the same key. A value spelling
    /// [`NO_LABEL`] is kept quoted ([`NO_LABEL_SPELLED`]), apart from no label.
    ///
    /// ```
    /// let set = memprof_analysis::LabelSet::new([("tenant", "acme"), ("route", "/"), ("tenant", "initech")]);
    /// assert_eq!(set.to_string(), "route=/,tenant=initech");
    /// let spelled = memprof_analysis::LabelSet::new([("tenant", "(none)")]);
    /// assert_eq!(spelled.get("tenant"), Some("\"(none)\""));
    /// ```
    pub fn new<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        let mut sorted: BTreeMap<&str, Arc<str>> = BTreeMap::new();
        let pairs: Vec<(K, V)> = pairs.into_iter().collect();
        for (key, value) in &pairs {
            let value = if value.as_ref() == NO_LABEL { NO_LABEL_SPELLED } else { value.as_ref() };
            sorted.insert(key.as_ref(), value.into());
        }
        Self(sorted.into_iter().map(|(key, value)| (Arc::from(key), value)).collect())
    }

    /// The value of `key`, if the set has it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(name, _)| &**name == key).map(|(_, value)| &**value)
    }

    /// The pairs, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(key, value)| (&**key, &**value))
    }

    /// Whether the set has no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for LabelSet {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (key, value)) in self.iter().enumerate() {
            if index > 0 {
                formatter.write_str(",")?;
            }
            write!(formatter, "{key}={value}")?;
        }
        Ok(())
    }
}

/// The label sets of a process, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSets(BTreeMap<u32, LabelSet>);

/// The first line of a label table file.
const HEADER: &str = "memprof-labels/1";

impl LabelSets {
    /// Records set `id`.
    pub fn insert<K: AsRef<str>, V: AsRef<str>>(&mut self, id: u32, pairs: impl IntoIterator<Item = (K, V)>) {
        self.0.insert(id, LabelSet::new(pairs));
    }

    /// Records set `id`, already built.
    pub fn insert_set(&mut self, id: u32, set: LabelSet) {
        self.0.insert(id, set);
    }

    /// Set `id`, if known.
    pub fn get(&self, id: u32) -> Option<&LabelSet> {
        self.0.get(&id)
    }

    /// Whether no set is known.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The table as a file: a header line, then per set its id and its `key=value` pairs, tab-separated,
    /// with `\`, tab, newline and carriage return escaped (`\\`, `\t`, `\n`, `\r`) and `=` in a key as `\=`.
    pub fn to_text(&self) -> String {
        let mut text = format!("{HEADER}\n");
        for (id, set) in &self.0 {
            text.push_str(&id.to_string());
            for (key, value) in set.iter() {
                text.push('\t');
                text.push_str(&escape(key, true));
                text.push('=');
                text.push_str(&escape(value, false));
            }
            text.push('\n');
        }
        text
    }

    /// Reads a table written by [`LabelSets::to_text`]. It is a claim like the dump it travels with:
    /// anything else is refused with its line.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, HEADER)) => {}
            _ => return Err(ParseError { line: 1, message: format!("expected the header {HEADER:?}") }),
        }
        let mut sets = BTreeMap::new();
        for (index, line) in lines {
            let error = |message: String| ParseError { line: index + 1, message };
            let mut fields = line.split('\t');
            let id = fields.next().unwrap_or_default();
            let id: u32 = id.parse().map_err(|_| error(format!("{id:?} is not a label set id")))?;
            let pairs = fields
                .map(|field| {
                    let (key, value) =
                        split_unescaped(field).ok_or_else(|| error(format!("{field:?} is not key=value")))?;
                    Ok((unescape(key).map_err(&error)?, unescape(value).map_err(&error)?))
                })
                .collect::<Result<Vec<(String, String)>, ParseError>>()?;
            if sets.insert(id, LabelSet::new(pairs)).is_some() {
                return Err(error(format!("label set {id} is listed twice")));
            }
        }
        Ok(Self(sets))
    }
}

fn escape(text: &str, key: bool) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '\\' => escaped.push_str("\\\\"),
            '\t' => escaped.push_str("\\t"),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '=' if key => escaped.push_str("\\="),
            other => escaped.push(other),
        }
    }
    escaped
}

/// `key=value` split at the first `=` not escaped.
fn split_unescaped(field: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (index, byte) in field.bytes().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'=' => return Some((&field[..index], &field[index + 1..])),
            _ => {}
        }
    }
    None
}

fn unescape(text: &str) -> Result<String, String> {
    let mut unescaped = String::with_capacity(text.len());
    let mut characters = text.chars();
    while let Some(character) = characters.next() {
        if character != '\\' {
            unescaped.push(character);
            continue;
        }
        unescaped.push(match characters.next() {
            Some('\\') => '\\',
            Some('t') => '\t',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('=') => '=',
            other => return Err(format!("unknown escape \\{}", other.map(String::from).unwrap_or_default())),
        });
    }
    Ok(unescaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_address_and_the_addresses_readers_move_it_to_name_its_set() {
        for id in [1, 2, 17, 4096, u32::MAX] {
            let address = label_address(id);
            for moved in 0..16 {
                assert_eq!(label_id(address - moved), Some(id), "{id} moved back by {moved}");
            }
        }
        assert_eq!(label_id(LABEL_ADDRESS_BASE), None);
        assert_eq!(label_id(0x5555_5555_0000), None);
        assert_eq!(label_id(label_address(u32::MAX) + 1), None);
    }

    #[test]
    fn tables_with_every_character_escaped_read_back_as_written() {
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", "acme")]);
        sets.insert(7, [("a=b", "x\ty\nz\\=\r")]);
        sets.insert(9, Vec::<(&str, &str)>::new());
        assert_eq!(LabelSets::parse(&sets.to_text()), Ok(sets));
    }

    #[test]
    fn malformed_tables_are_refused_with_their_line() {
        let refused = |text: &str| LabelSets::parse(text).unwrap_err().to_string();
        assert_eq!(refused(""), "line 1: expected the header \"memprof-labels/1\"");
        assert_eq!(refused("memprof-labels/1\nx\ta=b"), "line 2: \"x\" is not a label set id");
        assert_eq!(refused("memprof-labels/1\n1\tab"), "line 2: \"ab\" is not key=value");
        assert_eq!(refused("memprof-labels/1\n1\ta=\\q"), "line 2: unknown escape \\q");
        assert_eq!(refused("memprof-labels/1\n1\n1"), "line 3: label set 1 is listed twice");
    }
}
