//! `#[memprof::test(allocated <= "1 MiB", peak <= "256 KiB", live == 0)]` on `proc_macro2` types: a test
//! whose body is measured (`memprof::measure`, or `measure_future` for an async test) and whose heap
//! budgets are checked after it. Sizes are read in memprof-wire's one grammar, here at compile time, so a
//! malformed budget is an error on its own tokens.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, ExprLit, ItemFn, Lit, Token};

use memprof_wire::usage::{Comparison, Quantity};

use crate::entry::{Errors, crate_path, with_errors};

/// A budget as checked here: its tokens become a `Budget` of the runtime.
struct Parsed {
    quantity: Quantity,
    comparison: Comparison,
    limit: i64,
    written: String,
}

/// Expands the attribute: the test with its body measured and its budgets checked, or, on any error, the
/// function unchanged plus the errors.
pub(crate) fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let (budgets, krate) = parse_arguments(args, &mut errors);
    let Ok(function) = syn::parse2::<ItemFn>(item.clone()) else {
        errors.at(Span::call_site(), "`#[memprof::test]` goes on a test function: `fn name() { ... }`");
        return with_errors(item, errors);
    };
    check_function(&function, &mut errors);
    if errors.0.is_some() {
        return with_errors(item, errors);
    }
    expand(function, &budgets, &krate)
}

fn parse_arguments(args: TokenStream, errors: &mut Errors) -> (Vec<Parsed>, syn::Path) {
    let mut krate = syn::parse_quote!(::memprof);
    let mut budgets = Vec::new();
    let expressions = match Punctuated::<Expr, Token![,]>::parse_terminated.parse2(args) {
        Ok(expressions) => expressions,
        Err(error) => {
            errors.push(error);
            return (budgets, krate);
        }
    };
    for expression in expressions {
        match &expression {
            Expr::Assign(assign) if assign.left.to_token_stream().to_string() == "crate" => {
                match crate_path(&assign.right) {
                    Ok(path) => krate = path,
                    Err(error) => errors.push(error),
                }
            }
            _ => match budget(&expression) {
                Ok(parsed) => budgets.push(parsed),
                Err(error) => errors.push(error),
            },
        }
    }
    (budgets, krate)
}

/// One budget: `quantity <op> limit`.
fn budget(expression: &Expr) -> syn::Result<Parsed> {
    let names = || Quantity::ALL.map(|quantity| format!("`{}`", quantity.name())).join(", ");
    let Expr::Binary(binary) = expression else {
        return Err(syn::Error::new(
            expression.span(),
            format!("a heap budget is `quantity <= limit`, such as `allocated <= \"1 MiB\"`; quantities: {}", names()),
        ));
    };
    let name = binary.left.to_token_stream().to_string();
    let quantity = Quantity::named(&name).ok_or_else(|| {
        syn::Error::new(binary.left.span(), format!("unknown quantity `{name}`; expected one of: {}", names()))
    })?;
    let comparison = match binary.op {
        BinOp::Le(_) => Comparison::AtMost,
        BinOp::Lt(_) => Comparison::Below,
        BinOp::Eq(_) => Comparison::Exactly,
        BinOp::Ge(_) => Comparison::AtLeast,
        BinOp::Gt(_) => Comparison::Above,
        _ => {
            let operators = Comparison::ALL.map(|(_, operator)| format!("`{operator}`")).join(", ");
            return Err(syn::Error::new(binary.op.span(), format!("a budget compares with one of: {operators}")));
        }
    };
    let limit = limit(&binary.right, quantity)?;
    let limit_written = binary.right.to_token_stream().to_string().replace("- ", "-");
    let written = format!("{name} {} {limit_written}", binary.op.to_token_stream());
    Ok(Parsed { quantity, comparison, limit, written })
}

/// A budget's limit: a whole number (below 0 only for `live`), or for bytes a size in memprof's grammar
/// (`"512 KiB"`, `"1MB"`).
fn limit(value: &Expr, quantity: Quantity) -> syn::Result<i64> {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Int(number), .. }) => number.base10_parse::<i64>(),
        Expr::Unary(syn::ExprUnary { op: syn::UnOp::Neg(_), expr, .. }) if quantity == Quantity::Live => {
            limit(expr, quantity).map(|bytes| -bytes)
        }
        Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) if quantity.is_bytes() => {
            let too_large = || syn::Error::new(text.span(), "a budget's size is at most 8 EiB");
            let bytes = memprof_wire::size::parse(&text.value()).ok_or_else(|| {
                syn::Error::new(
                    text.span(),
                    format!(
                        "\"{}\" is not a size: write a number of bytes, or one followed by KiB, MiB, GiB (or KB, MB, GB), such as \"256 KiB\"",
                        text.value()
                    ),
                )
            })?;
            i64::try_from(bytes).map_err(|_| too_large())
        }
        _ if quantity.is_bytes() => Err(syn::Error::new(
            value.span(),
            format!("`{}` is bounded by a size, such as \"1 MiB\", or a number of bytes", quantity.name()),
        )),
        _ => Err(syn::Error::new(
            value.span(),
            format!("`{}` is a count of objects: bound it by a whole number", quantity.name()),
        )),
    }
}

/// Checks that the attribute is on a test: no arguments, no generics; an async one below its runtime's
/// test attribute.
fn check_function(function: &ItemFn, errors: &mut Errors) {
    let signature = &function.sig;
    if !signature.inputs.is_empty() {
        errors.at(signature.inputs.span(), "a test takes no arguments");
    }
    if !signature.generics.params.is_empty() {
        errors.at(signature.generics.span(), "a test has no generic parameters");
    }
    if signature.asyncness.is_some() && !has_test_attribute(&function.attrs) {
        errors.at(
            signature.fn_token.span(),
            "an async test needs its runtime's test attribute below this one: `#[memprof::test(...)]` then `#[tokio::test]`",
        );
    }
}

fn expand(function: ItemFn, budgets: &[Parsed], krate: &syn::Path) -> TokenStream {
    let ItemFn { attrs, vis, sig, block } = function;
    let name = &sig.ident;
    let output = &sig.output;
    let test = (!has_test_attribute(&attrs)).then(|| quote!(#[::core::prelude::v1::test]));
    let budgets = budgets.iter().map(|budget| {
        let quantity = syn::Ident::new(&format!("{:?}", budget.quantity), Span::call_site());
        let comparison = syn::Ident::new(&format!("{:?}", budget.comparison), Span::call_site());
        let (limit, written) = (budget.limit, &budget.written);
        quote! {
            #krate::__private::Budget {
                quantity: #krate::__private::Quantity::#quantity,
                comparison: #krate::__private::Comparison::#comparison,
                limit: #limit,
                written: #written,
            }
        }
    });
    let budgets = quote!(&[#(#budgets),*]);
    let test_name = quote!(::core::concat!(::core::module_path!(), "::", ::core::stringify!(#name)));
    let body = if sig.asyncness.is_some() {
        quote! {
            async fn __memprof_test_body() #output #block
            #krate::__private::budgeted_future(#test_name, #budgets, __memprof_test_body()).await
        }
    } else {
        quote! {
            fn __memprof_test_body() #output #block
            #krate::__private::budgeted(#test_name, #budgets, __memprof_test_body)
        }
    };
    quote! {
        #(#attrs)*
        #test
        #vis #sig {
            #body
        }
    }
}

/// Whether another test attribute is on the function (`#[test]`, `#[tokio::test]`, ...): then none is added.
fn has_test_attribute(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attribute| attribute.path().segments.last().is_some_and(|segment| segment.ident == "test"))
}
