//! Allocation labels as the endpoints take them (`?by=`, `?label=`) and count them.

use serde::{Deserialize, Serialize};

/// A label key as `?by=` and `?label=` take it (and as labels are recorded): ASCII letters, digits and `_`,
/// at most 64 of them; the error says what was given and what is expected.
///
/// ```
/// assert_eq!(memprof_wire::label_key("tenant"), Ok("tenant"));
/// assert!(memprof_wire::label_key("tenant name").is_err());
/// ```
pub fn label_key(key: &str) -> Result<&str, InvalidLabel> {
    let valid =
        !key.is_empty() && key.len() <= 64 && key.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
    if valid {
        Ok(key)
    } else {
        Err(InvalidLabel(format!("'{key}' is not a label key; expected letters, digits and '_' (at most 64)")))
    }
}

/// Why a label key or filter was refused: what was given, and what is expected.
///
/// ```
/// let error = memprof_wire::label_filter("tenant").unwrap_err();
/// assert_eq!(error.to_string(), "'tenant' is not KEY:VALUE (for example tenant:acme)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidLabel(String);

impl std::fmt::Display for InvalidLabel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for InvalidLabel {}

/// A label filter, `KEY:VALUE` (`KEY:(none)` for samples without `KEY`), as `?label=` and `memprof
/// --label` take it.
///
/// ```
/// assert_eq!(memprof_wire::label_filter("tenant:acme"), Ok(("tenant".to_owned(), "acme".to_owned())));
/// assert!(memprof_wire::label_filter("tenant").is_err());
/// ```
pub fn label_filter(filter: &str) -> Result<(String, String), InvalidLabel> {
    let (key, value) = filter
        .split_once(':')
        .ok_or_else(|| InvalidLabel(format!("'{filter}' is not KEY:VALUE (for example tenant:acme)")))?;
    Ok((label_key(key)?.to_owned(), value.to_owned()))
}

/// `labels?id=N`: a kept profile's estimated live bytes under each value of each label key (`(none)` for
/// the samples without the key).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LabelBytes {
    /// The profile.
    pub id: u64,
    /// Its total live bytes.
    pub total_bytes: f64,
    /// Key, then value, then bytes.
    pub keys: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>,
}

/// `state.memory_profiler.labels`: how many distinct label sets the process recorded, of how many it may.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LabelCounts {
    /// Distinct label sets recorded.
    pub sets: u32,
    /// The most it records; past it, new sets are recorded as the overflow set.
    pub max_sets: u32,
    /// How many times labels were entered that made a new set past the bound (recorded as
    /// `memprof_overflow`).
    pub overflowed: u64,
}
