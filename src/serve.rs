//! `lkplake serve`: the lake over the Postgres wire protocol, following new commits.

use clap::Args;
use lkplake_query::exporter::{Exporter, ExporterConfig, Family, http};
use lkplake_query::pg::{self, ServeConfig};
use lkplake_query::{Engine, EngineConfig};
use lkplake_transform::health::{PipelineHealth, PipelineProbe};
use lkplake_transform::lake::Lake;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Root directory of the lake.
    #[arg(long, env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub lake: PathBuf,
    /// Address of the Postgres wire protocol listener.
    #[arg(long, env = "LKPLAKE_PG", default_value = "127.0.0.1:5433")]
    pub pg: SocketAddr,
    /// User name clients log in with.
    #[arg(long, env = "LKPLAKE_PG_USER", default_value = "lkplake")]
    pub user: String,
    /// Password clients log in with (SCRAM-SHA-256). Without one, only a loopback address may
    /// be used and no authentication is asked.
    #[arg(long, env = "LKPLAKE_PG_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Longest a statement may run, rows streamed included; clients may ask for less.
    #[arg(long, env = "LKPLAKE_STATEMENT_TIMEOUT", default_value = "60s", value_parser = crate::units::duration)]
    pub statement_timeout: Duration,
    /// Memory all running queries may use together; beyond it sorts, joins and aggregations
    /// spill to disk or fail with "resources exhausted".
    #[arg(long, env = "LKPLAKE_MEMORY_LIMIT", default_value = "2G", value_parser = crate::units::bytes)]
    pub memory_limit: usize,
    /// Connections beyond this many are turned away (0: no limit).
    #[arg(long, env = "LKPLAKE_MAX_CONNECTIONS", default_value_t = 256)]
    pub max_connections: usize,
    /// Statements executing at once (default: one per core); the others wait their turn within
    /// their statement timeout, so many clients share the memory limit instead of exhausting it.
    #[arg(long, env = "LKPLAKE_MAX_RUNNING")]
    pub max_running: Option<usize>,
    /// Serve Prometheus metrics on this address (`/metrics`, text or OpenMetrics), e.g.
    /// 127.0.0.1:9464.
    #[arg(long, env = "LKPLAKE_HTTP")]
    pub http: Option<SocketAddr>,
    /// Besides the headline series, export the latest value of every series whose metric
    /// matches this regex (as `lkp_metric_value`).
    #[arg(long, env = "LKPLAKE_EXPORT_METRIC")]
    pub export_metric: Option<String>,
    /// Most value series `/metrics` carries; the least recently reported are left out first.
    #[arg(long, env = "LKPLAKE_EXPORT_MAX_SERIES", default_value_t = 10_000)]
    pub export_max_series: usize,
    /// With --http: also expose the pipeline's health (messages produced, dead letters, how far
    /// the lake is behind each partition) read from these Kafka brokers.
    #[command(flatten)]
    pub kafka: crate::pipeline::KafkaArgs,
    /// How often to look for new commits in the lake.
    #[arg(long, env = "LKPLAKE_REFRESH", default_value = "2s", value_parser = crate::units::duration)]
    pub refresh: Duration,
}

pub async fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let config = ServeConfig {
        listen: args.pg,
        user: args.user.clone(),
        password: args.password.clone(),
        statement_timeout: args.statement_timeout,
        max_connections: args.max_connections,
        max_running: args
            .max_running
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
    };
    config.validate()?;
    let engine = Arc::new(
        Engine::open(
            &args.lake,
            &EngineConfig {
                memory_limit: Some(args.memory_limit),
                target_partitions: None,
            },
        )
        .await?,
    );
    pg::prepare(&engine)?;
    let exporter = match args.http {
        Some(listen) => {
            let exporter = Arc::new(Exporter::new(
                Arc::clone(&engine),
                ExporterConfig {
                    metric: args.export_metric.clone(),
                    max_series: args.export_max_series,
                },
            )?);
            exporter.refresh().await?;
            Some((exporter, http::bind(listen).await?, listen))
        }
        None => None,
    };
    let _follow = engine.follow(args.refresh);
    let auth = if config.password.is_some() {
        format!("user {}, password required", config.user)
    } else {
        "no password: loopback only".to_owned()
    };
    eprintln!(
        "lkplake serve: Postgres wire protocol on {} ({auth}), lake {}",
        config.listen,
        args.lake.display()
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let signal = tokio::spawn(async move {
        shutdown().await;
        let _ = stop.send(true);
    });
    let stopping = || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    let metrics = match exporter {
        Some((exporter, listener, listen)) => {
            eprintln!("lkplake serve: Prometheus metrics on http://{listen}/metrics");
            let _follow = exporter.follow(args.refresh);
            if let Some(brokers) = &args.kafka.brokers {
                let lake = Lake::open(&args.lake).await?;
                let probe =
                    PipelineProbe::new(brokers, &args.kafka.topic, &args.kafka.dlq_topic, lake)?;
                watch_pipeline(&exporter, probe, args.refresh);
            }
            Some(tokio::spawn(http::serve(exporter, listener, stopping())))
        }
        None => None,
    };
    pg::serve(engine, &config, stopping()).await?;
    if let Some(metrics) = metrics {
        metrics.await??;
    }
    signal.abort();
    eprintln!("lkplake serve: stopped");
    Ok(())
}

/// Reads the pipeline's health every `every` into the exporter's pipeline families; while
/// Kafka cannot be reached, `lkp_pipeline_up` is 0 and the other pipeline families are absent.
fn watch_pipeline(exporter: &Arc<Exporter>, mut probe: PipelineProbe, every: Duration) {
    let exporter = Arc::downgrade(exporter);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let health = probe.read().await;
            let Some(exporter) = exporter.upgrade() else {
                return;
            };
            exporter.set_pipeline(match health {
                Ok(health) => pipeline_families(&health),
                Err(e) => {
                    tracing::warn!("exporter: reading the pipeline's health failed: {e}");
                    vec![up(0.0)]
                }
            });
        }
    });
}

fn up(value: f64) -> Family {
    Family::gauge(
        "lkp_pipeline_up",
        "1 when Kafka and the lake's progress could be read at the last refresh.",
    )
    .with(vec![], value)
}

fn pipeline_families(health: &PipelineHealth) -> Vec<Family> {
    let mut produced = Family::counter(
        "lkp_ingest_messages",
        "Messages producers wrote to the topic: parsed reports, or dead letters.",
    )
    .with(
        vec![("topic", health.topic.clone())],
        health.produced() as f64,
    );
    if let Some(dead) = health.dead_letters {
        produced = produced.with(vec![("topic", health.dlq_topic.clone())], dead as f64);
    }
    let mut next = Family::gauge(
        "lkp_transform_next_offset",
        "First offset of each reports partition not yet in the lake.",
    );
    let mut lag = Family::gauge(
        "lkp_transform_lag_messages",
        "Messages of each reports partition produced but not yet in the lake.",
    );
    for p in &health.partitions {
        let labels = vec![
            ("topic", health.topic.clone()),
            ("partition", p.partition.to_string()),
        ];
        next = next.with(labels.clone(), p.next_in_lake as f64);
        lag = lag.with(labels, p.lag() as f64);
    }
    vec![up(1.0), produced, next, lag]
}

async fn shutdown() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = terminate => {},
    }
}
