//! A table version's files, indexed once when the reader loads the version, so a query plans
//! without replaying the Delta log.
//!
//! delta-rs 1.1's provider rebuilds its scan for every statement: it replays the version's add
//! actions through delta-kernel, parses their statistics and builds the file list again (about
//! 9 ms of a 13 ms one-series query on the 10.6M-row lake, BENCHMARKS.md). A version never
//! changes, so [`IndexedTable`] does that once: each live file with its size, partition values,
//! row count and time bounds. A query selects files in memory: its partition filters are evaluated
//! exactly over the partition values, and its time filters prune by the files' time bounds
//! (widened by a millisecond each way, as Delta truncates timestamp statistics to milliseconds).
//! The files, with their row counts, go to DataFusion's own Parquet scan, which prunes row groups
//! by their footers and pages by the page index.
//!
//! Tables using a Delta feature the index does not read (deletion vectors, column mapping) are
//! served by delta-rs' provider instead, which [`index_or_fallback`] says once per table.

use crate::LakeError;
use chrono::DateTime;
use deltalake::DeltaTable;
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, TimestampMicrosecondArray,
};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{
    DataType, FieldRef, Int64Type, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use deltalake::datafusion::catalog::{Session, TableProvider};
use deltalake::datafusion::common::stats::Precision;
use deltalake::datafusion::common::{Column, DFSchema, ScalarValue, Statistics};
use deltalake::datafusion::datasource::file_format::FileFormat;
use deltalake::datafusion::datasource::file_format::parquet::ParquetFormat;
use deltalake::datafusion::datasource::listing::PartitionedFile;
use deltalake::datafusion::datasource::listing::helpers::expr_applicable_for_cols;
use deltalake::datafusion::datasource::object_store::ObjectStoreUrl;
use deltalake::datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
use deltalake::datafusion::datasource::table_schema::TableSchema;
use deltalake::datafusion::error::{DataFusionError, Result};
use deltalake::datafusion::logical_expr::utils::conjunction;
use deltalake::datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use deltalake::datafusion::physical_optimizer::pruning::{
    PruningPredicateBuilder, PruningStatistics,
};
use deltalake::datafusion::physical_plan::ExecutionPlan;
use deltalake::datafusion::physical_plan::empty::EmptyExec;
use deltalake::{ObjectMeta, ObjectStore, Path};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Why a table cannot be indexed: a Delta feature whose files need more than their add
/// actions to be read right.
fn unsupported_feature(table: &DeltaTable) -> Option<&'static str> {
    let protocol = table.snapshot().ok()?.protocol();
    if protocol.min_reader_version() == 2 {
        return Some("column mapping");
    }
    let features = protocol.reader_features().unwrap_or_default();
    [
        ("deletionVectors", "deletion vectors"),
        ("columnMapping", "column mapping"),
    ]
    .into_iter()
    .find(|(feature, _)| features.iter().any(|f| f.as_ref() == *feature))
    .map(|(_, name)| name)
}

/// Tables already reported as served by delta-rs' provider, so the log says it once.
static FELL_BACK: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// An [`IndexedTable`] of `table`'s loaded version, or `fallback` (delta-rs' provider of the same
/// version, whose schema the index serves) when the table uses a feature the index does not read.
pub(crate) fn index_or_fallback(
    name: &'static str,
    table: &DeltaTable,
    fallback: Arc<dyn TableProvider>,
) -> Result<Arc<dyn TableProvider>, LakeError> {
    if let Some(feature) = unsupported_feature(table) {
        let key = format!("{}#{name}", table.table_url());
        let mut reported = FELL_BACK.lock().unwrap_or_else(|e| e.into_inner());
        if reported.get_or_insert_with(HashSet::new).insert(key) {
            tracing::warn!(
                table = name,
                "the table uses {feature}, which lkplake's file index does not read: \
                 it is served by delta-rs' scan, which replays its log at every query"
            );
        }
        return Ok(fallback);
    }
    Ok(Arc::new(IndexedTable::try_new(
        name,
        table,
        fallback.schema(),
    )?))
}

/// One version of a Delta table: its files, indexed (see the module's doc).
#[derive(Debug)]
pub struct IndexedTable {
    /// The schema served: delta-rs' for the same version, text partition columns as string
    /// views ([`served_schema`]).
    schema: SchemaRef,
    /// The files' columns, then the partition columns: the order DataFusion's file scans use.
    table_schema: TableSchema,
    /// For each served column, its position in `table_schema`.
    positions: Vec<usize>,
    /// The live files, with their partition values and statistics.
    files: Vec<PartitionedFile>,
    /// One row per file of `files`: its partition values, for evaluating filters on them.
    partitions: RecordBatch,
    /// Per file of `files`: the bounds of its timestamp columns.
    bounds: TimeBounds,
    /// The whole version's statistics (its row count), summed once: the version never changes.
    statistics: Statistics,
    store_url: ObjectStoreUrl,
    store: Arc<dyn ObjectStore>,
}

impl IndexedTable {
    /// Indexes the live files of `table`'s loaded version, to be served with `schema`.
    pub(crate) fn try_new(
        name: &'static str,
        table: &DeltaTable,
        schema: SchemaRef,
    ) -> Result<Self, LakeError> {
        let snapshot = table.snapshot().map_err(LakeError::delta(name))?;
        let partition_names = snapshot.metadata().partition_columns();
        let schema = served_schema(&schema, partition_names);
        let (file_fields, partition_fields): (Vec<FieldRef>, Vec<FieldRef>) = schema
            .fields()
            .iter()
            .cloned()
            .partition(|f| !partition_names.contains(f.name()));
        let file_schema = Arc::new(Schema::new(file_fields));
        let table_schema = TableSchema::builder(Arc::clone(&file_schema))
            .with_table_partition_cols(partition_fields.clone())
            .build();
        let positions = schema
            .fields()
            .iter()
            .map(|f| table_schema.table_schema().index_of(f.name()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| LakeError::query(name)(e.into()))?;
        let actions = snapshot
            .add_actions_table(true)
            .map_err(LakeError::delta(name))?;
        let files = indexed_files(&actions, &file_schema, &partition_fields)
            .map_err(LakeError::query(name))?;
        let bounds = TimeBounds::of(&actions, &file_schema).map_err(LakeError::query(name))?;
        let partitions =
            partition_batch(&partition_fields, &files).map_err(LakeError::query(name))?;
        let statistics = total_statistics(&schema, &files);
        let log_store = table.log_store();
        Ok(Self {
            schema,
            table_schema,
            positions,
            files,
            partitions,
            bounds,
            statistics,
            store_url: log_store.object_store_url(),
            store: log_store.object_store(None),
        })
    }

    /// The names of the partition columns.
    fn partition_names(&self) -> Vec<&str> {
        self.table_schema
            .table_partition_cols()
            .iter()
            .map(|f| f.name().as_str())
            .collect()
    }

    /// The files a scan with `filters` must read: those whose partition values satisfy the
    /// filters on partition columns (evaluated over the index in one pass, exactly) and whose
    /// time bounds do not rule out the other filters.
    fn select(&self, state: &dyn Session, filters: &[Expr]) -> Result<Vec<PartitionedFile>> {
        let partitions = self.partition_names();
        let (on_partitions, others): (Vec<Expr>, Vec<Expr>) = filters
            .iter()
            .cloned()
            .partition(|f| !partitions.is_empty() && expr_applicable_for_cols(&partitions, f));
        let mut keep = vec![true; self.files.len()];
        if let Some(filter) = conjunction(on_partitions) {
            let schema = DFSchema::try_from(self.partitions.schema())?;
            let matches = state
                .create_physical_expr(filter, &schema)?
                .evaluate(&self.partitions)?
                .into_array(self.partitions.num_rows())?;
            let matches = matches.as_boolean();
            for (i, keep) in keep.iter_mut().enumerate() {
                *keep = matches.is_valid(i) && matches.value(i);
            }
        }
        if let Some(filter) = conjunction(others).filter(|_| !self.bounds.min.is_empty()) {
            let schema = Arc::clone(self.table_schema.table_schema());
            let predicate =
                state.create_physical_expr(filter, &DFSchema::try_from(Arc::clone(&schema))?)?;
            // A filter the pruning predicate cannot take rules out no file.
            let pruning = PruningPredicateBuilder::new()
                .with_file_schema(schema)
                .build(predicate);
            if let Some(may_match) = pruning.and_then(|p| p.prune(&self.bounds).ok()) {
                for (keep, may_match) in keep.iter_mut().zip(may_match) {
                    *keep &= may_match;
                }
            }
        }
        Ok(self
            .files
            .iter()
            .zip(keep)
            .filter(|(_, keep)| *keep)
            .map(|(file, _)| file.clone())
            .collect())
    }

    /// The object store the files are read from, registered with the session's runtime once.
    fn register_store(&self, state: &dyn Session) {
        let runtime = state.runtime_env();
        if runtime.object_store(&self.store_url).is_err() {
            runtime.register_object_store(self.store_url.as_ref(), Arc::clone(&self.store));
        }
    }
}

/// The live files of a version, from its add actions (`add_actions_table(true)`: one row a
/// file, statistics and partition values flattened into `min.<column>`, `partition.<column>`).
/// `schema` with its text partition columns as string views rather than the dictionaries
/// delta-rs serves them as. DataFusion groups string views column by column, but one dictionary
/// column among a GROUP BY's keys sends the whole grouping to its row-format fallback: the
/// `comparisons` and `series` views group by both partition columns, and their grouping took
/// three times as long (BENCHMARKS.md, "Partition columns as string views").
fn served_schema(schema: &SchemaRef, partition_names: &[String]) -> SchemaRef {
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|field| match field.data_type() {
            DataType::Dictionary(_, value)
                if partition_names.contains(field.name()) && value.as_ref() == &DataType::Utf8 =>
            {
                Arc::new(field.as_ref().clone().with_data_type(DataType::Utf8View))
            }
            _ => Arc::clone(field),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

fn indexed_files(
    actions: &RecordBatch,
    file_schema: &SchemaRef,
    partition_fields: &[FieldRef],
) -> Result<Vec<PartitionedFile>> {
    let column = |name: &str| {
        actions.column_by_name(name).ok_or_else(|| {
            DataFusionError::Internal(format!("the Delta log's add actions lack `{name}`"))
        })
    };
    let paths = column("path")?.as_string::<i32>();
    let sizes = column("size_bytes")?.as_primitive::<Int64Type>();
    let modified = column("modification_time")?.as_primitive::<Int64Type>();
    let rows = column("num_records")?.as_primitive::<Int64Type>();
    let partitions = partition_fields
        .iter()
        .map(|f| column(&format!("partition.{}", f.name())))
        .collect::<Result<Vec<_>>>()?;
    let mut files = Vec::with_capacity(actions.num_rows());
    for i in 0..actions.num_rows() {
        let meta = ObjectMeta {
            // As delta-rs reads them: percent-decoded, then parsed as a store path.
            location: Path::from_url_path(paths.value(i))
                .map_err(|e| DataFusionError::External(Box::new(e)))?,
            last_modified: DateTime::from_timestamp_millis(modified.value(i)).unwrap_or_default(),
            size: u64::try_from(sizes.value(i)).unwrap_or_default(),
            e_tag: None,
            version: None,
        };
        let mut file = PartitionedFile::new_from_meta(meta);
        file.partition_values = partitions
            .iter()
            .zip(partition_fields)
            .map(|(values, field)| {
                ScalarValue::try_from_array(values, i)?.cast_to(field.data_type())
            })
            .collect::<Result<_>>()?;
        let mut statistics = Statistics::new_unknown(file_schema);
        if rows.is_valid(i) {
            statistics.num_rows = Precision::Exact(usize::try_from(rows.value(i)).unwrap_or(0));
        }
        statistics.total_byte_size =
            Precision::Inexact(usize::try_from(sizes.value(i)).unwrap_or(0));
        files.push(file.with_statistics(Arc::new(statistics)));
    }
    Ok(files)
}

/// The bounds of every file's timestamp columns, for skipping files by a query's filters on
/// them. Delta keeps them truncated to milliseconds, so each is widened by a millisecond. They
/// are kept here, not handed to DataFusion as the files' statistics: it takes bounds it is given
/// as exact (`min(time)` would be answered from them). Other columns' bounds are left to the
/// footers: Delta's may be truncated strings, or floats that ignore NaN.
#[derive(Debug)]
struct TimeBounds {
    files: usize,
    min: HashMap<String, ArrayRef>,
    max: HashMap<String, ArrayRef>,
    nulls: HashMap<String, ArrayRef>,
    rows: Option<ArrayRef>,
}

impl TimeBounds {
    fn of(actions: &RecordBatch, file_schema: &SchemaRef) -> Result<Self> {
        let mut bounds = Self {
            files: actions.num_rows(),
            min: HashMap::new(),
            max: HashMap::new(),
            nulls: HashMap::new(),
            rows: actions
                .column_by_name("num_records")
                .map(|rows| cast(rows, &DataType::UInt64))
                .transpose()?,
        };
        for field in file_schema.fields() {
            let DataType::Timestamp(TimeUnit::Microsecond, zone) = field.data_type() else {
                continue;
            };
            let column =
                |prefix: &str| actions.column_by_name(&format!("{prefix}.{}", field.name()));
            let (Some(min), Some(max)) = (column("min"), column("max")) else {
                continue;
            };
            let widen = |values: &ArrayRef, by: i64| -> Result<ArrayRef> {
                let values = cast(values, field.data_type())?;
                let widened: TimestampMicrosecondArray = values
                    .as_primitive::<TimestampMicrosecondType>()
                    .unary(|t| t.saturating_add(by));
                Ok(Arc::new(widened.with_timezone_opt(zone.clone())))
            };
            bounds.min.insert(field.name().clone(), widen(min, -1_000)?);
            bounds.max.insert(field.name().clone(), widen(max, 1_000)?);
            if let Some(nulls) = column("null_count") {
                bounds
                    .nulls
                    .insert(field.name().clone(), cast(nulls, &DataType::UInt64)?);
            }
        }
        Ok(bounds)
    }
}

impl PruningStatistics for TimeBounds {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.min.get(column.name()).cloned()
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.max.get(column.name()).cloned()
    }

    fn num_containers(&self) -> usize {
        self.files
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        self.nulls.get(column.name()).cloned()
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        self.rows.clone()
    }

    fn contained(&self, _: &Column, _: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// The partition values of `files` as columns, one row per file.
fn partition_batch(fields: &[FieldRef], files: &[PartitionedFile]) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(fields.to_vec()));
    let columns = fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            if files.is_empty() {
                return Ok(deltalake::arrow::array::new_empty_array(field.data_type()));
            }
            ScalarValue::iter_to_array(files.iter().map(|f| f.partition_values[i].clone()))
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let options =
        deltalake::arrow::array::RecordBatchOptions::new().with_row_count(Some(files.len()));
    Ok(RecordBatch::try_new_with_options(
        schema, columns, &options,
    )?)
}

/// The statistics of a set of files together: their total row count when every file has one.
fn total_statistics(schema: &SchemaRef, files: &[PartitionedFile]) -> Statistics {
    let mut statistics = Statistics::new_unknown(schema);
    let rows: Option<usize> = files
        .iter()
        .map(|f| f.statistics.as_ref()?.num_rows.get_value().copied())
        .sum();
    statistics.num_rows = rows.map_or(Precision::Absent, Precision::Exact);
    statistics
}

#[async_trait::async_trait]
impl TableProvider for IndexedTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        let partitions = self.partition_names();
        Ok(filters
            .iter()
            .map(|filter| {
                // Evaluated over the index exactly; the rest are checked again above the scan.
                if !partitions.is_empty() && expr_applicable_for_cols(&partitions, filter) {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Inexact
                }
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        Some(self.statistics.clone())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let files = self.select(state, filters)?;
        let projection: Vec<usize> = match projection {
            Some(columns) => columns.iter().map(|&i| self.positions[i]).collect(),
            None => self.positions.clone(),
        };
        if files.is_empty() {
            let schema = self.table_schema.table_schema().project(&projection)?;
            return Ok(Arc::new(EmptyExec::new(Arc::new(schema))));
        }
        self.register_store(state);
        let statistics = total_statistics(self.table_schema.table_schema(), &files);
        let groups = FileGroup::new(files).split_files(state.config().target_partitions());
        let format = ParquetFormat::default().with_options(state.default_table_options().parquet);
        let source = format.file_source(self.table_schema.clone());
        let config = FileScanConfigBuilder::new(self.store_url.clone(), source)
            .with_file_groups(groups)
            .with_statistics(statistics)
            .with_projection_indices(Some(projection))?
            .with_limit(limit)
            .build();
        format.create_physical_plan(state, config).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batches, Lake, LakeUrl};
    use deltalake::arrow::util::pretty::pretty_format_batches;
    use deltalake::datafusion::physical_plan::displayable;
    use deltalake::datafusion::prelude::SessionContext;
    use lkplake_schemas::tables::METRICS_TABLE;

    /// 2026-11-02T10:00:00.000500Z: half a millisecond past a whole one, which Delta's
    /// statistics (milliseconds) cannot hold.
    const HALF_PAST: i64 = 1_793_613_600_000_500;

    /// `metrics` rows of one (testcase, machine), one per value, a second apart from `start`.
    fn metrics(testcase: &str, machine: &str, start: i64, values: &[f64]) -> Batches {
        let rows: Vec<(&str, i64, f64)> = (0..)
            .zip(values)
            .map(|(i, &value)| ("vm-scalability.throughput", start + i * 1_000_000, value))
            .collect();
        crate::testing::metrics(testcase, machine, &rows)
    }

    /// A lake whose `metrics` has three commits: (vm-scalability, m1) with 2 rows, (vm-scalability,
    /// m2) with 3, (stream, m1) with 1 starting at [`HALF_PAST`].
    async fn lake() -> (tempfile::TempDir, DeltaTable) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mut lake = Lake::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
        let day = 1_793_577_600_000_000;
        for batches in [
            metrics("vm-scalability", "m1", day, &[1.0, 2.0]),
            metrics("vm-scalability", "m2", day, &[3.0, 4.0, 5.0]),
            metrics("stream", "m1", HALF_PAST, &[6.0]),
        ] {
            lake.commit(batches, &[])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let table = crate::reader::open_existing(&url, METRICS_TABLE)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no metrics table"));
        (dir, table)
    }

    /// A session with `table` served as `indexed` (the index) and `delta` (delta-rs' provider).
    async fn session(table: &DeltaTable) -> SessionContext {
        let ctx = SessionContext::new();
        let delta = table
            .table_provider()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let indexed = IndexedTable::try_new(METRICS_TABLE, table, delta.schema())
            .unwrap_or_else(|e| panic!("{e}"));
        ctx.register_table("indexed", Arc::new(indexed))
            .unwrap_or_else(|e| panic!("{e}"));
        ctx.register_table("delta", delta)
            .unwrap_or_else(|e| panic!("{e}"));
        ctx
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> String {
        let batches = ctx
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        pretty_format_batches(&batches)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string()
    }

    async fn plan(ctx: &SessionContext, sql: &str) -> String {
        let plan = ctx
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .create_physical_plan()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        displayable(plan.as_ref()).indent(true).to_string()
    }

    #[tokio::test]
    async fn the_index_answers_every_column_as_delta_rs_scan_does() {
        let (_dir, table) = lake().await;
        let ctx = session(&table).await;
        for sql in [
            "SELECT * FROM {} ORDER BY machine, testcase, time",
            "SELECT machine, sum(value) AS total FROM {} GROUP BY machine ORDER BY machine",
            "SELECT testcase, value FROM {} WHERE machine = 'm1' AND value > 1 ORDER BY value",
            "SELECT count(*) AS n FROM {} WHERE testcase LIKE 'vm%'",
            "SELECT testcase, machine, metric, count(*) AS n, max(value) AS top FROM {} \
             GROUP BY testcase, machine, metric ORDER BY testcase, machine",
        ] {
            let indexed = rows(&ctx, &sql.replace("{}", "indexed")).await;
            assert_eq!(
                indexed,
                rows(&ctx, &sql.replace("{}", "delta")).await,
                "{sql}"
            );
        }
        assert_eq!(
            rows(&ctx, "SELECT count(*) AS n FROM indexed").await,
            "+---+\n| n |\n+---+\n| 6 |\n+---+"
        );
    }

    #[tokio::test]
    async fn partition_columns_are_served_as_string_views() {
        let (_dir, table) = lake().await;
        let ctx = session(&table).await;
        let types = rows(
            &ctx,
            "SELECT arrow_typeof(testcase) AS t, arrow_typeof(machine) AS m FROM indexed LIMIT 1",
        )
        .await;
        assert!(types.contains("| Utf8View | Utf8View |"), "{types}");
    }

    #[tokio::test]
    async fn a_filter_on_partition_columns_reads_only_that_partitions_files() {
        let (_dir, table) = lake().await;
        let ctx = session(&table).await;
        let sql = "SELECT value FROM indexed WHERE machine = 'm2' ORDER BY value";
        let plan = plan(&ctx, sql).await;
        assert!(plan.contains("machine=m2/"), "{plan}");
        assert!(!plan.contains("machine=m1/"), "{plan}");
        assert_eq!(
            rows(&ctx, sql).await,
            "+-------+\n| value |\n+-------+\n| 3.0   |\n| 4.0   |\n| 5.0   |\n+-------+"
        );
        // No file of the partition: nothing to read.
        let none = "SELECT value FROM indexed WHERE machine = 'm3'";
        assert!(plan_of_nothing(&self::plan(&ctx, none).await));
        let count = "SELECT count(*) AS n FROM indexed WHERE machine = 'm3'";
        assert_eq!(rows(&ctx, count).await, "+---+\n| n |\n+---+\n| 0 |\n+---+");
    }

    fn plan_of_nothing(plan: &str) -> bool {
        plan.contains("EmptyExec") && !plan.contains(".parquet")
    }

    #[tokio::test]
    async fn a_file_whose_rows_are_past_its_truncated_time_bound_is_still_read() {
        let (_dir, table) = lake().await;
        let ctx = session(&table).await;
        // Delta keeps the file's bounds as 10:00:00.000; the row is at .000500, after the
        // filter's .000400: a bound used as kept would skip the file and lose the row.
        let sql = "SELECT value FROM indexed \
                   WHERE time >= TIMESTAMP '2026-11-02T10:00:00.000400Z' ORDER BY value";
        assert_eq!(
            rows(&ctx, sql).await,
            "+-------+\n| value |\n+-------+\n| 6.0   |\n+-------+"
        );
        // The two vm-scalability files end at 00:00:02: not read.
        let plan = plan(&ctx, sql).await;
        assert!(plan.contains("testcase=stream/"), "{plan}");
        assert!(!plan.contains("testcase=vm-scalability/"), "{plan}");
        let later =
            "SELECT count(*) AS n FROM indexed WHERE time > TIMESTAMP '2026-11-02T10:00:00.002Z'";
        assert_eq!(rows(&ctx, later).await, "+---+\n| n |\n+---+\n| 0 |\n+---+");
    }

    #[tokio::test]
    async fn a_table_with_deletion_vectors_is_served_by_delta_rs() {
        use deltalake::kernel::{DataType as DeltaType, StructField};
        let table = DeltaTable::new_in_memory()
            .create()
            .with_columns(vec![StructField::new("id", DeltaType::INTEGER, false)])
            .with_configuration_property(
                deltalake::TableProperty::EnableDeletionVectors,
                Some("true"),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let delta = table
            .table_provider()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let served = index_or_fallback(METRICS_TABLE, &table, Arc::clone(&delta))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(Arc::ptr_eq(&served, &delta));
        assert_eq!(unsupported_feature(&table), Some("deletion vectors"));
    }
}
