//! The writer's lake: the `metrics`, `failures`, `mentions`, `links` and `reports` Delta
//! tables, with the Kafka offsets each commit covers recorded as Delta `txn` actions (one
//! application id per topic partition, the kafka-delta-ingest pattern). The lake, not Kafka, is the source of truth
//! for progress.

use crate::format::Format;
use crate::report_rows;
use crate::{LakeError, LakeUrl};
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::datafusion::prelude::{SessionContext, col, lit};
use deltalake::delta_datafusion::DeltaSessionContext;
use deltalake::kernel::StructType;
use deltalake::kernel::Transaction;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::parquet::basic::{Compression, Encoding, ZstdLevel};
use deltalake::parquet::file::metadata::SortingColumn;
use deltalake::parquet::file::properties::{WriterProperties, WriterPropertiesBuilder};
use deltalake::parquet::schema::types::ColumnPath;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use lkplake_schemas::tables::{
    FAILURES, FAILURES_TABLE, FORMAT_3_OBSERVATIONS, LINKS, LINKS_TABLE, MENTIONS, MENTIONS_TABLE,
    METRICS, METRICS_TABLE, OBSERVATIONS, PARTITION_COLUMNS, REPORTS, REPORTS_TABLE,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::num::NonZeroU64;
use std::sync::Arc;

/// One of the transformer's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// `metrics`: the measurements.
    Metrics,
    /// `failures`: the `fail:runs` rows.
    Failures,
    /// `mentions`: replies that cite a report.
    Mentions,
    /// `links`: statements of later mail about a report, its culprit or its fix.
    Links,
    /// `reports`: one row per report test.
    Reports,
}

/// One row of `reports` as the transformer's deduplication sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTest {
    /// The report it belongs to.
    pub report_key: String,
    /// Its place among the report's tests in the lake.
    pub test_index: u32,
    /// Whether the stored copy was quoted in a reply.
    pub quoted: bool,
    /// The test's testcase.
    pub testcase: String,
    /// Its machine (tbox group).
    pub machine: String,
    /// Its parameters in canonical `k=v,...` form.
    pub params: String,
}

impl Table {
    /// Every table, in commit order. `reports` is last: its keys are what a restarted
    /// transformer deduplicates against, so a report is there only once all its rows are.
    pub const ALL: [Table; 5] = [
        Table::Metrics,
        Table::Failures,
        Table::Mentions,
        Table::Links,
        Table::Reports,
    ];

    /// The table's name in the lake.
    pub fn name(self) -> &'static str {
        match self {
            Self::Metrics => METRICS_TABLE,
            Self::Failures => FAILURES_TABLE,
            Self::Mentions => MENTIONS_TABLE,
            Self::Links => LINKS_TABLE,
            Self::Reports => REPORTS_TABLE,
        }
    }

    /// The table's schema in a lake of `format`.
    pub fn schema(self, format: Format) -> SchemaRef {
        match self {
            Self::Metrics => match format {
                Format::One => METRICS.clone(),
                Format::Two => OBSERVATIONS.clone(),
                Format::Three => FORMAT_3_OBSERVATIONS.clone(),
            },
            Self::Failures => FAILURES.clone(),
            Self::Mentions => MENTIONS.clone(),
            Self::Links => LINKS.clone(),
            Self::Reports => REPORTS.clone(),
        }
    }

    /// `mentions` and `links` are small and have no testcase or machine of their own to
    /// partition by.
    fn partition_columns(self) -> &'static [&'static str] {
        match self {
            Self::Mentions | Self::Links => &[],
            _ => &PARTITION_COLUMNS,
        }
    }

    /// The table's position in [`Table::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// How far a Kafka partition's messages are committed, per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    last: [Option<i64>; Table::ALL.len()],
}

impl Progress {
    /// Every table committed up to `offset`.
    pub fn up_to(offset: i64) -> Self {
        Self {
            last: [Some(offset); Table::ALL.len()],
        }
    }

    /// Last offset committed to `table`, if any.
    pub fn of(self, table: Table) -> Option<i64> {
        self.last[table.index()]
    }

    /// Records `offset` as the last one committed to `table`.
    pub fn set(&mut self, table: Table, offset: Option<i64>) {
        self.last[table.index()] = offset;
    }

    /// Whether `table` already holds what the message at `offset` puts there.
    pub fn covers(self, table: Table, offset: i64) -> bool {
        self.of(table).is_some_and(|last| offset <= last)
    }

    /// The first offset not yet in every table. A table new to an existing lake has no
    /// progress, so a transformer back-fills it from the oldest message Kafka still holds.
    pub fn resume_at(self) -> i64 {
        self.last
            .iter()
            .map(|l| l.unwrap_or(-1))
            .min()
            .unwrap_or(-1)
            + 1
    }
}

/// The Delta application id recording a partition's progress.
pub fn app_id(topic: &str, partition: i32) -> String {
    format!("lkplake-transform:{topic}:{partition}")
}

/// The transformer's tables, opened for writing.
#[derive(Debug)]
pub struct Lake {
    url: LakeUrl,
    /// The lake's format: its `metrics` table's.
    format: Format,
    /// Indexed by [`Table`], in [`Table::ALL`] order.
    tables: Vec<DeltaTable>,
}

/// Files are cut at this size when a partition is rewritten.
const TARGET_FILE_SIZE: NonZeroU64 = NonZeroU64::new(128 << 20).unwrap();

/// Rows are sorted by series within a file, so row groups of 128k rows let row-group statistics
/// skip whole groups before the page index is consulted.
fn writer_properties() -> WriterProperties {
    writer_properties_builder().build()
}

/// Pages keep Parquet's default of at most 20,000 rows. Pages of 4,096 rows, sized for one
/// series (a few hundred rows), made a one-series query decode a fifth of the rows, but its time
/// moved within noise (5.97 against 6.09 ms: the scan is a small part of it) while `metrics`
/// grew from 8.94 to 10.03 bytes a row (BENCHMARKS.md, "Pages sized for one series").
fn writer_properties_builder() -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(6).unwrap_or_default()))
        .set_max_row_group_row_count(Some(1 << 17))
}

/// The order `lkplake compact` writes a `metrics` partition in: series, then time, then the
/// rest, so that one file's rows are in one total order.
fn compaction_order(format: Format) -> &'static [&'static str] {
    match format {
        Format::One => &["metric", "params", "time", "commit", "role", "report_key"],
        Format::Two => &["metric", "params", "time", "report_key", "role"],
        // `report_ref` is in time order within a series; the report rows (no metric) come last.
        Format::Three => &["metric", "params", "report_ref", "role"],
    }
}

/// The writer properties of `metrics` files in `format`. Format 2's mantissas are integers
/// of a few significant digits that vary from report to report: split into byte streams they
/// compress to about half of what a dictionary of them takes (BENCHMARKS.md, "Lake format 2
/// measured offline"). Format 3's `report_ref` rises slowly along a series: stored as
/// differences.
fn metrics_writer_properties(format: Format) -> WriterPropertiesBuilder {
    let builder = writer_properties_builder();
    if format == Format::One {
        return builder;
    }
    let encoded = |builder: WriterPropertiesBuilder, (column, encoding): (&str, Encoding)| {
        let path = ColumnPath::from(column);
        builder
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, encoding)
    };
    let builder = [
        ("base_mantissa", Encoding::BYTE_STREAM_SPLIT),
        ("head_mantissa", Encoding::BYTE_STREAM_SPLIT),
    ]
    .into_iter()
    .fold(builder, encoded);
    if format == Format::Two {
        return builder;
    }
    encoded(builder, ("report_ref", Encoding::DELTA_BINARY_PACKED))
}

/// The writer properties of a compacted `metrics` file, whose footer records the order its rows
/// are in ([`compaction_order`]), for engines that use a file's declared order (DuckDB,
/// DataFusion's listing tables, Spark). The partition columns are not in the file, so the
/// column indices are those of the other columns.
pub(crate) fn metrics_sorted_writer_properties(format: Format) -> WriterProperties {
    let schema = Table::Metrics.schema(format);
    let file_columns: Vec<(i32, &str)> = (0..)
        .zip(
            schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .filter(|name| !PARTITION_COLUMNS.contains(name)),
        )
        .collect();
    let sorting = compaction_order(format)
        .iter()
        .filter_map(|name| file_columns.iter().find(|(_, c)| c == name))
        .map(|&(column_idx, _)| SortingColumn {
            column_idx,
            descending: false,
            nulls_first: false,
        })
        .collect();
    metrics_writer_properties(format)
        .set_sorting_columns(Some(sorting))
        .build()
}

/// The SQL name compaction gives format 3's stored rows.
const STORED: &str = "lkplake_stored_observations";

/// A `metrics` partition: (testcase, machine).
pub(crate) type Partition = (String, String);

/// The filter that keeps one partition's rows.
pub(crate) fn in_partition(
    (testcase, machine): &Partition,
) -> deltalake::datafusion::prelude::Expr {
    col("testcase")
        .eq(lit(testcase.as_str()))
        .and(col("machine").eq(lit(machine.as_str())))
}

/// The number of live files of each partition of a table.
pub(crate) fn files_per_partition(
    table: &DeltaTable,
    name: &'static str,
) -> Result<HashMap<Partition, usize>, LakeError> {
    let state = table.snapshot().map_err(|source| LakeError::Delta {
        table: name,
        source,
    })?;
    let mut counts = HashMap::new();
    for file in state.log_data().into_iter() {
        let values = file.partition_values_map();
        let value = |key: &str| values.get(key).cloned().flatten().unwrap_or_default();
        *counts
            .entry((value("testcase"), value("machine")))
            .or_insert(0) += 1;
    }
    Ok(counts)
}

/// The partitions of a format-3 `metrics` with rows a transformer appended (`report_ref`
/// null), which compaction numbers even when they are in one file. A file without statistics
/// counts as holding some.
fn unnumbered_partitions(table: &DeltaTable) -> Result<HashSet<Partition>, LakeError> {
    use deltalake::arrow::array::{Array, AsArray};
    use deltalake::arrow::datatypes::{DataType, Int64Type};
    let delta = LakeError::delta(METRICS_TABLE);
    let actions = table
        .snapshot()
        .map_err(delta)?
        .add_actions_table(true)
        .map_err(delta)?;
    let column = |name: &str| {
        actions
            .column_by_name(name)
            .map(|c| strings(Table::Metrics, c))
            .transpose()
    };
    let (Some(testcases), Some(machines)) =
        (column("partition.testcase")?, column("partition.machine")?)
    else {
        return Ok(HashSet::new());
    };
    let nulls = actions
        .column_by_name("null_count.report_ref")
        .map(|c| deltalake::arrow::compute::cast(c, &DataType::Int64))
        .transpose()
        .map_err(|e| LakeError::query(METRICS_TABLE)(e.into()))?;
    let nulls = nulls.as_ref().map(|c| c.as_primitive::<Int64Type>());
    Ok((0..actions.num_rows())
        .filter(|&i| nulls.is_none_or(|n| n.is_null(i) || n.value(i) > 0))
        .filter_map(|i| Some((testcases[i].clone()?, machines[i].clone()?)))
        .collect())
}

/// Appends refused in a row because a compaction rewrote files of the table meanwhile, before
/// the refusal is returned (each one means a compaction commit landed: they are few).
const MAX_REWRITE_RETRIES: u32 = 20;

/// Rewrites one `metrics` partition sorted by series and time, in one Delta commit that replaces
/// exactly that partition. A transformer appending to the partition meanwhile makes the commit
/// fail with a conflict instead of losing the appended rows; the rewrite's removals are data
/// changes to Delta, so a transformer whose append raced it retries (`is_commit_conflict`).
async fn sort_partition(
    table: DeltaTable,
    format: Format,
    partition: &Partition,
) -> Result<DeltaTable, LakeError> {
    let query = LakeError::query(METRICS_TABLE);
    let in_partition = in_partition(partition);
    let provider = table.table_provider().await.map_err(query)?;
    // Sorted here and handed over as batches: given a plan, the writer's optimizer drops a sort
    // that no operator above it requires.
    let ctx = SessionContext::new();
    let sorted = if format == Format::Three {
        // Format 2's rows again, numbered afresh with the rows appended since.
        ctx.register_table(STORED, provider).map_err(query)?;
        let rows = ctx
            .sql(&report_rows::observations_sql(STORED, None, true, false))
            .await
            .and_then(|rows| rows.filter(in_partition.clone()))
            .map_err(query)?
            .collect()
            .await
            .map_err(query)?;
        // Read once: the numbering's SQL reads its input more than once.
        let rows = ctx.read_batches(rows).map_err(query)?;
        report_rows::reference(&ctx, rows).await.map_err(query)?
    } else {
        ctx.read_table(provider)
            .map_err(query)?
            .filter(in_partition.clone())
            .map_err(query)?
            .sort(
                compaction_order(format)
                    .iter()
                    .map(|&c| col(c).sort(true, false))
                    .collect(),
            )
            .map_err(query)?
            .collect()
            .await
            .map_err(query)?
    };
    // delta-rs' own session, with one partition: the writer interleaves the batches of
    // parallel partitions.
    let overrides = HashMap::from([(
        "datafusion.execution.target_partitions".to_owned(),
        "1".to_owned(),
    )]);
    let delta = DeltaSessionContext::new_with_session_overrides(&overrides).map_err(|source| {
        LakeError::Delta {
            table: METRICS_TABLE,
            source,
        }
    })?;
    lkplake_faults::point(lkplake_faults::COMPACT_BEFORE_COMMIT);
    table
        .write(sorted)
        .with_session_state(Arc::new(delta.state()))
        .with_save_mode(SaveMode::Overwrite)
        .with_replace_where(in_partition)
        .with_partition_columns(PARTITION_COLUMNS)
        .with_writer_properties(metrics_sorted_writer_properties(format))
        .with_target_file_size(Some(TARGET_FILE_SIZE))
        .await
        .map_err(|source| LakeError::Delta {
            table: METRICS_TABLE,
            source,
        })
}

/// A text column of a query on `which`, whatever string type DataFusion returned it as
/// (`Utf8View`, `Utf8`, or dictionary-encoded for a partition column).
fn strings(
    which: Table,
    column: &deltalake::arrow::array::ArrayRef,
) -> Result<Vec<Option<String>>, LakeError> {
    use deltalake::arrow::array::AsArray;
    use deltalake::arrow::datatypes::DataType;
    let text = deltalake::arrow::compute::cast(column, &DataType::Utf8)
        .map_err(|e| LakeError::query(which.name())(e.into()))?;
    Ok(text
        .as_string::<i32>()
        .iter()
        .map(|v| v.map(str::to_owned))
        .collect())
}

/// Opens a table of the lake with the format it records, creating it with its schema and
/// partitioning in `format` when missing.
async fn open_table(
    lake: &LakeUrl,
    which: Table,
    format: Format,
) -> Result<(DeltaTable, Format), LakeError> {
    let name = which.name();
    if let Some(path) = lake.local_table(name) {
        // delta-rs' local store writes files but does not create the table's directory.
        tokio::fs::create_dir_all(&path)
            .await
            .map_err(|source| LakeError::Io { path, source })?;
    }
    let table = DeltaTableBuilder::from_url(lake.table(name)?)
        .and_then(DeltaTableBuilder::build)
        .map_err(LakeError::delta(name))?;
    // Wrapped before it is loaded, so that the table is read once.
    #[cfg(feature = "fault-injection")]
    let table = crate::meeting::hold_puts(table, name);
    let mut table = table;
    match table.load().await {
        Ok(()) => {
            let recorded = crate::format::check(lake, name, &table)?;
            return Ok((table, recorded));
        }
        // A new table: created with the schema, partitioning and format.
        Err(DeltaTableError::NotATable(_)) => {}
        Err(e) => return Err(LakeError::delta(name)(e)),
    }
    let schema: StructType = which
        .schema(format)
        .as_ref()
        .try_into_kernel()
        .map_err(|e| LakeError::delta(name)(DeltaTableError::from(e)))?;
    // Delta knows nothing of `lkplake.format`: delta-rs refuses such a key unless told not to,
    // which only its create operation can be.
    let table = table
        .create()
        .with_columns(schema.fields().cloned())
        .with_partition_columns(which.partition_columns().iter().copied())
        .with_configuration(format.configuration())
        .with_raise_if_key_not_exists(false)
        .with_save_mode(SaveMode::Ignore)
        .await
        .map_err(LakeError::delta(name))?;
    // Another writer may have created it first (`SaveMode::Ignore`): its format stands.
    let recorded = crate::format::check(lake, name, &table)?;
    Ok((table, recorded))
}

/// One batch per table, in [`Table::ALL`] order, for one commit.
#[derive(Debug)]
pub struct Batches {
    /// Rows of `metrics`.
    pub metrics: RecordBatch,
    /// Rows of `failures`.
    pub failures: RecordBatch,
    /// Rows of `mentions`.
    pub mentions: RecordBatch,
    /// Rows of `links`.
    pub links: RecordBatch,
    /// Rows of `reports`.
    pub reports: RecordBatch,
}

impl Lake {
    /// Opens the lake at `url`, creating its tables when missing (a new lake in
    /// [`Format::NEW_LAKES`]).
    pub async fn open(url: &LakeUrl) -> Result<Self, LakeError> {
        Self::open_in(url, Format::NEW_LAKES).await
    }

    /// Opens the lake at `url`, creating its tables when missing: a new lake in `format`, a
    /// new table of an existing lake in the lake's.
    pub async fn open_in(url: &LakeUrl, format: Format) -> Result<Self, LakeError> {
        let mut tables = Vec::with_capacity(Table::ALL.len());
        let mut format = format;
        for table in Table::ALL {
            // `metrics` first: its format is the lake's.
            let (opened, recorded) = open_table(url, table, format).await?;
            if table == Table::Metrics {
                format = recorded;
            }
            tables.push(opened);
        }
        Ok(Self {
            url: url.clone(),
            format,
            tables,
        })
    }

    /// The lake's format: how its `metrics` rows are laid out.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Takes `metrics` rewritten to `format` ([`Lake::upgrade`]).
    pub(crate) fn set_metrics(&mut self, table: DeltaTable, format: Format) {
        *self.table_mut(Table::Metrics) = table;
        self.format = format;
    }

    pub(crate) fn table(&self, which: Table) -> &DeltaTable {
        &self.tables[which.index()]
    }

    fn table_mut(&mut self, which: Table) -> &mut DeltaTable {
        &mut self.tables[which.index()]
    }

    /// Where the lake is.
    pub fn url(&self) -> &LakeUrl {
        &self.url
    }

    /// Reloads every table to its latest version (another writer may have committed).
    pub async fn refresh(&mut self) -> Result<(), LakeError> {
        for (which, table) in Table::ALL.into_iter().zip(&mut self.tables) {
            table
                .update_state()
                .await
                .map_err(LakeError::delta(which.name()))?;
            crate::format::check(&self.url, which.name(), table)?;
        }
        // A lake rewritten to a newer format meanwhile: write no more rows of this one.
        self.check_format()
    }

    /// Whether `metrics`, as loaded, is still in the format the lake was opened in.
    fn check_format(&self) -> Result<(), LakeError> {
        let recorded = crate::format::check(&self.url, METRICS_TABLE, self.table(Table::Metrics))?;
        if recorded == self.format {
            return Ok(());
        }
        Err(LakeError::FormatChanged {
            lake: self.url.to_string(),
            opened: self.format,
            now: recorded,
        })
    }

    /// Progress recorded for each partition of `topic`.
    pub async fn progress(
        &self,
        topic: &str,
        partitions: &[i32],
    ) -> Result<HashMap<i32, Progress>, LakeError> {
        let tables: Vec<(Table, &DeltaTable)> = Table::ALL.into_iter().zip(&self.tables).collect();
        progress_in(&tables, topic, partitions).await
    }

    /// Runs `sql` over one table, as loaded.
    async fn select(&self, which: Table, sql: &str) -> Result<Vec<RecordBatch>, LakeError> {
        let q = LakeError::query(which.name());
        let ctx = SessionContext::new();
        let provider = self.table(which).table_provider().await.map_err(q)?;
        ctx.register_table(which.name(), provider).map_err(q)?;
        ctx.sql(sql).await.map_err(q)?.collect().await.map_err(q)
    }

    /// Every test row of `reports`: which report and test it is, and whether the copy stored
    /// is a quoted one. The transformer keeps every test of a report key that the lake does
    /// not hold yet, so it needs the tests, not only the keys.
    pub async fn report_tests(&self) -> Result<Vec<StoredTest>, LakeError> {
        use deltalake::arrow::array::AsArray;
        use deltalake::arrow::datatypes::Int64Type;
        // Delta has no unsigned integers: the column reads back as a signed one.
        let sql = "SELECT report_key, CAST(test_index AS BIGINT), quoted, testcase, machine, params \
                   FROM reports";
        let mut out = Vec::new();
        for batch in self.select(Table::Reports, sql).await? {
            let (Some(index), Some(quoted)) = (
                batch.column(1).as_primitive_opt::<Int64Type>(),
                batch.column(2).as_boolean_opt(),
            ) else {
                let found = deltalake::datafusion::error::DataFusionError::Internal(format!(
                    "reports read back as {:?}",
                    batch.schema()
                ));
                return Err(LakeError::query(Table::Reports.name())(found));
            };
            let [keys, testcases, machines, params] =
                [0, 3, 4, 5].map(|c| strings(Table::Reports, batch.column(c)));
            let (keys, testcases, machines, params) = (keys?, testcases?, machines?, params?);
            let rows = keys.into_iter().zip(testcases).zip(machines).zip(params);
            for (i, (((key, testcase), machine), params)) in rows.enumerate() {
                // Every one of these columns is declared non-null.
                let (Some(report_key), Some(testcase), Some(machine), Some(params)) =
                    (key, testcase, machine, params)
                else {
                    continue;
                };
                out.push(StoredTest {
                    report_key,
                    test_index: u32::try_from(index.value(i)).unwrap_or(u32::MAX),
                    quoted: quoted.value(i),
                    testcase,
                    machine,
                    params,
                });
            }
        }
        Ok(out)
    }

    /// Mention keys in the lake.
    pub async fn mention_keys(&self) -> Result<HashSet<String>, LakeError> {
        self.keys(Table::Mentions, "SELECT DISTINCT mention_key FROM mentions")
            .await
    }

    /// Link keys in the lake.
    pub async fn link_keys(&self) -> Result<HashSet<String>, LakeError> {
        self.keys(Table::Links, "SELECT DISTINCT link_key FROM links")
            .await
    }

    /// The strings of the first column `sql` selects from `table`.
    async fn keys(&self, table: Table, sql: &str) -> Result<HashSet<String>, LakeError> {
        let mut out = HashSet::new();
        for batch in self.select(table, sql).await? {
            out.extend(strings(table, batch.column(0))?.into_iter().flatten());
        }
        Ok(out)
    }

    /// Deletes every row of the given reports from the tables that hold report rows (an
    /// original replacing a quoted copy).
    pub async fn delete_reports(&mut self, keys: &[String]) -> Result<(), LakeError> {
        if keys.is_empty() {
            return Ok(());
        }
        // Report keys are hex digests: safe to inline.
        let list = keys
            .iter()
            .map(|k| format!("'{}'", k.replace('\'', "")))
            .collect::<Vec<_>>()
            .join(", ");
        let predicate = format!("report_key IN ({list})");
        // Format 3's compacted observation rows name their report by number only.
        let referenced = match self.format {
            Format::Three => self.referencing_rows(&list).await?,
            _ => None,
        };
        for which in [Table::Metrics, Table::Failures, Table::Reports] {
            let name = which.name();
            let predicate = match (&referenced, which) {
                (Some(rows), Table::Metrics) => format!("{predicate} OR {rows}"),
                _ => predicate.clone(),
            };
            let table = self.table_mut(which);
            let (updated, _) = table
                .clone()
                .delete()
                .with_predicate(predicate)
                .await
                .map_err(|source| LakeError::Delta {
                    table: name,
                    source,
                })?;
            *table = updated;
        }
        Ok(())
    }

    /// In a format-3 lake, the predicate that picks the compacted observation rows of the
    /// reports whose keys `list` quotes: each partition's numbers of their report rows.
    async fn referencing_rows(&self, list: &str) -> Result<Option<String>, LakeError> {
        use deltalake::arrow::array::AsArray;
        use deltalake::arrow::datatypes::Int32Type;
        let sql = format!(
            "SELECT testcase, machine, report_ref FROM {METRICS_TABLE} \
             WHERE metric IS NULL AND report_ref IS NOT NULL AND report_key IN ({list})"
        );
        let mut refs: BTreeMap<(String, String), Vec<i32>> = BTreeMap::new();
        for batch in self.select(Table::Metrics, &sql).await? {
            let [testcases, machines] = [0, 1].map(|c| strings(Table::Metrics, batch.column(c)));
            let (testcases, machines) = (testcases?, machines?);
            let Some(numbers) = batch.column(2).as_primitive_opt::<Int32Type>() else {
                let found = deltalake::datafusion::error::DataFusionError::Internal(format!(
                    "report_ref read back as {}",
                    batch.column(2).data_type()
                ));
                return Err(LakeError::query(METRICS_TABLE)(found));
            };
            for ((testcase, machine), number) in testcases.into_iter().zip(machines).zip(numbers) {
                if let (Some(t), Some(m), Some(n)) = (testcase, machine, number) {
                    refs.entry((t, m)).or_default().push(n);
                }
            }
        }
        let quoted = |text: &str| format!("'{}'", text.replace('\'', "''"));
        let clauses: Vec<String> = refs
            .iter()
            .map(|((testcase, machine), numbers)| {
                let numbers: Vec<String> = numbers.iter().map(i32::to_string).collect();
                format!(
                    "(testcase = {} AND machine = {} AND report_ref IN ({}))",
                    quoted(testcase),
                    quoted(machine),
                    numbers.join(", ")
                )
            })
            .collect();
        Ok((!clauses.is_empty()).then(|| clauses.join(" OR ")))
    }

    /// Appends a batch to one table in one Delta commit that also records `txns`.
    async fn append(
        &mut self,
        table: Table,
        batch: RecordBatch,
        txns: Vec<Transaction>,
    ) -> Result<(), LakeError> {
        if batch.num_rows() == 0 && txns.is_empty() {
            return Ok(());
        }
        let format = self.format;
        let target = self.table_mut(table);
        let mut rewrites = 0;
        loop {
            let written = target
                .clone()
                .write(vec![batch.clone()])
                .with_save_mode(SaveMode::Append)
                .with_partition_columns(table.partition_columns().iter().copied())
                .with_writer_properties(if table == Table::Metrics {
                    metrics_writer_properties(format).build()
                } else {
                    writer_properties()
                })
                .with_commit_properties(
                    CommitProperties::default().with_application_transactions(txns.clone()),
                )
                .await
                .map_err(LakeError::delta(table.name()));
            match written {
                Ok(updated) => {
                    *target = updated;
                    return Ok(());
                }
                // Delta counts every file of the snapshot as read by an append, so a
                // compaction that rewrote files meanwhile refuses it. The append read none of
                // them: write it again on the new version, here rather than in the caller, so
                // the window a compaction can win stays one Parquet write long.
                Err(e) if e.is_concurrent_rewrite() && rewrites < MAX_REWRITE_RETRIES => {
                    rewrites += 1;
                    tracing::info!(
                        table = table.name(),
                        rewrites,
                        "a compaction rewrote files during the append: appending again"
                    );
                    target
                        .update_state()
                        .await
                        .map_err(LakeError::delta(table.name()))?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Commits normalized batches, one Delta commit per table in [`Table::ALL`] order, each
    /// recording the partition offsets it covers. Delta has no transaction over several
    /// tables; each table's `txn` records its own progress ([`Progress`]), so after a crash
    /// between two commits the replay writes only the tables that are behind.
    pub async fn commit(
        &mut self,
        batches: Batches,
        txns: &[Transaction],
    ) -> Result<(), LakeError> {
        let Batches {
            metrics,
            failures,
            mentions,
            links,
            reports,
        } = batches;
        for (table, batch) in Table::ALL
            .into_iter()
            .zip([metrics, failures, mentions, links, reports])
        {
            if table != Table::Metrics {
                lkplake_faults::point(lkplake_faults::BETWEEN_TABLE_COMMITS);
            }
            self.append(table, batch, txns.to_vec()).await?;
        }
        Ok(())
    }

    /// Compacts the lake and removes files no longer referenced.
    ///
    /// Each `metrics` partition (testcase, machine) holding several files is rewritten as one
    /// file sorted by series and time. Bin-packing alone would concatenate per-flush files, each
    /// sorted on its own, and a series would then be spread over every page of the result; sorted,
    /// the Parquet page index narrows a one-series query to the few pages holding it. The other
    /// tables are small per report and only bin-packed. `resort` rewrites single-file partitions too.
    /// In format 3 a partition is also rewritten when a file of it holds rows a transformer
    /// appended, and is written numbered by report test, in `report_ref` order within a series
    /// ([`crate::report_rows`]).
    pub async fn compact(&mut self, resort: bool) -> Result<CompactSummary, LakeError> {
        let mut summary = CompactSummary::default();
        let appended = match self.format {
            Format::Three => unnumbered_partitions(self.table(Table::Metrics))?,
            _ => HashSet::new(),
        };
        let scattered: Vec<(Partition, usize)> =
            files_per_partition(self.table(Table::Metrics), METRICS_TABLE)?
                .into_iter()
                .filter(|(partition, files)| resort || *files > 1 || appended.contains(partition))
                .collect();
        let mut sorted = Vec::new();
        for (partition, files) in &scattered {
            let metrics = self.table(Table::Metrics).clone();
            match sort_partition(metrics, self.format, partition).await {
                Ok(updated) => {
                    *self.table_mut(Table::Metrics) = updated;
                    summary.files_removed += *files as u64;
                    summary.partitions_sorted += 1;
                    sorted.push(partition);
                }
                // A transformer appended to the partition while it was rewritten: its rows
                // stay, the partition is left as it is for the next compaction.
                Err(e) if e.is_commit_conflict() => {
                    tracing::warn!(testcase = %partition.0, machine = %partition.1, "written to while being compacted: left for the next compaction ({e})");
                    summary.partitions_skipped += 1;
                    self.table_mut(Table::Metrics)
                        .update_state()
                        .await
                        .map_err(LakeError::delta(METRICS_TABLE))?;
                    // An upgrade's commit conflicts too: sort no partition of the new layout
                    // in the old one's order.
                    self.check_format()?;
                }
                Err(e) => return Err(e),
            }
        }
        if !sorted.is_empty() {
            let after = files_per_partition(self.table(Table::Metrics), METRICS_TABLE)?;
            summary.files_added += sorted
                .iter()
                .filter_map(|partition| after.get(*partition))
                .sum::<usize>() as u64;
        }
        // The other tables are small per report: bin-packed only.
        for which in [
            Table::Failures,
            Table::Mentions,
            Table::Links,
            Table::Reports,
        ] {
            let (optimized, metrics) = self
                .table(which)
                .clone()
                .optimize()
                .with_writer_properties(writer_properties())
                .with_target_size(TARGET_FILE_SIZE)
                .await
                .map_err(LakeError::delta(which.name()))?;
            summary.files_removed += metrics.num_files_removed;
            summary.files_added += metrics.num_files_added;
            *self.table_mut(which) = optimized;
        }
        for (which, table) in Table::ALL.into_iter().zip(&mut self.tables) {
            let name = which.name();
            // Files replaced by the compaction stay readable for a week, so queries that
            // started on the old version finish; vacuum removes only what is older.
            let (vacuumed, vacuum) =
                table
                    .clone()
                    .vacuum()
                    .await
                    .map_err(|source| LakeError::Delta {
                        table: name,
                        source,
                    })?;
            summary.files_vacuumed += vacuum.files_deleted.len() as u64;
            *table = vacuumed;
        }
        Ok(summary)
    }
}

/// The progress each partition of `topic` has recorded in the given tables, as loaded.
pub(crate) async fn progress_in(
    tables: &[(Table, &DeltaTable)],
    topic: &str,
    partitions: &[i32],
) -> Result<HashMap<i32, Progress>, LakeError> {
    let mut out = HashMap::new();
    for &partition in partitions {
        let id = app_id(topic, partition);
        let mut progress = Progress::default();
        for (which, table) in tables {
            progress.set(*which, txn_version(table, which.name(), &id).await?);
        }
        out.insert(partition, progress);
    }
    Ok(out)
}

async fn txn_version(
    table: &DeltaTable,
    name: &'static str,
    app_id: &str,
) -> Result<Option<i64>, LakeError> {
    let snapshot = table.snapshot().map_err(|source| LakeError::Delta {
        table: name,
        source,
    })?;
    snapshot
        .transaction_version(table.log_store().as_ref(), app_id)
        .await
        .map_err(|source| LakeError::Delta {
            table: name,
            source,
        })
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactSummary {
    /// `metrics` partitions rewritten sorted.
    pub partitions_sorted: u64,
    /// `metrics` partitions a transformer wrote to while they were rewritten, left as they
    /// were (their rewrite would have dropped the new rows, so Delta refused it).
    pub partitions_skipped: u64,
    /// Files the rewrite replaced.
    pub files_removed: u64,
    /// Files the rewrite wrote.
    pub files_added: u64,
    /// Unreferenced files past the retention, deleted.
    pub files_vacuumed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{Array, AsArray};
    use deltalake::arrow::datatypes::TimestampMicrosecondType;
    use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use deltalake::parquet::file::metadata::ParquetMetaDataReader;

    /// 2026-11-02T00:00:00Z.
    const DAY: i64 = 1_793_577_600_000_000;

    /// 6,000 rows a second apart from `start`, alternating between two metrics, `b` first.
    fn rows(start: i64) -> Vec<(&'static str, i64, f64)> {
        (0..6_000)
            .map(|i| {
                let metric = if i % 2 == 0 { "b.ops" } else { "a.ops" };
                (metric, start + i * 1_000_000, 0.0)
            })
            .collect()
    }

    /// The one live `metrics` file of a compacted lake.
    #[allow(
        clippy::disallowed_methods,
        reason = "a test reading back the file it had written, outside any runtime's work"
    )]
    fn only_file(lake: &Lake) -> std::fs::File {
        let uris: Vec<String> = lake
            .table(Table::Metrics)
            .get_file_uris()
            .unwrap_or_else(|e| panic!("{e}"))
            .collect();
        assert_eq!(uris.len(), 1, "{uris:?}");
        let path = uris[0].strip_prefix("file://").unwrap_or(&uris[0]);
        std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[tokio::test]
    async fn compaction_writes_series_order_and_records_it_in_the_footer() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mut lake = Lake::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
        // Two flushes into one partition, the later hours first.
        for start in [DAY + 6_000_000_000, DAY] {
            let batches = crate::testing::metrics("stress-ng", "lkp-csl-2sp7", &rows(start));
            lake.commit(batches, &[])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let summary = lake.compact(false).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary.partitions_sorted, 1);
        let file = only_file(&lake);

        let footer = ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .unwrap_or_else(|e| panic!("{e}"));
        let columns = footer.file_metadata().schema_descr();
        assert_eq!(footer.num_row_groups(), 1);
        let group = footer.row_group(0);
        assert_eq!(group.num_rows(), 12_000);
        let order: Vec<String> = group
            .sorting_columns()
            .unwrap_or_else(|| panic!("no sorting columns in the footer"))
            .iter()
            .map(|c| {
                assert!(!c.descending && !c.nulls_first);
                columns.column(c.column_idx as usize).name().to_owned()
            })
            .collect();
        assert_eq!(
            order,
            ["metric", "params", "time", "commit", "role", "report_key"]
        );

        // The rows: `a.ops` at every odd second of both flushes, in time order, then `b.ops`.
        let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .unwrap_or_else(|e| panic!("{e}"))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}"));
        let mut read = Vec::new();
        for batch in &batches {
            let metric = deltalake::arrow::compute::cast(
                batch
                    .column_by_name("metric")
                    .unwrap_or_else(|| panic!("no metric")),
                &deltalake::arrow::datatypes::DataType::Utf8,
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let time = batch
                .column_by_name("time")
                .unwrap_or_else(|| panic!("no time"))
                .as_primitive::<TimestampMicrosecondType>();
            for i in 0..batch.num_rows() {
                assert!(metric.is_valid(i));
                read.push((metric.as_string::<i32>().value(i).to_owned(), time.value(i)));
            }
        }
        let expected: Vec<(String, i64)> = ["a.ops", "b.ops"]
            .into_iter()
            .flat_map(|metric| {
                let first = i64::from(metric == "a.ops");
                (0..6_000).map(move |i| (metric.to_owned(), DAY + (2 * i + first) * 1_000_000))
            })
            .collect();
        assert_eq!(read, expected);
    }
}
