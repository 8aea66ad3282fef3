//! Setting memprof up in a program: [`start`] checks jemalloc's configuration, serves the endpoints when
//! asked to, and returns a [`Guard`] that cleans up when `main` returns; [`shutdown`] does the same from a
//! program's own signal handler. `#[memprof::main]` calls [`start`] first thing in `main`; a program that
//! sets up its logger first calls it itself, after the logger.

use std::sync::atomic::{AtomicBool, Ordering};

pub use crate::settings::options::{DEFAULT_ADDRESS, MAX_KEEP_RUNS, Options};

use crate::http;
use crate::process::messages;
use crate::process::watch::Watched;
use crate::profiler::Profiler;
use crate::sampler::sampling::{Asked, Choice, Sampling};
use crate::settings::{AtStart, DumpTriggers, Retention, Settings};

/// Whether [`start`] ran already.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Whether the program started memprof ([`start`]): then sampling is its settings', never a measure's.
pub(crate) fn was_started() -> bool {
    STARTED.load(Ordering::SeqCst)
}

/// Sets memprof up: reports jemalloc's configuration (through the program's logger, if it installed one
/// before), removes profile directories that memprof processes which no longer exist left behind, starts
/// automatic dumps if asked to, and serves the endpoints when the `env` variable is `true`. Never panics
/// and never stops the program: problems are reported and profiling does without. Keep the returned
/// guard alive until `main` returns. A second call reports itself and does nothing.
///
/// ```no_run
/// // env_logger::init();  // first, so memprof's messages go to it
/// let _memprof = memprof_runtime::start(memprof_runtime::Options::new().http("127.0.0.1:6060"));
/// // the program
/// ```
pub fn start(options: Options) -> Guard {
    // memprof's own start-up work never shows in a profile, even with sampling on from the start. Where
    // jemalloc's own sources leave sampling off, nothing can be sampled until memprof switches it on, and a
    // program that asks nothing of memprof (a command-line tool run with the switch off) starts nothing and
    // asks jemalloc nothing: its first `mallctl` alone costs some 42 page faults. Nor does it resolve its
    // settings: the options and the environment are judged in place, nothing copied or allocated (each size
    // class's first allocation touches a fresh page), so that judgment needs no unsampled work around it
    // (the settings' resolution is unsampled itself). What it would need later (a mounted router's first
    // request, a `scope!`) is made then.
    if STARTED.swap(true, Ordering::SeqCst) {
        crate::jemalloc::unsampled(|| messages::warn("memprof::start was called again; only the first call counts"));
        return Guard { owns_shutdown: false };
    }
    let settings = match crate::settings::at_start(options) {
        AtStart::Resolved(settings) => settings,
        AtStart::Earlier(settings) => {
            crate::jemalloc::unsampled(|| {
                messages::warn(
                    "memprof was used before memprof::start (a scope! or a Run first): it runs with the default options, not the program's; call memprof::start first",
                )
            });
            settings
        }
        // Nothing asked, but jemalloc's own sources sample from the start: memprof says so and keeps its
        // work out of the profiles.
        AtStart::NothingAsked if crate::jemalloc::sampling_may_be_on() => crate::settings::get(),
        AtStart::NothingAsked => return Guard { owns_shutdown: true },
    };
    if settings.nothing_to_start() && !crate::jemalloc::sampling_may_be_on() {
        return Guard { owns_shutdown: true };
    }
    crate::jemalloc::unsampled(|| start_with(settings))
}

/// Starts what `settings` ask for: the sampling mode, memprof's threads, the endpoints, the push.
fn start_with(settings: &'static Settings) -> Guard {
    let wanted = settings.switched_on;
    let active_at_start = crate::jemalloc::profiling_active_at_start();
    let choice = crate::sampler::sampling::choose(Asked {
        option: settings.sampling.program,
        variable: settings.sampling.variable,
        whole_run: settings.whole_run.is_some(),
        active_at_start,
        switched_on: wanted,
        pushing: settings.push.is_some(),
    });
    let continuous = choice.mode == Sampling::Continuous && crate::jemalloc::profiling_enabled();
    // Sampled continuously, the heap before an OOM kill is kept without being asked for.
    let automatic_dumps = settings
        .automatic_dumps
        .map(|triggers| (triggers, false))
        .or_else(|| continuous.then_some((DumpTriggers::CONTINUOUS_DEFAULT, true)));
    // Before memprof's own threads allocate: from now on every range jemalloc maps is recorded, and, where
    // the memory is read (`explain`, the history, the automatic dumps), every arena made later is hooked as
    // it is made, by memprof's watch, which also ends memprof on the signals the program asked it to.
    let signals: Vec<std::ffi::c_int> = [
        (settings.end_on.sigterm, signal_hook::consts::SIGTERM),
        (settings.end_on.sigint, signal_hook::consts::SIGINT),
    ]
    .into_iter()
    .filter_map(|(asked, signal)| asked.then_some(signal))
    .collect();
    // With nothing asking for profiling (a command-line tool run with the switch off), nothing will read the
    // memory: no ranges are recorded and memprof's arena is not made at start (some 80 page faults and
    // 1 MiB of resident memory saved); a run started in code later makes the arena when it needs it.
    let watching_memory = settings.profiling_asked() || active_at_start;
    let arenas = watching_memory && crate::jemalloc::install_range_hooks() && (wanted || automatic_dumps.is_some());
    let unwatched = crate::process::watch::start(Watched { arenas, signals, end_memprof: shutdown });
    if let Some(error) = unwatched.arenas {
        messages::warn(&format!("explain will not tell jemalloc's memory apart: cannot start a thread ({error})"));
    }
    if let Some(error) = unwatched.signals {
        messages::warn(&format!("SIGTERM and SIGINT will not leave a final profile: {error}"));
    }
    // What memprof makes from here on and keeps (its profiler, the continuous record, the allocator's code,
    // the endpoints' context) is memprof's: made in its arena, never the program's live bytes (where nothing
    // is profiled, its few kilobytes stay where the program's thread allocates: no arena is made for them).
    let set_up = move || {
        let profiler = Profiler::global();
        profiler.keep_runs(settings.keep_runs);
        let parent = &settings.profile_parent;
        match parent.named.then(|| crate::profile_root::storage::make_parent_directory(&parent.path)).flatten() {
            Some(Ok(made)) => messages::info(&format!("Made the profile root {} (owner-only)", made.display())),
            Some(Err(why)) => messages::warn(&format!(
                "{why}: profiles will be kept in memory, and runs will keep no views (net, allocated, peak)"
            )),
            None => {}
        }
        // The sweep of the profile root (a directory listing of $TMPDIR, at worst) is left off the start: to
        // the counters' thread where it runs (the endpoints on, automatic dumps armed), to the first request
        // or run otherwise; a command-line tool that serves nothing and runs nothing never pays it.
        profiler.leave_off_the_start(Box::new(move || {
            keep_what_earlier_processes_left(profiler, &parent.path, settings.retention)
        }));
        // Where profiling cannot work at all, every reason is an error: an operator must see why there is none.
        let config = profiler.sampler().config();
        let impossible = !config.profiling_enabled || !crate::jemalloc::serves_allocations();
        for warning in &config.warnings {
            if impossible { messages::error(warning) } else { messages::warn(warning) }
        }
        for note in config.notes() {
            messages::info(&note);
        }
        // The walk is chosen and installed where sampling may happen from the start (profiling asked for,
        // or jemalloc sampling already), else when sampling is first switched on: a command-line tool run
        // with the switch off never pays the frame-pointer check or the tables' index.
        if (settings.profiling_asked() || active_at_start)
            && config.profiling_enabled
            && let Some(reason) = profiler.sampler().unwinder().why()
        {
            messages::info(&format!("Samples walk the stack with {}: {reason}", profiler.sampler().unwinder().name()));
        }
        // memprof's one thread reading the memory counters, started here once for all that read them: the
        // automatic dumps, the dashboard's chart (the endpoints on), and the record's history (sampled
        // continuously: born before sampling is on).
        let sampled_continuously = choice.mode == Sampling::Continuous && config.profiling_enabled;
        let dumps_armed = automatic_dumps.is_some() && config.profiling_enabled;
        let unread = (dumps_armed || wanted || sampled_continuously)
            .then(crate::profiler::counters::start)
            .and_then(Result::err)
            .map(|error| format!("cannot start the thread that reads the memory counters ({error})"));
        if let Some(why) = &unread {
            if wanted {
                messages::warn(&format!("The dashboard's memory chart stays empty: {why}"));
            }
            if sampled_continuously {
                messages::warn(&format!("Leaks will not be named from the record: {why}"));
            }
        }
        match automatic_dumps {
            Some((triggers, by_default)) if config.profiling_enabled => match &unread {
                None => {
                    crate::profiler::autodump::arm(triggers, settings.retention);
                    messages::info(if by_default {
                        "Automatic heap dumps are on, as continuous sampling has them: at each high water 50 % above the last, and at 90 % of the memory limit (MEMPROF_DUMP_* to choose)"
                    } else {
                        "Automatic heap dumps are on (MEMPROF_DUMP_*)"
                    })
                }
                Some(why) => messages::error(&format!("Automatic heap dumps are off: {why}")),
            },
            Some(_) => messages::error("Automatic heap dumps are off: heap profiling is disabled"),
            None => {}
        }
        let context = crate::endpoints::set_up(settings.token.clone(), wanted);
        // Answering once the rest of start-up is done (the opening dropped as this returns).
        let _opening = (wanted && settings.built_in_server).then(|| start_server(settings, context)).flatten();
        if config.profiling_enabled {
            choose_sampling(profiler, choice, active_at_start);
        }
        if let Some(push) = &settings.push {
            start_push(profiler, push.clone());
        }
        if let Some(directory) = &settings.whole_run {
            crate::profiler::whole_run::open(profiler, directory.clone());
        }
        Guard { owns_shutdown: true }
    };
    if watching_memory { crate::jemalloc::in_own_arena(set_up) } else { set_up() }
}

/// Says how sampling runs (see [`crate::sampler::sampling`]) and makes it continuous if so chosen: last,
/// once memprof's threads are born.
fn choose_sampling(profiler: &'static Profiler, choice: Choice, active_at_start: bool) {
    match choice.mode {
        Sampling::Continuous => match profiler.sample_continuously(choice.because.clone()) {
            Ok(()) => messages::info(&format!(
                "Sampling is continuous ({}): every 2^{} bytes from now on; runs are windows over it",
                choice.because,
                crate::jemalloc::lg_sample().unwrap_or_default()
            )),
            Err(error) => {
                messages::error(&format!("Sampling is not continuous ({}): {error}", choice.because));
                profiler.sampler().sample_on_demand(format!("continuous sampling failed: {error}"));
            }
        },
        Sampling::OnDemand => {
            if active_at_start {
                messages::warn(&format!(
                    "Heap profiling was switched on at start-up by the jemalloc configuration, but sampling is on demand ({}): memprof will not start or stop runs over it.",
                    choice.because
                ));
            }
            profiler.sampler().sample_on_demand(choice.because);
        }
    }
}

/// Pushes heap profiles over OTLP as `settings` say, from the record of continuous sampling (without it,
/// there is nothing to push, and the log says why).
fn start_push(profiler: &'static Profiler, settings: crate::settings::otlp::PushSettings) {
    let Some(record) = profiler.sampler().record() else {
        messages::error(&format!(
            "Heap profiles are not pushed over OTLP to {}: sampling is not continuous ({})",
            crate::otlp_push::without_credentials(&settings.endpoint),
            profiler.sampler().sampling().because
        ));
        return;
    };
    let (endpoint, interval) = (crate::otlp_push::without_credentials(&settings.endpoint), settings.interval);
    match crate::otlp_push::start(settings, record) {
        Ok(()) => messages::info(&format!("Heap profiles are pushed over OTLP every {interval:?}")),
        Err(error) => messages::error(&format!("Heap profiles are not pushed over OTLP to {endpoint}: {error}")),
    }
}

/// Keeps what memprof processes that ended without cleaning up left in `parent` (their automatic dumps and
/// latest run: the heap before an OOM kill), within the automatic dumps' bounds, and says so.
fn keep_what_earlier_processes_left(profiler: &'static Profiler, parent: &std::path::Path, retention: Retention) {
    let Retention { keep, max_bytes } = retention;
    // The profile root is not memprof's alone: whatever is planted there, the program starts. Every number
    // read there is range-checked (`untrusted`); should a check still be missing, the sweep is skipped.
    let sweep = std::panic::catch_unwind(|| crate::profile_root::evidence::sweep(parent, keep, max_bytes));
    let Ok(sweep) = sweep else {
        messages::error(&format!(
            "Earlier processes' profiles in {} were not read: a file there could not be understood",
            parent.display()
        ));
        return;
    };
    if sweep.removed_directories > 0 {
        messages::info(&format!(
            "Removed {} profile director{} left in {} by memprof processes that no longer run, with nothing worth keeping",
            sweep.removed_directories,
            if sweep.removed_directories == 1 { "y" } else { "ies" },
            parent.display()
        ));
    }
    if let Some((first, why)) = sweep.left_alone.first() {
        messages::warn(&format!(
            "Left {} profile director{} in {} alone: {} cannot be judged ({})",
            sweep.left_alone.len(),
            if sweep.left_alone.len() == 1 { "y" } else { "ies" },
            parent.display(),
            crate::profile_root::untrusted::printable(&first.display().to_string()),
            crate::profile_root::untrusted::printable(why)
        ));
    }
    if sweep.removed_profiles > 0 {
        messages::info(&format!(
            "Removed the {} oldest profiles of earlier processes, beyond {keep} profiles or {} MiB (MEMPROF_DUMP_KEEP, MEMPROF_DUMP_MAX_BYTES)",
            sweep.removed_profiles,
            max_bytes >> 20
        ));
    }
    let kept: usize = sweep.kept.iter().map(|process| process.profiles.len()).sum();
    if let Some(newest) =
        sweep.kept.first().and_then(|process| process.profiles.first().map(|profile| (process, profile)))
    {
        let (process, profile) = newest;
        messages::warn(&format!(
            "Kept {kept} profile{} of {} earlier process{} that ended without cleaning up (killed or crashed), in {}; the newest is {} of process {} ({}): see {} or download it by id, and clear them with {}",
            if kept == 1 { "" } else { "s" },
            sweep.kept.len(),
            if sweep.kept.len() == 1 { "" } else { "es" },
            parent.display(),
            profile.profile.id,
            process.pid,
            crate::profile_root::untrusted::printable(&profile.profile.owner.name()),
            memprof_wire::paths::STATE,
            memprof_wire::paths::CLEAR_EARLIER,
        ));
    }
    profiler.adopt_earlier(sweep.kept);
}

/// Starts the built-in server, reporting where, or why not: it answers once the opening returned is dropped.
fn start_server(settings: &Settings, context: &'static crate::endpoints::Context) -> Option<http::Opening> {
    match http::serve(&settings.address, std::sync::Arc::new(crate::endpoints::Endpoints(context))) {
        Ok((bound, opening)) => {
            messages::info(&format!(
                "Serving heap profiling endpoints on http://{bound}{}/",
                memprof_wire::paths::PREFIX
            ));
            if context.token.is_none() && !bound.ip().is_loopback() {
                messages::warn(&format!(
                    "The heap profiling endpoints on {bound} are open to anyone who can reach it: profiles show code addresses and the heap's shape, and runs spend CPU and disk; set {} to require a token, or bind 127.0.0.1",
                    settings.token_variable
                ));
            }
            Some(opening)
        }
        Err(error) => {
            messages::error(&format!("Heap profiling endpoints are not served: {error}; the program runs on"));
            None
        }
    }
}

/// Ends memprof as the program ends: a run still active is stopped (its profile left at the path in
/// `MEMPROF_FINAL_DUMP`, if set) and the profile directory is removed. Call it from a program's own
/// SIGTERM handler, before the program exits without returning from `main`; calling it again, or
/// dropping the [`Guard`] later, does nothing more. In a child of `fork` it does nothing: memprof, its runs
/// and its profile directory are the parent's.
///
/// ```no_run
/// // In the program's own SIGTERM handling (a tokio `signal(SignalKind::terminate())` branch, say), when
/// // it ends the process without returning from `main`:
/// memprof_runtime::shutdown();
/// std::process::exit(0);
/// ```
#[inline]
pub fn shutdown() {
    // A program that asked nothing and used nothing has no profiler (nor a push, which pushes its record),
    // and nothing to remove: its exit runs nothing else of memprof's.
    let Some(profiler) = Profiler::made() else { return };
    if crate::process::lineage::forked_child() {
        return;
    }
    // The last interval's heap profiles go to the Collector first, within their deadline.
    crate::otlp_push::at_exit();
    profiler.shut_down();
}

/// Returned by [`start`]; when dropped (as `main` returns) it calls [`shutdown`], so no files are left
/// behind.
///
/// ```no_run
/// let guard = memprof_runtime::start(memprof_runtime::Options::new().http("127.0.0.1:0"));
/// drop(guard); // profiles removed
/// ```
#[must_use = "profiles are removed when the guard is dropped"]
#[derive(Debug)]
pub struct Guard {
    /// Whether this guard came from the first [`start`] (only that one shuts memprof down).
    owns_shutdown: bool,
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        if self.owns_shutdown {
            shutdown();
        }
    }
}
