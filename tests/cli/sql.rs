//! `lkplake sql` and the views: values checked against what the seed reports print.
//!
//! Seed 002 (`examples/reports/002_5fa9b7d75deb5046.txt`) is the vm-scalability report on
//! lkp-csl-2sp3 comparing dad6a5eb55 with cb67f4282b; the expected numbers below are read
//! off its table.

use crate::common::{lkplake, seed_lake, set_lake_format, sql_json, temp_dir};
use serde_json::{Value, json};

const SEED_002: &str = "testcase = 'vm-scalability' AND machine = 'lkp-csl-2sp3'";

fn one(rows: &[Value]) -> &Value {
    assert_eq!(rows.len(), 1, "expected one row: {rows:?}");
    &rows[0]
}

#[test]
fn comparisons_put_base_head_and_change_side_by_side_as_the_report_prints_them() {
    let lake = seed_lake("sql-comparisons");
    let rows = sql_json(
        &lake,
        &format!(
            "SELECT base_commit, commit, base_value, base_stddev_pct, head_value, head_stddev_pct, \
             change, change_unit, direction, is_headline, verdict FROM comparisons \
             WHERE {SEED_002} AND metric = 'vm-scalability.throughput'"
        ),
    );
    let row = one(&rows);
    assert!(
        row["base_commit"]
            .as_str()
            .is_some_and(|c| c.starts_with("dad6a5eb55")),
        "{row}"
    );
    assert!(
        row["commit"]
            .as_str()
            .is_some_and(|c| c.starts_with("cb67f4282b")),
        "{row}"
    );
    // "2.352e+08  +34.5%  3.164e+08  vm-scalability.throughput"
    assert_eq!(row["base_value"], json!(2.352e8));
    assert_eq!(row["head_value"], json!(3.164e8));
    assert_eq!(row["base_stddev_pct"], Value::Null);
    assert_eq!(row["change"], json!(34.5));
    assert_eq!(row["change_unit"], json!("percent"));
    assert_eq!(row["direction"], json!("higher_is_better"));
    assert_eq!(row["is_headline"], json!(true));
    assert_eq!(row["verdict"], json!("improvement"));

    // "1132841 ± 37%  +90.2%  2154205 ± 22%  proc-vmstat.compact_free_scanned": a diagnostic
    // counter with no direction, so no verdict.
    let rows = sql_json(
        &lake,
        &format!(
            "SELECT base_value, base_stddev_pct, head_value, head_stddev_pct, change, direction, \
             verdict FROM comparisons WHERE {SEED_002} AND metric = 'proc-vmstat.compact_free_scanned'"
        ),
    );
    assert_eq!(
        one(&rows),
        &json!({"base_value": 1132841.0, "base_stddev_pct": 37.0, "head_value": 2154205.0,
                "head_stddev_pct": 22.0, "change": 90.2, "direction": null, "verdict": null})
    );

    // "31.13 ± 4%  +4.8  35.91 ± 4%  perf-stat.i.iTLB-load-miss-rate%": a percentage metric
    // whose change is printed in points, not percent.
    let rows = sql_json(
        &lake,
        &format!(
            "SELECT base_value, head_value, change, change_unit FROM comparisons \
             WHERE {SEED_002} AND metric = 'perf-stat.i.iTLB-load-miss-rate%'"
        ),
    );
    assert_eq!(
        one(&rows),
        &json!({"base_value": 31.13, "head_value": 35.91, "change": 4.8, "change_unit": "absolute"})
    );
}

#[test]
fn series_has_one_observation_per_commit_in_time_order_and_headlines_one_row_per_report_test() {
    let lake = seed_lake("sql-series");
    let rows = sql_json(
        &lake,
        &format!(
            "SELECT commit, value, samples FROM series WHERE {SEED_002} \
             AND metric = 'vm-scalability.throughput' ORDER BY time, value"
        ),
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows[0]["commit"]
            .as_str()
            .is_some_and(|c| c.starts_with("dad6a5eb55"))
    );
    assert_eq!(
        (&rows[0]["value"], &rows[0]["samples"]),
        (&json!(2.352e8), &json!(1))
    );
    assert!(
        rows[1]["commit"]
            .as_str()
            .is_some_and(|c| c.starts_with("cb67f4282b"))
    );
    assert_eq!(rows[1]["value"], json!(3.164e8));

    // Every report test with a headline gives exactly one headline row, carrying the report's
    // subject and kind.
    let tests_with_headline = sql_json(
        &lake,
        "SELECT count(*) AS n FROM reports WHERE headline_metric IS NOT NULL",
    );
    let headlines = sql_json(&lake, "SELECT count(*) AS n FROM headlines");
    assert_eq!(headlines, tests_with_headline);
    let rows = sql_json(
        &lake,
        &format!("SELECT metric, change, kind, verdict, subject FROM headlines WHERE {SEED_002}"),
    );
    let row = one(&rows);
    assert_eq!(row["metric"], json!("vm-scalability.throughput"));
    assert_eq!(row["change"], json!(34.5));
    assert_eq!(
        (&row["kind"], &row["verdict"]),
        (&json!("improvement"), &json!("improvement"))
    );
    assert!(
        row["subject"]
            .as_str()
            .is_some_and(|s| s.contains("cb67f4282b")),
        "{row}"
    );
}

#[test]
fn csv_and_table_formats_print_the_same_rows() {
    let lake = seed_lake("sql-formats");
    let sql = format!(
        "SELECT metric, change FROM comparisons WHERE {SEED_002} \
         AND metric IN ('vm-scalability.throughput', 'vm-scalability.median') ORDER BY metric"
    );
    let lake_arg = lake.to_string_lossy().into_owned();
    let csv = lkplake(&["sql", "--lake", &lake_arg, "--format", "csv", &sql], None);
    assert!(
        csv.status.success(),
        "{}",
        String::from_utf8_lossy(&csv.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&csv.stdout),
        "metric,change\nvm-scalability.median,34.5\nvm-scalability.throughput,34.5\n"
    );
    let table = lkplake(&["sql", "--lake", &lake_arg, &sql], None);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("| vm-scalability.median     | 34.5   |"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("(2 rows)"), "{text}");
}

#[test]
fn statements_that_write_or_touch_files_are_refused_with_the_reason() {
    let lake = seed_lake("sql-refused");
    let lake_arg = lake.to_string_lossy().into_owned();
    let counts = || {
        sql_json(
            &lake,
            "SELECT (SELECT count(*) FROM metrics) AS metrics, (SELECT count(*) FROM reports) AS reports",
        )
    };
    let before = counts();
    // The five seeds hold 560 observations.
    assert_eq!(before[0]["metrics"], 560, "{before:?}");
    for (sql, what) in [
        ("DELETE FROM metrics", "DELETE is refused"),
        (
            "INSERT INTO reports SELECT * FROM reports",
            "INSERT is refused",
        ),
        (
            "COPY metrics TO '/tmp/lkplake-stolen.parquet'",
            "COPY is refused",
        ),
        (
            "CREATE EXTERNAL TABLE pw STORED AS CSV LOCATION '/etc/passwd'",
            "CREATE EXTERNAL TABLE is refused",
        ),
    ] {
        let out = lkplake(&["sql", "--lake", &lake_arg, sql], None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sql}: {stderr}");
        assert!(stderr.contains(what), "{sql}: {stderr}");
        assert!(stderr.contains("read-only"), "{sql}: {stderr}");
    }
    assert!(!std::path::Path::new("/tmp/lkplake-stolen.parquet").exists());
    // The lake is untouched.
    assert_eq!(counts(), before);
}

#[test]
fn a_missing_lake_is_named_with_what_to_run_first() {
    let dir = temp_dir("sql-no-lake");
    let out = lkplake(&["sql", "--lake", &dir.to_string_lossy(), "SELECT 1"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 4: the lake's status (docs/CLI.md, "Exit statuses").
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "no lake table at {}",
            dir.join("metrics").display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("run `lkplake run`"), "{stderr}");
}

#[test]
fn the_shell_reads_statements_across_lines_and_keeps_going_after_an_error() {
    let lake = seed_lake("sql-shell");
    let history = temp_dir("sql-shell-history").join("history");
    let mut cmd =
        crate::common::command(&["sql", "--lake", &lake.to_string_lossy(), "--format", "csv"]);
    cmd.env("LKPLAKE_HISTORY", &history);
    let input = "SELECT count(*)\n  AS n FROM reports\n WHERE testcase = 'vm-scalability';\n\
                 SELECT nonsense FROM nowhere;\n\\d\nSELECT 40 + 2 AS answer;\n\\q\n";
    let out = crate::common::run_with_stdin(cmd, input.as_bytes());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("n\n1\n"), "{stdout}");
    assert!(
        stderr.contains("error:") && stderr.contains("nowhere"),
        "{stderr}"
    );
    for name in [
        "comparisons,VIEW",
        "headlines,VIEW",
        "metrics,BASE TABLE",
        "reports,BASE TABLE",
        "series,VIEW",
    ] {
        assert!(stdout.contains(name), "{name} missing from \\d: {stdout}");
    }
    assert!(stdout.contains("answer\n42\n"), "{stdout}");
    let saved = std::fs::read_to_string(&history).unwrap_or_default();
    assert!(
        saved.contains("SELECT 40 + 2 AS answer;"),
        "history: {saved}"
    );
}

fn files_scanned(lake: &std::path::Path, sql: &str) -> Vec<u64> {
    let rows = sql_json(lake, &format!("EXPLAIN ANALYZE {sql}"));
    let plan = rows
        .iter()
        .filter_map(|r| r["plan"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let counts: Vec<u64> = plan
        .split("files_opened=")
        .skip(1)
        .filter_map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
        .collect();
    assert!(!counts.is_empty(), "no scan in plan: {plan}");
    counts
}

#[test]
fn filters_on_testcase_and_machine_prune_partitions_through_tables_and_views() {
    let lake = seed_lake("sql-pruning");
    // The five seeds are five testcases on five machines: one partition (one file) each.
    assert_eq!(files_scanned(&lake, "SELECT sum(value) FROM metrics"), [5]);
    assert_eq!(
        files_scanned(
            &lake,
            &format!("SELECT sum(value) FROM metrics WHERE {SEED_002}")
        ),
        [1]
    );
    assert_eq!(
        files_scanned(
            &lake,
            "SELECT sum(value) FROM metrics WHERE machine = 'lkp-csl-2sp3'"
        ),
        [1]
    );
    // Through the views the filter still reaches the scan of every table they read.
    assert_eq!(
        files_scanned(
            &lake,
            "SELECT count(*) FROM comparisons WHERE testcase = 'vm-scalability'"
        ),
        [1]
    );
    assert_eq!(
        files_scanned(
            &lake,
            &format!("SELECT count(*) FROM headlines WHERE {SEED_002}")
        ),
        [1, 1]
    );
}

/// delta-rs answers these from the Delta log (only partition columns are read), and DataFusion
/// 55 dropped the limit above that scan: 5, 5 and 560 rows came back (`query/src/limit.rs`).
#[test]
fn limit_is_kept_above_a_metadata_only_scan() {
    let lake = seed_lake("sql-limit");
    for sql in [
        "SELECT testcase FROM reports LIMIT 3",
        "SELECT testcase, machine FROM reports LIMIT 3",
        "SELECT machine FROM metrics LIMIT 3",
        "SELECT testcase FROM reports LIMIT 3 OFFSET 1",
        "SELECT DISTINCT testcase FROM reports LIMIT 3",
    ] {
        assert_eq!(sql_json(&lake, sql).len(), 3, "{sql}");
    }
    // The seed lake has 5 report tests; an offset past 2 leaves fewer than the limit.
    assert_eq!(
        sql_json(&lake, "SELECT testcase FROM reports LIMIT 3 OFFSET 3").len(),
        2
    );
    assert_eq!(
        sql_json(&lake, "SELECT machine FROM metrics LIMIT 0").len(),
        0
    );
}

/// The newest commit file of `table`'s log.
fn newest_log_entry(lake: &std::path::Path, table: &str) -> std::path::PathBuf {
    crate::common::log_entries(lake, table)
        .pop()
        .unwrap_or_else(|| panic!("no log entry in {table}"))
}

/// The one data file of a `metrics` partition of the seed lake.
fn partition_file(lake: &std::path::Path, testcase: &str, machine: &str) -> std::path::PathBuf {
    let dir = lake
        .join("metrics")
        .join(format!("testcase={testcase}"))
        .join(format!("machine={machine}"));
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

fn sql(lake: &std::path::Path, statement: &str) -> std::process::Output {
    lkplake(&["sql", "--lake", &lake.to_string_lossy(), statement], None)
}

#[test]
fn a_lake_in_a_format_this_binary_does_not_know_is_refused_by_readers_and_writers() {
    let lake = seed_lake("sql-newer-format");
    set_lake_format(&lake, "metrics", "4");
    let expected = format!(
        "the lake at {} is in format \"4\" (table metrics, lkplake.format), and this lkplake reads formats 1 to 3",
        lake.display()
    );
    let lake_arg = lake.to_string_lossy().into_owned();
    for args in [
        vec!["sql", "--lake", &lake_arg, "SELECT 1"],
        vec!["compact", "--lake", &lake_arg],
    ] {
        let out = lkplake(&args, None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // 4: the lake's status (docs/CLI.md, "Exit statuses").
        assert_eq!(out.status.code(), Some(4), "{args:?}: {stderr}");
        assert!(stderr.contains(&expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_damaged_log_entry_is_named_and_the_other_tables_still_answer() {
    let lake = seed_lake("sql-damaged-log");
    let entry = newest_log_entry(&lake, "metrics");
    // A commit cut short, as a full disk or a crash of a writer without atomic renames leaves it.
    let text = std::fs::read(&entry).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&entry, &text[..text.len() / 2]).unwrap_or_else(|e| panic!("{e}"));

    let out = sql(&lake, "SELECT count(*) FROM metrics");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 4: the lake's status (docs/CLI.md, "Exit statuses").
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!("its log entry {} is damaged", entry.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("restore that file from a backup"),
        "{stderr}"
    );
    assert!(!stderr.contains("0: "), "no backtrace: {stderr}");
    // A view over it fails the same way; the table beside it is served.
    let out = sql(&lake, "SELECT count(*) FROM comparisons");
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is damaged"));
    assert_eq!(
        sql_json(&lake, "SELECT count(*) AS n FROM reports"),
        vec![json!({"n": 5})],
        "the five seeds"
    );
}

#[test]
fn a_missing_or_truncated_data_file_is_named_and_the_other_partitions_still_answer() {
    let lake = seed_lake("sql-missing-file");
    let missing = partition_file(&lake, "aim9", "lkp-ivb-2ep1");
    std::fs::remove_file(&missing).unwrap_or_else(|e| panic!("{e}"));
    let out = sql(&lake, "SELECT sum(value) FROM metrics");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!("{} not found", missing.display())),
        "{stderr}"
    );
    // Seed 002's partition is not that file: its numbers are served as the report prints them.
    let rows = sql_json(
        &lake,
        &format!(
            "SELECT base_value, head_value FROM comparisons WHERE {SEED_002} AND metric = 'vm-scalability.throughput'"
        ),
    );
    assert_eq!(
        rows,
        vec![json!({"base_value": 2.352e8, "head_value": 3.164e8})]
    );

    // Cut to its first 100 bytes, Parquet's footer is gone.
    let cut = partition_file(&lake, "vm-scalability", "lkp-csl-2sp3");
    let bytes = std::fs::read(&cut).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&cut, &bytes[..100]).unwrap_or_else(|e| panic!("{e}"));
    let out = sql(
        &lake,
        &format!("SELECT base_value FROM comparisons WHERE {SEED_002}"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let cut_name = cut
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(
        stderr.contains(&cut_name),
        "the cut file is named: {stderr}"
    );
}
