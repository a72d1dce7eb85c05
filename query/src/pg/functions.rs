//! Postgres functions clients call on their own before any user query: Grafana asks
//! `current_setting('server_version_num')` to pick its SQL dialect and expands
//! `current_setting('search_path')` in its table browser. The pg_catalog tables and most other
//! functions come from `datafusion-pg-catalog`.

use datafusion::arrow::array::{Array, ArrayRef, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// The Postgres version the server reports (`server_version` in the startup parameters says
/// 16.6 as well); Grafana enables features by it.
const SETTINGS: &[(&str, &str)] = &[
    ("server_version_num", "160006"),
    ("server_version", "16.6"),
    ("search_path", "\"$user\", public"),
    ("standard_conforming_strings", "on"),
    ("client_encoding", "UTF8"),
    ("server_encoding", "UTF8"),
    ("datestyle", "ISO, MDY"),
    ("timezone", "UTC"),
    ("integer_datetimes", "on"),
    ("max_identifier_length", "63"),
    ("is_superuser", "off"),
    ("default_transaction_read_only", "on"),
    ("transaction_read_only", "on"),
];

fn setting(name: &str) -> Result<String> {
    let lower = name.to_ascii_lowercase();
    match SETTINGS.iter().find(|(n, _)| *n == lower) {
        Some((_, value)) => Ok((*value).to_owned()),
        None => exec_err!("unrecognized configuration parameter \"{name}\""),
    }
}

fn current_setting(args: &[ColumnarValue]) -> Result<ColumnarValue> {
    let [arg] = args else {
        return exec_err!("current_setting takes one argument, the setting's name");
    };
    match arg {
        ColumnarValue::Scalar(value) => match value {
            ScalarValue::Utf8(Some(name))
            | ScalarValue::Utf8View(Some(name))
            | ScalarValue::LargeUtf8(Some(name)) => Ok(ColumnarValue::Scalar(ScalarValue::Utf8(
                Some(setting(name)?),
            ))),
            _ => Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None))),
        },
        ColumnarValue::Array(names) => {
            let names = cast(names, &DataType::Utf8)?;
            let Some(names) = names.as_any().downcast_ref::<StringArray>() else {
                return exec_err!("current_setting: setting names must be text");
            };
            let values = names
                .iter()
                .map(|n| n.map(setting).transpose())
                .collect::<Result<StringArray>>()?;
            Ok(ColumnarValue::Array(Arc::new(values) as ArrayRef))
        }
    }
}

/// Registers the functions on `ctx`.
pub fn register(ctx: &SessionContext) {
    ctx.register_udf(create_udf(
        "current_setting",
        vec![DataType::Utf8],
        DataType::Utf8,
        Volatility::Stable,
        Arc::new(current_setting),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_settings_answer_and_unknown_ones_fail_like_postgres() -> Result<()> {
        assert_eq!(setting("server_version_num")?, "160006");
        assert_eq!(setting("SEARCH_PATH")?, "\"$user\", public");
        let err = setting("no_such_thing").err().map(|e| e.to_string());
        assert!(
            err.is_some_and(
                |e| e.contains("unrecognized configuration parameter \"no_such_thing\"")
            )
        );
        Ok(())
    }
}
