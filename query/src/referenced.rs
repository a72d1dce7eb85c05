//! `observations` over a lake in format 3: format 2's rows, each compacted row joined with its
//! report row (`lkplake_lake::report_rows`).
//!
//! The join's build side is the report rows: 64,041 of them on the 10.6M-row lake against
//! 5.3M observation rows. DataFusion cannot tell that from the statistics of two filtered
//! scans of one table, and planned a partitioned join that hashed and redistributed every
//! observation row before joining (289 ms of a whole-lake monthly aggregate, BENCHMARKS.md).
//! [`Referenced`] plans the view with the report rows collected once and every observation
//! row probing them where it was read.

use crate::materialized::Keeper;
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

/// The name the report rows of a format-3 lake are registered under, for the join: not served,
/// but kept per lake version by a server ([`crate::materialized::KEPT_TABLES`]), so that its
/// queries build the join from memory instead of scanning the report rows' pages again. A
/// one-series query then reads one scan of the lake's files instead of two, one after the
/// other (the join reads its build side before it opens its probe side).
pub(crate) const REPORT_ROWS: &str = "lkplake_report_rows";

impl Referenced {
    /// `observations` over `stored`, a format-3 lake's `metrics` registered in `tables`, with
    /// its report rows registered there as [`REPORT_ROWS`], wrapped by `keeper`. The rows a
    /// transformer appended since the last compaction are read only if the version holds some:
    /// a lake compacted since its last append plans one scan less.
    pub(crate) async fn over(
        tables: &SessionContext,
        stored: &str,
        keeper: &mut Keeper,
    ) -> Result<Arc<dyn TableProvider>> {
        let sql = lkplake_lake::report_rows::report_rows_sql(stored);
        let plan = tables.sql(&sql).await?.into_unoptimized_plan();
        let reports: Arc<dyn TableProvider> = Arc::new(ViewTable::new(plan, Some(sql)));
        let reports = keeper.wrap(REPORT_ROWS, &reports).unwrap_or(reports);
        tables.register_table(REPORT_ROWS, reports)?;
        let probe = format!("SELECT 1 FROM {stored} WHERE report_ref IS NULL LIMIT 1");
        // A table that cannot be read counts as holding some: the error then reaches the query.
        let appended = match tables.sql(&probe).await?.collect().await {
            Ok(batches) => batches.iter().any(|b| b.num_rows() > 0),
            Err(_) => true,
        };
        let view = |by_params| async move {
            let sql = lkplake_lake::report_rows::observations_sql(
                stored,
                Some(REPORT_ROWS),
                appended,
                by_params,
            );
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

#[cfg(test)]
mod tests {
    use crate::unpivot::tests::{ROWS, lake_of, rows};
    use crate::{Engine, EngineConfig};
    use lkplake_lake::{Format, LakeUrl};

    /// A server's engine over a format-3 lake of `ROWS`, compacted: two report rows (k1 of
    /// boot on m1, k2 of vm-scalability on m2), each in its own partition.
    async fn served() -> (tempfile::TempDir, Engine) {
        let (dir, mut lake) = lake_of(ROWS, Format::Three).await;
        lake.compact(false).await.unwrap_or_else(|e| panic!("{e}"));
        let config = EngineConfig {
            keep_views: true,
            ..EngineConfig::default()
        };
        let url = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let engine = Engine::open(&url, &config)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        (dir, engine)
    }

    /// The Parquet scans of `sql`'s plan.
    async fn file_scans(engine: &Engine, sql: &str) -> usize {
        rows(engine, &format!("EXPLAIN {sql}"))
            .await
            .matches("file_type=parquet")
            .count()
    }

    #[tokio::test]
    async fn a_server_joins_the_report_rows_it_keeps_and_answers_as_from_the_files() {
        let (_dir, engine) = served().await;
        let all = "SELECT time, testcase, report_key, base_commit, commit, role, metric \
                   FROM observations ORDER BY testcase, role";
        let one_series = "SELECT report_key, commit, head_mantissa FROM observations \
                          WHERE params = 'size=1T' AND metric = 'vm-scalability.throughput'";
        // ROWS: k1's head and middle column keep their commits; the report rows give back
        // each row's time, key and base commit.
        let expected_all = [
            "+----------------------+----------------+------------+-------------+------------+------+---------------------------+",
            "| time                 | testcase       | report_key | base_commit | commit     | role | metric                    |",
            "+----------------------+----------------+------------+-------------+------------+------+---------------------------+",
            "| 2024-03-01T00:00:00Z | boot           | k1         | 94b7e5bf09  | 98c9daf5ae | c1   | uptime.boot               |",
            "| 2024-03-01T00:00:00Z | boot           | k1         | 94b7e5bf09  | 981204d280 | head | uptime.boot               |",
            "| 2024-04-02T00:00:00Z | vm-scalability | k2         | aaaaaaaaaa  | bbbbbbbbbb | head | vm-scalability.throughput |",
            "+----------------------+----------------+------------+-------------+------------+------+---------------------------+",
        ]
        .join("\n");
        let expected_series = [
            "+------------+------------+---------------+",
            "| report_key | commit     | head_mantissa |",
            "+------------+------------+---------------+",
            "| k2         | bbbbbbbbbb | 21446         |",
            "+------------+------------+---------------+",
        ]
        .join("\n");
        // Read from the files: the report rows' scan, then the observation rows'.
        assert_eq!(file_scans(&engine, all).await, 2);
        assert_eq!(rows(&engine, all).await, expected_all);
        assert_eq!(rows(&engine, one_series).await, expected_series);
        let mut scans = 2;
        for _ in 0..500 {
            scans = file_scans(&engine, all).await;
            if scans == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(scans, 1, "the report rows are read from memory once kept");
        assert_eq!(rows(&engine, all).await, expected_all);
        assert_eq!(rows(&engine, one_series).await, expected_series);
    }
}
