//! `observations` over a lake in format 3: format 2's rows, each compacted row joined with its
//! report row (`lkplake_lake::report_rows`).
//!
//! The join's build side is the report rows: 64,041 of them on the 10.6M-row lake against
//! 5.3M observation rows. DataFusion cannot tell that from the statistics of two filtered
//! scans of one table, and planned a partitioned join that hashed and redistributed every
//! observation row before joining (289 ms of a whole-lake monthly aggregate, BENCHMARKS.md).
//! [`Referenced`] plans the view with the report rows collected once and every observation
//! row probing them where it was read.

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::ViewTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SessionState;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// The view, planned with a collected build side (see the module's doc).
#[derive(Debug)]
pub(crate) struct Referenced {
    view: ViewTable,
    /// The same view joined on params too, for scans with a filter on params: the filter then
    /// reaches the report rows, and a one-series query builds its join from that series'
    /// report rows instead of its partition's (14,070 rows in the 10.6M-row lake's largest).
    /// Hashing params for every observation row would slow the scans without one.
    by_params: ViewTable,
}

impl Referenced {
    /// `observations` over `stored`, a format-3 lake's `metrics` registered in `tables`. The
    /// rows a transformer appended since the last compaction are read only if the version
    /// holds some: a lake compacted since its last append plans one scan less.
    pub(crate) async fn over(
        tables: &SessionContext,
        stored: &str,
    ) -> Result<Arc<dyn TableProvider>> {
        let probe = format!("SELECT 1 FROM {stored} WHERE report_ref IS NULL LIMIT 1");
        // A table that cannot be read counts as holding some: the error then reaches the query.
        let appended = match tables.sql(&probe).await?.collect().await {
            Ok(batches) => batches.iter().any(|b| b.num_rows() > 0),
            Err(_) => true,
        };
        let view = |by_params| async move {
            let sql = lkplake_lake::report_rows::observations_sql(stored, appended, by_params);
            let plan = tables.sql(&sql).await?.into_unoptimized_plan();
            Ok::<_, DataFusionError>(ViewTable::new(plan, Some(sql)))
        };
        Ok(Arc::new(Self {
            view: view(false).await?,
            by_params: view(true).await?,
        }))
    }
}

#[async_trait]
impl TableProvider for Referenced {
    fn schema(&self) -> SchemaRef {
        self.view.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn get_table_definition(&self) -> Option<&str> {
        self.view.get_table_definition()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.view.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let on_params = filters
            .iter()
            .any(|f| f.column_refs().iter().any(|c| c.name == "params"));
        let view = if on_params {
            &self.by_params
        } else {
            &self.view
        };
        let Some(session) = state.as_any().downcast_ref::<SessionState>() else {
            return view.scan(state, projection, filters, limit).await;
        };
        // Without repartitioned joins, DataFusion collects the left side, the report rows.
        let mut session = session.clone();
        session
            .config_mut()
            .options_mut()
            .optimizer
            .repartition_joins = false;
        view.scan(&session, projection, filters, limit).await
    }
}
