//! Crashes at the most dangerous moments, injected with the crash points of `lkplake-faults`
//! (`LKPLAKE_CRASH_AT`; infra/test.sh builds them in), each followed by a restart: the lake
//! ends with every report exactly once.

use crate::common::{Pipeline, scalar_i64};
use crate::pipeline::{assert_lake_matches, expected, transform_summary};
use std::os::unix::process::ExitStatusExt;
use std::process::Output;

const CORPUS: &str = "parse/tests/fixtures/cgroups-lkp-cc.mbox.gz";
const SEEDS: &str = "examples/reports";
const CRASH_AT: &str = "LKPLAKE_CRASH_AT";

/// Runs `lkplake ARGS` with a crash point armed; asserts it died there, as by a power cut.
fn crash(p: &Pipeline, point: &str, args: &[&str]) -> Output {
    let out = p
        .cmd(args)
        .env(CRASH_AT, point)
        .output()
        .unwrap_or_else(|e| panic!("spawn lkplake: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(6), "aborted at {point}: {stderr}");
    assert!(
        stderr.contains(&format!("lkplake: crashing at {point}")),
        "{stderr}"
    );
    out
}

fn count(p: &Pipeline, table: &str) -> i64 {
    scalar_i64(&p.query(&format!("SELECT count(*) FROM {table}")))
}

const TRANSFORM: [&str; 4] = ["transform", "--until-idle", "--flush-ms", "500"];

#[test]
fn a_transformer_killed_between_two_table_commits_completes_the_tables_behind_on_restart() {
    let p = Pipeline::new("crash-tables");
    assert!(p.ingest(&[CORPUS, SEEDS]).status.success());
    crash(&p, "lake.between-table-commits", &TRANSFORM);
    // The first flush committed `metrics` and died before the other tables.
    assert!(count(&p, "metrics") > 0);
    assert_eq!(count(&p, "reports"), 0);
    assert_eq!(count(&p, "failures"), 0);
    assert_eq!(count(&p, "mentions"), 0);
    assert_eq!(count(&p, "links"), 0);
    p.transform_until_idle();
    // Every report, test, row, failure, mention and link once: no metrics row written twice.
    assert_lake_matches(&p, &expected(&[CORPUS, SEEDS]));
}

#[test]
fn a_transformer_killed_after_its_lake_commit_and_before_its_offset_commit_writes_nothing_twice() {
    let p = Pipeline::new("crash-offsets");
    assert!(p.ingest(&[CORPUS, SEEDS]).status.success());
    crash(&p, "transform.after-lake-commit", &TRANSFORM);
    let before = scalar_i64(&p.query("SELECT count(DISTINCT report_key) FROM reports"));
    assert!(before > 0, "the lake commit landed");
    let out = p.transform_until_idle();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // No offset reached the group, but the restart resumes from the lake's own record of
    // them: it writes only the reports the crashed run had not committed.
    let e = expected(&[CORPUS, SEEDS]);
    assert_eq!(
        transform_summary(&stderr).1,
        e.reports as i64 - before,
        "{stderr}"
    );
    assert_lake_matches(&p, &e);
}

#[test]
fn a_compaction_killed_before_its_commit_leaves_the_lake_whole_and_runs_again() {
    let p = Pipeline::new("crash-compact");
    assert!(p.ingest(&[SEEDS]).status.success());
    p.transform_until_idle();
    assert!(p.ingest(&[CORPUS]).status.success());
    p.transform_until_idle();
    let e = expected(&[CORPUS, SEEDS]);
    assert_lake_matches(&p, &e);
    crash(&p, "lake.compact-before-commit", &["compact", "--resort"]);
    assert_lake_matches(&p, &e);
    let out = p.run(&["compact", "--resort"]);
    assert!(out.status.success());
    assert_lake_matches(&p, &e);
}
