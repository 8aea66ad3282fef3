//! The mark of a stack cut at the walk's limit (jemalloc keeps at most 128 frames a sample): the process
//! that takes the samples writes, as the outermost code frame, [`truncated_address`] of how many frames were
//! left out, and every reader names it `[truncated: N more frames]`, so a stack 5,000 calls deep is not read
//! as one that starts where the limit cut it. Like label frames, its addresses lie in the lower half of the
//! address space where no mapping can be.
//!
//! ```
//! use memprof_analysis::{truncated_address, truncated_name, truncated_frames};
//!
//! assert_eq!(truncated_frames(truncated_address(4_873)), Some(4_873));
//! // Readers move return addresses back by one: still the same mark.
//! assert_eq!(truncated_frames(truncated_address(4_873) - 1), Some(4_873));
//! assert_eq!(truncated_name(4_873), "[truncated: 4873 more frames]");
//! assert_eq!(truncated_name(0), "[truncated: more frames, not counted]");
//! assert_eq!(truncated_name(memprof_analysis::MOST_COUNTED), "[truncated: 65535 or more frames]");
//! ```

/// Where truncation marks start: `TRUNC\0` in ASCII, apart from label frames ([`crate::LABEL_ADDRESS_BASE`]).
pub const TRUNCATED_ADDRESS_BASE: u64 = 0x5452_554e_4300_0000;

/// The most frames left out a mark counts: a walk stops counting there (a sample in a recursion 100,000
/// calls deep should not pay to walk it all), and the mark says "or more".
pub const MOST_COUNTED: u32 = 65_535;

/// Marks are spaced by 16, as label frames are, so that an address moved back still names its count.
const SPACING_BITS: u32 = 4;

/// The mark of a stack cut with `cut` frames left out (0: not counted, as when jemalloc's own walk filled
/// the buffer).
pub fn truncated_address(cut: u32) -> u64 {
    TRUNCATED_ADDRESS_BASE + ((u64::from(cut) + 1) << SPACING_BITS)
}

/// How many frames the mark at `address` says were left out (0: not counted), if it is one.
pub fn truncated_frames(address: u64) -> Option<u32> {
    let offset = address.checked_sub(TRUNCATED_ADDRESS_BASE)?;
    let step = (offset + (1 << SPACING_BITS) - 1) >> SPACING_BITS;
    u32::try_from(step.checked_sub(1)?).ok()
}

/// The name readers give the mark of `cut` frames left out.
pub fn truncated_name(cut: u32) -> String {
    if cut == 0 {
        "[truncated: more frames, not counted]".to_owned()
    } else if cut >= MOST_COUNTED {
        format!("[truncated: {MOST_COUNTED} or more frames]")
    } else {
        format!("[truncated: {cut} more frames]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_neither_code_nor_labels() {
        assert_eq!(truncated_frames(0x5555_0000_1000), None);
        assert_eq!(truncated_frames(crate::label_address(3)), None);
        assert_eq!(crate::label_id(truncated_address(3)), None);
        assert_eq!(truncated_frames(truncated_address(u32::MAX)), Some(u32::MAX));
        assert_eq!(truncated_frames(truncated_address(0)), Some(0));
    }
}
