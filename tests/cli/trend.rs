//! `lkplake trend` on generated reports whose planted steps (`lkplake gen --truth`) are known.

use crate::common::{generate, json_lines, lkplake, run_into, sql_json, temp_dir};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Generated reports in two halves (the second arrives later), their truth, and a lake of the
/// first half.
struct Generated {
    second: PathBuf,
    truth: Vec<Value>,
    lake: PathBuf,
}

fn generated(name: &str) -> Generated {
    let dir = temp_dir(name);
    let all = dir.join("all");
    let truth = dir.join("truth.jsonl");
    let truth_arg = truth.to_string_lossy().into_owned();
    generate(
        &all,
        &[
            "--reports",
            "600",
            "--seed",
            "5",
            "--years",
            "3",
            "--truth",
            &truth_arg,
        ],
    );
    let (first, second) = (dir.join("first"), dir.join("second"));
    for d in [&first, &second] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&all)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    for (i, f) in files.iter().enumerate() {
        let to = if i < 540 { &first } else { &second };
        std::fs::rename(f, to.join(f.file_name().unwrap_or_default()))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let lake = dir.join("lake");
    run_into(&lake, &[&first]);
    let truth = std::fs::read_to_string(&truth)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    Generated {
        second,
        truth,
        lake,
    }
}

fn trend(lake: &Path, extra: &[&str]) -> (Vec<Value>, String) {
    let mut args = vec![
        "trend",
        "--lake",
        lake.to_str().unwrap_or_default(),
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = lkplake(&args, None);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (json_lines(&out), stderr)
}

/// The number after `label` in the summary line.
fn count(summary: &str, label: &str) -> u64 {
    summary
        .split(label)
        .next()
        .and_then(|head| {
            head.split(|c: char| !c.is_ascii_digit())
                .rfind(|w| !w.is_empty())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{label}` in {summary}"))
}

#[test]
fn planted_steps_are_found_at_their_commit_saved_to_the_lake_and_only_new_series_are_recomputed() {
    let g = generated("trend");
    let plots = temp_dir("trend-plots");
    let (found, summary) = trend(&g.lake, &["--plot", &plots.to_string_lossy()]);

    // The saved table holds what was printed.
    let saved = sql_json(&g.lake, "SELECT count(*) AS n FROM changes");
    assert_eq!(
        saved[0]["n"].as_u64(),
        Some(found.len() as u64),
        "{summary}"
    );

    // The change points grouped by overlapping ranges: each point in one group, each group's
    // range a non-empty interval, and a group that names a robot report names one of a commit
    // that starts one of its members' ranges.
    let groups = sql_json(
        &g.lake,
        "SELECT sum(changes) AS points, count(*) AS groups, \
         count(*) FILTER (WHERE time_before > time) AS empty, \
         count(report_key) AS reported FROM change_groups",
    );
    assert_eq!(groups[0]["points"].as_u64(), Some(found.len() as u64));
    assert_eq!(groups[0]["empty"].as_u64(), Some(0));
    let (groups_n, reported) = (
        groups[0]["groups"].as_u64().unwrap_or_default(),
        groups[0]["reported"].as_u64().unwrap_or_default(),
    );
    assert!(groups_n > 0 && groups_n <= found.len() as u64, "{groups:?}");
    assert!(
        reported > 0,
        "no group names the robot's report: {groups:?}"
    );
    let misnamed = sql_json(
        &g.lake,
        "SELECT count(*) AS n FROM change_groups g JOIN reports r \
         ON r.report_key = g.report_key AND r.test_index = 0 \
         WHERE strpos(g.commits, lower(left(r.commit, 10))) = 0",
    );
    assert_eq!(misnamed[0]["n"].as_u64(), Some(0), "{misnamed:?}");

    // Planted steps of 10 % or more with at least 6 observations of their series on each side
    // before the neighbouring planted steps: most are found at the commit that carries them,
    // each in its direction (precision and recall are measured in BENCHMARKS.md).
    type Key = [String; 4];
    let key = |s: &Value| -> Key {
        ["testcase", "machine", "params", "metric"]
            .map(|k| s[k].as_str().unwrap_or_default().to_owned())
    };
    // Every series' observations (commit, time) in the order trend reads them, and every change.
    let mut observations: HashMap<Key, Vec<(String, String)>> = HashMap::new();
    for row in sql_json(
        &g.lake,
        "SELECT testcase, machine, params, metric, commit, CAST(time AS VARCHAR) AS t FROM series ORDER BY time",
    ) {
        let t = row["t"].as_str().unwrap_or_default().to_owned();
        let c = row["commit"].as_str().unwrap_or_default().to_owned();
        observations.entry(key(&row)).or_default().push((c, t));
    }
    let changes = sql_json(&g.lake, "SELECT * FROM changes");
    let (mut qualifying, mut hit) = (0, 0);
    for step in &g.truth {
        let (Some(planted), Some(commit)) = (step["change_pct"].as_f64(), step["commit"].as_str())
        else {
            continue;
        };
        let short = &commit[..10];
        let series = observations.get(&key(step)).cloned().unwrap_or_default();
        let Some(at) = series
            .iter()
            .find(|(c, _)| c.starts_with(short))
            .map(|(_, t)| epoch(t))
        else {
            continue;
        };
        let steps: Vec<i64> = g
            .truth
            .iter()
            .filter(|o| key(o) == key(step))
            .map(|o| epoch(o["time"].as_str().unwrap_or_default()))
            .collect();
        let previous = steps
            .iter()
            .copied()
            .filter(|&t| t < at - 1)
            .max()
            .unwrap_or(i64::MIN);
        let next = steps
            .iter()
            .copied()
            .filter(|&t| t > at + 1)
            .min()
            .unwrap_or(i64::MAX);
        let times: Vec<i64> = series.iter().map(|(_, t)| epoch(t)).collect();
        let before = times.iter().filter(|&&t| t < at && t > previous).count();
        let after = times.iter().filter(|&&t| t > at && t < next).count();
        if planted.abs() < 10.0 || before < 6 || after < 6 {
            continue;
        }
        qualifying += 1;
        let hits: Vec<&Value> = changes
            .iter()
            .filter(|c| {
                key(c) == key(step)
                    && c["first_commit_after"]
                        .as_str()
                        .is_some_and(|f| f.starts_with(short))
            })
            .collect();
        assert!(hits.len() <= 1, "{hits:?}");
        if let Some(found) = hits.first() {
            let got = found["change_pct"].as_f64().unwrap_or(f64::NAN);
            // Same direction and clearly there; an undetected neighbouring step shifts the
            // measured size, so it is not held to the planted one.
            assert!(
                got.signum() == planted.signum() && got.abs() > planted.abs() * 0.4,
                "planted {planted}%, found {got}%: {step}"
            );
            hit += 1;
        }
    }
    eprintln!("{hit} of {qualifying} qualifying planted steps found at their commit");
    assert!(
        qualifying >= 5,
        "too few planted steps to check ({qualifying}); {summary}"
    );
    assert!(
        hit * 10 >= qualifying * 8,
        "{hit} of {qualifying} found; {summary}"
    );

    // One SVG per series with change points.
    let series_with_changes = sql_json(
        &g.lake,
        "SELECT count(*) AS n FROM (SELECT DISTINCT testcase, machine, params, metric FROM changes)",
    );
    let svgs: Vec<PathBuf> = std::fs::read_dir(&plots)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(
        Some(svgs.len() as u64),
        series_with_changes[0]["n"].as_u64()
    );
    assert!(
        svgs.iter()
            .all(|p| std::fs::read_to_string(p).is_ok_and(|s| s.contains("<svg")))
    );

    // The dashboard panel over `changes` runs through the Postgres server, with Grafana's
    // $__timeFilter expanded as its backend does, and shows every change point.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(
            crate::common::root().join("infra/grafana/dashboards/lkplake-changes.json"),
        )
        .unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("dashboard JSON: {e}"));
    let panel_sql = dashboard["panels"][0]["targets"][0]["rawSql"]
        .as_str()
        .unwrap_or_default()
        .replace(
            "$__timeFilter(\"time\")",
            "\"time\" BETWEEN '2015-01-01T00:00:00Z' AND '2030-01-01T00:00:00Z'",
        );
    let server = crate::common::Server::start(&g.lake, &[]);
    let out = server.psql(crate::common::PG_PASSWORD, &panel_sql);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        found.len(),
        "{panel_sql}"
    );
    drop(server);

    // Nothing new: nothing recomputed, not one partition read, the same change points.
    let partitions = sql_json(
        &g.lake,
        "SELECT count(*) AS n FROM (SELECT DISTINCT testcase, machine FROM metrics)",
    )[0]["n"]
        .as_u64();
    let (again, summary2) = trend(&g.lake, &[]);
    assert_eq!(count(&summary2, "analysed"), 0, "{summary2}");
    assert_eq!(count(&summary2, "metrics partitions read"), 0, "{summary2}");
    assert_eq!(
        Some(count(&summary2, "skipped as last read")),
        partitions,
        "{summary2}"
    );
    assert_eq!(
        Some(count(&summary2, "unchanged since the last run")),
        Some(count(&summary2, "series:")),
        "{summary2}"
    );
    // Counted from the saved series without reading a partition: as many as the first run saw.
    assert_eq!(
        count(&summary2, "series:"),
        count(&summary, "series:"),
        "{summary} / {summary2}"
    );
    assert_eq!(again, found);

    // New reports: exactly the series they add observations to are recomputed.
    let before_keys = sql_json(&g.lake, "SELECT count(*) AS n FROM reports");
    run_into(&g.lake, &[&g.second]);
    let touched = sql_json(
        &g.lake,
        &format!(
            "SELECT count(*) AS n FROM (SELECT DISTINCT testcase, machine, params, metric FROM metrics \
             WHERE report_key IN (SELECT report_key FROM reports WHERE source LIKE '{}%'))",
            g.second.to_string_lossy()
        ),
    );
    assert!(
        sql_json(&g.lake, "SELECT count(*) AS n FROM reports")[0]["n"].as_u64()
            > before_keys[0]["n"].as_u64()
    );
    let touched_partitions = sql_json(
        &g.lake,
        &format!(
            "SELECT count(*) AS n FROM (SELECT DISTINCT testcase, machine FROM reports \
             WHERE source LIKE '{}%')",
            g.second.to_string_lossy()
        ),
    );
    let (incremental, summary3) = trend(&g.lake, &[]);
    assert_eq!(
        Some(count(&summary3, "analysed") + count(&summary3, "too short")),
        touched[0]["n"].as_u64(),
        "{summary3}"
    );
    assert!(
        count(&summary3, "unchanged since the last run") > 0,
        "{summary3}"
    );
    // Only the partitions the new reports were written to are read again.
    assert_eq!(
        Some(count(&summary3, "metrics partitions read")),
        touched_partitions[0]["n"].as_u64(),
        "{summary3}"
    );
    assert!(count(&summary3, "skipped as last read") > 0, "{summary3}");
    // What the incremental run found is what reading everything again finds.
    let (full, summary4) = trend(&g.lake, &["--full"]);
    assert_eq!(count(&summary4, "skipped as last read"), 0, "{summary4}");
    assert!(
        incremental == full,
        "an incremental run differs from --full"
    );
}

/// Seconds since the epoch of `2019-02-21T16:31:55+00:00` or `2019-02-21 16:31:55` (UTC).
fn epoch(text: &str) -> i64 {
    let digits: Vec<i64> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .take(6)
        .filter_map(|w| w.parse().ok())
        .collect();
    let [y, mo, d, h, mi, s] = digits[..] else {
        panic!("not a time: {text}");
    };
    // Days from civil (Howard Hinnant's algorithm).
    let (y, mo) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + h * 3600 + mi * 60 + s
}
