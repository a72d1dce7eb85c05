//! `lkplake serve`: the lake over the Postgres wire protocol, following new commits.

use clap::Args;
use lkplake_query::EngineConfig;
use lkplake_serve::ServerConfig;
use lkplake_serve::exporter::ExporterConfig;
use lkplake_serve::pg::ServeConfig;
use lkplake_shutdown::{Drained, Shutdown};
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub lake: crate::args::LakeArg,
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
    /// Logged-in connections beyond this many are refused with 53300 (0: no limit). A
    /// connection counts once it has logged in.
    #[arg(long, env = "LKPLAKE_MAX_CONNECTIONS", default_value_t = 256)]
    pub max_connections: usize,
    /// Connections still logging in at once; a new socket beyond them waits up to 1 s for a
    /// place, then is refused with 53300.
    #[arg(long, env = "LKPLAKE_MAX_STARTING", default_value_t = 64)]
    pub max_starting: usize,
    /// How long a connection may take to log in before it is closed.
    #[arg(long, env = "LKPLAKE_STARTUP_TIMEOUT", default_value = "10s", value_parser = crate::units::duration)]
    pub startup_timeout: Duration,
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
    /// Threads that execute queries (default: one per core), apart from those that accept
    /// connections and answer scrapes. 0 runs queries on those same threads, as lkplake did
    /// before it had a query executor: only for comparing the two.
    #[arg(long, env = "LKPLAKE_QUERY_THREADS")]
    pub query_threads: Option<usize>,
    /// After SIGINT/SIGTERM, how long statements in flight may run on before the server exits.
    #[arg(long, env = "LKPLAKE_GRACE", default_value = "30s", value_parser = crate::units::duration)]
    pub grace: Duration,
    /// How often to look for new commits in the lake.
    #[arg(long, env = "LKPLAKE_REFRESH", default_value = "2s", value_parser = crate::units::duration)]
    pub refresh: Duration,
}

pub async fn run(args: &ServeArgs, shutdown: &Shutdown) -> anyhow::Result<()> {
    let config = ServerConfig {
        lake: args.lake.url.clone(),
        pg: ServeConfig {
            listen: args.pg,
            user: args.user.clone(),
            password: args.password.clone(),
            statement_timeout: args.statement_timeout,
            max_connections: args.max_connections,
            max_starting: args.max_starting,
            startup_timeout: args.startup_timeout,
            max_running: args
                .max_running
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        },
        engine: EngineConfig {
            memory_limit: Some(args.memory_limit),
            target_partitions: None,
            query_threads: args.query_threads,
            keep_views: true,
        },
        http: args.http,
        exporter: ExporterConfig {
            metric: args.export_metric.clone(),
            max_series: args.export_max_series,
        },
        pipeline: args.http.and(args.kafka.topics_if_given()),
        refresh: args.refresh,
        grace: args.grace,
    };
    shutdown.on_signals("serve");
    if let Drained::Abandoned(left) = lkplake_serve::run(config, shutdown).await? {
        eprintln!("lkplake serve: {left} tasks were still running at the end of the grace period");
    }
    Ok(())
}
