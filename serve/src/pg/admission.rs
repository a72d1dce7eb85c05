//! Which statements wait for one of `--max-running` turns: those that may read the lake.
//!
//! The turns exist so that a few whole-lake aggregates cannot starve the machine; a client's
//! `SET`, `SHOW`, `BEGIN`, `SELECT 1` or catalog query (psql's `\d`, a driver's type lookup
//! at connect, Grafana's variable queries) reads nothing of the lake, and making it queue
//! behind those aggregates made every dashboard connection wait seconds for its first answer.
//! Such statements still run under the statement timeout and count as activity for a
//! stopping server; they only take no turn.
//!
//! The decision is made on the statement's text, before planning, and errs towards a turn.
//! A query takes none only when every relation it reads is a table of `pg_catalog` or
//! `information_schema` named with its schema, or one of its own common table expressions.
//! Text that does not parse, a cursor (`DECLARE`, `FETCH`: a `FETCH` names no table but reads
//! one), a table function (`generate_series` runs as long as an aggregate, with or without a
//! `pg_catalog.` in front), `UNNEST`, and an unqualified name (`pg_type` in the simple protocol;
//! the extended protocol's parser has qualified it already) take a turn. A query without any
//! relation (`SELECT repeat('x', 1000000000)`) takes none: the statement timeout and the
//! memory limit still bound it.

use datafusion::sql::parser::{DFParser, Statement as DfStatement};
use datafusion::sql::sqlparser::ast::{ObjectName, Query, Statement, TableFactor, Visit, Visitor};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use std::collections::HashSet;
use std::ops::ControlFlow;

/// Whether `sql` needs a turn: it may read the lake, or it cannot be told.
/// `catalog_table(schema, table)` says whether a catalog schema holds that table.
pub(super) fn needs_turn(sql: &str, catalog_table: &dyn Fn(&str, &str) -> bool) -> bool {
    match DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}) {
        Ok(statements) => {
            statements.is_empty() || !statements.iter().all(|s| reads_no_lake(s, catalog_table))
        }
        Err(_) => true,
    }
}

fn reads_no_lake(statement: &DfStatement, catalog_table: &dyn Fn(&str, &str) -> bool) -> bool {
    let DfStatement::Statement(inner) = statement else {
        return false;
    };
    match inner.as_ref() {
        Statement::Query(query) => {
            let mut relations = Relations {
                catalog_table,
                ctes: HashSet::new(),
            };
            query.visit(&mut relations).is_continue()
        }
        Statement::Set(_)
        | Statement::ShowVariable { .. }
        | Statement::ShowVariables { .. }
        | Statement::StartTransaction { .. }
        | Statement::Commit { .. }
        | Statement::Rollback { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. }
        | Statement::Discard { .. } => true,
        _ => false,
    }
}

/// Walks a query's relations, breaking at the first one that may read the lake.
struct Relations<'a> {
    catalog_table: &'a dyn Fn(&str, &str) -> bool,
    /// The names the query's `WITH` clauses define.
    ctes: HashSet<String>,
}

impl Relations<'_> {
    fn is_free(&self, name: &ObjectName) -> bool {
        let parts: Option<Vec<String>> = name
            .0
            .iter()
            .map(|part| part.as_ident().map(|i| i.value.to_lowercase()))
            .collect();
        match parts.as_deref().unwrap_or_default() {
            [single] => self.ctes.contains(single),
            [schema, table] => {
                matches!(schema.as_str(), "pg_catalog" | "information_schema")
                    && (self.catalog_table)(schema, table)
            }
            _ => false,
        }
    }
}

impl Visitor for Relations<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        match factor {
            TableFactor::Table {
                name, args: None, ..
            } if self.is_free(name) => ControlFlow::Continue(()),
            // What they hold is visited in turn.
            TableFactor::Derived { .. } | TableFactor::NestedJoin { .. } => {
                ControlFlow::Continue(())
            }
            _ => ControlFlow::Break(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::needs_turn;

    /// The catalog of the tests: a few tables of each catalog schema.
    fn catalog_table(schema: &str, table: &str) -> bool {
        matches!(
            (schema, table),
            ("pg_catalog", "pg_type" | "pg_namespace" | "pg_class")
                | ("information_schema", "tables" | "columns")
        )
    }

    #[test]
    fn statements_that_read_no_lake_table_take_no_turn() {
        for sql in [
            "SELECT 1",
            "select current_setting('statement_timeout')",
            "SET statement_timeout = '5s'",
            "SHOW search_path",
            "BEGIN",
            "COMMIT",
            "ROLLBACK",
            "SAVEPOINT a",
            "RELEASE SAVEPOINT a",
            "DISCARD ALL",
            "SELECT t.oid, t.typname FROM pg_catalog.pg_type t \
             JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace",
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
            "SELECT c.relname FROM (SELECT * FROM pg_catalog.pg_class) c",
            "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
            "SELECT 1; SELECT 2",
        ] {
            assert!(!needs_turn(sql, &catalog_table), "{sql}");
        }
    }

    #[test]
    fn statements_that_may_read_the_lake_take_a_turn() {
        for sql in [
            "SELECT count(*) FROM metrics",
            "select * from public.headlines limit 5",
            "SELECT 1; SELECT count(*) FROM reports",
            "WITH x AS (SELECT * FROM metrics) SELECT count(*) FROM x",
            "SELECT 1 WHERE EXISTS (SELECT 1 FROM reports)",
            "SELECT * FROM pg_catalog.pg_type t JOIN reports r ON true",
            "SELECT * FROM pg_type",
            "SELECT * FROM pg_catalog.headlines",
            "SELECT count(*) FROM generate_series(1, 10000000000)",
            "SELECT count(*) FROM pg_catalog.generate_series(1, 10000000000)",
            "SELECT count(*) FROM unnest(range(1000000000))",
            "EXPLAIN ANALYZE SELECT count(*) FROM metrics",
            "DECLARE c CURSOR FOR SELECT 1",
            "FETCH 10 FROM c",
            "COPY metrics TO 'x.csv'",
            "SELEC 1",
            "",
        ] {
            assert!(needs_turn(sql, &catalog_table), "{sql}");
        }
    }
}
