//! Whether jemalloc samples from start-up, told from where it read its options, without asking it: the
//! first `mallctl` of a process makes jemalloc's control table (some 42 page faults and 0.4 MB, see
//! BENCHMARKS.md "Switched off: a command-line tool"), which a program that asks nothing of memprof need
//! never pay. Reading ([`sampling_off_at_start`]: the exported `malloc_conf` symbol, `/etc/malloc.conf`'s
//! link, `MALLOC_CONF`, the `malloc_conf_2_conf_harder` symbol, in jemalloc's order; no allocation) is kept
//! apart from judging ([`judged_off`], pure).

use std::ffi::{CStr, c_char};

unsafe extern "C" {
    /// jemalloc's exported configuration string (memprof's, or a program's own): defined weak by jemalloc
    /// itself, so it always links; null where nobody set it.
    #[link_name = "malloc_conf"]
    static GLOBAL_CONF: *const c_char;
    /// The configuration string jemalloc reads after every other (weak, like `malloc_conf`).
    #[link_name = "malloc_conf_2_conf_harder"]
    static LAST_CONF: *const c_char;
}

/// Whether jemalloc's own sources leave sampling off at start-up (`prof:false` or `prof_active:false` the
/// last said of either): then nothing can be sampled until someone switches sampling on, and memprof needs
/// no `mallctl` to start unsampled. `false` where they do not say so, or cannot be read (jemalloc is then
/// asked).
#[inline]
pub(crate) fn sampling_off_at_start() -> bool {
    // SAFETY: both are C string pointers jemalloc reads at its start and never writes after; null or a
    // NUL-terminated string.
    let (global, last) = unsafe { (GLOBAL_CONF, LAST_CONF) };
    let mut link = [0u8; 256];
    // SAFETY: `link` is writable for its length; readlink writes at most that and does not NUL-terminate.
    let linked = unsafe { libc::readlink(c"/etc/malloc.conf".as_ptr(), link.as_mut_ptr().cast(), link.len()) };
    let linked = usize::try_from(linked).ok().filter(|&length| length < link.len()).map(|length| &link[..length]);
    // SAFETY: getenv returns null or a NUL-terminated string; memprof sets no environment variable, so it
    // stays valid while read here.
    let environment = unsafe { libc::getenv(c"MALLOC_CONF".as_ptr()) };
    let bytes = |pointer: *const c_char| {
        // SAFETY: as above, null or a NUL-terminated string that outlives this call.
        (!pointer.is_null()).then(|| unsafe { CStr::from_ptr(pointer) }.to_bytes())
    };
    judged_off(&[bytes(global), linked, bytes(environment), bytes(last)])
}

/// Whether `sources` (jemalloc's option strings in the order it reads them, later keys winning; the
/// built-in string, read first, unknown here) leave sampling off: the last valid `prof` is `false`, or the
/// last valid `prof_active` is. A value jemalloc would refuse (neither `true` nor `false`) changes nothing,
/// as it is ignored there.
fn judged_off(sources: &[Option<&[u8]>]) -> bool {
    let (mut prof, mut active) = (None, None);
    for pair in sources.iter().flatten().flat_map(|source| source.split(|&byte| byte == b',')) {
        let Some(colon) = pair.iter().position(|&byte| byte == b':') else { continue };
        let value = match &pair[colon + 1..] {
            b"true" => true,
            b"false" => false,
            _ => continue,
        };
        match &pair[..colon] {
            b"prof" => prof = Some(value),
            b"prof_active" => active = Some(value),
            _ => {}
        }
    }
    prof == Some(false) || active == Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_is_off_only_where_a_source_says_so_last() {
        let memprofs: &[u8] = b"prof:true,prof_active:false,lg_prof_sample:19";
        assert!(judged_off(&[Some(memprofs), None, None, None]), "memprof's own string");
        assert!(!judged_off(&[Some(memprofs), None, Some(b"prof_active:true"), None]), "MALLOC_CONF wins");
        assert!(judged_off(&[Some(memprofs), Some(b"prof:false"), Some(b"prof_active:true"), None]));
        assert!(!judged_off(&[Some(b"prof:true"), None, None, None]), "prof_active's default is true");
        assert!(!judged_off(&[None, None, None, None]), "the built-in string is unknown here");
        assert!(judged_off(&[Some(memprofs), None, Some(b"prof_active:yes"), None]), "a refused value is ignored");
        assert!(!judged_off(&[Some(memprofs), None, None, Some(b"prof_active:true")]), "read last, wins");
        assert!(judged_off(&[Some(b"prof:true,,prof_active:false,junk"), None, None, None]));
    }
}
