//! The Postgres wire server (`lkplake serve --pg`): psql, Python's psycopg and Grafana's
//! PostgreSQL data source query the lake as if it were a Postgres database.
//!
//! Built on `datafusion-postgres` (pgwire, pg_catalog, Postgres functions), with what a server
//! facing a team needs on top: SCRAM passwords, a read-only policy checked before planning, a
//! statement timeout that covers execution and streaming (not only planning), the engine's
//! memory limit, and a connection limit.

mod admission;
mod auth;
mod bounded;
mod bounded_agg;
mod cursor;
mod execute;
pub mod functions;
mod lease;
mod rewrite;
mod savepoint;

use crate::ServeError;
use async_trait::async_trait;
use auth::{Account, Admission, Startup};
use cursor::{CursorHook, Cursors};
use datafusion::common::ParamValues;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::setup_pg_catalog;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::hooks::set_show::SetShowHook;
use datafusion_postgres::hooks::transactions::TransactionStatementHook;
use datafusion_postgres::pgwire::api::cancel::DefaultCancelHandler;
use datafusion_postgres::pgwire::api::portal::{Format, Portal, PortalExecutionState};
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
use futures::Sink;
use lease::Lease;
use lkplake_query::Engine;
use lkplake_query::policy::{self, Refused};
use lkplake_shutdown::Token as CancellationToken;
use std::collections::HashMap;
use std::fmt::Debug;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// The most SQL text one statement message may carry. Parsing and planning run on the
/// connection's task, so the text's size is what bounds their cost.
pub const MAX_SQL_BYTES: usize = 1 << 20;

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
    /// Logged-in connections beyond this are refused with 53300; 0 means no limit.
    pub max_connections: usize,
    /// Connections still starting up (not yet logged in) at once; beyond it a new socket is
    /// refused with 53300 at once.
    pub max_starting: usize,
    /// How long a connection may take to log in before it is closed.
    pub startup_timeout: Duration,
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
    let shared = Arc::new(Shared::new(engine.context(), config, stop.clone()));
    let starting = Arc::new(Semaphore::new(config.max_starting.max(1)));
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
        connections.spawn(admit(
            socket,
            peer,
            Arc::clone(&shared),
            Arc::clone(&starting),
            config.max_starting,
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

/// How long a new socket waits for a place among the connections logging in before it is
/// refused: long enough for connections that just ended to give theirs back.
const STARTING_WAIT: Duration = Duration::from_secs(1);

/// Serves a new socket once it has a place among the connections logging in, or refuses it
/// with 53300.
async fn admit(
    socket: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    starting: Arc<Semaphore>,
    max_starting: usize,
) {
    match tokio::time::timeout(STARTING_WAIT, starting.acquire_owned()).await {
        Ok(Ok(permit)) => connection(socket, peer, shared, permit).await,
        _ => {
            tracing::warn!(
                %peer,
                max = max_starting,
                "connection refused: too many connections are still logging in"
            );
            refuse(
                socket,
                &auth::too_many_connections(&format!(
                    "{max_starting} connections are still logging in"
                )),
            );
        }
    }
}

/// One client connection, until it ends or, once the server stops, until it is idle. One
/// that has not logged in within the startup timeout is closed.
async fn connection(
    socket: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    starting: OwnedSemaphorePermit,
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
    let admission = Arc::new(Admission::new(
        shared.slots.clone(),
        shared.max_connections,
        starting,
    ));
    let handlers = Arc::new(Handlers::new(&shared, Arc::clone(&admission)));
    let served = process_socket(socket, None, handlers);
    tokio::pin!(served);
    let expired = startup_expired(&admission, shared.startup_timeout);
    tokio::pin!(expired);
    tokio::select! {
        ended = &mut served => {
            if let Err(e) = ended {
                tracing::debug!(%peer, "Postgres connection: {e}");
            }
            shared.activity.forget(peer);
            return;
        }
        () = &mut expired => {
            tracing::info!(%peer, timeout = ?shared.startup_timeout, "closing a connection that did not log in in time");
            say(goodbye, &startup_timed_out(shared.startup_timeout));
            return;
        }
        () = shared.stop.cancelled() => {}
    }
    // Stopping: the statement in flight runs to its end (its rows included); the connection
    // is closed once it has been idle for a poll, which also lets the client read the end of
    // the answer.
    loop {
        tokio::select! {
            _ = &mut served => {
                shared.activity.forget(peer);
                return;
            }
            () = tokio::time::sleep(IDLE_POLL) => {
                if shared.activity.idle_for(peer) >= IDLE_POLL {
                    break;
                }
            }
        }
    }
    shared.activity.forget(peer);
    // What Postgres sends every idle backend in a fast shutdown, so the client reports the
    // reason instead of "server closed the connection unexpectedly".
    say(goodbye, &admin_shutdown("FATAL"));
}

/// Completes once `timeout` has passed without the connection logging in; never after.
async fn startup_expired(admission: &Admission, timeout: Duration) {
    tokio::time::sleep(timeout).await;
    if admission.is_authenticated() {
        std::future::pending::<()>().await;
    }
}

/// SQLSTATE 08006 with Postgres' wording for a login that took too long.
fn startup_timed_out(timeout: Duration) -> ErrorInfo {
    ErrorInfo::new(
        "FATAL".to_owned(),
        "08006".to_owned(),
        format!(
            "canceling authentication due to timeout (the login must finish within {} ms)",
            timeout.as_millis()
        ),
    )
}

/// Answers a socket that is turned away before any message is read.
fn refuse(socket: TcpStream, error: &ErrorInfo) {
    match socket.into_std() {
        Ok(socket) => say(socket, error),
        Err(e) => tracing::debug!("refusing a client: {e}"),
    }
}

fn split_for_goodbye(socket: TcpStream) -> std::io::Result<(TcpStream, std::net::TcpStream)> {
    let socket = socket.into_std()?;
    let goodbye = socket.try_clone()?;
    Ok((TcpStream::from_std(socket)?, goodbye))
}

/// Writes an ErrorResponse and closes the connection. Only called when the server is not in
/// the middle of a message of its own (between statements, or before the startup finished).
fn say(mut socket: std::net::TcpStream, error: &ErrorInfo) {
    use std::io::Write;
    let mut fields = Vec::new();
    for (code, value) in [
        (b'S', error.severity.as_str()),
        (b'V', error.severity.as_str()),
        (b'C', error.code.as_str()),
        (b'M', error.message.as_str()),
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

/// What every connection of a server shares.
struct Shared {
    /// The engine's session: each connection runs in a copy of it, which shares its tables,
    /// functions, memory pool and query executor but keeps its own settings.
    base: SessionContext,
    statement_timeout: Duration,
    running: Arc<Semaphore>,
    stop: CancellationToken,
    activity: Arc<Activity>,
    account: Option<Arc<Account>>,
    connections: Arc<ConnectionManager>,
    cancel: Arc<DefaultCancelHandler>,
    slots: Option<Arc<Semaphore>>,
    max_connections: usize,
    startup_timeout: Duration,
}

impl Shared {
    fn new(ctx: &SessionContext, config: &ServeConfig, stop: CancellationToken) -> Self {
        let connections = Arc::new(ConnectionManager::new());
        Self {
            base: ctx.clone(),
            statement_timeout: config.statement_timeout,
            running: Arc::new(Semaphore::new(config.max_running.max(1))),
            stop,
            activity: Arc::new(Activity::default()),
            account: config
                .password
                .as_deref()
                .map(|p| Arc::new(Account::new(&config.user, p))),
            cancel: Arc::new(DefaultCancelHandler::new(Arc::clone(&connections))),
            connections,
            slots: (config.max_connections > 0)
                .then(|| Arc::new(Semaphore::new(config.max_connections))),
            max_connections: config.max_connections,
            startup_timeout: config.startup_timeout,
        }
    }
}

/// The handlers of one connection.
struct Handlers {
    service: Arc<LakeService>,
    startup: Arc<Startup>,
    cancel: Arc<DefaultCancelHandler>,
}

impl Handlers {
    fn new(shared: &Arc<Shared>, admission: Arc<Admission>) -> Self {
        // A session of the connection's own: `SET timezone` and the other settings DataFusion
        // keeps in its session config then change this client's answers only.
        let ctx = Arc::new(SessionContext::new_with_state(shared.base.state()));
        let hooks: Vec<Arc<dyn QueryHook>> = vec![
            Arc::new(ReadOnlyHook),
            Arc::new(savepoint::SavepointHook),
            Arc::new(CursorHook {
                cursors: Arc::new(Cursors::default()),
            }),
            Arc::new(SetShowHook),
            Arc::new(TransactionStatementHook),
        ];
        let inner = DfSessionService::new_with_hooks(ctx, hooks);
        let parser = Arc::new(GuardedParser {
            inner: inner.query_parser(),
            statement_timeout: shared.statement_timeout,
        });
        Self {
            service: Arc::new(LakeService {
                inner,
                parser,
                shared: Arc::clone(shared),
                portals: std::sync::Mutex::default(),
            }),
            startup: Arc::new(Startup::new(
                shared.account.as_ref(),
                &shared.connections,
                admission,
            )),
            cancel: Arc::clone(&shared.cancel),
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
        Arc::clone(&self.startup)
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

fn user_error(severity: &str, code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        severity.to_owned(),
        code.to_owned(),
        message,
    )))
}

/// SQLSTATE 25006, `read_only_sql_transaction`: what Postgres answers to a write on a
/// read-only server, so clients and their users recognise it.
fn refused(refusal: &Refused) -> PgWireError {
    user_error("ERROR", "25006", refusal.to_string())
}

/// SQLSTATE 57014, `query_canceled`, with Postgres' own wording.
fn timed_out(limit: Duration) -> PgWireError {
    user_error(
        "ERROR",
        "57014",
        format!(
            "canceling statement due to statement timeout ({} ms)",
            limit.as_millis()
        ),
    )
}

/// SQLSTATE 57P01, `admin_shutdown`, with Postgres' own wording.
fn admin_shutdown(severity: &str) -> ErrorInfo {
    ErrorInfo::new(
        severity.to_owned(),
        "57P01".to_owned(),
        "terminating connection due to administrator command".to_owned(),
    )
}

/// Refuses SQL text over [`MAX_SQL_BYTES`] with SQLSTATE 54000, `program_limit_exceeded`,
/// before it is parsed.
fn check_size(sql: &str) -> PgWireResult<()> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(user_error(
            "ERROR",
            "54000",
            format!(
                "statement text of {} bytes is over the server's limit of {MAX_SQL_BYTES} bytes (1 MiB)",
                sql.len()
            ),
        ));
    }
    Ok(())
}

/// The client's `statement_timeout` when it asked for one shorter than the server's.
fn limit_for<C: ClientInfo + ?Sized>(client: &C, server: Duration) -> Duration {
    client
        .metadata()
        .get("statement_timeout_ms")
        .and_then(|ms| ms.parse::<u64>().ok())
        .map(Duration::from_millis)
        .filter(|&asked| asked < server)
        .unwrap_or(server)
}

/// Runs `work` (parsing and planning) within `deadline`. Planning mostly runs without yielding,
/// so work that overran the deadline is also refused once it returns.
async fn within<T>(
    deadline: Instant,
    limit: Duration,
    work: impl Future<Output = PgWireResult<T>>,
) -> PgWireResult<T> {
    let done = tokio::time::timeout_at(deadline, work)
        .await
        .map_err(|_| timed_out(limit))??;
    if Instant::now() > deadline {
        return Err(timed_out(limit));
    }
    Ok(done)
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

/// The extended protocol's parser with the size limit, the read-only policy and the
/// statement timeout in front.
struct GuardedParser {
    inner: Arc<Parser>,
    statement_timeout: Duration,
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
        check_size(sql)?;
        policy::check_sql(sql).map_err(|r| refused(&r))?;
        let limit = limit_for(client, self.statement_timeout);
        let deadline = Instant::now() + limit;
        let sql = rewrite::search_path(sql);
        let sql = rewrite::catalog_subqueries(&sql);
        within(deadline, limit, self.inner.parse_sql(client, &sql, types)).await
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

/// One connection's `DfSessionService` with the policy checked first, each statement admitted
/// to one of `--max-running` turns and bounded by the statement timeout as a whole: planning,
/// execution and the rows as they stream out.
struct LakeService {
    inner: DfSessionService,
    parser: Arc<GuardedParser>,
    shared: Arc<Shared>,
    /// The leases of the extended protocol's portals that returned rows, by portal name: a
    /// suspended portal gives its turn back between `Execute`s.
    portals: std::sync::Mutex<HashMap<String, Arc<Lease>>>,
}

impl LakeService {
    /// Starts statement `sql`: refused once the server stops, else admitted within its
    /// timeout (to one of the running turns if it may read the lake).
    async fn begin<C: ClientInfo + ?Sized>(
        &self,
        client: &C,
        sql: &str,
    ) -> PgWireResult<Arc<Lease>> {
        if self.shared.stop.is_cancelled() {
            return Err(PgWireError::UserError(Box::new(admin_shutdown("FATAL"))));
        }
        let limit = limit_for(client, self.shared.statement_timeout);
        Lease::take(
            admission::needs_turn(sql, &|schema, table| self.is_catalog_table(schema, table))
                .then_some(&self.shared.running),
            &self.shared.activity,
            client.socket_addr(),
            limit,
        )
        .await
    }

    /// Whether `schema` (of the catalog tables) holds `table`.
    fn is_catalog_table(&self, schema: &str, table: &str) -> bool {
        self.shared
            .base
            .table_exist(datafusion::common::TableReference::partial(schema, table))
            .unwrap_or(false)
    }

    fn portal_lease(&self, name: &str) -> Option<Arc<Lease>> {
        self.portals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    fn keep_lease(&self, name: &str, lease: Option<Arc<Lease>>) {
        let mut portals = self.portals.lock().unwrap_or_else(|e| e.into_inner());
        match lease {
            Some(lease) => portals.insert(name.to_owned(), lease),
            None => portals.remove(name),
        };
    }
}

/// Whether the portal stopped at its row limit with more rows to send.
async fn is_suspended(portal: Option<&Arc<Portal<DfStatement>>>) -> bool {
    match portal {
        Some(portal) => matches!(
            *portal.state().lock().await,
            PortalExecutionState::Suspended(_)
        ),
        None => false,
    }
}

/// The response's rows bounded by the lease's deadline; a statement whose rows all go out at
/// once (no row limit) reads them ahead of the client, so its turn ends with its execution.
fn bounded(response: Response, lease: &Arc<Lease>, whole: bool) -> Response {
    match response {
        Response::Query(mut query) => {
            let mut rows =
                std::mem::replace(&mut query.data_rows, Box::pin(futures::stream::empty()));
            if whole {
                rows = lease::read_ahead(rows, Arc::clone(lease));
            }
            query.data_rows = lease::until(rows, Arc::clone(lease));
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
        check_size(query)?;
        policy::check_sql(query).map_err(|r| refused(&r))?;
        let query = rewrite::search_path(query);
        let query = rewrite::catalog_subqueries(&query);
        let lease = self.begin(client, &query).await?;
        let responses = within(
            lease.deadline(),
            lease.limit(),
            SimpleQueryHandler::do_query(&self.inner, client, &query),
        )
        .await?;
        // Rows are read ahead for a single statement only: the statements of one query run
        // one after the other as their rows are sent.
        let whole = responses.len() == 1;
        Ok(responses
            .into_iter()
            .map(|r| bounded(r, &lease, whole))
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
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME).to_owned();
        let portal = match client.portal_store().get_portal(&name) {
            Some(Entry::Value(portal)) => Some(portal),
            _ => None,
        };
        if let Some(portal) = &portal {
            recover_for(client, &portal.statement.statement.0);
        }
        // A suspended portal asked for more rows takes a turn again, under a new deadline.
        if is_suspended(portal.as_ref()).await
            && let Some(lease) = self.portal_lease(&name)
        {
            if self.shared.stop.is_cancelled() {
                return Err(PgWireError::UserError(Box::new(admin_shutdown("FATAL"))));
            }
            lease.resume().await?;
        }
        let executed = match &portal {
            Some(portal)
                if message.max_rows == 0
                    && execute::streams_whole(portal, self.portal_lease(&name).is_some()).await =>
            {
                self.stream_whole(client, portal).await
            }
            _ => self._on_execute(client, message).await,
        };
        // Between Executes a suspended portal holds no turn; a finished one needs no lease.
        if let Some(lease) = self.portal_lease(&name) {
            lease.release();
            let portal = match client.portal_store().get_portal(&name) {
                Some(Entry::Value(portal)) => Some(portal),
                _ => None,
            };
            if !is_suspended(portal.as_ref()).await {
                self.keep_lease(&name, None);
            }
        }
        executed
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
        let lease = self.begin(client, &portal.statement.statement.0).await?;
        let response = within(
            lease.deadline(),
            lease.limit(),
            ExtendedQueryHandler::do_query(&self.inner, client, portal, max_rows),
        )
        .await?;
        if matches!(response, Response::Query(_)) {
            self.keep_lease(&portal.name, Some(Arc::clone(&lease)));
        }
        Ok(bounded(response, &lease, max_rows == 0))
    }
}
