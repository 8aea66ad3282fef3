//! Profiles of finished runs, analyzed and rendered once each and cached while the run is kept; of the
//! renders split or filtered by a label, only the few asked for last.
//!
//! A request for something being rendered waits for that render instead of starting its own; a render is
//! an expensive job ([`super::jobs`]): when the bound is reached, a request for another one is told to come
//! back. The work happens on memprof's unsampled threads.

use std::collections::HashMap;
use std::hash::Hash;
use std::io::Read;
use std::sync::Arc;

use parking_lot::Mutex;
use std::sync::{LazyLock, OnceLock};

use super::jobs::Permit;
use crate::profiler::KeptProfile;
use memprof_analysis::{Analysis, Binaries, Format, RenderOptions};

/// What was asked: a run's profile in a format, maybe as a difference from a base run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Request {
    run: u64,
    base: Option<u64>,
    format: Format,
    options: RenderOptions,
}

/// A value computed once, or the error computing it gave.
type Computed<V, E> = Arc<OnceLock<Result<Arc<V>, E>>>;

/// Values computed once per key; concurrent callers of the same key share one computation. At most
/// `capacity` are kept, of at most `max_bytes` together (as `weigh` counts them): past either, the ones
/// asked for least recently are forgotten (their callers still get them), the newest always kept.
struct OnceMap<K, V, E> {
    cells: Mutex<Cells<K, V, E>>,
    capacity: usize,
    max_bytes: usize,
    weigh: fn(&V) -> usize,
}

/// The kept cells, each with the [`Cells::clock`] of its last use and its value's weight once computed.
struct Cells<K, V, E> {
    by_key: HashMap<K, Entry<V, E>>,
    clock: u64,
}

struct Entry<V, E> {
    cell: Computed<V, E>,
    used: u64,
    bytes: usize,
}

impl<K: Eq + Hash + Clone, V, E: Clone> OnceMap<K, V, E> {
    fn new(capacity: usize) -> Self {
        Self::bounded(capacity, usize::MAX, |_| 0)
    }

    fn bounded(capacity: usize, max_bytes: usize, weigh: fn(&V) -> usize) -> Self {
        Self { cells: Mutex::new(Cells { by_key: HashMap::new(), clock: 0 }), capacity, max_bytes, weigh }
    }

    /// The value of `key`, computed by `compute` unless another caller did or is doing it. Errors are not
    /// kept: the next caller tries again.
    fn get(&self, key: &K, compute: impl FnOnce() -> Result<V, E>) -> Result<Arc<V>, E> {
        let cell = self.cell(key);
        let value = cell.get_or_init(|| compute().map(Arc::new)).clone();
        let mut cells = self.cells.lock();
        let kept = cells.by_key.get_mut(key).filter(|entry| Arc::ptr_eq(&entry.cell, &cell));
        match (&value, kept) {
            (Err(_), Some(_)) => {
                cells.by_key.remove(key);
            }
            (Ok(computed), Some(entry)) => {
                entry.bytes = (self.weigh)(computed);
                self.evict(&mut cells);
            }
            (_, None) => {}
        }
        value
    }

    /// Forgets the least recently used cells while more than `capacity` are kept or they weigh more than
    /// `max_bytes`, but never the last one.
    fn evict(&self, cells: &mut Cells<K, V, E>) {
        while cells.by_key.len() > 1
            && (cells.by_key.len() > self.capacity
                || cells.by_key.values().map(|entry| entry.bytes).sum::<usize>() > self.max_bytes)
        {
            let oldest = cells.by_key.iter().min_by_key(|(_, entry)| entry.used).map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                cells.by_key.remove(&oldest);
            }
        }
    }

    /// `key`'s cell, made if there is none, marked as used now; the least recently used one is forgotten
    /// when there are more than `capacity`.
    fn cell(&self, key: &K) -> Computed<V, E> {
        let mut cells = self.cells.lock();
        cells.clock += 1;
        let now = cells.clock;
        let entry =
            cells.by_key.entry(key.clone()).or_insert_with(|| Entry { cell: Computed::default(), used: now, bytes: 0 });
        entry.used = now;
        let cell = Arc::clone(&entry.cell);
        self.evict(&mut cells);
        cell
    }

    fn retain(&self, keep: impl Fn(&K) -> bool) {
        self.cells.lock().by_key.retain(|key, _| keep(key));
    }
}

/// Why a render is not served.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// [`super::jobs::MAX_JOBS`] other jobs are running; try again shortly.
    Busy,
    /// The profile could not be read or rendered.
    Failed(String),
    /// The profile's file cannot be opened (it was deleted meanwhile, or by something else).
    Gone(std::sync::Arc<std::io::Error>),
}

/// What is kept of the kept profiles, process-wide: each symbolized once, and its renders.
struct Caches {
    /// The symbolized profiles, by id; forgotten when the profile is evicted ([`forget`]).
    analyses: OnceMap<u64, Analysis, Failure>,
    /// The renders, by what was asked for, the most recently asked kept; forgotten with the profiles they
    /// used.
    rendered: OnceMap<Request, Vec<u8>, Failure>,
    /// The renders split or filtered by a label asked for last; forgotten with the profiles they used.
    label_rendered: OnceMap<Request, Vec<u8>, Failure>,
}

static CACHES: LazyLock<Caches> = LazyLock::new(|| Caches {
    analyses: OnceMap::new(usize::MAX),
    rendered: OnceMap::bounded(RENDERS_KEPT.0, RENDERS_KEPT.1, Vec::len),
    label_rendered: OnceMap::bounded(LABEL_RENDERS_KEPT, RENDERS_KEPT.1 / 4, Vec::len),
});

/// How many renders are kept, and how many bytes of them: a run's formats with and without lines, whole
/// or cut, against each base, for every kept profile, could be hundreds of renders of megabytes each.
const RENDERS_KEPT: (usize, usize) = (64, 64 << 20);
/// How many renders split or filtered by a label are kept: their keys and values are the asker's choice,
/// without bound, so only the latest few (the dashboard's split flame graph, shown again) are.
const LABEL_RENDERS_KEPT: usize = 8;

/// `run`'s profile in `format` (the difference from `base` when given), rendered once for every caller
/// asking at the same time and kept until the profile is evicted.
pub(crate) fn rendered(
    run: &KeptProfile,
    base: Option<&KeptProfile>,
    format: Format,
    options: &RenderOptions,
) -> Result<Arc<Vec<u8>>, Failure> {
    let render = || {
        let Some(_permit) = Permit::acquire() else {
            // Every caller waiting on this render sees it; it is not kept, so the next one tries again.
            return Err(Failure::Busy);
        };
        let profile = analysis(run)?;
        let base = base.map(analysis).transpose()?;
        format.render(&profile, base.as_deref(), options).map_err(|error| Failure::Failed(error.to_string()))
    };
    let request = Request { run: run.id, base: base.map(|base| base.id), format, options: options.clone() };
    let kept = if options.by.is_some() || options.label.is_some() { &CACHES.label_rendered } else { &CACHES.rendered };
    kept.get(&request, render)
}

/// The symbolized profile of `run`, for a summary of it: analysed once under a job permit, like a render.
pub(crate) fn analysed(run: &KeptProfile) -> Result<Arc<Analysis>, Failure> {
    let Some(_permit) = Permit::acquire() else {
        return Err(Failure::Busy);
    };
    analysis(run)
}

/// Has the profiler say which profiles it no longer keeps, once there is something to forget.
fn listen_for_evictions() {
    static LISTENING: std::sync::Once = std::sync::Once::new();
    LISTENING.call_once(|| crate::profiler::Profiler::global().on_eviction(forget));
}

/// Forgets the analysis of profile `id` and every render that used it: the profile is no longer kept.
fn forget(id: u64) {
    CACHES.analyses.retain(|analysed| *analysed != id);
    for kept in [&CACHES.rendered, &CACHES.label_rendered] {
        kept.retain(|request| request.run != id && request.base != Some(id));
    }
}

/// Forgets every analysis and render: what the endpoints keep for the next request goes when the endpoints
/// are idle (`forget_caches`).
pub(crate) fn forget_all() {
    CACHES.analyses.retain(|_| false);
    for kept in [&CACHES.rendered, &CACHES.label_rendered] {
        kept.retain(|_| false);
    }
}

/// The text of the profile at `path`: a regular file within the kept profiles' bound (`max_bytes`, the
/// settings' [`crate::settings::Retention::max_bytes`]), read as input.
pub(super) fn read_profile(path: &std::path::Path, max_bytes: u64) -> std::io::Result<String> {
    let mut text = String::new();
    crate::profile_root::untrusted::open_profile(path, max_bytes)?.read_to_string(&mut text)?;
    Ok(text)
}

/// A kept profile's dump `text`, read from `file` (the profile at `profile`, or a view kept beside it),
/// symbolized with the profile's labels, with the variance its maker wrote beside `file` (the error said is
/// then each sample's own, with what its calibration left out) and what the record of samples missed and
/// how much sampling was thinned said first: windows and their views are the record's.
pub(super) fn kept_dump(
    text: &str,
    profile: &std::path::Path,
    file: &std::path::Path,
) -> Result<Analysis, memprof_analysis::ParseError> {
    let mut analysis = Analysis::of_dump(text, &Binaries::this_process(), &crate::labels::table_for(profile))?;
    (analysis.known_variance, analysis.calibrated) = crate::profile_root::files::read_variance(file)
        .map_or((None, None), |(variance, calibrated)| (Some(variance), calibrated));
    let record = crate::profiler::Profiler::global().sampler().record();
    analysis.cautions.extend(record.into_iter().flat_map(crate::sampler::record::cautions));
    Ok(analysis)
}

/// The symbolized profile of `run`, analysed once and kept until the profile is evicted.
fn analysis(run: &KeptProfile) -> Result<Arc<Analysis>, Failure> {
    listen_for_evictions();
    CACHES.analyses.get(&run.id, || {
        let max_bytes = crate::profiler::Profiler::global().settings().retention.max_bytes;
        let text = read_profile(&run.path, max_bytes).map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => Failure::Gone(Arc::new(error)),
            _ => Failure::Failed(format!(
                "Cannot read the profile of run {} at {} ({error})",
                run.id,
                run.path.display()
            )),
        })?;
        kept_dump(&text, &run.path, &run.path)
            .map_err(|error| Failure::Failed(format!("The profile of run {} is malformed: {error}", run.id)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn concurrent_callers_share_one_computation_and_errors_are_retried() {
        let map: OnceMap<u32, u32, String> = OnceMap::new(usize::MAX);
        let computed = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    let value = map.get(&1, || {
                        computed.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        Ok(7)
                    });
                    assert_eq!(*value.unwrap(), 7);
                });
            }
        });
        assert_eq!(computed.load(Ordering::SeqCst), 1);
        assert_eq!(map.get(&2, || Err("disk full".to_owned())), Err("disk full".to_owned()));
        assert_eq!(*map.get(&2, || Ok(3)).unwrap(), 3);
    }

    #[test]
    fn past_its_capacity_the_least_recently_asked_for_is_forgotten() {
        let map: OnceMap<u32, u32, String> = OnceMap::new(2);
        let computed = AtomicUsize::new(0);
        let get = |key| {
            *map.get(&key, || {
                computed.fetch_add(1, Ordering::SeqCst);
                Ok(key * 10)
            })
            .unwrap()
        };
        assert_eq!((get(1), get(2), get(1)), (10, 20, 10));
        assert_eq!(computed.load(Ordering::SeqCst), 2);
        // 3 pushes out 2, asked for less recently than 1.
        assert_eq!((get(3), get(1)), (30, 10));
        assert_eq!(computed.load(Ordering::SeqCst), 3);
        assert_eq!(get(2), 20);
        assert_eq!(computed.load(Ordering::SeqCst), 4);
        assert_eq!(map.cells.lock().by_key.len(), 2);
    }

    #[test]
    fn past_its_bytes_the_least_recently_asked_for_are_forgotten_but_never_the_newest() {
        let map: OnceMap<u32, Vec<u8>, String> = OnceMap::bounded(10, 100, Vec::len);
        let get = |key: u32, bytes: usize| map.get(&key, || Ok(vec![0; bytes])).unwrap().len();
        assert_eq!((get(1, 40), get(2, 40)), (40, 40));
        get(3, 40);
        let kept = |map: &OnceMap<u32, Vec<u8>, String>| {
            let mut keys: Vec<u32> = map.cells.lock().by_key.keys().copied().collect();
            keys.sort_unstable();
            keys
        };
        assert_eq!(kept(&map), [2, 3], "120 bytes: the oldest goes");
        get(4, 500);
        assert_eq!(kept(&map), [4], "one larger than the bound is still kept, alone");
    }
}
