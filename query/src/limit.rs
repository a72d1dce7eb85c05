//! Keeps a query's `LIMIT` where it is enforced.
//!
//! delta-rs 1.1 answers a scan that needs only partition columns (`SELECT testcase FROM
//! reports LIMIT 3`) from the Delta log with a `DeltaScanMetaExec`. That node tells DataFusion
//! it supports limit pushdown but takes no fetch, and DataFusion 55's `LimitPushdown` rule then
//! removes the limit above it: the query returns every row (5,603 instead of 3 on a 5,000-report
//! lake). Upstream: delta-io/delta-rs#4037 ("Implement limit pushdown for metadata only scans");
//! the fix proposed in #4744 was closed unmerged.
//!
//! Every lake table is therefore served through [`HonorLimit`], whose scans end in
//! [`LimitBarrier`]: a pass-through node that accepts no limit, so DataFusion keeps its own
//! limit operator above it. The scan still receives the limit as a hint, so Parquet scans stop
//! early as before, and filters pass through it to the scan.
//!
//! Since the lake serves its tables through its own file index (lkplake-lake's `IndexedTable`),
//! whose scans are DataFusion's `DataSourceExec` and honour a limit, the barrier matters only for
//! a table served by delta-rs' provider (one using deletion vectors or column mapping); it stays
//! on every table so no provider can drop a limit. The test
//! `limit_is_kept_above_a_metadata_only_scan` pins the answers.

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Statistics;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::filter_pushdown::{FilterDescription, FilterPushdownPhase};
use datafusion::physical_plan::{
    ChildStats, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, StatisticsArgs,
};
use std::fmt;
use std::sync::Arc;

/// A table provider that serves `inner` with every scan under a [`LimitBarrier`].
#[derive(Debug)]
pub struct HonorLimit {
    inner: Arc<dyn TableProvider>,
}

impl HonorLimit {
    /// `inner`, with every scan it plans under a [`LimitBarrier`].
    pub fn wrap(inner: Arc<dyn TableProvider>) -> Arc<dyn TableProvider> {
        Arc::new(Self { inner })
    }
}

#[async_trait]
impl TableProvider for HonorLimit {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = self.inner.scan(state, projection, filters, limit).await?;
        Ok(LimitBarrier::over(plan))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.inner.supports_filters_pushdown(filters)
    }

    fn statistics(&self) -> Option<Statistics> {
        self.inner.statistics()
    }
}

/// Passes its input through unchanged and takes no limit, so none is pushed past it.
#[derive(Debug, Clone)]
pub struct LimitBarrier {
    input: Arc<dyn ExecutionPlan>,
}

impl LimitBarrier {
    /// `input`, behind a barrier that no limit is pushed through.
    pub fn over(input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        Arc::new(Self { input })
    }
}

impl DisplayAs for LimitBarrier {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LimitBarrier")
    }
}

impl ExecutionPlan for LimitBarrier {
    fn name(&self) -> &str {
        "LimitBarrier"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match children.pop() {
            Some(input) if children.is_empty() => Ok(Self::over(input)),
            _ => Err(datafusion::error::DataFusionError::Internal(
                "LimitBarrier takes exactly one input".into(),
            )),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }

    /// Filters pass through to the scan, which uses them to skip files, row groups and pages
    /// (and the dynamic filters of joins and `ORDER BY ... LIMIT`).
    fn gather_filters_for_pushdown(
        &self,
        _phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        FilterDescription::from_children(parent_filters, &self.children())
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        input_stats.first().cloned().ok_or_else(|| {
            datafusion::error::DataFusionError::Internal("LimitBarrier has one input".into())
        })
    }
}
