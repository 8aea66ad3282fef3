//! The label sets in force anywhere in the process, each interned once to a small id that the backtrace
//! hook records with a sample. Ids are never reused, so every profile this process takes resolves with the
//! table as it is when the profile is read, and the table is bounded: past [`MAX_LABEL_SETS`] distinct
//! sets, every new one is recorded as the overflow set, counted and reported.
//!
//! Entering labels that were entered before (the common case: a label per request, from a few values)
//! finds them among the thread's recent transitions, without a lock, else under a shared lock, without
//! allocating; only a new set is built, with the calling thread's sampling off, so the table never shows
//! in the program's profiles.
//!
//! A child of `fork` may inherit the table's lock held by a thread it does not have: there the lock is
//! waited for a bounded while, and a table found locked records the child's new sets as the overflow set.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use memprof_analysis::{LabelSet, LabelSets};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The label sets of this process, process-wide (the walk's hook reads them): the table, its hasher, and
/// what did not fit.
struct Tables {
    /// The label sets recorded, and the transitions between them.
    table: LazyLock<RwLock<Table>>,
    /// The hasher of [`transition_hash`], keyed at random per process: label values can come from requests,
    /// and a sender must not be able to pick values whose hashes collide.
    hasher: LazyLock<ahash::RandomState>,
    /// How many times a new label set was recorded as the overflow set.
    overflowed: AtomicU64,
    /// The child of `fork` that found the table's lock held at the fork (0: none): it no longer waits for it.
    locked_out: std::sync::atomic::AtomicU32,
}

static TABLES: Tables = Tables {
    table: LazyLock::new(RwLock::default),
    hasher: LazyLock::new(ahash::RandomState::new),
    overflowed: AtomicU64::new(0),
    locked_out: std::sync::atomic::AtomicU32::new(0),
};

/// How many distinct label sets a process records; past it, new sets are recorded as one overflow set,
/// `memprof_overflow=too many label sets`.
pub const MAX_LABEL_SETS: u32 = 1024;

/// The id of the overflow set: [`MAX_LABEL_SETS`] + 1.
pub(crate) const OVERFLOW: u32 = MAX_LABEL_SETS + 1;

/// The label the overflow set carries.
pub(crate) const OVERFLOW_LABEL: (&str, &str) = ("memprof_overflow", "too many label sets");

/// How many (labels in force, labels entered) pairs are remembered for the fast path.
const MAX_TRANSITIONS: usize = 16 * MAX_LABEL_SETS as usize;

/// The longest label key and value kept, in bytes; longer ones are cut (a value at a character boundary).
pub(crate) const MAX_VALUE_BYTES: usize = 256;

/// Entering `pairs` where set `parent` is in force gives set `id`.
struct Transition {
    /// [`transition_hash`] of `parent` and `pairs`.
    hash: u64,
    parent: u32,
    pairs: Box<[(Box<str>, Box<str>)]>,
    id: u32,
}

impl Transition {
    fn is<K: AsRef<str>, V: AsRef<str>>(&self, hash: u64, parent: u32, pairs: &[(K, V)]) -> bool {
        self.hash == hash
            && self.parent == parent
            && self.pairs.len() == pairs.len()
            && self.pairs.iter().zip(pairs).all(|((key, value), (wanted_key, wanted_value))| {
                &**key == wanted_key.as_ref() && &**value == wanted_value.as_ref()
            })
    }
}

#[derive(Default)]
struct Table {
    /// Set `id` at index `id - 1`.
    sets: Vec<LabelSet>,
    ids: HashMap<LabelSet, u32>,
    /// By the hash of (parent, pairs).
    transitions: HashMap<u64, Vec<Arc<Transition>>>,
    transition_count: usize,
}

/// How many transitions each thread keeps at hand.
const RECENT_TRANSITIONS: usize = 16;

thread_local! {
    /// The transitions this thread used last, by hash: entering labels entered before takes no lock.
    static RECENT: RefCell<[Option<Arc<Transition>>; RECENT_TRANSITIONS]> =
        const { RefCell::new([const { None }; RECENT_TRANSITIONS]) };
}

/// The id of the set `pairs` make on top of set `parent` (0: none): `parent`'s labels with `pairs` added, a
/// key in `pairs` replacing the same key of `parent`'s. Keys and values are borrowed as they come (string
/// literals, or the boxed strings of `Labels`): nothing is allocated unless the set is new.
pub(crate) fn intern<K: AsRef<str>, V: AsRef<str>>(parent: u32, pairs: &[(K, V)]) -> u32 {
    let hash = transition_hash(parent, pairs);
    let slot = hash as usize % RECENT_TRANSITIONS;
    let recent = RECENT
        .try_with(|recent| {
            let recent = recent.borrow();
            recent[slot]
                .as_ref()
                .filter(|transition| transition.is(hash, parent, pairs))
                .map(|transition| transition.id)
        })
        .ok()
        .flatten();
    let id = match recent {
        Some(id) => id,
        None => {
            let known = read_table().and_then(|table| {
                let transitions = table.transitions.get(&hash)?;
                transitions.iter().find(|transition| transition.is(hash, parent, pairs)).cloned()
            });
            let transition = known.unwrap_or_else(|| crate::jemalloc::unsampled(|| intern_new(parent, pairs, hash)));
            let id = transition.id;
            let _ = RECENT.try_with(|recent| recent.borrow_mut()[slot] = Some(transition));
            id
        }
    };
    if id == OVERFLOW {
        TABLES.overflowed.fetch_add(1, Ordering::Relaxed);
    }
    id
}

/// The hash of the parent and the pairs, eight or sixteen bytes a step (each string's length is hashed with
/// it, so `("ab", "c")` and `("a", "bc")` differ): on the path of every entry of labels by value.
fn transition_hash<K: AsRef<str>, V: AsRef<str>>(parent: u32, pairs: &[(K, V)]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = TABLES.hasher.build_hasher();
    hasher.write_u32(parent);
    for (key, value) in pairs {
        hasher.write(key.as_ref().as_bytes());
        hasher.write(value.as_ref().as_bytes());
    }
    hasher.finish()
}

/// The slow path of [`intern`]: builds the set, finds or records it, and remembers the transition (past
/// [`MAX_TRANSITIONS`], only the calling thread does).
fn intern_new<K: AsRef<str>, V: AsRef<str>>(parent: u32, pairs: &[(K, V)], hash: u64) -> Arc<Transition> {
    let pairs_kept = || pairs.iter().map(|(key, value)| (key.as_ref().into(), value.as_ref().into())).collect();
    let Some(mut table) = write_table() else {
        return Arc::new(Transition { hash, parent, pairs: pairs_kept(), id: OVERFLOW });
    };
    let inherited: Vec<(String, String)> = match parent {
        0 => Vec::new(),
        id => table
            .sets
            .get(id as usize - 1)
            .map_or_else(Vec::new, |set| set.iter().map(|(key, value)| (key.to_owned(), value.to_owned())).collect()),
    };
    let entered =
        pairs.iter().map(|(key, value)| (sanitized_key(key.as_ref()), truncated_value(value.as_ref()).to_owned()));
    let set = LabelSet::new(inherited.into_iter().chain(entered));
    let id = if parent == OVERFLOW {
        OVERFLOW
    } else if let Some(&id) = table.ids.get(&set) {
        id
    } else if table.sets.len() < MAX_LABEL_SETS as usize {
        table.sets.push(set.clone());
        let id = table.sets.len() as u32;
        table.ids.insert(set, id);
        id
    } else {
        if TABLES.overflowed.load(Ordering::Relaxed) == 0 {
            crate::process::messages::warn(&format!(
                "More than {MAX_LABEL_SETS} distinct label sets: new ones are recorded as {}={}. Label by values \
                 that repeat (a tenant, a route), not by ones that never do (a request id, a user id)",
                OVERFLOW_LABEL.0, OVERFLOW_LABEL.1
            ));
        }
        OVERFLOW
    };
    let transition = Arc::new(Transition { hash, parent, pairs: pairs_kept(), id });
    if table.transition_count < MAX_TRANSITIONS {
        table.transition_count += 1;
        table.transitions.entry(hash).or_default().push(Arc::clone(&transition));
    }
    transition
}

/// How long a child of `fork` waits for the table's lock before taking it as held at the fork for ever.
const FORKED_CHILD_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

fn read_table() -> Option<RwLockReadGuard<'static, Table>> {
    locked(|| TABLES.table.try_read_for(FORKED_CHILD_WAIT), || TABLES.table.read())
}

fn write_table() -> Option<RwLockWriteGuard<'static, Table>> {
    locked(|| TABLES.table.try_write_for(FORKED_CHILD_WAIT), || TABLES.table.write())
}

/// The table's lock: waited for in the process memprof belongs to; in a child of `fork`, at most
/// [`FORKED_CHILD_WAIT`], once (`None` then, and for the rest of the child's life).
fn locked<G>(within: impl FnOnce() -> Option<G>, wait: impl FnOnce() -> G) -> Option<G> {
    if !crate::process::lineage::forked_child() {
        return Some(wait());
    }
    let child = std::process::id();
    if TABLES.locked_out.load(Ordering::Relaxed) == child {
        return None;
    }
    let guard = within();
    if guard.is_none() {
        TABLES.locked_out.store(child, Ordering::Relaxed);
    }
    guard
}

/// A key as pprof tags and `?by=` take it: ASCII letters, digits and `_` (others become `_`), never empty,
/// at most [`MAX_VALUE_BYTES`] (a 100,000-byte key was kept and sent whole).
fn sanitized_key(key: &str) -> String {
    let key: String = key
        .chars()
        .take(MAX_VALUE_BYTES)
        .map(|character| if character.is_ascii_alphanumeric() { character } else { '_' })
        .collect();
    if key.is_empty() { "_".to_owned() } else { key }
}

fn truncated_value(value: &str) -> &str {
    let mut end = value.len().min(MAX_VALUE_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

/// Every set recorded so far, the overflow set among them once it was used.
pub(crate) fn snapshot() -> LabelSets {
    let table = TABLES.table.read();
    let mut sets = LabelSets::default();
    for (index, set) in table.sets.iter().enumerate() {
        sets.insert_set(index as u32 + 1, set.clone());
    }
    if TABLES.overflowed.load(Ordering::Relaxed) > 0 {
        sets.insert(OVERFLOW, [OVERFLOW_LABEL]);
    }
    sets
}

/// How many distinct label sets are recorded, and how many times a new one was recorded as the overflow set.
pub fn counts() -> (u32, u64) {
    (TABLES.table.read().sets.len() as u32, TABLES.overflowed.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_labels_on_the_same_parent_are_one_set_and_inner_keys_replace_outer_ones() {
        let acme = intern(0, &[("tenant", "acme-table-test")]);
        assert_eq!(intern(0, &[("tenant", "acme-table-test")]), acme);
        let route = intern(acme, &[("route", "/table-test")]);
        let other = intern(route, &[("tenant", "initech-table-test")]);
        let sets = snapshot();
        assert_eq!(sets.get(route).unwrap().to_string(), "route=/table-test,tenant=acme-table-test");
        assert_eq!(sets.get(other).unwrap().to_string(), "route=/table-test,tenant=initech-table-test");
        assert_eq!(intern(0, &[("route", "/table-test"), ("tenant", "initech-table-test")]), other);
    }

    #[test]
    fn keys_are_sanitized_and_long_values_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_VALUE_BYTES);
        let id = intern(0, &[("a key-with.dots", &long)]);
        let set = snapshot().get(id).unwrap().clone();
        let (key, value) = set.iter().next().unwrap();
        assert_eq!(key, "a_key_with_dots");
        assert_eq!(value.len(), MAX_VALUE_BYTES);
        assert!(long.starts_with(value));
        let id = intern(0, &[(&"k".repeat(100_000), "v")]);
        let set = snapshot().get(id).unwrap().clone();
        assert_eq!(set.iter().next().unwrap().0, &"k".repeat(MAX_VALUE_BYTES), "keys are cut alike");
    }
}
