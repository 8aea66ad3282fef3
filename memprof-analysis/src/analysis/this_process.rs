//! Function names of this very process's addresses, as pprof's symbol service answers them.

use super::Binaries;
use super::build::is_plumbing;
use super::symbolized::Symbolized;

/// The function at each of `addresses` of this process (the innermost inlined one, allocator frames
/// skipped), as pprof's symbol service answers; `None` where nothing is known.
///
/// ```
/// let here = memprof_analysis::function_names_in_this_process as *const () as usize as u64;
/// let names = memprof_analysis::function_names_in_this_process(&[here, 0]).unwrap();
/// assert_eq!(names.len(), 2);
/// assert_eq!(names[1], None);
/// ```
pub fn function_names_in_this_process(addresses: &[u64]) -> Result<Vec<Option<String>>, String> {
    let maps =
        std::fs::read_to_string("/proc/self/maps").map_err(|error| format!("Cannot read /proc/self/maps ({error})"))?;
    let mappings = crate::heap_profile::parse_maps(&maps).map_err(|error| format!("/proc/self/maps {error}"))?;
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
