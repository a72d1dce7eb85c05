//! `lkplake serve`: the lake over the Postgres wire protocol, following new commits.

use clap::Args;
use lkplake_query::pg::{self, ServeConfig};
use lkplake_query::{Engine, EngineConfig};
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
    pg::serve(engine, &config, shutdown()).await?;
    eprintln!("lkplake serve: stopped");
    Ok(())
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
