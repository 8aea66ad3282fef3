//! Messages to the operator: through the `log` crate when the program installed a logger, else on stderr,
//! so a warning about profiling is never silently lost; none where nothing asked memprof to profile (a
//! command-line tool run with the switch off says nothing), unless `MEMPROF_LOG` asks. Every message is
//! kept too, the latest [`KEPT`], for `state` ([`said`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// What memprof said and may say: the level it speaks from, its latest messages, and whether a logger
/// was chosen.
struct Said {
    /// The most detailed level said (a `log::LevelFilter` as a number): every level until the settings say.
    said_up_to: AtomicUsize,
    /// The latest messages, said or not, each with its level.
    latest: Mutex<VecDeque<String>>,
    /// Whether `MEMPROF_LOG` chose the level (then nothing changes it).
    chosen: AtomicBool,
}

static SAID: Said = Said {
    said_up_to: AtomicUsize::new(log::LevelFilter::Info as usize),
    latest: Mutex::new(VecDeque::new()),
    chosen: AtomicBool::new(false),
};

/// Reports a condition that makes what the operator asked for impossible: no profiling at all, no endpoints
/// where they were asked for, automatic dumps asked for wrongly. At the `error` level, which a logger shows
/// by default (env_logger with `RUST_LOG` unset shows errors only).
pub(crate) fn error(message: &str) {
    emit(log::Level::Error, message);
}

/// Reports a condition that keeps profiling from working as intended.
pub(crate) fn warn(message: &str) {
    emit(log::Level::Warn, message);
}

/// Reports something an operator wants to see once, such as the address being served.
pub(crate) fn info(message: &str) {
    emit(log::Level::Info, message);
}

/// How many messages are kept for `state`: the latest.
pub(crate) const KEPT: usize = 32;

/// Says messages up to `level` from now on (the settings' [`crate::settings::Settings::said_up_to`]),
/// `chosen` by `MEMPROF_LOG` or not.
pub(crate) fn say_up_to(level: log::LevelFilter, chosen: bool) {
    SAID.said_up_to.store(level as usize, Ordering::Relaxed);
    SAID.chosen.store(chosen, Ordering::Relaxed);
}

/// Someone asked memprof something (a request to its endpoints mounted on the program's server, with the
/// switch off): from now on it says what it has to, unless `MEMPROF_LOG` chose otherwise.
#[cfg(feature = "http")]
pub(crate) fn someone_asked() {
    if !SAID.chosen.load(Ordering::Relaxed) {
        SAID.said_up_to.fetch_max(log::LevelFilter::Info as usize, Ordering::Relaxed);
    }
}

/// The latest messages, said or not, oldest first: `LEVEL message`.
///
/// ```ignore
/// messages::info("Serving heap profiling endpoints on http://127.0.0.1:5050/memory-profiler/");
/// assert!(messages::said().last().unwrap().starts_with("INFO Serving"));
/// ```
pub(crate) fn said() -> Vec<String> {
    SAID.latest.lock().iter().cloned().collect()
}

fn emit(level: log::Level, message: &str) {
    {
        let mut latest = SAID.latest.lock();
        if latest.len() == KEPT {
            latest.pop_front();
        }
        latest.push_back(format!("{level} {message}"));
    }
    if level as usize > SAID.said_up_to.load(Ordering::Relaxed) {
        return;
    }
    if log::max_level() == log::LevelFilter::Off {
        eprintln!("[memprof] {level} {message}");
    } else {
        log::log!(target: "memprof", level, "{message}");
    }
}
