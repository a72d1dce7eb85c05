//! The small tables the read side writes: `lkplake trend`'s `changes`, `change_groups` and
//! `trend_series`, replaced whole on every run, and `lkplake triage`'s `triage`, appended to.

use crate::reader::open_existing;
use crate::{LakeError, LakeUrl};
use deltalake::DeltaTable;
use deltalake::arrow::array::RecordBatch;
use deltalake::protocol::SaveMode;

/// Replaces the contents of table `name` with `batch` in one Delta commit (readers see the old
/// contents or the new, never a mix), creating the table when missing.
pub async fn overwrite(
    lake: &LakeUrl,
    name: &'static str,
    batch: RecordBatch,
) -> Result<(), LakeError> {
    write(lake, name, batch, SaveMode::Overwrite).await
}

/// Appends `batch` to table `name` in one Delta commit, creating the table when missing.
/// Appends to an existing table do not conflict: two people triaging at once both keep their
/// row (the very first two, both creating the table, can: the second is told to try again).
pub async fn append(
    lake: &LakeUrl,
    name: &'static str,
    batch: RecordBatch,
) -> Result<(), LakeError> {
    write(lake, name, batch, SaveMode::Append).await
}

async fn write(
    lake: &LakeUrl,
    name: &'static str,
    batch: RecordBatch,
    mode: SaveMode,
) -> Result<(), LakeError> {
    let table = match open_existing(lake, name).await? {
        Some(table) => table,
        None => {
            if let Some(path) = lake.local_table(name) {
                tokio::fs::create_dir_all(&path)
                    .await
                    .map_err(|source| LakeError::Io { path, source })?;
            }
            DeltaTable::try_from_url(lake.table(name)?)
                .await
                .map_err(LakeError::delta(name))?
        }
    };
    table
        .write(vec![batch])
        .with_save_mode(mode)
        .await
        .map_err(LakeError::delta(name))?;
    Ok(())
}
