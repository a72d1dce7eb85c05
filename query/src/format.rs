//! Output formats of `lkplake sql`.

use crate::error::QueryError;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::csv;
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::json::writer::{LineDelimited, WriterBuilder as JsonWriterBuilder};
use datafusion::arrow::util::pretty::pretty_format_batches_with_schema;
use std::io::Write;
use std::sync::Arc;

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// A boxed table for people, with the row count under it.
    #[default]
    Table,
    /// CSV with a header line, for spreadsheets and scripts.
    Csv,
    /// One JSON object per row per line, nulls written out, for `jq` and programs.
    Json,
}

/// Writes `batches` (all of `schema`) to `out` in `format`.
pub fn write(
    out: &mut dyn Write,
    schema: &Arc<Schema>,
    batches: &[RecordBatch],
    format: Format,
) -> Result<(), QueryError> {
    let io = |source| QueryError::Io {
        what: "writing results".to_owned(),
        source,
    };
    match format {
        Format::Table => {
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            let table = pretty_format_batches_with_schema(Arc::clone(schema), batches)?;
            let plural = if rows == 1 { "" } else { "s" };
            writeln!(out, "{table}\n({rows} row{plural})").map_err(io)?;
        }
        Format::Csv => {
            let mut writer = csv::WriterBuilder::new().with_header(true).build(&mut *out);
            if batches.is_empty() {
                writer.write(&RecordBatch::new_empty(Arc::clone(schema)))?;
            }
            for batch in batches {
                writer.write(batch)?;
            }
        }
        Format::Json => {
            let mut writer = JsonWriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, LineDelimited>(&mut *out);
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
        }
    }
    out.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field};

    fn sample() -> Result<(Arc<Schema>, RecordBatch), QueryError> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("metric", DataType::Utf8, false),
            Field::new("change", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(StringArray::from(vec!["vm-scalability.throughput", "a,b"])),
                Arc::new(Float64Array::from(vec![Some(34.5), None])),
            ],
        )?;
        Ok((schema, batch))
    }

    fn render(format: Format) -> Result<String, QueryError> {
        let (schema, batch) = sample()?;
        let mut out = Vec::new();
        write(&mut out, &schema, &[batch], format)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    #[test]
    fn csv_has_a_header_and_quotes_commas() -> Result<(), QueryError> {
        assert_eq!(
            render(Format::Csv)?,
            "metric,change\nvm-scalability.throughput,34.5\n\"a,b\",\n"
        );
        Ok(())
    }

    #[test]
    fn json_writes_one_object_per_line_with_nulls() -> Result<(), QueryError> {
        assert_eq!(
            render(Format::Json)?,
            "{\"metric\":\"vm-scalability.throughput\",\"change\":34.5}\n{\"metric\":\"a,b\",\"change\":null}\n"
        );
        Ok(())
    }

    #[test]
    fn table_counts_rows_and_shows_headers_when_empty() -> Result<(), QueryError> {
        let (schema, _) = sample()?;
        let mut out = Vec::new();
        write(&mut out, &schema, &[], Format::Table)?;
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("| metric | change |"), "{text}");
        assert!(text.ends_with("(0 rows)\n"), "{text}");
        Ok(())
    }
}
