//! What the read side runs: queries and the session chatter clients send around them (`SET`,
//! `SHOW`, transactions, cursors). Everything else — DDL, DML, `COPY`, `CREATE EXTERNAL TABLE`,
//! `SELECT INTO` — is refused before it is planned, because the lake is written by the
//! transformer alone and the server must not read or write files on a client's say-so.

use datafusion::sql::parser::{DFParser, Statement as DfStatement};
use datafusion::sql::sqlparser::ast::{Query, Set, SetExpr, Statement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use lkplake_schemas::ErrorKind;

/// A statement the read side will not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} is refused: lkplake serves the lake read-only (only queries, SET/SHOW, transactions, \
     savepoints and cursors run); the lake is written by `lkplake transform`"
)]
pub struct Refused {
    /// The kind of statement, e.g. `INSERT` or `COPY`.
    pub what: String,
}

impl Refused {
    /// What kind of failure this is, for the exit status: the user asked for something refused.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Usage
    }
}

fn refuse(what: impl Into<String>) -> Result<(), Refused> {
    Err(Refused { what: what.into() })
}

/// Checks every statement in `sql`. Text the DataFusion parser cannot read passes: it is then
/// either rejected by the planner or checked again as a parsed statement by
/// [`check_statement`], so nothing unparsed runs unchecked.
pub fn check_sql(sql: &str) -> Result<(), Refused> {
    let Ok(statements) = DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}) else {
        return Ok(());
    };
    statements.iter().try_for_each(check_df_statement)
}

fn check_df_statement(statement: &DfStatement) -> Result<(), Refused> {
    match statement {
        DfStatement::Statement(s) => check_statement(s),
        DfStatement::CreateExternalTable(_) => refuse("CREATE EXTERNAL TABLE"),
        DfStatement::CopyTo(_) => refuse("COPY"),
        DfStatement::Explain(e) => check_df_statement(&e.statement),
        DfStatement::Reset(_) => refuse("RESET"),
    }
}

/// Checks one parsed statement.
pub fn check_statement(statement: &Statement) -> Result<(), Refused> {
    match statement {
        Statement::Query(query) => check_query(query),
        Statement::Explain { statement, .. } => check_statement(statement),
        Statement::Declare { stmts } => stmts
            .iter()
            .filter_map(|d| d.for_query.as_deref())
            .try_for_each(check_query),
        Statement::Set(set) => check_set(set),
        Statement::ExplainTable { .. }
        | Statement::ShowVariable { .. }
        | Statement::ShowVariables { .. }
        | Statement::ShowStatus { .. }
        | Statement::ShowTables { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowCatalogs { .. }
        | Statement::ShowSchemas { .. }
        | Statement::StartTransaction { .. }
        | Statement::Commit { .. }
        | Statement::Rollback { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. }
        | Statement::Fetch { .. }
        | Statement::Close { .. }
        | Statement::Discard { .. }
        | Statement::Deallocate { .. } => Ok(()),
        other => refuse(statement_kind(other)),
    }
}

/// `SET` of a client setting is per connection; `SET datafusion.…` would change the engine
/// for every client of the server, so it is refused.
fn check_set(set: &Set) -> Result<(), Refused> {
    let names: Vec<String> = match set {
        Set::SingleAssignment { variable, .. } => vec![variable.to_string()],
        Set::ParenthesizedAssignments { variables, .. } => {
            variables.iter().map(ToString::to_string).collect()
        }
        Set::MultipleAssignments { assignments } => {
            assignments.iter().map(|a| a.name.to_string()).collect()
        }
        _ => Vec::new(),
    };
    match names.into_iter().find(|n| n.contains('.')) {
        Some(name) => refuse(format!(
            "SET {name} (an engine setting shared by all clients)"
        )),
        None => Ok(()),
    }
}

fn check_query(query: &Query) -> Result<(), Refused> {
    if let Some(with) = &query.with {
        with.cte_tables
            .iter()
            .try_for_each(|cte| check_query(&cte.query))?;
    }
    check_set_expr(&query.body)
}

fn check_set_expr(body: &SetExpr) -> Result<(), Refused> {
    match body {
        SetExpr::Select(select) if select.into.is_some() => refuse("SELECT INTO"),
        SetExpr::Select(_) | SetExpr::Values(_) | SetExpr::Table(_) => Ok(()),
        SetExpr::Query(query) => check_query(query),
        SetExpr::SetOperation { left, right, .. } => {
            check_set_expr(left)?;
            check_set_expr(right)
        }
        SetExpr::Insert(_) => refuse("INSERT"),
        SetExpr::Update(_) => refuse("UPDATE"),
        SetExpr::Delete(_) => refuse("DELETE"),
        SetExpr::Merge(_) => refuse("MERGE"),
    }
}

/// The statement's leading keywords, e.g. `CREATE TABLE`, for the refusal message.
fn statement_kind(statement: &Statement) -> String {
    match statement {
        Statement::Insert(_) => return "INSERT".to_owned(),
        Statement::Update(_) => return "UPDATE".to_owned(),
        Statement::Delete(_) => return "DELETE".to_owned(),
        Statement::Merge(_) => return "MERGE".to_owned(),
        Statement::Copy { .. } | Statement::CopyIntoSnowflake { .. } => return "COPY".to_owned(),
        _ => {}
    }
    let text = statement.to_string();
    let words: Vec<&str> = text.split_whitespace().take(3).collect();
    let keywords: Vec<&str> = words
        .iter()
        .copied()
        .take_while(|w| w.chars().all(|c| c.is_ascii_alphabetic() || c == '_'))
        .filter(|w| w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .take(2)
        .collect();
    if keywords.is_empty() {
        "this statement".to_owned()
    } else {
        keywords.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(sql: &str) -> Option<String> {
        check_sql(sql).err().map(|r| r.what)
    }

    #[test]
    fn queries_and_session_statements_pass() {
        for sql in [
            "SELECT 1",
            "WITH x AS (SELECT * FROM metrics) SELECT count(*) FROM x",
            "SELECT 1 UNION ALL SELECT 2",
            "VALUES (1), (2)",
            "EXPLAIN SELECT * FROM metrics",
            "EXPLAIN ANALYZE SELECT * FROM metrics",
            "SET statement_timeout = 1000",
            "SET extra_float_digits = 3",
            "SET TIME ZONE 'UTC'",
            "SHOW search_path",
            "BEGIN",
            "COMMIT",
            "ROLLBACK",
        ] {
            assert_eq!(refused(sql), None, "{sql}");
        }
    }

    #[test]
    fn writes_and_file_access_are_refused_by_name() {
        for (sql, what) in [
            ("INSERT INTO metrics SELECT * FROM metrics", "INSERT"),
            ("UPDATE metrics SET value = 0", "UPDATE"),
            ("DELETE FROM metrics", "DELETE"),
            ("CREATE TABLE t AS SELECT 1", "CREATE TABLE"),
            ("CREATE VIEW v AS SELECT 1", "CREATE VIEW"),
            ("DROP TABLE metrics", "DROP TABLE"),
            (
                "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'",
                "CREATE EXTERNAL TABLE",
            ),
            ("COPY metrics TO '/tmp/out.parquet'", "COPY"),
            ("COPY (SELECT 1) TO '/tmp/out.csv'", "COPY"),
            ("SELECT * INTO newtable FROM metrics", "SELECT INTO"),
            ("EXPLAIN COPY metrics TO '/tmp/out.parquet'", "COPY"),
            (
                "SET datafusion.execution.target_partitions = 1",
                "SET datafusion.execution.target_partitions (an engine setting shared by all clients)",
            ),
            ("SELECT 1; DROP TABLE reports", "DROP TABLE"),
        ] {
            assert_eq!(refused(sql).as_deref(), Some(what), "{sql}");
        }
    }

    #[test]
    fn the_refusal_says_why_and_what_to_do() {
        let message = check_sql("DELETE FROM metrics")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.starts_with("DELETE is refused: lkplake serves the lake read-only"));
        assert!(message.contains("`lkplake transform`"));
    }
}
