//! The `#[memprof::main]` and `#[memprof::test]` attributes. Use them through the `memprof` crate, which documents it.
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod budgets;
mod entry;

use proc_macro::TokenStream;
use quote::ToTokens;

/// Arms jemalloc heap profiling for the program and serves its endpoints when asked to.
/// See `memprof::main` for the arguments and the code it expands to.
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    entry::main(args.into(), item.into()).into()
}

/// A test whose heap budgets are checked after its body. See `memprof::test`.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    budgets::test(args.into(), item.into()).into()
}

/// The attribute's arguments, as an array of string literals: for the test that keeps
/// docs/configuration.md's table of them true. Not a public API.
#[doc(hidden)]
#[proc_macro]
pub fn __attribute_arguments(_: TokenStream) -> TokenStream {
    let arguments = entry::ARGUMENTS;
    quote::quote!([#(#arguments),*]).into()
}

/// The most finished profiles memprof keeps (`keep_runs`), as a `u32` literal: declared once, here, where
/// the attribute refuses more, and read by the runtime (`memprof_runtime::MAX_KEEP_RUNS`), which a
/// proc-macro crate cannot otherwise share a constant with. Not a public API.
#[doc(hidden)]
#[proc_macro]
pub fn __max_keep_runs(_: TokenStream) -> TokenStream {
    proc_macro2::Literal::u32_suffixed(entry::MAX_KEEP_RUNS).into_token_stream().into()
}
