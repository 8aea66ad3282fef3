//! The README's quick start for a tokio service that owns its allocator, logger and router, exactly as the
//! README shows it but for the port (`127.0.0.1:0`, any free one): `tests/adoption.rs` checks that this file
//! is the README's code and drives it.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// What memprof needs from jemalloc, beside your allocator: "prof:true,prof_active:false". Already
// exporting a malloc_conf? Put your keys in this one instead: memprof::malloc_conf!("prof:true,prof_active:false,background_thread:true");
memprof::malloc_conf!();

#[tokio::main]
async fn main() {
    env_logger::init(); // first: memprof's messages go to your logger
    // Served only on this router: the routes below answer when LIBPROCESS_MEMORY_PROFILING=true, and 404
    // otherwise, as memprof's own server does (without built_in_server(false), the switch starts that too).
    let _memprof = memprof::start(memprof::Options::new().built_in_server(false));

    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "hello" }))
        // Every endpoint at its own path: the dashboard at /memory-profiler/, Mesos's endpoints below it,
        // /debug/pprof/* (Parca's and Alloy's default paths) and /metrics. To mount them elsewhere, nest
        // memprof::axum::router(), debug_pprof_router() and metrics_router() instead (the dashboard is then at /memory-profiler).
        .merge(memprof::axum::routes());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    axum::serve(listener, app).with_graceful_shutdown(terminated()).await.unwrap();
    // `_memprof` drops here: a run in progress ends (its profile kept at MEMPROF_FINAL_DUMP if set) and the
    // profile directory is removed.
}

async fn terminated() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
    tokio::select! { _ = term.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
}
