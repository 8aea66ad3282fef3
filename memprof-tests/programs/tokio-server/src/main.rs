//! A key-value server in the shape of tokio's mini-redis tutorial, driven by its own clients: a listener
//! task accepts connections and spawns one task per connection under a `tracing` span; each connection
//! reads `SET key value` lines into frames and stores the values in a shared map. The store is kept to the
//! end, so the heap profile jemalloc writes at exit holds it. Each of the four clients sets
//! `TOKIO_SERVER_KEYS` keys (2,000 unless told), and the time they took is printed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tracing::Instrument;

type Store = Arc<Mutex<HashMap<String, Bytes>>>;

/// One command of the protocol.
enum Command {
    Set { key: String, value: Bytes },
    Get { key: String },
}

impl Command {
    /// Parses one line: `SET key value` or `GET key`.
    fn parse(line: &str) -> Option<Command> {
        let mut words = line.split_whitespace();
        match (words.next()?, words.next()?) {
            ("SET", key) => {
                let mut value = BytesMut::with_capacity(256);
                value.extend_from_slice(words.next()?.as_bytes());
                Some(Command::Set { key: key.to_owned(), value: value.freeze() })
            }
            ("GET", key) => Some(Command::Get { key: key.to_owned() }),
            _ => None,
        }
    }
}

/// Serves one connection until it closes.
async fn handle(stream: TcpStream, store: Store) {
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let answer = match Command::parse(&line) {
            Some(Command::Set { key, value }) => {
                store.lock().unwrap().insert(key, value);
                "OK\n".to_owned()
            }
            Some(Command::Get { key }) => match store.lock().unwrap().get(&key) {
                Some(value) => format!("{}\n", String::from_utf8_lossy(value)),
                None => "NIL\n".to_owned(),
            },
            None => "ERR\n".to_owned(),
        };
        if writer.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Accepts connections for ever, a task each.
async fn listen(listener: TcpListener, store: Store) {
    while let Ok((stream, peer)) = listener.accept().await {
        let store = Arc::clone(&store);
        tokio::spawn(handle(stream, store).instrument(tracing::info_span!("connection", %peer)));
    }
}

/// A client setting `count` keys, each answered before the next.
async fn client(address: std::net::SocketAddr, client: usize, count: usize) {
    let stream = TcpStream::connect(address).await.unwrap();
    let (reader, mut writer) = stream.into_split();
    let mut answers = BufReader::new(reader).lines();
    for key in 0..count {
        let value = "v".repeat(100 + key % 100);
        writer.write_all(format!("SET key:{client}:{key} {value}\n").as_bytes()).await.unwrap();
        answers.next_line().await.unwrap();
    }
}

/// What the server keeps from start-up, allocated through the standard library's generic and inlined
/// code (`OsString::push`, a boxed iterator's `next`, a scoped thread's result, `to_string`, a boxed
/// `FnOnce`), whose frames binutils names with their types and traits: kept to the end, so the final
/// heap profile holds them.
#[inline(never)]
fn start_up_tables() -> Vec<Box<dyn std::any::Any + Send>> {
    let mut kept: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
    let mut path = std::ffi::OsString::new();
    for part in 0..512 {
        path.push(format!("/part-{part:04}"));
    }
    kept.push(Box::new(path));
    let numbers: Box<dyn Iterator<Item = Vec<u64>>> = Box::new((0..64u64).map(|row| vec![row; 512]));
    kept.push(Box::new(numbers.collect::<Vec<_>>()));
    let joined = std::thread::scope(|scope| scope.spawn(|| vec![7u8; 64 * 1024]).join().unwrap());
    kept.push(Box::new(joined));
    kept.push(Box::new((0..4096u32).map(|number| number.to_string()).collect::<Vec<String>>()));
    let build: Box<dyn FnOnce() -> Vec<u8> + Send> = Box::new(|| vec![1u8; 32 * 1024]);
    kept.push(Box::new(build()));
    kept
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(feature = "memprof", memprof::main(env = "TOKIO_SERVER_ENDPOINTS"))]
async fn main() {
    let keys = std::env::var("TOKIO_SERVER_KEYS").ok().and_then(|text| text.parse().ok()).unwrap_or(2_000);
    let store: Store = Arc::default();
    let tables = start_up_tables();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(listen(listener, Arc::clone(&store)));
    let started = std::time::Instant::now();
    let clients: Vec<_> = (0..4).map(|id| tokio::spawn(client(address, id, keys))).collect();
    for client in clients {
        client.await.unwrap();
    }
    let milliseconds = started.elapsed().as_secs_f64() * 1000.0;
    println!("tokio-server: {} keys in {milliseconds:.1} ms", store.lock().unwrap().len());
    // Kept to the exit, where jemalloc writes its final heap profile.
    std::mem::forget(store);
    std::mem::forget(tables);
}
