//! `lkplake serve --pg` with real clients: psql (simple protocol, what Grafana's driver speaks
//! too) and Python psycopg 3 (extended protocol, parameters). Values are the seed reports'
//! numbers; see `tests/cli/sql.rs` for where they are read from.

use crate::common::{PG_PASSWORD, Server, lkplake, seed_lake, temp_dir};
use serde_json::json;
use std::time::{Duration, Instant};

const THROUGHPUT_002: &str = "SELECT base_value, head_value, change, verdict FROM comparisons \
     WHERE testcase = 'vm-scalability' AND machine = 'lkp-csl-2sp3' \
     AND metric = 'vm-scalability.throughput'";

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn psql_reads_the_seed_numbers_and_is_refused_writes_and_wrong_passwords() {
    let lake = seed_lake("serve-psql");
    let server = Server::start(&lake, &[]);

    let out = server.psql(PG_PASSWORD, THROUGHPUT_002);
    assert!(out.status.success(), "{}\n{}", stderr(&out), server.log());
    // float8 columns print with a fractional part, whole or not.
    assert_eq!(stdout(&out), "235200000.0|316400000.0|34.5|improvement\n");

    let out = server.psql(
        PG_PASSWORD,
        "SELECT count(DISTINCT report_key) FROM reports",
    );
    assert_eq!(stdout(&out), "5\n", "{}", stderr(&out));

    for (sql, what) in [
        ("DROP TABLE metrics", "DROP TABLE is refused"),
        ("DELETE FROM metrics WHERE true", "DELETE is refused"),
        (
            "INSERT INTO reports SELECT * FROM reports",
            "INSERT is refused",
        ),
        ("CREATE TABLE t AS SELECT 1", "CREATE TABLE is refused"),
        (
            "COPY metrics TO '/tmp/lkplake-psql-stolen.csv'",
            "COPY is refused",
        ),
        ("COPY metrics FROM '/etc/passwd'", "COPY is refused"),
        (
            "CREATE EXTERNAL TABLE pw STORED AS CSV LOCATION '/etc/passwd'",
            "CREATE EXTERNAL TABLE is refused",
        ),
        (
            "SET datafusion.execution.target_partitions = 1",
            "SET datafusion.execution.target_partitions",
        ),
    ] {
        let out = server.psql(PG_PASSWORD, sql);
        let err = stderr(&out);
        assert!(!out.status.success(), "{sql} was not refused");
        assert!(err.contains("ERROR:  25006:"), "{sql}: {err}");
        assert!(
            err.contains(what) && err.contains("read-only"),
            "{sql}: {err}"
        );
    }
    assert!(!std::path::Path::new("/tmp/lkplake-psql-stolen.csv").exists());

    // The refused statements changed nothing, and the session is still usable.
    let out = server.psql(
        PG_PASSWORD,
        "SELECT count(DISTINCT report_key) FROM reports",
    );
    assert_eq!(stdout(&out), "5\n", "{}", stderr(&out));

    let out = server.psql("not the password", "SELECT 1");
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .to_lowercase()
            .contains("password authentication failed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn psycopg_binds_parameters_and_gets_postgres_error_codes() {
    let lake = seed_lake("serve-psycopg");
    let server = Server::start(&lake, &[]);
    let results = server.psycopg(
        PG_PASSWORD,
        &json!([
            THROUGHPUT_002,
            {"sql": "SELECT metric, head_value FROM comparisons WHERE testcase = %s AND machine = %s \
                     AND head_value > %s ORDER BY head_value DESC LIMIT 2",
             "params": ["vm-scalability", "lkp-csl-2sp3", 1.0e8]},
            "SELECT time FROM reports WHERE testcase = 'vm-scalability' AND machine = 'lkp-csl-2sp3'",
            "UPDATE metrics SET value = 0",
            "SELECT no_such_column FROM metrics",
            "SELECT 1 AS still_alive",
        ]),
        &[],
    );
    let results = results.as_array().unwrap_or_else(|| panic!("{results}"));
    assert_eq!(
        results[0],
        json!({"columns": ["base_value", "head_value", "change", "verdict"],
               "rows": [[2.352e8, 3.164e8, 34.5, "improvement"]]})
    );
    // Both throughput and median printed 3.164e+08 for the head commit, the largest values.
    let mut top = results[1]["rows"].clone();
    if let Some(rows) = top.as_array_mut() {
        rows.sort_by_key(|r| r[0].as_str().map(str::to_owned));
    }
    assert_eq!(
        top,
        json!([
            ["vm-scalability.median", 3.164e8],
            ["vm-scalability.throughput", 3.164e8]
        ])
    );
    // reports has no `time` column (it is `date`): an error naming it, not a dropped connection.
    assert!(
        results[2]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("time")),
        "{}",
        results[2]
    );
    assert_eq!(
        results[3]["error"]["sqlstate"],
        json!("25006"),
        "{}",
        results[3]
    );
    assert_eq!(
        results[3]["error"]["class"],
        json!("ReadOnlySqlTransaction")
    );
    assert!(
        results[4]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no_such_column"))
    );
    assert_eq!(results[5]["rows"], json!([[1]]));

    let refused = server.psycopg("wrong", &json!(["SELECT 1"]), &[]);
    assert!(
        refused["connect_error"]["message"]
            .as_str()
            .is_some_and(|m| m.to_lowercase().contains("password authentication failed")),
        "{refused}"
    );
}

/// What Grafana's PostgreSQL data source sends by itself (see
/// `query/tests/fixtures/grafana-queries.md` for the source of each), and panel queries with
/// its macros expanded the way its Go backend expands them.
const GRAFANA: &[(&str, &str)] = &[
    ("health check, lib/pq", ";"),
    ("health check, pgx", "-- ping"),
    ("health check, 9.0-9.3", "SELECT 1"),
    (
        "version",
        "SELECT current_setting('server_version_num')::int/100 as version",
    ),
    (
        "timescaledb",
        "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'",
    ),
    (
        "tables, 11.4+",
        r#"SELECT
    CASE WHEN 
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN 
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          ) THEN 0 ELSE 1 END, 1"#,
    ),
    (
        "tables, 9.5-11.3",
        r#"select quote_ident(table_name) as "table" from information_schema.tables
    where quote_ident(table_schema) not in ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
      and 
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )"#,
    ),
    (
        "columns, 11.4+",
        r#"SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident('metrics'),1) = 2
        THEN quote_ident(table_schema) = (parse_ident('metrics'))[1]
          AND quote_ident(table_name) = (parse_ident('metrics'))[2]
        ELSE quote_ident(table_name) = 'metrics'
          AND 
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )
      END"#,
    ),
    (
        "columns, 10.4-11.3",
        "select quote_ident(column_name) as \"column\", data_type as \"type\"\n    from information_schema.columns\n    where quote_ident(table_name) = 'metrics';\n    ",
    ),
    (
        "panel: $__timeGroupAlias + $__timeFilter",
        r#"SELECT
  floor(extract(epoch from "time")/86400)*86400 AS "time",
  avg(value) AS "value"
FROM metrics
WHERE "time" BETWEEN '2020-01-01T00:00:00Z' AND '2026-12-31T00:00:00Z'
  AND metric = 'vm-scalability.throughput'
GROUP BY 1
ORDER BY 1"#,
    ),
    (
        "panel: $__time + $__timeFrom/$__timeTo",
        r#"SELECT "time" AS "time", head_value AS "value", testcase AS "metric" FROM headlines WHERE "time" >= '2020-01-01T00:00:00Z' AND "time" <= '2026-12-31T00:00:00Z' ORDER BY 1"#,
    ),
    (
        "panel: $__timeEpoch + 30d group",
        r#"SELECT extract(epoch from "time") as "time", value FROM series WHERE "time" BETWEEN '2020-01-01T00:00:00Z' AND '2026-12-31T00:00:00Z' AND floor(extract(epoch from "time")/2.592e+06)*2.592e+06 > 0 ORDER BY 1"#,
    ),
    (
        "panel: $__unixEpochFilter on an epoch expression",
        r#"SELECT count(*) FROM metrics WHERE extract(epoch from "time") >= 1577836800 AND extract(epoch from "time") <= 1798675200"#,
    ),
];

#[test]
fn grafanas_introspection_and_macro_expanded_queries_run() {
    let lake = seed_lake("serve-grafana");
    let server = Server::start(&lake, &[]);
    // Grafana's backend sends each as one simple-protocol query with text results, as psql does.
    for (name, sql) in GRAFANA {
        let out = server.psql(PG_PASSWORD, sql);
        assert!(out.status.success(), "{name}: {}\n{sql}", stderr(&out));
    }
    let rows = |sql: &str| stdout(&server.psql(PG_PASSWORD, sql));
    assert_eq!(rows(GRAFANA[3].1), "1600\n");
    assert_eq!(rows(GRAFANA[4].1), "");
    assert_eq!(
        rows(GRAFANA[5].1),
        "comparisons\ndiscussion\nfailure_comparisons\nfailures\nheadlines\nlinks\nmention_mails\nmentions\nmetrics\nregressions\nreports\nseries\ntriage\n"
    );
    let columns = rows(GRAFANA[7].1);
    for column in ["time|", "testcase|", "value|", "report_key|"] {
        assert!(columns.contains(column), "{column} missing: {columns}");
    }
    // Seed 002 is the only seed measuring throughput: dated 2023-01-19 22:00:52 +0800, its day
    // bucket is 2023-01-19 UTC (1674086400), and the mean of base and head is
    // (2.352e8 + 3.164e8) / 2 = 2.758e8.
    assert_eq!(rows(GRAFANA[9].1), "1674086400.0|275800000.0\n");

    // The same set through psycopg, which uses the extended protocol.
    let statements: Vec<&str> = GRAFANA.iter().skip(3).map(|(_, sql)| *sql).collect();
    let results = server.psycopg(PG_PASSWORD, &json!(statements), &[]);
    let results = results
        .as_array()
        .unwrap_or_else(|| panic!("psycopg answered no list of results: {results}"));
    assert_eq!(results.len(), statements.len(), "{results:#?}");
    for (result, sql) in results.iter().zip(&statements) {
        assert!(result.get("error").is_none(), "{sql}: {result}");
    }
    // The values known above, now as typed values: an integer, no row, two floats.
    assert_eq!(results[0]["rows"], json!([[1600]]));
    assert_eq!(results[1]["rows"], json!([]));
    assert_eq!(results[6]["rows"], json!([[1674086400.0, 2.758e8]]));
}

#[test]
fn commits_made_after_start_are_served_without_a_restart() {
    let lake = temp_dir("serve-follow");
    let lake_arg = lake.to_string_lossy().into_owned();
    let first = lkplake(
        &[
            "run",
            "--lake",
            &lake_arg,
            "examples/reports/000_304c359333adb001.txt",
        ],
        None,
    );
    assert!(first.status.success(), "{}", stderr(&first));
    let server = Server::start(&lake, &["--refresh", "200ms"]);
    let count = || {
        stdout(&server.psql(
            PG_PASSWORD,
            "SELECT count(DISTINCT report_key) FROM headlines",
        ))
    };
    assert_eq!(count(), "1\n");

    let more = lkplake(&["run", "--lake", &lake_arg, "examples/reports"], None);
    assert!(more.status.success(), "{}", stderr(&more));
    let started = Instant::now();
    while count() != "5\n" {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "new commits not visible after 30 s: {}\n{}",
            count(),
            server.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_statement_timeout_and_memory_limit_stop_runaway_queries_and_the_server_goes_on() {
    let lake = seed_lake("serve-limits");
    let server = Server::start(
        &lake,
        &["--statement-timeout", "2s", "--memory-limit", "64M"],
    );
    // Ten billion rows would take minutes; the server stops it at 2 s.
    let started = Instant::now();
    let out = server.psql(
        PG_PASSWORD,
        "SELECT count(*) FROM generate_series(1, 10000000000)",
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("57014"), "{}", stderr(&out));
    assert!(stderr(&out).contains("canceling statement due to statement timeout"));
    // A client may ask for less, never for more.
    let out = server.psql_session(
        PG_PASSWORD,
        &[
            "SET statement_timeout = '100ms'",
            "SELECT count(*) FROM generate_series(1, 10000000000)",
        ],
    );
    assert!(
        stderr(&out).contains("statement timeout (100 ms)"),
        "{}",
        stderr(&out)
    );
    eprintln!("timeouts answered after {:?}", started.elapsed());
    let out = server.psql(PG_PASSWORD, "SELECT 1");
    assert_eq!(stdout(&out), "1\n", "{}", stderr(&out));

    // The memory limit on a server whose timeout cannot fire first: on a loaded machine the
    // debug build took more than 2 s to reach 64 MB, and the timeout answered instead.
    let server = Server::start(
        &lake,
        &["--statement-timeout", "300s", "--memory-limit", "64M"],
    );
    // Collecting 50 million integers into one array needs ~400 MB: over the limit.
    let out = server.psql(
        PG_PASSWORD,
        "SELECT cardinality(array_agg(value)) FROM generate_series(1, 50000000)",
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Resources exhausted"),
        "{}",
        stderr(&out)
    );

    let out = server.psql(PG_PASSWORD, "SELECT 1");
    assert_eq!(stdout(&out), "1\n", "{}", stderr(&out));
}

#[test]
fn thirty_two_clients_at_once_all_get_answers() {
    let lake = seed_lake("serve-load");
    let server = Server::start(&lake, &[]);
    let statements = json!([
        THROUGHPUT_002,
        "SELECT testcase, count(*) FROM metrics GROUP BY testcase",
        "SELECT * FROM headlines ORDER BY time",
        {"sql": "SELECT time, value FROM series WHERE testcase = %s AND metric = %s ORDER BY time",
         "params": ["vm-scalability", "vm-scalability.throughput"]},
    ]);
    let pid = server.pid().to_string();
    let report = server.psycopg(
        PG_PASSWORD,
        &statements,
        &["--clients", "32", "--seconds", "5", "--pid", &pid],
    );
    eprintln!("{report}");
    assert_eq!(report["errors"], json!(0), "{report}");
    assert!(
        report["queries"].as_u64().is_some_and(|q| q >= 32),
        "{report}"
    );
}

#[test]
fn listening_beyond_loopback_without_a_password_is_refused() {
    let lake = seed_lake("serve-exposed");
    let out = lkplake(
        &[
            "serve",
            "--lake",
            &lake.to_string_lossy(),
            "--pg",
            "0.0.0.0:0",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("listening on 0.0.0.0:0 needs a password"),
        "{}",
        stderr(&out)
    );
}

/// The path the next commit of `table` will have (`_delta_log/<20-digit version>.json`).
fn next_log_entry(lake: &std::path::Path, table: &str) -> std::path::PathBuf {
    let versions = crate::common::log_entries(lake, table).len();
    lake.join(table)
        .join("_delta_log")
        .join(format!("{versions:020}.json"))
}

#[test]
fn a_commit_damaged_after_start_leaves_its_table_served_at_the_version_it_had() {
    let lake = temp_dir("serve-damaged-commit");
    let lake_arg = lake.to_string_lossy().into_owned();
    let seed = "examples/reports/000_304c359333adb001.txt";
    let first = lkplake(&["run", "--lake", &lake_arg, seed], None);
    assert!(first.status.success(), "{}", stderr(&first));
    let server = Server::start(&lake, &["--refresh", "200ms"]);
    let count = || stdout(&server.psql(PG_PASSWORD, "SELECT count(*) FROM reports"));
    assert_eq!(count(), "1\n");

    // A writer's commit cut short: the log's next entry is half a JSON line.
    let damaged = next_log_entry(&lake, "reports");
    std::fs::write(&damaged, "{\"commitInfo\":{\"timestamp\":17").unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    while !server.log().contains("serving the version loaded before") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no refresh noticed the damage: {}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        server
            .log()
            .contains(&format!("its log entry {} is damaged", damaged.display())),
        "{}",
        server.log()
    );
    assert_eq!(count(), "1\n", "the version loaded before");
    let out = server.psql(PG_PASSWORD, "SELECT 1");
    assert!(out.status.success(), "still serving: {}", stderr(&out));
}

#[test]
fn a_table_damaged_at_start_fails_only_the_queries_that_read_it_until_it_is_restored() {
    let lake = seed_lake("serve-damaged-table");
    let entry = next_log_entry(&lake, "metrics");
    let newest = entry.with_file_name(format!(
        "{:020}.json",
        entry
            .file_stem()
            .and_then(|s| s.to_str()?.parse::<u64>().ok())
            .unwrap_or_default()
            - 1
    ));
    let whole = std::fs::read(&newest).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&newest, b"not json\n").unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(&lake, &["--refresh", "200ms"]);

    let out = server.psql(PG_PASSWORD, "SELECT count(*) FROM reports");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "5\n", "the five seeds");
    let out = server.psql(PG_PASSWORD, "SELECT count(*) FROM metrics");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("its log entry {} is damaged", newest.display())),
        "{}",
        stderr(&out)
    );

    // Restored from a backup: the next refresh serves the table.
    std::fs::write(&newest, whole).unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    loop {
        let out = server.psql(PG_PASSWORD, "SELECT count(*) FROM metrics");
        if out.status.success() {
            // The five seeds hold 560 observations (tests/cli/sql.rs).
            assert_eq!(stdout(&out), "560\n");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not served 30 s after the restore: {}",
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
