//! jemalloc's configuration: the string memprof exports at build time, and the check, at start-up, of what
//! jemalloc really read.
//!
//! jemalloc reads its options once, before its first allocation, from (in order, later keys winning) the
//! built-in string, the exported `malloc_conf` symbol and the `MALLOC_CONF` environment variable
//! (`_RJEM_MALLOC_CONF` in prefixed builds). `prof:true` must be among them by then: it cannot be set later.
#![allow(unsafe_code)]

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
    /// [`PROFILING_CONF`]: profiling armed, sampling off until a run starts.
    pub const PROFILING: Self = Self::new(PROFILING_CONF_C);

    /// Wraps a configuration string such as `c"prof:true,prof_active:false"`.
    pub const fn new(conf: &'static CStr) -> Self {
        Self(conf.as_ptr())
    }

    /// Wraps a configuration string given as NUL-terminated bytes (`concat!("prof:true", "\0")`); in a
    /// `static`, a missing or inner NUL is a compile error.
    ///
    /// ```
    /// let conf = memprof_runtime::MallocConf::with_nul(b"prof:true\0");
    /// # drop(conf);
    /// ```
    pub const fn with_nul(bytes: &'static [u8]) -> Self {
        match CStr::from_bytes_with_nul(bytes) {
            Ok(conf) => Self::new(conf),
            Err(_) => panic!("a malloc_conf string ends with its only NUL byte"),
        }
    }
}

/// The configuration memprof needs: profiling compiled in and armed, sampling off until a run starts
/// ([`MallocConf::PROFILING`] exports it).
pub const PROFILING_CONF: &str = match PROFILING_CONF_C.to_str() {
    Ok(conf) => conf,
    Err(_) => panic!("the configuration is ASCII"),
};

/// [`PROFILING_CONF`] as jemalloc reads it.
const PROFILING_CONF_C: &std::ffi::CStr = c"prof:true,prof_active:false";

/// Makes jemalloc (memprof's [`crate::Allocator`]: tikv-jemallocator, each thread's objects counted) the
/// global allocator. Expanded by `#[memprof::main]` (unless
/// `allocator = false`) and by `memprof::allocator!()`.
///
/// ```ignore
/// memprof::__private::allocator!();
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! allocator {
    () => {
        #[global_allocator]
        static __MEMPROF_ALLOCATOR: $crate::__private::Allocator = $crate::__private::Allocator;
    };
}

/// Exports the configuration symbol jemalloc reads at start, holding `$conf` (a `MallocConf`).
///
/// Expanded in the binary crate (by `#[memprof::main]` or `memprof::malloc_conf!()`), so the symbol is
/// always linked (a static in a library that nothing references is silently dropped). The symbol is
/// `malloc_conf` where tikv-jemalloc-sys builds jemalloc unprefixed, and `_rjem_malloc_conf` on Apple,
/// Android and DragonFly, where it is prefixed.
///
/// ```ignore
/// memprof::__private::malloc_conf!(memprof::__private::MallocConf::new(c"prof:true,prof_active:false"));
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! malloc_conf {
    ($conf:expr) => {
        #[cfg_attr(
            any(target_os = "android", target_os = "dragonfly", target_vendor = "apple"),
            unsafe(export_name = "_rjem_malloc_conf")
        )]
        #[cfg_attr(
            not(any(target_os = "android", target_os = "dragonfly", target_vendor = "apple")),
            unsafe(export_name = "malloc_conf")
        )]
        // Named for the mistake that defines it twice: `memprof::malloc_conf!()` beside `#[memprof::main]`
        // without `allocator = false` (rustc's first error names this static).
        #[used]
        #[allow(non_upper_case_globals)]
        static MEMPROF_MALLOC_CONF__a_program_with_its_own_global_allocator_writes_memprof_main_allocator_EQUALS_false: $crate::__private::MallocConf = $conf;
    };
}

/// The environment variables jemalloc may read its options from: unprefixed builds', then prefixed ones'.
pub(crate) const CONFIG_VARIABLES: [&str; 2] = ["MALLOC_CONF", "_RJEM_MALLOC_CONF"];

/// jemalloc's own configuration variables, as set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct JemallocVariables {
    /// `MALLOC_CONF`.
    pub(crate) unprefixed: Option<String>,
    /// `_RJEM_MALLOC_CONF`.
    pub(crate) prefixed: Option<String>,
}

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
    /// What an operator may want to know that is not a problem: the environment overriding the sampling
    /// rate the exported `malloc_conf` asks for (jemalloc's default, 2^19, where it names none).
    pub(crate) fn notes(&self) -> Vec<String> {
        /// `LG_PROF_SAMPLE_DEFAULT` in jemalloc.
        const DEFAULT_LG_SAMPLE: &str = "19";
        let asked =
            self.exported.as_deref().map(|conf| option_value(conf, "lg_prof_sample").unwrap_or(DEFAULT_LG_SAMPLE));
        match (asked, jemalloc::lg_sample()) {
            (Some(asked), Ok(actual)) if self.profiling_enabled && asked != actual.to_string() => vec![format!(
                "Sampling every 2^{actual} bytes on average, as the environment asks (the program's malloc_conf asks for 2^{asked})"
            )],
            _ => Vec::new(),
        }
    }

    /// Reads jemalloc's configuration and explains anything that keeps memprof from working as intended
    /// (`set`: the configuration variables the environment had, for those jemalloc ignored).
    pub(crate) fn read(set: &JemallocVariables) -> Self {
        let sources = jemalloc::config_sources();
        let compiled_in = jemalloc::profiling_compiled_in();
        let profiling_enabled = compiled_in && jemalloc::profiling_enabled();
        let mut warnings = ignored_variable_warnings(sources.environment.as_deref(), |name| {
            if name == CONFIG_VARIABLES[0] { set.unprefixed.clone() } else { set.prefixed.clone() }
        });
        if !jemalloc::serves_allocations() {
            warnings.push("jemalloc does not serve this program's allocations: its #[global_allocator] is another allocator, so profiles would miss them. Make `tikv_jemallocator::Jemalloc` the global allocator, or let #[memprof::main] install it (drop `allocator = false`).".to_owned());
        }
        if !compiled_in {
            warnings.push("jemalloc was built without profiling support (config.prof is false), so heap profiling is unavailable.".to_owned());
        } else if !profiling_enabled {
            warnings.push(disabled_warning(&sources));
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
        (_, None) => format!(
            "Heap profiling is disabled: jemalloc was not asked to profile. Add `memprof::malloc_conf!();` at the crate root of the binary (beside its #[global_allocator]), which exports malloc_conf=\"{PROFILING_CONF}\"; or start the program with MALLOC_CONF={PROFILING_CONF}."
        ),
        (_, Some(exported)) => format!(
            "Heap profiling is disabled by the jemalloc configuration ({}); add `{PROFILING_CONF}` to the exported malloc_conf (now \"{exported}\").",
            describe_source(sources)
        ),
    }
}

/// The value of `key` in a configuration string (`key:value,...`), the last one if repeated (as jemalloc).
fn option_value<'a>(conf: &'a str, key: &str) -> Option<&'a str> {
    conf.rsplit(',').filter_map(|pair| pair.split_once(':')).find(|(name, _)| *name == key).map(|(_, value)| value)
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
    fn option_values_are_read_as_jemalloc_reads_them() {
        let conf = "prof:true,lg_prof_sample:19,prof_active:false,lg_prof_sample:17";
        assert_eq!(option_value(conf, "lg_prof_sample"), Some("17"));
        assert_eq!(option_value(conf, "prof"), Some("true"));
        assert_eq!(option_value(conf, "prof_accum"), None);
    }

    #[test]
    fn the_variable_jemalloc_read_is_not_reported() {
        let lookup = |name: &str| (name == "MALLOC_CONF").then(|| "prof_active:true".to_owned());
        assert!(ignored_variable_warnings(Some("prof_active:true"), lookup).is_empty());
    }
}
