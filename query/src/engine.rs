//! The query engine: one `SessionContext` whose `public` schema holds the lake's tables and
//! views. A refresh swaps the whole set at once, so a query being planned sees either the old
//! versions or the new ones, never a table missing or views pointing at an older table.

use crate::damaged::DamagedTable;
use crate::error::QueryError;
use crate::executor::DedicatedExecutor;
use crate::materialized::Keeper;
use crate::policy;
use crate::referenced::Referenced;
use crate::unpivot::Unpivot;
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use lkplake_lake::{Format, LakeTables, LakeUrl, TableHealth};
use lkplake_schemas::tables::{
    FAILURES_TABLE, LINKS, LINKS_TABLE, MENTIONS_TABLE, METRICS_TABLE, TRIAGE, TRIAGE_TABLE,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

/// The catalog and schema every table and view lives in; Postgres clients expect `public`.
pub const CATALOG: &str = "datafusion";
/// See [`CATALOG`].
pub const SCHEMA: &str = "public";

/// The views, as SQL (`CREATE VIEW` statements in dependency order).
pub const VIEWS_SQL: &str = include_str!("views.sql");

/// The views' names, in the order [`VIEWS_SQL`] defines them.
pub const VIEWS: [&str; 3] = ["comparisons", "series", "headlines"];

/// The view that gives back format 1's `comparisons` over a lake in format 2 or 3, as SQL; installed
/// before [`VIEWS_SQL`], whose own `comparisons` it replaces.
pub const OBSERVATION_VIEWS_SQL: &str = include_str!("observations.sql");

/// The views' names, in the order [`OBSERVATION_VIEWS_SQL`] defines them.
pub const OBSERVATION_VIEWS: [&str; 1] = ["comparisons"];

/// The name a format-2 lake's `metrics` table is served under: `metrics` is format 1's rows of
/// it ([`crate::unpivot::Unpivot`]). In format 3, the view of format 2's rows.
pub const OBSERVATIONS: &str = "observations";

/// The name a format-3 lake's `metrics` table is served under: its report rows and observation
/// rows as stored (`lkplake_lake::report_rows`), which `observations` joins.
pub const STORED_OBSERVATIONS: &str = "stored_observations";

/// The views over `failures` and `mentions`, as SQL; installed once the lake has both.
pub const DISCUSSION_VIEWS_SQL: &str = include_str!("discussion.sql");

/// The views' names, in the order [`DISCUSSION_VIEWS_SQL`] defines them.
pub const DISCUSSION_VIEWS: [&str; 4] = [
    "failure_comparisons",
    "mentions",
    "discussion",
    "regressions",
];

/// The name the `mentions` Delta table is served under: the `mentions` view adds the cited
/// report to each of its rows.
pub const MENTION_MAILS: &str = "mention_mails";

/// How the engine runs queries.
#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    /// Upper bound on the memory of all running queries together (sorts, joins and
    /// aggregations spill or fail beyond it); `None` leaves it unbounded.
    pub memory_limit: Option<usize>,
    /// Partitions a query is split into; `None` means one per core.
    pub target_partitions: Option<usize>,
    /// Threads of the query executor; `None` means one per core. `Some(0)` runs queries on
    /// the caller's runtime instead, as lkplake did before it had an executor: only for
    /// comparing the two (`infra/bench/scrape-under-load.sh`).
    pub query_threads: Option<usize>,
    /// Keeps the views every dashboard refresh reads, and the `reports` table
    /// ([`crate::materialized`]), per lake version: for a server, whose clients ask the same
    /// again and again. A one-shot command leaves it off, as the first scan computes the whole
    /// view where a query's filters would have read a part of the lake.
    pub keep_views: bool,
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn session_config(config: &EngineConfig) -> SessionConfig {
    let mut session = SessionConfig::new()
        .with_information_schema(true)
        .with_create_default_catalog_and_schema(true)
        .with_default_catalog_and_schema(CATALOG, SCHEMA);
    if let Some(n) = config.target_partitions {
        session = session.with_target_partitions(n);
    }
    session
}

/// The lake's tables and views behind one `SessionContext`.
pub struct Engine {
    ctx: SessionContext,
    url: LakeUrl,
    config: EngineConfig,
    schema: Arc<LakeSchema>,
    tables: tokio::sync::Mutex<LakeTables>,
}

impl Engine {
    /// Opens the lake at `url` with its tables at their latest versions.
    pub async fn open(url: &LakeUrl, config: &EngineConfig) -> Result<Self, QueryError> {
        let tables = LakeTables::open(url).await?;
        let executor = match config.query_threads.unwrap_or_else(cores) {
            0 => None,
            threads => Some(DedicatedExecutor::new("lkplake-query", threads)?),
        };
        let session = session_config(config);
        let mut runtime = RuntimeEnvBuilder::new();
        if let Some(limit) = config.memory_limit {
            // Greedy rather than fair shares: partial aggregation cannot spill, and fair shares
            // split among many concurrent queries failed more of them (BENCHMARKS.md). The
            // server bounds how many statements execute at once instead.
            runtime = runtime.with_memory_limit(limit, 1.0);
        }
        let mut state = SessionStateBuilder::new()
            .with_config(session)
            .with_runtime_env(runtime.build_arc()?)
            .with_default_features();
        // The rule holds the executor: its threads live as long as the session.
        if let Some(executor) = &executor {
            state = state.with_physical_optimizer_rule(executor.rule());
        }
        let state = state.build();
        let ctx = SessionContext::new_with_state(state);
        ctx.register_udf(crate::decimal::udf());
        ctx.register_udf(crate::date_trunc::udf());
        let schema = Arc::new(LakeSchema::default());
        let catalog = ctx
            .catalog(CATALOG)
            .ok_or_else(|| DataFusionError::Internal(format!("catalog {CATALOG} missing")))?;
        catalog.register_schema(SCHEMA, Arc::clone(&schema) as Arc<dyn SchemaProvider>)?;
        let engine = Self {
            ctx,
            url: url.clone(),
            config: config.clone(),
            schema,
            tables: tokio::sync::Mutex::new(tables),
        };
        engine.install().await?;
        Ok(engine)
    }

    /// The session every query runs in. Reading is all it is for: its `public` schema refuses
    /// new tables, and [`Engine::sql`] refuses statements that are not queries.
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Loads commits made since the last refresh and, when the loaded versions are not the
    /// published ones, swaps in tables and views at them. True when something was published.
    pub async fn refresh(&self) -> Result<bool, QueryError> {
        let loaded = {
            let mut tables = self.tables.lock().await;
            tables.refresh().await?;
            tables.versions()
        };
        // Compared with what was published, not with the previous load: when installing fails
        // after the versions were loaded, the next refresh must publish them still.
        if self.schema.current().versions() == loaded {
            return Ok(false);
        }
        self.install().await?;
        Ok(true)
    }

    /// The version and commit time of each table as queries see it: the versions the
    /// published tables and views were built from, which trail the loaded ones while a refresh
    /// installs them.
    pub fn health(&self) -> Vec<TableHealth> {
        self.schema.current().health.clone()
    }

    /// Where the lake is.
    pub fn url(&self) -> &LakeUrl {
        &self.url
    }

    /// A fingerprint of each (testcase, machine) partition's files of table `name`, as loaded
    /// (see [`LakeTables::partition_fingerprints`]).
    pub async fn partition_fingerprints(
        &self,
        name: &'static str,
    ) -> Result<HashMap<(String, String), String>, QueryError> {
        Ok(self.tables.lock().await.partition_fingerprints(name)?)
    }

    /// Whether the lake has table `name` (the trend tables exist once `lkplake trend` ran).
    pub fn has_table(&self, name: &str) -> bool {
        self.schema.current().entries.contains_key(name)
    }

    /// Plans one read-only SQL statement.
    pub async fn sql(&self, sql: &str) -> Result<DataFrame, QueryError> {
        policy::check_sql(sql)?;
        let options = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        Ok(self.ctx.sql_with_options(sql, options).await?)
    }

    /// Builds tables and views at the loaded versions in a scratch session, then publishes
    /// them all at once.
    async fn install(&self) -> Result<(), QueryError> {
        // Providers and health under one lock, so health names the versions being published.
        let (mut providers, damaged, health, format) = {
            let tables = self.tables.lock().await;
            (
                tables.providers().await?,
                tables.damaged().to_vec(),
                tables.health(),
                tables.format()?,
            )
        };
        for table in damaged {
            if let Some(schema) = lkplake_schemas::tables::schema_of(table.name) {
                providers.push((table.name, DamagedTable::provider(schema, table.error)));
            }
        }
        // A session of its own: the served one has pg_catalog and client settings layered on.
        let scratch = SessionContext::new_with_config(session_config(&self.config));
        scratch.register_udf(crate::decimal::udf());
        scratch.register_udf(crate::date_trunc::udf());
        // The serving session the kept tables and views compute in, copied once per install.
        let mut keeper = Keeper::new(self.config.keep_views.then(|| self.ctx.state()));
        let mut entries = BTreeMap::new();
        for (name, provider) in providers {
            let name = match name {
                MENTIONS_TABLE => MENTION_MAILS,
                METRICS_TABLE if format == Format::Two => OBSERVATIONS,
                METRICS_TABLE if format == Format::Three => STORED_OBSERVATIONS,
                name => name,
            };
            let provider = crate::limit::HonorLimit::wrap(provider);
            // Kept before the views are planned over it, so they read its kept rows too.
            let provider = keeper.wrap(name, &provider).unwrap_or(provider);
            scratch.register_table(name, Arc::clone(&provider))?;
            let observations = match name {
                OBSERVATIONS => Some(Arc::clone(&provider)),
                STORED_OBSERVATIONS => {
                    let view = Referenced::over(&scratch, STORED_OBSERVATIONS, &mut keeper).await?;
                    scratch.register_table(OBSERVATIONS, Arc::clone(&view))?;
                    entries.insert(OBSERVATIONS.to_owned(), Arc::clone(&view));
                    Some(view)
                }
                _ => None,
            };
            if let Some(observations) = observations {
                let metrics = Unpivot::over(observations)?;
                scratch.register_table(METRICS_TABLE, Arc::clone(&metrics))?;
                entries.insert(METRICS_TABLE.to_owned(), metrics);
            }
            entries.insert(name.to_owned(), provider);
        }
        let mut views: Vec<(&str, &[&str])> = Vec::new();
        if format != Format::One {
            // Format 3's grouped rows are among its stored ones: probed there, without the join.
            let probed = match format {
                Format::Three => STORED_OBSERVATIONS,
                _ => OBSERVATIONS,
            };
            let grouped = crate::grouped::probe(&scratch, &self.ctx, probed).await;
            scratch.register_udf(crate::grouped::udf(grouped));
            views.push((OBSERVATION_VIEWS_SQL, &OBSERVATION_VIEWS));
        }
        views.push((VIEWS_SQL, &VIEWS));
        if entries.contains_key(FAILURES_TABLE) && entries.contains_key(MENTION_MAILS) {
            // A lake written before `links` gets the table at its next transform run, and
            // `triage` at its first `lkplake triage`; until then `regressions` reads an empty one.
            for (name, schema) in [(LINKS_TABLE, &LINKS), (TRIAGE_TABLE, &TRIAGE)] {
                if !entries.contains_key(name) {
                    let empty: Arc<dyn TableProvider> =
                        Arc::new(MemTable::try_new(Arc::clone(schema), vec![Vec::new()])?);
                    scratch.register_table(name, Arc::clone(&empty))?;
                    entries.insert(name.to_owned(), empty);
                }
            }
            views.push((DISCUSSION_VIEWS_SQL, &DISCUSSION_VIEWS));
        }
        let mut statements = Vec::new();
        for (sql, names) in views {
            let parsed = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})?;
            for (statement, name) in parsed.into_iter().zip(names.iter().copied()) {
                // The first definition of a view stands: format 2's `comparisons`.
                if !statements.iter().any(|(_, defined)| *defined == name) {
                    statements.push((statement, name));
                }
            }
        }
        for (statement, view) in statements {
            let fail = |source: DataFusionError| QueryError::View {
                view: view.to_owned(),
                source: Box::new(source),
            };
            let state = scratch.state();
            let plan = state.statement_to_plan(statement).await.map_err(fail)?;
            scratch.execute_logical_plan(plan).await.map_err(fail)?;
            let mut provider = scratch.table_provider(view).await.map_err(fail)?;
            if let Some(kept) = keeper.wrap(view, &provider) {
                // Registered again, so the views planned after it read the kept rows too.
                provider = kept;
                scratch.deregister_table(view).map_err(fail)?;
                scratch
                    .register_table(view, Arc::clone(&provider))
                    .map_err(fail)?;
            }
            entries.insert(view.to_owned(), provider);
        }
        self.schema.publish(Published { entries, health });
        keeper.arm();
        Ok(())
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("session", &self.ctx.session_id())
            .field("tables", &self.schema.table_names())
            .finish()
    }
}

/// What queries see: the tables and views, and the health of the versions they were built from.
#[derive(Debug, Default)]
struct Published {
    entries: BTreeMap<String, Arc<dyn TableProvider>>,
    health: Vec<TableHealth>,
}

impl Published {
    fn versions(&self) -> Vec<Option<u64>> {
        self.health.iter().map(|t| t.version).collect()
    }
}

/// The `public` schema: the current set of tables and views, swapped whole on refresh.
#[derive(Debug, Default)]
struct LakeSchema {
    published: RwLock<Arc<Published>>,
}

impl LakeSchema {
    fn current(&self) -> Arc<Published> {
        // A poisoned lock only means a publisher panicked mid-swap of an Arc, which cannot leave
        // the map half-written; keep serving it.
        Arc::clone(&self.published.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn publish(&self, published: Published) {
        *self.published.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(published);
    }
}

#[async_trait]
impl SchemaProvider for LakeSchema {
    fn table_names(&self) -> Vec<String> {
        self.current().entries.keys().cloned().collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        Ok(self.current().entries.get(name).cloned())
    }

    fn table_exist(&self, name: &str) -> bool {
        self.current().entries.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::materialized::Materialized;
    use arrow::array::{AsArray, RecordBatch};
    use arrow::datatypes::Int64Type;
    use lkplake_lake::{Batches, Lake};
    use lkplake_schemas::tables::{
        FAILURES, LINKS, MENTIONS, METRICS, METRICS_TABLE, REPORTS, REPORTS_TABLE,
    };

    /// One `metrics` row and nothing else.
    fn one_metric_row() -> Batches {
        let row = br#"{"time": null, "testcase": "vm-scalability", "machine": "lkp-icl-2sp2",
            "params": "", "metric": "vm-scalability.throughput", "program": "vm-scalability",
            "commit": "9c167c0450c9a958", "role": "patched", "value": 21446.0,
            "change_unit": "%", "is_headline": true, "report_key": "k"}"#;
        let metrics = arrow::json::ReaderBuilder::new(Arc::clone(&METRICS))
            .build(&row[..])
            .and_then(|mut reader| reader.next().transpose())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no batch"));
        Batches {
            metrics,
            failures: RecordBatch::new_empty(Arc::clone(&FAILURES)),
            mentions: RecordBatch::new_empty(Arc::clone(&MENTIONS)),
            links: RecordBatch::new_empty(Arc::clone(&LINKS)),
            reports: RecordBatch::new_empty(Arc::clone(&REPORTS)),
        }
    }

    async fn metric_rows(engine: &Engine) -> i64 {
        let batches = engine
            .sql("SELECT count(*) FROM metrics")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        batches[0].column(0).as_primitive::<Int64Type>().value(0)
    }

    fn metrics_version(engine: &Engine) -> Option<u64> {
        engine
            .health()
            .iter()
            .find(|t| t.name == METRICS_TABLE)
            .and_then(|t| t.version)
    }

    #[tokio::test]
    async fn health_names_the_published_versions_and_a_loaded_unpublished_version_is_published_next()
     {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        // Opening creates each table with an empty commit: version 0.
        let mut lake = Lake::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
        let config = EngineConfig {
            query_threads: Some(0),
            ..EngineConfig::default()
        };
        let engine = Engine::open(&url, &config)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(metrics_version(&engine), Some(0));
        assert_eq!(metric_rows(&engine).await, 0);

        lake.commit(one_metric_row(), &[])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // Version 1 loaded and not installed: what a refresh leaves when installing fails, and
        // what the exporter saw mid-refresh when it rendered version 0's rows as version 1's.
        let moved = engine
            .tables
            .lock()
            .await
            .refresh()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(moved);
        assert_eq!(metrics_version(&engine), Some(0));
        assert_eq!(metric_rows(&engine).await, 0);

        // Nothing new in the lake, but version 1 was never published.
        assert!(engine.refresh().await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(metrics_version(&engine), Some(1));
        assert_eq!(metric_rows(&engine).await, 1);
        assert!(!engine.refresh().await.unwrap_or_else(|e| panic!("{e}")));
    }

    #[tokio::test]
    async fn the_kept_views_list_plain_strings_not_string_views() {
        // A list of string views holds the scan's whole data buffers, which DataFusion counts
        // once per row: `regressions` on the 10.6M-row lake counted 3.5 GB for 1.6 MB of names
        // and could never be kept.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        drop(Lake::open(&url).await.unwrap_or_else(|e| panic!("{e}")));
        let engine = Engine::open(&url, &EngineConfig::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut lists = Vec::new();
        for view in crate::materialized::MATERIALIZED_VIEWS {
            let frame = engine
                .sql(&format!("SELECT * FROM {view} LIMIT 0"))
                .await
                .unwrap_or_else(|e| panic!("{view}: {e}"));
            for field in frame.schema().fields() {
                if let arrow::datatypes::DataType::List(item) = field.data_type() {
                    lists.push((view, field.name().clone(), item.data_type().clone()));
                }
            }
        }
        let utf8 = arrow::datatypes::DataType::Utf8;
        let expected: Vec<_> = [
            ("discussion", "senders"),
            ("regressions", "testcases"),
            ("regressions", "machines"),
            ("regressions", "headline_metrics"),
            ("regressions", "senders"),
        ]
        .into_iter()
        .map(|(view, column)| (view, column.to_owned(), utf8.clone()))
        .collect();
        assert_eq!(lists, expected);
    }

    /// `reports` rows: two of vm-scalability on one machine (a day apart) and one of stress-ng
    /// on another, each of its own report.
    fn three_reports() -> Batches {
        let rows = [
            (
                "a",
                "2024-01-01T08:00:00Z",
                "vm-scalability",
                "lkp-icl-2sp2",
            ),
            (
                "b",
                "2024-01-02T08:00:00Z",
                "vm-scalability",
                "lkp-icl-2sp2",
            ),
            ("c", "2024-01-02T09:00:00Z", "stress-ng", "lkp-csl-2sp7"),
        ];
        let json: String = rows
            .iter()
            .map(|(key, date, testcase, machine)| {
                format!(
                    r#"{{"report_key": "{key}", "test_index": 0, "date": "{date}",
                    "commit": "9c167c0450c9a958", "base_commit": "1b2c3d4e5f607182",
                    "testcase": "{testcase}", "machine": "{machine}", "params": "",
                    "rows": 1, "quoted": false, "source": "seed"}}"#
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let reports = arrow::json::ReaderBuilder::new(Arc::clone(&REPORTS))
            .build(json.as_bytes())
            .and_then(|mut reader| reader.next().transpose())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no batch"));
        Batches {
            metrics: RecordBatch::new_empty(Arc::clone(&METRICS)),
            failures: RecordBatch::new_empty(Arc::clone(&FAILURES)),
            mentions: RecordBatch::new_empty(Arc::clone(&MENTIONS)),
            links: RecordBatch::new_empty(Arc::clone(&LINKS)),
            reports,
        }
    }

    async fn pretty(engine: &Engine, sql: &str) -> String {
        let batches = engine
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string()
    }

    async fn reports_per_testcase(engine: &Engine) -> Vec<String> {
        let sql = "SELECT testcase, count(*) AS n FROM reports \
                   WHERE date >= '2024-01-02T00:00:00Z' GROUP BY testcase ORDER BY testcase";
        pretty(engine, sql)
            .await
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn is_kept(engine: &Engine, name: &str) -> bool {
        let current = engine.schema.current();
        current
            .entries
            .get(name)
            .and_then(|provider| provider.downcast_ref::<Materialized>())
            .is_some_and(Materialized::is_kept)
    }

    #[tokio::test]
    async fn a_server_keeps_the_reports_of_a_version_in_memory_and_they_answer_as_its_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mut lake = Lake::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
        lake.commit(three_reports(), &[])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let config = EngineConfig {
            keep_views: true,
            ..EngineConfig::default()
        };
        let engine = Engine::open(&url, &config)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // Until the rows are kept, a filter on a partition column still picks the files read.
        let plan = pretty(
            &engine,
            "EXPLAIN SELECT report_key FROM reports WHERE testcase = 'stress-ng'",
        )
        .await;
        assert!(plan.contains("testcase=stress-ng/"), "{plan}");
        assert!(!plan.contains("testcase=vm-scalability/"), "{plan}");
        // Reports b and c are dated 2024-01-02.
        let expected = [
            "+----------------+---+",
            "| testcase       | n |",
            "+----------------+---+",
            "| stress-ng      | 1 |",
            "| vm-scalability | 1 |",
            "+----------------+---+",
        ];
        // The second query asks for the table a second time: it starts keeping it.
        assert_eq!(reports_per_testcase(&engine).await, expected);
        for _ in 0..500 {
            if is_kept(&engine, REPORTS_TABLE) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(
            is_kept(&engine, REPORTS_TABLE),
            "kept after the second query"
        );

        // With the table's files gone, only the kept rows can answer.
        let mut removed = 0;
        let partitions = [
            "testcase=vm-scalability/machine=lkp-icl-2sp2",
            "testcase=stress-ng/machine=lkp-csl-2sp7",
        ];
        for partition in partitions {
            let folder = dir.path().join(REPORTS_TABLE).join(partition);
            let mut entries = tokio::fs::read_dir(&folder)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
            while let Some(entry) = entries.next_entry().await.unwrap_or_else(|e| panic!("{e}")) {
                if entry.path().extension().is_some_and(|e| e == "parquet") {
                    tokio::fs::remove_file(entry.path())
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                    removed += 1;
                }
            }
        }
        assert_eq!(removed, 2, "one file per (testcase, machine) partition");
        assert_eq!(reports_per_testcase(&engine).await, expected);
    }

    fn view_names(sql: &str) -> Result<Vec<String>, DataFusionError> {
        let statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})?;
        let names: Vec<String> = statements
            .iter()
            .map(|s| match s {
                datafusion::sql::parser::Statement::Statement(s) => match s.as_ref() {
                    datafusion::sql::sqlparser::ast::Statement::CreateView(v) => v.name.to_string(),
                    other => format!("not a view: {other}"),
                },
                other => format!("not a view: {other}"),
            })
            .collect();
        Ok(names)
    }

    #[test]
    fn every_view_statement_is_named_in_order() -> Result<(), DataFusionError> {
        assert_eq!(view_names(VIEWS_SQL)?, VIEWS);
        assert_eq!(view_names(OBSERVATION_VIEWS_SQL)?, OBSERVATION_VIEWS);
        assert_eq!(view_names(DISCUSSION_VIEWS_SQL)?, DISCUSSION_VIEWS);
        Ok(())
    }
}
