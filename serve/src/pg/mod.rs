//! The Postgres wire server (`lkplake serve --pg`): psql, Python's psycopg and Grafana's
//! PostgreSQL data source query the lake as if it were a Postgres database.
//!
//! Built on `datafusion-postgres` (pgwire, pg_catalog, Postgres functions), with what a server
//! facing a team needs on top: SCRAM passwords, a read-only policy checked before planning, a
//! statement timeout that covers execution and streaming (not only planning), the engine's
//! memory limit, and a connection limit.

mod auth;
pub mod functions;
mod rewrite;
mod savepoint;

use crate::ServeError;
use async_trait::async_trait;
use auth::{Account, Startup};
use datafusion::common::ParamValues;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::setup_pg_catalog;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::hooks::cursor::CursorStatementHook;
use datafusion_postgres::hooks::set_show::SetShowHook;
use datafusion_postgres::hooks::transactions::TransactionStatementHook;
use datafusion_postgres::pgwire::api::cancel::DefaultCancelHandler;
use datafusion_postgres::pgwire::api::portal::{Format, Portal};
use datafusion_postgres::pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use datafusion_postgres::pgwire::api::results::{FieldInfo, Response};
use datafusion_postgres::pgwire::api::stmt::QueryParser;
use datafusion_postgres::pgwire::api::store::{Entry, PortalStore};
use datafusion_postgres::pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionManager, DEFAULT_NAME, ErrorHandler,
    PgWireServerHandlers, Type,
};
use datafusion_postgres::pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::PgWireBackendMessage;
use datafusion_postgres::pgwire::messages::extendedquery::Execute;
use datafusion_postgres::pgwire::messages::response::TransactionStatus;
use datafusion_postgres::pgwire::messages::simplequery::Query;
use datafusion_postgres::pgwire::tokio::process_socket;
use datafusion_postgres::{DfSessionService, Parser, QueryHook};
use futures::{Sink, Stream, StreamExt};
use lkplake_query::Engine;
use lkplake_query::policy::{self, Refused};
use lkplake_shutdown::Token as CancellationToken;
use std::collections::HashMap;
use std::fmt::Debug;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// How the server listens and what it allows.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address and port of the listener.
    pub listen: SocketAddr,
    /// The one user name accepted.
    pub user: String,

    /// `None` runs without authentication, which only a loopback address allows.
    pub password: Option<String>,
    /// The longest a statement may run, streaming its rows included. A client may ask for less
    /// with `SET statement_timeout`, never for more.
    pub statement_timeout: Duration,
    /// Connections beyond this are turned away; 0 means no limit.
    pub max_connections: usize,
    /// Statements executing at once; the others wait (within their statement timeout). The
    /// memory limit is shared by the running ones, so this is what keeps many clients from
    /// exhausting it.
    pub max_running: usize,
}

impl ServeConfig {
    /// Refuses to expose the lake without a password beyond this machine.
    pub fn validate(&self) -> Result<(), ServeError> {
        if self.password.is_none() && !self.listen.ip().is_loopback() {
            return Err(ServeError::NeedsPassword {
                listen: self.listen,
            });
        }
        Ok(())
    }
}

/// Prepares `engine`'s session for Postgres clients: the pg_catalog schema and the functions
/// clients call while connecting.
pub fn prepare(engine: &Engine) -> Result<(), ServeError> {
    let ctx = engine.context();
    setup_pg_catalog(ctx, lkplake_query::engine::CATALOG, EmptyContextProvider)
        .map_err(|e| ServeError::from(*e))?;
    functions::register(ctx);
    Ok(())
}

/// Binds the Postgres listener, so a taken port is reported before the server says it is up.
pub async fn bind(listen: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            what: "the Postgres wire protocol (--pg)",
            listen,
            source,
        })
}

/// How often a stopping server looks for connections that went idle.
const IDLE_POLL: Duration = Duration::from_millis(100);

/// Serves `engine` on `listener` until `stop` is cancelled, then stops accepting, lets every
/// statement in flight finish (within `grace`) and closes connections as they go idle. Call
/// [`prepare`] on the engine first.
///
/// A statement that arrives after the stop is refused with Postgres' own FATAL 57P01
/// ("terminating connection due to administrator command"), so a client sees a clean error,
/// never a reset connection in the middle of an answer.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    config: &ServeConfig,
    stop: CancellationToken,
    grace: Duration,
) {
    let activity = Arc::new(Activity::default());
    let handlers = Arc::new(Handlers::new(
        engine.context(),
        config,
        stop.clone(),
        Arc::clone(&activity),
    ));
    let limiter =
        (config.max_connections > 0).then(|| Arc::new(Semaphore::new(config.max_connections)));
    let connections = TaskTracker::new();
    loop {
        let (socket, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: keep serving the others.
                    tracing::warn!("accepting a Postgres connection failed: {e}");
                    continue;
                }
            },
        };
        let permit = match &limiter {
            Some(limiter) => match Arc::clone(limiter).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    tracing::warn!(
                        %peer,
                        max = config.max_connections,
                        "connection refused: --max-connections reached"
                    );
                    continue;
                }
            },
            None => None,
        };
        connections.spawn(connection(
            socket,
            peer,
            Arc::clone(&handlers),
            stop.clone(),
            Arc::clone(&activity),
            permit,
        ));
    }
    drop(listener);
    connections.close();
    tracing::info!(
        open = connections.len(),
        "stopped accepting Postgres connections"
    );
    if tokio::time::timeout(grace, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            ?grace,
            "connections still busy at the end of the grace period: closing them"
        );
    }
}

/// One client connection, until it ends or, once the server stops, until it is idle.
async fn connection(
    socket: TcpStream,
    peer: SocketAddr,
    handlers: Arc<Handlers>,
    stop: CancellationToken,
    activity: Arc<Activity>,
    _permit: Option<OwnedSemaphorePermit>,
) {
    // A second handle on the socket, for the goodbye of a stopping server: pgwire owns the
    // first one for as long as the connection is served.
    let (socket, goodbye) = match split_for_goodbye(socket) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(%peer, "cannot serve a Postgres connection: {e}");
            return;
        }
    };
    let served = process_socket(socket, None, handlers);
    tokio::pin!(served);
    tokio::select! {
        ended = &mut served => {
            if let Err(e) = ended {
                tracing::debug!(%peer, "Postgres connection: {e}");
            }
            activity.forget(peer);
            return;
        }
        () = stop.cancelled() => {}
    }
    // Stopping: the statement in flight runs to its end (its rows included); the connection
    // is closed once it has been idle for a poll, which also lets the client read the end of
    // the answer.
    loop {
        tokio::select! {
            _ = &mut served => {
                activity.forget(peer);
                return;
            }
            () = tokio::time::sleep(IDLE_POLL) => {
                if activity.idle_for(peer) >= IDLE_POLL {
                    break;
                }
            }
        }
    }
    activity.forget(peer);
    // What Postgres sends every idle backend in a fast shutdown, so the client reports the
    // reason instead of "server closed the connection unexpectedly".
    say_goodbye(goodbye);
}

fn split_for_goodbye(socket: TcpStream) -> std::io::Result<(TcpStream, std::net::TcpStream)> {
    let socket = socket.into_std()?;
    let goodbye = socket.try_clone()?;
    Ok((TcpStream::from_std(socket)?, goodbye))
}

/// Writes a FATAL 57P01 ErrorResponse and closes the connection. Only called between
/// statements, when the server is not in the middle of a message of its own.
fn say_goodbye(mut socket: std::net::TcpStream) {
    use std::io::Write;
    let mut fields = Vec::new();
    for (code, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "57P01"),
        (b'M', "terminating connection due to administrator command"),
    ] {
        fields.push(code);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    let length = u32::try_from(fields.len() + 4).unwrap_or(u32::MAX);
    message.extend_from_slice(&length.to_be_bytes());
    message.extend_from_slice(&fields);
    // The socket is non-blocking and the message far smaller than its send buffer.
    if let Err(e) = socket.write_all(&message) {
        tracing::debug!("saying goodbye to a client: {e}");
    }
    let _ = socket.shutdown(std::net::Shutdown::Both);
}

/// Statements running per connection and when each connection last started or finished one,
/// so a stopping server knows which connections it may close.
#[derive(Debug, Default)]
struct Activity {
    connections: std::sync::Mutex<HashMap<SocketAddr, (usize, Instant)>>,
}

impl Activity {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<SocketAddr, (usize, Instant)>) -> T) -> T {
        // A poisoned lock only means a panic while counting; the counts are still usable.
        f(&mut self.connections.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn start(self: &Arc<Self>, peer: SocketAddr) -> Arc<Running> {
        self.with(|c| {
            let entry = c.entry(peer).or_insert((0, Instant::now()));
            entry.0 += 1;
            entry.1 = Instant::now();
        });
        Arc::new(Running {
            activity: Arc::clone(self),
            peer,
        })
    }

    /// How long the connection has had no statement running (zero while one runs).
    fn idle_for(&self, peer: SocketAddr) -> Duration {
        self.with(|c| match c.get(&peer) {
            Some((0, since)) => since.elapsed(),
            Some(_) => Duration::ZERO,
            None => Duration::MAX,
        })
    }

    fn forget(&self, peer: SocketAddr) {
        self.with(|c| c.remove(&peer));
    }
}

/// A statement running on a connection, until its last row is sent or it is dropped.
struct Running {
    activity: Arc<Activity>,
    peer: SocketAddr,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.activity.with(|c| {
            if let Some(entry) = c.get_mut(&self.peer) {
                entry.0 = entry.0.saturating_sub(1);
                entry.1 = Instant::now();
            }
        });
    }
}

struct Handlers {
    service: Arc<LakeService>,
    account: Option<Arc<Account>>,
    connections: Arc<ConnectionManager>,
    cancel: Arc<DefaultCancelHandler>,
}

impl Handlers {
    fn new(
        ctx: &SessionContext,
        config: &ServeConfig,
        stop: CancellationToken,
        activity: Arc<Activity>,
    ) -> Self {
        let hooks: Vec<Arc<dyn QueryHook>> = vec![
            Arc::new(ReadOnlyHook),
            Arc::new(savepoint::SavepointHook),
            Arc::new(CursorStatementHook),
            Arc::new(SetShowHook),
            Arc::new(TransactionStatementHook),
        ];
        let inner = DfSessionService::new_with_hooks(Arc::new(ctx.clone()), hooks);
        let parser = Arc::new(GuardedParser {
            inner: inner.query_parser(),
        });
        let connections = Arc::new(ConnectionManager::new());
        Self {
            service: Arc::new(LakeService {
                inner,
                parser,
                statement_timeout: config.statement_timeout,
                running: Arc::new(Semaphore::new(config.max_running.max(1))),
                stop,
                activity,
            }),
            account: config
                .password
                .as_deref()
                .map(|p| Arc::new(Account::new(&config.user, p))),
            cancel: Arc::new(DefaultCancelHandler::new(Arc::clone(&connections))),
            connections,
        }
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.service)
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.service)
    }

    fn startup_handler(&self) -> Arc<impl datafusion_postgres::pgwire::api::auth::StartupHandler> {
        Arc::new(Startup::new(self.account.as_ref(), &self.connections))
    }

    fn error_handler(&self) -> Arc<impl ErrorHandler> {
        Arc::new(LogErrors)
    }

    fn cancel_handler(&self) -> Arc<impl datafusion_postgres::pgwire::api::cancel::CancelHandler> {
        Arc::clone(&self.cancel)
    }
}

struct LogErrors;

impl ErrorHandler for LogErrors {
    fn on_error<C>(&self, client: &C, error: &mut PgWireError)
    where
        C: ClientInfo,
    {
        tracing::info!(client = %client.socket_addr(), "query error: {error}");
    }
}

/// SQLSTATE 25006, `read_only_sql_transaction`: what Postgres answers to a write on a
/// read-only server, so clients and their users recognise it.
fn refused(refusal: &Refused) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".to_owned(),
        "25006".to_owned(),
        refusal.to_string(),
    )))
}

/// SQLSTATE 57014, `query_canceled`, with Postgres' own wording.
fn timed_out(limit: Duration) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".to_owned(),
        "57014".to_owned(),
        format!(
            "canceling statement due to statement timeout ({} ms)",
            limit.as_millis()
        ),
    )))
}

/// The statement-level policy, run on every statement the Postgres-compatible parser produced
/// (catching what the DataFusion parser could not read).
struct ReadOnlyHook;

#[async_trait]
impl QueryHook for ReadOnlyHook {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        _ctx: &SessionContext,
        _client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        policy::check_statement(statement)
            .err()
            .map(|r| Err(refused(&r)))
    }

    async fn handle_extended_parse_query(
        &self,
        statement: &Statement,
        _ctx: &SessionContext,
        _client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        policy::check_statement(statement)
            .err()
            .map(|r| Err(refused(&r)))
    }

    async fn handle_extended_query(
        &self,
        _statement: &Statement,
        _plan: &LogicalPlan,
        _params: &ParamValues,
        _ctx: &SessionContext,
        _client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        None
    }
}

type DfStatement = <Parser as QueryParser>::Statement;

/// The extended protocol's parser with the read-only policy in front.
struct GuardedParser {
    inner: Arc<Parser>,
}

#[async_trait]
impl QueryParser for GuardedParser {
    type Statement = DfStatement;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        policy::check_sql(sql).map_err(|r| refused(&r))?;
        let sql = rewrite::search_path(sql);
        let sql = rewrite::catalog_subqueries(&sql);
        self.inner.parse_sql(client, &sql, types).await
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        self.inner.get_parameter_types(stmt)
    }

    fn get_result_schema(
        &self,
        stmt: &Self::Statement,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        self.inner.get_result_schema(stmt, column_format)
    }
}

/// `DfSessionService` with the policy checked first and the statement timeout applied to the
/// whole statement: planning, execution and the rows as they stream out.
struct LakeService {
    inner: DfSessionService,
    parser: Arc<GuardedParser>,
    statement_timeout: Duration,
    running: Arc<Semaphore>,
    stop: CancellationToken,
    activity: Arc<Activity>,
}

/// SQLSTATE 57P01, `admin_shutdown`, with Postgres' own wording: a statement that arrives
/// while the server stops.
fn shutting_down() -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "FATAL".to_owned(),
        "57P01".to_owned(),
        "terminating connection due to administrator command".to_owned(),
    )))
}

/// What a statement holds while it runs: its turn to execute and its place in the
/// connection's activity.
#[derive(Clone)]
struct Held {
    _permit: Arc<OwnedSemaphorePermit>,
    _running: Arc<Running>,
}

impl LakeService {
    /// Starts a statement: refused once the server stops, else counted as running and
    /// admitted within its deadline.
    async fn begin<C: ClientInfo + ?Sized>(
        &self,
        client: &C,
        deadline: Instant,
        limit: Duration,
    ) -> PgWireResult<Held> {
        if self.stop.is_cancelled() {
            return Err(shutting_down());
        }
        let running = self.activity.start(client.socket_addr());
        let permit = self.admit(deadline, limit).await?;
        Ok(Held {
            _permit: permit,
            _running: running,
        })
    }

    /// Waits for a turn to execute, within the statement's deadline.
    async fn admit(
        &self,
        deadline: Instant,
        limit: Duration,
    ) -> PgWireResult<Arc<OwnedSemaphorePermit>> {
        tokio::time::timeout_at(deadline, Arc::clone(&self.running).acquire_owned())
            .await
            .map_err(|_| timed_out(limit))?
            .map(Arc::new)
            .map_err(|e| PgWireError::ApiError(Box::new(e)))
    }

    /// The client's `statement_timeout` when it asked for one shorter than the server's.
    fn limit<C: ClientInfo + ?Sized>(&self, client: &C) -> Duration {
        client
            .metadata()
            .get("statement_timeout_ms")
            .and_then(|ms| ms.parse::<u64>().ok())
            .map(Duration::from_millis)
            .filter(|&asked| asked < self.statement_timeout)
            .unwrap_or(self.statement_timeout)
    }
}

type RowStream = Pin<
    Box<
        dyn Stream<Item = PgWireResult<datafusion_postgres::pgwire::messages::data::DataRow>>
            + Send,
    >,
>;

/// Ends `rows` with a timeout error once `deadline` passes; dropping the inner stream stops
/// DataFusion's execution.
/// The permit is held until the last row is sent (or the stream dropped): execution is lazy,
/// so the statement is running for as long as its rows stream.
fn until(rows: RowStream, deadline: Instant, limit: Duration, permit: Held) -> RowStream {
    let sleep = Box::pin(tokio::time::sleep_until(deadline));
    Box::pin(futures::stream::unfold(
        Some((rows, sleep, permit)),
        move |state| async move {
            let (mut rows, mut sleep, permit) = state?;
            tokio::select! {
                biased;
                row = rows.next() => row.map(|row| (row, Some((rows, sleep, permit)))),
                () = &mut sleep => Some((Err(timed_out(limit)), None)),
            }
        },
    ))
}

fn bounded(response: Response, deadline: Instant, limit: Duration, held: &Held) -> Response {
    match response {
        Response::Query(mut query) => {
            let rows = std::mem::replace(&mut query.data_rows, Box::pin(futures::stream::empty()));
            query.data_rows = until(rows, deadline, limit, held.clone());
            Response::Query(query)
        }
        other => other,
    }
}

/// `ROLLBACK TO SAVEPOINT` leaves a failed transaction without ending it. pgwire settles a
/// statement's transaction status from the status before it, so it is set back here, before
/// the statement runs.
fn recover_for<C: ClientInfo>(client: &mut C, sql: &str) {
    if client.transaction_status() == TransactionStatus::Error
        && savepoint::is_rollback_to_savepoint(sql)
    {
        client.set_transaction_status(TransactionStatus::Transaction);
    }
}

#[async_trait]
impl SimpleQueryHandler for LakeService {
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        recover_for(client, &query.query);
        self._on_query(client, query).await
    }

    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        policy::check_sql(query).map_err(|r| refused(&r))?;
        let query = rewrite::search_path(query);
        let query = rewrite::catalog_subqueries(&query);
        let limit = self.limit(client);
        let deadline = Instant::now() + limit;
        let held = self.begin(client, deadline, limit).await?;
        let responses = tokio::time::timeout_at(
            deadline,
            SimpleQueryHandler::do_query(&self.inner, client, &query),
        )
        .await
        .map_err(|_| timed_out(limit))??;
        Ok(responses
            .into_iter()
            .map(|r| bounded(r, deadline, limit, &held))
            .collect())
    }
}

#[async_trait]
impl ExtendedQueryHandler for LakeService {
    type Statement = DfStatement;
    type QueryParser = GuardedParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::clone(&self.parser)
    }

    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let portal = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        if let Some(Entry::Value(portal)) = client.portal_store().get_portal(portal) {
            recover_for(client, &portal.statement.statement.0);
        }
        self._on_execute(client, message).await
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let limit = self.limit(client);
        let deadline = Instant::now() + limit;
        let held = self.begin(client, deadline, limit).await?;
        let response = tokio::time::timeout_at(
            deadline,
            ExtendedQueryHandler::do_query(&self.inner, client, portal, max_rows),
        )
        .await
        .map_err(|_| timed_out(limit))??;
        Ok(bounded(response, deadline, limit, &held))
    }
}
