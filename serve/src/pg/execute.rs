//! The extended protocol's `Execute` of a whole query result, streamed.
//!
//! pgwire's own `Execute` hands a portal's rows to the client through `Portal::fetch`, which
//! collects them into a vector first: every row of a query without a row limit (what psycopg,
//! Grafana's pgx, asyncpg and JDBC send by default) sat in memory at once, outside the
//! engine's memory limit. Here a query portal executed without a row limit sends its rows as
//! they are encoded, as the simple protocol does; portals executed with a row limit (cursors)
//! still go through pgwire, which holds at most the rows the client asked for.

use super::{DfStatement, LakeService};
use datafusion::sql::sqlparser::ast::Statement;
use datafusion_postgres::pgwire::api::portal::{Portal, PortalExecutionState};
use datafusion_postgres::pgwire::api::query::{ExtendedQueryHandler, send_query_response};
use datafusion_postgres::pgwire::api::results::{QueryResponse, Response};
use datafusion_postgres::pgwire::api::store::PortalStore;
use datafusion_postgres::pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, PgWireConnectionState,
};
use datafusion_postgres::pgwire::error::{PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::PgWireBackendMessage;
use futures::Sink;
use std::fmt::Debug;
use std::sync::Arc;

/// Whether an `Execute` of `portal` for all its rows is streamed here: a query not started
/// yet, or one whose earlier `Execute`s stopped at a row limit (`leased`: its rows are bounded
/// by a lease; a `DECLARE`d cursor's are not, and are read with `FETCH`).
pub(super) async fn streams_whole(portal: &Portal<DfStatement>, leased: bool) -> bool {
    match &*portal.state().lock().await {
        PortalExecutionState::Initial => matches!(
            &portal.statement.statement.1,
            Some((Statement::Query(_), _))
        ),
        PortalExecutionState::Suspended(_) => leased,
        PortalExecutionState::Finished => false,
    }
}

impl LakeService {
    /// Executes `portal` and sends every row of its result as it is produced.
    pub(super) async fn stream_whole<C>(
        &self,
        client: &mut C,
        portal: &Portal<DfStatement>,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = DfStatement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let results = self.results(client, portal).await?;
        send_query_response(client, results, false).await?;
        client.set_state(PgWireConnectionState::ReadyForQuery);
        Ok(())
    }

    /// The portal's rows still to send: those left by an earlier `Execute`, or a new
    /// execution (which a client's cancel request stops, as pgwire's own `Execute` does).
    async fn results<C>(
        &self,
        client: &mut C,
        portal: &Portal<DfStatement>,
    ) -> PgWireResult<QueryResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = DfStatement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let state = portal.state();
        let mut state = state.lock().await;
        if matches!(&*state, PortalExecutionState::Suspended(_))
            && let PortalExecutionState::Suspended(results) =
                std::mem::replace(&mut *state, PortalExecutionState::Finished)
        {
            return Ok(results);
        }
        *state = PortalExecutionState::Finished;
        drop(state);
        let cancelled = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        let executed = self.do_query(client, portal, 0);
        let response = match cancelled {
            Some(cancelled) => tokio::select! {
                response = executed => response,
                _ = cancelled => Err(PgWireError::QueryCanceled),
            },
            None => executed.await,
        }?;
        match response {
            Response::Query(results) => Ok(results),
            _ => Err(PgWireError::ApiError(
                "a query portal answered without rows".into(),
            )),
        }
    }
}
