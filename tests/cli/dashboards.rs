//! The Grafana dashboards of `infra/grafana/dashboards`: every SQL query (template variables
//! and panels) with variables and macros expanded the way Grafana's PostgreSQL data source
//! expands them, sent by psql (the simple protocol, as Grafana's backend does) to
//! `lkplake serve` over the corpus lake. Each one must run and return rows.

use crate::common::{PG_PASSWORD, Server, lkplake, run_into, temp_dir};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The dashboard time range the macros expand to; it covers the corpus.
const FROM: &str = "2015-01-01T00:00:00Z";
const TO: &str = "2030-01-01T00:00:00Z";

/// The corpus (the cgroups list slice and the seeds) through `lkplake run`, then `lkplake
/// trend` so that the change-point panels have rows.
fn corpus_lake() -> PathBuf {
    let lake = temp_dir("dashboards-lake");
    let lake_arg = lake.to_string_lossy().into_owned();
    run_into(
        &lake,
        &[
            Path::new("parse/tests/fixtures/cgroups-lkp-cc.mbox.gz"),
            Path::new("examples/reports"),
        ],
    );
    let out = lkplake(&["trend", "--lake", &lake_arg, "--format", "csv"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lake
}

/// Seconds in a Grafana interval such as `1d`, `7d`, `6h`, `30m`.
fn interval_seconds(interval: &str) -> u64 {
    let interval = interval.trim().trim_matches('\'');
    let split = interval
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(interval.len());
    let (n, unit) = interval.split_at(split);
    let n: u64 = n
        .parse()
        .unwrap_or_else(|_| panic!("interval {interval:?}"));
    n * match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        other => panic!("interval unit {other:?}"),
    }
}

/// The arguments of a macro call starting right after its `(`, and where the call ends.
fn macro_args(sql: &str, open: usize) -> (Vec<String>, usize) {
    let mut depth = 0;
    let mut args = vec![String::new()];
    for (i, c) in sql[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                let args = args
                    .into_iter()
                    .map(|a| a.trim().to_owned())
                    .filter(|a| !a.is_empty())
                    .collect();
                return (args, open + i + 1);
            }
            ')' => depth -= 1,
            ',' if depth == 0 => {
                args.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = args.last_mut() {
            last.push(c);
        }
    }
    panic!("unclosed macro call in {sql}");
}

/// Grafana's PostgreSQL macros (`pkg/tsdb/grafana-postgresql-datasource/macros.go`).
fn expand_macros(sql: &str) -> String {
    let mut out = String::new();
    let mut rest = sql;
    while let Some(start) = rest.find("$__") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let open = start + 3 + name_len;
        assert!(
            rest[open..].starts_with('('),
            "macro $__{name} without arguments in {sql}"
        );
        let (args, end) = macro_args(rest, open + 1);
        let group = |args: &[String]| {
            let secs = interval_seconds(&args[1]);
            format!("floor(extract(epoch from {})/{secs})*{secs}", args[0])
        };
        let expansion = match name {
            "time" => format!("{} AS \"time\"", args[0]),
            "timeFilter" => format!("{} BETWEEN '{FROM}' AND '{TO}'", args[0]),
            "timeFrom" => format!("'{FROM}'"),
            "timeTo" => format!("'{TO}'"),
            "timeGroup" => group(&args),
            "timeGroupAlias" => format!("{} AS \"time\"", group(&args)),
            other => panic!("macro $__{other} is not one Grafana's PostgreSQL source has"),
        };
        out.push_str(&expansion);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A variable's value as Grafana interpolates it into SQL: multi-value and All variables as a
/// quoted list, single values as they are.
fn interpolate(sql: &str, values: &HashMap<String, String>) -> String {
    let mut names: Vec<&String> = values.keys().collect();
    // Longest first, so `$machine` is not taken for `$m` + `achine`.
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let mut sql = sql.to_owned();
    for name in names {
        sql = sql
            .replace(&format!("${{{name}}}"), &values[name])
            .replace(&format!("${name}"), &values[name]);
    }
    sql
}

fn quote_list(options: &[String]) -> String {
    options
        .iter()
        .map(|o| format!("'{}'", o.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(",")
}

fn is_postgres(datasource: &Value) -> bool {
    datasource["type"] == "grafana-postgresql-datasource"
}

/// Runs one expanded statement; its rows.
fn rows(server: &Server, what: &str, sql: &str) -> Vec<String> {
    let out = server.psql(PG_PASSWORD, sql);
    assert!(
        out.status.success(),
        "{what}: {}\n{sql}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every PostgreSQL query of one dashboard: the number of rows each returned, by name.
fn run_dashboard(server: &Server, path: &Path) -> Vec<(String, usize)> {
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let title = dashboard["title"].as_str().unwrap_or_default().to_owned();
    let mut counts = Vec::new();
    let mut values: HashMap<String, String> = HashMap::new();
    for variable in dashboard["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let name = variable["name"].as_str().unwrap_or_default().to_owned();
        let options: Vec<String> = match variable["type"].as_str() {
            Some("custom") => variable["query"]
                .as_str()
                .unwrap_or_default()
                .split(',')
                .map(|o| o.trim().to_owned())
                .collect(),
            Some("query") if is_postgres(&variable["datasource"]) => {
                let query = match &variable["query"] {
                    Value::String(q) => q.clone(),
                    q => q["rawSql"].as_str().unwrap_or_default().to_owned(),
                };
                let sql = expand_macros(&interpolate(&query, &values));
                let what = format!("{title}: variable {name}");
                let options = rows(server, &what, &sql);
                counts.push((what, options.len()));
                options
            }
            _ => continue,
        };
        let current = &variable["current"]["value"];
        let all = current == "$__all"
            || current
                .as_array()
                .is_some_and(|v| v.iter().any(|x| x == "$__all"));
        let multi = variable["multi"] == true || variable["includeAll"] == true;
        let value = if all {
            quote_list(&options)
        } else {
            let chosen: Vec<String> = match current {
                Value::String(v) if options.contains(v) => vec![v.clone()],
                Value::Array(vs) => vs
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .filter(|v| options.contains(v))
                    .collect(),
                _ => Vec::new(),
            };
            // Grafana falls back to the first option when the saved one is not offered.
            let chosen = if chosen.is_empty() {
                options.iter().take(1).cloned().collect()
            } else {
                chosen
            };
            if multi {
                quote_list(&chosen)
            } else {
                chosen.concat()
            }
        };
        values.insert(name, value);
    }
    for panel in dashboard["panels"].as_array().cloned().unwrap_or_default() {
        for target in panel["targets"].as_array().cloned().unwrap_or_default() {
            let datasource = if target["datasource"].is_object() {
                &target["datasource"]
            } else {
                &panel["datasource"]
            };
            let Some(sql) = target["rawSql"].as_str() else {
                continue;
            };
            if !is_postgres(datasource) {
                continue;
            }
            let what = format!(
                "{title}: panel {:?} target {}",
                panel["title"].as_str().unwrap_or_default(),
                target["refId"].as_str().unwrap_or_default()
            );
            let sql = expand_macros(&interpolate(sql, &values));
            counts.push((what.clone(), rows(server, &what, &sql).len()));
        }
    }
    counts
}

#[test]
fn grafanas_macros_expand_like_grafana_does() {
    assert_eq!(
        expand_macros(
            "SELECT $__timeGroupAlias(\"time\", '7d'), count(*) FROM t WHERE $__timeFilter(\"time\") GROUP BY 1"
        ),
        format!(
            "SELECT floor(extract(epoch from \"time\")/604800)*604800 AS \"time\", count(*) FROM t WHERE \"time\" BETWEEN '{FROM}' AND '{TO}' GROUP BY 1"
        )
    );
    assert_eq!(
        expand_macros("$__timeGroup(date_trunc('day', time), 1h) > $__timeFrom()"),
        format!("floor(extract(epoch from date_trunc('day', time))/3600)*3600 > '{FROM}'")
    );
    let values = HashMap::from([
        ("m".to_owned(), "'x'".to_owned()),
        ("machine".to_owned(), "'a','b''c'".to_owned()),
    ]);
    assert_eq!(
        interpolate("machine IN ($machine) AND m = ${m}", &values),
        "machine IN ('a','b''c') AND m = 'x'"
    );
}

#[test]
fn every_dashboard_query_runs_and_returns_rows_on_the_corpus_lake() {
    let lake = corpus_lake();
    let server = Server::start(&lake, &[]);
    let dir = crate::common::root().join("infra/grafana/dashboards");
    let mut dashboards: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    dashboards.sort();
    let mut queries = 0;
    for path in &dashboards {
        for (what, count) in run_dashboard(&server, path) {
            assert!(count > 0, "{what} returned no rows on the corpus lake");
            queries += 1;
        }
    }
    // Four SQL dashboards (headlines, regressions, series, changes); the exporter's is PromQL.
    assert!(
        queries >= 20,
        "only {queries} SQL queries found in {}",
        dir.display()
    );
}
