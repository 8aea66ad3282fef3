//! `state`: Mesos's object (`memory_profiler`, `jemalloc`), with what memprof adds to it.

use serde::{Deserialize, Serialize};

use crate::earlier::EarlierProcess;
use crate::labels::LabelCounts;
use crate::memory::HeapCounters;
use crate::runs::{KeptProfile, RunOwner};

/// `state`: Mesos's object, plus what memprof adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The profiler.
    pub memory_profiler: ProfilerState,
    /// jemalloc's configuration and switches.
    pub jemalloc: JemallocState,
}

/// `state.memory_profiler`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfilerState {
    /// Always true: memprof is jemalloc's.
    pub jemalloc_detected: bool,
    /// Where profiles are written (Mesos's field).
    pub tmp_dir: String,
    /// The run in progress.
    pub current_run: CurrentRun,
    /// Windows over continuous sampling opened by the program's code (`scope!`, `Run`), beside the run in
    /// progress, oldest first.
    #[serde(default)]
    pub open_windows: Vec<RunOwner>,
    /// The newest kept profile of a run.
    pub latest_run: Option<KeptProfile>,
    /// The kept profiles of runs, newest first.
    pub runs: Vec<KeptProfile>,
    /// How many are kept.
    pub keep_runs: usize,
    /// Whether requests need the token.
    pub auth_required: bool,
    /// Automatic dumps: their settings in force, and the kept dumps, newest first.
    pub automatic_dumps: AutomaticDumps,
    /// The last run that failed to write its profile.
    pub last_failure: Option<Failure>,
    /// Whether sampling was switched on outside memprof's runs.
    pub started_externally: bool,
    /// log2 of the mean bytes between samples.
    pub lg_prof_sample: Option<usize>,
    /// How samples walk the stack.
    pub stack_walk: StackWalk,
    /// How sampling runs: continuously or on demand, why, and the record continuous sampling keeps.
    #[serde(default)]
    pub sampling: Sampling,
    /// Mean bytes between samples.
    pub sample_period_bytes: Option<u64>,
    /// The OTLP push, when an OTLP endpoint is set: what it sent, dropped and refused, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_push: Option<OtlpPush>,
    /// Problems an operator should know about.
    pub warnings: Vec<String>,
    /// The latest messages memprof said since start-up (`INFO ...`, `WARN ...`, `ERROR ...`), oldest first,
    /// and those it kept to itself: with the switch off and nothing else asking for profiling it says
    /// nothing, unless `MEMPROF_LOG` asks.
    #[serde(default)]
    pub messages: Vec<String>,
    /// Profiles kept from earlier processes that ended without cleaning up (killed, crashed), newest
    /// process first: the heap before an OOM kill, say.
    #[serde(default)]
    pub earlier_processes: Vec<EarlierProcess>,
    /// The allocation labels recorded so far.
    #[serde(default)]
    pub labels: LabelCounts,
    /// jemalloc's counters now.
    pub heap: Option<HeapCounters>,
}

/// The run in progress, or `{"id": null}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CurrentRun {
    /// A run is active.
    Active {
        /// Its id.
        id: u64,
        /// Seconds until its timer ends it; `null` for runs that end when their code says so.
        remaining_seconds: Option<f64>,
        /// Who started it.
        started_by: String,
        /// The samples taken since it began, whoever allocated them (`null` where no record of samples
        /// counts them): none after a while says the program allocated less than the sampling interval.
        #[serde(default)]
        samples: Option<u64>,
    },
    /// No run: `{"id": null}`.
    Idle {
        /// Always `null`.
        id: (),
    },
}

impl CurrentRun {
    /// The active run's id, `None` when no run is active.
    ///
    /// ```
    /// assert_eq!(memprof_wire::CurrentRun::Idle { id: () }.id(), None);
    /// ```
    pub fn id(&self) -> Option<u64> {
        match self {
            CurrentRun::Active { id, .. } => Some(*id),
            CurrentRun::Idle { .. } => None,
        }
    }
}

/// `state.memory_profiler.automatic_dumps`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutomaticDumps {
    /// The settings in force (`MEMPROF_DUMP_*`), or `null` when off.
    pub settings: Option<AutomaticDumpSettings>,
    /// The kept dumps, newest first.
    pub dumps: Vec<KeptProfile>,
}

/// When automatic dumps are taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutomaticDumpSettings {
    /// A dump each time this many bytes were allocated.
    pub every_bytes: Option<u64>,
    /// A dump at each new high-water mark this share above the last one.
    pub high_water_step: Option<f64>,
    /// A dump when the resident set crosses this share of the memory limit.
    pub resident_share: Option<f64>,
    /// How many dumps are kept.
    pub keep: usize,
    /// How many bytes of dumps are kept.
    pub max_bytes: u64,
}

/// A run whose profile could not be written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Its id.
    pub id: u64,
    /// Why.
    pub error: String,
}

/// `state.memory_profiler.sampling`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sampling {
    /// `continuous` (on from start-up; runs are windows over it) or `on-demand` (off until a run).
    pub mode: String,
    /// What chose it: the program's option, `MEMPROF_SAMPLING`, `MALLOC_CONF`'s `prof_active:true`, the
    /// default.
    pub because: String,
    /// The record of sampled objects, in continuous mode.
    pub record: Option<SampleRecord>,
    /// How many times sampling was paused for one of memprof's threads to be born (a thread allocates
    /// before it can switch its own sampling off; threads are born when first needed, at most the pools'
    /// sizes in a process's life): no allocation was sampled meanwhile.
    #[serde(default)]
    pub paused_for_threads: u64,
    /// Those pauses' time in all, in microseconds.
    #[serde(default)]
    pub paused_for_threads_us: u64,
    /// Continuous sampling's budget of work, and how much sampling is thinned to keep within it; `None` on
    /// demand, or with the budget off (`MEMPROF_SAMPLING_BUDGET=off`).
    #[serde(default)]
    pub budget: Option<SamplingBudget>,
}

/// `state.memory_profiler.otlp_push`: heap profiles pushed to an OTLP endpoint every interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OtlpPush {
    /// Where they are pushed (without any `user:password@`).
    pub endpoint: String,
    /// How often, in seconds.
    pub interval_seconds: u64,
    /// Exports the endpoint accepted.
    pub sent: u64,
    /// Their bytes, as sent (compressed when configured).
    pub sent_bytes: u64,
    /// Failed sends tried again later (the endpoint down, slow, or answering 429, 502, 503, 504).
    pub retried: u64,
    /// Exports the endpoint refused for good (a 400: the payload itself was wrong), never sent again.
    pub refused: u64,
    /// Exports dropped unsent: the queue full, tried for five minutes, past the size limit, or not made.
    pub dropped: u64,
    /// Profiles the endpoint took the export of but rejected (OTLP's partial success).
    pub rejected_profiles: u64,
    /// Exports waiting to be sent.
    pub queued: usize,
    /// How long until the next send may go, in milliseconds: the backoff after failures (doubling from a
    /// second to a minute, jittered, or the collector's longer `Retry-After`), 0 when none is in force.
    #[serde(default)]
    pub backoff_ms: u64,
    /// Why the last failure failed.
    pub last_error: Option<String>,
    /// When an export was last accepted, seconds since the Unix epoch.
    pub last_sent: Option<f64>,
}

/// `state.memory_profiler.sampling.budget`: past a share of one core, jemalloc's mean interval between
/// samples is made `thinned_by` times longer, and each sample drawn at it stands for that many times more
/// (estimates stay unbiased, with more noise: the errors answers give widen with it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplingBudget {
    /// The share of one core sampling may take, in millionths (5000: 0.5 %).
    pub share_ppm: u32,
    /// How much sampling is thinned now (1: not thinned): each sample stands for this many times more.
    pub thinned_by: u32,
    /// The mean interval between samples now, in bytes: 2^lg_sample times `thinned_by`.
    pub interval_bytes: u64,
    /// The most sampling was thinned since start-up.
    pub most_thinned_by: u32,
    /// How long sampling was thinned in all since start-up, in milliseconds.
    pub thinned_ms: u64,
    /// What one sample's work took over the last reading the budget judged, on average, in nanoseconds
    /// (the stack walk, jemalloc's bookkeeping, the record; longer where the program's own work keeps
    /// evicting it from the caches), on the wall clock, bounded by what the samples timed on their threads'
    /// CPU clocks say: the budget fits this many fewer samples. `None` before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_work_ns: Option<u64>,
}

/// `state.memory_profiler.sampling.record`: the bounded record continuous sampling keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRecord {
    /// The bytes it holds, used or not (fixed when it is made).
    pub capacity_bytes: u64,
    /// Sampled objects live now, and the most it holds.
    pub live_objects: u64,
    /// The most live sampled objects it holds.
    pub max_objects: u64,
    /// Distinct stacks sampled since start-up, and the most it holds.
    pub stacks: u64,
    /// The most stacks it holds.
    pub max_stacks: u64,
    /// Samples of objects it had no room for (their stacks' `alloc_*` still count them).
    pub dropped_objects: u64,
    /// Samples whose stack it had no room for (in no count).
    pub dropped_stacks: u64,
    /// Stacks given back, nearly full, for new ones: they held nothing and had no sample for a while (what
    /// they had allocated leaves `/debug/pprof/allocs` with them).
    #[serde(default)]
    pub stacks_given_back: u64,
}

/// `state.memory_profiler.stack_walk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackWalk {
    /// `frame pointers` or `libgcc`.
    pub method: String,
    /// Why libgcc, when it is.
    pub why: Option<String>,
    /// Samples whose frame chain broke in code built without frame pointers (glibc's, a C library's) and
    /// whose stack the DWARF unwinder completed, since start-up.
    #[serde(default)]
    pub completed_by_unwinder: u64,
}

/// `state.jemalloc`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JemallocState {
    /// Where jemalloc's configuration came from.
    pub malloc_conf: MallocConfSources,
    /// `opt.prof`.
    pub profiling_enabled: bool,
    /// `prof.active`.
    pub profiling_active: bool,
}

/// The configuration strings jemalloc read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MallocConfSources {
    /// The environment's (Mesos's field).
    pub environment: Option<String>,
    /// The one built into jemalloc (Mesos's field).
    pub build_options: Option<String>,
    /// The exported `malloc_conf` symbol's.
    pub exported: Option<String>,
}
