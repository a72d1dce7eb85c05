//! Lakes on object storage: every command on an `s3://` lake served by s3s-fs, a real S3 server
//! from crates.io that `./infra/test.sh` installs and starts (no object store mocked in the
//! process). The numbers are the local lake's: the same inputs, the same rows.

use crate::common::{
    PG_PASSWORD, Pipeline, S3_SECRET_KEY, Server, command_with, commit_infos, generate, moto,
    query_at, s3, scalar_i64, sigterm, temp_dir,
};
use crate::pipeline::{
    CORPUS, SEEDS, assert_each_report_once, assert_lake_matches, expected, generated,
    spawn_transformer_with, transform_summary, wait_for_shared_assignment,
};
use std::path::Path;
use std::process::Command;

/// One value of a psql query (unaligned, tuples only), which must succeed.
fn psql_value(server: &Server, sql: &str) -> String {
    let out = server.psql(PG_PASSWORD, sql);
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `tests/clients/other_engines.py` on `lake`: per engine (Python deltalake, polars, DuckDB),
/// per table, its rows and distinct report keys.
fn other_engines(lake: &str, storage: &[(String, String)]) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(crate::common::root().join("tests/clients/other_engines.py"))
        .arg(lake)
        .envs(storage.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    assert!(
        out.status.success(),
        "other_engines.py (needs deltalake, polars and duckdb: ./infra/test.sh installs them): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"))
}

/// What lkplake's own reader counts, in other_engines.py's shape, for every engine.
fn assert_other_engines_agree(lake: &str, storage: &[(String, String)]) {
    let mut want = serde_json::Map::new();
    for table in ["metrics", "reports", "failures"] {
        let count = |sql: String| scalar_i64(&query_at(lake, storage, &sql));
        let rows = count(format!("SELECT count(*) FROM {table}"));
        let reports = count(format!("SELECT count(DISTINCT report_key) FROM {table}"));
        want.insert(
            table.to_owned(),
            serde_json::json!({"rows": rows, "reports": reports}),
        );
    }
    let want = serde_json::Value::Object(want);
    let got = other_engines(lake, storage);
    for engine in ["deltalake", "polars", "duckdb"] {
        assert_eq!(got[engine], want, "{engine} on {lake}");
    }
}

/// Every file below `dir`, as paths relative to it.
fn files_below(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

#[test]
fn seeds_and_corpus_through_tansu_into_an_s3_lake_hold_what_the_local_lake_holds() {
    let p = Pipeline::on_s3("corpus-s3");
    assert!(p.ingest(&[CORPUS, SEEDS]).status.success());
    let out = p.transform_until_idle();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The local-lake test's numbers (pipeline::seeds_and_corpus_through_tansu_…): 229
    // messages read once, 44 reports written.
    assert_eq!(transform_summary(&stderr), (229, 44), "{stderr}");
    assert!(
        !stderr.contains(S3_SECRET_KEY),
        "the secret key was printed: {stderr}"
    );
    let e = expected(&[CORPUS, SEEDS]);
    assert_eq!(
        (e.reports, e.failure_rows, e.mentions),
        (44, 22, 55),
        "the inputs changed"
    );
    // Read back by delta-rs itself, over S3, and by other engines.
    assert_lake_matches(&p, &e);
    assert_other_engines_agree(&p.lake_url, &p.storage);

    // The tables are objects in the bucket, and nothing was written to a local lake.
    let s3 = s3();
    let bucket = p
        .lake_url
        .trim_start_matches("s3://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let objects = files_below(&s3.data().join(&bucket).join("lkp/lake"));
    for table in ["metrics", "reports", "failures", "mentions", "links"] {
        assert!(
            objects
                .iter()
                .any(|o| o.starts_with(&format!("{table}/_delta_log/"))),
            "no {table} log in the bucket: {objects:?}"
        );
    }
    assert!(
        objects.iter().any(|o| o.ends_with(".parquet")),
        "{objects:?}"
    );
    assert!(files_below(&p.lake).is_empty(), "a local lake was written");

    // Through psql, `serve` on the S3 lake answers with the same numbers.
    let server = Server::start_on(&p.lake_url, &p.storage, &[]);
    assert_eq!(
        psql_value(&server, "SELECT count(DISTINCT report_key) FROM reports"),
        "44"
    );
    assert_eq!(
        psql_value(&server, "SELECT count(*) FROM metrics"),
        e.metric_rows.to_string()
    );
    assert_eq!(psql_value(&server, "SELECT count(*) FROM failures"), "22");
    assert_eq!(psql_value(&server, "SELECT count(*) FROM mentions"), "55");
    // Seed 002, read by hand: vm-scalability.throughput 2.352e+08 -> 3.164e+08, +34.5%.
    assert_eq!(
        psql_value(
            &server,
            "SELECT count(*) FROM metrics WHERE testcase = 'vm-scalability' AND machine = 'lkp-csl-2sp3' \
             AND metric = 'vm-scalability.throughput' AND commit IN ('dad6a5eb55', 'cb67f4282b') \
             AND ((role = 'base' AND value = 2.352e8 AND change IS NULL) \
               OR (role = 'head' AND value = 3.164e8 AND change = 34.5))"
        ),
        "2"
    );
    drop(server);

    // Compaction on S3 (`--resort`: one transform wrote each partition in one file already):
    // every metrics partition rewritten as one sorted file, no row changed.
    let out = p.run(&["compact", "--resort"]);
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find(|l| l.starts_with("lkplake compact: "))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(!line.starts_with("lkplake compact: 0 files"), "{line}");
    let files = p.live_files("metrics");
    let partitions: std::collections::HashSet<&str> = files
        .iter()
        .filter_map(|f| f.rsplit_once('/').map(|(dir, _)| dir))
        .collect();
    assert_eq!(files.len(), partitions.len(), "{files:#?}");
    assert!(files.iter().all(|f| f.starts_with("s3://")), "{files:?}");
    assert_lake_matches(&p, &e);
}

/// `lkplake sql --lake LAKE --format json SQL` with `storage` in its environment.
fn sql_rows(lake: &str, storage: &[(String, String)], sql: &str) -> String {
    let out = command_with(&["sql", "--lake", lake, "--format", "json", sql], storage)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `lkplake ARGS` with `storage` in its environment, which must succeed; its stderr.
fn run_with(storage: &[(String, String)], args: &[&str]) -> String {
    let out = command_with(args, storage)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "lkplake {}: {stderr}", args.join(" "));
    stderr
}

#[test]
fn run_trend_and_export_on_an_s3_lake_give_what_they_give_on_a_local_disk() {
    // Generated reports with steps planted in known series (`lkplake gen --truth`).
    let inputs = temp_dir("s3-trend-inputs");
    generate(
        &inputs,
        &[
            "--reports",
            "300",
            "--seed",
            "7",
            "--years",
            "3",
            "--truth",
            &temp_dir("s3-trend-truth")
                .join("truth.jsonl")
                .to_string_lossy(),
        ],
    );
    let inputs = inputs.to_string_lossy().into_owned();
    let local = temp_dir("s3-trend-local").to_string_lossy().into_owned();
    let s3 = s3();
    let remote = format!("s3://{}/years/of/lkp", s3.bucket("trend-s3"));
    let storage = s3.storage();
    for (lake, storage) in [(&local, &[][..]), (&remote, &storage[..])] {
        // `run` on the embedded broker, then `trend` and `compact`, as on one disk.
        run_with(storage, &["run", "--lake", lake, &inputs]);
        run_with(storage, &["trend", "--lake", lake]);
        run_with(storage, &["compact", "--lake", lake]);
    }
    assert_other_engines_agree(&local, &[]);
    assert_other_engines_agree(&remote, &storage);
    let changes = "SELECT testcase, machine, metric, first_commit_after, change_pct FROM changes \
                   ORDER BY testcase, machine, params, metric, time";
    let on_disk = sql_rows(&local, &[], changes);
    assert!(on_disk.lines().count() > 0, "trend found no change");
    assert_eq!(sql_rows(&remote, &storage, changes), on_disk);
    let counts = "SELECT (SELECT count(*) FROM metrics) AS metrics, (SELECT count(*) FROM reports) AS reports, \
                  (SELECT count(*) FROM trend_series) AS series";
    assert_eq!(
        sql_rows(&remote, &storage, counts),
        sql_rows(&local, &[], counts)
    );

    // A re-run of `trend` with nothing new analyses nothing, on S3 as on disk.
    let again = run_with(&storage, &["trend", "--lake", &remote]);
    assert!(again.contains(": 0 analysed"), "{again}");

    // `export openmetrics` writes the same history from either lake.
    let export = |lake: &str, storage: &[(String, String)]| {
        let out = temp_dir("s3-export").join("history.om");
        run_with(
            storage,
            &[
                "export",
                "openmetrics",
                "--lake",
                lake,
                "--out",
                &out.to_string_lossy(),
            ],
        );
        std::fs::read_to_string(out).unwrap_or_else(|e| panic!("{e}"))
    };
    let history = export(&local, &[]);
    assert!(history.ends_with("# EOF\n"), "{history}");
    assert!(history.lines().count() > 300, "{}", history.lines().count());
    assert_eq!(export(&remote, &storage), history);
}

/// On moto, not on s3s-fs: s3s-fs 0.14.1's PutObject checks `If-None-Match: *` and then
/// renames the new object into place (`put_object` in its s3.rs), so two puts of one key that
/// arrive together both succeed and the later replaces the earlier. With the puts met as
/// below, this test lost 70,870 of 373,308 metric rows on s3s-fs (2026-12-02), and each
/// writer had been told its commits landed. infra/README.md says which stores two writers
/// can share.
#[test]
fn two_transformers_and_two_servers_on_one_moto_lake_while_reports_stream_in_write_each_once() {
    let server = &moto();
    let reports = generated("s3-two-writers", 2000);
    let e = expected(&[&reports]);
    assert_eq!(e.reports, 2000);
    let p = Pipeline::on_server("two-writers-s3", server);
    // The lake exists before the writers start, as in production.
    assert!(p.run(&["compact"]).status.success());
    // Over S3 every file of a scan is a request to one local server while four lkplake
    // processes share two cores: a count that reads 700 files took 53 s here, past the
    // default 60 s statement timeout when busier. This test is about what the servers see,
    // not how fast (the S3 benchmark is in BENCHMARKS.md).
    let serve = ["--refresh", "500ms", "--statement-timeout", "600s"];
    let servers = [
        Server::start_on(&p.lake_url, &p.storage, &serve),
        Server::start_on(&p.lake_url, &p.storage, &serve),
    ];
    // One report creates the topic, so that both writers join the group and share its
    // partitions before the other 1,999 stream in.
    let first = temp_dir("s3-two-writers-first");
    let moved = Path::new(&reports).join("000000.eml");
    std::fs::rename(&moved, first.join("000000.eml")).unwrap_or_else(|e| panic!("{e}"));
    let first = first.to_string_lossy().into_owned();
    assert!(
        p.run(&["ingest", "--partitions", "4", &first])
            .status
            .success()
    );
    // Each writer's first 8 puts of a `metrics` commit wait (up to 5 s) until the other is
    // waiting too, after both listed the log for its latest version: both then put the same
    // next version, and the store's conditional put must refuse one of them (lkplake_lake's
    // meeting log store, lkplake_faults::meet). Meeting before the append instead left a
    // Parquet write between the two listings, and on CI's machine the two never raced. A
    // writer held there cannot answer a rebalance, so they meet only once both have
    // partitions.
    let meeting = temp_dir("s3-two-writers-meet");
    let meet = format!("lake.before-put.metrics:2:8:{}", meeting.display());
    let env = [("LKPLAKE_MEET", meet.as_str())];
    let mut writers = [
        spawn_transformer_with(&p, &[], &env),
        spawn_transformer_with(&p, &[], &env),
    ];
    wait_for_shared_assignment(&writers, 4);
    // The reports stream in while both transformers write.
    let ingest = p.run(&["ingest", "--partitions", "4", &reports]);
    assert!(ingest.status.success(), "ingest failed");
    // Both servers, each on its own, see every report within their refresh of the last commit.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    for server in &servers {
        loop {
            for (child, log) in &mut writers {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "a transformer exited with {status} before the lake held every report: {}",
                        std::fs::read_to_string(log).unwrap_or_default()
                    );
                }
            }
            // Answered from the log's statistics, without reading the files; every row once
            // is checked below.
            let seen = psql_value(server, "SELECT count(*) FROM reports");
            if seen == e.tests.to_string() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "a server saw {seen} of {} report tests after 300 s: {}",
                e.tests,
                server.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
    let mut logs = Vec::new();
    for (mut child, log) in writers {
        sigterm(child.id());
        let exited = child.wait().unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(exited.success(), "a transformer failed: {text}");
        logs.push(text);
    }
    // Compacted before the checks: over s3s-fs each request waits about 43 ms (its replies
    // are small TCP writes, answered by the client's delayed ACK), and the 700 files the
    // flushes wrote made each check a minute long. A compaction rewrites files, never rows
    // (pipeline::compaction_while_… proves it), so a row lost or doubled is still seen.
    assert!(p.run(&["compact"]).status.success());
    assert_each_report_once(&p, &e);
    for server in &servers {
        assert_eq!(
            psql_value(server, "SELECT count(*) FROM metrics"),
            e.metric_rows.to_string()
        );
    }
    // The writers committed to the same tables at once. A commit that found the table moved
    // on since it read it was checked for conflicts and put at the next version (`rebased`);
    // one that lost the put itself to the other writer got the store's 412 from the
    // conditional put and was retried. Either way no commit was lost (above).
    let count = |text: &str| -> usize { logs.iter().map(|l| l.matches(text).count()).sum() };
    let rebased = count("table updated during transaction, checking for conflicts");
    let refused_logged = count("version already exists, will retry");
    let met = count("peers met at lake.before-put.metrics");
    let written: i64 = logs.iter().map(|l| transform_summary(l).1).sum();
    assert_eq!(written, 2000, "reports written by the two transformers");
    // delta-rs records in each commit how many of its puts were refused before one landed
    // (`operationMetrics.num_retries`); read from the objects the S3 server holds.
    let refused = refused_puts_recorded(&p);
    eprintln!(
        "commits put at a later version than they read: {rebased}; passages where the writers met before a put: {met}; puts refused by the conditional put and retried: {refused} recorded in the log, {refused_logged} logged"
    );
    assert!(met > 0, "the writers never met before a put: {logs:?}");
    assert!(
        refused > 0,
        "no commit was refused by the conditional put although the writers met before their puts: {logs:?}"
    );
    assert_eq!(
        refused, refused_logged as u64,
        "every refusal the writers logged is recorded in the commit that followed it"
    );
}

/// The puts refused by the store and retried, summed over every commit of every table of the
/// lake, as delta-rs recorded them in each commit's `operationMetrics.num_retries`.
fn refused_puts_recorded(p: &Pipeline) -> u64 {
    ["metrics", "failures", "mentions", "links", "reports"]
        .into_iter()
        .flat_map(|table| commit_infos(&format!("{}/{table}", p.lake_url), &p.storage))
        // A table's creating commit has no operation metrics: nothing to retry there.
        .map(|commit| {
            commit
                .info
                .get("operationMetrics")
                .and_then(|metrics| metrics["num_retries"].as_u64())
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn a_missing_bucket_is_named_with_the_reason() {
    let s3 = s3();
    let lake = "s3://no-such-bucket-lkplake/lake";
    let out = command_with(&["sql", "--lake", lake, "SELECT 1"], &s3.storage())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit status 4, the lake's; the lake and the store's answer are named.
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot read the lake at {lake}")),
        "{stderr}"
    );
    assert!(stderr.contains("NoSuchBucket"), "{stderr}");
    assert!(!stderr.contains(S3_SECRET_KEY), "{stderr}");
}
