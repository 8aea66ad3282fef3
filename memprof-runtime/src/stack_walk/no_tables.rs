//! Where the walk by unwind tables is not built (targets other than Linux on x86_64 and aarch64): it is
//! never ready, and samples are walked by frame pointers or by libgcc.

/// Why a walk by the tables could not be made.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unwalked {
    /// Never ready here.
    Unready,
}

/// Errs: no tables are indexed on this target.
pub(super) fn prepare() -> Result<(), String> {
    Err("the walk by unwind tables is built for Linux on x86_64 and aarch64".to_owned())
}

/// Errs: no tables are indexed on this target.
pub(super) fn walk(_each: impl FnMut(usize) -> bool) -> Result<(), Unwalked> {
    Err(Unwalked::Unready)
}
