//! The lake's Delta tables, opened for reading and followed as the transformer commits.

use crate::error::QueryError;
use datafusion::catalog::TableProvider;
use deltalake::DeltaTable;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Names of the lake's tables, as the transformer writes them.
pub const TABLES: [&str; 2] = ["metrics", "reports"];

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
            let delta = |source| QueryError::Delta {
                table: name,
                source,
            };
            let url = deltalake::ensure_table_uri(path.to_string_lossy()).map_err(delta)?;
            let table = DeltaTable::try_from_url(url).await.map_err(delta)?;
            tables.push((name, table));
        }
        Ok(Self {
            root: root.to_owned(),
            tables,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The version of each table, in [`TABLES`] order.
    pub fn versions(&self) -> Vec<Option<u64>> {
        self.tables.iter().map(|(_, t)| t.version()).collect()
    }

    /// Loads commits made since the last load; true when any table moved.
    pub async fn refresh(&mut self) -> Result<bool, QueryError> {
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
        Ok(self.versions() != before)
    }

    /// A table provider per table, frozen at the loaded versions.
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
            providers.push((*name, provider));
        }
        Ok(providers)
    }
}
