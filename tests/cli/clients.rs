//! The Postgres clients people already use, against `lkplake serve` with a password:
//! SQLAlchemy with pandas, psycopg2, asyncpg, node-postgres, pgcli and psql's `\d` commands
//! (psycopg 3 and psql's queries are in `serve.rs`). `./infra/test.sh` installs them all.
//!
//! Every client reads seed 002's vm-scalability.throughput for the head commit, printed as
//! 3.164e+08 in `examples/reports/002_5fa9b7d75deb5046.txt`, and the seed lake's row counts:
//! 5 report tests (one per seed report) and 560 metric rows (the observations `lkplake run`
//! reports for the seeds, 2 columns × 280 table rows).

use crate::common::{PG_PASSWORD, Server, seed_lake};
use serde_json::{Value, json};
use std::process::Command;

const THROUGHPUT: f64 = 316_400_000.0;
const REPORT_TESTS: i64 = 5;
const METRIC_ROWS: i64 = 560;

fn output_json(out: &std::process::Output, what: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(out.status.success(), "{what} failed: {value:#}");
    value
}

fn python_client(server: &Server, client: &str) -> Value {
    let out = Command::new("python3")
        .arg(crate::common::root().join("tests/clients/python_clients.py"))
        .args([client, "127.0.0.1", &server.port.to_string(), PG_PASSWORD])
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    output_json(&out, client)
}

fn assert_reads_the_seed_numbers(got: &Value) {
    assert_eq!(got["throughput"].as_f64(), Some(THROUGHPUT), "{got:#}");
    assert_eq!(got["rows"].as_i64(), Some(1), "{got:#}");
    assert_eq!(got["reports"].as_i64(), Some(REPORT_TESTS), "{got:#}");
    assert_eq!(got["metrics"].as_i64(), Some(METRIC_ROWS), "{got:#}");
}

#[test]
fn sqlalchemy_and_pandas_read_with_bound_parameters_and_reflect_tables_views_and_columns() {
    let server = Server::start(&seed_lake("clients-sqlalchemy"), &[]);
    let got = python_client(&server, "sqlalchemy");
    assert_reads_the_seed_numbers(&got);
    assert_eq!(got["server_version_info"], json!([16, 6]), "{got:#}");
    assert_eq!(
        got["tables"],
        json!([
            "failures",
            "links",
            "mention_mails",
            "metrics",
            "reports",
            "triage"
        ])
    );
    assert_eq!(
        got["views"],
        json!([
            "comparisons",
            "discussion",
            "failure_comparisons",
            "headlines",
            "mentions",
            "regressions",
            "series"
        ])
    );
    assert_eq!(
        got["reports_columns"],
        json!(["report_key", "test_index", "message_id", "date"])
    );
}

#[test]
fn psycopg2_reads_the_seed_numbers_in_a_transaction() {
    let server = Server::start(&seed_lake("clients-psycopg2"), &[]);
    let got = python_client(&server, "psycopg2");
    assert_reads_the_seed_numbers(&got);
    assert_eq!(got["server_version"], json!(160006));
}

#[test]
fn asyncpg_reads_the_seed_numbers_with_prepared_statements_and_transactions() {
    let server = Server::start(&seed_lake("clients-asyncpg"), &[]);
    let got = python_client(&server, "asyncpg");
    assert_reads_the_seed_numbers(&got);
    assert_eq!(got["distinct_in_transaction"], json!(REPORT_TESTS));
}

#[test]
fn node_postgres_reads_the_seed_numbers_and_the_postgres_version() {
    let server = Server::start(&seed_lake("clients-node"), &[]);
    let out = Command::new("node")
        .arg(crate::common::root().join("tests/clients/node/client.js"))
        .args(["127.0.0.1", &server.port.to_string(), PG_PASSWORD])
        .output()
        .unwrap_or_else(|e| panic!("node: {e}"));
    let got = output_json(&out, "node-postgres");
    assert_reads_the_seed_numbers(&got);
    let version = got["version"].as_str().unwrap_or_default();
    assert!(version.starts_with("PostgreSQL 16.6 on "), "{version}");
    assert!(version.contains("(lkplake "), "{version}");
}

#[test]
fn pgcli_runs_queries_non_interactively() {
    let server = Server::start(&seed_lake("clients-pgcli"), &[]);
    let out = Command::new("pgcli")
        .args([
            "--less-chatty",
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-U",
            "lkplake",
            "-d",
            "lkplake",
            "-c",
            "SELECT head_value FROM comparisons WHERE testcase = 'vm-scalability' \
             AND machine = 'lkp-csl-2sp3' AND metric = 'vm-scalability.throughput'",
            "-c",
            "SELECT count(*) AS n FROM metrics",
        ])
        .env("PGPASSWORD", PG_PASSWORD)
        .env("HOME", crate::common::temp_dir("pgcli-home"))
        .output()
        .unwrap_or_else(|e| panic!("pgcli: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("316400000.0"), "{stdout}");
    assert!(stdout.contains("| 560 |"), "{stdout}");
}

fn psql_describe(server: &Server, command: &str) -> String {
    let out = server.psql(PG_PASSWORD, command);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{command}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn psqls_describe_commands_list_the_tables_the_views_and_a_tables_columns() {
    let server = Server::start(&seed_lake("clients-psql-d"), &[]);
    // Schema, name and type of each relation (the owner column says what pg_catalog says).
    let listed = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split('|').take(3).collect::<Vec<_>>().join("|"))
            .collect()
    };
    let tables = psql_describe(&server, "\\dt");
    assert_eq!(
        listed(&tables),
        vec![
            "public|failures|table",
            "public|links|table",
            "public|mention_mails|table",
            "public|metrics|table",
            "public|reports|table",
            // Empty until the first `lkplake triage`: the `regressions` view reads it.
            "public|triage|table"
        ],
        "{tables}"
    );
    let views = psql_describe(&server, "\\dv");
    assert_eq!(
        listed(&views),
        vec![
            "public|comparisons|view",
            "public|discussion|view",
            "public|failure_comparisons|view",
            "public|headlines|view",
            "public|mentions|view",
            "public|regressions|view",
            "public|series|view"
        ],
        "{views}"
    );
    let columns = psql_describe(&server, "\\d reports");
    for column in [
        "report_key|text||not null",
        "test_index|integer||not null",
        "date|timestamp with time zone",
        "headline_change_pct|double precision",
    ] {
        assert!(
            columns.lines().any(|l| l.starts_with(column)),
            "{column} in {columns}"
        );
    }
}

#[test]
fn version_answers_like_postgres_and_savepoints_work_inside_a_read_only_transaction() {
    let server = Server::start(&seed_lake("clients-savepoint"), &[]);
    let results = server.psycopg(
        PG_PASSWORD,
        &json!([
            "SELECT version() AS v, current_setting('server_version') AS s",
            "BEGIN",
            "SAVEPOINT s1",
            "SELECT 1 AS one",
            "RELEASE SAVEPOINT s1",
            "SAVEPOINT s2",
            "SELECT no_such_column FROM metrics",
            "SELECT 2 AS refused_until_rollback",
            "ROLLBACK TO SAVEPOINT s2",
            "SELECT count(*) AS n FROM reports",
            "COMMIT",
            "SAVEPOINT outside",
        ]),
        &[],
    );
    let r = results.as_array().unwrap_or_else(|| panic!("{results}"));
    let version = r[0]["rows"][0][0].as_str().unwrap_or_default();
    assert!(version.starts_with("PostgreSQL 16.6 on "), "{version}");
    assert!(version.ends_with(", DataFusion 55.2.0)"), "{version}");
    assert_eq!(r[0]["rows"][0][1], json!("16.6"));
    for i in [1, 2, 4, 5, 8, 10] {
        assert_eq!(
            r[i],
            json!({"columns": [], "rows": []}),
            "statement {i}: {results}"
        );
    }
    assert_eq!(r[3]["rows"], json!([[1]]));
    assert!(r[6]["error"].is_object(), "{}", r[6]);
    // As in Postgres: a failed statement aborts the transaction until ROLLBACK TO SAVEPOINT.
    assert_eq!(r[7]["error"]["sqlstate"], json!("25P01"), "{}", r[7]);
    assert_eq!(r[9]["rows"], json!([[REPORT_TESTS]]));
    assert_eq!(r[11]["error"]["sqlstate"], json!("25P01"), "{}", r[11]);
}

/// Runs `tests/clients/differential.py` over `lake`: `count` queries from generator `seed`
/// through `lkplake serve` and through DuckDB on the same live Parquet files.
fn differential(lake: &std::path::Path, seed: u64, count: usize) {
    let server = Server::start(lake, &[]);
    let out = Command::new("python3")
        .arg(crate::common::root().join("tests/clients/differential.py"))
        .arg(lake)
        .arg(server.dsn(PG_PASSWORD))
        .args([seed.to_string(), count.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let got = output_json(&out, "differential.py");
    eprintln!(
        "{} queries from generator seed {seed}: {} different, {} refused by both engines",
        got["queries"], got["different"], got["both_failed"]
    );
    assert_eq!(
        got["different"],
        json!(0),
        "generator seed {seed} over {}: {:#}",
        lake.display(),
        got["differences"]
    );
    // Queries both engines refuse test nothing; the generator must not drift into them.
    let refused = got["both_failed"].as_u64().unwrap_or(u64::MAX);
    assert!(
        refused * 20 <= count as u64,
        "{refused} of {count} refused by both: {got:#}"
    );
}

#[test]
fn generated_queries_over_the_seed_lake_answer_as_duckdb_does() {
    differential(&seed_lake("differential-seeds"), 1, 2500);
}

#[test]
fn generated_queries_over_a_generated_lake_answer_as_duckdb_does() {
    let reports = crate::common::temp_dir("differential-reports");
    crate::common::generate(&reports, &["--reports", "40", "--seed", "11"]);
    let lake = crate::common::temp_dir("differential-lake");
    crate::common::run_into(&lake, &[&reports]);
    differential(&lake, 2, 2500);
}
