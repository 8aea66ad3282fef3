//! The heap as it is now, symbolized: a dump taken for the asking, for Go's scrapers (`/debug/pprof/*`) and
//! `explain`'s leak verdict.

use std::io::Read;

use memprof_analysis::{Analysis, Binaries};

use super::context::Context;
use crate::http::HttpError;

/// The heap now, symbolized: expensive work, for the holder of a permit ([`super::jobs::Permit`]).
pub(super) fn symbolized(context: &Context) -> Result<Analysis, HttpError> {
    let (mut file, name) = context.profiler.snapshot(None)?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|error| HttpError::internal(format!("Cannot read the dump {name} ({error})")))?;
    Analysis::of_dump(&text, &Binaries::this_process(), &crate::labels::table_now())
        .map_err(|error| HttpError::internal(format!("jemalloc's dump is malformed: {error}")))
}
