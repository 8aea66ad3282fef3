//! memprof's routers nested where an admin router keeps them, not at their own paths: the dashboard at
//! `/admin/memory-profiler`, Go's endpoints at `/admin/debug/pprof`, the metrics at `/admin/metrics`. The
//! dashboard finds its data where it is served (`tests/dashboard.rs` drives it in a browser).
//!
//! ```text
//! cd examples/axum-service && LIBPROCESS_MEMORY_PROFILING=true cargo run --bin nested
//! curl 127.0.0.1:3000/admin/memory-profiler/state
//! ```

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

memprof::malloc_conf!();

#[tokio::main]
async fn main() {
    let _memprof = memprof::start(memprof::Options::new().built_in_server(false));
    let admin = axum::Router::new()
        .nest("/memory-profiler", memprof::axum::router())
        .nest("/debug/pprof", memprof::axum::debug_pprof_router())
        .nest("/metrics", memprof::axum::metrics_router());
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "nested\n" })).nest("/admin", admin);
    let address = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&address).await.expect("the address is free");
    println!("nested: listening on http://{}/", listener.local_addr().expect("bound"));
    // Something to profile: buffers kept and replaced, as a service's caches are.
    tokio::spawn(async {
        let mut kept: Vec<Vec<u8>> = Vec::new();
        loop {
            kept.push(std::hint::black_box(vec![7u8; 64 * 1024]));
            if kept.len() > 256 {
                kept.remove(0);
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    });
    axum::serve(listener, app).await.expect("the server runs");
}
