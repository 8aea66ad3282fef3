//! The frames below the user's code, which nobody wants to read: Rust's and libc's start-up (`_start`,
//! `__libc_start_main`, `main`, `std::rt::lang_start`, the `catch_unwind` wrappers, a spawned thread's
//! `thread_start`) and an async runtime's scheduling (tokio's workers, down to the poll of the task).
//!
//! Rust's own short backtraces stop at `__rust_begin_short_backtrace`, the frame that calls `main` and every
//! closure given to `std::thread::spawn`; the readable formats stop there too, and, for tasks of tokio, at
//! the poll of the task (or of the future `block_on` runs, as `#[tokio::main]` does), then drop the few
//! frames of tokio's and core's polling machinery left above the user's code.
//!
//! Then a stack starts at the outermost frame of the program's own code: the frames of the libraries that
//! called it (a web framework's routing, middleware and connection handling: axum, tower, hyper) are cut
//! too, and so are libraries' frames between two of the program's (the routing between a middleware and
//! its handler). DWARF's file paths tell whose code a frame is: Rust's standard library is built under `/rustc/`,
//! dependencies from crates.io or git are compiled from cargo's `registry/` and `git/` directories; any
//! other Rust source is the program's (its workspace, path dependencies included).

/// memprof's labelling between the user's frames (`labels::with`, a labelled future's poll): dropped
/// wherever they are, as the user's code reads without them.
pub(crate) fn is_labelling(function: &str) -> bool {
    function.starts_with("memprof_runtime::labels::") || function.starts_with("<memprof_runtime::labels::")
}

/// Frames from which the user's code starts: they and every frame below them are cut. The innermost one
/// found in a stack counts (a tokio worker's task poll runs above a thread's short-backtrace frame).
fn starts_user_code(function: &str) -> bool {
    function.contains("__rust_begin_short_backtrace")
        || (function.starts_with("tokio::runtime::task::core::Core<") && function.ends_with(">::poll"))
        || function.starts_with("tokio::runtime::park::CachedParkThread::block_on")
}

/// The polling and unwinding machinery left between such a frame and the user's code.
const MACHINERY: &[&str] = &[
    "tokio::",
    "<tokio::",
    "core::",
    "<core::",
    "std::panic",
    "<std::panic",
    "std::thread::local::",
    "__rust_try",
    "<alloc::boxed::Box<dyn core::ops::function::FnOnce",
];

/// Source files of that machinery, for inlined frames that a build with `debug = "line-tables-only"`
/// names without their path (`call_once<fn(), ()>`).
const MACHINERY_FILES: &[&str] = &["/library/core/src/", "/library/std/src/", "/tokio-"];

/// The frames of a stack, innermost first, without those below the user's code and without memprof's
/// labelling; `describe` gives a frame's function and source file.
///
/// A stack with no frame that starts the user's code (a thread memprof cannot recognise) is kept whole,
/// and the machinery is dropped only while a frame of the user's stays.
pub(crate) fn cut<T>(frames: &mut Vec<T>, describe: impl Fn(&T) -> (&str, Option<&str>)) {
    frames.retain(|frame| !is_labelling(describe(frame).0));
    let Some(start) = frames.iter().position(|frame| starts_user_code(describe(frame).0)) else {
        return;
    };
    frames.truncate(start);
    while frames.len() > 1 && frames.last().is_some_and(|frame| is_machinery(describe(frame))) {
        frames.pop();
    }
    if let Some(outermost) = frames.iter().rposition(|frame| is_the_programs(describe(frame).1)) {
        frames.truncate(outermost + 1);
        // Between the program's innermost and outermost frames, others' frames are folded too (a web
        // framework's routing between a middleware and its handler, a span's `Instrumented::poll` between
        // a connection task and what it runs); those between the allocation and the program's innermost
        // frame (a collection growing, a serializer writing) stay: they say how the program allocated.
        let innermost = frames.iter().position(|frame| is_the_programs(describe(frame).1)).unwrap_or(outermost);
        let mut index = 0;
        frames.retain(|frame| {
            let keep = index <= innermost || index >= outermost || is_the_programs(describe(frame).1);
            index += 1;
            keep
        });
    }
}

/// Where the sources of others' code are compiled from: the standard library (`/rustc/<hash>/library/`, or
/// the sysroot's `lib/rustlib/src/rust/` where it is not remapped), the crates std vendors (its
/// `HashMap` is hashbrown's, built from `/rust/deps/hashbrown-<version>/`: std's code, not the program's,
/// though no `/rustc/` is in its path) and cargo's downloads (`$CARGO_HOME/registry/src/...`,
/// `$CARGO_HOME/git/checkouts/...`).
const OTHERS_SOURCES: &[&str] =
    &["/rustc/", "/lib/rustlib/src/rust/", "/rust/deps/", "/registry/src/", "/git/checkouts/"];

/// Whether a frame's source file is the program's own Rust code.
pub(crate) fn is_the_programs(file: Option<&str>) -> bool {
    file.is_some_and(|file| file.ends_with(".rs") && !OTHERS_SOURCES.iter().any(|part| file.contains(part)))
}

fn is_machinery((function, file): (&str, Option<&str>)) -> bool {
    MACHINERY.iter().any(|prefix| function.starts_with(prefix))
        || file.is_some_and(|file| MACHINERY_FILES.iter().any(|part| file.contains(part)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut_names(stack: &[&'static str]) -> Vec<&'static str> {
        let mut frames = stack.to_vec();
        cut(&mut frames, |name| (name, None));
        frames
    }

    #[test]
    fn memprofs_labelling_is_dropped_between_the_users_frames() {
        let mut frames = vec![
            ("service::open_session", Some("/work/examples/service.rs")),
            ("service::main::{{closure}}", Some("/work/examples/service.rs")),
            ("memprof_runtime::labels::with", Some("/work/memprof-runtime/src/labels/mod.rs")),
            ("<memprof_runtime::labels::future::Labelled<F> as core::future::future::Future>::poll", None),
            ("service::main", Some("/work/examples/service.rs")),
            ("std::sys::backtrace::__rust_begin_short_backtrace", None),
        ];
        cut(&mut frames, |&(name, file)| (name, file));
        let names: Vec<&str> = frames.iter().map(|frame| frame.0).collect();
        assert_eq!(names, ["service::open_session", "service::main::{{closure}}", "service::main"]);
    }

    #[test]
    fn short_names_of_inlined_library_frames_are_known_by_their_file() {
        let library = "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library";
        let function_rs = format!("{library}/core/src/ops/function.rs");
        let mut frames = vec![
            ("service::open_session", Some("/work/examples/service.rs")),
            ("service::main", Some("/work/examples/service.rs")),
            ("call_once<fn(), ()>", Some(function_rs.as_str())),
            ("std::sys::backtrace::__rust_begin_short_backtrace", None),
        ];
        cut(&mut frames, |&(name, file)| (name, file));
        assert_eq!(frames.iter().map(|frame| frame.0).collect::<Vec<_>>(), ["service::open_session", "service::main"]);
    }

    #[test]
    fn the_main_threads_start_up_is_cut_at_the_short_backtrace_frame() {
        let stack = [
            "service::open_session",
            "service::main",
            "core::ops::function::FnOnce::call_once",
            "std::sys::backtrace::__rust_begin_short_backtrace",
            "std::rt::lang_start::{{closure}}",
            "std::rt::lang_start_internal",
            "main",
            "__libc_start_call_main",
            "__libc_start_main",
            "_start",
        ];
        assert_eq!(cut_names(&stack), ["service::open_session", "service::main"]);
    }

    #[test]
    fn a_tokio_tasks_stack_starts_at_its_async_fn() {
        let stack = [
            "axum_service::new_session",
            "axum_service::open_session::{{closure}}",
            "axum_service::load::{{closure}}",
            "tokio::runtime::task::core::Core<T,S>::poll::{{closure}}",
            "tokio::loom::std::unsafe_cell::UnsafeCell<T>::with_mut",
            "tokio::runtime::task::core::Core<T,S>::poll",
            "tokio::runtime::task::harness::poll_future::{{closure}}",
            "tokio::runtime::scheduler::multi_thread::worker::Context::run_task",
            "<tokio::runtime::blocking::task::BlockingTask<T> as core::future::future::Future>::poll",
            "tokio::runtime::task::core::Core<T,S>::poll",
            "std::sys::backtrace::__rust_begin_short_backtrace",
            "<std::sys::thread::unix::Thread>::new::thread_start",
            "start_thread",
        ];
        assert_eq!(
            cut_names(&stack),
            ["axum_service::new_session", "axum_service::open_session::{{closure}}", "axum_service::load::{{closure}}"]
        );
    }

    #[test]
    fn tokio_mains_future_starts_below_block_on_and_unknown_stacks_stay_whole() {
        let stack = [
            "app::main::{{closure}}",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            "tokio::runtime::park::CachedParkThread::block_on::{{closure}}",
            "tokio::task::coop::with_budget",
            "tokio::runtime::park::CachedParkThread::block_on",
            "tokio::runtime::runtime::Runtime::block_on",
            "app::main",
            "std::sys::backtrace::__rust_begin_short_backtrace",
        ];
        assert_eq!(cut_names(&stack), ["app::main::{{closure}}"]);
        let unknown = ["app::work", "clone3"];
        assert_eq!(cut_names(&unknown), unknown);
        let only_machinery = ["tokio::runtime::io::Driver::turn", "tokio::runtime::task::core::Core<T,S>::poll"];
        assert_eq!(cut_names(&only_machinery), ["tokio::runtime::io::Driver::turn"]);
    }

    #[test]
    fn a_stack_starts_at_the_outermost_frame_of_the_programs_own_code() {
        let registry = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f";
        let axum = format!("{registry}/axum-0.8.4/src/routing/route.rs");
        let hyper = format!("{registry}/hyper-1.6.0/src/proto/h1/dispatch.rs");
        let serde = format!("{registry}/serde_json-1.0.140/src/de.rs");
        let mut frames = vec![
            ("serde_json::de::from_str", Some(serde.as_str())),
            ("app::sessions::new_session", Some("/srv/app/src/sessions.rs")),
            ("<serde_json::Deserializer as Deserializer>::deserialize_map", Some(serde.as_str())),
            ("app::routes::put_item::{{closure}}", Some("src/routes.rs")),
            ("<axum::routing::route::Route as tower::Service>::call", Some(axum.as_str())),
            ("hyper::proto::h1::dispatch::Dispatcher::poll_loop", Some(hyper.as_str())),
            ("tokio::runtime::task::core::Core<T,S>::poll", None),
            ("std::sys::backtrace::__rust_begin_short_backtrace", None),
        ];
        cut(&mut frames, |&(name, file)| (name, file));
        let names: Vec<&str> = frames.iter().map(|frame| frame.0).collect();
        assert_eq!(
            names,
            ["serde_json::de::from_str", "app::sessions::new_session", "app::routes::put_item::{{closure}}"],
            "the library frames between the program's are folded, those below its innermost stay"
        );
        // A middleware and its handler, with axum's routing between them.
        let next = format!("{registry}/axum-0.8.4/src/middleware/from_fn.rs");
        let tower = format!("{registry}/tower-0.5.2/src/util/oneshot.rs");
        let mut frames = vec![
            ("alloc::vec::Vec<T>::push", Some("/rustc/59807616e1fa/library/alloc/src/vec/mod.rs")),
            ("app::handlers::list::{{closure}}", Some("/srv/app/src/handlers.rs")),
            ("<axum::routing::route::RouteFuture<E> as Future>::poll", Some(axum.as_str())),
            ("<tower::util::oneshot::Oneshot<S,Req> as Future>::poll", Some(tower.as_str())),
            ("axum::middleware::from_fn::Next::run::{{closure}}", Some(next.as_str())),
            ("app::middleware::timing::{{closure}}", Some("/srv/app/src/middleware.rs")),
            ("<axum::routing::route::RouteFuture<E> as Future>::poll", Some(axum.as_str())),
            ("tokio::runtime::task::core::Core<T,S>::poll", None),
        ];
        cut(&mut frames, |&(name, file)| (name, file));
        let names: Vec<&str> = frames.iter().map(|frame| frame.0).collect();
        assert_eq!(
            names,
            ["alloc::vec::Vec<T>::push", "app::handlers::list::{{closure}}", "app::middleware::timing::{{closure}}"]
        );
        // Without the program's own files (no DWARF), nothing more is cut.
        let mut unknown =
            vec![("a", None), ("b", Some(axum.as_str())), ("tokio::runtime::park::CachedParkThread::block_on", None)];
        cut(&mut unknown, |&(name, file)| (name, file));
        assert_eq!(unknown.len(), 2);
    }

    /// std's `HashMap` is hashbrown, vendored: its frames lie under `/rust/deps/`, std's and not the
    /// program's, so the allocating function is the program's own that grew the map, and two functions
    /// growing two maps are two stacks.
    #[test]
    fn the_crates_std_vendors_are_std_not_the_program() {
        let hashbrown = "/rust/deps/hashbrown-0.16.1/src/raw/alloc.rs";
        assert!(!is_the_programs(Some(hashbrown)));
        assert!(is_the_programs(Some("/srv/broker/src/retained.rs")));
        let mut frames = vec![
            ("hashbrown::raw::alloc::inner::do_alloc", Some(hashbrown)),
            ("hashbrown::raw::RawTable<T,A>::reserve_rehash", Some("/rust/deps/hashbrown-0.16.1/src/raw/mod.rs")),
            ("broker::retained::Store::insert", Some("/srv/broker/src/retained.rs")),
            ("broker::main", Some("/srv/broker/src/main.rs")),
            ("std::sys::backtrace::__rust_begin_short_backtrace", None),
        ];
        cut(&mut frames, |&(name, file)| (name, file));
        let first_of_the_programs = frames.iter().find(|(_, file)| is_the_programs(*file)).unwrap();
        assert_eq!(first_of_the_programs.0, "broker::retained::Store::insert");
    }
}
