//! jemalloc's configuration: the string memprof exports at build time, and the check, at start-up, of what
//! jemalloc really read.
//!
//! jemalloc reads its options once, before its first allocation, from (in order, later keys winning) the
//! built-in string, the exported `malloc_conf` symbol and the `MALLOC_CONF` environment variable
//! (`_RJEM_MALLOC_CONF` in prefixed builds). `prof:true` must be among them by then: it cannot be set later.

use std::ffi::{CStr, c_char};

use crate::jemalloc;

/// The value of the exported `malloc_conf` symbol: a C string pointer, exactly as jemalloc declares it
/// (`const char *malloc_conf`). A `&[u8]` would be a fat pointer and jemalloc would read garbage.
///
/// ```
/// use std::ffi::c_char;
/// let conf = memprof_runtime::MallocConf::new(c"prof:true,prof_active:false");
/// assert_eq!(std::mem::size_of_val(&conf), std::mem::size_of::<*const c_char>());
/// ```
#[repr(transparent)]
#[derive(Debug)]
pub struct MallocConf(*const c_char);

// SAFETY: the pointer refers to a `'static` C string that is never written.
unsafe impl Sync for MallocConf {}

impl MallocConf {
    /// Wraps a configuration string such as `c"prof:true,prof_active:false"`.
    pub const fn new(conf: &'static CStr) -> Self {
        Self(conf.as_ptr())
    }
}

/// Installs jemalloc as the global allocator and exports the configuration symbol jemalloc reads at start.
///
/// Expanded once, in the binary crate, by `#[memprof::main]`, so the symbol is always linked (a static in a
/// library that nothing references is silently dropped). The symbol is `malloc_conf` where
/// tikv-jemalloc-sys builds jemalloc unprefixed, and `_rjem_malloc_conf` on Apple, Android and DragonFly,
/// where it is prefixed.
///
/// ```ignore
/// memprof::__private::install!(c"prof:true,prof_active:false,lg_prof_sample:19");
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! __install {
    ($conf:literal) => {
        #[global_allocator]
        static __MEMPROF_ALLOCATOR: $crate::__private::Jemalloc = $crate::__private::Jemalloc;

        #[cfg_attr(
            any(target_os = "android", target_os = "dragonfly", target_vendor = "apple"),
            unsafe(export_name = "_rjem_malloc_conf")
        )]
        #[cfg_attr(
            not(any(target_os = "android", target_os = "dragonfly", target_vendor = "apple")),
            unsafe(export_name = "malloc_conf")
        )]
        #[used]
        static __MEMPROF_MALLOC_CONF: $crate::__private::MallocConf = $crate::__private::MallocConf::new($conf);
    };
}

/// The environment variables jemalloc may read its options from, the one this build reads first.
const CONFIG_VARIABLES: [&str; 2] = ["MALLOC_CONF", "_RJEM_MALLOC_CONF"];

/// What the process's jemalloc configuration means for profiling, read once at start.
#[derive(Debug, Clone)]
pub(crate) struct ConfigReport {
    /// The environment string jemalloc read (`opt.malloc_conf.env_var`).
    pub(crate) environment: Option<String>,
    /// The exported symbol jemalloc read (`opt.malloc_conf.global_var`): memprof's own string.
    pub(crate) exported: Option<String>,
    /// The string built into jemalloc (`config.malloc_conf`).
    pub(crate) built_in: Option<String>,
    /// `opt.prof`: runs can be started.
    pub(crate) profiling_enabled: bool,
    /// Problems an operator should know about, each a complete sentence.
    pub(crate) warnings: Vec<String>,
}

impl ConfigReport {
    /// Reads jemalloc's configuration and explains anything that keeps memprof from working as intended.
    pub(crate) fn read() -> Self {
        let sources = jemalloc::config_sources();
        let compiled_in = jemalloc::profiling_compiled_in();
        let profiling_enabled = compiled_in && jemalloc::profiling_enabled();
        let started_externally = profiling_enabled && jemalloc::profiling_active_at_start();
        let mut warnings = ignored_variable_warnings(sources.environment.as_deref(), |name| std::env::var(name).ok());
        if !compiled_in {
            warnings.push("jemalloc was built without profiling support (config.prof is false), so heap profiling is unavailable.".to_owned());
        } else if !profiling_enabled {
            warnings.push(disabled_warning(&sources));
        } else if started_externally {
            warnings.push(format!(
                "Heap profiling was switched on at start-up by the jemalloc configuration ({}); memprof will not start or stop runs over it.",
                describe_source(&sources)
            ));
        }
        Self {
            environment: sources.environment,
            exported: sources.global,
            built_in: sources.built_in,
            profiling_enabled,
            warnings,
        }
    }
}

/// Explains why `opt.prof` is false.
fn disabled_warning(sources: &jemalloc::ConfigSources) -> String {
    match (&sources.environment, &sources.global) {
        (Some(environment), _) if environment.contains("prof:false") => format!(
            "Heap profiling is disabled by the environment (MALLOC_CONF=\"{environment}\"); remove `prof:false` to enable it."
        ),
        (_, None) => "Heap profiling is disabled: memprof's malloc_conf symbol was not linked into this binary; put #[memprof::main] on its fn main.".to_owned(),
        _ => format!(
            "Heap profiling is disabled by the jemalloc configuration ({}).",
            describe_source(sources)
        ),
    }
}

/// Names the configuration strings that are set, for a message.
fn describe_source(sources: &jemalloc::ConfigSources) -> String {
    let named = [
        ("environment", &sources.environment),
        ("malloc_conf symbol", &sources.global),
        ("built-in", &sources.built_in),
    ];
    let parts: Vec<String> =
        named.iter().filter_map(|(name, value)| value.as_ref().map(|value| format!("{name}: \"{value}\""))).collect();
    parts.join(", ")
}

/// Warns about each configuration variable that is set but was not read by this build of jemalloc.
///
/// ```text
/// MALLOC_CONF="prof:false" is set but ignored: this jemalloc build reads _RJEM_MALLOC_CONF.
/// ```
fn ignored_variable_warnings(read_by_jemalloc: Option<&str>, lookup: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let reads = if cfg!(any(target_os = "android", target_os = "dragonfly", target_vendor = "apple")) {
        CONFIG_VARIABLES[1]
    } else {
        CONFIG_VARIABLES[0]
    };
    CONFIG_VARIABLES
        .iter()
        .filter_map(|&name| {
            let value = lookup(name)?;
            let was_read = name == reads && read_by_jemalloc == Some(value.as_str());
            (!was_read).then(|| format!("{name}=\"{value}\" is set but ignored: this jemalloc build reads {reads}."))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_jemalloc_did_not_read_is_reported() {
        let lookup = |name: &str| (name == "_RJEM_MALLOC_CONF").then(|| "prof:false".to_owned());
        let warnings = ignored_variable_warnings(None, lookup);
        assert_eq!(
            warnings,
            ["_RJEM_MALLOC_CONF=\"prof:false\" is set but ignored: this jemalloc build reads MALLOC_CONF."]
        );
    }

    #[test]
    fn the_variable_jemalloc_read_is_not_reported() {
        let lookup = |name: &str| (name == "MALLOC_CONF").then(|| "prof_active:true".to_owned());
        assert!(ignored_variable_warnings(Some("prof_active:true"), lookup).is_empty());
    }
}
