//! `SAVEPOINT`, `RELEASE SAVEPOINT` and `ROLLBACK TO SAVEPOINT` inside a transaction.
//!
//! psycopg wraps work in savepoints when a transaction is already open (`conn.transaction()`),
//! and SQLAlchemy's first-connect checks run that way, so refusing them locked out SQLAlchemy,
//! pandas and everything built on them. The lake is read-only, so a savepoint has nothing to
//! keep: the statements are answered as Postgres answers them, and `ROLLBACK TO SAVEPOINT`
//! after a failed statement returns the transaction to normal, as in Postgres.

use async_trait::async_trait;
use datafusion::common::{DFSchema, ParamValues};
use datafusion::logical_expr::{EmptyRelation, LogicalPlan};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion_postgres::QueryHook;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::pgwire::api::ClientInfo;
use datafusion_postgres::pgwire::api::results::{Response, Tag};
use datafusion_postgres::pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::response::TransactionStatus;
use std::sync::Arc;

/// The savepoint statements, with the command tag Postgres answers each with.
fn tag(statement: &Statement) -> Option<&'static str> {
    match statement {
        Statement::Savepoint { .. } => Some("SAVEPOINT"),
        Statement::ReleaseSavepoint { .. } => Some("RELEASE"),
        Statement::Rollback {
            savepoint: Some(_), ..
        } => Some("ROLLBACK"),
        _ => None,
    }
}

/// Whether `sql` is one `ROLLBACK TO SAVEPOINT` statement: the one statement that leaves a
/// failed transaction in Postgres without ending it.
pub fn is_rollback_to_savepoint(sql: &str) -> bool {
    let Ok(statements) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else {
        return false;
    };
    matches!(
        statements.as_slice(),
        [Statement::Rollback {
            savepoint: Some(_),
            ..
        }]
    )
}

/// Postgres' answer to a savepoint statement outside a transaction block (SQLSTATE 25P01).
fn outside_transaction(tag: &str) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".to_owned(),
        "25P01".to_owned(),
        format!("{tag} can only be used in transaction blocks"),
    )))
}

/// Answers the savepoint statements; runs before the transaction hook, which would refuse
/// them in a failed transaction.
#[derive(Debug)]
pub struct SavepointHook;

#[async_trait]
impl QueryHook for SavepointHook {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        _ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        let tag = tag(statement)?;
        Some(match client.transaction_status() {
            TransactionStatus::Idle => Err(outside_transaction(tag)),
            TransactionStatus::Transaction | TransactionStatus::Error => {
                Ok(Response::Execution(Tag::new(tag)))
            }
        })
    }

    async fn handle_extended_parse_query(
        &self,
        statement: &Statement,
        _ctx: &SessionContext,
        _client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        tag(statement)?;
        Some(Ok(LogicalPlan::EmptyRelation(EmptyRelation {
            produce_one_row: false,
            schema: Arc::new(DFSchema::empty()),
        })))
    }

    async fn handle_extended_query(
        &self,
        statement: &Statement,
        _plan: &LogicalPlan,
        _params: &ParamValues,
        ctx: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        self.handle_simple_query(statement, ctx, client).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lone_rollback_to_savepoint_recovers_a_failed_transaction() {
        assert!(is_rollback_to_savepoint(
            "ROLLBACK TO SAVEPOINT sa_savepoint_1"
        ));
        assert!(is_rollback_to_savepoint("rollback to s1;"));
        assert!(!is_rollback_to_savepoint("ROLLBACK"));
        assert!(!is_rollback_to_savepoint("SAVEPOINT s1"));
        assert!(!is_rollback_to_savepoint(
            "ROLLBACK TO SAVEPOINT s1; SELECT 1"
        ));
    }
}
