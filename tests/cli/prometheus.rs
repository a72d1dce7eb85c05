//! The Prometheus side with a real Prometheus and promtool (Debian's `prometheus` package,
//! installed by `./infra/test.sh`): `lkplake serve --http` scraped and read back through
//! Prometheus' HTTP API, its exposition linted by `promtool check metrics`, and
//! `lkplake export openmetrics` turned into TSDB blocks by `promtool tsdb create-blocks-from
//! openmetrics` that a Prometheus then answers the lake's history from.

use crate::common::{
    Server, free_port, generate, http_get, lkplake, root, run_into, seed_lake, sql_json, temp_dir,
    temp_dir_in,
};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Seed 002's headline: vm-scalability.throughput went from 235,200,000 to 316,400,000.
const THROUGHPUT_LINE_START: &str =
    "lkp_headline_value{testcase=\"vm-scalability\",machine=\"lkp-csl-2sp3\",params=\"";
const THROUGHPUT_LINE_END: &str = "\",metric=\"vm-scalability.throughput\"} 316400000";

/// Percent-encodes a query-string value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `lkplake serve` with the exporter on a free port.
fn exporter(lake: &Path, extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["--http", listen.as_str(), "--refresh", "200ms"];
    args.extend_from_slice(extra);
    (Server::start(lake, &args), port)
}

/// A real regression report (tests/fixtures/same-key, culprit 1e8017bb42, subject tag
/// `mm/memcontrol` from its title, sent Thu, 9 Jul 2026 16:23:24 +0800) nobody answered: one
/// open regression, the oldest untriaged; once a person acknowledges it, neither.
#[test]
fn the_exporter_counts_regressions_by_status_and_dates_the_oldest_nobody_answered() {
    let lake = temp_dir("exporter-regressions");
    run_into(
        &lake,
        &[&root().join("tests/fixtures/same-key/netperf-three-tests.eml")],
    );
    let (server, port) = exporter(&lake, &[]);
    let (_, text) = http_get(port, "/metrics", None);
    assert!(
        text.contains("lkp_regressions{status=\"open\",subsystem=\"mm/memcontrol\"} 1\n"),
        "{text}\n{}",
        server.log()
    );
    // 2026-07-09 08:23:24 UTC.
    assert!(
        text.contains("lkp_regressions_oldest_untriaged_timestamp_seconds 1783585404\n"),
        "{text}"
    );
    let lake_arg = lake.to_string_lossy();
    let out = lkplake(
        &[
            "triage",
            "--lake",
            &lake_arg,
            "1e8017bb42",
            "--status",
            "acknowledged",
            "--by",
            "a",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The exporter recomputes once it sees the lake's new `triage` table (every 200 ms).
    let deadline = Instant::now() + Duration::from_secs(60);
    let acknowledged = "lkp_regressions{status=\"acknowledged\",subsystem=\"mm/memcontrol\"} 1\n";
    let text = loop {
        let (_, text) = http_get(port, "/metrics", None);
        if text.contains(acknowledged) || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(text.contains(acknowledged), "{text}\n{}", server.log());
    assert!(!text.contains("status=\"open\""), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("lkp_regressions_oldest_untriaged_timestamp_seconds ")),
        "{text}"
    );
}

/// A Prometheus on a free loopback port, killed on drop.
struct Prometheus {
    port: u16,
    child: Child,
    log: PathBuf,
}

impl Prometheus {
    fn start(config: &str, storage: &Path) -> Self {
        let dir = temp_dir("prometheus");
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap_or_else(|e| panic!("{e}"));
        let log = dir.join("prometheus.log");
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", storage.display()))
            // Backfilled history is years old: keep it.
            .arg("--storage.tsdb.retention.time=100y")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}")))
            .spawn()
            .unwrap_or_else(|e| {
                panic!("prometheus (Debian package `prometheus`) must be installed: {e}")
            });
        let mut prometheus = Self { port, child, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                && http_get(port, "/-/ready", None).0.contains(" 200 ")
            {
                return prometheus;
            }
            if let Ok(Some(status)) = prometheus.child.try_wait() {
                panic!("prometheus exited with {status}: {}", prometheus.log());
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready in 60 s: {}",
                prometheus.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `/api/v1/query`: the result array.
    fn query(&self, promql: &str, time: Option<f64>) -> Vec<Value> {
        let mut path = format!("/api/v1/query?query={}", encode(promql));
        if let Some(t) = time {
            path.push_str(&format!("&time={t}"));
        }
        let (head, body) = http_get(self.port, &path, None);
        let answer: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{promql}: {e}: {head}\n{body}"));
        assert_eq!(answer["status"], "success", "{promql}: {body}");
        answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// Where promtool writes backfilled blocks and a Prometheus then reads them: a folder in RAM
/// (`/dev/shm`) when that has a GiB free, else under the temporary folder; removed on drop.
/// `promtool tsdb create-blocks-from` preallocates 512 MiB for its chunk file (`fallocate`),
/// whatever the blocks hold, and truncates it at the end: a CI machine whose disk was nearly
/// full refused the preallocation (ENOSPC) for blocks of a few hundred kilobytes. In RAM the
/// preallocation is pages zeroed and freed again, about 0.26 s a block: promtool takes 39 s
/// for this test's 150 blocks there, against 2.3 s on disk, the price of not depending on the
/// disk's free space.
struct BlocksDir(PathBuf);

impl BlocksDir {
    const RAM: &'static str = "/dev/shm";

    fn new() -> Self {
        let ram = Path::new(Self::RAM);
        let base = if available_bytes(ram).is_some_and(|b| b >= 1 << 30) {
            ram.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        Self(temp_dir_in(&base, "tsdb"))
    }
}

impl Drop for BlocksDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bytes free for an unprivileged writer on the file system holding `path`, as `df` tells
/// (the standard library has no `statvfs`); `None` when it cannot tell.
fn available_bytes(path: &Path) -> Option<u64> {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sample_value(sample: &Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no value in {sample}"))
}

/// What the lake says each headline series is at now: the head value of its newest report.
fn latest_headline_values(lake: &Path) -> Vec<Value> {
    sql_json(
        lake,
        "SELECT testcase, machine, params, metric, last_value(value ORDER BY time) AS value \
         FROM metrics WHERE is_headline AND role = 'head' AND time IS NOT NULL \
         GROUP BY testcase, machine, params, metric ORDER BY testcase, machine, params, metric",
    )
}

#[test]
fn the_exporter_serves_headlines_reports_and_lake_health_that_promtool_accepts() {
    let lake = seed_lake("exporter");
    let (server, port) = exporter(&lake, &[]);

    let (head, text) = http_get(port, "/metrics", None);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_lowercase()
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with(THROUGHPUT_LINE_START) && l.ends_with(THROUGHPUT_LINE_END)),
        "{text}\n{}",
        server.log()
    );
    // One headline sample per headline series of the lake, at its newest value.
    let expected = latest_headline_values(&lake);
    let headline_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("lkp_headline_value{"))
        .collect();
    assert_eq!(headline_lines.len(), expected.len(), "{text}");
    for series in &expected {
        let line = format!(
            "lkp_headline_value{{testcase=\"{}\",machine=\"{}\",params=\"{}\",metric=\"{}\"}} {}",
            series["testcase"].as_str().unwrap_or_default(),
            series["machine"].as_str().unwrap_or_default(),
            series["params"].as_str().unwrap_or_default(),
            series["metric"].as_str().unwrap_or_default(),
            series["value"].as_f64().unwrap_or(f64::NAN),
        );
        assert!(headline_lines.contains(&line.as_str()), "{line}\n{text}");
    }
    // The five seed reports; the lake of `lkplake run` over them has 560 metric rows.
    assert!(
        text.contains("lkp_lake_rows{table=\"metrics\"} 560\n"),
        "{text}"
    );
    let reports: f64 = text
        .lines()
        .filter(|l| l.starts_with("lkp_reports{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let tests = sql_json(
        &lake,
        "SELECT count(*) AS n FROM (SELECT DISTINCT testcase, kind, report_key FROM reports)",
    );
    assert_eq!(Some(reports), tests[0]["n"].as_f64(), "{text}");
    let newest = sql_json(
        &lake,
        "SELECT CAST(to_unixtime(max(date)) AS BIGINT) AS t FROM reports",
    );
    let newest = newest[0]["t"].as_i64().unwrap_or_default();
    assert!(
        text.contains(&format!(
            "lkp_lake_last_report_timestamp_seconds {newest}\n"
        )),
        "{newest}: {text}"
    );

    // promtool lints the text format: no output and exit 0 when there is nothing to say.
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("promtool (Debian package `prometheus`) must be installed: {e}")
        });
    if let Some(mut stdin) = promtool.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let lint = promtool
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        lint.status.success() && lint.stdout.is_empty() && lint.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );

    // Prometheus asks for OpenMetrics first and gets it, closed by # EOF.
    let (head, open) = http_get(
        port,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    );
    assert!(
        head.to_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{head}"
    );
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(
        open.lines()
            .any(|l| l.starts_with(THROUGHPUT_LINE_START) && l.ends_with(THROUGHPUT_LINE_END)),
        "{open}"
    );
    assert_eq!(
        http_get(port, "/nothing", None).0.lines().next(),
        Some("HTTP/1.1 404 Not Found")
    );
}

#[test]
fn the_exporter_bounds_its_series_and_adds_the_metrics_a_regex_selects() {
    let lake = seed_lake("exporter-bounds");
    let headlines = latest_headline_values(&lake).len();
    assert!(headlines > 1, "the seeds have several headline series");

    let (_server, port) = exporter(&lake, &["--export-max-series", "1"]);
    let (_, text) = http_get(port, "/metrics", None);
    let samples = |name: &str| text.lines().filter(|l| l.starts_with(name)).count();
    assert_eq!(samples("lkp_headline_value{"), 1, "{text}");
    assert!(text.contains("lkp_exporter_series 1\n"), "{text}");
    assert!(
        text.contains(&format!("lkp_exporter_series_dropped {}\n", headlines - 1)),
        "{text}"
    );

    // Seed 002's table also has vm-scalability.median (2.352e+08 -> 3.164e+08), not its
    // headline; no other seed measures it.
    let (_server, port) = exporter(&lake, &["--export-metric", "^vm-scalability\\.median$"]);
    let (_, text) = http_get(port, "/metrics", None);
    let median: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("lkp_metric_value{"))
        .collect();
    assert_eq!(median.len(), 1, "{text}");
    assert!(
        median[0].starts_with(
            "lkp_metric_value{testcase=\"vm-scalability\",machine=\"lkp-csl-2sp3\",params=\""
        ) && median[0].ends_with("\",metric=\"vm-scalability.median\"} 316400000"),
        "{text}"
    );

    let out = lkplake(
        &[
            "serve",
            "--lake",
            &lake.to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--export-metric",
            "(unclosed",
        ],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--export-metric \"(unclosed\" is not a valid regex"),
        "{err}"
    );
}

#[test]
fn prometheus_scrapes_the_exporter_and_answers_what_the_lake_holds() {
    let lake = seed_lake("exporter-scraped");
    let (server, port) = exporter(&lake, &["--export-metric", "^vm-scalability\\.median$"]);
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lkplake\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
    );
    let prometheus = Prometheus::start(&config, &temp_dir("prometheus-data"));

    let expected = latest_headline_values(&lake);
    let deadline = Instant::now() + Duration::from_secs(60);
    let scraped = loop {
        let result = prometheus.query("lkp_headline_value", None);
        if result.len() == expected.len() {
            break result;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus has {} of {} headline series after 60 s: {}\n{}",
            result.len(),
            expected.len(),
            prometheus.log(),
            server.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for series in &expected {
        let found = scraped
            .iter()
            .find(|s| {
                ["testcase", "machine", "params", "metric"]
                    .iter()
                    .all(|k| s["metric"][k] == series[k])
            })
            .unwrap_or_else(|| panic!("{series} not scraped: {scraped:?}"));
        assert_eq!(
            Some(sample_value(found)),
            series["value"].as_f64(),
            "{series}"
        );
        assert_eq!(found["metric"]["job"], "lkplake");
    }
    let throughput = prometheus.query(
        "lkp_headline_value{testcase=\"vm-scalability\",machine=\"lkp-csl-2sp3\",metric=\"vm-scalability.throughput\"}",
        None,
    );
    assert_eq!(throughput.len(), 1, "{throughput:?}");
    assert_eq!(sample_value(&throughput[0]), 316_400_000.0);
    let rows = prometheus.query("lkp_lake_rows{table=\"metrics\"}", None);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(sample_value(&rows[0]), 560.0);

    // Every panel of the exporter dashboard has data, its variables set to All.
    let path = root().join("infra/grafana/dashboards/lkplake-exporter.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut panels = 0;
    for panel in dashboard["panels"].as_array().cloned().unwrap_or_default() {
        for target in panel["targets"].as_array().cloned().unwrap_or_default() {
            let Some(expr) = target["expr"].as_str() else {
                continue;
            };
            let expr = ["testcase", "machine", "metric", "any_metric"]
                .iter()
                .fold(expr.to_owned(), |e, v| {
                    e.replace(&format!("\"${v}\""), "\".*\"")
                });
            assert!(!expr.contains('$'), "unexpanded variable in {expr}");
            let result = prometheus.query(&expr, None);
            assert!(
                !result.is_empty(),
                "panel {:?}: {expr} has no data",
                panel["title"]
            );
            panels += 1;
        }
    }
    assert!(panels >= 8, "{panels} PromQL panels");
}

#[test]
fn an_openmetrics_export_backfills_prometheus_with_the_lakes_history() {
    let dir = temp_dir("backfill");
    let reports = dir.join("reports");
    generate(
        &reports,
        &["--reports", "150", "--seed", "11", "--years", "2"],
    );
    let lake = dir.join("lake");
    run_into(&lake, &[&reports]);

    let export = dir.join("history.om");
    let out = lkplake(
        &[
            "export",
            "openmetrics",
            "--lake",
            &lake.to_string_lossy(),
            "--out",
            &export.to_string_lossy(),
        ],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let text = std::fs::read_to_string(&export).unwrap_or_default();
    assert!(text.ends_with("# EOF\n"));

    // Every headline observation of the lake, one per series and report date.
    let history = sql_json(
        &lake,
        "SELECT testcase, machine, params, metric, CAST(to_unixtime(time) AS BIGINT) AS t, \
                avg(value) AS value \
         FROM metrics WHERE is_headline AND role = 'head' AND time IS NOT NULL \
         GROUP BY testcase, machine, params, metric, time",
    );
    assert!(
        err.contains(&format!("{} samples", history.len())),
        "{err} vs {} observations",
        history.len()
    );

    let blocks = BlocksDir::new();
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&export)
        .arg(&blocks.0)
        .output()
        .unwrap_or_else(|e| panic!("promtool must be installed: {e}"));
    assert!(
        out.status.success(),
        "promtool tsdb create-blocks-from openmetrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let prometheus = Prometheus::start("global:\n  scrape_interval: 1h\n", &blocks.0);
    // The series measured most often: its whole history, point by point.
    let mut by_series: std::collections::BTreeMap<[String; 4], Vec<(i64, f64)>> =
        std::collections::BTreeMap::new();
    for row in &history {
        let key = ["testcase", "machine", "params", "metric"]
            .map(|k| row[k].as_str().unwrap_or_default().to_owned());
        by_series.entry(key).or_default().push((
            row["t"].as_i64().unwrap_or_default(),
            row["value"].as_f64().unwrap_or(f64::NAN),
        ));
    }
    let (key, mut points) = by_series
        .into_iter()
        .max_by_key(|(_, points)| points.len())
        .unwrap_or_else(|| panic!("no headline history"));
    points.sort_by_key(|p| p.0);
    assert!(points.len() >= 3, "{key:?}: {points:?}");
    let last = points.last().map_or(0, |p| p.0);
    let selector = format!(
        "lkp_headline_value{{testcase=\"{}\",machine=\"{}\",params=\"{}\",metric=\"{}\"}}",
        key[0], key[1], key[2], key[3]
    );
    let result = prometheus.query(&format!("{selector}[30y]"), Some(last as f64));
    assert_eq!(result.len(), 1, "{result:?}\n{}", prometheus.log());
    let got: Vec<(i64, f64)> = result[0]["values"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|v| {
            (
                v[0].as_f64().unwrap_or_default() as i64,
                v[1].as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(f64::NAN),
            )
        })
        .collect();
    assert_eq!(got, points, "{selector}");

    // And every sample of the export is in the blocks.
    let newest = history
        .iter()
        .filter_map(|r| r["t"].as_i64())
        .max()
        .unwrap_or_default();
    let counted = prometheus.query(
        "sum(count_over_time(lkp_headline_value[30y]))",
        Some(newest as f64),
    );
    let total = history.len() as f64;
    assert_eq!(counted.len(), 1, "{counted:?}");
    assert_eq!(sample_value(&counted[0]), total);
}

#[test]
fn promtool_accepts_the_shipped_prometheus_config() {
    let config = root().join("infra/prometheus/prometheus.yml");
    let out = Command::new("promtool")
        .args(["check", "config", "--syntax-only"])
        .arg(&config)
        .output()
        .unwrap_or_else(|e| panic!("promtool must be installed: {e}"));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
