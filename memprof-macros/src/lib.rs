//! The `#[memprof::main]` attribute. Use it through the `memprof` crate, which documents it.
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod entry;

use proc_macro::TokenStream;

/// Arms jemalloc heap profiling for the program and serves its endpoints when asked to.
/// See `memprof::main` for the arguments and the code it expands to.
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    entry::main(args.into(), item.into()).into()
}
