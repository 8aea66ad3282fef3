//! A tokio + axum service that adopts memprof without giving anything up: its own jemalloc allocator, its
//! logger set up first, memprof's endpoints merged into its own router, graceful shutdown on SIGTERM.
//!
//! ```text
//! cd examples/axum-service && LIBPROCESS_MEMORY_PROFILING=true cargo run
//! curl -X POST 127.0.0.1:3000/sessions                         # the service's own routes
//! curl '127.0.0.1:3000/memory-profiler/start?duration=10secs'  # memprof's, on the same port
//! curl '127.0.0.1:3000/memory-profiler/download/text'
//! go tool pprof -top http://127.0.0.1:3000/debug/pprof/heap    # what Parca and Alloy scrape
//! curl 127.0.0.1:3000/metrics                                   # what Prometheus scrapes
//! ```
//!
//! `ADDR` sets the address (default `127.0.0.1:3000`); `LOAD=off` leaves out the load task. Its handlers allocate on tokio's worker threads:
//! `open_session` keeps 64 KiB per session (the newest 256), `index_document` 32 KiB per document (the
//! newest 128), `render_page` a buffer freed at once. A load task calls them in a loop, as clients would.
//!
//! Memory by route and tenant: requests are labelled with the route they matched and the tenant their
//! `X-Tenant` header names, the load task's calls with their tenant (`acme` three times in four, `initech`
//! once): `curl '127.0.0.1:3000/memory-profiler/download/text?by=tenant'`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use axum::routing::{get, post};
use memprof::axum::RouterExt;
use memprof::labels::WithLabels;

// The service's allocator, declared as it was before memprof came.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// What memprof needs from jemalloc, exported beside it: profiling armed, sampling off until a run starts.
memprof::malloc_conf!();

const SESSIONS: usize = 256;
const SESSION_BYTES: usize = 64 * 1024;
const DOCUMENTS: usize = 128;
const DOCUMENT_WORDS: usize = 32 * 1024 / 8;

/// What the service keeps in memory.
#[derive(Default)]
struct Memory {
    sessions: VecDeque<Vec<u8>>,
    index: VecDeque<Vec<u64>>,
}

type Shared = Arc<Mutex<Memory>>;

#[tokio::main]
async fn main() {
    // The logger first: memprof's start-up messages go to it.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let _memprof = memprof::start(memprof::Options::new().built_in_server(false));

    let memory = Shared::default();
    let app = Router::new()
        .route("/", get(|| async { "axum-service\n" }))
        .route("/sessions", post(open_session))
        .route("/documents", post(index_document))
        .route("/page", get(render_page))
        .with_state(Arc::clone(&memory))
        // Memory by route and by tenant (`?by=route`, `?by=tenant`): each request's allocations are labelled
        // with the route it matched and the tenant it names.
        .layer(from_fn(label_by_tenant))
        .memprof_route_labels()
        // Every endpoint at its own path: the dashboard at /memory-profiler/, Go's /debug/pprof/*, /metrics.
        // Compiled out, these two calls are the router itself.
        .memprof_endpoints();

    let address = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&address).await.expect("the address is free");
    println!("axum-service: listening on http://{}/", listener.local_addr().expect("bound"));
    if std::env::var("LOAD").is_ok_and(|load| load == "off") {
        drop(memory);
    } else {
        tokio::spawn(load(memory));
    }
    axum::serve(listener, app).with_graceful_shutdown(terminated()).await.expect("the server runs");
    println!("axum-service: done");
    // `_memprof` is dropped here: a run still active is ended and the profiles are removed.
}

/// Labels a request's allocations with the tenant its `X-Tenant` header names (`unknown` without one). A
/// real service would check the name against its tenants: memprof records at most 1,024 distinct label sets.
async fn label_by_tenant(request: Request, next: Next) -> Response {
    let tenant = request.headers().get("x-tenant").and_then(|value| value.to_str().ok()).unwrap_or("unknown");
    let tenant = tenant.to_owned();
    next.run(request).with_labels(&[("tenant", &tenant)]).await
}

/// Resolves at SIGTERM (systemd, Kubernetes, `docker stop`) or Ctrl-C.
async fn terminated() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM can be handled");
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    log::info!("axum-service: shutting down");
}

/// `POST /sessions`: a session's state, kept until 256 newer sessions exist.
async fn open_session(State(memory): State<Shared>) -> String {
    let session = new_session();
    let mut memory = memory.lock().expect("not poisoned");
    keep(&mut memory.sessions, SESSIONS, session);
    format!("{} sessions\n", memory.sessions.len())
}

#[inline(never)]
fn new_session() -> Vec<u8> {
    vec![7; SESSION_BYTES]
}

/// `POST /documents`: an index block, kept until 128 newer ones exist.
async fn index_document(State(memory): State<Shared>) -> String {
    let block = new_index_block();
    let mut memory = memory.lock().expect("not poisoned");
    keep(&mut memory.index, DOCUMENTS, block);
    format!("{} documents\n", memory.index.len())
}

#[inline(never)]
fn new_index_block() -> Vec<u64> {
    (0..DOCUMENT_WORDS as u64).map(|word| word.wrapping_mul(31)).collect()
}

/// `GET /page`: a page rendered and freed as soon as it is sent.
async fn render_page() -> String {
    format!("<p>{}</p>\n", "x".repeat(4096))
}

fn keep<T>(items: &mut VecDeque<T>, limit: usize, item: T) {
    if items.len() == limit {
        items.pop_front();
    }
    items.push_back(item);
}

/// Calls the handlers in a loop on the runtime's workers, as clients would.
async fn load(memory: Shared) {
    for request in 0u64.. {
        let tenant = [("tenant", if request % 4 == 3 { "initech" } else { "acme" })];
        open_session(State(Arc::clone(&memory))).with_labels(&tenant).await;
        index_document(State(Arc::clone(&memory))).with_labels(&tenant).await;
        std::hint::black_box(render_page().await);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
