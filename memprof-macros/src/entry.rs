//! `#[memprof::main]` on `proc_macro2` types: parse and check the arguments and the function, then expand.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ItemFn, Lit, Meta, Token};

/// The keys the attribute takes, for error messages.
pub(crate) const ARGUMENTS: [&str; 10] = [
    "http",
    "env",
    "token_env",
    "lg_prof_sample",
    "keep_runs",
    "allocator",
    "dump_on_sigterm",
    "dump_on_sigint",
    "sampling",
    "crate",
];
/// jemalloc's bound for `lg_prof_sample`: the sample interval must fit in a `u64`.
const MAX_LG_PROF_SAMPLE: u32 = 63;
/// The most finished profiles kept: the runtime's `MAX_KEEP_RUNS` is this (through `__max_keep_runs!`).
pub(crate) const MAX_KEEP_RUNS: u32 = 1000;

/// The checked arguments: each `None` unless given, so the runtime's defaults apply (defined once, there).
struct Configuration {
    http: Option<String>,
    env: Option<String>,
    token_env: Option<String>,
    lg_prof_sample: Option<(u32, Span)>,
    keep_runs: Option<u32>,
    /// Whether to install jemalloc as the global allocator and export `malloc_conf` (default true).
    allocator: bool,
    dump_on_sigterm: Option<bool>,
    dump_on_sigint: Option<bool>,
    /// `sampling = "continuous"` (true) or `"on-demand"` (false).
    sampling: Option<bool>,
    krate: syn::Path,
}

/// Errors collected so that a user sees all of them at once (serde_derive's `Ctxt`).
#[derive(Default)]
pub(crate) struct Errors(pub(crate) Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(first) => first.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }
}

/// Expands the attribute: the user's `main` with profiling set up first, or, on any error, the function
/// unchanged plus the errors (so the rest of the crate and the IDE keep working).
pub(crate) fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let configuration = parse_arguments(args, &mut errors);
    let function = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            errors.at(Span::call_site(), "`#[memprof::main]` goes on `fn main`");
            return with_errors(item, errors);
        }
    };
    check_function(&function, &mut errors);
    match (errors.0.is_some(), configuration) {
        (false, Some(configuration)) => expand(function, &configuration),
        _ => with_errors(item, errors),
    }
}

/// The item unchanged, with the errors beside it.
pub(crate) fn with_errors(item: TokenStream, errors: Errors) -> TokenStream {
    let errors = errors.0.map(|error| error.into_compile_error());
    quote! { #item #errors }
}

/// Checks that the attribute is on a plain `fn main()`.
fn check_function(function: &ItemFn, errors: &mut Errors) {
    let signature = &function.sig;
    if signature.ident != "main" {
        errors.at(
            signature.ident.span(),
            format!("`#[memprof::main]` goes on `fn main`, not on `fn {}`", signature.ident),
        );
    }
    if let Some(asyncness) = signature.asyncness {
        errors.at(
            asyncness.span(),
            "`#[memprof::main]` does not take an `async fn`; put it below the async runtime's attribute, as in `#[tokio::main] #[memprof::main] async fn main()`",
        );
    }
    if !signature.inputs.is_empty() {
        errors.at(signature.inputs.span(), "`fn main` takes no arguments");
    }
    if !signature.generics.params.is_empty() {
        errors.at(signature.generics.span(), "`fn main` cannot be generic");
    }
}

/// Parses `key = value, ...` into a [`Configuration`], recording every problem.
fn parse_arguments(args: TokenStream, errors: &mut Errors) -> Option<Configuration> {
    let metas = match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args) {
        Ok(metas) => metas,
        Err(error) => {
            errors.push(error);
            return None;
        }
    };
    let mut seen: Vec<String> = Vec::new();
    let mut configuration = Configuration {
        http: None,
        env: None,
        token_env: None,
        lg_prof_sample: None,
        keep_runs: None,
        allocator: true,
        dump_on_sigterm: None,
        dump_on_sigint: None,
        sampling: None,
        krate: syn::parse_quote!(::memprof),
    };
    for meta in metas {
        let key = meta.path().to_token_stream().to_string();
        let Meta::NameValue(name_value) = &meta else {
            errors.at(meta.span(), format!("`{key}` takes a value: `{key} = ...`"));
            continue;
        };
        if seen.contains(&key) {
            errors.at(meta.path().span(), format!("`{key}` is given more than once"));
            continue;
        }
        seen.push(key.clone());
        let value = &name_value.value;
        let result = match key.as_str() {
            "http" => string_literal(value, "an address such as \"127.0.0.1:5050\"")
                .and_then(|text| check_address(&text, value.span()))
                .map(|text| configuration.http = Some(text)),
            "env" => string_literal(value, "an environment variable name such as \"LIBPROCESS_MEMORY_PROFILING\"")
                .and_then(|text| check_variable_name("env", &text, value.span()))
                .map(|text| configuration.env = Some(text)),
            "token_env" => string_literal(value, "an environment variable name such as \"PROFILER_TOKEN\"")
                .and_then(|text| check_variable_name("token_env", &text, value.span()))
                .map(|text| configuration.token_env = Some(text)),
            "lg_prof_sample" => bounded_integer(&key, value, 0..=MAX_LG_PROF_SAMPLE, LG_PROF_SAMPLE_MEANING)
                .map(|rate| configuration.lg_prof_sample = Some((rate, value.span()))),
            "keep_runs" => bounded_integer(&key, value, 1..=MAX_KEEP_RUNS, KEEP_RUNS_MEANING)
                .map(|count| configuration.keep_runs = Some(count)),
            "allocator" => boolean(&key, value, ALLOCATOR_MEANING).map(|install| configuration.allocator = install),
            "dump_on_sigterm" => {
                boolean(&key, value, DUMP_ON_SIGTERM_MEANING).map(|dump| configuration.dump_on_sigterm = Some(dump))
            }
            "dump_on_sigint" => {
                boolean(&key, value, DUMP_ON_SIGINT_MEANING).map(|dump| configuration.dump_on_sigint = Some(dump))
            }
            "sampling" => sampling_word(value).map(|continuous| configuration.sampling = Some(continuous)),
            // One word for the mode everywhere (the attribute, `Options::sampling`, `MEMPROF_SAMPLING`, `state`).
            "continuous" => Err(syn::Error::new(
                meta.path().span(),
                "`continuous` is the older spelling of `sampling`: write `sampling = \"continuous\"` (or \"on-demand\")",
            )),
            "crate" => crate_path(value).map(|path| configuration.krate = path),
            _ => Err(syn::Error::new(
                meta.path().span(),
                format!(
                    "unknown argument `{key}` of `#[memprof::main]`; expected one of: {}",
                    ARGUMENTS.map(|argument| format!("`{argument}`")).join(", ")
                ),
            )),
        };
        if let Err(error) = result {
            errors.push(error);
        }
    }
    if let (false, Some((_, span))) = (configuration.allocator, configuration.lg_prof_sample) {
        errors.at(
            span,
            "`lg_prof_sample` goes into the malloc_conf that `allocator = false` leaves out; give it to `memprof::malloc_conf!(\"prof:true,prof_active:false,lg_prof_sample:N\")` instead",
        );
    }
    Some(configuration)
}

/// `crate = "::memprof"`'s value: where the `memprof` crate is, for crates that re-export it.
pub(crate) fn crate_path(value: &Expr) -> syn::Result<syn::Path> {
    let text = string_literal(value, "a path such as \"::memprof\"")?;
    syn::parse_str(&text).map_err(|_| {
        syn::Error::new(value.span(), format!("`crate` must be a path, such as \"::memprof\", not \"{text}\""))
    })
}

fn string_literal(value: &Expr, what: &str) -> syn::Result<String> {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) => Ok(text.value()),
        _ => Err(syn::Error::new(value.span(), format!("expected a string literal: {what}"))),
    }
}

/// Checks `host:port`, with a port from 0 to 65535 (0: any free port).
fn check_address(text: &str, span: Span) -> syn::Result<String> {
    match text.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(text.to_owned()),
        _ => Err(syn::Error::new(
            span,
            format!(
                "`http` must be `host:port` with a port from 0 to 65535, such as \"127.0.0.1:5050\", not \"{text}\""
            ),
        )),
    }
}

fn check_variable_name(key: &str, text: &str, span: Span) -> syn::Result<String> {
    let valid = text.chars().next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && text.chars().all(|character| character.is_ascii_alphanumeric() || character == '_');
    if valid {
        Ok(text.to_owned())
    } else {
        Err(syn::Error::new(
            span,
            format!("`{key}` must be an environment variable name (letters, digits, `_`), not \"{text}\""),
        ))
    }
}

const LG_PROF_SAMPLE_MEANING: &str = "log2 of the mean bytes between samples; 19 = 512 KiB";
const KEEP_RUNS_MEANING: &str = "finished profiles kept for download; default 4";
const ALLOCATOR_MEANING: &str = "whether to install jemalloc as the global allocator and export its malloc_conf; `false` where the program has its own";
/// `sampling`'s value: `"continuous"` (true) or `"on-demand"` (false), the words of `MEMPROF_SAMPLING`.
fn sampling_word(value: &Expr) -> syn::Result<bool> {
    let wrong = || {
        syn::Error::new(
            value.span(),
            "`sampling` must be \"continuous\" (on from start-up, runs are windows over it) or \"on-demand\" (off until a run starts it)",
        )
    };
    match value {
        Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) => match text.value().as_str() {
            "continuous" => Ok(true),
            "on-demand" => Ok(false),
            _ => Err(wrong()),
        },
        _ => Err(wrong()),
    }
}
const DUMP_ON_SIGTERM_MEANING: &str = "whether SIGTERM ends memprof as returning from `main` does, then the program";
const DUMP_ON_SIGINT_MEANING: &str =
    "whether SIGINT (Ctrl-C) ends memprof as returning from `main` does, then the program";

/// The value of `key`: `true` or `false`, else an error saying what it means.
fn boolean(key: &str, value: &Expr, meaning: &str) -> syn::Result<bool> {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Bool(flag), .. }) => Ok(flag.value),
        _ => Err(syn::Error::new(value.span(), format!("`{key}` must be `true` or `false` ({meaning})"))),
    }
}

/// The value of `key`: a whole number in `range`, else an error saying what it means.
fn bounded_integer(key: &str, value: &Expr, range: std::ops::RangeInclusive<u32>, meaning: &str) -> syn::Result<u32> {
    let number = match value {
        Expr::Lit(ExprLit { lit: Lit::Int(number), .. }) => number.base10_parse::<u32>().ok(),
        _ => None,
    };
    number.filter(|number| range.contains(number)).ok_or_else(|| {
        let (low, high) = (range.start(), range.end());
        syn::Error::new(value.span(), format!("`{key}` must be a whole number from {low} to {high} ({meaning})"))
    })
}

/// The expansion: jemalloc installed and armed (unless `allocator = false`), then a guard created before the
/// user's first statement, from the options that were given.
#[cfg(feature = "enabled")]
fn expand(function: ItemFn, configuration: &Configuration) -> TokenStream {
    let krate = &configuration.krate;
    let install = configuration.allocator.then(|| {
        let conf = match configuration.lg_prof_sample {
            Some((rate, _)) => {
                let text = format!("prof:true,prof_active:false,lg_prof_sample:{rate}");
                let text = std::ffi::CString::new(text).expect("no NUL in the configuration");
                let literal = proc_macro2::Literal::c_string(&text);
                quote!(#krate::__private::MallocConf::new(#literal))
            }
            None => quote!(#krate::__private::MallocConf::PROFILING),
        };
        quote! {
            #krate::__private::allocator!();
            #krate::__private::malloc_conf!(#conf);
        }
    });
    let strings = [("http", &configuration.http), ("env", &configuration.env), ("token_env", &configuration.token_env)];
    let mut options: Vec<TokenStream> = strings
        .into_iter()
        .filter_map(|(key, value)| value.as_ref().map(|value| option_call(key, quote!(#value))))
        .collect();
    options.extend(configuration.keep_runs.map(|count| option_call("keep_runs", quote!(#count))));
    options.extend(configuration.dump_on_sigterm.map(|dump| option_call("dump_on_sigterm", quote!(#dump))));
    options.extend(configuration.dump_on_sigint.map(|dump| option_call("dump_on_sigint", quote!(#dump))));
    options.extend(configuration.sampling.map(|continuous| {
        let mode = if continuous { quote!(Continuous) } else { quote!(OnDemand) };
        option_call("sampling", quote!(#krate::__private::Sampling::#mode))
    }));
    let ItemFn { attrs, vis, sig, block } = function;
    let statements = &block.stmts;
    quote! {
        #install
        #(#attrs)* #vis #sig {
            let __memprof_guard = #krate::__private::start(#krate::__private::Options::new() #(#options)*);
            #(#statements)*
        }
    }
}

/// `.key(value)`, a builder call on `Options`.
#[cfg(feature = "enabled")]
fn option_call(key: &str, value: TokenStream) -> TokenStream {
    let method = proc_macro2::Ident::new(key, Span::call_site());
    quote!(.#method(#value))
}

/// Compiled out: the function exactly as written.
#[cfg(not(feature = "enabled"))]
fn expand(function: ItemFn, _: &Configuration) -> TokenStream {
    function.into_token_stream()
}

#[cfg(test)]
mod tests;
