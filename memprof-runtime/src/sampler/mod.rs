//! Sampling, below the runs ([`crate::profiler`], which open windows over it), reached through one type,
//! [`Sampler`]: how it runs, on demand or continuously (one [`sampling::Sampling`] from the attribute to
//! `state`: [`sampling`] chooses it, the sampler holds the choice);
//! the switch (`prof.active`, and on demand `prof.reset`); the walks each sample takes, prepared before
//! sampling first switches on; the record of sampled objects continuous sampling keeps ([`record`]); and
//! the budget of sampling work, judged ([`budget`]) on the readings its pacer takes ([`throttle`]).

pub(crate) mod budget;
pub(crate) mod record;
pub(crate) mod sampling;
pub(crate) mod throttle;

use std::path::Path;
use std::sync::OnceLock;

use memprof_wire::Error;

use crate::jemalloc;
use crate::jemalloc::malloc_conf::ConfigReport;
use crate::process::messages;
use crate::stack_walk::{Unwinder, WalkAsked};
use record::table::Table;

/// What the sampler is configured with, handed down from the settings at start-up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Configured {
    /// The record's size (`MEMPROF_RECORD_OBJECTS`).
    pub(crate) record: record::table::Capacity,
    /// The budget of continuous sampling (`MEMPROF_SAMPLING_BUDGET`; `None`: never thinned).
    pub(crate) budget: Option<budget::Budget>,
    /// The walk the operator chose (`MEMPROF_UNWINDER`), whatever frame pointers allow.
    pub(crate) walk: Option<WalkAsked>,
}

/// A failed jemalloc control, as an [`Error`].
pub(crate) fn control(doing: &'static str, control: &'static str, error: jemalloc::CtlError) -> Error {
    Error::Control { doing, control, error: error.into() }
}

/// The sampler of this process: the mode chosen at start-up, the switch, the walks and the record.
///
/// The runs above it never touch jemalloc's sampling themselves: they ask the sampler to switch it, to start
/// afresh (on demand), for the record a window is read from, and for how a profile is written.
pub(crate) struct Sampler {
    /// The record's size, the budget and the walk asked for.
    configured: Configured,
    /// The configuration jemalloc really got, checked (whether it profiles at all, and what it changed).
    config: ConfigReport,
    /// How samples walk the stack: chosen, its tables indexed and its hook installed when sampling can
    /// first happen ([`Sampler::unwinder`]), never in a program that never samples.
    unwinder: OnceLock<Unwinder>,
    /// How sampling runs (with, continuously, the record of samples), and why: chosen once, at start-up.
    mode: OnceLock<(sampling::Choice, Option<&'static Table>)>,
    /// Whether runs were told that no record can be kept (said once).
    said_no_record: std::sync::atomic::AtomicBool,
}

impl Sampler {
    /// A sampler `configured` so, in a process whose jemalloc got `config`,
    /// whose samples walk the stack with `unwinder` (installed when first needed, if empty); on demand
    /// until start-up chooses.
    pub(crate) fn new(configured: Configured, config: ConfigReport, unwinder: OnceLock<Unwinder>) -> Self {
        Sampler { configured, config, unwinder, mode: OnceLock::new(), said_no_record: Default::default() }
    }

    /// The configuration jemalloc really got, checked: whether it profiles at all ([`ConfigReport::profiling_enabled`]),
    /// and what it was told that it ignored or changed.
    pub(crate) fn config(&self) -> &ConfigReport {
        &self.config
    }

    /// How samples walk the stack: the first call chooses the walk (the frame-pointer check against
    /// libgcc), indexes the unwind tables if they are needed and installs memprof's hook, unsampled. Called
    /// before sampling is first switched on, and where profiling is asked for at start (to say the walk).
    pub(crate) fn unwinder(&self) -> &Unwinder {
        self.unwinder.get_or_init(|| {
            // memprof's own: unsampled, and its tables in memprof's arena, whoever asks first.
            jemalloc::unsampled(|| {
                jemalloc::in_own_arena(|| {
                    if self.config.profiling_enabled {
                        crate::stack_walk::install(self.configured.walk)
                    } else {
                        Unwinder::Libgcc("heap profiling is disabled".to_owned())
                    }
                })
            })
        })
    }

    /// Makes sampling continuous from now on (`because` says why, for `state`): starts the [`record`], arms
    /// the budget of sampling work ([`budget`]), then switches sampling on for good. Once: the mode chosen
    /// first stays. The caller keeps runs from starting meanwhile.
    pub(crate) fn sample_continuously(&self, because: String) -> Result<(), Error> {
        if self.mode.get().is_some() {
            return Ok(());
        }
        let record = record::start(self.configured.record)
            .map_err(|error| control("Cannot keep the record of samples", "experimental.hooks.prof_sample", error))?;
        throttle::arm(self.configured.budget);
        self.switch_on()?;
        let _ = self.mode.set((sampling::Choice { mode: sampling::Sampling::Continuous, because }, Some(record)));
        Ok(())
    }

    /// Leaves sampling on demand (`because` says why); once: the mode chosen first stays.
    pub(crate) fn sample_on_demand(&self, because: String) {
        let _ = self.mode.set((sampling::Choice { mode: sampling::Sampling::OnDemand, because }, None));
    }

    /// How sampling runs and why, as `state` and the log say it; on demand before start-up chose.
    pub(crate) fn sampling(&self) -> sampling::Choice {
        self.mode.get().map_or_else(|| sampling::default_choice(false), |(choice, _)| choice.clone())
    }

    /// The record of sampled objects, when sampling is continuous.
    pub(crate) fn record(&self) -> Option<&'static Table> {
        self.mode.get().and_then(|(_, record)| *record)
    }

    /// The record the views of runs and windows are written from (net growth, allocations, peak):
    /// continuous sampling's, or the one the first run on demand started ([`Self::views_start`]).
    pub(crate) fn views_record(&self) -> Option<&'static Table> {
        self.record().or_else(record::started)
    }

    /// On demand, starts the record of samples before the first run samples (once), so that runs too keep
    /// what they allocated and their high-water marks; answers the sequence number a run starting now
    /// begins at (`None` where the record cannot be kept: the run has its live view alone, and says why).
    pub(crate) fn views_start(&self) -> Option<u64> {
        if self.views_record().is_none()
            && let Err(error) = jemalloc::unsampled(|| record::start(self.configured.record))
            && !self.said_no_record.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            messages::warn(&format!("Runs keep only what is live at their end: no record of samples ({error})"));
        }
        self.views_record().map(|record| record.next_sequence())
    }

    /// Switches sampling on, the walk prepared first.
    pub(crate) fn switch_on(&self) -> Result<(), Error> {
        self.unwinder();
        crate::process::threads::with_sampling_switched(|| jemalloc::set_profiling_active(true))
            .map(|_| ())
            .map_err(|error| control("Heap profiling couldn't be enabled", "prof.active", error))
    }

    /// Switches sampling off at the end of run `id` (on demand); a failure is logged (the run is over either
    /// way). The growth watched during the run ends with it: the history is read only while sampled.
    pub(crate) fn switch_off(&self, id: u64) {
        if let Err(error) = crate::process::threads::with_sampling_switched(|| jemalloc::set_profiling_active(false)) {
            messages::warn(&format!(
                "Could not switch heap profiling off at the end of run {id} (prof.active: {error})"
            ));
        }
        record::forget_history();
    }

    /// On demand, before a run: refuses when sampling was switched on outside memprof, else drops every
    /// earlier sample (`prof.reset`), so the run's profile holds only its own; then readies what the walks
    /// need, every function of the allocator's judged (jemalloc writes the run's dumps from the stacks as
    /// the walks left them, so the run's request waits for this; continuously it is done off the start).
    pub(crate) fn start_afresh(&self) -> Result<(), Error> {
        if jemalloc::profiling_active()
            .map_err(|error| control("Cannot read whether sampling is on", "prof.active", error))?
        {
            return Err(Error::StartedExternally);
        }
        let lg_sample =
            jemalloc::lg_sample().map_err(|error| control("Cannot read the sampling rate", "prof.lg_sample", error))?;
        jemalloc::reset_samples(lg_sample)
            .map_err(|error| control("Cannot reset the heap profile", "prof.reset", error))?;
        crate::stack_walk::prepare_for_samples();
        crate::allocator_code::AllocatorCode::of_this_program().judge_all();
        Ok(())
    }

    /// Starts sampling for heap measures in a process where memprof was not started (a test binary), once:
    /// the walk, the record, the interval of 2^`lg_sample` bytes, sampling on; `None` where jemalloc cannot
    /// sample or sampling was switched on outside memprof.
    pub(crate) fn sample_for_measures(&self, lg_sample: u32) -> Option<&'static Table> {
        if !self.config.profiling_enabled || jemalloc::profiling_active().unwrap_or(true) {
            return None;
        }
        self.unwinder();
        let record = record::start_at(self.configured.record, lg_sample as usize).ok()?;
        jemalloc::reset_samples(lg_sample as usize).ok()?;
        crate::process::threads::with_sampling_switched(|| jemalloc::set_profiling_active(true)).ok()?;
        Some(record)
    }

    /// Whether sampling was switched on outside memprof: on demand, on with no run of memprof's.
    pub(crate) fn started_externally(&self) -> bool {
        self.record().is_none() && jemalloc::profiling_active().unwrap_or(false)
    }

    /// Has the budget sample whole (an operator's run in progress) or not.
    pub(crate) fn sample_whole(&self, whole: bool) {
        throttle::sample_whole(whole);
    }

    /// How the profile of a window starting at `window_start` (sequence number of the record) is written:
    /// the record's window, or, on demand, jemalloc's dump.
    pub(crate) fn window_writer(&self, window_start: Option<u64>) -> impl Fn(&Path) -> std::io::Result<()> + use<> {
        let record = self.record();
        move |path| match (record, window_start) {
            (Some(record), Some(since)) => record::write_profile(record, path, since, record::heap_v2::Content::Live),
            _ => jemalloc::dump_profile(path),
        }
    }

    /// How the heap as it is now is written: everything the record holds, with what each stack allocated
    /// since start-up (Go's `alloc_*`), in continuous mode; else jemalloc's dump.
    pub(crate) fn heap_writer(&self) -> impl Fn(&Path) -> std::io::Result<()> + use<> {
        let record = self.record();
        move |path| match record {
            Some(record) => record::write_profile(record, path, 0, record::heap_v2::Content::LiveAndAllocated),
            None => jemalloc::dump_profile(path),
        }
    }
}
