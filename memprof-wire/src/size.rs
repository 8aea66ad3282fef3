//! Sizes, one grammar wherever memprof reads one (`MEMPROF_DUMP_EVERY`, the heap budgets of
//! `#[memprof::test]`): a whole number of bytes, or followed by a unit in powers of 1024 (`KiB`, `MiB`,
//! `GiB`) or of 1000 (`KB`, `MB`, `GB`), a space between them allowed.
//!
//! ```
//! use memprof_wire::size::parse;
//!
//! assert_eq!(parse("512KiB"), Some(512 * 1024));
//! assert_eq!(parse("1 MiB"), Some(1 << 20));
//! assert_eq!(parse("2GB"), Some(2_000_000_000));
//! assert_eq!(parse("0"), None);
//! assert_eq!(parse("lots"), None);
//! ```

/// `1048576`, `512KiB`, `64MiB`, `1GiB` (or `KB`, `MB`, `GB` in powers of 1000), at least 1 byte.
pub fn parse(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|character: char| !character.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale).filter(|&bytes| bytes >= 1)
}
