//! What the program and the operator configure, resolved once: [`Settings`], from the program's
//! [`Options`] (the attribute's arguments) and the environment ([`crate::process::environment`], its one
//! reading), every value checked here by its [`grammar`] and every malformed one said alike
//! ([`Problem`]: `NAME="value" is not ...; ...`). The modules are handed typed values: none reads the
//! environment, and none words a malformed value its own way.
//!
//! Resolved at [`crate::start`] with the program's options ([`at_start`]), or, where memprof is needed
//! first (a `scope!`, a mounted router, a program that never starts it), with the default options
//! ([`get`]); either way once, and its problems said then.
//!
//! ```ignore
//! let recorded = [("MEMPROF_DUMP_KEEP", "0"), ("LIBPROCESS_MEMORY_PROFILING", "true")];
//! let settings = Settings::resolve(&Options::new(), &reading(&recorded), "server");
//! assert!(settings.switched_on);
//! assert_eq!(settings.problems[0].to_string(),
//!     "MEMPROF_DUMP_KEEP=\"0\" is not a count from 1 to 65535; 8 are kept");
//! ```

pub(crate) mod grammar;
pub(crate) mod options;
pub(crate) mod otlp;
mod quiet;
mod sources;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

pub(crate) use grammar::Problem;

use crate::sampler::budget::Budget;
use crate::sampler::record::table::Capacity;
use crate::sampler::sampling::Sampling;
use crate::stack_walk::WalkAsked;
use options::Options;
use otlp::PushSettings;

/// Everything memprof is configured with, each value typed and checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// Whether the endpoints are switched on: the program's switch variable (`env`) is `true`.
    pub(crate) switched_on: bool,
    /// The token every request must send: the program's token variable (`token_env`), when set.
    pub(crate) token: Option<String>,
    /// The name of that variable, for messages.
    pub(crate) token_variable: String,
    /// The built-in server's address: `MEMPROF_HTTP` (or its older name, `MEMPROF_ADDR`), else the program's (`http`).
    pub(crate) address: String,
    /// Whether the switch starts the built-in server (`Options::built_in_server`).
    pub(crate) built_in_server: bool,
    /// Finished profiles kept, of code's runs and of the operators' each (`keep_runs`).
    pub(crate) keep_runs: usize,
    /// Whether SIGTERM and SIGINT end memprof first (`dump_on_sigterm`, `dump_on_sigint`).
    pub(crate) end_on: EndOn,
    /// How sampling is asked to run: `MEMPROF_SAMPLING`, the program's choice (the mode is chosen from
    /// them and what jemalloc started with: [`crate::sampler::sampling::choose`]).
    pub(crate) sampling: SamplingAsked,
    /// `MEMPROF_WHOLE_RUN`: where a batch program's whole run is kept at exit.
    pub(crate) whole_run: Option<PathBuf>,
    /// `MEMPROF_SCOPES`: whether `scope!` blocks profile, when said (else as the switch).
    pub(crate) scopes: Option<bool>,
    /// `MEMPROF_SAMPLING_BUDGET`: the budget of continuous sampling (`None`: never thinned).
    pub(crate) budget: Option<Budget>,
    /// `MEMPROF_RECORD_OBJECTS`: the record's size.
    pub(crate) record: Capacity,
    /// `MEMPROF_MEASURE_SAMPLE`: log2 of the mean bytes between samples of measured blocks where memprof
    /// was not started (`None`: measures are not sampled).
    pub(crate) measure_lg_sample: Option<u32>,
    /// `MEMPROF_UNWINDER`: the walk the operator chose, whatever frame pointers allow.
    pub(crate) unwinder: Option<WalkAsked>,
    /// `MEMPROF_DUMP_EVERY`, `_HIGH_WATER`, `_AT_RESIDENT`: the automatic dumps asked for.
    pub(crate) automatic_dumps: Option<DumpTriggers>,
    /// `MEMPROF_DUMP_KEEP`, `MEMPROF_DUMP_MAX_BYTES`: how many dumps (and earlier processes' profiles) stay.
    pub(crate) retention: Retention,
    /// Where profile directories are made.
    pub(crate) profile_parent: ProfileParent,
    /// `MEMPROF_FINAL_DUMP`: where a run still active at the end leaves its profile.
    pub(crate) final_dump: Option<PathBuf>,
    /// The OTLP push (`OTEL_EXPORTER_OTLP_*`, `MEMPROF_OTLP_*`), when an endpoint is set and every value
    /// is well formed.
    pub(crate) push: Option<PushSettings>,
    /// The service's resource attributes (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), `service.name`
    /// first.
    pub(crate) service: Vec<(String, String)>,
    /// jemalloc's own variables as set (`MALLOC_CONF`, `_RJEM_MALLOC_CONF`), to say which it ignored.
    pub(crate) jemalloc_variables: crate::jemalloc::malloc_conf::JemallocVariables,
    /// `MEMPROF_LOG`: the most detailed of memprof's messages said, when set.
    pub(crate) log: Option<log::LevelFilter>,
    /// What was wrong, in the order read.
    pub(crate) problems: Vec<Problem>,
}

impl Settings {
    /// Whether anything asks memprof to profile: the switch, a whole run, an OTLP endpoint, automatic
    /// dumps, continuous sampling or `scope!` blocks asked for by a variable.
    pub(crate) fn profiling_asked(&self) -> bool {
        self.switched_on
            || self.whole_run.is_some()
            || self.push.is_some()
            || self.automatic_dumps.is_some()
            || self.sampling.variable == Some(crate::sampler::sampling::Sampling::Continuous)
            || self.scopes == Some(true)
    }

    /// Whether start-up has nothing to do: no profiling asked for ([`Self::profiling_asked`]), no signal to
    /// end memprof on, no profile root named to make. What is needed later is made then.
    pub(crate) fn nothing_to_start(&self) -> bool {
        !self.profiling_asked() && !self.end_on.sigterm && !self.end_on.sigint && !self.profile_parent.named
    }

    /// The most detailed of memprof's messages said: `MEMPROF_LOG`'s, else all of them where profiling is
    /// asked for or a setting is wrong (the switch set to `yes`, a misspelt variable: someone meant
    /// something), none where nothing is (a command-line tool run with the switch off prints nothing; what
    /// memprof would have said is kept for `state`).
    pub(crate) fn said_up_to(&self) -> log::LevelFilter {
        let speaks = self.profiling_asked() || !self.problems.is_empty();
        self.log.unwrap_or(if speaks { log::LevelFilter::Info } else { log::LevelFilter::Off })
    }
}

/// The signals that end memprof before the program (a final profile, the directory removed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EndOn {
    /// SIGTERM.
    pub(crate) sigterm: bool,
    /// SIGINT.
    pub(crate) sigint: bool,
}

/// How sampling is asked to run, by whom.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SamplingAsked {
    /// `MEMPROF_SAMPLING`, which overrides every other source.
    pub(crate) variable: Option<Sampling>,
    /// The program's (`sampling = ...`, `Options::sampling`).
    pub(crate) program: Option<Sampling>,
}

/// What makes an automatic dump (at least one is set).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DumpTriggers {
    /// Bytes allocated between two dumps.
    pub(crate) every: Option<u64>,
    /// Growth over the last high-water dump that makes a new one (0.1 = 10%).
    pub(crate) high_water_step: Option<f64>,
    /// Share of the memory limit whose crossing by the resident set makes a dump.
    pub(crate) resident_share: Option<f64>,
}

impl DumpTriggers {
    /// What continuous sampling arms when the environment asks for nothing: a dump at each high water 50 %
    /// above the last, and when the resident set crosses 90 % of the memory limit (the heap before an OOM
    /// kill).
    pub(crate) const CONTINUOUS_DEFAULT: DumpTriggers =
        DumpTriggers { every: None, high_water_step: Some(0.5), resident_share: Some(0.9) };
}

/// How many automatic dumps, and how many bytes of them, are kept; the same bounds hold what earlier
/// processes left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention {
    /// Dumps kept at most.
    pub(crate) keep: usize,
    /// Bytes of dumps kept at most.
    pub(crate) max_bytes: u64,
}

impl Retention {
    /// 8 dumps, 256 MiB.
    pub(crate) const DEFAULT: Retention = Retention { keep: 8, max_bytes: 256 << 20 };
}

/// Where profile directories are made: `MEMPROF_DIR`, else `TMPDIR`, else `/tmp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProfileParent {
    /// The directory.
    pub(crate) path: PathBuf,
    /// Whether `MEMPROF_DIR` named it (then it is made, owner-only, when missing).
    pub(crate) named: bool,
}

/// A reading of the environment: a variable's value, when set and not empty.
pub(crate) type Reading<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The settings, once resolved.
static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The program's options, kept unresolved where start-up found nothing asked of memprof ([`at_start`]);
/// taken when the settings are resolved. A lock rather than a `OnceLock`: kept and taken in the caller's
/// own code (an uncontended lock is an atomic operation inline), not in a once-cell's out-of-line
/// initialization, which a command-line tool's start would fault in for this alone.
static PROGRAM_OPTIONS: Mutex<Option<Options>> = Mutex::new(None);

/// The settings: those [`at_start`] resolved, else resolved now with the program's options where start-up
/// kept them, else with the default ones (memprof needed before or without [`crate::start`]); their
/// problems said once, when resolved.
pub(crate) fn get() -> &'static Settings {
    SETTINGS.get_or_init(|| {
        let kept = PROGRAM_OPTIONS.lock().unwrap_or_else(PoisonError::into_inner).take();
        resolved(&kept.unwrap_or_default())
    })
}

/// What start-up makes of the program's options.
pub(crate) enum AtStart {
    /// The settings, resolved now with them.
    Resolved(&'static Settings),
    /// The settings in force: memprof was needed before start-up, and resolved them with the default options.
    Earlier(&'static Settings),
    /// Neither the options nor the environment ask anything of memprof ([`quiet`]): nothing resolved, read or
    /// said; the options are kept for when memprof is first needed ([`get`]).
    NothingAsked,
}

/// Resolves the settings with the program's `options`, at start-up, unless nothing asks anything of
/// memprof (judged without allocating, the environment scanned in place).
#[inline]
pub(crate) fn at_start(options: Options) -> AtStart {
    let asked = || {
        quiet::options_ask(&options)
            || crate::process::environment::any_set(|name, value| quiet::asks(&options, name, value))
    };
    if SETTINGS.get().is_none() && !asked() {
        *PROGRAM_OPTIONS.lock().unwrap_or_else(PoisonError::into_inner) = Some(options);
        return AtStart::NothingAsked;
    }
    let mut fresh = false;
    let settings = SETTINGS.get_or_init(|| {
        fresh = true;
        resolved(&options)
    });
    if fresh { AtStart::Resolved(settings) } else { AtStart::Earlier(settings) }
}

/// The settings `options` and this process's environment give, their problems said.
fn resolved(options: &Options) -> Settings {
    crate::jemalloc::unsampled(|| {
        let executable = crate::process::resource::executable_name();
        let mut settings = Settings::resolve(options, &crate::process::environment::read, &executable);
        let misspelt =
            crate::process::environment::misspelt().into_iter().map(|(name, meant)| Problem::Misspelt { name, meant });
        settings.problems.splice(0..0, misspelt);
        crate::process::messages::say_up_to(settings.said_up_to(), settings.log.is_some());
        for problem in &settings.problems {
            if problem.is_error() {
                crate::process::messages::error(&problem.to_string());
            } else {
                crate::process::messages::warn(&problem.to_string());
            }
        }
        settings
    })
}
