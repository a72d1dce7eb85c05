//! `lkplake upgrade`: rewrites a format-1 or format-2 lake's `metrics` to format 3 in one Delta
//! commit.
//!
//! Each partition's rows are first made format 2's. Format-1 rows are paired back into table
//! rows with SQL: a base with the head of its report test and metric, every other column a row
//! of its own. When a report's tests of one testcase, machine and params list a metric more
//! than once, the n-th base goes with the n-th head of the same headline flag (the flag is the
//! one value a paired row keeps for both sides that can differ between those tests);
//! `comparisons` groups those rows, so the pairing changes no view's rows. Format 2's rows are
//! then numbered by report test as compaction numbers them ([`crate::report_rows`]). The new
//! files are written first; then one commit replaces the schema, records `lkplake.format = 3`,
//! removes every old file and adds the new ones. It is allowed no retry: it lands only on the
//! version it read, so a transformer or compaction that committed meanwhile makes it fail whole
//! instead of losing rows, and the files it wrote are deleted. Until that commit the lake is as
//! it was, so an interrupted upgrade is run again from the start (a crash leaves its files
//! unreferenced: no reader sees them, and `compact`'s vacuum, which removes only files a commit
//! removed, leaves them too); after it, the lake is format 3 and a second run has nothing to do.

use crate::format::{FORMAT_KEY, Format};
use crate::writer::{
    Partition, Table, files_per_partition, in_partition, metrics_sorted_writer_properties,
};
use crate::{Lake, LakeError, report_rows};
use deltalake::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int8Array, Int64Array};
use deltalake::arrow::datatypes::{DataType, Float64Type};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
use deltalake::datafusion::prelude::SessionContext;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::{Action, MetadataExt as _, StructType};
use deltalake::logstore::object_store::ObjectStoreExt as _;
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter as _, RecordBatchWriter};
use deltalake::{DeltaTable, DeltaTableError};
use lkplake_schemas::decimal::Decimal;
use lkplake_schemas::tables::{FORMAT_3_OBSERVATIONS, METRICS_TABLE, PARTITION_COLUMNS};
use std::sync::Arc;

/// What an upgrade did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpgradeSummary {
    /// The format the lake was in.
    pub from: Format,
    /// `metrics` partitions rewritten.
    pub partitions: u64,
    /// Metric rows (format 1's rows) rewritten.
    pub rows_read: u64,
    /// Format-2 rows written.
    pub rows_written: u64,
}

/// One partition's format-1 rows (`v1`, filtered to the partition) as format-2 rows, in
/// `OBSERVATIONS`' columns (numbering them sorts them: [`report_rows::reference`]).
const PAIR_ROWS: &str = "
WITH m AS (
    SELECT *,
        row_number() OVER (
            PARTITION BY report_key, time, params, metric, is_headline, role
            ORDER BY value, commit, stddev_pct, change
        ) AS nth,
        count(*) FILTER (WHERE role = 'base')
            OVER (PARTITION BY report_key, time, params, metric) AS bases,
        max(CASE WHEN role = 'base' THEN commit END)
            OVER (PARTITION BY report_key, time, params, metric) AS group_base_commit
    FROM v1
),
b AS (SELECT * FROM m WHERE role = 'base'),
o AS (SELECT * FROM m WHERE role <> 'base')
SELECT
    coalesce(b.time, o.time) AS time,
    CAST(coalesce(b.testcase, o.testcase) AS VARCHAR) AS testcase,
    CAST(coalesce(b.machine, o.machine) AS VARCHAR) AS machine,
    coalesce(b.params, o.params) AS params,
    coalesce(b.metric, o.metric) AS metric,
    coalesce(b.program, o.program) AS program,
    coalesce(b.report_key, o.report_key) AS report_key,
    coalesce(b.commit, o.group_base_commit, '') AS base_commit,
    o.commit AS commit,
    o.role AS role,
    lkplake_mantissa(b.value) AS base_mantissa,
    lkplake_scale(b.value) AS base_scale,
    lkplake_float(b.value) AS base_float,
    b.stddev_pct AS base_stddev_pct,
    b.change AS base_change,
    lkplake_mantissa(o.value) AS head_mantissa,
    lkplake_scale(o.value) AS head_scale,
    lkplake_float(o.value) AS head_float,
    o.stddev_pct AS head_stddev_pct,
    o.change AS change,
    coalesce(b.change_unit, o.change_unit) AS change_unit,
    coalesce(b.direction, o.direction) AS direction,
    coalesce(b.is_headline, o.is_headline) AS is_headline,
    coalesce(b.bases, o.bases) > 1 AS grouped
FROM b
FULL JOIN o
    ON o.role = 'head'
    AND b.report_key = o.report_key
    AND (b.time IS NOT DISTINCT FROM o.time)
    AND b.params = o.params
    AND b.metric = o.metric
    AND b.is_headline = o.is_headline
    AND b.nth = o.nth
";

/// The part of a value format 2 stores: its decimal's mantissa, its scale, or the float itself
/// when it has no short decimal.
#[derive(Debug, Clone, Copy)]
enum Part {
    Mantissa,
    Scale,
    Float,
}

fn part_udf(name: &'static str, part: Part) -> deltalake::datafusion::logical_expr::ScalarUDF {
    let returns = match part {
        Part::Mantissa => DataType::Int64,
        Part::Scale => DataType::Int8,
        Part::Float => DataType::Float64,
    };
    create_udf(
        name,
        vec![DataType::Float64],
        returns,
        Volatility::Immutable,
        Arc::new(move |args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let values = arrays
                .first()
                .ok_or_else(|| DataFusionError::Internal(format!("{name} takes a value")))?
                .as_primitive::<Float64Type>();
            let decimal = |i: usize| values.is_valid(i).then(|| Decimal::of(values.value(i)));
            let rows = 0..values.len();
            let out: ArrayRef = match part {
                Part::Mantissa => Arc::new(
                    rows.map(|i| decimal(i).flatten().map(|d| d.mantissa))
                        .collect::<Int64Array>(),
                ),
                Part::Scale => Arc::new(
                    rows.map(|i| decimal(i).flatten().map(|d| d.scale))
                        .collect::<Int8Array>(),
                ),
                Part::Float => Arc::new(
                    rows.map(|i| match decimal(i) {
                        Some(None) => Some(values.value(i)),
                        _ => None,
                    })
                    .collect::<Float64Array>(),
                ),
            };
            Ok(ColumnarValue::Array(out))
        }),
    )
}

/// A session that pairs format-1 rows: the value-splitting functions registered.
fn pairing_session() -> SessionContext {
    let ctx = SessionContext::new();
    for (name, part) in [
        ("lkplake_mantissa", Part::Mantissa),
        ("lkplake_scale", Part::Scale),
        ("lkplake_float", Part::Float),
    ] {
        ctx.register_udf(part_udf(name, part));
    }
    ctx
}

/// One partition of `metrics` (format 1, served by `provider`) as format-2 batches, paired
/// in `ctx` ([`pairing_session`]).
async fn pair_partition(
    ctx: &SessionContext,
    provider: &Arc<dyn TableProvider>,
    partition: &Partition,
) -> Result<Vec<RecordBatch>, LakeError> {
    let query = LakeError::query(METRICS_TABLE);
    let rows = ctx
        .read_table(Arc::clone(provider))
        .and_then(|t| t.filter(in_partition(partition)))
        .map_err(query)?;
    // Registered again for each partition: `v1` is the one being paired.
    ctx.deregister_table("v1").map_err(query)?;
    ctx.register_table("v1", rows.into_view()).map_err(query)?;
    ctx.sql(PAIR_ROWS)
        .await
        .map_err(query)?
        .collect()
        .await
        .map_err(query)
}

/// How many metric rows (format 1's) a batch of format-2 rows holds: a base where there is a
/// base value, the other side where there is a role.
fn metric_rows(batch: &RecordBatch) -> u64 {
    let valid = |name: &str| -> Vec<bool> {
        batch.column_by_name(name).map_or_else(
            || vec![false; batch.num_rows()],
            |c| (0..c.len()).map(|i| c.is_valid(i)).collect(),
        )
    };
    let (mantissa, float, role) = (valid("base_mantissa"), valid("base_float"), valid("role"));
    (0..batch.num_rows())
        .map(|i| u64::from(mantissa[i] || float[i]) + u64::from(role[i]))
        .sum()
}

/// Deletes the files an upgrade wrote and did not commit: no version references them.
async fn delete_written(table: &DeltaTable, paths: &[String]) {
    let store = table.log_store().object_store(None);
    for path in paths {
        let deleted = match deltalake::Path::from_url_path(path) {
            Ok(location) => store.delete(&location).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = deleted {
            tracing::warn!(path, "an uncommitted file of the upgrade is left: {e}");
        }
    }
}

impl Lake {
    /// Rewrites the lake to [`Format::LATEST`] (see the module's doc); a lake already there is
    /// left as it is.
    pub async fn upgrade(&mut self) -> Result<UpgradeSummary, LakeError> {
        let mut summary = UpgradeSummary {
            from: self.format(),
            ..UpgradeSummary::default()
        };
        if self.format() == Format::LATEST {
            return Ok(summary);
        }
        let holders = crate::lease::holders(self.url(), chrono::Utc::now()).await?;
        if !holders.is_empty() {
            let holders: Vec<String> = holders
                .iter()
                .map(|h| format!("{} ({}, renewed {})", h.who, h.path, h.renewed.to_rfc3339()))
                .collect();
            return Err(LakeError::Held {
                lake: self.url().to_string(),
                holders: holders.join("; "),
            });
        }
        let delta = LakeError::delta(METRICS_TABLE);
        let table = self.table(Table::Metrics).clone();
        let snapshot = table.snapshot().map_err(delta)?;
        let mut writer = RecordBatchWriter::try_new(
            table.table_url().as_str(),
            FORMAT_3_OBSERVATIONS.clone(),
            Some(PARTITION_COLUMNS.iter().map(|c| (*c).to_owned()).collect()),
            None,
        )
        .map_err(delta)?
        .with_writer_properties(metrics_sorted_writer_properties(Format::LATEST));
        let mut adds = Vec::new();
        // One provider of the version read (delta-rs replays the log to build one), one session.
        let query = LakeError::query(METRICS_TABLE);
        let provider = table.table_provider().await.map_err(query)?;
        let ctx = pairing_session();
        for partition in files_per_partition(&table, METRICS_TABLE)?.keys() {
            // Format 2's rows of the partition, then numbered as format 3's.
            let side_by_side = match summary.from {
                Format::One => pair_partition(&ctx, &provider, partition).await?,
                _ => ctx
                    .read_table(Arc::clone(&provider))
                    .and_then(|rows| rows.filter(in_partition(partition)))
                    .map_err(query)?
                    .collect()
                    .await
                    .map_err(query)?,
            };
            summary.rows_read += side_by_side.iter().map(metric_rows).sum::<u64>();
            let side_by_side = ctx.read_batches(side_by_side).map_err(query)?;
            for batch in report_rows::reference(&ctx, side_by_side)
                .await
                .map_err(query)?
            {
                summary.rows_written += batch.num_rows() as u64;
                writer.write(batch).await.map_err(delta)?;
            }
            // One partition's files at a time: memory stays one partition deep.
            adds.extend(writer.flush().await.map_err(delta)?);
            summary.partitions += 1;
        }
        let mut actions: Vec<Action> = Vec::with_capacity(adds.len() + 1);
        let schema: StructType = FORMAT_3_OBSERVATIONS
            .as_ref()
            .try_into_kernel()
            .map_err(|e| delta(DeltaTableError::from(e)))?;
        let metadata = snapshot
            .metadata()
            .clone()
            .with_schema(&schema)
            .and_then(|m| m.add_config_key(FORMAT_KEY.to_owned(), Format::LATEST.to_string()))
            .map_err(|e| delta(e.into()))?;
        actions.push(metadata.into());
        for file in snapshot.log_data().into_iter() {
            actions.push(Action::Remove(file.remove_action(true)));
        }
        let written: Vec<String> = adds.iter().map(|a| a.path.clone()).collect();
        actions.extend(adds.into_iter().map(Action::Add));
        lkplake_faults::point(lkplake_faults::UPGRADE_BEFORE_COMMIT);
        let operation = DeltaOperation::Write {
            mode: SaveMode::Overwrite,
            partition_by: Some(PARTITION_COLUMNS.iter().map(|c| (*c).to_owned()).collect()),
            predicate: None,
        };
        let committed = CommitBuilder::default()
            .with_actions(actions)
            // On the version read or not at all: a commit since means rows this did not pair.
            .with_max_retries(0)
            .build(Some(snapshot), table.log_store(), operation)
            .await;
        if let Err(e) = committed {
            delete_written(&table, &written).await;
            return Err(LakeError::UpgradeNotCommitted {
                lake: self.url().to_string(),
                reason: crate::damage::without_backtrace(&e.to_string()),
            });
        }
        let mut upgraded = table;
        upgraded.update_state().await.map_err(delta)?;
        self.set_metrics(upgraded, Format::LATEST);
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Observation, observations};
    use crate::{Batches, LakeUrl};

    /// Format-1 rows of one report's partition: (metric, role, commit, value, headline).
    fn rows(rows: &[(&'static str, &'static str, &'static str, f64, bool)]) -> Batches {
        let rows: Vec<Observation> = rows
            .iter()
            .map(|&(metric, role, commit, value, is_headline)| Observation {
                metric,
                time: 1_700_000_000_000_000,
                role,
                commit,
                value,
                is_headline,
            })
            .collect();
        observations("will-it-scale", "lkp-icl-2sp2", &rows)
    }

    #[tokio::test]
    async fn a_base_is_paired_with_a_head_of_its_own_headline_flag() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mut lake = Lake::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
        // Two tests of one report with the same testcase, machine and params list metric m:
        // the first, whose headline m is, over commits a and b (1 to 2), the other over a and
        // c (3 to 0.5). By value alone, 1 would meet 0.5.
        let batches = rows(&[
            ("m", "base", "a", 1.0, true),
            ("m", "head", "b", 2.0, true),
            ("m", "base", "a", 3.0, false),
            ("m", "head", "c", 0.5, false),
            ("n", "base", "a", 7.0, false),
            ("n", "head", "b", 8.0, false),
        ]);
        lake.commit(batches, &[])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let summary = lake.upgrade().await.unwrap_or_else(|e| panic!("{e}"));
        // Three table rows and two report tests: (a, b) and (a, c).
        assert_eq!((summary.rows_read, summary.rows_written), (6, 5));
        assert_eq!(lake.format(), Format::Three);

        let ctx = SessionContext::new();
        let provider = lake
            .table(Table::Metrics)
            .table_provider()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        ctx.register_table("stored", provider)
            .unwrap_or_else(|e| panic!("{e}"));
        let batches = ctx
            .sql(&report_rows::observations_sql("stored", None, true, false))
            .await
            .and_then(|t| {
                t.select_columns(&[
                    "metric",
                    "base_mantissa",
                    "head_mantissa",
                    "head_scale",
                    "commit",
                    "is_headline",
                    "grouped",
                ])
            })
            .unwrap_or_else(|e| panic!("{e}"))
            .sort_by(vec![
                deltalake::datafusion::prelude::col("metric"),
                deltalake::datafusion::prelude::col("base_mantissa"),
            ])
            .unwrap_or_else(|e| panic!("{e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            crate::testing::lines(&batches, " "),
            [
                "m 1 2 0 b true true",
                "m 3 5 1 c false true",
                "n 7 8 0 b false false",
            ]
        );
    }
}
