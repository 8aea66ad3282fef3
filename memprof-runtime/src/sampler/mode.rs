//! How sampling runs in this process: one [`Mode`], set once at start-up: on demand, or continuous with the
//! record of samples it keeps (the only way to that record while continuous); and the record the views of
//! runs are written from in either mode.

use crate::profiler::{Error, Profiler, control};
use crate::sampler::record::table::Table;
use crate::sampler::{record, sampling, throttle};

/// How sampling runs, why, and, continuously, the record of samples.
#[derive(Clone, Copy)]
pub(crate) enum Mode {
    /// Off until a run starts it; each run starts afresh (Mesos's way).
    OnDemand,
    /// On from start-up, each sample kept in the record; runs are windows over it.
    Continuous(&'static Table),
}

impl Profiler {
    /// Makes sampling continuous from now on (`because` says why, for `state`): starts the [`record`], arms
    /// the budget of sampling work ([`crate::sampler::budget`]), then switches sampling on for good. Runs
    /// are windows from then on. Once: the mode chosen first stays.
    pub(crate) fn sample_continuously(&self, because: String) -> Result<(), Error> {
        self.check_available()?;
        let _books = self.books.lock();
        if self.mode.get().is_some() {
            return Ok(());
        }
        let settings = self.settings();
        let record = record::start(settings.record)
            .map_err(|error| control("Cannot keep the record of samples", "experimental.hooks.prof_sample", error))?;
        throttle::arm(settings.budget);
        self.switch_sampling_on()?;
        let _ = self.mode.set((Mode::Continuous(record), because));
        Ok(())
    }

    /// Leaves sampling on demand (`because` says why); once: the mode chosen first stays.
    pub(crate) fn sample_on_demand(&self, because: String) {
        let _ = self.mode.set((Mode::OnDemand, because));
    }

    /// How sampling runs; on demand before start-up chose.
    pub(crate) fn mode(&self) -> Mode {
        self.mode.get().map_or(Mode::OnDemand, |(mode, _)| *mode)
    }

    /// How sampling runs and why, as `state` and the log say it; on demand before start-up chose.
    pub(crate) fn sampling(&self) -> sampling::Choice {
        match self.mode.get() {
            Some((Mode::OnDemand, because)) => {
                sampling::Choice { mode: sampling::Sampling::OnDemand, because: because.clone() }
            }
            Some((Mode::Continuous(_), because)) => {
                sampling::Choice { mode: sampling::Sampling::Continuous, because: because.clone() }
            }
            None => sampling::default_choice(false),
        }
    }

    /// The record of sampled objects, when sampling is continuous.
    pub(crate) fn record(&self) -> Option<&'static Table> {
        match self.mode() {
            Mode::Continuous(record) => Some(record),
            Mode::OnDemand => None,
        }
    }

    /// The record the views of runs and windows are written from (net growth, allocations, peak):
    /// continuous sampling's, or the one the first run on demand started ([`Self::views_start`]).
    pub(crate) fn views_record(&self) -> Option<&'static Table> {
        self.record().or_else(record::started)
    }
}
