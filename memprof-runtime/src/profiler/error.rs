//! Why a run could not be started or finished: [`Error`] (memprof-wire's, shared with the facade compiled
//! out; a jemalloc control's failure is made one by [`crate::sampler::control`]).

pub use memprof_wire::{Cause, DumpOf, Error};
