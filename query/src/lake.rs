//! The lake's Delta tables, opened for reading and followed as the transformer commits.

use crate::error::QueryError;
use datafusion::arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use deltalake::DeltaTable;
use deltalake::protocol::SaveMode;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Names of the lake's tables, as the transformer writes them.
pub const TABLES: [&str; 2] = ["metrics", "reports"];

/// Tables `lkplake trend` writes; served once they exist.
pub const TREND_TABLES: [&str; 2] = ["changes", "trend_series"];

async fn open_table(path: &Path, name: &'static str) -> Result<DeltaTable, QueryError> {
    let delta = |source| QueryError::Delta {
        table: name,
        source,
    };
    let url = deltalake::ensure_table_uri(path.to_string_lossy()).map_err(delta)?;
    DeltaTable::try_from_url(url).await.map_err(delta)
}

/// Replaces the contents of table `name` under `root` with `batch`, creating the table when
/// missing. Only for the small tables the read side derives (`changes`, `trend_series`): one
/// Delta commit, so readers see the old contents or the new, never a mix.
pub async fn overwrite(
    root: &Path,
    name: &'static str,
    batch: RecordBatch,
) -> Result<(), QueryError> {
    let path = root.join(name);
    std::fs::create_dir_all(&path).map_err(|source| QueryError::Io {
        what: format!("creating {}", path.display()),
        source,
    })?;
    let table = open_table(&path, name).await?;
    table
        .write(vec![batch])
        .with_save_mode(SaveMode::Overwrite)
        .await
        .map_err(|source| QueryError::Delta {
            table: name,
            source,
        })?;
    Ok(())
}

/// A table's loaded version and its commit time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableHealth {
    pub name: &'static str,
    pub version: Option<u64>,
    /// Milliseconds since the epoch.
    pub committed_ms: Option<i64>,
}

/// The lake's tables at some version.
#[derive(Debug)]
pub struct LakeTables {
    root: PathBuf,
    tables: Vec<(&'static str, DeltaTable)>,
}

impl LakeTables {
    /// Opens the tables under `root`. Unlike the writer, a reader never creates a lake: a wrong
    /// path should say so rather than serve an empty one.
    pub async fn open(root: &Path) -> Result<Self, QueryError> {
        let mut tables = Vec::with_capacity(TABLES.len());
        for name in TABLES {
            let path = root.join(name);
            if !path.join("_delta_log").is_dir() {
                return Err(QueryError::NoLake {
                    lake: root.to_owned(),
                    path,
                });
            }
            tables.push((name, open_table(&path, name).await?));
        }
        let mut lake = Self {
            root: root.to_owned(),
            tables,
        };
        lake.open_new_tables().await?;
        Ok(lake)
    }

    /// Opens trend tables created since the lake was opened.
    async fn open_new_tables(&mut self) -> Result<bool, QueryError> {
        let mut opened = false;
        for name in TREND_TABLES {
            let path = self.root.join(name);
            if self.tables.iter().all(|(n, _)| *n != name) && path.join("_delta_log").is_dir() {
                self.tables.push((name, open_table(&path, name).await?));
                opened = true;
            }
        }
        Ok(opened)
    }

    /// Whether `name` is one of the open tables.
    pub fn has(&self, name: &str) -> bool {
        self.tables.iter().any(|(n, _)| *n == name)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The version of each table, in [`TABLES`] order.
    pub fn versions(&self) -> Vec<Option<u64>> {
        self.tables.iter().map(|(_, t)| t.version()).collect()
    }

    /// Each table's loaded version and when it was committed.
    pub fn health(&self) -> Vec<TableHealth> {
        self.tables
            .iter()
            .map(|(name, table)| {
                let version = table.version();
                let committed_ms = version
                    .and_then(|v| table.snapshot().ok().and_then(|s| s.version_timestamp(v)));
                TableHealth {
                    name,
                    version,
                    committed_ms,
                }
            })
            .collect()
    }

    /// Loads commits made since the last load; true when any table moved.
    pub async fn refresh(&mut self) -> Result<bool, QueryError> {
        let opened = self.open_new_tables().await?;
        let before = self.versions();
        for (name, table) in &mut self.tables {
            table
                .update_state()
                .await
                .map_err(|source| QueryError::Delta {
                    table: name,
                    source,
                })?;
        }
        Ok(opened || self.versions() != before)
    }

    /// A table provider per table, frozen at the loaded versions, each keeping the queries'
    /// limits (`crate::limit`).
    pub async fn providers(
        &self,
    ) -> Result<Vec<(&'static str, Arc<dyn TableProvider>)>, QueryError> {
        let mut providers = Vec::with_capacity(self.tables.len());
        for (name, table) in &self.tables {
            let provider = table
                .table_provider()
                .await
                .map_err(|source| QueryError::Table {
                    table: name,
                    source: Box::new(source),
                })?;
            providers.push((*name, crate::limit::HonorLimit::wrap(provider)));
        }
        Ok(providers)
    }
}
