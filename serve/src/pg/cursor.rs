//! Server-side cursors (`DECLARE c CURSOR FOR ...`, `FETCH`, `CLOSE`), what psycopg's named
//! cursors, SQLAlchemy's `stream_results`, pandas' chunked reads and Django's `iterator()` use.
//!
//! datafusion-postgres' own cursor hook started the query at `DECLARE` and let it run outside
//! the server's limits, and described the cursor to clients as having no columns (psycopg then
//! crashed reading its rows). Here a cursor is planned at `DECLARE` (under the statement
//! timeout, like any statement) and executed lazily: each `FETCH` is a statement of its own
//! whose rows stream under the caller's turn and deadline (see `lease`), so a cursor holds no
//! running slot between fetches and no `FETCH` collects its rows in memory. The cursor's
//! schema is kept per connection, so a client that describes the cursor's portal, or prepares
//! a `FETCH` from it, is told its real columns.

use super::user_error;
use async_trait::async_trait;
use datafusion::common::ParamValues;
use datafusion::common::{DFSchema, DFSchemaRef};
use datafusion::logical_expr::{EmptyRelation, LogicalPlan};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    CloseCursor, Declare, DeclareType, FetchDirection, Statement,
};
use datafusion_postgres::QueryHook;
use datafusion_postgres::arrow_pg::datatypes::arrow_schema_to_pg_fields;
use datafusion_postgres::arrow_pg::datatypes::df::encode_dataframe;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::pgwire::api::ClientInfo;
use datafusion_postgres::pgwire::api::portal::{Format, Portal, PortalExecutionState};
use datafusion_postgres::pgwire::api::results::{FieldInfo, QueryResponse, Response, Tag};
use datafusion_postgres::pgwire::api::stmt::StoredStatement;
use datafusion_postgres::pgwire::api::store::PortalStore;
use datafusion_postgres::pgwire::error::{PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::data::DataRow;
use futures::{StreamExt, TryStreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A declared cursor's columns, as DataFusion and as the wire describe them.
#[derive(Debug, Clone)]
struct Columns {
    schema: DFSchemaRef,
    fields: Arc<Vec<FieldInfo>>,
}

/// The cursors of one connection: their columns, by name.
#[derive(Debug, Default)]
pub(super) struct Cursors {
    columns: Mutex<HashMap<String, Columns>>,
}

impl Cursors {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Columns>) -> T) -> T {
        // A poisoned lock only means a panic while editing the map; its entries are whole.
        f(&mut self.columns.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn schema(&self, name: &str) -> DFSchemaRef {
        self.with(|c| c.get(name).map(|c| Arc::clone(&c.schema)))
            .unwrap_or_else(|| Arc::new(DFSchema::empty()))
    }

    fn fields(&self, name: &str) -> Arc<Vec<FieldInfo>> {
        self.with(|c| c.get(name).map(|c| Arc::clone(&c.fields)))
            .unwrap_or_default()
    }
}

/// The hook that answers `DECLARE`, `FETCH` and `CLOSE` on one connection.
#[derive(Debug)]
pub(super) struct CursorHook {
    pub(super) cursors: Arc<Cursors>,
}

/// A plan with no rows and the given columns: what a prepared cursor statement describes.
fn described(schema: DFSchemaRef) -> LogicalPlan {
    LogicalPlan::EmptyRelation(EmptyRelation {
        produce_one_row: false,
        schema,
    })
}

#[async_trait]
impl QueryHook for CursorHook {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        self.answer(statement, ctx, client).await
    }

    async fn handle_extended_parse_query(
        &self,
        statement: &Statement,
        _ctx: &SessionContext,
        _client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        let schema = match statement {
            Statement::Fetch { name, .. } => self.cursors.schema(&name.value),
            Statement::Declare { .. } | Statement::Close { .. } => Arc::new(DFSchema::empty()),
            _ => return None,
        };
        Some(Ok(described(schema)))
    }

    async fn handle_extended_query(
        &self,
        statement: &Statement,
        _plan: &LogicalPlan,
        _params: &ParamValues,
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        self.answer(statement, ctx, client).await
    }
}

impl CursorHook {
    async fn answer(
        &self,
        statement: &Statement,
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        Some(match statement {
            Statement::Declare { stmts } => self.declare(stmts, ctx, client).await,
            Statement::Fetch {
                name, direction, ..
            } => self.fetch(client, &name.value, direction).await,
            Statement::Close { cursor } => {
                self.close(client, cursor);
                Ok(Response::Execution(Tag::new("CLOSE CURSOR")))
            }
            _ => return None,
        })
    }

    async fn declare(
        &self,
        stmts: &[Declare],
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> PgWireResult<Response> {
        for declare in stmts {
            let (name, query) = match (
                &declare.declare_type,
                declare.names.first(),
                &declare.for_query,
            ) {
                (Some(DeclareType::Cursor), Some(name), Some(query)) => (name.value.clone(), query),
                (Some(DeclareType::Cursor), _, _) => {
                    return Err(user_error(
                        "ERROR",
                        "42601",
                        "DECLARE CURSOR needs a name and a FOR query".to_owned(),
                    ));
                }
                (other, _, _) => {
                    return Err(user_error(
                        "ERROR",
                        "42601",
                        format!("unsupported DECLARE type: {other:?}"),
                    ));
                }
            };
            let sql = query.to_string();
            // Planned now, so an error in the query is reported by DECLARE; executed only when
            // the first FETCH pulls rows.
            let df = ctx
                .sql(&sql)
                .await
                .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
            let fields = Arc::new(arrow_schema_to_pg_fields(
                df.schema().as_arrow(),
                &Format::UnifiedText,
                None,
            )?);
            let schema = Arc::new(df.schema().clone());
            let plan = df.logical_plan().clone();
            let rows = futures::stream::once(async move {
                encode_dataframe(df, &Format::UnifiedText, None)
                    .await
                    .map(|response| response.data_rows)
            })
            .try_flatten();
            let statement = StoredStatement::new(
                name.clone(),
                (sql, Some((Statement::Query(query.clone()), plan))),
                vec![],
            );
            let portal = Portal::new_cursor(name.clone(), Arc::new(statement));
            portal
                .start(QueryResponse::new(Arc::clone(&fields), rows))
                .await;
            client.portal_store().put_portal(Arc::new(portal));
            self.cursors
                .with(|c| c.insert(name, Columns { schema, fields }));
        }
        Ok(Response::Execution(Tag::new("DECLARE CURSOR")))
    }

    fn close(&self, client: &mut dyn HookClient, cursor: &CloseCursor) {
        match cursor {
            CloseCursor::All => {
                let names: Vec<String> = self
                    .cursors
                    .with(|c| c.drain().map(|(name, _)| name).collect());
                for name in names {
                    client.portal_store().rm_portal(&name);
                }
            }
            CloseCursor::Specific { name } => {
                client.portal_store().rm_portal(&name.value);
                self.cursors.with(|c| c.remove(&name.value));
            }
        }
    }
}

/// How many rows a `FETCH` asks for: `None` for all that are left.
fn rows_asked(direction: &FetchDirection) -> PgWireResult<Option<usize>> {
    match direction {
        FetchDirection::Next | FetchDirection::Forward { limit: None } => Ok(Some(1)),
        FetchDirection::Forward { limit: Some(n) } | FetchDirection::Count { limit: n } => {
            n.to_string().parse().map(Some).map_err(|_| {
                user_error(
                    "ERROR",
                    "22023",
                    format!("FETCH count {n} is not a row count"),
                )
            })
        }
        FetchDirection::ForwardAll | FetchDirection::All => Ok(None),
        _ => Err(user_error(
            "ERROR",
            "55000",
            "cursor can only scan forward: FETCH NEXT, FORWARD n, n or ALL".to_owned(),
        )),
    }
}

impl CursorHook {
    /// The next rows of a cursor, pulled from its query as the client reads them.
    async fn fetch(
        &self,
        client: &mut dyn HookClient,
        name: &str,
        direction: &FetchDirection,
    ) -> PgWireResult<Response> {
        let asked = rows_asked(direction)?;
        let portal = client
            .portal_store()
            .get_portal(name)
            .and_then(|entry| entry.value().cloned())
            .ok_or_else(|| {
                user_error(
                    "ERROR",
                    "34000",
                    format!("cursor \"{name}\" does not exist"),
                )
            })?;
        let mut response =
            QueryResponse::new(self.cursors.fields(name), pull(portal.state(), asked));
        response.set_command_tag("FETCH");
        Ok(Response::Query(response))
    }
}

/// Up to `asked` rows (all with `None`) of a started cursor, each pulled when the client reads
/// it; the cursor is finished once its query has no more.
fn pull(
    state: Arc<tokio::sync::Mutex<PortalExecutionState>>,
    asked: Option<usize>,
) -> impl futures::Stream<Item = PgWireResult<DataRow>> + Send + 'static {
    futures::stream::unfold((state, 0usize), move |(state, taken)| async move {
        if asked.is_some_and(|asked| taken >= asked) {
            return None;
        }
        let mut guard = Arc::clone(&state).lock_owned().await;
        let PortalExecutionState::Suspended(response) = &mut *guard else {
            return None;
        };
        match response.data_rows.next().await {
            Some(row) => {
                drop(guard);
                Some((row, (state, taken + 1)))
            }
            None => {
                *guard = PortalExecutionState::Finished;
                None
            }
        }
    })
}
