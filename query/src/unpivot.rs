//! `metrics` over a lake in format 2: each row of `observations` read once, given back as
//! format 1's rows.
//!
//! A format-2 row holds a table row's base and its other column (head, or a follow-up's middle
//! column) side by side. Format 1's `metrics` has a row for each. As a view, a UNION ALL of the
//! base side and the other side, it read the table twice: a one-series query paid two scans'
//! planning and a whole-lake aggregate decoded `time` and the shared columns twice (series 1.11×
//! and monthly 1.32× DuckDB's time against 0.82× and 1.29× in format 1, BENCHMARKS.md).
//! [`Unpivot`] is `metrics` as a table: its scan reads `observations` once, with the filters on
//! columns both sides share applied below it, and [`UnpivotExec`] splits each batch into its base
//! rows and its other rows. In format 3, `observations` is the view that joins each compacted row
//! with its report row (`lkplake_lake::report_rows`); `metrics` reads it as it reads format 2's.

use crate::decimal;
use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::kernels::boolean::or;
use datafusion::arrow::compute::{cast, filter, is_not_null};
use datafusion::arrow::datatypes::{
    DataType, Field, Float64Type, Int8Type, Int64Type, Schema, SchemaRef,
};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::{EquivalenceProperties, Partitioning, PhysicalExpr};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::filter_pushdown::{
    ChildFilterDescription, FilterDescription, FilterPushdownPhase,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
};
use futures::StreamExt;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

/// Where a column of `metrics` comes from in a row of `observations`.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// One column, the same for both of the row's observations.
    Shared(&'static str),
    /// A column for the base observation and another for the other one.
    Sided {
        base: &'static str,
        other: &'static str,
    },
    /// `'base'` for the base observation; the row's `role` for the other.
    Role,
    /// The value: each side's mantissa, scale and float.
    Value,
}

/// `metrics`' columns, in format 1's order, and where each comes from.
const COLUMNS: [(&str, Source); 15] = [
    ("time", Source::Shared("time")),
    ("testcase", Source::Shared("testcase")),
    ("machine", Source::Shared("machine")),
    ("params", Source::Shared("params")),
    ("metric", Source::Shared("metric")),
    ("program", Source::Shared("program")),
    (
        "commit",
        Source::Sided {
            base: "base_commit",
            other: "commit",
        },
    ),
    ("role", Source::Role),
    ("value", Source::Value),
    (
        "stddev_pct",
        Source::Sided {
            base: "base_stddev_pct",
            other: "head_stddev_pct",
        },
    ),
    (
        "change",
        Source::Sided {
            base: "base_change",
            other: "change",
        },
    ),
    ("change_unit", Source::Shared("change_unit")),
    ("direction", Source::Shared("direction")),
    ("is_headline", Source::Shared("is_headline")),
    ("report_key", Source::Shared("report_key")),
];

/// A side's value columns: mantissa, scale, float.
const BASE_VALUE: [&str; 3] = ["base_mantissa", "base_scale", "base_float"];
const HEAD_VALUE: [&str; 3] = ["head_mantissa", "head_scale", "head_float"];

/// What tells a row's sides apart: a row holds a base when it has a base value, and another
/// observation when it has a role.
const PRESENCE: [&str; 3] = ["base_mantissa", "base_float", "role"];

impl Source {
    /// The `observations` columns it reads.
    fn reads(self) -> Vec<&'static str> {
        match self {
            Source::Shared(column) => vec![column],
            Source::Sided { base, other } => vec![base, other],
            Source::Role => vec!["role"],
            Source::Value => BASE_VALUE.into_iter().chain(HEAD_VALUE).collect(),
        }
    }

    /// Its field in `metrics`, from the field(s) of `observations` it reads.
    fn field(self, name: &str, observations: &Schema) -> Result<Field> {
        Ok(match self {
            Source::Shared(column) => observations.field_with_name(column)?.clone(),
            Source::Sided { other, .. } => observations
                .field_with_name(other)?
                .clone()
                .with_name(name)
                .with_nullable(true),
            Source::Role => observations
                .field_with_name("role")?
                .clone()
                .with_nullable(true),
            Source::Value => Field::new(name, DataType::Float64, true),
        })
    }
}

/// Format 1's `metrics`, served from a format-2 lake's `observations` (see the module's doc).
#[derive(Debug)]
pub struct Unpivot {
    observations: Arc<dyn TableProvider>,
    schema: SchemaRef,
}

impl Unpivot {
    /// `metrics` over `observations`, a format-2 lake's `metrics` Delta table.
    pub fn over(observations: Arc<dyn TableProvider>) -> Result<Arc<dyn TableProvider>> {
        let inner = observations.schema();
        let fields = COLUMNS
            .iter()
            .map(|(name, source)| source.field(name, &inner))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(Self {
            observations,
            schema: Arc::new(Schema::new(fields)),
        }))
    }
}

/// Whether `filter` reads only columns both sides of a row share, so that it holds for both or
/// for neither and can be applied to `observations` rows.
fn on_shared_columns(filter: &Expr) -> bool {
    !filter.is_volatile()
        && filter.column_refs().iter().all(|column| {
            COLUMNS
                .iter()
                .any(|(name, source)| *name == column.name && matches!(source, Source::Shared(_)))
        })
}

/// Adds `name` to `names` unless it is there.
fn add<'a>(names: &mut Vec<&'a str>, name: &'a str) {
    if !names.contains(&name) {
        names.push(name);
    }
}

#[async_trait]
impl TableProvider for Unpivot {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Filters on shared columns are applied exactly, below the split (and reach the Parquet
    /// scan's pruning); the others are left to DataFusion above it.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|filter| {
                if on_shared_columns(filter) {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let wanted: Vec<usize> = match projection {
            Some(columns) => columns.clone(),
            None => (0..COLUMNS.len()).collect(),
        };
        let mut reads: Vec<&str> = PRESENCE.to_vec();
        for &i in &wanted {
            for column in COLUMNS[i].1.reads() {
                add(&mut reads, column);
            }
        }
        // Exact filters are not in the projection DataFusion asks for: read their columns too.
        for filter in filters {
            for column in filter.column_refs() {
                let shared = COLUMNS.iter().find_map(|(name, source)| match source {
                    Source::Shared(inner) if *name == column.name => Some(*inner),
                    _ => None,
                });
                if let Some(inner) = shared {
                    add(&mut reads, inner);
                }
            }
        }
        let inner_schema = self.observations.schema();
        let indices = reads
            .iter()
            .map(|column| inner_schema.index_of(column))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // A limit is not passed on: a row of `observations` gives one or two rows of `metrics`.
        let mut input = self
            .observations
            .scan(state, Some(&indices), filters, None)
            .await?;
        if let Some(predicate) = conjunction(filters.to_vec()) {
            let predicate =
                state.create_physical_expr(predicate, &DFSchema::try_from(input.schema())?)?;
            input = Arc::new(FilterExec::try_new(predicate, input)?);
        }
        let columns = wanted.iter().map(|&i| COLUMNS[i].1).collect();
        let schema = Arc::new(self.schema.project(&wanted)?);
        Ok(Arc::new(UnpivotExec::try_new(input, columns, schema)?))
    }
}

/// Splits each batch of `observations` rows into a batch of their base observations and a
/// batch of their other ones, in `metrics`' columns.
#[derive(Debug)]
pub struct UnpivotExec {
    input: Arc<dyn ExecutionPlan>,
    split: Arc<Split>,
    properties: Arc<PlanProperties>,
}

impl UnpivotExec {
    fn try_new(
        input: Arc<dyn ExecutionPlan>,
        columns: Vec<Source>,
        schema: SchemaRef,
    ) -> Result<Self> {
        let split = Split::resolve(columns, &input.schema(), Arc::clone(&schema))?;
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(input.output_partitioning().partition_count()),
            input.pipeline_behavior(),
            input.boundedness(),
        );
        Ok(Self {
            input,
            split: Arc::new(split),
            properties: Arc::new(properties),
        })
    }
}

impl DisplayAs for UnpivotExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UnpivotExec")
    }
}

impl ExecutionPlan for UnpivotExec {
    fn name(&self) -> &str {
        "UnpivotExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match children.pop() {
            Some(input) if children.is_empty() => Ok(Arc::new(Self::try_new(
                input,
                self.split
                    .columns
                    .iter()
                    .map(|(source, _)| *source)
                    .collect(),
                Arc::clone(&self.split.schema),
            )?)),
            _ => Err(DataFusionError::Internal(
                "UnpivotExec takes exactly one input".into(),
            )),
        }
    }

    /// A filter on shared columns holds for both rows of a stored row or for neither, so it
    /// goes on to the scan: the dynamic filters of joins and `ORDER BY ... LIMIT` too.
    fn gather_filters_for_pushdown(
        &self,
        _phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        // A shared column has the same name in the input, which the remapping relies on.
        let shared: HashSet<usize> = (self.split.columns.iter().enumerate())
            .filter(|(_, (source, _))| matches!(source, Source::Shared(_)))
            .map(|(i, _)| i)
            .collect();
        let child = ChildFilterDescription::from_child_with_allowed_indices(
            &parent_filters,
            shared,
            &self.input,
        )?;
        Ok(FilterDescription::new().with_child(child))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let split = Arc::clone(&self.split);
        let batches = self
            .input
            .execute(partition, context)?
            .flat_map(move |batch| {
                let sides = match batch {
                    Ok(batch) => split.sides(&batch),
                    Err(e) => vec![Err(e)],
                };
                futures::stream::iter(sides)
            });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.split.schema),
            batches,
        )))
    }
}

/// Where each output column's inputs are in the input batches.
#[derive(Debug)]
struct Split {
    /// Per output column: where it comes from, and the positions of the columns it reads.
    columns: Vec<(Source, Vec<usize>)>,
    /// Positions of [`PRESENCE`]'s columns.
    presence: [usize; 3],
    schema: SchemaRef,
}

impl Split {
    fn resolve(columns: Vec<Source>, input: &Schema, schema: SchemaRef) -> Result<Self> {
        let position = |name: &str| input.index_of(name).map_err(DataFusionError::from);
        let columns = columns
            .into_iter()
            .map(|source| {
                let positions = source
                    .reads()
                    .into_iter()
                    .map(position)
                    .collect::<Result<Vec<_>>>()?;
                Ok((source, positions))
            })
            .collect::<Result<Vec<_>>>()?;
        let [mantissa, float, role] = PRESENCE;
        Ok(Self {
            columns,
            presence: [position(mantissa)?, position(float)?, position(role)?],
            schema,
        })
    }

    /// `batch`'s base observations, then its other ones; a side with no rows gives no batch.
    fn sides(&self, batch: &RecordBatch) -> Vec<Result<RecordBatch>> {
        [true, false]
            .into_iter()
            .filter_map(|base| self.side(batch, base).transpose())
            .collect()
    }

    fn side(&self, batch: &RecordBatch, base: bool) -> Result<Option<RecordBatch>> {
        let [mantissa, float, role] = self.presence.map(|i| batch.column(i));
        let mask = if base {
            or(&is_not_null(mantissa)?, &is_not_null(float)?)?
        } else {
            is_not_null(role)?
        };
        let rows = mask.true_count();
        if rows == 0 {
            return Ok(None);
        }
        let columns = self
            .columns
            .iter()
            .zip(self.schema.fields())
            .map(|((source, positions), field)| {
                let column = |i: usize| batch.column(positions[i]);
                match source {
                    Source::Shared(_) => Ok(filter(column(0), &mask)?),
                    Source::Sided { .. } => Ok(filter(column(usize::from(!base)), &mask)?),
                    Source::Role if base => {
                        let names = ScalarValue::from("base").to_array_of_size(rows)?;
                        Ok(cast(&names, field.data_type())?)
                    }
                    Source::Role => Ok(filter(column(0), &mask)?),
                    Source::Value => {
                        let first = if base { 0 } else { 3 };
                        value(&mask, [0, 1, 2].map(|i| column(first + i)))
                    }
                }
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(Some(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?))
    }
}

/// The values of the rows `mask` keeps, from their mantissa, scale and float.
fn value(mask: &BooleanArray, [mantissa, scale, float]: [&ArrayRef; 3]) -> Result<ArrayRef> {
    let [mantissa, scale, float] = [mantissa, scale, float].map(|a| filter(a, mask));
    let values = decimal::values(
        mantissa?.as_primitive::<Int64Type>(),
        scale?.as_primitive::<Int8Type>(),
        float?.as_primitive::<Float64Type>(),
    );
    Ok(Arc::new(values))
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::{Engine, EngineConfig};
    use arrow::array::RecordBatch;
    use arrow::util::pretty::pretty_format_batches;
    use lkplake_lake::{Batches, Format, Lake, LakeUrl};
    use lkplake_schemas::tables::{
        FAILURES, FORMAT_3_OBSERVATIONS, LINKS, MENTIONS, OBSERVATIONS, REPORTS,
    };
    use std::sync::Arc;

    /// Rows of the uptime.boot table of `<Zp8mqTnJN7VJZ/C/@xsang-OptiPlex-9020>` (base 76.42,
    /// a middle column 87.99 ±3% +15.1%, head 77.31 ±3% +1.2%), and a row of another testcase
    /// whose base value has no short decimal and so is kept as its float.
    pub(crate) const ROWS: &str = r#"
        {"time": "2024-03-01T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "uptime.boot", "program": "boot", "report_key": "k1",
         "base_commit": "94b7e5bf09", "commit": "981204d280", "role": "head",
         "base_mantissa": 7642, "base_scale": 2, "head_mantissa": 7731, "head_scale": 2,
         "head_stddev_pct": 3.0, "change": 1.2, "change_unit": "%", "is_headline": false,
         "grouped": false}
        {"time": "2024-03-01T00:00:00Z", "testcase": "boot", "machine": "m1", "params": "",
         "metric": "uptime.boot", "program": "boot", "report_key": "k1",
         "base_commit": "94b7e5bf09", "commit": "98c9daf5ae", "role": "c1",
         "head_mantissa": 8799, "head_scale": 2, "head_stddev_pct": 3.0, "change": 15.1,
         "change_unit": "%", "is_headline": false, "grouped": false}
        {"time": "2024-04-02T00:00:00Z", "testcase": "vm-scalability", "machine": "m2",
         "params": "size=1T", "metric": "vm-scalability.throughput", "program": "vm-scalability",
         "report_key": "k2", "base_commit": "aaaaaaaaaa", "commit": "bbbbbbbbbb", "role": "head",
         "base_float": 0.30000000000000004, "base_stddev_pct": 2.0, "head_mantissa": 21446,
         "head_scale": 0, "change": 34.5, "change_unit": "%", "direction": "higher_is_better",
         "is_headline": true, "grouped": false}
    "#;

    /// The UNION ALL view `metrics` was before it became a table: the reference it must match.
    const UNION_OF_SIDES: &str = "
        SELECT time, testcase, machine, params, metric, program, base_commit AS commit,
            'base' AS role, lkplake_value(base_mantissa, base_scale, base_float) AS value,
            base_stddev_pct AS stddev_pct, base_change AS change, change_unit, direction,
            is_headline, report_key
        FROM observations WHERE base_mantissa IS NOT NULL OR base_float IS NOT NULL
        UNION ALL
        SELECT time, testcase, machine, params, metric, program, commit, role,
            lkplake_value(head_mantissa, head_scale, head_float) AS value,
            head_stddev_pct AS stddev_pct, change, change_unit, direction, is_headline,
            report_key
        FROM observations WHERE role IS NOT NULL";

    async fn engine() -> (tempfile::TempDir, Engine) {
        engine_over(ROWS).await
    }

    /// An engine over a format-2 lake of `rows` (JSON lines of `observations`).
    pub(crate) async fn engine_over(rows: &str) -> (tempfile::TempDir, Engine) {
        let (dir, _lake) = lake_of(rows, Format::Two).await;
        let config = EngineConfig {
            query_threads: Some(0),
            ..EngineConfig::default()
        };
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let engine = Engine::open(&url, &config)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        (dir, engine)
    }

    /// A lake in `format` (2 or 3) whose `metrics` a transformer wrote `rows` (JSON lines of
    /// format 2's `observations`) into, in one commit.
    pub(crate) async fn lake_of(rows: &str, format: Format) -> (tempfile::TempDir, Lake) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mut lake = Lake::open_in(&url, format)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let schema = match format {
            Format::Three => &FORMAT_3_OBSERVATIONS,
            _ => &OBSERVATIONS,
        };
        let metrics = arrow::json::ReaderBuilder::new(Arc::clone(schema))
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
        (dir, lake)
    }

    pub(crate) async fn rows(engine: &Engine, sql: &str) -> String {
        let frame = engine
            .context()
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let batches = frame
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        pretty_format_batches(&batches)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string()
    }

    #[tokio::test]
    async fn metrics_gives_each_side_of_a_row_its_own_row_with_the_value_as_printed() {
        let (_dir, engine) = engine().await;
        let got = rows(
            &engine,
            "SELECT testcase, commit, role, value, stddev_pct, change, is_headline \
             FROM metrics ORDER BY testcase, role",
        )
        .await;
        let expected = [
            "+----------------+------------+------+---------------------+------------+--------+-------------+",
            "| testcase       | commit     | role | value               | stddev_pct | change | is_headline |",
            "+----------------+------------+------+---------------------+------------+--------+-------------+",
            "| boot           | 94b7e5bf09 | base | 76.42               |            |        | false       |",
            "| boot           | 98c9daf5ae | c1   | 87.99               | 3.0        | 15.1   | false       |",
            "| boot           | 981204d280 | head | 77.31               | 3.0        | 1.2    | false       |",
            "| vm-scalability | aaaaaaaaaa | base | 0.30000000000000004 | 2.0        |        | true        |",
            "| vm-scalability | bbbbbbbbbb | head | 21446.0             |            | 34.5   | true        |",
            "+----------------+------------+------+---------------------+------------+--------+-------------+",
        ]
        .join("\n");
        assert_eq!(got, expected);
    }

    #[tokio::test]
    async fn every_filter_answers_as_the_union_of_both_sides_does() {
        let (_dir, engine) = engine().await;
        let order = "ORDER BY time, testcase, role, commit";
        for filter in [
            "true",
            "testcase = 'boot'",
            "machine = 'm2' AND params = 'size=1T'",
            "role = 'base'",
            "commit = '94b7e5bf09'",
            "value > 77",
            "change IS NULL",
            "is_headline AND stddev_pct IS NOT NULL",
            "time >= '2024-04-01T00:00:00Z' OR role = 'c1'",
            "metric LIKE 'uptime%' AND value < 80",
        ] {
            let ours = rows(
                &engine,
                &format!("SELECT * FROM metrics WHERE {filter} {order}"),
            )
            .await;
            let reference = rows(
                &engine,
                &format!("SELECT * FROM ({UNION_OF_SIDES}) WHERE {filter} {order}"),
            )
            .await;
            assert_eq!(ours, reference, "{filter}");
        }
        for sql in [
            "SELECT count(*) AS n FROM metrics",
            "SELECT count(*) AS n FROM metrics WHERE testcase = 'boot'",
            "SELECT metric, count(*) AS n FROM metrics GROUP BY metric ORDER BY metric",
        ] {
            let reference = sql.replace("FROM metrics", &format!("FROM ({UNION_OF_SIDES})"));
            assert_eq!(
                rows(&engine, sql).await,
                rows(&engine, &reference).await,
                "{sql}"
            );
        }
        assert_eq!(
            rows(&engine, "SELECT count(*) AS n FROM metrics").await,
            ["+---+", "| n |", "+---+", "| 5 |", "+---+"].join("\n")
        );
    }

    #[tokio::test]
    async fn a_query_on_metrics_scans_observations_once() {
        let (_dir, engine) = engine().await;
        let plan = rows(
            &engine,
            "EXPLAIN SELECT commit, avg(value) FROM metrics WHERE testcase = 'boot' GROUP BY commit",
        )
        .await;
        assert_eq!(plan.matches("UnpivotExec").count(), 1, "{plan}");
        assert_eq!(plan.matches("DataSourceExec").count(), 1, "{plan}");
    }

    #[tokio::test]
    async fn the_dynamic_filter_of_a_top_k_on_a_shared_column_reaches_the_scan_and_one_sided_does_not()
     {
        let (_dir, engine) = engine().await;
        let plan = rows(
            &engine,
            "EXPLAIN SELECT time, value FROM metrics ORDER BY time DESC LIMIT 1",
        )
        .await;
        let scan = plan
            .lines()
            .find(|line| line.contains("DataSourceExec"))
            .unwrap_or_else(|| panic!("no scan: {plan}"));
        assert!(scan.contains("DynamicFilter"), "{plan}");
        let plan = rows(
            &engine,
            "EXPLAIN SELECT time, value FROM metrics ORDER BY value DESC LIMIT 1",
        )
        .await;
        assert!(!plan.contains("DynamicFilter"), "{plan}");
        assert_eq!(
            rows(
                &engine,
                "SELECT commit, value FROM metrics ORDER BY time DESC, value DESC LIMIT 1"
            )
            .await,
            [
                "+------------+---------+",
                "| commit     | value   |",
                "+------------+---------+",
                "| bbbbbbbbbb | 21446.0 |",
                "+------------+---------+",
            ]
            .join("\n")
        );
    }
}
