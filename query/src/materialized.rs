//! Views, and the small `reports` table, computed once per published lake version instead of
//! once per query.
//!
//! Every dashboard refresh asks for `headlines` (a grouping of every headline row of
//! `metrics`) and for `regressions` (built over `headlines`, `mentions` and `links`); each
//! used to run the whole aggregation again for every panel of every refresh. A lake version
//! never changes, so the answer of such a view cannot either: the second query of a view after
//! the engine publishes a version starts computing it in the background, on the query threads
//! like any plan and counted in the memory limit; until it is ready, queries read the view as
//! before (its definition inlined into theirs, their filters pushed into it), and from then
//! on they read the kept rows. A version queried less than twice costs nothing; the next
//! installed version starts over.
//!
//! The kept rows answer exactly as the view does: they are every row and column of the view,
//! and a query's projection, filters and limit apply to them as they would to the view's
//! output. An answer larger than [`MAX_BYTES`], or one the memory limit has no room for, is
//! not kept: that view is computed per query, as before, for that version.

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayData, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Statistics;
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use datafusion::execution::SessionState;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::logical_expr::{Expr, LogicalPlan, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use futures::StreamExt;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio_util::task::AbortOnDropHandle;

/// The views kept per lake version: what the dashboards and the exporter read on every
/// refresh. (`comparisons` is not one: it has a row per metric and commit, as many as
/// `metrics` has rows per two.)
pub const MATERIALIZED_VIEWS: [&str; 3] = ["headlines", "discussion", "regressions"];

/// The tables kept per lake version, as the views are: `reports`, one row per report test,
/// which every dashboard reads on every refresh (its variables' `DISTINCT` lists, per-day report
/// counts, the series explorer's join) and which a scan reads from every partition's files; and
/// a format-3 lake's report rows, which every query of `metrics` joins
/// (`lkplake_report_rows`, not served).
pub const KEPT_TABLES: [&str; 2] = ["reports", crate::referenced::REPORT_ROWS];

/// The most memory one view's or table's rows may take (Arrow buffers) to be kept.
pub const MAX_BYTES: usize = 256 << 20;

/// A view's or table's rows, and their place in the engine's memory pool.
#[derive(Debug)]
struct Kept {
    rows: Arc<MemTable>,
    _memory: MemoryReservation,
}

/// A view or table whose rows are computed once, in the background, for the lake version it
/// was installed for.
#[derive(Debug)]
pub struct Materialized {
    /// The view's or table's name, for the log.
    name: &'static str,
    view: Arc<dyn TableProvider>,
    /// The serving session: its plans run on the query threads, within its memory limit.
    state: Arc<SessionState>,
    /// Set once computed: `None` when the rows are not kept (too large, or an error).
    kept: Arc<OnceLock<Option<Kept>>>,
    /// The computation, stopped when the version it is for is replaced.
    computing: Mutex<Option<AbortOnDropHandle<()>>>,
    armed: AtomicBool,
    /// Queries that asked for the view or table since it was armed.
    asked: AtomicUsize,
    /// Whether the planner inlines the view's definition into each query until the rows are
    /// kept: the views of [`MATERIALIZED_VIEWS`]. What [`KEPT_TABLES`] names is scanned
    /// instead, a view among them too: a format-3 lake's report rows are planned into
    /// `observations` once per version, where an inlined definition would stay for good.
    inlined: bool,
}

impl Materialized {
    /// `view`, to be computed with `state` once [`Materialized::arm`]ed and queried twice.
    pub fn wrap(
        name: &'static str,
        view: Arc<dyn TableProvider>,
        state: Arc<SessionState>,
    ) -> Arc<Self> {
        Arc::new(Self {
            name,
            view,
            state,
            kept: Arc::new(OnceLock::new()),
            computing: Mutex::new(None),
            armed: AtomicBool::new(false),
            asked: AtomicUsize::new(0),
            inlined: !KEPT_TABLES.contains(&name),
        })
    }

    /// From now on, queries count: the engine arms what it keeps once it has published the
    /// version they belong to (planning the views built over this one asks for it too).
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Whether queries read the kept rows now.
    #[cfg(test)]
    pub(crate) fn is_kept(&self) -> bool {
        self.rows().is_some()
    }

    fn rows(&self) -> Option<&Arc<MemTable>> {
        self.kept.get()?.as_ref().map(|kept| &kept.rows)
    }

    /// Counts a query that reads the view (when the planner inlines it) or the table (when its
    /// scan is planned). The second
    /// query of an armed view or table starts the computation: a version replaced before it is
    /// asked twice (a lake being written while one dashboard polls it) is never computed
    /// twice over.
    fn ask(&self) {
        if self.armed.load(Ordering::SeqCst) && self.asked.fetch_add(1, Ordering::SeqCst) >= 1 {
            self.start();
        }
    }

    /// Starts computing the rows, once (without a runtime to run on, never: the view is then
    /// read as a view).
    fn start(&self) {
        let mut computing = self.computing.lock().unwrap_or_else(|e| e.into_inner());
        if computing.is_some() || self.kept.get().is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (name, view, state, kept) = (
            self.name,
            Arc::clone(&self.view),
            Arc::clone(&self.state),
            Arc::clone(&self.kept),
        );
        *computing = Some(AbortOnDropHandle::new(runtime.spawn(async move {
            let rows = compute(name, view, &state).await.unwrap_or_else(|error| {
                tracing::warn!(%name, %error, "rows could not be kept: read as before, per query");
                None
            });
            let _ = kept.set(rows);
        })));
    }
}

/// What one install of a lake version keeps: the tables of [`KEPT_TABLES`] and the views of
/// [`MATERIALIZED_VIEWS`], each computed in the serving session, all armed at once when the
/// version is published. An engine that keeps nothing (`serving` is `None`) wraps nothing.
pub(crate) struct Keeper {
    serving: Option<Arc<SessionState>>,
    kept: Vec<Arc<Materialized>>,
}

impl Keeper {
    pub(crate) fn new(serving: Option<SessionState>) -> Self {
        Self {
            serving: serving.map(Arc::new),
            kept: Vec::new(),
        }
    }

    /// `provider` wrapped to be kept, when `name` is one of the kept tables or views.
    pub(crate) fn wrap(
        &mut self,
        name: &'static str,
        provider: &Arc<dyn TableProvider>,
    ) -> Option<Arc<dyn TableProvider>> {
        let serving = self.serving.as_ref()?;
        if !KEPT_TABLES.contains(&name) && !MATERIALIZED_VIEWS.contains(&name) {
            return None;
        }
        let materialized = Materialized::wrap(name, Arc::clone(provider), Arc::clone(serving));
        self.kept.push(Arc::clone(&materialized));
        Some(materialized)
    }

    /// Arms everything wrapped, once the version it belongs to is published.
    pub(crate) fn arm(self) {
        for materialized in self.kept {
            materialized.arm();
        }
    }
}

/// Every row of `view`, unless they take more than [`MAX_BYTES`] or the memory pool's room.
async fn compute(
    name: &str,
    view: Arc<dyn TableProvider>,
    state: &SessionState,
) -> Result<Option<Kept>> {
    let plan = view.scan(state, None, &[], None).await?;
    let memory = MemoryConsumer::new("kept rows").register(&state.runtime_env().memory_pool);
    let mut stream = execute_stream(plan, state.task_ctx())?;
    let mut batches = Vec::new();
    let mut held = HashSet::new();
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let bytes = new_bytes(&batch, &mut held);
        if memory.size() + bytes > MAX_BYTES || memory.try_grow(bytes).is_err() {
            tracing::warn!(
                %name,
                limit = MAX_BYTES,
                "rows take more memory than may be kept: read as before, per query"
            );
            return Ok(None);
        }
        batches.push(batch);
    }
    let rows = MemTable::try_new(view.schema(), vec![batches])?;
    tracing::info!(%name, bytes = memory.size(), "rows kept for this lake version");
    Ok(Some(Kept {
        rows: Arc::new(rows),
        _memory: memory,
    }))
}

/// The bytes of the buffers `batch` holds that `held` does not yet: batches of one scan share
/// buffers (a string view column's data, a slice of a larger array), which
/// `RecordBatch::get_array_memory_size` counts again in each.
fn new_bytes(batch: &RecordBatch, held: &mut HashSet<usize>) -> usize {
    fn walk(data: &ArrayData, held: &mut HashSet<usize>) -> usize {
        let nulls = data.nulls().map(|n| n.buffer());
        let own: usize = data
            .buffers()
            .iter()
            .chain(nulls)
            .filter(|b| held.insert(b.data_ptr().as_ptr().addr()))
            .map(|b| b.capacity().max(b.len()))
            .sum();
        own + data
            .child_data()
            .iter()
            .map(|child| walk(child, held))
            .sum::<usize>()
    }
    batch
        .columns()
        .iter()
        .map(|column| walk(&column.to_data(), held))
        .sum()
}

#[async_trait]
impl TableProvider for Materialized {
    fn schema(&self) -> SchemaRef {
        self.view.schema()
    }

    /// What it wraps, to clients (`information_schema`, psql's `\dv` and `\dt`).
    fn table_type(&self) -> TableType {
        self.view.table_type()
    }

    fn get_table_definition(&self) -> Option<&str> {
        self.view.get_table_definition()
    }

    /// The view's definition, inlined into the query by the planner, until the rows are kept;
    /// then none, and the query scans the kept rows. What is not inlined has none either way.
    fn get_logical_plan(&self) -> Option<Cow<'_, LogicalPlan>> {
        if !self.inlined || self.rows().is_some() {
            return None;
        }
        self.ask();
        self.view.get_logical_plan()
    }

    /// The wrapped table's answer, never `Exact`: the filters a table takes prune its files
    /// while the rows are not kept, and the kept rows, which take none, may be read by the time
    /// the plan scans, so every filter stays above the scan too.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(self
            .view
            .supports_filters_pushdown(filters)?
            .into_iter()
            .map(|pushdown| match pushdown {
                TableProviderFilterPushDown::Exact => TableProviderFilterPushDown::Inexact,
                other => other,
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        self.view.statistics()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some(rows) = self.rows() {
            return rows.scan(state, projection, filters, limit).await;
        }
        if !self.inlined {
            self.ask();
        }
        self.view.scan(state, projection, filters, limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::prelude::SessionContext;

    /// A table that counts its scans.
    #[derive(Debug)]
    struct Counted {
        inner: Arc<MemTable>,
        scans: Arc<AtomicUsize>,
    }

    #[async_trait]
    impl TableProvider for Counted {
        fn schema(&self) -> SchemaRef {
            self.inner.schema()
        }

        fn table_type(&self) -> TableType {
            TableType::Base
        }

        async fn scan(
            &self,
            state: &dyn Session,
            projection: Option<&Vec<usize>>,
            filters: &[Expr],
            limit: Option<usize>,
        ) -> Result<Arc<dyn ExecutionPlan>> {
            self.scans.fetch_add(1, Ordering::SeqCst);
            self.inner.scan(state, projection, filters, limit).await
        }
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> Result<Vec<i64>> {
        let batches = ctx.sql(sql).await?.collect().await?;
        Ok(batches
            .iter()
            .flat_map(|b| {
                let column = b.column(0).as_any().downcast_ref::<Int64Array>();
                column.map(|c| c.values().to_vec()).unwrap_or_default()
            })
            .collect())
    }

    #[tokio::test]
    async fn a_view_is_computed_once_in_the_background_and_answers_as_the_view() -> Result<()> {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(vec![3, 1, 4, 1, 5, 9, 2, 6]))],
        )?;
        let scans = Arc::new(AtomicUsize::new(0));
        let base = Counted {
            inner: Arc::new(MemTable::try_new(schema, vec![vec![batch]])?),
            scans: Arc::clone(&scans),
        };
        let ctx = SessionContext::new();
        ctx.register_table("base", Arc::new(base))?;
        ctx.sql("CREATE VIEW doubled AS SELECT x * 2 AS y FROM base WHERE x > 1")
            .await?
            .collect()
            .await?;
        let view = ctx.table_provider("doubled").await?;
        ctx.deregister_table("doubled")?;
        let kept = Materialized::wrap("doubled", view, Arc::new(ctx.state()));
        ctx.register_table("doubled", Arc::clone(&kept) as Arc<dyn TableProvider>)?;

        // Before it is armed, and on the first query after, the view is read as a view; the
        // second query starts the computation in the background (one more scan of the base);
        // once it is done, queries read the kept rows and the base no more.
        let query = "SELECT y FROM doubled WHERE y > 5 ORDER BY y DESC LIMIT 3";
        assert_eq!(rows(&ctx, query).await?, vec![18, 12, 10]);
        kept.arm();
        assert_eq!(rows(&ctx, query).await?, vec![18, 12, 10]);
        assert!(
            kept.computing.lock().map(|c| c.is_none()).unwrap_or(false),
            "asked once"
        );
        assert_eq!(rows(&ctx, query).await?, vec![18, 12, 10]);
        for _ in 0..500 {
            if kept.rows().is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(kept.rows().is_some(), "the rows are kept");
        assert_eq!(scans.load(Ordering::SeqCst), 4);
        assert_eq!(rows(&ctx, query).await?, vec![18, 12, 10]);
        assert_eq!(rows(&ctx, "SELECT count(*) FROM doubled").await?, vec![6]);
        assert_eq!(
            rows(&ctx, "SELECT y FROM doubled ORDER BY y LIMIT 2").await?,
            vec![4, 6]
        );
        assert_eq!(scans.load(Ordering::SeqCst), 4, "no scan of the base since");
        Ok(())
    }

    #[test]
    fn buffers_shared_by_batches_are_counted_once() -> Result<()> {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let values = Int64Array::from((0..1000).collect::<Vec<i64>>());
        let batch = RecordBatch::try_new(schema, vec![Arc::new(values)])?;
        let mut held = HashSet::new();
        let first = new_bytes(&batch.slice(0, 500), &mut held);
        assert!(first >= 8000, "the whole buffer of 1,000 values: {first}");
        assert_eq!(new_bytes(&batch.slice(500, 500), &mut held), 0);
        Ok(())
    }
}
