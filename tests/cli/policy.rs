//! The read-only policy against what DataFusion can reach: thousands of statements generated
//! from a grammar of writes, file and URL reads, DDL in every spelling the parser takes, and
//! queries, wrapped in EXPLAIN, CTEs, comments, odd case and several to a line, sent through
//! `lkplake serve` by psycopg. Whatever each answers, afterwards nothing outside the lake was
//! read (a canary file's marker never comes back), nothing was written (no file appears, the
//! lake's files and counts are as before) and no table or view was added or dropped.

use crate::common::{PG_PASSWORD, Server, seed_lake, temp_dir};
use std::path::{Path, PathBuf};

/// A small deterministic generator, so a failing statement can be generated again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        choices[(self.next() % choices.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const TABLES: &[&str] = &[
    "metrics",
    "reports",
    "failures",
    "mention_mails",
    "comparisons",
    "series",
    "headlines",
    "information_schema.tables",
    "pg_catalog.pg_class",
];
const FORMATS: &[&str] = &["CSV", "PARQUET", "JSON", "ARROW", "AVRO", "csv", "parquet"];

/// One statement of the grammar; `canary` is a file outside the lake, `out` a directory that
/// must stay empty.
fn statement(rng: &mut Rng, canary: &str, canary_dir: &str, out: &str) -> String {
    let table = rng.pick(TABLES);
    let format = rng.pick(FORMATS);
    let source = rng
        .pick(&[
            canary,
            canary_dir,
            "/etc/passwd",
            &format!("file://{canary}"),
            "s3://bucket/key",
            "http://127.0.0.1:1/x.csv",
        ])
        .to_owned();
    let target = format!(
        "{out}/{}",
        rng.pick(&["stolen.parquet", "x.csv", "y.json", "dir/", "z"])
    );
    let name = rng.pick(&[
        "pw",
        "metrics",
        "reports",
        "\"PW\"",
        "public.pw",
        "datafusion.public.pw",
    ]);
    let core = match rng.next() % 18 {
        0 => format!("COPY (SELECT * FROM {table}) TO '{target}' STORED AS {format}"),
        1 => format!("COPY {table} TO '{target}'"),
        2 => format!(
            "CREATE {}EXTERNAL TABLE {}{name} {}STORED AS {format} LOCATION '{source}'",
            rng.pick(&["", "UNBOUNDED "]),
            rng.pick(&["", "IF NOT EXISTS "]),
            rng.pick(&["", "(line VARCHAR) ", "(a INT, b VARCHAR) "]),
        ),
        3 => format!(
            "CREATE {}TABLE {name} AS SELECT * FROM {table}",
            rng.pick(&["", "OR REPLACE ", "TEMPORARY "])
        ),
        4 => format!(
            "INSERT INTO {table} {}",
            rng.pick(&["SELECT * FROM metrics", "VALUES (1)", "DEFAULT VALUES"])
        ),
        5 => format!("UPDATE {table} SET value = 0"),
        6 => format!("DELETE FROM {table}"),
        7 => format!(
            "{} {table}",
            rng.pick(&[
                "DROP TABLE",
                "DROP VIEW",
                "DROP TABLE IF EXISTS",
                "TRUNCATE"
            ])
        ),
        8 => format!(
            "CREATE {}VIEW v AS SELECT * FROM {table}",
            rng.pick(&["", "OR REPLACE "])
        ),
        9 => format!("SELECT * INTO {name} FROM {table}"),
        10 => format!("SELECT * FROM '{source}'"),
        11 => format!(
            "SELECT * FROM {}('{source}')",
            rng.pick(&[
                "read_csv",
                "read_parquet",
                "read_json",
                "read_avro",
                "parquet_metadata"
            ])
        ),
        12 => format!(
            "SET {} = '{}'",
            rng.pick(&[
                "datafusion.catalog.location",
                "datafusion.catalog.format",
                "datafusion.execution.target_partitions",
                "search_path",
            ]),
            rng.pick(&[canary_dir, "1", "csv", "public"])
        ),
        13 => format!("ALTER TABLE {table} RENAME TO x"),
        14 => format!(
            "{} AS SELECT * FROM {table}",
            rng.pick(&["PREPARE p", "CREATE FUNCTION f() RETURNS INT"])
        ),
        15 => format!("SELECT * FROM {name}"),
        16 => format!("SELECT count(*) FROM {table}"),
        _ => format!("SELECT * FROM {table} LIMIT 2"),
    };
    let wrapped = match rng.next() % 6 {
        0 => format!("EXPLAIN {core}"),
        1 => format!("EXPLAIN ANALYZE {core}"),
        2 => format!("WITH q AS (SELECT 1) {core}"),
        3 => format!(
            "/* {} */ {core}",
            rng.pick(&["x", "'; DROP TABLE metrics; --"])
        ),
        4 => format!("-- c\n{core}"),
        _ => core,
    };
    let cased = match rng.next() % 3 {
        0 => wrapped.to_lowercase(),
        1 => wrapped.to_uppercase(),
        _ => wrapped,
    };
    if rng.chance(15) {
        format!("SELECT 1; {cased}")
    } else if rng.chance(10) {
        format!("{cased};\n\t")
    } else {
        cased
    }
}

/// Every file under `dir` with its size, sorted.
fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let entry = entry.unwrap_or_else(|e| panic!("{e}"));
            let path = entry.path();
            let meta = entry.metadata().unwrap_or_else(|e| panic!("{e}"));
            if meta.is_dir() {
                stack.push(path);
            } else {
                all.push((path, meta.len()));
            }
        }
    }
    all.sort();
    all
}

#[test]
fn generated_statements_never_write_or_read_outside_the_lake() {
    let lake = seed_lake("policy-lake");
    let canary_dir = temp_dir("policy-canary");
    let marker = format!("LKPLAKE-CANARY-{}", std::process::id());
    let canary = canary_dir.join("secret.csv");
    std::fs::write(&canary, format!("line\n{marker}\n")).unwrap_or_else(|e| panic!("{e}"));
    let out = temp_dir("policy-out");
    let (canary_arg, canary_dir_arg, out_arg) = (
        canary.to_string_lossy().into_owned(),
        canary_dir.to_string_lossy().into_owned(),
        out.to_string_lossy().into_owned(),
    );
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let statements: Vec<String> = (0..3000)
        .map(|_| statement(&mut rng, &canary_arg, &canary_dir_arg, &out_arg))
        .collect();

    let server = Server::start(&lake, &[]);
    let catalog = "SELECT table_schema, table_name FROM information_schema.tables ORDER BY 1, 2";
    let counts = "SELECT (SELECT count(*) FROM metrics), (SELECT count(*) FROM reports)";
    let before = server.psycopg(PG_PASSWORD, &serde_json::json!([catalog, counts]), &[]);
    let lake_before = files(&lake);
    let canary_before = files(&canary_dir);

    let results = server.psycopg(PG_PASSWORD, &serde_json::json!(statements), &[]);
    let results = results
        .as_array()
        .unwrap_or_else(|| panic!("psycopg answered no list of results: {results}"));
    assert_eq!(results.len(), statements.len());
    let mut answered = 0;
    for (result, sql) in results.iter().zip(&statements) {
        assert!(
            !result.to_string().contains(&marker),
            "read the canary outside the lake: {sql}\n{result}"
        );
        if result.get("error").is_none() {
            answered += 1;
        }
    }
    let after = server.psycopg(PG_PASSWORD, &serde_json::json!([catalog, counts]), &[]);
    assert_eq!(after, before, "tables, views or counts changed");
    assert_eq!(files(&lake), lake_before, "the lake's files changed");
    assert_eq!(files(&canary_dir), canary_before);
    assert_eq!(
        files(&out),
        Vec::new(),
        "something was written outside the lake"
    );
    // The refusals are the policy's, named, not accidents of the planner alone.
    let refused = results
        .iter()
        .filter(|r| {
            r["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("serves the lake read-only"))
        })
        .count();
    eprintln!(
        "{} statements: {answered} answered, {refused} refused by the policy, {} other errors",
        statements.len(),
        statements.len() - answered - refused
    );
    assert!(refused > 1000, "{refused} refused by the policy");
    assert!(answered > 100, "{answered} answered");
}
