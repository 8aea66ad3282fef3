//! memprof's own threads, each unsampled from its first allocation, and pools of them that grow when
//! needed and never end.
//!
//! A thread's end is not free for the program: jemalloc's thread-cache teardown decays arena 0 (the
//! program's main arena) and the thread's arena, returning to the system the program's freed pages it was
//! keeping (270 MiB a run's timer thread or an idle connection thread took with it, measured on a program
//! whose `explain` said "retention"). So memprof's threads, once born, stay for the process's life; an idle
//! one gives back what it holds instead: its thread cache after each job, and the pages of its stack below
//! where it waits.
//!
//! A new thread allocates before its closure runs (std's spawn hooks register a thread-local destructor,
//! which callocs in glibc), and jemalloc samples a new thread as `prof.thread_active_init` says (true, so
//! the program's threads are profiled). So a thread memprof starts is born while sampling is off, and
//! switches its own sampling off before sampling can come on: sampling is switched on (a run, continuous
//! sampling, the budget's slots: [`with_sampling_switched`]) only once every thread started has done so
//! (`BIRTH.unborn`). [`spawn`] itself does not wait, so the program's start does not wait for memprof's threads
//! to be scheduled. Where sampling is on (continuously, or during a run), it is paused for the birth:
//! switched off, the thread born, switched on again, no switch of a run's meanwhile (`BIRTH.births`); `state`
//! counts the pauses and their time ([`sampling_paused`]). A thread is born only when needed: a [`Pool`] grows
//! by a thread when a job finds none idle, up to its size, so a program sampled continuously runs the threads
//! one sampled on demand runs. After each job a pool thread hands its cached memory back to the arenas
//! (`thread.tcache.flush`), so nothing it allocated stays with it.

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::jemalloc;

/// How memprof's threads' births paused sampling, process-wide: whether now, how often, and for how long.
struct Pauses {
    /// Whether sampling is paused for a birth now (set and cleared while `BIRTH.births` is held exclusively).
    paused_now: AtomicBool,
    /// How many times sampling was paused for a memprof thread's birth.
    pauses: AtomicU64,
    /// For how long in all (ns).
    paused_nanos: AtomicU64,
}

static PAUSES_SEEN: Pauses =
    Pauses { paused_now: AtomicBool::new(false), pauses: AtomicU64::new(0), paused_nanos: AtomicU64::new(0) };

/// Threads being born, process-wide: how many are still unborn (each told when born), and the lock a
/// switch of sampling takes against births.
struct Births {
    /// How many of memprof's threads were started and have not yet switched their sampling off.
    unborn: Mutex<usize>,
    /// Signalled when none is left unborn.
    born: Condvar,
    /// Held while a thread is born (sampling paused if it was on), and while a run switches sampling on or
    /// off: a birth never sees sampling switched under it, so it switches on again only what it paused.
    births: RwLock<()>,
}

static BIRTH: Births = Births { unborn: Mutex::new(0), born: Condvar::new(), births: RwLock::new(()) };

/// How long switching sampling on waits for memprof's threads started to switch their own sampling off.
const BORN_WITHIN: Duration = Duration::from_secs(2);

/// Starts a thread named `name` that runs `work` with sampling off, and returns without waiting for it:
/// sampling comes on only once the thread has switched its own off (or after two seconds, on a machine too
/// loaded to schedule it). Sampling, if on, is paused for the birth (see the module's note).
pub(crate) fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> io::Result<()> {
    born_unsampled(|| start_thread(name, work))
}

/// Waits until every thread started has switched its sampling off, at most [`BORN_WITHIN`]; a thread not
/// scheduled by then is no longer waited for (as a thread memprof cannot make is done without).
fn wait_for_births() {
    let mut unborn = BIRTH.unborn.lock();
    if *unborn > 0 && BIRTH.born.wait_while_for(&mut unborn, |unborn| *unborn > 0, BORN_WITHIN).timed_out() {
        *unborn = 0;
    }
}

/// Counts one thread started as born (unsampled), or never to be.
fn one_born() {
    let mut unborn = BIRTH.unborn.lock();
    *unborn = unborn.saturating_sub(1);
    if *unborn == 0 {
        BIRTH.born.notify_all();
    }
}

/// How many times sampling was paused for memprof's threads to be born, and for how long in all: no
/// allocation was sampled meanwhile (`state` says so).
pub(crate) fn sampling_paused() -> (u64, Duration) {
    (PAUSES_SEEN.pauses.load(Ordering::Relaxed), Duration::from_nanos(PAUSES_SEEN.paused_nanos.load(Ordering::Relaxed)))
}

/// Runs `birth` (which starts a thread and waits until it has switched its sampling off) with sampling
/// off: paused if on, and switched on again after, no run switching it meanwhile.
fn born_unsampled<T>(birth: impl FnOnce() -> T) -> T {
    let _no_switch = BIRTH.births.write();
    let paused = jemalloc::profiling_active().unwrap_or(false) && jemalloc::set_profiling_active(false).is_ok();
    PAUSES_SEEN.paused_now.store(paused, Ordering::Release);
    let started = Instant::now();
    let born = birth();
    if paused {
        wait_for_births();
        if let Err(error) = jemalloc::set_profiling_active(true) {
            crate::process::messages::error(&format!(
                "Sampling could not be switched on again after a memprof thread's birth (prof.active: {error})"
            ));
        }
        PAUSES_SEEN.pauses.fetch_add(1, Ordering::Relaxed);
        PAUSES_SEEN.paused_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        PAUSES_SEEN.paused_now.store(false, Ordering::Release);
    }
    born
}

/// Starts the thread (see [`spawn`]), counted in `BIRTH.unborn` until it has switched its sampling off; the
/// caller holds `BIRTH.births` exclusively, with sampling off.
fn start_thread(name: &str, work: impl FnOnce() + Send + 'static) -> io::Result<()> {
    *BIRTH.unborn.lock() += 1;
    let started = thread::Builder::new().name(name.to_owned()).spawn(move || memprofs_own_thread(work));
    if started.is_err() {
        one_born();
    }
    started.map(drop)
}

/// The body of every memprof thread: unsampled and bound to memprof's arena before anything else, then
/// `work`. Never inlined, so that a profiler of the whole process (perf, callgrind: the benchmarks split
/// the program's instructions from memprof's by it) tells memprof's threads by this frame.
#[inline(never)]
fn memprofs_own_thread(work: impl FnOnce()) {
    jemalloc::set_this_thread_sampled(false);
    jemalloc::bind_this_thread_to_own_arena();
    one_born();
    work();
}

/// A job for a pool thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// How long a pool's threads all wait for a job before the pool counts as idle and runs its `when_idle`.
const IDLE_LIFETIME: Duration = Duration::from_secs(10);

/// Runs `switch` (which switches sampling on or off) with no thread being born meanwhile, once every thread
/// started has switched its own sampling off.
pub(crate) fn with_sampling_switched<T>(switch: impl FnOnce() -> T) -> T {
    let _no_births = BIRTH.births.write();
    wait_for_births();
    switch()
}

/// Up to `size` unsampled threads, reused: a job goes to an idle thread at once, else to a thread born for
/// it (sampling paused meanwhile if on: see the module's note), or is handed back when every thread is
/// busy (the caller refuses the work; nothing queues). Threads never end (see the module's note); once
/// every thread has waited [`IDLE_LIFETIME`] for a job, the pool runs its `when_idle`, so an idle program
/// keeps none of the pool's work.
///
/// ```ignore
/// let pool = Pool::new("memprof-worker", 4, || {})?;
/// pool.try_run(Box::new(|| println!("on a pool thread"))).map_err(|_| "all busy")?;
/// ```
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    size: usize,
    /// Run once the pool is idle (see [`Pool`]).
    when_idle: fn(),
    state: Mutex<State>,
    /// Signalled when a thread becomes idle.
    freed: Condvar,
}

struct State {
    /// The threads waiting for a job.
    idle: Vec<Arc<Worker>>,
    /// The threads alive (idle, busy, or being born).
    live: usize,
    /// How many idle threads have waited [`IDLE_LIFETIME`] since their last job.
    long_idle: usize,
    /// `when_idle` ran, and no job came since.
    idle_done: bool,
}

/// One thread's mailbox.
#[derive(Default)]
struct Worker {
    job: Mutex<Option<Job>>,
    wake: Condvar,
}

impl Pool {
    /// A pool of up to `size` threads named `name`, none started yet. Once the pool is idle, one of its
    /// threads runs `when_idle` (to let go of what the pool's work kept for the next jobs).
    pub(crate) fn new(name: &str, size: usize, when_idle: fn()) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            size,
            when_idle,
            state: Mutex::new(State { idle: Vec::with_capacity(size), live: 0, long_idle: 0, idle_done: false }),
            freed: Condvar::new(),
        });
        Ok(Self { shared })
    }

    /// Runs `job` on an idle thread, or hands it back when all are busy.
    #[cfg(any(test, feature = "axum"))]
    pub(crate) fn try_run(&self, job: Job) -> Result<(), Job> {
        self.run_within(job, Duration::ZERO)
    }

    /// Runs `job` on a thread idle now, on one born for it, or on one idle within `patience` (for threads
    /// about to finish), or hands it back.
    pub(crate) fn run_within(&self, job: Job, patience: Duration) -> Result<(), Job> {
        let deadline = Instant::now() + patience;
        let mut job = Some(job);
        let mut birth_tried = false;
        loop {
            let mut state = self.shared.state.lock();
            if let Some(worker) = state.idle.pop() {
                state.idle_done = false;
                drop(state);
                *worker.job.lock() = job.take();
                worker.wake.notify_one();
                return Ok(());
            }
            if state.live < self.shared.size && !birth_tried {
                birth_tried = true;
                drop(state);
                match born_unsampled(|| Shared::bear(&self.shared, job.take())) {
                    Ok(()) => return Ok(()),
                    Err(back) => job = back,
                }
                // Full meanwhile (another job's birth), or no thread could be made: look for an idle one.
                continue;
            }
            if Instant::now() >= deadline
                || self.shared.freed.wait_until(&mut state, deadline).timed_out() && state.idle.is_empty()
            {
                return Err(job.take().expect("not handed out"));
            }
        }
    }

    /// How many threads wait for a job.
    #[cfg(test)]
    pub(crate) fn idle(&self) -> usize {
        self.shared.state.lock().idle.len()
    }

    /// How many threads are alive.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.shared.state.lock().live
    }
}

impl Shared {
    /// Starts one more thread (running `job` first; without one, the thread is idle from now, before it
    /// even runs) unless the pool is full or the thread cannot be made; else hands `job` back. The caller
    /// holds `BIRTH.births` exclusively, with sampling off ([`born_unsampled`]).
    fn bear(shared: &Arc<Shared>, job: Option<Job>) -> Result<(), Option<Job>> {
        let idle = job.is_none();
        let worker = Arc::new(Worker { job: Mutex::new(job), wake: Condvar::new() });
        {
            let mut state = shared.state.lock();
            if state.live >= shared.size {
                return Err(worker.job.lock().take());
            }
            state.live += 1;
            state.idle_done &= idle;
            if idle {
                state.idle.push(Arc::clone(&worker));
                shared.freed.notify_one();
            }
        }
        let (pool, mine) = (Arc::clone(shared), Arc::clone(&worker));
        let work = move || {
            // Born while sampling was paused: its first job (a request reading `state`, say) waits until
            // sampling is on again. Other threads' work does not wait: the arenas' watcher must start at
            // once, before any other thread is born.
            if PAUSES_SEEN.paused_now.load(Ordering::Acquire) {
                drop(BIRTH.births.read());
            }
            pool.work(&mine)
        };
        if start_thread(&shared.name, work).is_err() {
            let mut state = shared.state.lock();
            state.live -= 1;
            state.idle.retain(|waiting| !Arc::ptr_eq(waiting, &worker));
            drop(state);
            return Err(worker.job.lock().take());
        }
        Ok(())
    }

    /// A pool thread's life: wait for a job (it is on the idle list, or was born with one), run it,
    /// announce itself idle, again, for the life of the process.
    fn work(&self, worker: &Arc<Worker>) {
        loop {
            let job = self.next_job(worker);
            // A job that panics has reported itself (the panic hook); the thread lives on for the next.
            let _ = catch_unwind(AssertUnwindSafe(job));
            jemalloc::flush_this_thread_cache();
            let mut state = self.state.lock();
            state.idle.push(Arc::clone(worker));
            self.freed.notify_one();
        }
    }

    /// The next job handed to `worker`. After [`IDLE_LIFETIME`] without one, the thread gives back the
    /// pages of its stack it no longer uses, and the last of the pool's threads to get there runs
    /// `when_idle`; then it waits on.
    fn next_job(&self, worker: &Arc<Worker>) -> Job {
        let mut job = worker.job.lock();
        let long_idle = job.is_none() && worker.wake.wait_for(&mut job, IDLE_LIFETIME).timed_out() && job.is_none();
        if long_idle {
            drop(job);
            release_unused_stack();
            self.note_long_idle();
            job = worker.job.lock();
        }
        while job.is_none() {
            worker.wake.wait(&mut job);
        }
        let next = job.take().expect("a job was handed over");
        drop(job);
        if long_idle {
            self.state.lock().long_idle -= 1;
        }
        next
    }

    /// Counts a thread as idle for [`IDLE_LIFETIME`]; the last of the pool's threads to be so runs
    /// `when_idle`, once until a job comes.
    fn note_long_idle(&self) {
        let mut state = self.state.lock();
        state.long_idle += 1;
        let idle = state.long_idle == state.live && state.idle.len() == state.live && !state.idle_done;
        state.idle_done |= idle;
        drop(state);
        if idle {
            let _ = catch_unwind(self.when_idle);
        }
    }
}

/// Gives the pages of the calling thread's stack below its current frame back to the system
/// (`MADV_DONTNEED`: they read as zeros when touched again): a pool thread that once ran a deep job and
/// now waits keeps only the top of its stack resident. A stack that cannot be located is left as it is.
#[allow(unsafe_code)]
fn release_unused_stack() {
    let here = std::hint::black_box(0u8);
    let here = std::ptr::from_ref(&here) as usize;
    // SAFETY: a zeroed `pthread_attr_t` is what `pthread_getattr_np` fills in; it is destroyed after use.
    let (low, size) = unsafe {
        let mut attributes: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attributes) != 0 {
            return;
        }
        let (mut low, mut size) = (std::ptr::null_mut(), 0);
        let got = libc::pthread_attr_getstack(&attributes, &mut low, &mut size);
        libc::pthread_attr_destroy(&mut attributes);
        if got != 0 {
            return;
        }
        (low as usize, size)
    };
    let page = rustix::param::page_size();
    // The lowest page may be the guard; the 64 KiB below this frame are left for the wait that follows
    // (and a signal handler that may run meanwhile).
    let (start, end) = (low + page, here.saturating_sub(64 << 10) & !(page - 1));
    if !(low..low + size).contains(&here) || end <= start {
        return;
    }
    // SAFETY: `[start, end)` lies in this thread's own stack, below the current frame (the stack grows
    // down): no live data is there, and the pages are private anonymous memory, zero-filled when touched.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
    }
}

#[cfg(test)]
mod tests;
