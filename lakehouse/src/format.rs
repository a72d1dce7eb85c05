//! The lake's format version, recorded in every table's Delta configuration as
//! `lkplake.format` when lkplake creates the table, and checked whenever a table is loaded:
//! a binary that does not know a lake's format refuses it instead of misreading it (or, as a
//! writer, adding rows of the old layout to a new one).
//!
//! A table without the key was written before formats were recorded, in format 1. The tables
//! the read side derives (`lkplake trend`'s, `lkplake triage`'s) do not record it: format 2
//! changes how observations are stored, not them.

use crate::{LakeError, LakeUrl};
use deltalake::DeltaTable;

/// The Delta configuration key of the format.
pub const FORMAT_KEY: &str = "lkplake.format";

/// The format this version of lkplake reads and writes.
pub const FORMAT: u32 = 1;

/// The configuration a new table is created with.
pub(crate) fn configuration() -> [(&'static str, Option<String>); 1] {
    [(FORMAT_KEY, Some(FORMAT.to_string()))]
}

/// The format `table` records, or why this binary cannot take it. Called at every load, so
/// the lake's name is written out only for a refusal.
pub(crate) fn check(
    lake: &LakeUrl,
    name: &'static str,
    table: &DeltaTable,
) -> Result<u32, LakeError> {
    let snapshot = table.snapshot().map_err(LakeError::delta(name))?;
    let recorded = snapshot.table_config().unknown_properties.get(FORMAT_KEY);
    known(lake, name, recorded.map(String::as_str))
}

fn known(
    lake: impl std::fmt::Display,
    table: &'static str,
    recorded: Option<&str>,
) -> Result<u32, LakeError> {
    let Some(text) = recorded else {
        return Ok(1);
    };
    match text.trim().parse::<u32>() {
        Ok(format) if (1..=FORMAT).contains(&format) => Ok(format),
        _ => Err(LakeError::Format {
            lake: lake.to_string(),
            table,
            found: text.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Lake, LakeTables, Table};

    #[test]
    fn a_table_without_the_key_is_format_1() {
        assert_eq!(known("lake", "metrics", None).ok(), Some(1));
        assert_eq!(known("lake", "metrics", Some("1")).ok(), Some(1));
    }

    #[test]
    fn a_newer_or_unreadable_format_is_refused_naming_the_lake_table_and_value() {
        for found in ["2", "0", "two", ""] {
            let error = known("s3://b/lake", "metrics", Some(found))
                .err()
                .map(|e| e.to_string());
            assert_eq!(
                error.as_deref(),
                Some(
                    format!(
                        "the lake at s3://b/lake is in format {found:?} (table metrics, {FORMAT_KEY}), \
                         and this lkplake reads format 1 only: use the lkplake that wrote it, or a newer one"
                    )
                    .as_str()
                ),
                "{found}"
            );
        }
    }

    #[tokio::test]
    async fn every_new_table_records_format_1_and_a_newer_format_is_refused_by_both_views_open_or_opening()
     {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let lake = Lake::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
        for which in Table::ALL {
            let table = lake.table(which);
            let snapshot = table.snapshot().unwrap_or_else(|e| panic!("{e}"));
            let recorded = snapshot.table_config().unknown_properties.get(FORMAT_KEY);
            assert_eq!(recorded.map(String::as_str), Some("1"), "{}", which.name());
        }
        let metrics = lake.table(Table::Metrics).clone();
        let mut lake = lake;
        let mut reader = LakeTables::open(&url)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // What a later lkplake writing format 2 would record.
        metrics
            .set_tbl_properties()
            .with_properties([(FORMAT_KEY.to_owned(), "2".to_owned())].into())
            .with_raise_if_not_exists(false)
            .await
            .unwrap_or_else(|e| panic!("{e}"));

        let refused = |error: LakeError| match error {
            LakeError::Format { table, found, .. } => (table, found),
            other => panic!("not a format error: {other}"),
        };
        let metrics_2 = Some(("metrics", "2".to_owned()));
        assert_eq!(Lake::open(&url).await.err().map(refused), metrics_2);
        assert_eq!(LakeTables::open(&url).await.err().map(refused), metrics_2);
        // Views opened before the change refuse it at their next load.
        assert_eq!(lake.refresh().await.err().map(refused), metrics_2);
        assert_eq!(reader.refresh().await.err().map(refused), metrics_2);
    }
}
