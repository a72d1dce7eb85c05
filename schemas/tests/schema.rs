//! The checked-in JSON Schema is the contract with consumers of `lkp.reports`; it must be
//! exactly what the types generate.

#![allow(
    clippy::disallowed_methods,
    reason = "tests drive the program from plain threads, not from a runtime worker"
)]

use std::path::PathBuf;

fn checked_in_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("report.schema.json")
}

#[test]
fn checked_in_json_schema_matches_the_report_types() {
    let generated = lkplake_schemas::report_json_schema();
    let pretty = serde_json::to_string_pretty(&generated).unwrap_or_default() + "\n";
    if std::env::var_os("LKPLAKE_UPDATE_SCHEMA").is_some() {
        std::fs::write(checked_in_path(), &pretty).unwrap_or_else(|e| panic!("write schema: {e}"));
    }
    let checked_in = std::fs::read_to_string(checked_in_path()).unwrap_or_else(|e| {
        panic!(
            "read {}: {e}; run with LKPLAKE_UPDATE_SCHEMA=1 to create it",
            checked_in_path().display()
        )
    });
    assert_eq!(
        checked_in, pretty,
        "schemas/report.schema.json is stale: run `LKPLAKE_UPDATE_SCHEMA=1 cargo test -p lkplake-schemas` and review the diff (a breaking change needs a SCHEMA_VERSION bump)"
    );
}

/// The fields a message of each kind must carry, as the checked-in schema states them.
fn required(kind: &str) -> Vec<String> {
    let schema = lkplake_schemas::report_json_schema();
    let defs = schema.get("$defs").or_else(|| schema.get("definitions"));
    defs.and_then(|d| d[kind]["required"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn json_schema_names_every_required_wire_field_of_a_report() {
    let required = required("Report");
    for field in [
        "schema_version",
        "report_key",
        "commit",
        "base_commit",
        "quoted",
        "source",
        "tests",
    ] {
        assert!(
            required.iter().any(|r| r == field),
            "{field} missing from {required:?}"
        );
    }
}

#[test]
fn json_schema_names_every_required_wire_field_of_a_mention() {
    let required = required("Mention");
    for field in [
        "schema_version",
        "mention_key",
        "references",
        "rows",
        "source",
    ] {
        assert!(
            required.iter().any(|r| r == field),
            "{field} missing from {required:?}"
        );
    }
}
