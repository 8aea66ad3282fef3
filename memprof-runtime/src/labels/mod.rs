//! Allocation labels: heap profiles split by tenant, route or task.
//!
//! Everything allocated while labels are in force on a thread is recorded with them: a sample carries the
//! labels in force when it was taken, and every format can split or filter by them (`?by=tenant`,
//! `?label=tenant:acme`, pprof tags for `go tool pprof -tags`, Pyroscope and Parca). Labels nest: an inner
//! one replaces the same key of an outer one until it ends, and they are restored however the inner block
//! ends (a panic too). A future labelled with [`WithLabels::with_labels`] has its labels on every poll, on
//! whichever worker thread polls it.
//!
//! ```
//! use memprof_runtime::labels::{self, WithLabels};
//!
//! let session = labels::with(&[("tenant", "acme")], || vec![0u8; 64 * 1024]);
//! let _entered = labels::enter(&[("route", "/sessions")]);
//! let task = async { vec![0u8; 1024] }.with_labels(&[("tenant", "initech")]);
//! # drop((session, task));
//! ```
//!
//! Setting labels costs a hash of them and a lookup among the thread's recent ones (under a shared lock
//! when not recent); the sampled stack gets one more frame. A process records at most [`MAX_LABEL_SETS`]
//! distinct label sets (combinations of keys and values); past that, new ones are recorded as
//! `memprof_overflow`, counted in `state` and `/metrics`: label by values that repeat (a tenant, a route),
//! not by ones that never do.
//!
//! Labels follow threads: memory allocated under a label and freed on another thread still counts against
//! that label, and a `Vec` that grows by reallocation is charged to the labels in force where it grew.

#[cfg(feature = "axum")]
mod axum;
mod future;
mod in_force;
mod table;
#[cfg(feature = "tower")]
mod tower;
#[cfg(feature = "tracing")]
mod tracing;

use std::marker::PhantomData;

use memprof_analysis::LabelSets;

#[cfg(feature = "axum")]
pub use axum::{RouteLabelled, RouteLabels, UNMATCHED_ROUTE, route_labels};
pub use future::{Labelled, WithLabels};
pub(crate) use in_force::current;
use in_force::replace;
pub(crate) use table::OVERFLOW;
pub(crate) use table::snapshot as table_now;
use table::snapshot;
pub use table::{MAX_LABEL_SETS, counts};
#[cfg(feature = "tower")]
pub use tower::{RequestLabelled, RequestLabels, request_labels};
#[cfg(feature = "tracing")]
pub use tracing::LabelLayer;

/// Why labels from `tracing` are silent, when its layer labelled nothing for a minute while allocations
/// are `sampled` (its spans filtered out by a filter on the whole subscriber): a warning for `state`.
pub(crate) fn silence(sampled: bool) -> Option<String> {
    #[cfg(feature = "tracing")]
    return tracing::silence(sampled);
    #[cfg(not(feature = "tracing"))]
    {
        let _ = sampled;
        None
    }
}

/// The longest label table read beside a profile: the table's bound on label sets with long values.
const LABEL_TABLE_LIMIT: u64 = 16 << 20;

/// The label table of the profile at `profile`: the one kept beside it (a profile of an earlier process),
/// else this process's own, which resolves every profile this process took (ids are never reused).
pub(crate) fn table_for(profile: &std::path::Path) -> LabelSets {
    crate::profile_root::untrusted::read_small_text(
        &crate::profile_root::files::Beside::Labels.of(profile),
        LABEL_TABLE_LIMIT,
    )
    .ok()
    .and_then(|text| LabelSets::parse(&text).ok())
    .unwrap_or_else(snapshot)
}

/// This process's label table as a file's text, for beside a profile it dumps; `None` while no labels
/// were ever entered.
pub(crate) fn table_text() -> Option<String> {
    let sets = snapshot();
    (!sets.is_empty()).then(|| sets.to_text())
}

/// The names of the label frames among `addresses`, as pprof's symbol service answers them (`memprof label
/// tenant=acme`); `None` for addresses of code.
pub(crate) fn frame_names(addresses: &[u64]) -> Vec<Option<String>> {
    let sets = snapshot();
    let name = |id: u32| match sets.get(id) {
        Some(set) => format!("memprof label {set}"),
        None => format!("memprof label set {id}"),
    };
    addresses.iter().map(|&address| memprof_analysis::label_id(address).map(name)).collect()
}

/// Runs `body` with `labels` added to those in force on this thread, and restores them after, also when
/// `body` panics.
///
/// ```
/// let buffer = memprof_runtime::labels::with(&[("tenant", "acme")], || vec![0u8; 4096]);
/// # drop(buffer);
/// ```
pub fn with<R>(labels: &[(&str, &str)], body: impl FnOnce() -> R) -> R {
    let _entered = enter(labels);
    body()
}

/// Adds `labels` to those in force on this thread until the returned guard is dropped. The guard stays on
/// its thread (it is not `Send`): in async code label the future instead ([`WithLabels`]).
///
/// ```
/// let _labels = memprof_runtime::labels::enter(&[("route", "/sessions")]);
/// let session = vec![0u8; 4096]; // recorded with route=/sessions
/// # drop(session);
/// ```
#[must_use = "the labels end when the guard is dropped"]
pub fn enter(labels: &[(&str, &str)]) -> Entered {
    let id = table::intern(current(), labels);
    Entered { previous: replace(id), _not_send: PhantomData }
}

/// The label set of `labels` added to those in force on this thread, interned: its id, to put in force
/// later ([`enter_interned`]).
pub(crate) fn interned(labels: &[(&str, &str)]) -> u32 {
    table::intern(current(), labels)
}

/// Puts the interned label set `id` in force on this thread until the guard is dropped.
pub(crate) fn enter_interned(id: u32) -> Entered {
    Entered { previous: replace(id), _not_send: PhantomData }
}

/// Labels made once and entered many times: for a hot loop, where hashing the labels at each entry
/// ([`with`], [`enter`]) would cost more than the work they label. Entering them where no other labels are
/// in force is two thread-local writes; inside other labels it is [`enter`]'s lookup.
///
/// ```
/// use memprof_runtime::labels::Labels;
///
/// let tenants = [Labels::new(&[("tenant", "acme")]), Labels::new(&[("tenant", "initech")])];
/// for request in 0..1000 {
///     let buffer = tenants[request % 2].with(|| vec![0u8; 64]);
///     # drop(buffer);
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Labels {
    /// The set these labels make on their own.
    id: u32,
    pairs: Box<[(Box<str>, Box<str>)]>,
}

impl Labels {
    /// Interns `labels` once.
    pub fn new(labels: &[(&str, &str)]) -> Self {
        let pairs = labels.iter().map(|&(key, value)| (key.into(), value.into())).collect();
        Self { id: table::intern(0, labels), pairs }
    }

    /// Adds these labels to those in force on this thread until the guard is dropped; see [`enter`].
    #[inline]
    #[must_use = "the labels end when the guard is dropped"]
    pub fn enter(&self) -> Entered {
        let id = match current() {
            0 => self.id,
            outer => table::intern(outer, &self.pairs),
        };
        Entered { previous: replace(id), _not_send: PhantomData }
    }

    /// Runs `body` with these labels added to those in force; see [`with`].
    pub fn with<R>(&self, body: impl FnOnce() -> R) -> R {
        let _entered = self.enter();
        body()
    }
}

/// Labels in force on this thread until dropped; see [`enter`].
#[derive(Debug)]
pub struct Entered {
    previous: u32,
    _not_send: PhantomData<*const ()>,
}

impl Drop for Entered {
    #[inline]
    fn drop(&mut self) {
        replace(self.previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_made_once_are_the_same_set_as_entered_by_value_and_nest_alike() {
        let acme = Labels::new(&[("tenant", "acme-handle-test")]);
        let entered = acme.enter();
        assert_eq!(current(), table::intern(0, &[("tenant", "acme-handle-test")]));
        drop(entered);
        with(&[("route", "/handle-test")], || {
            let outer = current();
            acme.with(|| {
                assert_eq!(current(), table::intern(outer, &[("tenant", "acme-handle-test")]));
                assert_eq!(
                    snapshot().get(current()).unwrap().to_string(),
                    "route=/handle-test,tenant=acme-handle-test"
                );
            });
            assert_eq!(current(), outer);
        });
        assert_eq!(current(), 0);
    }

    #[test]
    fn labels_nest_and_are_restored_when_the_inner_block_panics() {
        let outer = enter(&[("tenant", "acme-nesting")]);
        let in_outer = current();
        let caught = std::panic::catch_unwind(|| {
            with(&[("tenant", "initech-nesting")], || {
                assert_ne!(current(), in_outer);
                assert_eq!(snapshot().get(current()).unwrap().get("tenant"), Some("initech-nesting"));
                panic!("inside the labels");
            })
        });
        assert!(caught.is_err());
        assert_eq!(current(), in_outer);
        drop(outer);
        assert_eq!(current(), 0);
    }
}
