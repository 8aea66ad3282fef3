//! memprof's own threads, each unsampled from its first allocation, and a pool of them that is started
//! once and reused.
//!
//! A new thread allocates before its closure runs (std's spawn hooks register a thread-local destructor,
//! which callocs in glibc), and jemalloc samples a new thread as `prof.thread_active_init` says (true, so
//! the program's threads are profiled). So a thread memprof starts must be born while sampling is off, and
//! switch its own sampling off before sampling can come on: [`spawn`] waits until the new thread has done
//! so, and the threads that serve requests during runs are all started up front, in a [`Pool`], instead of
//! one per connection. After each job a pool thread hands its cached memory back to the arenas
//! (`thread.tcache.flush`), so nothing it allocated stays with it.

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::jemalloc;

/// How long [`spawn`] waits for the new thread to switch its sampling off.
const BORN_WITHIN: Duration = Duration::from_secs(2);

/// Starts a thread named `name` that runs `work` with sampling off; returns once the thread has switched
/// its sampling off (or after two seconds, on a machine too loaded to schedule it).
///
/// Call it when no run is active (at start-up, or before a run switches sampling on): the thread's own
/// start-up then happens unsampled.
pub(crate) fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> io::Result<()> {
    let born = Arc::new((Mutex::new(false), Condvar::new()));
    let told = Arc::clone(&born);
    thread::Builder::new().name(name.to_owned()).spawn(move || {
        jemalloc::set_this_thread_sampled(false);
        jemalloc::bind_this_thread_to_own_arena();
        *told.0.lock() = true;
        told.1.notify_all();
        drop(told);
        work();
    })?;
    let mut unsampled = born.0.lock();
    if !*unsampled {
        born.1.wait_while_for(&mut unsampled, |unsampled| !*unsampled, BORN_WITHIN);
    }
    Ok(())
}

/// A job for a pool thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// A fixed number of unsampled threads, started together and reused: a job goes to an idle thread at
/// once, or is handed back when every thread is busy (the caller refuses the work; nothing queues).
///
/// ```ignore
/// let pool = Pool::new("memprof-worker", 4)?;
/// pool.try_run(Box::new(|| println!("on a pool thread"))).map_err(|_| "all busy")?;
/// ```
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    /// The threads waiting for a job, by index.
    idle: Mutex<Vec<usize>>,
    /// Signalled when a thread becomes idle.
    freed: Condvar,
    workers: Vec<Worker>,
}

/// One thread's mailbox.
#[derive(Default)]
struct Worker {
    job: Mutex<Option<Job>>,
    wake: Condvar,
}

impl Pool {
    /// Starts `size` threads named `name`, each unsampled from its birth (see [`spawn`]).
    pub(crate) fn new(name: &str, size: usize) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            idle: Mutex::new(Vec::with_capacity(size)),
            freed: Condvar::new(),
            workers: (0..size).map(|_| Worker::default()).collect(),
        });
        for index in 0..size {
            let shared = Arc::clone(&shared);
            spawn(name, move || shared.work(index))?;
        }
        Ok(Self { shared })
    }

    /// Runs `job` on an idle thread, or hands it back when all are busy.
    pub(crate) fn try_run(&self, job: Job) -> Result<(), Job> {
        self.run_within(job, Duration::ZERO)
    }

    /// Runs `job` on a thread idle now or within `patience` (for threads about to finish), or hands it
    /// back.
    pub(crate) fn run_within(&self, job: Job, patience: Duration) -> Result<(), Job> {
        let mut idle = self.shared.idle.lock();
        if idle.is_empty() && !patience.is_zero() {
            self.shared.freed.wait_while_for(&mut idle, |idle| idle.is_empty(), patience);
        }
        let Some(index) = idle.pop() else {
            return Err(job);
        };
        drop(idle);
        let worker = &self.shared.workers[index];
        *worker.job.lock() = Some(job);
        worker.wake.notify_one();
        Ok(())
    }

    /// How many threads wait for a job.
    #[cfg(test)]
    pub(crate) fn idle(&self) -> usize {
        self.shared.idle.lock().len()
    }
}

impl Shared {
    /// A pool thread's life: announce itself idle, wait for a job, run it, tidy up, again.
    fn work(&self, index: usize) {
        let worker = &self.workers[index];
        loop {
            let job = {
                let mut job = worker.job.lock();
                self.idle.lock().push(index);
                self.freed.notify_one();
                loop {
                    if let Some(job) = job.take() {
                        break job;
                    }
                    worker.wake.wait(&mut job);
                }
            };
            // A job that panics has reported itself (the panic hook); the thread lives on for the next.
            let _ = catch_unwind(AssertUnwindSafe(job));
            jemalloc::flush_this_thread_cache();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    /// Waits (at most ten seconds) until `condition` holds.
    fn wait_for(condition: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(std::time::Instant::now() < deadline, "the condition did not come true within 10 s");
            thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn jobs_run_on_idle_threads_and_come_back_when_all_are_busy() {
        let pool = Pool::new("memprof-test", 2).unwrap();
        wait_for(|| pool.idle() == 2);
        let (release, released) = mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        let (done, finished) = mpsc::channel();
        for _ in 0..2 {
            let (released, done) = (Arc::clone(&released), done.clone());
            let job: Job = Box::new(move || {
                let _ = released.lock().recv();
                done.send(thread::current().name().map(str::to_owned)).unwrap();
            });
            assert!(pool.try_run(job).is_ok());
        }
        assert!(pool.try_run(Box::new(|| {})).is_err(), "both threads are busy");
        release.send(()).unwrap();
        release.send(()).unwrap();
        for _ in 0..2 {
            assert_eq!(finished.recv().unwrap().as_deref(), Some("memprof-test"));
        }
        wait_for(|| pool.idle() == 2);
        // A panicking job leaves its thread serving.
        assert!(pool.try_run(Box::new(|| panic!("a job's bug"))).is_ok());
        wait_for(|| pool.idle() == 2);
        let (done, finished) = mpsc::channel();
        assert!(pool.try_run(Box::new(move || done.send(7).unwrap())).is_ok());
        assert_eq!(finished.recv().unwrap(), 7);
    }

    #[test]
    fn a_spawned_thread_has_switched_its_sampling_off_when_spawn_returns() {
        let (report, reported) = mpsc::channel();
        spawn("memprof-test", move || report.send(jemalloc::this_thread_sampled()).unwrap()).unwrap();
        assert_eq!(reported.recv().unwrap(), Ok(false));
    }
}
