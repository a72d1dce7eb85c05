//! `lkplake-serve`: the lake for the tools a team already runs. A Postgres wire server
//! ([`pg`]: psql, psycopg, Grafana, any Postgres driver) and a Prometheus exporter
//! ([`exporter`], with the pipeline's health from [`pipeline`]), both over one read-only
//! [`Engine`] that follows the lake's new commits.
//!
//! Everything here runs on the caller's runtime except query execution, which the engine keeps
//! on its own threads, so logins and scrapes are answered while heavy queries run. Stopping is
//! [`lkplake_shutdown`]'s: on SIGTERM the listeners stop accepting, statements in flight finish
//! within the grace period, and idle connections are closed.

#![warn(missing_docs)]

mod error;
pub mod exporter;
pub mod pg;
pub mod pipeline;

pub use error::ServeError;

use exporter::{Exporter, ExporterConfig};
use lkplake_kafka::Topics;
use lkplake_lake::LakeUrl;
use lkplake_query::{Engine, EngineConfig};
use lkplake_shutdown::{Drained, Shutdown};
use pipeline::PipelineProbe;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Everything `lkplake serve` is told.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The lake served.
    pub lake: LakeUrl,
    /// The Postgres listener.
    pub pg: pg::ServeConfig,
    /// The query engine's settings (threads, memory).
    pub engine: EngineConfig,
    /// Where `/metrics` is served, if at all.
    pub http: Option<SocketAddr>,
    /// What `/metrics` exports.
    pub exporter: ExporterConfig,

    /// With `http`: the Kafka topics whose progress the exporter reports.
    pub pipeline: Option<Topics>,
    /// How often to look for new commits in the lake.
    pub refresh: Duration,
    /// How long statements in flight may run on after a stop was asked for.
    pub grace: Duration,
}

/// Serves until `shutdown` is cancelled, then drains within the grace period.
pub async fn run(config: ServerConfig, shutdown: &Shutdown) -> Result<Drained, ServeError> {
    config.pg.validate()?;
    config.exporter.validate()?;
    let engine = Arc::new(Engine::open(&config.lake, &config.engine).await?);
    pg::prepare(&engine)?;
    let exporter = match config.http {
        Some(listen) => {
            let exporter = Arc::new(Exporter::new(Arc::clone(&engine), config.exporter.clone())?);
            exporter.refresh().await?;
            Some((exporter, exporter::http::bind(listen).await?, listen))
        }
        None => None,
    };
    // Bound last: a client that can connect finds every listener ready.
    let listener = pg::bind(config.pg.listen).await?;
    let following = Arc::clone(&engine);
    shutdown.every(config.refresh, move || {
        let engine = Arc::clone(&following);
        async move {
            match engine.refresh().await {
                Ok(true) => tracing::info!("lake changed: tables and views refreshed"),
                Ok(false) => {}
                Err(e) => tracing::warn!("refreshing the lake failed, will retry: {e}"),
            }
        }
    });
    let auth = if config.pg.password.is_some() {
        format!("user {}, password required", config.pg.user)
    } else {
        "no password: loopback only".to_owned()
    };
    eprintln!(
        "lkplake serve: Postgres wire protocol on {} ({auth}), lake {}",
        config.pg.listen, config.lake
    );
    if let Some((exporter, listener, listen)) = exporter {
        eprintln!("lkplake serve: Prometheus metrics on http://{listen}/metrics");
        let refreshed = Arc::clone(&exporter);
        shutdown.every(config.refresh, move || {
            let exporter = Arc::clone(&refreshed);
            async move {
                if let Err(e) = exporter.refresh().await {
                    tracing::warn!("exporter: computing /metrics failed, will retry: {e}");
                }
            }
        });
        if let Some(topics) = config.pipeline.clone() {
            let probe = Arc::new(tokio::sync::Mutex::new(
                PipelineProbe::new(topics, &config.lake).await?,
            ));
            let published = Arc::clone(&exporter);
            shutdown.every(config.refresh, move || {
                let (probe, exporter) = (Arc::clone(&probe), Arc::clone(&published));
                async move { probe.lock().await.publish(&exporter).await }
            });
        }
        shutdown.spawn(exporter::http::serve(exporter, listener, shutdown.clone()));
    }
    pg::serve(listener, engine, &config.pg, shutdown.token(), config.grace).await;
    let drained = shutdown.drain(config.grace).await;
    eprintln!("lkplake serve: stopped");
    Ok(drained)
}
