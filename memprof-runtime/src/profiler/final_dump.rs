//! The profile of a run still active as the program ends: kept at `MEMPROF_FINAL_DUMP` if set, else said
//! discarded.

use crate::jemalloc;
use crate::process::environment::FINAL_DUMP as FINAL_DUMP_VARIABLE;
use crate::process::messages;
use crate::profile_root::storage::Dump;

/// Writes the profile of run `id`, active as the program ends, to `path` (`MEMPROF_FINAL_DUMP`) if set.
pub(super) fn leave(path: Option<&std::path::Path>, id: u64, dump: Dump<'_>) {
    let Some(path) = path else {
        messages::info(&format!(
            "Heap profiling run {id} was active when the program ended; its profile is discarded (set {FINAL_DUMP_VARIABLE}=/path/final.heap to keep it)"
        ));
        return;
    };
    match jemalloc::unsampled(|| dump(path)) {
        Ok(()) => messages::info(&format!(
            "Heap profiling run {id} was active when the program ended; its profile is at {}",
            path.display()
        )),
        Err(error) => messages::warn(&format!("The final heap profile of run {id} was not written: {error}")),
    }
}
