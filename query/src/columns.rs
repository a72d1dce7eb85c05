//! Reading query results back into Rust: columns cast to one concrete Arrow type whatever the
//! scan produced (views, dictionaries, nanoseconds); and for the queries the crate writes
//! itself, SQL string literals and the metric regexes users pass on the command line.

use crate::error::QueryError;
use datafusion::arrow::array::{
    ArrayRef, AsArray, Float64Array, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, TimeUnit, TimestampMicrosecondType};

/// A user's metric regex, checked before it goes into SQL so a typo is named with its flag.
pub fn metric_regex(flag: &str, pattern: &str) -> Result<regex::Regex, QueryError> {
    regex::Regex::new(pattern).map_err(|source| QueryError::InvalidRegex {
        flag: flag.to_owned(),
        pattern: pattern.to_owned(),
        source,
    })
}

/// A SQL string literal.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A column as UTF-8 strings, whatever string or dictionary type the lake stored it as.
pub fn strings(column: &ArrayRef) -> Result<StringArray, QueryError> {
    let utf8 = cast(column, &DataType::Utf8)?;
    Ok(utf8.as_string::<i32>().clone())
}

/// A column as microsecond timestamps.
pub fn micros(column: &ArrayRef) -> Result<TimestampMicrosecondArray, QueryError> {
    let ts = cast(column, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
    Ok(ts.as_primitive::<TimestampMicrosecondType>().clone())
}

/// A column as 64-bit floats.
pub fn floats(column: &ArrayRef) -> Result<Float64Array, QueryError> {
    let f = cast(column, &DataType::Float64)?;
    Ok(f.as_primitive::<Float64Type>().clone())
}
