//! The writer's lake: the `metrics` and `reports` Delta tables, with the Kafka offsets each
//! commit covers recorded as Delta `txn` actions (one application id per topic partition, the
//! kafka-delta-ingest pattern). The lake, not Kafka, is the source of truth for progress.

use crate::{LakeError, LakeUrl};
use deltalake::DeltaTable;
use deltalake::arrow::array::RecordBatch;
use deltalake::datafusion::prelude::{SessionContext, col, lit};
use deltalake::delta_datafusion::DeltaSessionContext;
use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::protocol::SaveMode;
use lkplake_schemas::tables::{METRICS, METRICS_TABLE, PARTITION_COLUMNS, REPORTS, REPORTS_TABLE};
use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;

/// Which table a Kafka partition's progress is recorded in, and how far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Last offset committed to `metrics`, if any.
    pub metrics: Option<i64>,
    /// Last offset committed to `reports`, if any.
    pub reports: Option<i64>,
}

impl Progress {
    /// The first offset not yet in both tables.
    pub fn resume_at(self) -> i64 {
        self.metrics.unwrap_or(-1).min(self.reports.unwrap_or(-1)) + 1
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
    metrics: DeltaTable,
    reports: DeltaTable,
}

/// Files are cut at this size when a partition is rewritten.
const TARGET_FILE_SIZE: NonZeroU64 = NonZeroU64::new(128 << 20).unwrap();

/// Rows are sorted by series within a file, so row groups of 128k rows let row-group statistics
/// skip whole groups before the page index is consulted.
fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(6).unwrap_or_default()))
        .set_max_row_group_row_count(Some(1 << 17))
        .build()
}

/// A `metrics` partition: (testcase, machine).
type Partition = (String, String);

/// The number of live files of each partition of a table.
fn files_per_partition(
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

/// Rewrites one `metrics` partition sorted by series and time, in one Delta commit that replaces
/// exactly that partition. A transformer appending to the partition meanwhile makes the commit
/// fail with a conflict instead of losing the appended rows.
async fn sort_partition(
    table: DeltaTable,
    (testcase, machine): &Partition,
) -> Result<DeltaTable, LakeError> {
    let query = LakeError::query(METRICS_TABLE);
    let in_partition = col("testcase")
        .eq(lit(testcase.as_str()))
        .and(col("machine").eq(lit(machine.as_str())));
    let provider = table.table_provider().await.map_err(query)?;
    // Sorted here and handed over as batches: given a plan, the writer's optimizer drops a sort
    // that no operator above it requires.
    let sorted = SessionContext::new()
        .read_table(provider)
        .map_err(query)?
        .filter(in_partition.clone())
        .map_err(query)?
        .sort(
            ["metric", "params", "time", "commit", "role", "report_key"]
                .into_iter()
                .map(|c| col(c).sort(true, false))
                .collect(),
        )
        .map_err(query)?
        .collect()
        .await
        .map_err(query)?;
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
    table
        .write(sorted)
        .with_session_state(Arc::new(delta.state()))
        .with_save_mode(SaveMode::Overwrite)
        .with_replace_where(in_partition)
        .with_partition_columns(PARTITION_COLUMNS)
        .with_writer_properties(writer_properties())
        .with_target_file_size(Some(TARGET_FILE_SIZE))
        .await
        .map_err(|source| LakeError::Delta {
            table: METRICS_TABLE,
            source,
        })
}

/// Opens table `name` of the lake, creating it with its schema and partitioning when missing.
async fn open_table(lake: &LakeUrl, name: &'static str) -> Result<DeltaTable, LakeError> {
    if let Some(path) = lake.local_table(name) {
        // delta-rs' local store writes files but does not create the table's directory.
        tokio::fs::create_dir_all(&path)
            .await
            .map_err(|source| LakeError::Io { path, source })?;
    }
    let table = DeltaTable::try_from_url(lake.table(name)?)
        .await
        .map_err(LakeError::delta(name))?;
    if table.version().is_some() {
        return Ok(table);
    }
    // A new table: an empty write creates it with the schema and partitioning.
    let schema = if name == METRICS_TABLE {
        METRICS.clone()
    } else {
        REPORTS.clone()
    };
    table
        .write(vec![RecordBatch::new_empty(schema)])
        .with_save_mode(SaveMode::Append)
        .with_partition_columns(PARTITION_COLUMNS)
        .await
        .map_err(LakeError::delta(name))
}

/// One of the transformer's two tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Metrics,
    Reports,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Self::Metrics => METRICS_TABLE,
            Self::Reports => REPORTS_TABLE,
        }
    }
}

impl Lake {
    /// Opens the lake at `url`, creating its tables when missing.
    pub async fn open(url: &LakeUrl) -> Result<Self, LakeError> {
        Ok(Self {
            url: url.clone(),
            metrics: open_table(url, METRICS_TABLE).await?,
            reports: open_table(url, REPORTS_TABLE).await?,
        })
    }

    /// Where the lake is.
    pub fn url(&self) -> &LakeUrl {
        &self.url
    }

    /// Reloads both tables to their latest versions (another writer may have committed).
    pub async fn refresh(&mut self) -> Result<(), LakeError> {
        self.metrics
            .update_state()
            .await
            .map_err(|source| LakeError::Delta {
                table: METRICS_TABLE,
                source,
            })?;
        self.reports
            .update_state()
            .await
            .map_err(|source| LakeError::Delta {
                table: REPORTS_TABLE,
                source,
            })?;
        Ok(())
    }

    /// Progress recorded for each partition of `topic`.
    pub async fn progress(
        &self,
        topic: &str,
        partitions: &[i32],
    ) -> Result<HashMap<i32, Progress>, LakeError> {
        progress_in(&self.metrics, &self.reports, topic, partitions).await
    }

    /// Report keys in the lake and whether the stored copy is a quoted one.
    pub async fn report_keys(&self) -> Result<HashMap<String, bool>, LakeError> {
        let q = LakeError::query(REPORTS_TABLE);
        let ctx = SessionContext::new();
        let provider = self.reports.table_provider().await.map_err(q)?;
        ctx.register_table(REPORTS_TABLE, provider).map_err(q)?;
        let batches = ctx
            .sql("SELECT report_key, bool_and(quoted) AS quoted FROM reports GROUP BY report_key")
            .await
            .map_err(q)?
            .collect()
            .await
            .map_err(q)?;
        let mut out = HashMap::new();
        for batch in batches {
            use deltalake::arrow::array::AsArray;
            let keys = batch
                .column(0)
                .as_string_view_opt()
                .map(|a| a.iter().collect::<Vec<_>>());
            let keys = match keys {
                Some(keys) => keys
                    .into_iter()
                    .map(|k| k.map(str::to_owned))
                    .collect::<Vec<_>>(),
                None => batch
                    .column(0)
                    .as_string::<i32>()
                    .iter()
                    .map(|k| k.map(str::to_owned))
                    .collect(),
            };
            let quoted = batch.column(1).as_boolean();
            for (i, key) in keys.into_iter().enumerate() {
                if let Some(key) = key {
                    out.insert(key, quoted.value(i));
                }
            }
        }
        Ok(out)
    }

    /// Deletes every row of the given reports from both tables (an original replacing a
    /// quoted copy).
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
        for (name, table) in [
            (METRICS_TABLE, &mut self.metrics),
            (REPORTS_TABLE, &mut self.reports),
        ] {
            let (updated, _) = table
                .clone()
                .delete()
                .with_predicate(predicate.clone())
                .await
                .map_err(|source| LakeError::Delta {
                    table: name,
                    source,
                })?;
            *table = updated;
        }
        Ok(())
    }

    /// Appends a batch to one table in one Delta commit that also records `txns`.
    async fn append(
        &mut self,
        table: Table,
        batch: RecordBatch,
        txns: Vec<Transaction>,
    ) -> Result<(), LakeError> {
        let target = match table {
            Table::Metrics => &mut self.metrics,
            Table::Reports => &mut self.reports,
        };
        if batch.num_rows() == 0 && txns.is_empty() {
            return Ok(());
        }
        let updated = target
            .clone()
            .write(vec![batch])
            .with_save_mode(SaveMode::Append)
            .with_partition_columns(PARTITION_COLUMNS)
            .with_writer_properties(writer_properties())
            .with_commit_properties(CommitProperties::default().with_application_transactions(txns))
            .await
            .map_err(LakeError::delta(table.name()))?;
        *target = updated;
        Ok(())
    }

    /// Commits normalized batches: `metrics` first, then `reports`, each commit recording the
    /// partition offsets it covers. Delta has no transaction over two tables; each table's
    /// `txn` records its own progress ([`Progress`]), so after a crash between the two commits
    /// the replay writes only the table that is behind.
    pub async fn commit(
        &mut self,
        metrics: RecordBatch,
        reports: RecordBatch,
        txns: &[Transaction],
    ) -> Result<(), LakeError> {
        self.append(Table::Metrics, metrics, txns.to_vec()).await?;
        self.append(Table::Reports, reports, txns.to_vec()).await
    }

    /// Compacts the lake and removes files no longer referenced.
    ///
    /// Each `metrics` partition (testcase, machine) holding several files is rewritten as one
    /// file sorted by series and time. Bin-packing alone would concatenate per-flush files, each
    /// sorted on its own, and a series would then be spread over every page of the result; sorted,
    /// the Parquet page index narrows a one-series query to the few pages holding it. `reports`
    /// is small per report and only bin-packed. `resort` rewrites single-file partitions too.
    pub async fn compact(&mut self, resort: bool) -> Result<CompactSummary, LakeError> {
        let mut summary = CompactSummary::default();
        let scattered: Vec<(Partition, usize)> = files_per_partition(&self.metrics, METRICS_TABLE)?
            .into_iter()
            .filter(|(_, files)| resort || *files > 1)
            .collect();
        for (partition, files) in &scattered {
            self.metrics = sort_partition(self.metrics.clone(), partition).await?;
            summary.files_removed += *files as u64;
            summary.partitions_sorted += 1;
        }
        if !scattered.is_empty() {
            let after = files_per_partition(&self.metrics, METRICS_TABLE)?;
            summary.files_added += scattered
                .iter()
                .filter_map(|(partition, _)| after.get(partition))
                .sum::<usize>() as u64;
        }
        let err = |source| LakeError::Delta {
            table: REPORTS_TABLE,
            source,
        };
        let (optimized, metrics) = self
            .reports
            .clone()
            .optimize()
            .with_writer_properties(writer_properties())
            .with_target_size(TARGET_FILE_SIZE)
            .await
            .map_err(err)?;
        summary.files_removed += metrics.num_files_removed;
        summary.files_added += metrics.num_files_added;
        self.reports = optimized;
        for (name, table) in [
            (METRICS_TABLE, &mut self.metrics),
            (REPORTS_TABLE, &mut self.reports),
        ] {
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

/// The progress each partition of `topic` has recorded in the two tables, as loaded.
pub(crate) async fn progress_in(
    metrics: &DeltaTable,
    reports: &DeltaTable,
    topic: &str,
    partitions: &[i32],
) -> Result<HashMap<i32, Progress>, LakeError> {
    let mut out = HashMap::new();
    for &partition in partitions {
        let id = app_id(topic, partition);
        out.insert(
            partition,
            Progress {
                metrics: txn_version(metrics, METRICS_TABLE, &id).await?,
                reports: txn_version(reports, REPORTS_TABLE, &id).await?,
            },
        );
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
    /// Files the rewrite replaced.
    pub files_removed: u64,
    /// Files the rewrite wrote.
    pub files_added: u64,
    /// Unreferenced files past the retention, deleted.
    pub files_vacuumed: u64,
}
