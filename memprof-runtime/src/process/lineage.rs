//! The process memprof belongs to. A child of `fork` inherits memprof's memory (the runs' books, their locks
//! as they stood at the fork, the profile directory's name, the signal handlers) but none of its threads:
//! it must never shut down, delete, dump into or wait for what is its parent's. The ways in from the
//! program's code (`shutdown` and the guard, `Run`, `scope!`, `Profile::latest`) and from a mounted route ask
//! [`forked_child`] first, and do nothing there (or say why), so a child that returns from `main` ends as it
//! would without memprof. Sampling itself goes on in the child: jemalloc and the record of samples take
//! their locks around `fork`.

use std::sync::atomic::{AtomicU32, Ordering};

/// The process that made memprof's profiler; 0 before it is made.
static OWNER: AtomicU32 = AtomicU32::new(0);

/// Makes this process memprof's owner, unless one already is: called as the profiler is made.
pub(crate) fn own() {
    let _ = OWNER.compare_exchange(0, std::process::id(), Ordering::AcqRel, Ordering::Acquire);
}

/// The owner's process id, when this process is a child forked from it (after memprof was set up there).
pub(crate) fn forked_from() -> Option<u32> {
    let owner = OWNER.load(Ordering::Acquire);
    (owner != 0 && owner != std::process::id()).then_some(owner)
}

/// Whether this process is a child forked from the one memprof belongs to.
pub(crate) fn forked_child() -> bool {
    forked_from().is_some()
}

/// What a forked child answers when asked to profile, dump or serve: why nothing is done here.
pub(crate) fn refusal(owner: u32) -> String {
    format!(
        "This process ({}) is a child forked from process {owner}, which memprof profiles: nothing is profiled, dumped or removed here (exec a program of its own to profile it)",
        std::process::id()
    )
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    /// The process that made the profiler owns memprof; a child forked from it does not, and says whose
    /// memprof it is. The child reports through its exit status (it may not run the test harness).
    #[test]
    fn a_forked_child_knows_memprof_is_its_parents() {
        super::own();
        assert!(!super::forked_child());
        let parent = std::process::id();
        // SAFETY: the child only reads two atomics, calls getpid, formats a string and `_exit`s.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let told = super::refusal(parent).contains(&format!("forked from process {parent}"));
            let code = if super::forked_from() == Some(parent) && told { 0 } else { 1 };
            // SAFETY: ends the child at once, without the harness's exit handlers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child said {status}");
    }
}
