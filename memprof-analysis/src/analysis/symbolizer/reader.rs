//! How the symbolizer reads DWARF: gimli's reader over the mapped binary's bytes, in the binary's byte
//! order. Shared by the parts that read units and names.

use addr2line::gimli;

/// A DWARF section's bytes, as gimli reads them.
pub(super) type Reader<'data> = gimli::EndianSlice<'data, gimli::RunTimeEndian>;
