//! Text-level rewrites of client queries that DataFusion cannot run as sent.
//!
//! Grafana lists tables and columns with a sub-select that expands `search_path` through
//! `generate_series` over array bounds, `s[i]` and the bare `user` keyword. The
//! Postgres-compatibility parser of datafusion-pg-catalog replaces that sub-select with `''`,
//! which makes Grafana's table list come out schema-qualified (11.4+) or empty (9.5–11.3). We
//! replace it first with what Postgres computes for our `search_path` (`"$user", public`:
//! no schema is named like the user, so `public`), turning `IN (sub-select)` into `IN ('public')`.

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use std::borrow::Cow;
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
    fn other_queries_pass_untouched() {
        let sql = "SELECT current_setting('search_path')";
        assert!(matches!(search_path(sql), Cow::Borrowed(s) if s == sql));
    }
}
