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
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

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

/// Serves `/metrics` on `listener` until `shutdown` completes.
pub async fn serve(
    exporter: Arc<Exporter>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: keep serving the others.
                    tracing::warn!("exporter: accepting a connection failed: {e}");
                    continue;
                }
            },
        };
        let exporter = Arc::clone(&exporter);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let exporter = Arc::clone(&exporter);
                async move { Ok::<_, Infallible>(respond(&exporter, &req)) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("exporter: connection from {peer}: {e}");
            }
        });
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
