//! Lake format 3: each report test's time, key and commits stored once per partition, in a
//! report row that the partition's observation rows name by a small number, `report_ref`
//! (`lkplake_schemas::tables::FORMAT_3_OBSERVATIONS`).
//!
//! In format 2 every row repeated them: four columns that each said again which report the row
//! belongs to, 2.80 of the 5.80 bytes a metric row took on the 10.6M-row lake (BENCHMARKS.md).
//! A number that rises by one along a series costs a few bits a row once its rows are sorted by it.
//!
//! The numbers are given by `lkplake compact`, which rewrites a partition whole in one commit
//! that conflicts with any other change to the partition: they are unique in the partition
//! without any coordination between transformers, which append format 2's rows as they are
//! (`report_ref` null) until then. [`observations_sql`] gives back format 2's rows from both
//! kinds; [`reference`] turns format 2's rows of a partition into format 3's.

use deltalake::arrow::compute::cast;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::datafusion::dataframe::DataFrame;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::prelude::SessionContext;
use lkplake_schemas::tables::{FORMAT_3_OBSERVATIONS, OBSERVATIONS};

/// The columns of format 2's rows that a report row holds once for its report test.
const PER_REPORT: [&str; 3] = ["time", "report_key", "base_commit"];

/// The SQL name of format 2's rows of one partition that [`reference`] numbers.
const ROWS: &str = "lkplake_format_2_rows";

/// Format 2's columns, in order, each as `select` writes it.
fn select(select: impl Fn(&str) -> String) -> String {
    OBSERVATIONS
        .fields()
        .iter()
        .map(|f| select(f.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A SELECT of the report rows in `stored`: each compacted report test's partition, number,
/// params and the columns it holds for the test's observation rows (the head commit as
/// `commit`).
pub fn report_rows_sql(stored: &str) -> String {
    let columns = PER_REPORT.join(", ");
    format!(
        "SELECT testcase, machine, params, report_ref, {columns}, commit FROM {stored} \
         WHERE metric IS NULL AND report_ref IS NOT NULL"
    )
}

/// A SELECT over format-3 rows in `stored` that answers format 2's rows (`OBSERVATIONS`'
/// columns): the rows a transformer appended since the last compaction as they are (unless
/// `appended` says there are none: a scan less to plan), and each compacted observation row
/// with its report row's columns, read from `reports` (a table of [`report_rows_sql`]'s rows)
/// or, without one, from `stored`. A filter on the time, key or base commit reaches the report
/// rows; one on the metric or params, the observation rows' scan; one on `commit`, which
/// comes from either side, is applied after the join. Joined `by_params` too
/// (a report row holds its tests' params), a filter on params reaches both: a query of one
/// series then reads that series' report rows, not its partition's.
pub fn observations_sql(
    stored: &str,
    reports: Option<&str>,
    appended: bool,
    by_params: bool,
) -> String {
    let referenced = select(|c| match c {
        _ if PER_REPORT.contains(&c) => format!("r.{c}"),
        "commit" => "CASE WHEN o.role = 'head' THEN r.commit ELSE o.commit END AS commit".into(),
        _ => format!("o.{c}"),
    });
    let params = if by_params {
        " AND r.params = o.params"
    } else {
        ""
    };
    let reports = reports.map_or_else(|| format!("({})", report_rows_sql(stored)), str::to_owned);
    let numbered = format!(
        "SELECT {referenced} FROM {reports} AS r JOIN {stored} AS o \
         ON r.testcase = o.testcase AND r.machine = o.machine AND r.report_ref = o.report_ref{params} \
         WHERE o.metric IS NOT NULL"
    );
    if !appended {
        return numbered;
    }
    format!(
        "SELECT {plain} FROM {stored} WHERE report_ref IS NULL UNION ALL {numbered}",
        plain = select(str::to_owned),
    )
}

/// Format 2's rows of one partition (in [`ROWS`]) as format 3's, sorted as compaction writes
/// them: by metric, params and `report_ref`, the report rows last.
///
/// Report tests are numbered by params, then time: the report tests of one series hold
/// consecutive numbers in time order, so along a series' rows `report_ref` mostly rises by
/// one. Numbered by time alone, it skipped the other params' tests between two of the series'
/// and took 0.73 bytes a metric row on the 10.6M-row lake (BENCHMARKS.md).
///
/// A report test is told apart by its time, key, base commit and head commit. Format 2's rows
/// name the head commit only in a head row: a base-only row or a follow-up's middle column
/// takes the head commit of the head rows of its time, key, params and base commit (the
/// greatest, if two tests there have different heads: the rows read back the same, since a
/// base-only row has no commit and a middle column keeps its own).
fn reference_sql() -> String {
    let observation = select(|c| match c {
        _ if PER_REPORT.contains(&c) => format!("NULL AS {c}"),
        "commit" => "CASE WHEN x.role = 'head' THEN NULL ELSE x.commit END AS commit".into(),
        _ => format!("x.{c}"),
    });
    let report = select(|c| match c {
        _ if PER_REPORT.contains(&c) => format!("t.{c}"),
        "testcase" | "machine" | "params" => format!("t.{c}"),
        "commit" => "t.head_commit AS commit".into(),
        _ => format!("NULL AS {c}"),
    });
    format!(
        "WITH x AS (
            SELECT *,
                CASE WHEN role = 'head' THEN commit ELSE
                    max(CASE WHEN role = 'head' THEN commit END)
                        OVER (PARTITION BY time, report_key, params, base_commit)
                END AS head_commit
            FROM {ROWS}
        ),
        t AS (
            SELECT *, CAST(row_number() OVER (
                ORDER BY params, time, report_key, base_commit, head_commit) - 1 AS INT)
                AS report_ref
            FROM (SELECT DISTINCT time, testcase, machine, params, report_key, base_commit,
                    head_commit FROM x) AS d
        )
        SELECT {observation}, t.report_ref FROM x JOIN t
            -- Parenthesized: sqlparser reads IS NOT DISTINCT FROM ahead of AND.
            ON (x.time IS NOT DISTINCT FROM t.time) AND x.report_key = t.report_key
            AND x.base_commit = t.base_commit AND x.params = t.params
            AND (x.head_commit IS NOT DISTINCT FROM t.head_commit)
        UNION ALL
        SELECT {report}, t.report_ref FROM t
        ORDER BY metric NULLS LAST, params NULLS LAST, report_ref, role NULLS LAST",
    )
}

/// `rows`, format 2's rows of one partition, as format 3's compacted rows ([`reference_sql`]),
/// in `FORMAT_3_OBSERVATIONS`' exact types.
pub(crate) async fn reference(
    ctx: &SessionContext,
    rows: DataFrame,
) -> Result<Vec<RecordBatch>, DataFusionError> {
    // Registered again for each partition.
    ctx.deregister_table(ROWS)?;
    ctx.register_table(ROWS, rows.into_view())?;
    let batches = ctx.sql(&reference_sql()).await?.collect().await?;
    batches.iter().map(conform).collect()
}

/// `batch` in `FORMAT_3_OBSERVATIONS`' exact types (a query answers string views, and nulls
/// untyped where a branch of a union has no column).
fn conform(batch: &RecordBatch) -> Result<RecordBatch, DataFusionError> {
    let columns = FORMAT_3_OBSERVATIONS
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| cast(column, field.data_type()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(
        FORMAT_3_OBSERVATIONS.clone(),
        columns,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batches, Format, Lake, LakeUrl, Table};
    use lkplake_schemas::tables::{FAILURES, LINKS, MENTIONS, REPORTS};
    use std::sync::Arc;

    /// Format 2's rows of one partition, as a transformer appends them to a format-3 lake:
    /// k3 compares a with a middle column x and head y; k1 a with b, in two metrics.
    const FIRST: &str = r#"
        {"time": "2024-01-01T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "m", "program": "p", "report_key": "k3", "base_commit": "a", "commit": "y",
         "role": "head", "base_mantissa": 7, "base_scale": 0, "head_mantissa": 9,
         "head_scale": 0, "change_unit": "%", "is_headline": true, "grouped": false}
        {"time": "2024-01-01T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "m", "program": "p", "report_key": "k3", "base_commit": "a", "commit": "x",
         "role": "c1", "head_mantissa": 8, "head_scale": 0, "change_unit": "%",
         "is_headline": true, "grouped": false}
        {"time": "2024-02-01T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "m", "program": "p", "report_key": "k1", "base_commit": "a", "commit": "b",
         "role": "head", "base_mantissa": 1, "base_scale": 0, "head_mantissa": 2,
         "head_scale": 0, "change_unit": "%", "is_headline": true, "grouped": false}
        {"time": "2024-02-01T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "n", "program": "p", "report_key": "k1", "base_commit": "a", "commit": "b",
         "role": "head", "base_mantissa": 3, "base_scale": 0, "head_mantissa": 4,
         "head_scale": 0, "change_unit": "%", "is_headline": false, "grouped": false}
    "#;

    /// k2 compares a with c; its metric n has no head value (a base-only row).
    const SECOND: &str = r#"
        {"time": "2024-03-01T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "m", "program": "p", "report_key": "k2", "base_commit": "a", "commit": "c",
         "role": "head", "base_mantissa": 5, "base_scale": 0, "head_mantissa": 6,
         "head_scale": 0, "change_unit": "%", "is_headline": true, "grouped": false}
        {"time": "2024-03-01T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "n", "program": "p", "report_key": "k2", "base_commit": "a",
         "base_mantissa": 10, "base_scale": 0, "change_unit": "%", "is_headline": false,
         "grouped": false}
    "#;

    /// k4, dated between k3 and k1, arriving last.
    const LATE: &str = r#"
        {"time": "2024-01-15T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "m", "program": "p", "report_key": "k4", "base_commit": "a", "commit": "d",
         "role": "head", "base_mantissa": 11, "base_scale": 0, "head_mantissa": 12,
         "head_scale": 0, "change_unit": "%", "is_headline": true, "grouped": false}
    "#;

    /// A format-3 lake in a temporary directory, with `flushes` appended one commit each.
    async fn lake_of(flushes: &[&str]) -> (tempfile::TempDir, Lake) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mut lake = Lake::open_in(&url, Format::Three)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for rows in flushes {
            append(&mut lake, rows).await;
        }
        (dir, lake)
    }

    async fn append(lake: &mut Lake, rows: &str) {
        let metrics = deltalake::arrow::json::ReaderBuilder::new(FORMAT_3_OBSERVATIONS.clone())
            .build(rows.as_bytes())
            .and_then(|mut reader| reader.next().transpose())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no batch"));
        let batches = Batches {
            metrics,
            failures: RecordBatch::new_empty(Arc::clone(&FAILURES)),
            mentions: RecordBatch::new_empty(Arc::clone(&MENTIONS)),
            links: RecordBatch::new_empty(Arc::clone(&LINKS)),
            reports: RecordBatch::new_empty(Arc::clone(&REPORTS)),
        };
        lake.commit(batches, &[])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// `sql`'s rows, `stored` being the lake's `metrics` as stored, one line each, sorted.
    async fn lines(lake: &Lake, sql: &str) -> Vec<String> {
        let ctx = SessionContext::new();
        let provider = lake
            .table(Table::Metrics)
            .table_provider()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        ctx.register_table("stored", provider)
            .unwrap_or_else(|e| panic!("{e}"));
        let batches = ctx
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let mut out = crate::testing::lines(&batches, " | ");
        out.sort();
        out
    }

    async fn observations(lake: &Lake) -> Vec<String> {
        lines(lake, &observations_sql("stored", None, true, false)).await
    }

    async fn compact(lake: &mut Lake) {
        let summary = lake.compact(false).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary.partitions_sorted, 1);
    }

    #[tokio::test]
    async fn compaction_stores_each_report_test_once_and_the_rows_read_back_as_appended() {
        let (_dir, mut lake) = lake_of(&[FIRST, SECOND]).await;
        let appended = observations(&lake).await;
        assert_eq!(appended.len(), 6);
        compact(&mut lake).await;

        let stored = "SELECT report_ref, metric, time, report_key, base_commit, commit, role, \
                      base_mantissa, head_mantissa FROM stored";
        assert_eq!(
            lines(&lake, stored).await,
            [
                // Report rows: numbered by params and time, with the head column's commit.
                "0 | NULL | 2024-01-01T00:00:00Z | k3 | a | y | NULL | NULL | NULL",
                "0 | m | NULL | NULL | NULL | NULL | head | 7 | 9",
                // A middle column keeps its own commit.
                "0 | m | NULL | NULL | NULL | x | c1 | NULL | 8",
                "1 | NULL | 2024-02-01T00:00:00Z | k1 | a | b | NULL | NULL | NULL",
                "1 | m | NULL | NULL | NULL | NULL | head | 1 | 2",
                "1 | n | NULL | NULL | NULL | NULL | head | 3 | 4",
                "2 | NULL | 2024-03-01T00:00:00Z | k2 | a | c | NULL | NULL | NULL",
                "2 | m | NULL | NULL | NULL | NULL | head | 5 | 6",
                // A base-only row goes with the head rows of its report test.
                "2 | n | NULL | NULL | NULL | NULL | NULL | 10 | NULL",
            ]
        );
        assert_eq!(observations(&lake).await, appended);

        // A report dated before others, appended later: numbered afresh, in time order.
        append(&mut lake, LATE).await;
        let appended = observations(&lake).await;
        assert_eq!(appended.len(), 7);
        compact(&mut lake).await;
        assert_eq!(observations(&lake).await, appended);
        assert_eq!(
            lines(
                &lake,
                "SELECT report_ref, report_key FROM stored WHERE metric IS NULL"
            )
            .await,
            ["0 | k3", "1 | k4", "2 | k1", "3 | k2"]
        );
    }

    #[tokio::test]
    async fn deleting_a_report_deletes_its_compacted_rows_and_its_appended_ones() {
        let (_dir, mut lake) = lake_of(&[FIRST, SECOND]).await;
        compact(&mut lake).await;
        append(&mut lake, LATE).await;
        lake.delete_reports(&["k1".to_owned(), "k4".to_owned()])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let keys = lines(
            &lake,
            &format!(
                "SELECT report_key, metric, role FROM ({}) AS o",
                observations_sql("stored", None, true, false)
            ),
        )
        .await;
        assert_eq!(
            keys,
            [
                "k2 | m | head",
                "k2 | n | NULL",
                "k3 | m | c1",
                "k3 | m | head"
            ]
        );
        // Nothing of theirs is left, not even a report row.
        assert_eq!(
            lines(
                &lake,
                "SELECT count(*) FROM stored WHERE report_ref IN (1) OR report_key IN ('k1', 'k4')"
            )
            .await,
            ["0"]
        );
    }
}
