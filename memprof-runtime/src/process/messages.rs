//! Messages to the operator: through the `log` crate when the program installed a logger, else on stderr,
//! so a warning about profiling is never silently lost.

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

fn emit(level: log::Level, message: &str) {
    if log::max_level() == log::LevelFilter::Off {
        eprintln!("[memprof] {level} {message}");
    } else {
        log::log!(target: "memprof", level, "{message}");
    }
}
