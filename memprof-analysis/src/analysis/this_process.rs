//! Function names of this very process's addresses, as pprof's symbol service answers them.

use super::binaries::Binaries;
use super::build::is_plumbing;
use super::symbolized::Symbolized;

/// The function at each of `addresses` of this process (the innermost inlined one, allocator frames
/// skipped), as pprof's symbol service answers; `None` where nothing is known. The error is reading or
/// understanding `/proc/self/maps`.
///
/// ```
/// let here = memprof_analysis::function_names_in_this_process as *const () as usize as u64;
/// let names = memprof_analysis::function_names_in_this_process(&[here, 0]).unwrap();
/// assert_eq!(names.len(), 2);
/// assert_eq!(names[1], None);
/// ```
pub fn function_names_in_this_process(addresses: &[u64]) -> std::io::Result<Vec<Option<String>>> {
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mappings = crate::heap_profile::parse_maps(&maps)
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not understood: {error}")))?;
    // Each address taken as it is, not moved back as a return address.
    let symbolized = Symbolized::new(addresses.iter().copied(), &mappings, &Binaries::as_mapped());
    let name = |address: &u64| {
        let module = symbolized.module_of[address]?;
        if !symbolized.modules[module].has_functions {
            return None;
        }
        let frames = &symbolized.frames[address];
        let frame = frames.iter().find(|frame| !is_plumbing(frame)).or(frames.first())?;
        Some(frame.function.to_string())
    };
    Ok(addresses.iter().map(name).collect())
}

/// Forgets the names of addresses resolved so far (in this process and of binaries analyzed from files):
/// a service that symbolizes now and then need not keep them between times. The next lookup reads the
/// binary again (some milliseconds), and the same names come back.
///
/// ```
/// let here = memprof_analysis::forget_cached_symbols as *const () as usize as u64;
/// let before = memprof_analysis::function_names_in_this_process(&[here]).unwrap();
/// memprof_analysis::forget_cached_symbols();
/// assert_eq!(memprof_analysis::function_names_in_this_process(&[here]).unwrap(), before);
/// ```
pub fn forget_cached_symbols() {
    super::symbolizer::forget_cached();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_frame_or_an_unmapped_address_has_no_name() {
        let label = crate::labels::label_address(1);
        assert_eq!(function_names_in_this_process(&[label, 0]).unwrap(), [None, None]);
        let here = function_names_in_this_process as *const () as usize as u64;
        let named = function_names_in_this_process(&[here]).unwrap();
        assert!(named[0].as_deref().is_some_and(|name| name.ends_with("function_names_in_this_process")), "{named:?}");
    }
}
