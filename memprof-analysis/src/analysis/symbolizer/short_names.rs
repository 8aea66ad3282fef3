//! Short names: Rust functions DWARF knows only by their `DW_AT_name`, without their path.

use std::collections::BTreeSet;

use addr2line::gimli;

use super::reader::Reader;

/// Rust functions that DWARF names without their path: their entries have no linkage name, as in every
/// unit built with `debug = "line-tables-only"`, whose DWARF keeps neither linkage names nor namespaces.
/// An inlined frame then reads `build<alloc::string::String>` where a call of the same function that was
/// not inlined reads `app::shapes::build` (from the symbol table): nothing in that DWARF ties the short name
/// to a path, so it is shown as it is and the reader is told how to get whole names.
///
/// Only names with generic arguments are counted: with function records, the only Rust functions without
/// a linkage name are `#[no_mangle]` ones (`fill`), whose one name has no path anyway, and those cannot be
/// generic; a line-tables-only build always inlines some generic function (`drop_in_place<..>`, `Vec`'s).
#[derive(Debug, Default)]
pub(super) struct ShortNames(BTreeSet<String>);

/// The name of a Rust function DWARF knows only by its short `DW_AT_name`, with generic arguments.
pub(super) fn short_rust_name(function: &addr2line::FunctionName<Reader<'_>>) -> Option<String> {
    let name = function.raw_name().ok().filter(|_| function.language == Some(gimli::DW_LANG_Rust))?;
    let mangled = name.starts_with("_ZN") || name.starts_with("_R");
    (!mangled && name.contains('<')).then(|| name.into_owned())
}

impl ShortNames {
    /// Keeps the short names of one address's frames (innermost first) but the outermost, which the symbol
    /// table names.
    pub(super) fn add_inlined(&mut self, mut short: Vec<Option<String>>) {
        short.pop();
        self.0.extend(short.into_iter().flatten());
    }

    /// The shortest, to show.
    pub(super) fn example(&self) -> Option<String> {
        self.0.iter().min_by_key(|name| (name.len(), name.as_str())).cloned()
    }
}
