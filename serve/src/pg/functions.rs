//! Postgres functions clients call on their own before any user query: Grafana asks
//! `current_setting('server_version_num')` to pick its SQL dialect and expands
//! `current_setting('search_path')` in its table browser. The pg_catalog tables and most other
//! functions come from `datafusion-pg-catalog`.

use datafusion::arrow::array::{Array, ArrayRef, Int32Array, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility, create_udf,
};
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

/// What `select version()` answers: Postgres' own wording first, because clients parse it
/// (SQLAlchemy takes the version from `PostgreSQL 16.6`), then what is really answering, as
/// CockroachDB and Materialize do. It agrees with `server_version`.
pub fn version() -> String {
    format!(
        "PostgreSQL 16.6 on {}-{} (lkplake {}, DataFusion {})",
        std::env::consts::ARCH,
        std::env::consts::OS,
        env!("CARGO_PKG_VERSION"),
        datafusion::DATAFUSION_VERSION
    )
}

/// The built-in Postgres types a client may ask `to_regtype` about, by every name Postgres
/// accepts for them, with their oids (as in `pg_type`).
const TYPES: &[(&[&str], i32)] = &[
    (&["bool", "boolean"], 16),
    (&["bytea"], 17),
    (&["char"], 18),
    (&["name"], 19),
    (&["int8", "bigint"], 20),
    (&["int2", "smallint"], 21),
    (&["int4", "integer", "int"], 23),
    (&["text"], 25),
    (&["oid"], 26),
    (&["json"], 114),
    (&["float4", "real"], 700),
    (&["float8", "double precision"], 701),
    (&["bpchar", "character"], 1042),
    (&["varchar", "character varying"], 1043),
    (&["date"], 1082),
    (&["time", "time without time zone"], 1083),
    (&["timestamp", "timestamp without time zone"], 1114),
    (&["timestamptz", "timestamp with time zone"], 1184),
    (&["interval"], 1186),
    (&["numeric", "decimal"], 1700),
    (&["regtype"], 2206),
    (&["uuid"], 2950),
    (&["jsonb"], 3802),
];

/// Postgres' `to_regtype(name)`: the type's oid, or NULL when there is no such type (psycopg
/// asks for `hstore` when SQLAlchemy connects; the lake has none).
fn regtype(name: &str) -> Option<i32> {
    let name = name.trim().to_ascii_lowercase();
    let name = name
        .strip_prefix("pg_catalog.")
        .unwrap_or(&name)
        .replace('"', "");
    TYPES
        .iter()
        .find(|(names, _)| names.contains(&name.as_str()))
        .map(|(_, oid)| *oid)
}

fn to_regtype(args: &[ColumnarValue]) -> Result<ColumnarValue> {
    let [arg] = args else {
        return exec_err!("to_regtype takes one argument, the type's name");
    };
    match arg {
        ColumnarValue::Scalar(value) => {
            Ok(ColumnarValue::Scalar(ScalarValue::Int32(match value {
                ScalarValue::Utf8(Some(name))
                | ScalarValue::Utf8View(Some(name))
                | ScalarValue::LargeUtf8(Some(name)) => regtype(name),
                _ => None,
            })))
        }
        ColumnarValue::Array(names) => {
            let names = cast(names, &DataType::Utf8)?;
            let Some(names) = names.as_any().downcast_ref::<StringArray>() else {
                return exec_err!("to_regtype: type names must be text");
            };
            let oids: Int32Array = names.iter().map(|n| n.and_then(regtype)).collect();
            Ok(ColumnarValue::Array(Arc::new(oids) as ArrayRef))
        }
    }
}

/// `json_build_object(k1, v1, ...)`, as SQLAlchemy's column reflection builds its identity and
/// collation options with it: keys as strings, numbers and booleans bare, NULL as null, other
/// values as strings.
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonBuildObject {
    signature: Signature,
}

impl ScalarUDFImpl for JsonBuildObject {
    fn name(&self) -> &str {
        "json_build_object"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if !args.args.len().is_multiple_of(2) {
            return exec_err!("json_build_object takes keys and values in pairs");
        }
        let rows = args.number_rows;
        let columns = args
            .args
            .iter()
            .map(|a| {
                let array = a.to_array(rows)?;
                let bare =
                    array.data_type().is_numeric() || array.data_type() == &DataType::Boolean;
                Ok((cast(&array, &DataType::Utf8)?, bare))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut out = StringBuilder::new();
        for row in 0..rows {
            let mut object = serde_json::Map::new();
            for pair in columns.chunks(2) {
                let [(keys, _), (values, bare)] = pair else {
                    continue;
                };
                let text = |a: &ArrayRef| {
                    a.as_any()
                        .downcast_ref::<StringArray>()
                        .filter(|s| !s.is_null(row))
                        .map(|s| s.value(row).to_owned())
                };
                let Some(key) = text(keys) else {
                    return exec_err!("json_build_object: a key is NULL");
                };
                let value = match text(values) {
                    None => serde_json::Value::Null,
                    Some(v) if *bare => {
                        serde_json::from_str(&v).unwrap_or(serde_json::Value::String(v))
                    }
                    Some(v) => serde_json::Value::String(v),
                };
                object.insert(key, value);
            }
            out.append_value(serde_json::Value::Object(object).to_string());
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// Registers the functions on `ctx`, replacing DataFusion's own `version()`.
pub fn register(ctx: &SessionContext) {
    super::bounded::register(ctx);
    super::bounded_agg::register(ctx);
    ctx.register_udf(ScalarUDF::new_from_impl(JsonBuildObject {
        signature: Signature::variadic_any(Volatility::Immutable),
    }));
    // No column of the lake is backed by a sequence, and every collation is visible.
    ctx.register_udf(create_udf(
        "pg_get_serial_sequence",
        vec![DataType::Utf8, DataType::Utf8],
        DataType::Utf8,
        Volatility::Stable,
        Arc::new(|_: &[ColumnarValue]| Ok(ColumnarValue::Scalar(ScalarValue::Utf8(None)))),
    ));
    ctx.register_udf(create_udf(
        "pg_collation_is_visible",
        vec![DataType::Int32],
        DataType::Boolean,
        Volatility::Stable,
        Arc::new(|_: &[ColumnarValue]| Ok(ColumnarValue::Scalar(ScalarValue::Boolean(Some(true))))),
    ));
    ctx.register_udf(create_udf(
        "to_regtype",
        vec![DataType::Utf8],
        DataType::Int32,
        Volatility::Stable,
        Arc::new(to_regtype),
    ));
    let answer = version();
    ctx.register_udf(create_udf(
        "version",
        vec![],
        DataType::Utf8,
        Volatility::Stable,
        Arc::new(move |_: &[ColumnarValue]| {
            Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(
                answer.clone(),
            ))))
        }),
    ));
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
    fn version_reads_as_the_postgres_release_that_server_version_names() -> Result<()> {
        let v = version();
        assert!(v.starts_with("PostgreSQL 16.6 on "), "{v}");
        assert!(
            v.ends_with(&format!("DataFusion {})", datafusion::DATAFUSION_VERSION)),
            "{v}"
        );
        assert!(v.starts_with(&format!("PostgreSQL {} ", setting("server_version")?)));
        Ok(())
    }

    #[test]
    fn to_regtype_knows_builtin_types_by_every_name_and_nothing_else() {
        assert_eq!(regtype("integer"), Some(23));
        assert_eq!(regtype("pg_catalog.int4"), Some(23));
        assert_eq!(regtype("Timestamp With Time Zone"), Some(1184));
        assert_eq!(regtype("\"text\""), Some(25));
        assert_eq!(regtype("hstore"), None);
        assert_eq!(regtype("public.hstore"), None);
    }

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
