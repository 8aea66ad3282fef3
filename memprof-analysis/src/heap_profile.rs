//! jemalloc's heap profile format (`prof.dump`, `heap_v2`), parsed: tolerant of what real dumps contain
//! (per-thread lines, thread names, blank lines), strict about what is malformed, with the line number.
//!
//! ```text
//! heap_v2/524288
//!   t*: 48: 2671886 [0: 0]
//!   t5: 48: 2671886 [0: 0]
//! @ 0x558829eb5b12 0x558829eb5bf0 ...
//!   t*: 9: 295003 [0: 0]
//!
//! MAPPED_LIBRARIES:
//! 5588297cb000-558829898000 r--p 00000000 fe:00 5309295   /path/to/binary
//! ```

use std::fmt;

/// A parsed heap profile.
///
/// ```
/// let text = "heap_v2/524288\n  t*: 1: 65536 [0: 0]\n@ 0x10 0x20\n  t*: 1: 65536 [0: 0]\n\nMAPPED_LIBRARIES:\n";
/// let profile = memprof_analysis::HeapProfile::parse(text)?;
/// assert_eq!(profile.sample_period, 524288);
/// assert_eq!(profile.stacks[0].addresses, [0x10, 0x20]);
/// assert_eq!(profile.stacks[0].bytes, 65536);
/// # Ok::<(), memprof_analysis::ParseError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct HeapProfile {
    /// Mean bytes between samples (`2^lg_prof_sample`).
    pub sample_period: u64,
    /// The live sampled objects and bytes of the whole heap, as written (biased for jeprof).
    pub total: Counts,
    /// What the whole program allocated since start-up; zero unless jemalloc keeps the totals
    /// (`prof_accum:true`).
    pub total_allocated: Counts,
    /// Each allocation stack with its live counts, in file order.
    pub stacks: Vec<Stack>,
    /// The process's memory map at dump time (`MAPPED_LIBRARIES:`).
    pub mappings: Vec<Mapping>,
}

/// Sampled objects and bytes as jemalloc writes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Sampled objects.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Counts {
    /// The estimated real objects and bytes behind the samples, unbiased the way jeprof and pprof do:
    /// `scale = 1 / (1 - exp(-(bytes / objects) / period))`.
    ///
    /// ```
    /// let counts = memprof_analysis::Counts { objects: 1, bytes: 524288 };
    /// let (objects, bytes) = counts.unbiased(524288);
    /// assert!((objects - 1.582).abs() < 0.001 && (bytes - 829_440.0).abs() < 100.0);
    /// ```
    pub fn unbiased(&self, sample_period: u64) -> (f64, f64) {
        let (objects, bytes) = (self.objects as f64, self.bytes as f64);
        if self.objects == 0 || self.bytes == 0 || sample_period <= 1 {
            return (objects, bytes);
        }
        let scale = 1.0 / (1.0 - (-(bytes / objects) / sample_period as f64).exp());
        (objects * scale, bytes * scale)
    }
}

/// One allocation stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    /// Program counters, the allocation site's first; all but the first are return addresses.
    pub addresses: Vec<u64>,
    /// Live objects of this stack, as written.
    pub objects: u64,
    /// Live bytes of this stack, as written.
    pub bytes: u64,
    /// Everything this stack allocated since start-up, freed or not (`[cum_objs: cum_bytes]`); zero
    /// unless jemalloc keeps the totals (`prof_accum:true`).
    pub allocated: Counts,
}

impl Stack {
    /// The estimated real live objects and bytes behind the samples (see [`Counts::unbiased`]).
    ///
    /// ```
    /// use memprof_analysis::{Counts, Stack};
    /// let stack = Stack { addresses: vec![0x10], objects: 1, bytes: 524288, allocated: Counts::default() };
    /// let (objects, bytes) = stack.unbiased(524288);
    /// assert!((objects - 1.582).abs() < 0.001 && (bytes - 829_440.0).abs() < 100.0);
    /// ```
    pub fn unbiased(&self, sample_period: u64) -> (f64, f64) {
        Counts { objects: self.objects, bytes: self.bytes }.unbiased(sample_period)
    }
}

/// One line of the memory map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of `start`.
    pub file_offset: u64,
    /// Whether the pages are executable.
    pub executable: bool,
    /// The mapped file, if any (`[heap]`, `[stack]` and the like are kept as written).
    pub path: Option<String>,
}

/// A malformed file memprof reads (a heap profile, a label table): the line (from 1) and what is wrong
/// with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The line, counted from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

impl HeapProfile {
    /// Parses a whole dump.
    pub fn parse(text: &str) -> Result<HeapProfile, ParseError> {
        let mut lines = text.lines().enumerate().map(|(index, line)| (index + 1, line));
        let (_, header) = lines.next().ok_or_else(|| error(1, "the profile is empty"))?;
        let sample_period = header
            .strip_prefix("heap_v2/")
            .ok_or_else(|| error(1, format!("expected a `heap_v2/<sample period>` header, found {header:?}")))?;
        let sample_period = number(sample_period, 10, 1, "sample period")?;
        let mut profile = HeapProfile {
            sample_period,
            total: Counts::default(),
            total_allocated: Counts::default(),
            stacks: Vec::new(),
            mappings: Vec::new(),
        };
        let mut awaiting_counts: Option<usize> = None;
        let mut in_maps = false;
        for (line_number, line) in lines {
            if in_maps {
                if !line.trim().is_empty() {
                    profile.mappings.push(mapping(line, line_number)?);
                }
                continue;
            }
            let trimmed = line.trim();
            if let Some(addresses) = trimmed.strip_prefix("@") {
                if let Some(stack_line) = awaiting_counts {
                    return Err(error(stack_line, "this stack has no `t*:` line of counts"));
                }
                let addresses = addresses
                    .split_whitespace()
                    .map(|address| {
                        let digits = address.strip_prefix("0x").ok_or_else(|| {
                            error(line_number, format!("expected a 0x-prefixed address, found {address:?}"))
                        })?;
                        number(digits, 16, line_number, "address")
                    })
                    .collect::<Result<Vec<u64>, ParseError>>()?;
                if addresses.is_empty() {
                    return Err(error(line_number, "a stack line with no addresses"));
                }
                profile.stacks.push(Stack { addresses, objects: 0, bytes: 0, allocated: Counts::default() });
                awaiting_counts = Some(line_number);
            } else if let Some(counts) = trimmed.strip_prefix("t*:") {
                let (counts, allocated) = self::counts(counts, line_number)?;
                match (awaiting_counts.take(), profile.stacks.last_mut()) {
                    (Some(_), Some(stack)) => {
                        (stack.objects, stack.bytes, stack.allocated) = (counts.objects, counts.bytes, allocated)
                    }
                    (None, None) => (profile.total, profile.total_allocated) = (counts, allocated),
                    _ => return Err(error(line_number, "a second `t*:` line for the same stack")),
                }
            } else if trimmed.starts_with('t') && trimmed.contains(':') {
                // Per-thread counts: the `t*` line already sums them.
                counts(trimmed.split_once(':').map_or("", |(_, rest)| rest), line_number)?;
            } else if trimmed == "MAPPED_LIBRARIES:" {
                in_maps = true;
            } else if !trimmed.is_empty() {
                return Err(error(line_number, format!("unexpected line {trimmed:?}")));
            }
        }
        if let Some(stack_line) = awaiting_counts {
            return Err(error(stack_line, "this stack has no `t*:` line of counts"));
        }
        if !in_maps {
            return Err(error(text.lines().count(), "the profile ends before `MAPPED_LIBRARIES:`; it is truncated"));
        }
        Ok(profile)
    }
}

fn error(line: usize, message: impl Into<String>) -> ParseError {
    ParseError { line, message: message.into() }
}

fn number(text: &str, radix: u32, line: usize, what: &str) -> Result<u64, ParseError> {
    u64::from_str_radix(text.trim(), radix).map_err(|_| error(line, format!("invalid {what} {text:?}")))
}

/// ` <objects>: <bytes> [<cumulative objects>: <cumulative bytes>] [thread name]`: the live counts, and
/// the cumulative ones (zero when absent).
fn counts(text: &str, line: usize) -> Result<(Counts, Counts), ParseError> {
    let (objects, rest) = text
        .split_once(':')
        .ok_or_else(|| error(line, format!("expected `<objects>: <bytes> [..]`, found {text:?}")))?;
    let bytes = rest.split_whitespace().next().unwrap_or("");
    let live =
        Counts { objects: number(objects, 10, line, "object count")?, bytes: number(bytes, 10, line, "byte count")? };
    let cumulative = match rest.split_once('[').and_then(|(_, bracket)| bracket.split_once(']')) {
        Some((pair, _)) => {
            let (objects, bytes) = pair
                .split_once(':')
                .ok_or_else(|| error(line, format!("expected `[<objects>: <bytes>]`, found {pair:?}")))?;
            Counts {
                objects: number(objects, 10, line, "cumulative object count")?,
                bytes: number(bytes, 10, line, "cumulative byte count")?,
            }
        }
        None => Counts::default(),
    };
    Ok((live, cumulative))
}

/// A memory map in the format of `/proc/<pid>/maps` (as in the dump's `MAPPED_LIBRARIES:` section).
pub(crate) fn parse_maps(text: &str) -> Result<Vec<Mapping>, ParseError> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| mapping(line, index + 1))
        .collect()
}

/// `start-end perms offset dev inode [path]`
fn mapping(line: &str, line_number: usize) -> Result<Mapping, ParseError> {
    let malformed =
        || error(line_number, format!("expected `start-end perms offset dev inode [path]`, found {line:?}"));
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next().and_then(|range| range.split_once('-')).ok_or_else(malformed)?;
    let permissions = fields.next().ok_or_else(malformed)?;
    let file_offset = fields.next().ok_or_else(malformed)?;
    let (_device, _inode) = (fields.next().ok_or_else(malformed)?, fields.next().ok_or_else(malformed)?);
    let path = fields.collect::<Vec<_>>().join(" ");
    Ok(Mapping {
        start: number(start, 16, line_number, "mapping start")?,
        end: number(end, 16, line_number, "mapping end")?,
        file_offset: number(file_offset, 16, line_number, "file offset")?,
        executable: permissions.contains('x'),
        path: (!path.is_empty()).then_some(path),
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    const DUMP: &str = "heap_v2/524288\n  t*: 2: 131072 [0: 0]\n  t1: 2: 131072 [0: 0] main\n@ 0x5588 0x5599 0x55aa\n  t*: 2: 131072 [0: 0]\n  t1: 2: 131072 [0: 0]\n\nMAPPED_LIBRARIES:\n5500-5600 r-xp 00001000 fe:00 42 /bin/service\n";

    proptest! {
        #[test]
        fn any_text_gives_a_profile_or_a_line_numbered_error(text in "\\PC*") {
            if let Err(error) = HeapProfile::parse(&text) {
                prop_assert!(error.line >= 1 && error.line <= text.lines().count().max(1), "{error}");
            }
        }

        #[test]
        fn a_dump_cut_before_its_memory_map_is_an_error(cut in 0..DUMP.find("MAPPED_LIBRARIES:").unwrap() + 16) {
            prop_assert!(HeapProfile::parse(&DUMP[..cut]).is_err());
        }

        #[test]
        fn a_dump_with_one_byte_changed_never_panics(position in 0..DUMP.len(), byte in any::<u8>()) {
            let mut bytes = DUMP.as_bytes().to_vec();
            bytes[position] = byte;
            // The changed byte may be a line break: the error names a line of the changed text.
            let text = String::from_utf8_lossy(&bytes);
            if let Err(error) = HeapProfile::parse(&text) {
                prop_assert!(error.line >= 1 && error.line <= text.lines().count(), "{error}");
            }
        }
    }
}
