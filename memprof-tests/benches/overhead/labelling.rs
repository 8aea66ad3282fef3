//! How the overhead benchmark's labelled configurations wrap each operation in `memprof::labels`.

use super::workloads;

/// How each operation is labelled.
#[derive(Clone, Copy)]
pub(super) enum Labelling {
    None,
    /// `memprof::labels::with(&[("tenant", ..)], ..)`: the labels hashed and looked up at each entry.
    ByValue,
    /// `memprof::labels::Labels` made once per tenant, entered per operation.
    MadeOnce,
    /// The same, always for one tenant: the label's own price, without the stacks a label multiplies
    /// (jemalloc keeps each labelled stack once per label set).
    MadeOnceOneTenant,
}

impl Labelling {
    pub(super) fn name(self) -> &'static str {
        match self {
            Labelling::None => "none",
            Labelling::ByValue => "by-value",
            Labelling::MadeOnce => "made-once",
            Labelling::MadeOnceOneTenant => "made-once-one-tenant",
        }
    }
}

/// The tenants operations are labelled with, in turn.
const TENANTS: [&str; 4] = ["acme", "initech", "globex", "umbrella"];

/// Each operation inside `memprof::labels::with`, for one of four tenants in turn: a label per request.
pub(super) struct ByValue;

impl workloads::Around for ByValue {
    #[inline(always)]
    fn run<F: FnMut()>(&self, number: u64, operation: &mut F) {
        memprof::labels::with(&[("tenant", TENANTS[number as usize % 4])], operation);
    }
}

/// Each operation inside one of the first `N` tenants' `memprof::labels::Labels`, made once, in turn (`N`
/// a constant, so that choosing one costs what it costs unlabelled: a mask, not a division).
pub(super) struct MadeOnce<const N: usize>([memprof::labels::Labels; N]);

impl<const N: usize> MadeOnce<N> {
    pub(super) fn new() -> Self {
        Self(std::array::from_fn(|tenant| memprof::labels::Labels::new(&[("tenant", TENANTS[tenant])])))
    }
}

impl<const N: usize> workloads::Around for MadeOnce<N> {
    #[inline(always)]
    fn run<F: FnMut()>(&self, number: u64, operation: &mut F) {
        self.0[number as usize % N].with(operation);
    }
}
