//! Acting on the process's memory: returning the freed pages jemalloc keeps (`purge`) and setting how it
//! returns them (`decay`). Both are POST only: they change the program's memory.

use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use memprof_wire::Purged;

use super::context::Context;
use crate::http::{HttpError, Query, Reply};
use crate::{jemalloc, memory};

/// `purge` (POST): returns every arena's freed pages to the system now; answers the resident set before and
/// after. A purge asked for while one runs joins it: its answer is that purge's, said as joined (five
/// operators pressing at once all learn what the one purge returned, not four of them "0.0 MiB").
pub(super) fn purge(_: &Context, _: &Query) -> Result<Reply, HttpError> {
    let (purged, joined) = PURGES.run_or_join(purge_now);
    let mut purged = purged.map_err(HttpError::internal)?;
    if joined {
        purged.message = format!("Joined a purge already running: {}", purged.message);
    }
    Ok(Reply::json(&purged))
}

/// One purge at a time; those asked for meanwhile share its result.
static PURGES: OneAtATime<Result<Purged, String>> = OneAtATime::new();

fn purge_now() -> Result<Purged, String> {
    let rss = || memory::resident_set().map_err(|error| format!("Cannot read VmRSS ({error})"));
    let before = rss()?;
    let began = Instant::now();
    jemalloc::purge(jemalloc::ALL_ARENAS).map_err(|error| format!("jemalloc refused to purge its arenas ({error})"))?;
    let milliseconds = began.elapsed().as_secs_f64() * 1000.0;
    let after = rss()?;
    let message = format!(
        "Returned {} to the system in {milliseconds:.1} ms (RSS {} -> {})",
        memory::mib(before.saturating_sub(after)),
        memory::mib(before),
        memory::mib(after)
    );
    Ok(Purged { rss_before_bytes: before, rss_after_bytes: after, milliseconds, message })
}

/// Work done by one caller at a time, whose result every caller that came while it ran shares.
struct OneAtATime<T> {
    state: Mutex<Flights<T>>,
    landed: Condvar,
}

struct Flights<T> {
    running: bool,
    /// Callers waiting for the run under way.
    waiting: usize,
    /// How many runs ended, and the last one's result.
    ended: u64,
    last: Option<T>,
}

impl<T: Clone> OneAtATime<T> {
    const fn new() -> Self {
        OneAtATime {
            state: Mutex::new(Flights { running: false, waiting: 0, ended: 0, last: None }),
            landed: Condvar::new(),
        }
    }

    /// Runs `work`, or, when a run is under way, waits for it and answers its result; `true` when joined.
    fn run_or_join(&self, work: impl FnOnce() -> T) -> (T, bool) {
        let mut state = self.state.lock();
        if state.running {
            let awaited = state.ended + 1;
            state.waiting += 1;
            while state.ended < awaited {
                self.landed.wait(&mut state);
            }
            state.waiting -= 1;
            return (state.last.clone().expect("set when a run ends"), true);
        }
        state.running = true;
        drop(state);
        let result = work();
        let mut state = self.state.lock();
        state.running = false;
        state.ended += 1;
        state.last = Some(result.clone());
        self.landed.notify_all();
        (result, false)
    }
}

/// The longest decay time `decay` sets: a day (-1, never, is allowed too).
const LONGEST_DECAY_MS: i64 = 86_400_000;

/// `decay` (POST): sets the dirty and muzzy decay times of every arena (`dirty_ms`, `muzzy_ms`) and the
/// background threads (`background_thread`); answers the settings after.
pub(super) fn decay(_: &Context, query: &Query) -> Result<Reply, HttpError> {
    let time = |name: &str| -> Result<Option<i64>, HttpError> {
        query
            .get(name)
            .map(|text| match text.parse::<i64>() {
                Ok(ms) if (-1..=LONGEST_DECAY_MS).contains(&ms) => Ok(ms),
                _ => Err(HttpError::bad_request(format!(
                    "Invalid parameter '{name}': '{}' is not a decay time; give milliseconds from 0 to \
                     {LONGEST_DECAY_MS}, or -1 for never",
                    text.escape_debug()
                ))),
            })
            .transpose()
    };
    let (dirty, muzzy) = (time("dirty_ms")?, time("muzzy_ms")?);
    let background = query.get("background_thread").is_some().then(|| query.flag("background_thread")).transpose()?;
    if dirty.is_none() && muzzy.is_none() && background.is_none() {
        return Err(HttpError::bad_request(
            "Nothing to set: give dirty_ms, muzzy_ms or background_thread (true or false)".to_owned(),
        ));
    }
    let mut settings = jemalloc::set_decay_settings(dirty, muzzy, background)
        .map_err(|error| HttpError::internal(format!("jemalloc refused the settings ({error})")))?;
    settings.cost = memory::decay_cost(&settings);
    Ok(Reply::json(&settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_that_come_while_the_work_runs_share_its_result() {
        static WORK: OneAtATime<u32> = OneAtATime::new();
        let (started, running) = std::sync::mpsc::channel();
        let (finish, finishing) = std::sync::mpsc::channel::<()>();
        let first = std::thread::spawn(move || {
            WORK.run_or_join(|| {
                started.send(()).unwrap();
                finishing.recv().unwrap();
                7
            })
        });
        running.recv().unwrap();
        let joiners: Vec<_> = (0..4).map(|_| std::thread::spawn(|| WORK.run_or_join(|| 0))).collect();
        crate::testing::wait_until("4 callers waiting for the run", || {
            let waiting = WORK.state.lock().waiting;
            if waiting == 4 { Ok(()) } else { Err(format!("{waiting} waiting")) }
        });
        finish.send(()).unwrap();
        assert_eq!(first.join().unwrap(), (7, false));
        for joiner in joiners {
            assert_eq!(joiner.join().unwrap(), (7, true));
        }
        assert_eq!(WORK.run_or_join(|| 9), (9, false), "a caller after the run runs anew");
    }
}
