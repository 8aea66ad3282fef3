//! Why a run could not be started or finished: [`Error`] (memprof-wire's, shared with the facade compiled
//! out), and a jemalloc control's failure as one.

pub use memprof_wire::{Cause, DumpOf, Error};

use crate::jemalloc;

/// A failed jemalloc control, as an [`Error`].
pub(crate) fn control(doing: &'static str, control: &'static str, error: jemalloc::CtlError) -> Error {
    Error::Control { doing, control, error: error.into() }
}
