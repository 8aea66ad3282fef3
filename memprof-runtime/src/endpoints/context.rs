//! What handlers work with (the profiler, the token, how they are served), and this process's one
//! context, set at start-up.

use std::sync::OnceLock;

use crate::profiler::Profiler;

/// What handlers work with.
pub(crate) struct Context {
    /// The profiler whose runs and profiles are served.
    pub(crate) profiler: &'static Profiler,
    /// The token every request must present, if any.
    pub(crate) token: Option<String>,
    /// Whether the switch variable is `true`: the endpoints mounted on the program's own server (`respond`,
    /// the axum routers) answer only then, as the built-in server is started only then.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) switched_on: bool,
    /// Held while a symbol lookup names its addresses (`/debug/pprof/symbol`): one at a time.
    pub(crate) naming: parking_lot::Mutex<()>,
    /// Whether the endpoints mounted on the program's own server said how they are served (once).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) announced: std::sync::atomic::AtomicBool,
}

impl Context {
    /// The context of this process's profiler, with `token` (none: no token asked for) and the switch.
    pub(crate) fn new(token: Option<String>, switched_on: bool) -> Context {
        Context {
            profiler: Profiler::global(),
            token,
            switched_on,
            naming: parking_lot::Mutex::new(()),
            announced: Default::default(),
        }
    }
}

/// The context of this process's endpoints, set by [`crate::start`]; a router used without `start` gets
/// the token of `MEMPROF_TOKEN` and the switch `LIBPROCESS_MEMORY_PROFILING` (never none for want of a
/// call).
static CONTEXT: OnceLock<Context> = OnceLock::new();

/// Sets the context of this process's endpoints (once, at start-up); an empty token counts as none.
pub(crate) fn set_up(token: Option<String>, switched_on: bool) -> &'static Context {
    CONTEXT.get_or_init(|| Context::new(token.filter(|token| !token.is_empty()), switched_on))
}

/// The context of this process's endpoints: [`crate::start`]'s, else one with `MEMPROF_TOKEN`'s token and
/// `LIBPROCESS_MEMORY_PROFILING`'s switch. A router mounted without [`crate::start`] (which starts the
/// memory counters' reading for everything that reads them) starts it here, for the dashboard's chart.
#[cfg(any(test, feature = "http"))]
pub(crate) fn context() -> &'static Context {
    CONTEXT.get().unwrap_or_else(|| {
        let settings = Profiler::global().settings();
        if settings.switched_on
            && CONTEXT.get().is_none()
            && let Err(error) = crate::profiler::counters::start()
        {
            crate::process::messages::warn(&format!(
                "The dashboard's memory chart stays empty: cannot start the thread that reads the memory counters ({error})"
            ));
        }
        set_up(settings.token.clone(), settings.switched_on)
    })
}
