//! Lake formats 2 and 3 against format 1: the same reports, written by `lkplake run` into a lake
//! of each format or upgraded, give the same rows in `metrics` and in every view, before and
//! after compaction.

use crate::common::{Pipeline, block_on, command, generate, lkplake, run_into, sigterm, temp_dir};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use lkplake_lake::LakeUrl;
use lkplake_query::{Engine, EngineConfig};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Every view a lake with reports, failures and mentions serves, and the tables behind them;
/// the first four are the ones that read `metrics`.
const VIEWS: [&str; 9] = [
    "metrics",
    "comparisons",
    "series",
    "headlines",
    "failure_comparisons",
    "mentions",
    "discussion",
    "regressions",
    "reports",
];

/// The report of `tests/fixtures/formats/duplicate-row.txt`, which lists `vmstat.system.cs` twice.
const DUPLICATE_ROW_REPORT: &str = "841447866787b45fca1d91c9e6181be3";

/// A report of `tests/fixtures/cgroups-report-mails.mbox.gz` (message
/// `<Zp8mqTnJN7VJZ/C/@xsang-OptiPlex-9020>`) comparing four commits.
const FOUR_COLUMN_REPORT: &str = "ef16231c677e5bd41019d993b11ca4f9";

fn url(lake: &Path) -> LakeUrl {
    LakeUrl::local(lake).unwrap_or_else(|e| panic!("{e}"))
}

/// Each row of `sql`'s answer as one line of text, sorted: floats print in their shortest
/// exact form, so two lines are equal only when every value is.
fn rows(lake: &Path, sql: &str) -> Vec<String> {
    let batches: Vec<RecordBatch> = block_on(async {
        let engine = Engine::open(&url(lake), &EngineConfig::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        engine
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    });
    let options = FormatOptions::default().with_null("NULL");
    let mut lines = Vec::new();
    for batch in &batches {
        let columns: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| {
                ArrayFormatter::try_new(c.as_ref(), &options).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = columns.iter().map(|c| c.value(row).to_string()).collect();
            lines.push(cells.join(" | "));
        }
    }
    lines.sort();
    lines
}

/// `SELECT *` of `view`, with each list sorted: lists aggregated with `DISTINCT` come in the
/// order the rows were read, which compaction changes. `series.value` is a mean, summed in
/// the order partial aggregates meet, which varies from run to run on one lake: it is compared
/// as a 32-bit float (its other columns, the minimum, maximum and count, are exact).
fn select_all(lake: &Path, view: &str) -> String {
    let schema = block_on(async {
        let engine = Engine::open(&url(lake), &EngineConfig::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        engine
            .sql(&format!("SELECT * FROM {view} LIMIT 0"))
            .await
            .unwrap_or_else(|e| panic!("{view}: {e}"))
            .schema()
            .clone()
    });
    let columns: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::List(_) => format!("array_sort(\"{0}\") AS \"{0}\"", f.name()),
            _ if view == "series" && f.name() == "value" => {
                "arrow_cast(value, 'Float32') AS value".to_owned()
            }
            _ => format!("\"{}\"", f.name()),
        })
        .collect();
    format!("SELECT {} FROM {view}", columns.join(", "))
}

fn assert_same_views(one: &Path, two: &Path, when: &str) {
    for view in VIEWS {
        let sql = select_all(one, view);
        let (expected, found) = (rows(one, &sql), rows(two, &sql));
        assert!(
            !expected.is_empty() || !VIEWS[..4].contains(&view),
            "{view} is empty {when}"
        );
        assert_eq!(expected.len(), found.len(), "{view}: rows {when}");
        for (e, f) in expected.iter().zip(&found) {
            assert_eq!(e, f, "{view}: the first differing row {when}");
        }
    }
}

/// What Python deltalake, polars and DuckDB read of a format-2 or format-3 lake with the recipes of
/// docs/QUERY.md (`tests/clients/other_engines.py`) against what lkplake serves: metric rows,
/// report keys, and the values (how many distinct, the least and the greatest: a value rebuilt
/// wrong shows in one of them).
fn assert_other_engines_read(lake: &Path) {
    let out = std::process::Command::new("python3")
        .arg(crate::common::root().join("tests/clients/other_engines.py"))
        .arg(lake)
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    assert!(out.status.success(), "{}", stderr(&out));
    let got: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let served = |sql: &str| -> Vec<f64> {
        rows(lake, sql)
            .concat()
            .split(" | ")
            .map(|n| n.parse().unwrap_or_else(|e| panic!("{n}: {e}")))
            .collect()
    };
    let metrics = served(
        "SELECT count(*), count(DISTINCT report_key), count(DISTINCT value), min(value), \
         max(value) FROM metrics",
    );
    let reports = served("SELECT count(*), count(DISTINCT report_key) FROM reports");
    for engine in ["deltalake", "polars", "duckdb"] {
        let read = |table: &str, keys: &[&str]| -> Vec<f64> {
            keys.iter()
                .map(|k| got[engine][table][k].as_f64().unwrap_or(f64::NAN))
                .collect()
        };
        assert_eq!(
            read("metrics", &["rows", "reports", "values", "min", "max"]),
            metrics,
            "{engine}"
        );
        assert_eq!(read("reports", &["rows", "reports"]), reports, "{engine}");
    }
}

fn compact(lake: &Path) {
    let out = lkplake(&["compact", "--lake", &lake.to_string_lossy()], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn lakes_in_formats_2_and_3_serve_metrics_and_every_view_exactly_as_format_1_does() {
    let generated = temp_dir("formats-reports");
    generate(
        &generated,
        &["--reports", "120", "--seed", "5", "--years", "2"],
    );
    let inputs: Vec<PathBuf> = vec![
        generated,
        PathBuf::from("tests/fixtures/cgroups-report-mails.mbox.gz"),
        PathBuf::from("tests/fixtures/formats"),
    ];
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let one = temp_dir("formats-1");
    run_into(&one, &inputs);
    let written = |name: &str, format: &str| {
        let lake = temp_dir(name);
        let lake_arg = lake.to_string_lossy().into_owned();
        let mut run = vec!["run", "--lake", &lake_arg, "--lake-format", format];
        let paths: Vec<String> = inputs
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        run.extend(paths.iter().map(String::as_str));
        let out = lkplake(&run, None);
        assert!(out.status.success(), "{}", stderr(&out));
        lake
    };
    let two = written("formats-2", "2");
    let three = written("formats-3", "3");
    // The same format-1 lake, upgraded after a first attempt crashed before its commit.
    let upgraded = temp_dir("formats-upgraded");
    run_into(&upgraded, &inputs);
    let crashed = command(&["upgrade", "--lake", &upgraded.to_string_lossy()])
        .env("LKPLAKE_CRASH_AT", "lake.upgrade-before-commit")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!crashed.status.success(), "the upgrade was to crash");
    assert_eq!(
        recorded_format(&upgraded).as_deref(),
        Some("1"),
        "a crashed upgrade changed the lake"
    );
    let out = upgrade(&upgraded);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is in format 3 now (was 1)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(recorded_format(&upgraded).as_deref(), Some("3"));
    let again = upgrade(&upgraded);
    assert!(
        again.status.success() && stderr(&again).contains("is in format 3 already: nothing to do"),
        "{}",
        stderr(&again)
    );
    // A format-2 lake, upgraded.
    let upgraded_2 = written("formats-upgraded-2", "2");
    let out = upgrade(&upgraded_2);
    assert!(
        out.status.success() && stderr(&out).contains("is in format 3 now (was 2)"),
        "{}",
        stderr(&out)
    );
    let lakes = [&two, &three, &upgraded, &upgraded_2];

    // A follow-up's four columns, as the mail prints them: 76.42, +15.1% 87.99 ± 3%,
    // +3.1% 78.77, +1.2% 77.31 ± 3%, under commits 94b7e5bf09, 98c9daf5ae, 6df13230b6, 981204d280.
    let columns = format!(
        "SELECT role, commit, value, stddev_pct, change FROM metrics \
         WHERE report_key = '{FOUR_COLUMN_REPORT}' AND metric = 'uptime.boot' ORDER BY role"
    );
    let printed = [
        "base | 94b7e5bf09 | 76.42 | NULL | NULL",
        "c1 | 98c9daf5ae | 87.99 | 3.0 | 15.1",
        "c2 | 6df13230b6 | 78.77 | NULL | 3.1",
        "head | 981204d280 | 77.31 | 3.0 | 1.2",
    ];
    // A metric listed twice in one table (14072 +4.1% 14642, then 14100 +3.9% 14650): two rows
    // each in `metrics`, one row in `comparisons`, grouped as format 1 groups it.
    let twice = format!(
        "SELECT value FROM metrics WHERE report_key = '{DUPLICATE_ROW_REPORT}' \
         AND metric = 'vmstat.system.cs'"
    );
    let grouped = format!(
        "SELECT base_value, head_value, change FROM comparisons \
         WHERE report_key = '{DUPLICATE_ROW_REPORT}' AND metric = 'vmstat.system.cs'"
    );
    for lake in [&one].into_iter().chain(lakes) {
        assert_eq!(rows(lake, &columns), printed, "{}", lake.display());
        assert_eq!(
            rows(lake, &twice),
            ["14072.0", "14100.0", "14642.0", "14650.0"]
        );
        assert_eq!(rows(lake, &grouped), ["14100.0 | 14650.0 | 4.1"]);
    }
    // Format 2 stores one row per table row: the base sits beside the head.
    let stored = |lake: &Path| {
        rows(lake, "SELECT count(*) FROM observations")
            .concat()
            .parse::<u64>()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let observations = rows(&one, "SELECT count(*) FROM metrics")
        .concat()
        .parse::<u64>()
        .unwrap_or_else(|e| panic!("{e}"));
    let table_rows = rows(&one, "SELECT count(*) FROM comparisons")
        .concat()
        .parse::<u64>()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stored(&two), observations - table_rows - 1);
    for lake in lakes {
        assert_eq!(stored(lake), stored(&two), "{}", lake.display());
        assert_same_views(&one, lake, &format!("in {}", lake.display()));
    }
    compact(&one);
    for lake in lakes {
        compact(lake);
        assert_same_views(&one, lake, &format!("after compacting {}", lake.display()));
    }
    // Format 3, compacted: each report test's key is in its report row alone.
    let keyless = rows(
        &three,
        "SELECT count(*) FROM stored_observations WHERE metric IS NOT NULL AND report_key IS NULL",
    );
    assert_eq!(keyless, [stored(&two).to_string()]);
    assert_other_engines_read(&two);
    assert_other_engines_read(&three);
}

fn upgrade(lake: &Path) -> Output {
    lkplake(&["upgrade", "--lake", &lake.to_string_lossy()], None)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The format `metrics` records in its Delta log (`lkplake.format`), if any.
fn recorded_format(lake: &Path) -> Option<String> {
    block_on(async {
        let table = deltalake::open_table(
            deltalake::ensure_table_uri(lake.join("metrics").to_string_lossy())
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let snapshot = table.snapshot().unwrap_or_else(|e| panic!("{e}"));
        snapshot
            .table_config()
            .unknown_properties
            .get("lkplake.format")
            .cloned()
    })
}

#[test]
fn upgrade_refuses_a_lake_a_running_transformer_holds_and_goes_ahead_once_it_stopped() {
    let pipeline = Pipeline::new("upgrade-held");
    assert!(pipeline.ingest(&["examples/reports"]).status.success());
    let mut transformer = pipeline
        .cmd(&["transform", "--flush-ms", "200"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let lake = Path::new(&pipeline.lake_url).to_path_buf();
    let count = "SELECT count(*) FROM metrics";
    let deadline = Instant::now() + Duration::from_secs(60);
    // The lease is taken once the lake's tables exist.
    let leases = lake.join("_lkplake/writers");
    while std::fs::read_dir(&leases).map_or(true, |mut d| d.next().is_none())
        || rows(&lake, count) == ["0"]
    {
        assert!(Instant::now() < deadline, "the transformer wrote nothing");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The seeds arrived together: one flush took them all.
    let written = rows(&lake, count);
    let held = upgrade(&lake);
    assert_eq!(held.status.code(), Some(4), "{}", stderr(&held));
    let pid = format!("\"pid\":{}", transformer.id());
    for part in [
        "is held by",
        "_lkplake/writers/",
        "\"role\":\"transformer\"",
        &pid,
    ] {
        assert!(stderr(&held).contains(part), "{part}: {}", stderr(&held));
    }
    assert_eq!(recorded_format(&lake).as_deref(), Some("1"));

    sigterm(transformer.id());
    let stopped = transformer.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(stopped.success(), "{stopped}");
    let out = upgrade(&lake);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(recorded_format(&lake).as_deref(), Some("3"));
    assert_eq!(rows(&lake, count), written);
}
