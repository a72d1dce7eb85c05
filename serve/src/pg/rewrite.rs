//! Text-level rewrites of client queries that DataFusion cannot run as sent.
//!
//! Grafana lists tables and columns with a sub-select that expands `search_path` through
//! `generate_series` over array bounds, `s[i]` and the bare `user` keyword. The
//! Postgres-compatibility parser of datafusion-pg-catalog replaces that sub-select with `''`,
//! which makes Grafana's table list come out schema-qualified (11.4+) or empty (9.5–11.3). We
//! replace it first with what Postgres computes for our `search_path` (`"$user", public`:
//! no schema is named like the user, so `public`), turning `IN (sub-select)` into `IN ('public')`.

use datafusion::sql::sqlparser::ast::{
    Expr, Query, SelectItem, SetExpr, TableFactor, Value, visit_expressions, visit_expressions_mut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::LazyLock;

const SEARCH_PATH_SUBQUERY: &str = r#"SELECT
    CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
  FROM
    generate_series(
      array_lower(string_to_array(current_setting('search_path'),','),1),
      array_upper(string_to_array(current_setting('search_path'),','),1)
    ) as i,
    string_to_array(current_setting('search_path'),',') s"#;

/// A literal, not `SELECT 'public'`: Grafana also sorts by `... IN (sub-select)`, and DataFusion
/// plans IN-subqueries in filters and projections only, while an IN-list works anywhere.
const SEARCH_PATH_SCHEMAS: &str = "'public'";

fn tokens(sql: &str) -> Option<Vec<Token>> {
    Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()
}

fn significant(token: &Token) -> bool {
    !matches!(token, Token::Whitespace(_))
}

static PATTERN: LazyLock<Vec<Token>> = LazyLock::new(|| {
    tokens(SEARCH_PATH_SUBQUERY)
        .unwrap_or_default()
        .into_iter()
        .filter(significant)
        .collect()
});

/// `sql` with every Grafana `search_path` sub-select replaced; unchanged when there is none.
pub fn search_path(sql: &str) -> Cow<'_, str> {
    if !sql.contains("search_path") || PATTERN.is_empty() {
        return Cow::Borrowed(sql);
    }
    let Some(input) = tokens(sql) else {
        return Cow::Borrowed(sql);
    };
    // Positions of the significant tokens, so a match can ignore whitespace and layout.
    let positions: Vec<usize> = (0..input.len())
        .filter(|&i| significant(&input[i]))
        .collect();
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    let mut k = 0;
    let mut replaced = false;
    while k + PATTERN.len() <= positions.len() {
        let matches = PATTERN
            .iter()
            .enumerate()
            .all(|(j, t)| &input[positions[k + j]] == t);
        if matches {
            let (start, end) = (positions[k], positions[k + PATTERN.len() - 1]);
            out.extend(input[copied..start].iter().map(ToString::to_string));
            out.push_str(SEARCH_PATH_SCHEMAS);
            copied = end + 1;
            k += PATTERN.len();
            replaced = true;
        } else {
            k += 1;
        }
    }
    if !replaced {
        return Cow::Borrowed(sql);
    }
    out.extend(input[copied..].iter().map(ToString::to_string));
    Cow::Owned(out)
}

/// Catalog tables that are empty in lkplake's catalog (no column defaults, no sequences) or
/// that only name a column's collation when it differs from its type's (never here).
const NULL_SUBSELECTS: [&str; 3] = ["pg_attrdef", "pg_sequence", "pg_collation"];

/// Catalog queries with the scalar sub-selects DataFusion cannot plan replaced by their answer.
///
/// SQLAlchemy reflects a table's columns with correlated scalar sub-selects inside `CASE`:
/// a column's default (`pg_attrdef`), identity (`pg_sequence`) and collation (`pg_collation`,
/// when it differs from the type's `typcollation`). DataFusion refuses to plan them
/// ("Correlated scalar subquery must be aggregated", then "Physical plan does not support
/// logical expression ScalarSubquery"). Over lkplake's catalog each is NULL: the first two
/// tables are empty, and no column has a collation other than its type's, which is also why
/// the `typcollation` comparison that guards the collation sub-select can be NULL (its `CASE`
/// answers NULL either way). Only queries naming `pg_catalog` are touched.
pub fn catalog_subqueries(sql: &str) -> Cow<'_, str> {
    if !sql.contains("pg_catalog") {
        return Cow::Borrowed(sql);
    }
    let Ok(mut statements) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else {
        return Cow::Borrowed(sql);
    };
    let mut changed = false;
    let _ = visit_expressions_mut(&mut statements, |expr| {
        if let Expr::Subquery(query) = expr
            && answers_null(query)
            && let Some(null) = null_keeping_parameters(query)
        {
            *expr = null;
            changed = true;
        }
        ControlFlow::<()>::Continue(())
    });
    if !changed {
        return Cow::Borrowed(sql);
    }
    Cow::Owned(
        statements
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// NULL, written so that the statement keeps every parameter the sub-select used: the client
/// sends values for all of them, and a placeholder gone from the text would shift their types.
fn null_keeping_parameters(query: &Query) -> Option<Expr> {
    let mut parameters: Vec<(String, String)> = Vec::new();
    let _ = visit_expressions(query, |e| {
        let name = match e {
            Expr::Cast { expr, .. } if expr.to_string().starts_with('$') => expr.to_string(),
            Expr::Value(v) if v.to_string().starts_with('$') => v.to_string(),
            _ => return ControlFlow::<()>::Continue(()),
        };
        // A cast comes before the placeholder inside it; keep the typed form.
        if parameters.iter().all(|(n, _)| *n != name) {
            parameters.push((name, e.to_string()));
        }
        ControlFlow::Continue(())
    });
    if parameters.is_empty() {
        return Some(Expr::value(Value::Null));
    }
    let guards: Vec<String> = parameters
        .iter()
        .map(|(_, typed)| format!("{typed} IS NULL"))
        .collect();
    let text = format!("CASE WHEN {} THEN NULL END", guards.join(" OR "));
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

fn answers_null(query: &Query) -> bool {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    let reads = |table: &str| {
        select.from.iter().any(|t| {
            std::iter::once(&t.relation)
                .chain(t.joins.iter().map(|j| &j.relation))
                .any(|r| matches!(r, TableFactor::Table { name, .. } if name.to_string().ends_with(table)))
        })
    };
    let selects_typcollation = matches!(
        select.projection.as_slice(),
        [SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }] if e.to_string().ends_with("typcollation")
    );
    NULL_SUBSELECTS.iter().any(|t| reads(t)) || (reads("pg_type") && selects_typcollation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grafanas_search_path_subselect_becomes_the_public_schema_whatever_its_layout() {
        let sql = "select quote_ident(table_name) as \"table\" from information_schema.tables\n    \
                   where quote_ident(table_schema) IN (\n          SELECT\n            CASE WHEN \
                   trim(s[i]) = '\"$user\"' THEN user ELSE trim(s[i]) END\n          FROM\n     \
                   generate_series(\n array_lower(string_to_array(current_setting('search_path'),','),1),\n \
                   array_upper(string_to_array(current_setting('search_path'),','),1)\n ) as i,\n \
                   string_to_array(current_setting('search_path'),',') s\n          )";
        assert_eq!(
            search_path(sql),
            "select quote_ident(table_name) as \"table\" from information_schema.tables\n    \
             where quote_ident(table_schema) IN (\n          'public'\n          )"
        );
    }

    #[test]
    fn catalog_subselects_over_empty_catalog_tables_become_null_and_user_queries_stay() {
        let sql = "SELECT a.attname, CASE WHEN a.atthasdef THEN (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) \
                   FROM pg_catalog.pg_attrdef AS d WHERE d.adrelid = a.attrelid) ELSE NULL END AS \"default\", \
                   (SELECT count(*) FROM pg_catalog.pg_type) AS n FROM pg_catalog.pg_attribute AS a";
        assert_eq!(
            catalog_subqueries(sql),
            "SELECT a.attname, CASE WHEN a.atthasdef THEN NULL ELSE NULL END AS \"default\", \
             (SELECT count(*) FROM pg_catalog.pg_type) AS n FROM pg_catalog.pg_attribute AS a"
        );
        let user = "SELECT (SELECT value FROM metrics LIMIT 1)";
        assert!(matches!(catalog_subqueries(user), Cow::Borrowed(s) if s == user));
        // The parameters of a replaced sub-select stay in the statement, with their types.
        let with_parameters = "SELECT CASE WHEN a.attidentity <> $1::VARCHAR THEN (SELECT json_build_object($2::VARCHAR, \
                               s.seqstart) FROM pg_catalog.pg_sequence AS s WHERE a.attidentity <> $3::VARCHAR) END \
                               FROM pg_catalog.pg_attribute AS a";
        assert_eq!(
            catalog_subqueries(with_parameters),
            "SELECT CASE WHEN a.attidentity <> $1::VARCHAR THEN CASE WHEN $2::VARCHAR IS NULL OR $3::VARCHAR IS NULL \
             THEN NULL END END FROM pg_catalog.pg_attribute AS a"
        );
    }

    #[test]
    fn other_queries_pass_untouched() {
        let sql = "SELECT current_setting('search_path')";
        assert!(matches!(search_path(sql), Cow::Borrowed(s) if s == sql));
    }
}
