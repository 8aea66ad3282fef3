use super::*;

fn errors_of(args: TokenStream, item: TokenStream) -> Vec<String> {
    let output = main(args, item).to_string();
    output
        .match_indices("compile_error ! {")
        .map(|(start, _)| {
            let rest = &output[start..];
            let message = &rest[rest.find('"').unwrap() + 1..];
            message[..message.find("\" }").unwrap()].to_owned()
        })
        .collect()
}

#[test]
fn every_problem_is_reported_at_once() {
    let errors = errors_of(
        quote!(http = 5050, env = "BAD-NAME", lg_prof_sample = 64, verbose = true, env = "X"),
        quote!(
            async fn start(x: u8) {}
        ),
    );
    assert_eq!(errors.len(), 8, "{errors:#?}");
    assert!(errors[0].starts_with("expected a string literal: an address"));
    assert!(errors[1].starts_with("`env` must be an environment variable name"));
    assert!(errors[2].starts_with("`lg_prof_sample` must be a whole number from 0 to 63"));
    assert!(errors[3].starts_with("unknown argument `verbose` of `#[memprof::main]`; expected one of:"));
    assert_eq!(errors[4], "`env` is given more than once");
    assert_eq!(errors[5], "`#[memprof::main]` goes on `fn main`, not on `fn start`");
    assert!(errors[6].starts_with("`#[memprof::main]` does not take an `async fn`"));
    assert_eq!(errors[7], "`fn main` takes no arguments");
}

#[test]
fn addresses_need_a_port() {
    for bad in ["127.0.0.1", ":5050", "localhost:99999", "host:port"] {
        let errors = errors_of(
            quote!(http = #bad),
            quote!(
                fn main() {}
            ),
        );
        assert_eq!(errors.len(), 1, "{bad}");
        assert!(errors[0].starts_with("`http` must be `host:port`"), "{bad}: {errors:?}");
    }
    assert!(
        errors_of(
            quote!(http = "[::1]:0"),
            quote!(
                fn main() {}
            )
        )
        .is_empty()
    );
}

#[test]
fn on_error_the_function_is_kept() {
    let output = main(
        quote!(bogus = 1),
        quote!(
            fn main() {
                println!("hi");
            }
        ),
    )
    .to_string();
    assert!(output.starts_with("fn main () { println ! (\"hi\") ; }"), "{output}");
}

#[cfg(feature = "enabled")]
#[test]
fn the_expansion_arms_profiling_and_keeps_the_body() {
    let output = main(
        quote!(http = "0.0.0.0:6060", token_env = "PROFILER_TOKEN", lg_prof_sample = 17, keep_runs = 12),
        quote!(
            fn main() -> Result<(), String> {
                work()?;
                Ok(())
            }
        ),
    )
    .to_string();
    assert!(output.starts_with(":: memprof :: __private :: allocator ! () ; :: memprof :: __private :: malloc_conf ! (:: memprof :: __private :: MallocConf :: new (c\"prof:true,prof_active:false,lg_prof_sample:17\")) ;"), "{output}");
    assert!(
        output.contains("start (:: memprof :: __private :: Options :: new () . http (\"0.0.0.0:6060\") . token_env (\"PROFILER_TOKEN\") . keep_runs (12u32)) ;"),
        "{output}"
    );
    assert!(output.ends_with("work () ? ; Ok (()) }"), "{output}");
}

#[cfg(feature = "enabled")]
#[test]
fn without_arguments_the_runtime_defaults_apply() {
    let output = main(
        quote!(),
        quote!(
            fn main() {}
        ),
    )
    .to_string();
    assert!(output.contains("malloc_conf ! (:: memprof :: __private :: MallocConf :: PROFILING) ;"), "{output}");
    assert!(output.contains("start (:: memprof :: __private :: Options :: new ()) ;"), "{output}");
}

#[cfg(feature = "enabled")]
#[test]
fn a_program_with_its_own_allocator_gets_no_allocator_and_no_malloc_conf() {
    let output = main(
        quote!(allocator = false, dump_on_sigterm = true, dump_on_sigint = true, sampling = "continuous"),
        quote!(
            fn main() {}
        ),
    )
    .to_string();
    assert!(!output.contains("allocator !") && !output.contains("malloc_conf !"), "{output}");
    assert!(
        output.contains(
            "Options :: new () . dump_on_sigterm (true) . dump_on_sigint (true) . sampling (:: memprof :: __private :: Sampling :: Continuous)) ;"
        ),
        "{output}"
    );
}

#[test]
fn allocator_false_refuses_a_sampling_rate_it_could_not_export() {
    let errors = errors_of(
        quote!(allocator = false, lg_prof_sample = 17),
        quote!(
            fn main() {}
        ),
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("`lg_prof_sample` goes into the malloc_conf that `allocator = false` leaves out"));
    let errors = errors_of(
        quote!(allocator = "no", dump_on_sigterm = 1, sampling = true),
        quote!(
            fn main() {}
        ),
    );
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with("`allocator` must be `true` or `false`"), "{errors:?}");
    assert!(errors[1].starts_with("`dump_on_sigterm` must be `true` or `false`"), "{errors:?}");
    assert!(errors[2].starts_with(r#"`sampling` must be \"continuous\""#), "{errors:?}");
}

#[cfg(feature = "enabled")]
#[test]
fn sampling_takes_the_variables_words_and_the_older_continuous_is_refused_with_the_new_spelling() {
    let expanded = |args: TokenStream| {
        main(
            args,
            quote!(
                fn main() {}
            ),
        )
        .to_string()
    };
    assert!(
        expanded(quote!(sampling = "on-demand"))
            .contains(". sampling (:: memprof :: __private :: Sampling :: OnDemand)")
    );
    let errors = errors_of(
        quote!(sampling = "always"),
        quote!(
            fn main() {}
        ),
    );
    // The message as the expansion's `compile_error!` quotes it.
    assert!(errors[0].starts_with(r#"`sampling` must be \"continuous\""#), "{errors:?}");
    let errors = errors_of(
        quote!(sampling = "continuous", continuous = true),
        quote!(
            fn main() {}
        ),
    );
    assert_eq!(
        errors,
        [r#"`continuous` is the older spelling of `sampling`: write `sampling = \"continuous\"` (or \"on-demand\")"#]
    );
}

#[test]
fn keep_runs_is_bounded_by_what_the_runtime_keeps() {
    let errors = |count: u32| {
        errors_of(
            quote!(keep_runs = #count),
            quote!(
                fn main() {}
            ),
        )
    };
    assert!(errors(MAX_KEEP_RUNS).is_empty());
    let refused = errors(MAX_KEEP_RUNS + 1);
    assert!(refused[0].starts_with("`keep_runs` must be a whole number from 1 to 1000"), "{refused:?}");
    assert!(errors(0)[0].starts_with("`keep_runs` must be a whole number from 1 to 1000"));
}
