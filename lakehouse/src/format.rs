//! The lake's format version, recorded in every table's Delta configuration as
//! `lkplake.format` when lkplake creates the table, and checked whenever a table is loaded:
//! a binary that does not know a lake's format refuses it instead of misreading it (or, as a
//! writer, adding rows of the old layout to a new one).
//!
//! A table without the key was written before formats were recorded, in format 1. The tables
//! the read side derives (`lkplake trend`'s, `lkplake triage`'s) do not record it: format 2
//! changes how observations are stored, not them. The lake's format is its `metrics` table's:
//! the only table whose layout differs.

use crate::{LakeError, LakeUrl};
use deltalake::DeltaTable;

/// The Delta configuration key of the format.
pub const FORMAT_KEY: &str = "lkplake.format";

/// A lake format this binary reads and writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    /// `metrics` holds one row per observation (commit column), values as floats.
    #[default]
    One,
    /// `metrics` holds one row per table row, base and head side by side, values as printed
    /// decimals (`lkplake_schemas::tables::OBSERVATIONS`); the query layer serves the rows of
    /// format 1 as the `metrics` view.
    Two,
    /// Format 2's rows, with each report test's time, key and commits stored once per
    /// partition once compacted (`lkplake_schemas::tables::FORMAT_3_OBSERVATIONS`).
    Three,
}

impl Format {
    /// The newest format this binary knows.
    pub const LATEST: Format = Format::Three;

    /// The format `lkplake` creates new lakes in unless told otherwise. Format 2 becomes the
    /// default once it stores per-report values once (the per-report table) and other engines'
    /// recipes read it (docs/QUERY.md).
    pub const NEW_LAKES: Format = Format::One;

    /// The number recorded in the lake.
    pub fn number(self) -> u32 {
        match self {
            Self::One => 1,
            Self::Two => 2,
            Self::Three => 3,
        }
    }

    /// The format numbered `number`, if this binary knows it.
    pub fn from_number(number: u32) -> Option<Self> {
        [Self::One, Self::Two, Self::Three]
            .into_iter()
            .find(|f| f.number() == number)
    }

    /// The configuration a new table of a lake in this format is created with.
    pub(crate) fn configuration(self) -> [(&'static str, Option<String>); 1] {
        [(FORMAT_KEY, Some(self.number().to_string()))]
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.number())
    }
}

/// The format `table` records, or why this binary cannot take it. Called at every load, so
/// the lake's name is written out only for a refusal.
pub(crate) fn check(
    lake: &LakeUrl,
    name: &'static str,
    table: &DeltaTable,
) -> Result<Format, LakeError> {
    let snapshot = table.snapshot().map_err(LakeError::delta(name))?;
    let recorded = snapshot.table_config().unknown_properties.get(FORMAT_KEY);
    known(lake, name, recorded.map(String::as_str))
}

fn known(
    lake: impl std::fmt::Display,
    table: &'static str,
    recorded: Option<&str>,
) -> Result<Format, LakeError> {
    let Some(text) = recorded else {
        return Ok(Format::One);
    };
    text.trim()
        .parse::<u32>()
        .ok()
        .and_then(Format::from_number)
        .ok_or_else(|| LakeError::Format {
            lake: lake.to_string(),
            table,
            found: text.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Lake, LakeTables, Table};

    #[test]
    fn a_table_without_the_key_is_format_1() {
        assert_eq!(known("lake", "metrics", None).ok(), Some(Format::One));
        assert_eq!(known("lake", "metrics", Some("1")).ok(), Some(Format::One));
        assert_eq!(known("lake", "metrics", Some("2")).ok(), Some(Format::Two));
    }

    #[test]
    fn a_newer_or_unreadable_format_is_refused_naming_the_lake_table_and_value() {
        for found in ["4", "0", "two", ""] {
            let error = known("s3://b/lake", "metrics", Some(found))
                .err()
                .map(|e| e.to_string());
            assert_eq!(
                error.as_deref(),
                Some(
                    format!(
                        "the lake at s3://b/lake is in format {found:?} (table metrics, {FORMAT_KEY}), \
                         and this lkplake reads formats 1 to 3: use the lkplake that wrote it, or a newer one"
                    )
                    .as_str()
                ),
                "{found}"
            );
        }
    }

    #[tokio::test]
    async fn a_lake_keeps_its_format_whatever_a_new_lake_would_be_created_in() {
        for (created, asked) in [(Format::Two, Format::One), (Format::One, Format::Two)] {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
            let open = |format| {
                let url = url.clone();
                async move {
                    Lake::open_in(&url, format)
                        .await
                        .unwrap_or_else(|e| panic!("{e}"))
                        .format()
                }
            };
            assert_eq!(open(created).await, created);
            assert_eq!(open(asked).await, created);
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
        // What a later lkplake writing format 4 would record.
        metrics
            .set_tbl_properties()
            .with_properties([(FORMAT_KEY.to_owned(), "4".to_owned())].into())
            .with_raise_if_not_exists(false)
            .await
            .unwrap_or_else(|e| panic!("{e}"));

        let refused = |error: LakeError| match error {
            LakeError::Format { table, found, .. } => (table, found),
            other => panic!("not a format error: {other}"),
        };
        let metrics_4 = Some(("metrics", "4".to_owned()));
        assert_eq!(Lake::open(&url).await.err().map(refused), metrics_4);
        assert_eq!(LakeTables::open(&url).await.err().map(refused), metrics_4);
        // Views opened before the change refuse it at their next load.
        assert_eq!(lake.refresh().await.err().map(refused), metrics_4);
        assert_eq!(reader.refresh().await.err().map(refused), metrics_4);
    }
}
