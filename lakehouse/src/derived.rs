//! The small tables the read side derives from the lake (`lkplake trend`'s `changes` and
//! `trend_series`), replaced whole on every run.

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
        .with_save_mode(SaveMode::Overwrite)
        .await
        .map_err(LakeError::delta(name))?;
    Ok(())
}
