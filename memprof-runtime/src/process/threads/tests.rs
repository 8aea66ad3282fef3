//! The pools and births against the real jemalloc.

use std::sync::mpsc;

use super::*;

/// Waits until `count` of `pool`'s threads wait for a job.
fn wait_idle(pool: &Pool, count: usize) {
    crate::testing::wait_until(&format!("{count} idle threads"), || {
        let idle = pool.idle();
        if idle == count { Ok(()) } else { Err(format!("{idle} idle")) }
    });
}

#[test]
fn jobs_run_on_idle_threads_and_come_back_when_all_are_busy() {
    let pool = Pool::new("memprof-test", 2, || {}).unwrap();
    assert_eq!(pool.live(), 0, "born when needed");
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
    assert_eq!(pool.live(), 2, "a thread born for each job");
    assert!(pool.try_run(Box::new(|| {})).is_err(), "both threads are busy");
    release.send(()).unwrap();
    release.send(()).unwrap();
    for _ in 0..2 {
        assert_eq!(finished.recv().unwrap().as_deref(), Some("memprof-test"));
    }
    wait_idle(&pool, 2);
    // A panicking job leaves its thread serving.
    assert!(pool.try_run(Box::new(|| panic!("a job's bug"))).is_ok());
    wait_idle(&pool, 2);
    let (done, finished) = mpsc::channel();
    assert!(pool.try_run(Box::new(move || done.send(7).unwrap())).is_ok());
    assert_eq!(finished.recv().unwrap(), 7);
}

#[test]
fn a_thread_born_while_sampling_is_on_pauses_it_and_switches_it_on_again() {
    let _serial = crate::testing::SAMPLING.lock();
    let was = jemalloc::set_profiling_active(true).unwrap();
    let (pauses, _) = sampling_paused();
    let (report, reported) = mpsc::channel();
    spawn("memprof-test", move || report.send(jemalloc::this_thread_sampled()).unwrap()).unwrap();
    assert_eq!(reported.recv().unwrap(), Ok(false));
    assert_eq!(jemalloc::profiling_active(), Ok(true), "on again");
    assert_eq!(sampling_paused().0, pauses + 1);
    jemalloc::set_profiling_active(was).unwrap();
}

#[test]
fn a_spawned_thread_switches_its_sampling_off() {
    let (report, reported) = mpsc::channel();
    spawn("memprof-test", move || report.send(jemalloc::this_thread_sampled()).unwrap()).unwrap();
    assert_eq!(reported.recv().unwrap(), Ok(false));
}

#[test]
fn sampling_is_switched_only_once_every_thread_started_is_unsampled() {
    // A birth the scheduler is slow to run: counted as started, unsampled 200 ms later.
    *BIRTH.unborn.lock() += 1;
    let slow = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(200));
        one_born();
    });
    let started = Instant::now();
    let unborn_at_the_switch = with_sampling_switched(|| *BIRTH.unborn.lock());
    assert_eq!(unborn_at_the_switch, 0, "switched while a thread was still being born");
    assert!(started.elapsed() >= Duration::from_millis(150), "did not wait: {:?}", started.elapsed());
    slow.join().unwrap();
}
