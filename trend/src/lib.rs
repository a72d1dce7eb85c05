//! Trend analysis (`lkplake trend`): where each series stepped up or down over the years, and
//! which commit range did it.
//!
//! A series (testcase, machine, params, metric) becomes one observation per commit it was
//! measured on — the base and head columns of every report, averaged when a commit was measured
//! more than once — in time order, the base before the head within a report. [`detect`] finds
//! the change points; each is labelled a regression or an improvement from the metric's
//! direction and written to the lake's `changes` table, which SQL and Grafana read like any
//! other. `trend_series` remembers what each series looked like when it was last analysed, so a
//! re-run recomputes only series with new observations (or new settings).

#![warn(missing_docs)]

pub mod detect;
mod error;
pub mod groups;
mod plot;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
    UInt32Array, UInt64Array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, UInt64Type};
pub use error::TrendError;
use futures::StreamExt;
use lkplake_lake::derived;
use lkplake_query::Engine;
use lkplake_query::columns::{metric_regex, micros, quote, strings};
use lkplake_schemas::tables::{
    CHANGE_GROUPS_TABLE, CHANGES, CHANGES_TABLE, METRICS_TABLE, TREND_PARTITIONS,
    TREND_PARTITIONS_TABLE, TREND_SERIES, TREND_SERIES_TABLE,
};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

/// What to analyse and how.
#[derive(Debug, Clone)]
pub struct TrendConfig {
    /// Only this testcase.
    pub testcase: Option<String>,
    /// Only this machine.
    pub machine: Option<String>,
    /// A regular expression the metric must match.
    pub metric: Option<String>,
    /// Only observations at or after this time (`2024-01-01`, RFC 3339, ...).
    pub since: Option<String>,
    /// The change-point test's settings.
    pub detect: detect::Params,
    /// Series with fewer observations are not analysed (a step needs points on both sides).
    pub min_observations: usize,
    /// Recompute every series, ignoring what the last run saved.
    pub full: bool,
    /// Draw each series that has change points as an SVG file here.
    pub plot_dir: Option<PathBuf>,
}

impl TrendConfig {
    /// The settings a saved result depends on; a change recomputes the series.
    fn fingerprint(&self) -> String {
        format!(
            "window={} pvalue={} min_change={} min_obs={} since={}",
            self.detect.window,
            self.detect.max_pvalue,
            self.detect.min_magnitude,
            self.min_observations,
            self.since.as_deref().unwrap_or("-")
        )
    }
}

/// What makes a series: one metric of one testcase with one set of parameters on one machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    /// e.g. `vm-scalability`.
    pub testcase: String,
    /// e.g. `lkp-csl-2sp3`.
    pub machine: String,
    /// Canonical `k=v,...` parameters.
    pub params: String,
    /// e.g. `vm-scalability.throughput`.
    pub metric: String,
}

impl std::fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}/{} [{}]",
            self.testcase, self.machine, self.metric, self.params
        )
    }
}

/// One point of a series: a commit's value (the mean when it was measured more than once).
#[derive(Debug, Clone)]
pub struct Observation {
    /// Microseconds since the epoch, UTC.
    pub time: i64,
    /// The commit measured.
    pub commit: String,
    /// Its value.
    pub value: f64,
}

/// One change point of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The series that changed.
    pub series: SeriesKey,
    /// Time of the first observation after the change.
    pub time: i64,
    /// Time of the last observation before it.
    pub time_before: i64,
    /// The commit range that holds the change ends here ...
    pub last_commit_before: String,
    /// ... and starts here.
    pub first_commit_after: String,
    /// Mean of the observations since the previous change point (or the start).
    pub mean_before: f64,
    /// Mean of the observations up to the next change point (or the end).
    pub mean_after: f64,
    /// `mean_after` against `mean_before`, in percent, signed.
    pub change_pct: f64,
    /// Two-sided p-value of the t-test between the segments either side.
    pub pvalue: f64,
    /// `regression` or `improvement`; none for metrics without a direction.
    pub kind: Option<String>,
    /// The metric's direction (`higher_is_better`, `lower_is_better`), if known.
    pub direction: Option<String>,
    /// Observations in the segment before.
    pub observations_before: u32,
    /// Observations in the segment after.
    pub observations_after: u32,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrendSummary {
    /// Series matching the filters.
    pub series: u64,
    /// Series analysed in this run.
    pub analysed: u64,
    /// Series skipped because nothing changed since the last run.
    pub unchanged: u64,
    /// Series with too few observations to analyse.
    pub too_short: u64,
    /// Change points in the series matching the filters.
    pub changes: u64,
    /// SVG plots written.
    pub plots: u64,
    /// `metrics` partitions read in this run.
    pub partitions_read: u64,
    /// Partitions not read: their files are those the last run read whole, with the same
    /// settings, so none of their series can have changed.
    pub partitions_skipped: u64,
}

/// Called with (metrics partitions read, partitions to read) as the run goes. Partitions,
/// not series: how many series a partition holds is known only once it is read, and counting
/// them first was a scan of every partition to be read, a quarter of a full run's time.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

fn filters(config: &TrendConfig) -> String {
    let mut where_ = vec!["time IS NOT NULL".to_owned()];
    if let Some(t) = &config.testcase {
        where_.push(format!("testcase = {}", quote(t)));
    }
    if let Some(m) = &config.machine {
        where_.push(format!("machine = {}", quote(m)));
    }
    if let Some(re) = &config.metric {
        where_.push(format!("metric ~ {}", quote(re)));
    }
    if let Some(since) = &config.since {
        where_.push(format!("time >= {}", quote(since)));
    }
    where_.join(" AND ")
}

/// The analysis result a series had at the last run.
#[derive(Debug, Clone)]
struct Saved {
    observations: u64,
    last_time: i64,
    settings: String,
}

async fn saved_state(engine: &Engine) -> Result<HashMap<SeriesKey, Saved>, TrendError> {
    let mut state = HashMap::new();
    if !engine.has_table(TREND_SERIES_TABLE) {
        return Ok(state);
    }
    let batches = engine
        .sql("SELECT testcase, machine, params, metric, observations, last_time, settings FROM trend_series")
        .await?
        .collect()
        .await?;
    for b in &batches {
        let (t, m, p, me, s) = (
            strings(b.column(0))?,
            strings(b.column(1))?,
            strings(b.column(2))?,
            strings(b.column(3))?,
            strings(b.column(6))?,
        );
        let obs = cast(b.column(4), &DataType::UInt64)?;
        let obs = obs.as_primitive::<UInt64Type>();
        let last = micros(b.column(5))?;
        for i in 0..b.num_rows() {
            state.insert(
                SeriesKey {
                    testcase: t.value(i).to_owned(),
                    machine: m.value(i).to_owned(),
                    params: p.value(i).to_owned(),
                    metric: me.value(i).to_owned(),
                },
                Saved {
                    observations: obs.value(i),
                    last_time: last.value(i),
                    settings: s.value(i).to_owned(),
                },
            );
        }
    }
    Ok(state)
}

/// How many series `trend_series` holds for which `counts` is true, given a series' testcase,
/// machine, metric and settings.
async fn count_saved(
    engine: &Engine,
    counts: impl Fn(&str, &str, &str, &str) -> bool,
) -> Result<u64, TrendError> {
    if !engine.has_table(TREND_SERIES_TABLE) {
        return Ok(0);
    }
    let batches = engine
        .sql("SELECT testcase, machine, metric, settings FROM trend_series")
        .await?
        .collect()
        .await?;
    let mut n = 0;
    for b in &batches {
        let (t, m, me, s) = (
            strings(b.column(0))?,
            strings(b.column(1))?,
            strings(b.column(2))?,
            strings(b.column(3))?,
        );
        n += (0..b.num_rows())
            .filter(|&i| counts(t.value(i), m.value(i), me.value(i), s.value(i)))
            .count() as u64;
    }
    Ok(n)
}

async fn saved_changes(engine: &Engine) -> Result<Vec<Change>, TrendError> {
    if !engine.has_table(CHANGES_TABLE) {
        return Ok(Vec::new());
    }
    let batches = engine.sql("SELECT * FROM changes").await?.collect().await?;
    let mut out = Vec::new();
    for b in &batches {
        let col = |name: &str| {
            b.column_by_name(name)
                .cloned()
                .ok_or_else(|| TrendError::MissingColumn {
                    table: CHANGES_TABLE,
                    column: name.to_owned(),
                })
        };
        let (t, m, p, me) = (
            strings(&col("testcase")?)?,
            strings(&col("machine")?)?,
            strings(&col("params")?)?,
            strings(&col("metric")?)?,
        );
        let (time, time_before) = (micros(&col("time")?)?, micros(&col("time_before")?)?);
        let (before, after) = (
            strings(&col("last_commit_before")?)?,
            strings(&col("first_commit_after")?)?,
        );
        let floats = |name: &str| -> Result<Float64Array, TrendError> {
            Ok(cast(&col(name)?, &DataType::Float64)?
                .as_primitive::<Float64Type>()
                .clone())
        };
        let (mb, ma, pct, pv) = (
            floats("mean_before")?,
            floats("mean_after")?,
            floats("change_pct")?,
            floats("pvalue")?,
        );
        let (kind, direction) = (strings(&col("kind")?)?, strings(&col("direction")?)?);
        let (ob, oa) = (
            floats("observations_before")?,
            floats("observations_after")?,
        );
        for i in 0..b.num_rows() {
            out.push(Change {
                series: SeriesKey {
                    testcase: t.value(i).to_owned(),
                    machine: m.value(i).to_owned(),
                    params: p.value(i).to_owned(),
                    metric: me.value(i).to_owned(),
                },
                time: time.value(i),
                time_before: time_before.value(i),
                last_commit_before: before.value(i).to_owned(),
                first_commit_after: after.value(i).to_owned(),
                mean_before: mb.value(i),
                mean_after: ma.value(i),
                change_pct: pct.value(i),
                pvalue: pv.value(i),
                kind: (!kind.is_null(i)).then(|| kind.value(i).to_owned()),
                direction: (!direction.is_null(i)).then(|| direction.value(i).to_owned()),
                observations_before: ob.value(i) as u32,
                observations_after: oa.value(i) as u32,
            });
        }
    }
    Ok(out)
}

/// A partition as the last run that read it whole saw it: its files' fingerprint and the
/// settings.
type PartitionState = HashMap<(String, String), (String, String)>;

async fn saved_partitions(engine: &Engine) -> Result<PartitionState, TrendError> {
    let mut saved = HashMap::new();
    if !engine.has_table(TREND_PARTITIONS_TABLE) {
        return Ok(saved);
    }
    let batches = engine
        .sql("SELECT testcase, machine, files, settings FROM trend_partitions")
        .await?
        .collect()
        .await?;
    for b in &batches {
        let (t, m, f, s) = (
            strings(b.column(0))?,
            strings(b.column(1))?,
            strings(b.column(2))?,
            strings(b.column(3))?,
        );
        for i in 0..b.num_rows() {
            saved.insert(
                (t.value(i).to_owned(), m.value(i).to_owned()),
                (f.value(i).to_owned(), s.value(i).to_owned()),
            );
        }
    }
    Ok(saved)
}

fn kind_of(direction: Option<&str>, change: f64) -> Option<String> {
    let sign = match direction? {
        "higher_is_better" => 1.0,
        "lower_is_better" => -1.0,
        _ => return None,
    };
    if change == 0.0 || !change.is_finite() {
        return None;
    }
    Some(
        if change * sign > 0.0 {
            "improvement"
        } else {
            "regression"
        }
        .to_owned(),
    )
}

/// One series, complete, with its direction.
struct Series {
    key: SeriesKey,
    direction: Option<String>,
    observations: Vec<Observation>,
}

fn analyse(series: &Series, params: &detect::Params) -> Vec<Change> {
    let values: Vec<f64> = series.observations.iter().map(|o| o.value).collect();
    let points = detect::change_points(&values, params);
    // Segment bounds: each change is described by the observations between its neighbours.
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(points.iter().map(|cp| cp.index))
        .chain(std::iter::once(values.len()))
        .collect();
    points
        .iter()
        .enumerate()
        .filter_map(|(k, cp)| {
            let before = series.observations.get(cp.index.checked_sub(1)?)?;
            let after = series.observations.get(cp.index)?;
            let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            Some(Change {
                series: series.key.clone(),
                time: after.time,
                time_before: before.time,
                last_commit_before: before.commit.clone(),
                first_commit_after: after.commit.clone(),
                mean_before: cp.mean_before,
                mean_after: cp.mean_after,
                change_pct: cp.change * 100.0,
                pvalue: cp.pvalue,
                kind: kind_of(series.direction.as_deref(), cp.mean_after - cp.mean_before),
                direction: series.direction.clone(),
                observations_before: count(cp.index - bounds[k]),
                observations_after: count(bounds[k + 2] - cp.index),
            })
        })
        .collect()
}

/// Analyses the series matching `config`, saves `changes` and `trend_series` in the lake, and
/// returns the change points of the matching series.
pub async fn run(
    engine: &Engine,
    config: &TrendConfig,
    progress: Progress<'_>,
) -> Result<(TrendSummary, Vec<Change>), TrendError> {
    let fingerprint = config.fingerprint();
    let selection = Selection::of(config)?;
    let old_changes = saved_changes(engine).await?;
    let plan = Plan::make(engine, config, &selection, &fingerprint).await?;
    let (state, unchanged_in_skipped) =
        saved_series(engine, config, &plan, &selection, &fingerprint).await?;

    let mut summary = TrendSummary {
        unchanged: unchanged_in_skipped,
        partitions_read: plan.to_read.len() as u64,
        partitions_skipped: plan.skipped.len() as u64,
        ..TrendSummary::default()
    };
    let mut booked = Booked {
        fingerprint: &fingerprint,
        keep_for_plot: config.plot_dir.is_some(),
        analysed: HashMap::new(),
        to_plot: Vec::new(),
    };
    let workers = Workers::new(config, &state, &fingerprint);
    let seen = read_series(
        engine,
        config,
        &plan.to_read,
        workers,
        &mut booked,
        &mut summary,
        progress,
    )
    .await?;
    summary.series = unchanged_in_skipped + seen;

    let series_moved = summary.analysed > 0 || config.full;
    let Booked {
        analysed, to_plot, ..
    } = booked;
    let (changes, saved) = merge(old_changes, state, analysed);
    save(
        engine,
        config,
        &plan,
        &fingerprint,
        series_moved,
        &changes,
        &saved,
    )
    .await?;
    if let Some(dir) = &config.plot_dir {
        summary.plots += draw(dir, &to_plot).await?;
    }
    let matching: Vec<Change> = changes
        .into_iter()
        .filter(|c| selection.series(&c.series))
        .collect();
    summary.changes = matching.len() as u64;
    Ok((summary, matching))
}

/// The series a run is asked about (`--testcase`, `--machine`, `--metric`), the pattern
/// compiled once.
struct Selection {
    testcase: Option<String>,
    machine: Option<String>,
    metric: Option<regex::Regex>,
}

impl Selection {
    fn of(config: &TrendConfig) -> Result<Self, TrendError> {
        Ok(Self {
            testcase: config.testcase.clone(),
            machine: config.machine.clone(),
            metric: config
                .metric
                .as_deref()
                .map(|re| metric_regex("--metric", re))
                .transpose()?,
        })
    }

    /// Whether a `metrics` partition holds selected series.
    fn partition(&self, testcase: &str, machine: &str) -> bool {
        self.testcase.as_deref().is_none_or(|t| t == testcase)
            && self.machine.as_deref().is_none_or(|m| m == machine)
    }

    fn metric(&self, metric: &str) -> bool {
        self.metric.as_ref().is_none_or(|re| re.is_match(metric))
    }

    fn series(&self, key: &SeriesKey) -> bool {
        self.partition(&key.testcase, &key.machine) && self.metric(&key.metric)
    }
}

/// Which `metrics` partitions a run reads. A selected partition whose files are those the last
/// run read whole, with these settings, is skipped: its series are as saved.
struct Plan {
    /// The files of every partition now.
    files_now: HashMap<(String, String), String>,
    /// The files each partition had when the last run read it, and that run's settings.
    last_read: PartitionState,
    /// The selected partitions to read, in order.
    to_read: Vec<(String, String)>,
    /// The selected partitions skipped.
    skipped: HashSet<(String, String)>,
}

impl Plan {
    async fn make(
        engine: &Engine,
        config: &TrendConfig,
        selection: &Selection,
        fingerprint: &str,
    ) -> Result<Self, TrendError> {
        let files_now = engine.partition_fingerprints(METRICS_TABLE).await?;
        let last_read = if config.full {
            HashMap::new()
        } else {
            saved_partitions(engine).await?
        };
        let (skipped, mut to_read): (Vec<_>, Vec<_>) = files_now
            .keys()
            .filter(|(testcase, machine)| selection.partition(testcase, machine))
            .cloned()
            .partition(|partition| {
                last_read.get(partition).is_some_and(|(files, settings)| {
                    files_now.get(partition) == Some(files) && settings == fingerprint
                })
            });
        to_read.sort();
        Ok(Self {
            files_now,
            last_read,
            to_read,
            skipped: skipped.into_iter().collect(),
        })
    }

    /// What `trend_partitions` holds after this run: a partition read whole now (no metric
    /// filter) with these settings, or as last read if its files are still those. A partition
    /// read with a metric filter is read again next time.
    fn partitions_now<'a>(
        &'a self,
        config: &TrendConfig,
        fingerprint: &'a str,
    ) -> Vec<PartitionRow<'a>> {
        let mut partitions: Vec<PartitionRow<'a>> = self
            .files_now
            .iter()
            .filter_map(|(partition, files)| {
                if config.metric.is_none() && self.to_read.binary_search(partition).is_ok() {
                    return Some((partition, files.as_str(), fingerprint));
                }
                self.last_read
                    .get(partition)
                    .filter(|(f, _)| f == files)
                    .map(|(f, settings)| (partition, f.as_str(), settings.as_str()))
            })
            .collect();
        partitions.sort();
        partitions
    }

    /// Whether `partitions` differs from what the last run saved.
    fn moved(&self, partitions: &[PartitionRow<'_>]) -> bool {
        partitions.len() != self.last_read.len()
            || partitions.iter().any(|(p, f, settings)| {
                self.last_read
                    .get(*p)
                    .is_none_or(|(lf, ls)| lf != f || ls != settings)
            })
    }
}

/// What `trend_series` saved of each series, and how many selected series lie in skipped
/// partitions with their settings unchanged. With nothing to read, no series is analysed or
/// saved again: the saved series are only counted, without building the whole state (900,426
/// keys on the 10.6M-row lake).
async fn saved_series(
    engine: &Engine,
    config: &TrendConfig,
    plan: &Plan,
    selection: &Selection,
    fingerprint: &str,
) -> Result<(HashMap<SeriesKey, Saved>, u64), TrendError> {
    if config.full {
        return Ok((HashMap::new(), 0));
    }
    let skipped: HashSet<(&str, &str)> = plan
        .skipped
        .iter()
        .map(|(t, m)| (t.as_str(), m.as_str()))
        .collect();
    let unchanged = |testcase: &str, machine: &str, metric: &str, settings: &str| {
        settings == fingerprint
            && skipped.contains(&(testcase, machine))
            && selection.metric(metric)
    };
    if plan.to_read.is_empty() {
        return Ok((HashMap::new(), count_saved(engine, unchanged).await?));
    }
    let state = saved_state(engine).await?;
    let count = state
        .iter()
        .filter(|(key, saved)| unchanged(&key.testcase, &key.machine, &key.metric, &saved.settings))
        .count() as u64;
    Ok((state, count))
}

/// The observations of one partition: one per commit, the base before the head when a report
/// measured both at the same time, so a step shows where the report put it, in series order.
/// One query per partition rather than one over the lake: the sort holds one partition's
/// observations at a time, not the whole history's (7.4 GB at 10.6M rows).
fn observations_sql(base_filters: &str, (testcase, machine): &(String, String)) -> String {
    format!(
        "SELECT testcase, machine, params, metric, commit, min(time) AS time, avg(value) AS value, \
         min(CASE role WHEN 'base' THEN 0 WHEN 'head' THEN 2 ELSE 1 END) AS position, \
         max(direction) AS direction \
         FROM metrics WHERE {base_filters} AND testcase = {} AND machine = {} \
         GROUP BY testcase, machine, params, metric, commit \
         ORDER BY params, metric, time, position, commit",
        quote(testcase),
        quote(machine)
    )
}

/// Reads `to_read`, one partition after another, hands each series to `workers` once read
/// whole, and books what they find. Returns how many series were read.
async fn read_series(
    engine: &Engine,
    config: &TrendConfig,
    to_read: &[(String, String)],
    mut workers: Workers<'_>,
    booked: &mut Booked<'_>,
    summary: &mut TrendSummary,
    progress: Progress<'_>,
) -> Result<u64, TrendError> {
    let total = to_read.len() as u64;
    progress(0, total);
    let base_filters = filters(config);
    let mut current: Option<Series> = None;
    let mut seen = 0;
    for (done, partition) in (1..).zip(to_read) {
        let mut rows = engine
            .sql(&observations_sql(&base_filters, partition))
            .await?
            .execute_stream()
            .await?;
        while let Some(batch) = StreamExt::next(&mut rows).await {
            seen += split_series(&batch?, &mut current, |series| {
                workers.finished(series, summary);
            })?;
            workers.dispatch(false, booked, summary).await?;
        }
        progress(done, total);
    }
    if let Some(series) = current.take() {
        workers.finished(series, summary);
    }
    workers.drain(booked, summary).await?;
    Ok(seen)
}

/// Adds the rows of a batch of [`observations_sql`] to the series in `current`; a row of
/// another series hands `current` to `finished` and starts that series. Returns how many
/// series the batch started.
fn split_series(
    b: &RecordBatch,
    current: &mut Option<Series>,
    mut finished: impl FnMut(Series),
) -> Result<u64, TrendError> {
    let (t, m, p, me, c) = (
        strings(b.column(0))?,
        strings(b.column(1))?,
        strings(b.column(2))?,
        strings(b.column(3))?,
        strings(b.column(4))?,
    );
    let time = micros(b.column(5))?;
    let value = cast(b.column(6), &DataType::Float64)?;
    let value = value.as_primitive::<Float64Type>();
    let direction = strings(b.column(8))?;
    let mut started = 0;
    for i in 0..b.num_rows() {
        let same = current.as_ref().is_some_and(|s| {
            s.key.metric == me.value(i)
                && s.key.params == p.value(i)
                && s.key.machine == m.value(i)
                && s.key.testcase == t.value(i)
        });
        if !same {
            if let Some(series) = current.take() {
                finished(series);
            }
            started += 1;
            *current = Some(Series {
                key: SeriesKey {
                    testcase: t.value(i).to_owned(),
                    machine: m.value(i).to_owned(),
                    params: p.value(i).to_owned(),
                    metric: me.value(i).to_owned(),
                },
                direction: (!direction.is_null(i)).then(|| direction.value(i).to_owned()),
                observations: Vec::new(),
            });
        }
        if let Some(series) = current.as_mut()
            && !time.is_null(i)
            && !value.is_null(i)
        {
            series.observations.push(Observation {
                time: time.value(i),
                commit: c.value(i).to_owned(),
                value: value.value(i),
            });
        }
    }
    Ok(started)
}

/// Series handed to the blocking workers at once.
const CHUNK: usize = 256;

/// The change-point workers: series read whole wait here and go to blocking workers in
/// chunks of [`CHUNK`], at most one chunk per core at once.
struct Workers<'a> {
    /// What the last run saved of each series.
    state: &'a HashMap<SeriesKey, Saved>,
    fingerprint: &'a str,
    params: detect::Params,
    min_observations: usize,
    pending: Vec<Series>,
    running: tokio::task::JoinSet<Vec<(Series, Vec<Change>, bool)>>,
    cores: usize,
}

impl<'a> Workers<'a> {
    fn new(
        config: &TrendConfig,
        state: &'a HashMap<SeriesKey, Saved>,
        fingerprint: &'a str,
    ) -> Self {
        Self {
            state,
            fingerprint,
            params: config.detect,
            min_observations: config.min_observations,
            pending: Vec::new(),
            running: tokio::task::JoinSet::new(),
            cores: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }

    /// Takes a series read whole: one with the observations and settings it had at the last
    /// run is only counted.
    fn finished(&mut self, series: Series, summary: &mut TrendSummary) {
        let n = series.observations.len() as u64;
        let last = series.observations.last().map_or(0, |o| o.time);
        let unchanged = self.state.get(&series.key).is_some_and(|s| {
            s.observations == n && s.last_time == last && s.settings == self.fingerprint
        });
        if unchanged {
            summary.unchanged += 1;
        } else {
            self.pending.push(series);
        }
    }

    /// Starts a chunk while a whole one waits (while any wait, with `all`), first booking a
    /// finished chunk when every core is busy.
    async fn dispatch(
        &mut self,
        all: bool,
        booked: &mut Booked<'_>,
        summary: &mut TrendSummary,
    ) -> Result<(), TrendError> {
        while self.pending.len() >= CHUNK || (all && !self.pending.is_empty()) {
            let chunk: Vec<Series> = self
                .pending
                .drain(..self.pending.len().min(CHUNK))
                .collect();
            if self.running.len() >= self.cores
                && let Some(result) = self.running.join_next().await
            {
                booked.book(result.map_err(TrendError::Worker)?, summary);
            }
            let (params, min_observations) = (self.params, self.min_observations);
            self.running
                .spawn_blocking(move || analyse_chunk(chunk, &params, min_observations));
        }
        Ok(())
    }

    /// Analyses what still waits and books every chunk.
    async fn drain(
        mut self,
        booked: &mut Booked<'_>,
        summary: &mut TrendSummary,
    ) -> Result<(), TrendError> {
        self.dispatch(true, booked, summary).await?;
        while let Some(result) = self.running.join_next().await {
            booked.book(result.map_err(TrendError::Worker)?, summary);
        }
        Ok(())
    }
}

/// Each series with its change points, and whether it was long enough to look for any.
fn analyse_chunk(
    chunk: Vec<Series>,
    params: &detect::Params,
    min_observations: usize,
) -> Vec<(Series, Vec<Change>, bool)> {
    chunk
        .into_iter()
        .map(|s| {
            if s.observations.len() < min_observations {
                (s, Vec::new(), false)
            } else {
                let changes = analyse(&s, params);
                (s, changes, true)
            }
        })
        .collect()
}

/// Every series' changes and state after this run: those analysed now, and for the rest what
/// the last run found; each in series order.
fn merge(
    old_changes: Vec<Change>,
    state: HashMap<SeriesKey, Saved>,
    analysed: HashMap<SeriesKey, (Vec<Change>, Saved)>,
) -> (Vec<Change>, Vec<(SeriesKey, Saved)>) {
    let mut changes: Vec<Change> = old_changes
        .into_iter()
        .filter(|c| !analysed.contains_key(&c.series))
        .collect();
    let mut saved: Vec<(SeriesKey, Saved)> = state
        .into_iter()
        .filter(|(k, _)| !analysed.contains_key(k))
        .collect();
    for (key, (found, state)) in analysed {
        changes.extend(found);
        saved.push((key, state));
    }
    changes.sort_by(|a, b| (&a.series, a.time).cmp(&(&b.series, b.time)));
    saved.sort_by(|a, b| a.0.cmp(&b.0));
    (changes, saved)
}

/// Writes the derived tables whose contents moved, in the order that keeps a crash safe.
async fn save(
    engine: &Engine,
    config: &TrendConfig,
    plan: &Plan,
    fingerprint: &str,
    series_moved: bool,
    changes: &[Change],
    saved: &[(SeriesKey, Saved)],
) -> Result<(), TrendError> {
    let partitions = plan.partitions_now(config, fingerprint);
    if series_moved {
        // Two tables, two commits: `changes` first. A crash between them leaves the old state,
        // so the next run recomputes these series and writes `changes` again; the other order
        // would record them as analysed with their changes never written.
        derived::overwrite(engine.url(), CHANGES_TABLE, changes_batch(changes)?).await?;
        let groups = groups::groups_batch(
            changes,
            &groups::group(changes),
            &groups::culprit_reports(engine).await?,
        )?;
        derived::overwrite(engine.url(), CHANGE_GROUPS_TABLE, groups).await?;
        derived::overwrite(engine.url(), TREND_SERIES_TABLE, state_batch(saved)?).await?;
    }
    if series_moved || plan.moved(&partitions) {
        // Last: a crash before it leaves partitions to be read again, never skipped with
        // their series unsaved.
        derived::overwrite(
            engine.url(),
            TREND_PARTITIONS_TABLE,
            partitions_batch(&partitions)?,
        )
        .await?;
        engine.refresh().await?;
    }
    Ok(())
}

/// Draws each series with change points into `dir`; returns how many.
async fn draw(dir: &std::path::Path, to_plot: &[(Series, Vec<Change>)]) -> Result<u64, TrendError> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|source| TrendError::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
    // Drawing writes SVG files: blocking work, off the runtime's scheduling.
    tokio::task::block_in_place(|| {
        for (series, found) in to_plot {
            plot::draw(dir, series.key.clone(), &series.observations, found)?;
        }
        Ok::<_, TrendError>(to_plot.len() as u64)
    })
}

/// What the workers found so far, booked as their chunks come back.
struct Booked<'a> {
    /// The settings every result was computed with.
    fingerprint: &'a str,
    keep_for_plot: bool,
    analysed: HashMap<SeriesKey, (Vec<Change>, Saved)>,
    to_plot: Vec<(Series, Vec<Change>)>,
}

impl Booked<'_> {
    /// Books one worker chunk; returns how many series it finished.
    fn book(&mut self, results: Vec<(Series, Vec<Change>, bool)>, summary: &mut TrendSummary) {
        for (series, found, long_enough) in results {
            if long_enough {
                summary.analysed += 1;
            } else {
                summary.too_short += 1;
            }
            let saved = Saved {
                observations: series.observations.len() as u64,
                last_time: series.observations.last().map_or(0, |o| o.time),
                settings: self.fingerprint.to_owned(),
            };
            let key = series.key.clone();
            if self.keep_for_plot && !found.is_empty() {
                self.to_plot.push((series, found.clone()));
            }
            self.analysed.insert(key, (found, saved));
        }
    }
}

fn changes_batch(changes: &[Change]) -> Result<RecordBatch, TrendError> {
    let text = |f: &dyn Fn(&Change) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(changes.iter().map(f)))
    };
    let time = |f: &dyn Fn(&Change) -> i64| -> ArrayRef {
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(changes.iter().map(f)).with_timezone("UTC"),
        )
    };
    let float = |f: &dyn Fn(&Change) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(changes.iter().map(f)))
    };
    Ok(RecordBatch::try_new(
        CHANGES.clone(),
        vec![
            text(&|c| &c.series.testcase),
            text(&|c| &c.series.machine),
            text(&|c| &c.series.params),
            text(&|c| &c.series.metric),
            time(&|c| c.time),
            text(&|c| &c.last_commit_before),
            text(&|c| &c.first_commit_after),
            time(&|c| c.time_before),
            float(&|c| c.mean_before),
            float(&|c| c.mean_after),
            float(&|c| c.change_pct),
            float(&|c| c.pvalue),
            Arc::new(StringArray::from_iter(
                changes.iter().map(|c| c.kind.as_deref()),
            )),
            Arc::new(StringArray::from_iter(
                changes.iter().map(|c| c.direction.as_deref()),
            )),
            Arc::new(UInt32Array::from_iter_values(
                changes.iter().map(|c| c.observations_before),
            )),
            Arc::new(UInt32Array::from_iter_values(
                changes.iter().map(|c| c.observations_after),
            )),
        ],
    )?)
}

/// One `trend_partitions` row: the partition, its files' fingerprint, the settings.
type PartitionRow<'a> = (&'a (String, String), &'a str, &'a str);

fn partitions_batch(partitions: &[PartitionRow<'_>]) -> Result<RecordBatch, TrendError> {
    let column =
        |values: Vec<&str>| -> ArrayRef { Arc::new(StringArray::from_iter_values(values)) };
    Ok(RecordBatch::try_new(
        TREND_PARTITIONS.clone(),
        vec![
            column(partitions.iter().map(|p| p.0.0.as_str()).collect()),
            column(partitions.iter().map(|p| p.0.1.as_str()).collect()),
            column(partitions.iter().map(|p| p.1).collect()),
            column(partitions.iter().map(|p| p.2).collect()),
        ],
    )?)
}

fn state_batch(saved: &[(SeriesKey, Saved)]) -> Result<RecordBatch, TrendError> {
    let text = |f: &dyn Fn(&(SeriesKey, Saved)) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(saved.iter().map(f)))
    };
    Ok(RecordBatch::try_new(
        TREND_SERIES.clone(),
        vec![
            text(&|s| &s.0.testcase),
            text(&|s| &s.0.machine),
            text(&|s| &s.0.params),
            text(&|s| &s.0.metric),
            Arc::new(UInt64Array::from_iter_values(
                saved.iter().map(|s| s.1.observations),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(saved.iter().map(|s| s.1.last_time))
                    .with_timezone("UTC"),
            ),
            text(&|s| &s.1.settings),
        ],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rise_is_an_improvement_only_where_higher_is_better() {
        assert_eq!(
            kind_of(Some("higher_is_better"), 0.2).as_deref(),
            Some("improvement")
        );
        assert_eq!(
            kind_of(Some("higher_is_better"), -0.2).as_deref(),
            Some("regression")
        );
        assert_eq!(
            kind_of(Some("lower_is_better"), 0.2).as_deref(),
            Some("regression")
        );
        assert_eq!(
            kind_of(Some("lower_is_better"), -0.2).as_deref(),
            Some("improvement")
        );
        assert_eq!(kind_of(None, 0.2), None);
    }
}
