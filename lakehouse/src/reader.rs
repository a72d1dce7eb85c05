//! The reader's lake: the tables opened for reading and followed as writers commit. A reader
//! never creates a table, so a wrong `--lake` is an error rather than an empty lake.

use crate::format::Format;
use crate::writer::{Table, progress_in};
use crate::{LakeError, LakeUrl, Progress};
use deltalake::datafusion::catalog::TableProvider;
use deltalake::{DeltaTable, DeltaTableBuilder};
use lkplake_schemas::tables::{
    CHANGE_GROUPS_TABLE, CHANGES_TABLE, FAILURES_TABLE, LINKS_TABLE, MENTIONS_TABLE, METRICS_TABLE,
    REPORTS_TABLE, TREND_PARTITIONS_TABLE, TREND_SERIES_TABLE, TRIAGE_TABLE,
};
use std::collections::HashMap;
use std::sync::Arc;

/// The tables every lake has, in the order [`LakeTables::versions`] lists them.
pub const TABLES: [&str; 2] = [METRICS_TABLE, REPORTS_TABLE];

/// Tables served once they exist: the transformer's newer tables (a lake written before them
/// gets them at its next transform run) and the ones `lkplake trend` writes.
pub const LATER_TABLES: [&str; 8] = [
    FAILURES_TABLE,
    MENTIONS_TABLE,
    LINKS_TABLE,
    TRIAGE_TABLE,
    CHANGES_TABLE,
    CHANGE_GROUPS_TABLE,
    TREND_SERIES_TABLE,
    TREND_PARTITIONS_TABLE,
];

/// FNV-1a over the sorted (path, size) list, with the file count: stable across builds and
/// runs (unlike `std`'s hasher), which is what a fingerprint kept in the lake needs.
fn fingerprint(files: &[(String, i64)]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (path, size) in files {
        for byte in path.bytes().chain([0]).chain(size.to_le_bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{}:{hash:016x}", files.len())
}

/// Opens an existing table, or `None` when the lake has no table `name` (yet).
pub(crate) async fn open_existing(
    lake: &LakeUrl,
    name: &'static str,
) -> Result<Option<DeltaTable>, LakeError> {
    if let Some(path) = lake.local_table(name) {
        // The local store cannot even be built on a directory that does not exist.
        if !path.join("_delta_log").is_dir() {
            return Ok(None);
        }
    }
    let mut table = DeltaTableBuilder::from_url(lake.table(name)?)
        .and_then(DeltaTableBuilder::build)
        .map_err(LakeError::delta(name))?;
    match table.load().await {
        Ok(()) => {
            crate::format::check(lake, name, &table)?;
            Ok(Some(table))
        }
        Err(deltalake::DeltaTableError::NotATable(_)) => Ok(None),
        Err(source) => Err(LakeError::Delta {
            table: name,
            source,
        }),
    }
}

/// A table's loaded version and its commit time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableHealth {
    /// The table's name in the lake.
    pub name: &'static str,
    /// The loaded version; `None` for a table without a commit.
    pub version: Option<u64>,
    /// Milliseconds since the epoch.
    pub committed_ms: Option<i64>,
}

/// A table that exists but cannot be read (a damaged log entry), with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damaged {
    /// The table's name in the lake.
    pub name: &'static str,
    /// What is wrong, naming the file where it is known.
    pub error: String,
}

/// The lake's tables at some version.
#[derive(Debug)]
pub struct LakeTables {
    url: LakeUrl,
    tables: Vec<(&'static str, DeltaTable)>,
    /// Tables that could not be opened: the others are served, and each refresh tries these
    /// again (someone may have restored the damaged file).
    damaged: Vec<Damaged>,
    /// Tables whose latest commits could not be loaded: still served at the version loaded
    /// before, with why.
    stale: HashMap<&'static str, String>,
}

impl LakeTables {
    /// Opens the tables of the lake at `url`. Unlike the writer, a reader never creates a
    /// lake: a wrong path should say so rather than serve an empty one.
    /// A table that exists but cannot be read does not stop the others from being served: it
    /// is listed by [`LakeTables::damaged`] instead.
    pub async fn open(url: &LakeUrl) -> Result<Self, LakeError> {
        let mut lake = Self {
            url: url.clone(),
            tables: Vec::with_capacity(TABLES.len()),
            damaged: Vec::new(),
            stale: HashMap::new(),
        };
        for name in TABLES {
            if !lake.try_open(name).await? {
                let table = match url.local_table(name) {
                    Some(path) => path.display().to_string(),
                    None => url.table(name)?.to_string(),
                };
                return Err(LakeError::NoLake {
                    lake: url.to_string(),
                    table,
                });
            }
        }
        lake.open_new_tables().await?;
        Ok(lake)
    }

    /// Opens table `name` into the served set, or records it as damaged; false when the lake
    /// has no such table.
    async fn try_open(&mut self, name: &'static str) -> Result<bool, LakeError> {
        match open_existing(&self.url, name).await {
            Ok(Some(table)) => {
                self.damaged.retain(|d| d.name != name);
                self.tables.push((name, table));
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e @ (LakeError::Url { .. } | LakeError::Io { .. } | LakeError::Format { .. })) => {
                Err(e)
            }
            // Nothing of the lake can be read: not one damaged table among good ones.
            Err(e) if e.is_store_failure() => Err(LakeError::Unreachable {
                lake: self.url.to_string(),
                table: name,
                reason: crate::damage::without_backtrace(&e.to_string()),
            }),
            Err(e) => {
                let error = crate::damage::diagnose(&self.url, name, &e).await;
                if !self
                    .damaged
                    .iter()
                    .any(|d| d.name == name && d.error == error)
                {
                    tracing::error!(table = name, "{error}");
                }
                self.damaged.retain(|d| d.name != name);
                self.damaged.push(Damaged { name, error });
                Ok(true)
            }
        }
    }

    /// Opens later tables created since the lake was opened, and damaged tables that can be
    /// read again; true when one was opened.
    async fn open_new_tables(&mut self) -> Result<bool, LakeError> {
        let before = self.tables.len();
        for name in TABLES.into_iter().chain(LATER_TABLES) {
            // A table of TABLES that is not served was found damaged: `open` needs the rest.
            if !self.has(name) {
                self.try_open(name).await?;
            }
        }
        Ok(self.tables.len() > before)
    }

    /// Tables that exist but could not be opened, with why.
    pub fn damaged(&self) -> &[Damaged] {
        &self.damaged
    }

    /// Tables served at an older version because their newest commits could not be loaded,
    /// with why.
    pub fn stale(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.stale
            .iter()
            .map(|(name, error)| (*name, error.as_str()))
    }

    /// Whether `name` is one of the open tables.
    pub fn has(&self, name: &str) -> bool {
        self.tables.iter().any(|(n, _)| *n == name)
    }

    /// The lake's format, as its loaded `metrics` table records it (format 1 when that table
    /// could not be read: a damaged table is served empty with format 1's columns).
    pub fn format(&self) -> Result<Format, LakeError> {
        match self.tables.iter().find(|(n, _)| *n == METRICS_TABLE) {
            Some((name, table)) => crate::format::check(&self.url, name, table),
            None => Ok(Format::One),
        }
    }

    /// Where the lake is.
    pub fn url(&self) -> &LakeUrl {
        &self.url
    }

    /// A fingerprint of each (testcase, machine) partition's live files of table `name` at
    /// the loaded version: the same fingerprint means the same files, so the same rows. Empty
    /// when the table is not served.
    pub fn partition_fingerprints(
        &self,
        name: &'static str,
    ) -> Result<HashMap<(String, String), String>, LakeError> {
        let Some((_, table)) = self.tables.iter().find(|(n, _)| *n == name) else {
            return Ok(HashMap::new());
        };
        let state = table.snapshot().map_err(LakeError::delta(name))?;
        let mut files: HashMap<(String, String), Vec<(String, i64)>> = HashMap::new();
        for file in state.log_data().into_iter() {
            let values = file.partition_values_map();
            let value = |key: &str| values.get(key).cloned().flatten().unwrap_or_default();
            files
                .entry((value("testcase"), value("machine")))
                .or_default()
                .push((file.path().into_owned(), file.size()));
        }
        Ok(files
            .into_iter()
            .map(|(partition, mut files)| {
                files.sort();
                (partition, fingerprint(&files))
            })
            .collect())
    }

    /// The version of each table, `metrics` first, then `reports`.
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
    /// A table whose new commits cannot be loaded keeps being served at the version it had,
    /// and is listed by [`LakeTables::stale`] until they can.
    pub async fn refresh(&mut self) -> Result<bool, LakeError> {
        let opened = self.open_new_tables().await?;
        let before = self.versions();
        for (name, table) in &mut self.tables {
            match table.update_state().await {
                Ok(()) => {
                    // A lake rewritten to a newer format meanwhile is refused, not misread.
                    crate::format::check(&self.url, name, table)?;
                    self.stale.remove(name);
                }
                Err(source) => {
                    let error = crate::damage::diagnose(
                        &self.url,
                        name,
                        &LakeError::Delta {
                            table: name,
                            source,
                        },
                    )
                    .await;
                    if self.stale.get(name) != Some(&error) {
                        tracing::error!(
                            table = *name,
                            "{error}; serving the version loaded before"
                        );
                    }
                    self.stale.insert(name, error);
                }
            }
        }
        Ok(opened || self.versions() != before)
    }

    /// The transformer's progress recorded for each partition of `topic`, as of the loaded
    /// versions.
    pub async fn progress(
        &self,
        topic: &str,
        partitions: &[i32],
    ) -> Result<HashMap<i32, Progress>, LakeError> {
        let tables: Vec<(Table, &DeltaTable)> = Table::ALL
            .into_iter()
            .filter_map(|which| {
                let (_, table) = self.tables.iter().find(|(n, _)| *n == which.name())?;
                Some((which, table))
            })
            .collect();
        if tables.is_empty() {
            return Ok(HashMap::new());
        }
        progress_in(&tables, topic, partitions).await
    }

    /// A table provider per table, frozen at the loaded versions: each version's files indexed
    /// once ([`crate::IndexedTable`]), or delta-rs' provider for a table the index cannot read.
    pub async fn providers(
        &self,
    ) -> Result<Vec<(&'static str, Arc<dyn TableProvider>)>, LakeError> {
        let mut providers = Vec::with_capacity(self.tables.len());
        for (name, table) in &self.tables {
            let delta = table
                .table_provider()
                .await
                .map_err(LakeError::query(name))?;
            providers.push((
                *name,
                crate::indexed::index_or_fallback(name, table, delta)?,
            ));
        }
        Ok(providers)
    }
}
