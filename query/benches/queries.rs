//! Latency of the benchmark queries (`queries.sql`) on a lake built by `infra/bench/query.sh`,
//! which sets `LKPLAKE_BENCH_LAKE` and the placeholders as `LKPLAKE_BENCH_<NAME>` variables
//! and runs DuckDB on the same Parquet files in the same run.

use criterion::{Criterion, criterion_group, criterion_main};
use lkplake_lake::LakeUrl;
use lkplake_query::{Engine, EngineConfig};
use std::path::PathBuf;

const QUERIES: &str = include_str!("queries.sql");

/// (name, SQL with placeholders filled from the environment).
fn queries() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in QUERIES.lines() {
        if let Some(name) = line.strip_prefix("-- name: ") {
            out.push((name.trim().to_owned(), String::new()));
        } else if !line.starts_with("--")
            && let Some((_, sql)) = out.last_mut()
        {
            sql.push_str(line);
            sql.push('\n');
        }
    }
    for (_, sql) in &mut out {
        for key in [
            "testcase",
            "machine",
            "params",
            "metric",
            "year",
            "next_year",
        ] {
            let var = format!("LKPLAKE_BENCH_{}", key.to_uppercase());
            if let Ok(value) = std::env::var(&var) {
                *sql = sql.replace(&format!("{{{key}}}"), &value.replace('\'', "''"));
            }
        }
        *sql = sql.trim().trim_end_matches(';').to_owned();
    }
    out
}

fn bench(c: &mut Criterion) {
    let Some(lake) = std::env::var_os("LKPLAKE_BENCH_LAKE").map(PathBuf::from) else {
        eprintln!("LKPLAKE_BENCH_LAKE is not set: run infra/bench/query.sh, which builds the lake");
        return;
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    let engine = match runtime.block_on(async {
        let url = LakeUrl::local(&lake)?;
        // As `lkplake serve` runs: what it keeps per lake version (a format-3 lake's report
        // rows; none of the three queries reads a kept view) is kept after the warm-up.
        let config = EngineConfig {
            keep_views: true,
            ..EngineConfig::default()
        };
        Engine::open(&url, &config).await
    }) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    let mut group = c.benchmark_group("query");
    group.sample_size(10);
    for (name, sql) in queries() {
        let rows = runtime.block_on(async {
            let frame = engine.sql(&sql).await?;
            let batches = frame.collect().await?;
            Ok::<_, Box<dyn std::error::Error>>(batches.iter().map(|b| b.num_rows()).sum::<usize>())
        });
        match rows {
            Ok(rows) => eprintln!("{name}: {rows} rows"),
            Err(e) => panic!("{name}: {e}\n{sql}"),
        }
        group.bench_function(&name, |b| {
            b.to_async(&runtime).iter(|| async {
                let frame = engine.sql(&sql).await.map_err(|e| e.to_string())?;
                frame.collect().await.map_err(|e| e.to_string())
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
