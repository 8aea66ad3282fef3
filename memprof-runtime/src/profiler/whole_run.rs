//! The whole run of a batch program, kept when it exits (`MEMPROF_WHOLE_RUN=/dir`): sampling is continuous
//! from start-up and a window ("whole run") opens then; when the program ends (`main` returns,
//! [`crate::shutdown`], SIGTERM or SIGINT where asked) the window closes and its profiles are copied into
//! the directory, with the automatic dumps taken during the run, before the profile directory goes:
//!
//! - `whole-run.heap`: what is still live at the end (a batch program's leftovers);
//! - `whole-run.allocated.heap`: everything the run allocated, freed or not, by stack;
//! - `whole-run.peak.heap`: what it held when it held the most (an unbiased estimate near its high-water mark, see the record's peaks);
//! - `automatic-<id>.heap`: each automatic dump kept (at each high water 50 % above the last, by default
//!   with continuous sampling: the heap near its peaks).
//!
//! Each is a `heap_v2` dump (its label table beside it, where labels were entered), for `memprof analyze`
//! or jeprof, against the program's binary.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::{Owner, Profiler};
use crate::process::environment::WHOLE_RUN as WHOLE_RUN_VARIABLE;
use crate::process::messages;
use crate::profile_root::files::{Beside, variance_of};
use crate::profile_root::storage::write_owner_only;

/// Opens the window of the whole run over `profiler`'s record, kept in `directory` at exit (made now, owner-only, so that a
/// directory that cannot be made is said at start, not found at exit); reports why not when the
/// directory cannot be made or sampling is not continuous (`MEMPROF_SAMPLING=on-demand` said otherwise,
/// or profiling is off).
pub(crate) fn open(profiler: &Profiler, directory: PathBuf) {
    if let Err(error) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&directory) {
        return messages::error(&format!(
            "{WHOLE_RUN_VARIABLE}={}: the directory cannot be made ({error}); the whole run is not kept",
            directory.display()
        ));
    }
    match profiler.open_window(Owner::Code("whole run".to_owned())) {
        Ok(Some(window)) => {
            let _ = profiler.whole_run.set((window.id, directory));
        }
        Ok(None) => messages::error(&format!(
            "{WHOLE_RUN_VARIABLE} is set, but sampling is not continuous ({}): the whole run is not kept",
            profiler.sampler().sampling().because
        )),
        Err(error) => messages::error(&format!("The whole run is not kept: {error}")),
    }
}

/// At the end: closes the whole run's window and copies its profiles and the automatic dumps into the
/// directory asked for, owner-only; says where, or why not.
pub(super) fn keep(profiler: &Profiler) {
    let Some((id, directory)) = profiler.whole_run.get() else { return };
    let window = match profiler.close_window(*id) {
        Ok(window) => window,
        // Closed already (an earlier shutdown): nothing more to keep.
        Err(super::Error::UnknownRun(_)) => return,
        Err(error) => return messages::error(&format!("The whole run's profile was not written: {error}")),
    };
    let mut copies = vec![
        (window.path.clone(), directory.join("whole-run.heap")),
        (Beside::Allocated.of(&window.path), directory.join("whole-run.allocated.heap")),
        (Beside::Peak.of(&window.path), directory.join("whole-run.peak.heap")),
    ];
    let automatic = profiler.overview().automatic;
    copies.extend(
        automatic.iter().map(|dump| (dump.path.clone(), directory.join(format!("automatic-{}.heap", dump.id)))),
    );
    // Each is kept or not on its own: one that cannot be written does not take the others with it.
    if let Err(error) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(directory) {
        let directory = directory.display();
        return messages::error(&format!("The whole run's profiles were not kept: {directory} ({error})"));
    }
    let failed: Vec<String> = copies
        .iter()
        .filter_map(|(from, to)| {
            let error = copy_with_labels(from, to).err()?;
            Some(format!("{} ({error})", to.file_name().unwrap_or_default().to_string_lossy()))
        })
        .collect();
    if failed.is_empty() {
        messages::info(&format!(
            "The whole run's profiles are in {}: whole-run.heap (live at the end), whole-run.allocated.heap (everything allocated), whole-run.peak.heap (at its high-water mark), {} automatic dump{}",
            directory.display(),
            automatic.len(),
            if automatic.len() == 1 { "" } else { "s" }
        ))
    } else {
        messages::error(&format!(
            "{} of the whole run's {} profiles were not kept in {}: {}",
            failed.len(),
            copies.len(),
            directory.display(),
            failed.join(", ")
        ))
    }
}

/// Copies the profile at `from` to `to`, owner-only, with its label table and its variance (for the error
/// `memprof analyze` says) when it has them.
fn copy_with_labels(from: &Path, to: &Path) -> std::io::Result<()> {
    write_owner_only(to, &std::fs::read(from)?)?;
    for (from, to) in [(Beside::Labels.of(from), Beside::Labels.of(to)), (variance_of(from), variance_of(to))] {
        match std::fs::read(&from) {
            Ok(bytes) => write_owner_only(&to, &bytes)?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
