//! Dumps outside runs, kept: each automatic dump in the ring of them, with what grew beside it in continuous
//! mode ([`crate::profiler::Profiler::automatic_dump`] takes them).

use std::path::PathBuf;
use std::time::SystemTime;

use super::{Books, KeptProfile, Owner};
use crate::jemalloc;
use crate::process::messages;
use crate::sampler::record;

/// Keeps automatic dump `id` at `path`, then drops the oldest beyond `keep` files or `max_bytes`.
pub(super) fn keep_automatic(
    books: &mut Books,
    id: u64,
    owner: Owner,
    path: PathBuf,
    keep: usize,
    max_bytes: u64,
) -> KeptProfile {
    let now = SystemTime::now();
    let dump = KeptProfile { id, owner, started: now, stopped: now, path };
    crate::profile_root::evidence::write_provenance(&dump);
    let size = |dump: &KeptProfile| std::fs::metadata(&dump.path).map_or(0, |metadata| metadata.len());
    let evicted = books.runs.automatic_dump(dump.clone(), keep, max_bytes, size);
    books.forget(evicted);
    dump
}

/// Beside automatic dump `beside`, in continuous mode: what grew steadily over the record's last hour, as a
/// profile of its own (each stack holding its growth), so that after an OOM kill the next process shows
/// the growing stacks of the killed one beside its last heap. Nothing when nothing grew.
pub(super) fn keep_growth(books: &mut Books, record: &record::table::Table, beside: u64, keep: usize, max_bytes: u64) {
    let (growers, _) = record::growers(record, |_| u32::MAX);
    let Some(seconds) = growers.first().map(|grower| grower.growth.seconds) else { return };
    let write = |path: &std::path::Path| {
        let text = record::growers_as_dump(&growers, &|grower| grower.growth.grown)?;
        crate::profile_root::storage::write_owner_only(path, text.as_bytes())
    };
    let id = books.runs.next_id();
    match jemalloc::unsampled(|| books.store.automatic(id, &write)) {
        Ok(path) => {
            let reason = format!("{}{seconds} s, beside dump {beside}", crate::profile_root::evidence::GROWTH_REASON);
            let owner = Owner::Automatic(reason);
            keep_automatic(books, id, owner, path, keep, max_bytes);
        }
        Err(error) => messages::warn(&format!("The growth beside automatic dump {beside} was not written: {error}")),
    }
}
