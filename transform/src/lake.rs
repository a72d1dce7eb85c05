//! The lake: two Delta Lake tables (`metrics`, `reports`) under one root directory, with the
//! Kafka offsets each commit covers recorded as Delta `txn` actions (one application id per
//! topic partition, the kafka-delta-ingest pattern). The lake, not Kafka, is the source of
//! truth for progress.

use crate::normalize::Batches;
use deltalake::arrow::array::RecordBatch;
use deltalake::datafusion::prelude::SessionContext;
use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};
use lkplake_schemas::tables::{METRICS, PARTITION_COLUMNS, REPORTS};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub const METRICS_TABLE: &str = "metrics";
pub const REPORTS_TABLE: &str = "reports";

/// Errors of the lake.
#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("lake at {path}: {source}; check that the directory is writable")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("lake table {table}: {source}")]
    Delta {
        table: &'static str,
        source: DeltaTableError,
    },
    #[error("lake table {table}: query failed: {source}")]
    Query {
        table: &'static str,
        source: deltalake::datafusion::error::DataFusionError,
    },
}

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

#[derive(Debug)]
pub struct Lake {
    metrics: DeltaTable,
    reports: DeltaTable,
}

fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(6).unwrap_or_default()))
        .set_max_row_group_row_count(Some(1 << 20))
        .build()
}

async fn open_table(root: &Path, name: &'static str) -> Result<DeltaTable, LakeError> {
    let path = root.join(name);
    std::fs::create_dir_all(&path).map_err(|source| LakeError::Io {
        path: path.clone(),
        source,
    })?;
    let url =
        deltalake::ensure_table_uri(path.to_string_lossy()).map_err(|source| LakeError::Delta {
            table: name,
            source,
        })?;
    let table = DeltaTable::try_from_url(url)
        .await
        .map_err(|source| LakeError::Delta {
            table: name,
            source,
        })?;
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
        .map_err(|source| LakeError::Delta {
            table: name,
            source,
        })
}

impl Lake {
    /// Opens the lake at `root`, creating its tables when missing.
    pub async fn open(root: &Path) -> Result<Self, LakeError> {
        std::fs::create_dir_all(root).map_err(|source| LakeError::Io {
            path: root.to_owned(),
            source,
        })?;
        Ok(Self {
            metrics: open_table(root, METRICS_TABLE).await?,
            reports: open_table(root, REPORTS_TABLE).await?,
        })
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
        let mut out = HashMap::new();
        for &partition in partitions {
            let id = app_id(topic, partition);
            let metrics = txn_version(&self.metrics, METRICS_TABLE, &id).await?;
            let reports = txn_version(&self.reports, REPORTS_TABLE, &id).await?;
            out.insert(partition, Progress { metrics, reports });
        }
        Ok(out)
    }

    /// Report keys in the lake and whether the stored copy is a quoted one.
    pub async fn report_keys(&self) -> Result<HashMap<String, bool>, LakeError> {
        let q = |source| LakeError::Query {
            table: REPORTS_TABLE,
            source,
        };
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

    /// Appends batches to one table in one Delta commit that also records `txns`.
    pub async fn append(
        &mut self,
        table: &'static str,
        batch: RecordBatch,
        txns: Vec<Transaction>,
    ) -> Result<(), LakeError> {
        let target = if table == METRICS_TABLE {
            &mut self.metrics
        } else {
            &mut self.reports
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
            .map_err(|source| LakeError::Delta { table, source })?;
        *target = updated;
        Ok(())
    }

    /// Commits normalized batches: `metrics` first, then `reports`, each commit recording the
    /// partition offsets it covers.
    pub async fn commit(
        &mut self,
        batches: Batches,
        txns: &[Transaction],
    ) -> Result<(), LakeError> {
        self.append(METRICS_TABLE, batches.metrics, txns.to_vec())
            .await?;
        self.append(REPORTS_TABLE, batches.reports, txns.to_vec())
            .await
    }

    /// Compacts small files per partition and removes files no longer referenced.
    pub async fn compact(&mut self) -> Result<CompactSummary, LakeError> {
        let mut summary = CompactSummary::default();
        for (name, table) in [
            (METRICS_TABLE, &mut self.metrics),
            (REPORTS_TABLE, &mut self.reports),
        ] {
            let err = |source| LakeError::Delta {
                table: name,
                source,
            };
            let (optimized, metrics) = table
                .clone()
                .optimize()
                .with_writer_properties(writer_properties())
                .with_target_size(
                    std::num::NonZeroU64::new(128 << 20).unwrap_or(std::num::NonZeroU64::MIN),
                )
                .await
                .map_err(err)?;
            summary.files_removed += metrics.num_files_removed;
            summary.files_added += metrics.num_files_added;
            // Files replaced by the compaction stay readable for a week, so queries that
            // started on the old version finish; vacuum removes only what is older.
            let (vacuumed, vacuum) = optimized.vacuum().await.map_err(err)?;
            summary.files_vacuumed += vacuum.files_deleted.len() as u64;
            *table = vacuumed;
        }
        Ok(summary)
    }

    pub fn tables(&self) -> [(&'static str, &DeltaTable); 2] {
        [
            (METRICS_TABLE, &self.metrics),
            (REPORTS_TABLE, &self.reports),
        ]
    }
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
    pub files_removed: u64,
    pub files_added: u64,
    pub files_vacuumed: u64,
}

/// A DataFusion context with both lake tables registered, for reading the lake back.
pub async fn session(lake: &Lake) -> Result<SessionContext, LakeError> {
    let ctx = SessionContext::new();
    for (name, table) in lake.tables() {
        let q = |source| LakeError::Query {
            table: name,
            source,
        };
        let provider = table.table_provider().await.map_err(q)?;
        ctx.register_table(name, provider).map_err(q)?;
    }
    Ok(ctx)
}
