//! Compiled out: labels that cost nothing.

/// Compiled out: as many as compiled in, for code that reads it.
pub const MAX_LABEL_SETS: u32 = 1024;

/// Compiled out: runs `body` (inlined, it leaves no symbol of memprof behind).
///
/// ```
/// assert_eq!(memprof::labels::with(&[("tenant", "acme")], || 7), 7);
/// ```
#[inline(always)]
pub fn with<R>(_labels: &[(&str, &str)], body: impl FnOnce() -> R) -> R {
    body()
}

/// Compiled out: a guard of no size.
///
/// ```
/// let _labels = memprof::labels::enter(&[("route", "/sessions")]);
/// ```
#[must_use = "the labels end when the guard is dropped"]
pub fn enter(_labels: &[(&str, &str)]) -> Entered {
    Entered { _not_send: std::marker::PhantomData }
}

/// Compiled out: labels of no size.
///
/// ```
/// let acme = memprof::labels::Labels::new(&[("tenant", "acme")]);
/// assert_eq!(acme.with(|| 7), 7);
/// ```
#[derive(Debug, Clone)]
pub struct Labels;

impl Labels {
    /// Compiled out: nothing to intern.
    pub fn new(_labels: &[(&str, &str)]) -> Self {
        Self
    }

    /// Compiled out: a guard of no size.
    #[must_use = "the labels end when the guard is dropped"]
    pub fn enter(&self) -> Entered {
        Entered { _not_send: std::marker::PhantomData }
    }

    /// Compiled out: runs `body` (inlined).
    #[inline(always)]
    pub fn with<R>(&self, body: impl FnOnce() -> R) -> R {
        body()
    }
}

/// Compiled out: nothing to restore.
#[derive(Debug)]
pub struct Entered {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Compiled out: the future itself.
pub type Labelled<F> = F;

/// Compiled out: `with_labels` returns the future unchanged.
///
/// ```
/// use memprof::labels::WithLabels;
/// let task = async { 7 }.with_labels(&[("tenant", "acme")]);
/// # drop(task);
/// ```
pub trait WithLabels: std::future::Future + Sized {
    /// The future itself.
    fn with_labels(self, _labels: &[(&str, &str)]) -> Labelled<Self> {
        self
    }
}

impl<F: std::future::Future> WithLabels for F {}

/// Compiled out: a `tracing_subscriber` layer that does nothing.
#[cfg(feature = "tracing")]
#[derive(Debug, Clone, Default)]
pub struct LabelLayer;

#[cfg(feature = "tracing")]
impl LabelLayer {
    /// Compiled out: nothing to label.
    pub fn new() -> Self {
        Self
    }

    /// Compiled out: nothing to label.
    pub fn with_fields(_fields: impl IntoIterator<Item = &'static str>) -> Self {
        Self
    }
}

#[cfg(feature = "tracing")]
impl<S: tracing_core::Subscriber> tracing_subscriber::Layer<S> for LabelLayer {}
