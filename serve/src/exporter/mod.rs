//! The Prometheus side of the lake: what `lkplake serve --http` exposes on `/metrics` and what
//! `lkplake export openmetrics` writes for backfilling.
//!
//! A scrape never runs a query. The families are computed when the lake moves to a new version
//! (checked every refresh interval) and kept rendered in both formats, so any number of
//! Prometheus servers can scrape as often as they like. Families the lake cannot know (the
//! pipeline's Kafka counters) are handed in from outside with [`Exporter::set_pipeline`].

pub mod exposition;
pub mod history;
pub mod http;

use crate::ServeError;
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
pub use exposition::{Family, Format, Kind, Sample};
use lkplake_query::Engine;
use lkplake_query::columns::{floats, metric_regex, micros, quote, strings};
use std::sync::{Arc, RwLock};

/// What the exporter exposes beyond the headlines, and how much.
#[derive(Debug, Clone)]
pub struct ExporterConfig {
    /// Series whose metric matches this regex are exposed as `lkp_metric_value` too.
    pub metric: Option<String>,
    /// At most this many value series (`lkp_headline_value` and `lkp_metric_value` together);
    /// headline series first, then the most recently reported.
    pub max_series: usize,
}

impl ExporterConfig {
    /// Checks the regex, so a typo is reported at start rather than at the first refresh.
    pub fn validate(&self) -> Result<(), ServeError> {
        selected_series("--export-metric", self.metric.as_deref()).map(drop)
    }
}

/// The SQL condition on `metrics` rows of the value series: headline rows, and with a metric
/// regex (passed as `flag`) also the rows of matching metrics.
pub(crate) fn selected_series(flag: &str, metric: Option<&str>) -> Result<String, ServeError> {
    Ok(match metric {
        Some(re) => {
            metric_regex(flag, re)?;
            format!("(is_headline OR regexp_like(metric, {}))", quote(re))
        }
        None => "is_headline".to_owned(),
    })
}

/// The lake's families, rendered once per lake version.
#[derive(Debug, Default)]
struct Rendered {
    versions: Vec<Option<u64>>,
    prometheus: String,
    /// Without the closing `# EOF`: pipeline families come after it.
    openmetrics: String,
}

/// The `/metrics` content of one lake.
pub struct Exporter {
    engine: Arc<Engine>,
    config: ExporterConfig,
    rendered: RwLock<Arc<Rendered>>,
    pipeline: RwLock<Arc<Vec<Family>>>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("lake", &self.engine.url())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Exporter {
    /// An exporter over `engine`; refuses a configuration that cannot work (see its error).
    pub fn new(engine: Arc<Engine>, config: ExporterConfig) -> Result<Self, ServeError> {
        config.validate()?;
        Ok(Self {
            engine,
            config,
            rendered: RwLock::default(),
            pipeline: RwLock::default(),
        })
    }

    /// The scrape body in `format`.
    pub fn scrape(&self, format: Format) -> String {
        let rendered = Arc::clone(&self.rendered.read().unwrap_or_else(|e| e.into_inner()));
        let pipeline = Arc::clone(&self.pipeline.read().unwrap_or_else(|e| e.into_inner()));
        let mut out = match format {
            Format::Prometheus => rendered.prometheus.clone(),
            Format::OpenMetrics => rendered.openmetrics.clone(),
        };
        for family in pipeline.iter() {
            family.write(format, &mut out);
        }
        if format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        out
    }

    /// Replaces the pipeline's families (Kafka topics, transformer progress).
    pub fn set_pipeline(&self, families: Vec<Family>) {
        *self.pipeline.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(families);
    }

    /// Recomputes the lake's families when the engine has published a new version since the
    /// last time; true when it did.
    pub async fn refresh(&self) -> Result<bool, ServeError> {
        // The published versions, read before the queries: a version published in between is
        // rendered under the older numbers and rendered again next time, never the other way
        // round (which left `lkp_lake_rows` at an old count for good).
        let health = self.engine.health();
        let versions: Vec<Option<u64>> = health.iter().map(|t| t.version).collect();
        let unchanged = {
            let rendered = self.rendered.read().unwrap_or_else(|e| e.into_inner());
            !rendered.versions.is_empty() && rendered.versions == versions
        };
        if unchanged {
            return Ok(false);
        }
        let mut families = self.value_families().await?;
        families.push(self.reports_family().await?);
        families.extend(self.regressions_families().await?);
        families.extend(self.lake_families(&health).await?);
        // Thousands of series make megabytes of text: rendered off the async workers.
        let rendered = tokio::task::spawn_blocking(move || Rendered {
            versions,
            prometheus: exposition::render(&families, Format::Prometheus),
            openmetrics: families.iter().fold(String::new(), |mut out, f| {
                f.write(Format::OpenMetrics, &mut out);
                out
            }),
        })
        .await
        .map_err(|source| ServeError::Worker {
            what: "rendering /metrics",
            source,
        })?;
        *self.rendered.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(rendered);
        Ok(true)
    }

    async fn collect(&self, sql: &str) -> Result<Vec<RecordBatch>, ServeError> {
        Ok(self.engine.context().sql(sql).await?.collect().await?)
    }

    /// `lkp_headline_value`, `lkp_metric_value` and how many series the bound left out.
    async fn value_families(&self) -> Result<Vec<Family>, ServeError> {
        let selected = selected_series("--export-metric", self.config.metric.as_deref())?;
        // The newest head-commit measurement of each series: what the last report says the
        // series is at now.
        let sql = format!(
            "SELECT testcase, machine, params, metric, is_headline, \
                    last_value(value ORDER BY time) AS value, max(time) AS last_time \
             FROM metrics WHERE role = 'head' AND time IS NOT NULL AND {selected} \
             GROUP BY testcase, machine, params, metric, is_headline \
             ORDER BY is_headline DESC, last_time DESC, testcase, machine, params, metric"
        );
        let mut headline = Family::gauge(
            "lkp_headline_value",
            "Latest head-commit value of each headline series (the metric a report is about), from the newest report measuring it.",
        );
        let mut other = Family::gauge(
            "lkp_metric_value",
            "Latest head-commit value of each series whose metric matches --export-metric, from the newest report measuring it.",
        );
        let mut total = 0usize;
        for batch in self.collect(&sql).await? {
            let [testcase, machine, params, metric] =
                [0, 1, 2, 3].map(|i| strings(batch.column(i)));
            let (testcase, machine, params, metric) = (testcase?, machine?, params?, metric?);
            let is_headline = batch.column(4).as_boolean();
            let value = floats(batch.column(5))?;
            for row in 0..batch.num_rows() {
                total += 1;
                if total > self.config.max_series {
                    continue;
                }
                let family = if is_headline.value(row) {
                    &mut headline
                } else {
                    &mut other
                };
                family.samples.push(Sample {
                    labels: vec![
                        ("testcase", testcase.value(row).to_owned()),
                        ("machine", machine.value(row).to_owned()),
                        ("params", params.value(row).to_owned()),
                        ("metric", metric.value(row).to_owned()),
                    ],
                    value: value.value(row),
                });
            }
        }
        let kept = total.min(self.config.max_series);
        Ok(vec![
            headline,
            other,
            Family::gauge(
                "lkp_exporter_series",
                "Value series exposed (lkp_headline_value and lkp_metric_value).",
            )
            .with(vec![], kept as f64),
            Family::gauge(
                "lkp_exporter_series_dropped",
                "Value series left out by --export-max-series (the least recently reported).",
            )
            .with(vec![], (total - kept) as f64),
        ])
    }

    /// `lkp_reports{testcase,kind}`.
    async fn reports_family(&self) -> Result<Family, ServeError> {
        let sql = "SELECT testcase, coalesce(kind, '') AS kind, count(DISTINCT report_key) AS reports \
                   FROM reports GROUP BY 1, 2 ORDER BY 1, 2";
        let mut family = Family::gauge(
            "lkp_reports",
            "Reports in the lake, by testcase and kind (regression or improvement).",
        );
        for batch in self.collect(sql).await? {
            let testcase = strings(batch.column(0))?;
            let kind = strings(batch.column(1))?;
            let count = floats(batch.column(2))?;
            for row in 0..batch.num_rows() {
                family = family.with(
                    vec![
                        ("testcase", testcase.value(row).to_owned()),
                        ("kind", kind.value(row).to_owned()),
                    ],
                    count.value(row),
                );
            }
        }
        Ok(family)
    }

    /// `lkp_regressions{status,subsystem}` and when the oldest untriaged regression was first
    /// reported: nothing a person or a fix answered yet (no triage, status open or discussed).
    /// A lake without the `regressions` view (no `failures` or `mentions` yet) has neither.
    async fn regressions_families(&self) -> Result<Vec<Family>, ServeError> {
        if !self.engine.context().table_exist("regressions")? {
            return Ok(Vec::new());
        }
        let sql = "SELECT status, coalesce(subsystem, '') AS subsystem, count(*) AS culprits \
                   FROM regressions WHERE verdict = 'regression' GROUP BY 1, 2 ORDER BY 1, 2";
        let mut by_status = Family::gauge(
            "lkp_regressions",
            "Culprit commits of regressions, by status (a person's triage, else the automatic one) and subsystem.",
        );
        for batch in self.collect(sql).await? {
            let status = strings(batch.column(0))?;
            let subsystem = strings(batch.column(1))?;
            let count = floats(batch.column(2))?;
            for row in 0..batch.num_rows() {
                by_status = by_status.with(
                    vec![
                        ("status", status.value(row).to_owned()),
                        ("subsystem", subsystem.value(row).to_owned()),
                    ],
                    count.value(row),
                );
            }
        }
        let mut oldest = Family::gauge(
            "lkp_regressions_oldest_untriaged_timestamp_seconds",
            "First report of the oldest regression nobody answered with a triage or a fix (status open or discussed); its age is time() minus this.",
        );
        let sql = "SELECT min(first_report) FROM regressions WHERE verdict = 'regression' \
                   AND triage_status IS NULL AND auto_status IN ('open', 'discussed')";
        let batches = self.collect(sql).await?;
        if let Some(batch) = batches.first().filter(|b| b.num_rows() > 0) {
            let date = micros(batch.column(0))?;
            if date.is_valid(0) {
                oldest = oldest.with(vec![], date.value(0) as f64 / 1e6);
            }
        }
        Ok(vec![by_status, oldest])
    }

    /// Rows, versions and commit times of the tables, and the newest report's date.
    async fn lake_families(
        &self,
        health: &[lkplake_lake::TableHealth],
    ) -> Result<Vec<Family>, ServeError> {
        let mut rows = Family::gauge("lkp_lake_rows", "Rows in each lake table.");
        for table in health {
            let batches = self
                .collect(&format!("SELECT count(*) FROM {}", table.name))
                .await?;
            let count = batches
                .first()
                .filter(|b| b.num_rows() > 0)
                .map(|b| cast(b.column(0), &DataType::Int64))
                .transpose()?
                .map_or(0, |c| c.as_primitive::<Int64Type>().value(0));
            rows = rows.with(vec![("table", table.name.to_owned())], count as f64);
        }
        let mut version = Family::gauge("lkp_lake_version", "Delta version of each lake table.");
        let mut committed = Family::gauge(
            "lkp_lake_last_commit_timestamp_seconds",
            "When each lake table was last committed to.",
        );
        for table in health {
            if let Some(v) = table.version {
                version = version.with(vec![("table", table.name.to_owned())], v as f64);
            }
            if let Some(ms) = table.committed_ms {
                committed = committed.with(vec![("table", table.name.to_owned())], ms as f64 / 1e3);
            }
        }
        let mut last_report = Family::gauge(
            "lkp_lake_last_report_timestamp_seconds",
            "Date of the newest report in the lake.",
        );
        let batches = self.collect("SELECT max(date) FROM reports").await?;
        if let Some(batch) = batches.first().filter(|b| b.num_rows() > 0) {
            let date = micros(batch.column(0))?;
            if date.is_valid(0) {
                last_report = last_report.with(vec![], date.value(0) as f64 / 1e6);
            }
        }
        Ok(vec![rows, version, committed, last_report])
    }
}
