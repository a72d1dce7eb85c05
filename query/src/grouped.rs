//! `lkplake_version_has_grouped_rows()`: whether the installed version of a format-2 lake holds
//! a row of a report test that lists its metric more than once (`grouped`).
//!
//! Format 2's `comparisons` (observations.sql) is a UNION ALL of the rows that are one of
//! format 1's groups already and a GROUP BY over the grouped rows. The generated and most real
//! versions have no grouped row, yet every query of the view planned both branches, and planning
//! was most of a one-series panel's time (BENCHMARKS.md). The GROUP BY's filter calls this
//! function, a constant of the version the view was planned for: DataFusion's simplifier folds
//! it, and a `false` empties the branch before the rest of the optimizer and the physical
//! planner see it. A version with grouped rows plans both branches, as before.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;

/// The function's name in SQL.
pub const NAME: &str = "lkplake_version_has_grouped_rows";

/// Whether the table `observations` (format 2's `observations`, format 3's stored rows)
/// registered in `tables` holds a grouped row. Files whose
/// statistics show none are skipped without reading their pages. The probe is planned over
/// `tables` (the version being installed) and runs as the served session runs queries: on the
/// query threads, within the memory limit, and through its runtime's metadata cache, which
/// keeps the footers of the files an earlier version already had (a request each on S3). A
/// table that cannot be read counts as holding some: the view then plans both branches and the
/// error reaches the query that reads it.
pub(crate) async fn probe(
    tables: &SessionContext,
    served: &SessionContext,
    observations: &str,
) -> bool {
    let sql = format!("SELECT grouped FROM {observations} WHERE grouped LIMIT 1");
    let rows = async {
        let plan = tables.sql(&sql).await?.into_unoptimized_plan();
        let physical = served.state().create_physical_plan(&plan).await?;
        collect(physical, served.task_ctx()).await
    };
    rows.await
        .map_or(true, |batches| batches.iter().any(|b| b.num_rows() > 0))
}

/// The function for a version that has (`true`) or has no grouped rows, to register in the
/// session its views are planned in.
pub(crate) fn udf(has_grouped_rows: bool) -> ScalarUDF {
    ScalarUDF::new_from_impl(VersionHasGroupedRows {
        value: has_grouped_rows,
        signature: Signature::nullary(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct VersionHasGroupedRows {
    value: bool,
    signature: Signature,
}

impl ScalarUDFImpl for VersionHasGroupedRows {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(ColumnarValue::Scalar(ScalarValue::Boolean(Some(
            self.value,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use crate::unpivot::tests::{ROWS, engine_over, rows};

    /// Two rows of one report test that lists vm-scalability.throughput twice (a follow-up
    /// table of two runs): format 1 groups them into one comparison, the larger of each.
    const GROUPED: &str = r#"
        {"time": "2024-05-06T00:00:00Z", "testcase": "vm-scalability", "machine": "m2",
         "params": "size=1T", "metric": "vm-scalability.throughput", "program": "vm-scalability",
         "report_key": "k3", "base_commit": "cccccccccc", "commit": "dddddddddd", "role": "head",
         "base_mantissa": 100, "base_scale": 0, "head_mantissa": 110, "head_scale": 0,
         "change": 10.0, "change_unit": "%", "direction": "higher_is_better",
         "is_headline": false, "grouped": true}
        {"time": "2024-05-06T00:00:00Z", "testcase": "vm-scalability", "machine": "m2",
         "params": "size=1T", "metric": "vm-scalability.throughput", "program": "vm-scalability",
         "report_key": "k3", "base_commit": "cccccccccc", "commit": "dddddddddd", "role": "head",
         "base_mantissa": 102, "base_scale": 0, "head_mantissa": 111, "head_scale": 0,
         "change": 8.8, "change_unit": "%", "direction": "higher_is_better",
         "is_headline": false, "grouped": true}
    "#;

    const COMPARISONS: &str = "SELECT report_key, commit, base_value, head_value, change, verdict \
        FROM comparisons ORDER BY report_key";

    /// `ROWS`' comparisons: uptime.boot has no direction, so no verdict; the float base stays.
    const K1: &str =
        "| k1         | 981204d280 | 76.42               | 77.31      | 1.2    |             |";
    const K2: &str =
        "| k2         | bbbbbbbbbb | 0.30000000000000004 | 21446.0    | 34.5   | improvement |";
    /// `GROUPED`'s comparison: the larger base, head and change of its two rows.
    const K3: &str =
        "| k3         | dddddddddd | 102.0               | 111.0      | 10.0   | improvement |";

    /// The rows as `COMPARISONS` prints them.
    fn table(rows: &[&str]) -> String {
        let rule =
            "+------------+------------+---------------------+------------+--------+-------------+";
        let header =
            "| report_key | commit     | base_value          | head_value | change | verdict     |";
        let mut lines = vec![rule, header, rule];
        lines.extend(rows);
        lines.push(rule);
        lines.join("\n")
    }

    #[tokio::test]
    async fn a_version_without_grouped_rows_plans_comparisons_without_the_group_by() {
        let (_dir, engine) = engine_over(ROWS).await;
        let plan = rows(&engine, &format!("EXPLAIN {COMPARISONS}")).await;
        assert!(!plan.contains("AggregateExec"), "{plan}");
        assert_eq!(plan.matches("DataSourceExec").count(), 1, "{plan}");
        assert_eq!(rows(&engine, COMPARISONS).await, table(&[K1, K2]));
    }

    #[tokio::test]
    async fn the_probe_leaves_the_footers_it_read_in_the_served_runtimes_cache() {
        // ROWS are two partitions: a file each, both opened by the probe, which finds nothing.
        let (_dir, engine) = engine_over(ROWS).await;
        let runtime = engine.context().runtime_env();
        assert_eq!(runtime.cache_manager.get_file_metadata_cache().len(), 2);
    }

    #[tokio::test]
    async fn a_version_with_grouped_rows_groups_them_as_format_1_does() {
        let (_dir, engine) = engine_over(&format!("{ROWS}{GROUPED}")).await;
        let plan = rows(&engine, &format!("EXPLAIN {COMPARISONS}")).await;
        assert!(plan.contains("AggregateExec"), "{plan}");
        assert_eq!(rows(&engine, COMPARISONS).await, table(&[K1, K2, K3]));
    }
}
