//! The HTTP listener of the exporter: `GET /metrics` answered from the exporter's rendered
//! content in the format the client's `Accept` header asks for. Nothing else is served.

use super::Exporter;
use super::exposition::Format;
use crate::ServeError;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use lkplake_shutdown::{Shutdown, Token as CancellationToken};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

/// Binds `listen`, so a taken port is reported before the server says it is up.
pub async fn bind(listen: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            what: "the Prometheus exporter (--http)",
            listen,
            source,
        })
}

/// Serves `/metrics` on `listener` until the stop. Each connection is a task of `shutdown`,
/// so its drain waits for the scrapes in flight.
pub async fn serve(
    exporter: Arc<Exporter>,
    listener: TcpListener,
    shutdown: Shutdown,
) -> Result<(), ServeError> {
    let stop = shutdown.token();
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: keep serving the others.
                    tracing::warn!("exporter: accepting a connection failed: {e}");
                    continue;
                }
            },
        };
        shutdown.spawn(connection(
            Arc::clone(&exporter),
            stream,
            peer,
            stop.clone(),
        ));
    }
}

/// How long a stopping server gives a scrape in flight to be sent.
const LAST_SCRAPE: std::time::Duration = std::time::Duration::from_secs(5);

/// One client's scrapes until it hangs up or the server stops. At the stop, a scrape in flight
/// is answered and the connection then closed: Prometheus keeps its connections alive, and an
/// idle one would otherwise hold the drain open until its deadline.
async fn connection(
    exporter: Arc<Exporter>,
    stream: TcpStream,
    peer: SocketAddr,
    stop: CancellationToken,
) {
    let service = service_fn(move |req| {
        let exporter = Arc::clone(&exporter);
        async move { Ok::<_, Infallible>(respond(&exporter, &req)) }
    });
    let served = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(served);
    let ended = tokio::select! {
        ended = served.as_mut() => ended,
        () = stop.cancelled() => {
            served.as_mut().graceful_shutdown();
            // A client that connected but sends nothing, or reads slowly, is not waited for.
            match tokio::time::timeout(LAST_SCRAPE, served).await {
                Ok(ended) => ended,
                Err(_) => return,
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!("exporter: connection from {peer}: {e}");
    }
}

fn respond(exporter: &Exporter, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *resp.status_mut() = status;
        resp.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        resp
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    match req.uri().path() {
        "/metrics" => {
            let accept = req.headers().get(ACCEPT).and_then(|a| a.to_str().ok());
            let format = Format::negotiate(accept);
            let body = exporter.scrape(format);
            let mut resp = Response::new(Full::new(Bytes::from(body)));
            resp.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            );
            resp
        }
        "/" => text(
            StatusCode::OK,
            "lkplake exporter: the metrics are at /metrics\n",
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        ),
    }
}
