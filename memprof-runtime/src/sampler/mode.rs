//! How sampling runs in this process: one [`Mode`], set once at start-up: on demand, or continuous with the
//! record of samples it keeps (the only way to that record while continuous).

use crate::sampler::record::table::Table;

/// How sampling runs and, continuously, the record of samples.
#[derive(Clone, Copy)]
pub(crate) enum Mode {
    /// Off until a run starts it; each run starts afresh (Mesos's way).
    OnDemand,
    /// On from start-up, each sample kept in the record; runs are windows over it.
    Continuous(&'static Table),
}

impl Mode {
    /// The record of sampled objects, when sampling is continuous.
    pub(crate) fn record(self) -> Option<&'static Table> {
        match self {
            Mode::Continuous(record) => Some(record),
            Mode::OnDemand => None,
        }
    }
}
