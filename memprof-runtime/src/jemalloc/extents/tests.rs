//! The range table, the hooks and the watch of new arenas, on this process.
use super::*;

fn set<const N: usize>(ranges: &[(usize, usize)]) -> RangeSet<N> {
    let mut set = RangeSet::new();
    for &(start, end) in ranges {
        set.insert(start, end);
    }
    set
}

#[test]
fn insertion_merges_overlapping_and_touching_ranges_and_keeps_order() {
    let mut set = set::<8>(&[(100, 200), (300, 400), (0, 10)]);
    assert_eq!(set.as_slice(), [(0, 10), (100, 200), (300, 400)]);
    set.insert(200, 250);
    assert_eq!(set.as_slice(), [(0, 10), (100, 250), (300, 400)]);
    set.insert(150, 350);
    assert_eq!(set.as_slice(), [(0, 10), (100, 400)]);
    set.insert(5, 500);
    assert_eq!(set.as_slice(), [(0, 500)]);
    set.insert(7, 7);
    assert_eq!(set.as_slice(), [(0, 500)]);
}

#[test]
fn removal_cuts_splits_and_drops_ranges() {
    let mut set = set::<8>(&[(0, 100), (200, 300), (400, 500)]);
    set.remove(50, 60);
    assert_eq!(set.as_slice(), [(0, 50), (60, 100), (200, 300), (400, 500)]);
    set.remove(80, 450);
    assert_eq!(set.as_slice(), [(0, 50), (60, 80), (450, 500)]);
    set.remove(0, 1000);
    assert_eq!(set.as_slice(), []);
    set.remove(10, 20);
    assert!(!set.overflowed);
}

#[test]
fn a_full_table_says_so_instead_of_losing_order() {
    let mut set = set::<2>(&[(0, 10), (20, 30)]);
    set.insert(40, 50);
    assert!(set.overflowed);
    assert_eq!(set.as_slice(), [(0, 10), (20, 30)]);
    set.insert(10, 20);
    assert_eq!(set.as_slice(), [(0, 30)]);
    let mut full = self::set::<2>(&[(0, 100), (200, 300)]);
    full.remove(40, 50);
    assert_eq!(full.as_slice(), [(0, 100), (200, 300)]);
}

/// Installs the hooks and starts the watch, once for the test binary.
fn installed() {
    static WATCHING: OnceLock<()> = OnceLock::new();
    WATCHING.get_or_init(|| {
        assert!(super::install_range_hooks());
        crate::jemalloc::arena::own_arena();
        std::thread::spawn(|| {
            let mut watch = ArenaWatch::begin().expect("the hooks are installed");
            loop {
                let mut wait =
                    [rustix::event::PollFd::from_borrowed_fd(watch.announcements(), rustix::event::PollFlags::IN)];
                let _ = rustix::event::poll(&mut wait, None);
                watch.answer();
            }
        });
        while ARENAS_MADE.watching_process.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
    });
}

#[test]
fn installed_hooks_record_what_jemalloc_maps() {
    installed();
    // Larger than anything this test binary frees, so jemalloc maps it anew (through the hooks) instead
    // of reusing address space it kept from before the installation. Never touched: no memory is used.
    let block = std::hint::black_box(Vec::<u8>::with_capacity(512 << 20));
    let (start, end) = (block.as_ptr() as usize, block.as_ptr() as usize + block.capacity());
    assert!(ranges().complete);
    assert!(
        ranges().ranges.iter().any(|&(from, to)| from <= start && end <= to),
        "{start:#x} in {:x?}",
        ranges().ranges
    );
}

#[test]
fn a_child_of_fork_makes_arenas_without_waiting_for_a_watch_it_has_not() {
    installed();
    // SAFETY: the child only spawns threads that allocate, joins them and leaves with `_exit`.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let threads: Vec<_> =
            (0..32).map(|_| std::thread::spawn(|| std::hint::black_box(vec![1u8; 1 << 20]).len())).collect();
        let sum: usize = threads.into_iter().map(|thread| thread.join().unwrap_or(0)).sum();
        // SAFETY: ends the child at once, as a child of fork should.
        unsafe { libc::_exit(if sum == 32 << 20 { 0 } else { 1 }) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut status = 0;
    // SAFETY: waits for this test's own child, without blocking.
    while unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == 0 {
        if std::time::Instant::now() > deadline {
            // SAFETY: the test's own child.
            unsafe { libc::kill(child, libc::SIGKILL) };
            panic!("the child of fork hung making arenas");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
}
