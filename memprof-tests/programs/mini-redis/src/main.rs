//! mini-redis 0.4.1's server, as its `src/bin/server.rs` starts it (a `structopt` command line, a
//! `tracing` subscriber, `mini_redis::server::run` until Ctrl-C), with memprof's attribute added: what a new
//! user adopting memprof in a tokio service writes. `MINI_REDIS_MEMORY_PROFILING=true` serves memprof's
//! endpoints (on a port of the system's choosing, said on standard error).

use mini_redis::{DEFAULT_PORT, server};

use structopt::StructOpt;
use tokio::net::TcpListener;
use tokio::signal;

#[tokio::main]
#[memprof::main(http = "127.0.0.1:0", env = "MINI_REDIS_MEMORY_PROFILING")]
pub async fn main() -> mini_redis::Result<()> {
    tracing_subscriber::fmt::try_init()?;

    let cli = Cli::from_args();
    let port = cli.port.as_deref().unwrap_or(DEFAULT_PORT);

    let listener = TcpListener::bind(&format!("127.0.0.1:{}", port)).await?;

    server::run(listener, signal::ctrl_c()).await
}

#[derive(StructOpt, Debug)]
#[structopt(name = "mini-redis-server", about = "A Redis server")]
struct Cli {
    #[structopt(name = "port", long = "--port")]
    port: Option<String>,
}
