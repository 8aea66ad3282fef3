//! A tonic gRPC server whose calls memprof labels per tenant through its tower layer
//! (`memprof::tower::request_labels`, as docs/labels.md gives it), and its own client: a thread calling
//! `Sessions/Open` over real HTTP/2 on 127.0.0.1, for tenant `acme` three calls in four and `initech` the
//! fourth (the `x-tenant` metadata). Each call keeps a session of 64 KiB allocated by `open_session` (the
//! newest 512 are kept). Prints `grpc ready` once the first call was answered; its endpoints are served on
//! a free port (tests/labels.rs).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tonic::codegen::{BoxFuture, Service, http};

/// `Sessions/Open`'s request.
#[derive(Clone, PartialEq, prost::Message)]
struct Open {
    #[prost(uint32, tag = "1")]
    bytes: u32,
}

/// `Sessions/Open`'s answer: how many sessions the server keeps.
#[derive(Clone, PartialEq, prost::Message)]
struct Opened {
    #[prost(uint64, tag = "1")]
    kept: u64,
}

const PATH: &str = "/memprof.test.Sessions/Open";

#[memprof::main(http = "127.0.0.1:0")]
fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let incoming = tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = incoming.local_addr().unwrap();
        let labels = memprof::tower::request_labels(|_uri, headers| {
            let tenant = headers.get("x-tenant").and_then(|value| value.to_str().ok()).unwrap_or("(unknown)");
            vec![("tenant", tenant.to_owned())]
        });
        let server = tonic::transport::Server::builder().layer(labels).add_service(Sessions::default());
        tokio::spawn(server.serve_with_incoming(incoming));
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}")).unwrap().connect_lazy();
        let mut client = tonic::client::Grpc::new(channel);
        for call in 0u64.. {
            let tenant = if call % 4 == 3 { "initech" } else { "acme" };
            let mut request = tonic::Request::new(Open { bytes: 64 * 1024 });
            request.metadata_mut().insert("x-tenant", tenant.parse().unwrap());
            client.ready().await.unwrap();
            let codec = tonic_prost::ProstCodec::<Open, Opened>::default();
            let path = http::uri::PathAndQuery::from_static(PATH);
            let opened = client.unary(request, path, codec).await.unwrap().into_inner();
            if call == 0 {
                println!("grpc ready ({} kept)", opened.kept);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
}

/// The server's sessions, the newest 512.
#[derive(Clone, Default)]
struct Sessions {
    kept: Arc<Mutex<VecDeque<Vec<u8>>>>,
}

impl tonic::server::NamedService for Sessions {
    const NAME: &'static str = "memprof.test.Sessions";
}

impl Service<http::Request<tonic::body::Body>> for Sessions {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let sessions = self.clone();
        Box::pin(async move {
            if request.uri().path() != PATH {
                return Ok(tonic::Status::unimplemented(request.uri().path().to_owned()).into_http());
            }
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<Opened, Open>::default());
            Ok(grpc.unary(sessions, request).await)
        })
    }
}

impl tonic::server::UnaryService<Open> for Sessions {
    type Response = Opened;
    type Future = BoxFuture<tonic::Response<Opened>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<Open>) -> Self::Future {
        let session = open_session(request.into_inner().bytes as usize);
        let mut kept = self.kept.lock().unwrap();
        if kept.len() == 512 {
            kept.pop_front();
        }
        kept.push_back(session);
        let opened = Opened { kept: kept.len() as u64 };
        Box::pin(async move { Ok(tonic::Response::new(opened)) })
    }
}

#[inline(never)]
fn open_session(bytes: usize) -> Vec<u8> {
    std::hint::black_box(vec![5u8; bytes])
}
