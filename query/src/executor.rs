//! Query execution on a thread pool of its own, the pattern of InfluxDB's `DedicatedExecutor`
//! (`influxdata/influxdb`, `core/executor`).
//!
//! DataFusion executes on whatever tokio runtime polls its streams. On the server's runtime a
//! heavy aggregation would occupy the worker threads that also accept Postgres logins, answer
//! `/metrics` and probe Kafka. So every physical plan the engine builds is wrapped in
//! [`OnExecutor`] by the [`ExecuteOn`] rule: its streams are produced by tasks on the dedicated
//! runtime and handed over through small channels, and the caller's runtime only moves
//! finished batches. Planning (and the Delta log reads it needs) stays on the caller's runtime.

use datafusion::common::Statistics;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildStats, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, StatisticsArgs,
};
use futures::{FutureExt, StreamExt};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Errors of the executor itself (not of the queries it runs); the message documents each.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]

pub enum ExecutorError {
    #[error("cannot start the query threads: {0}")]
    Start(#[from] std::io::Error),
}

/// A multi-threaded tokio runtime owned by a thread of its own. Dropping the last clone stops
/// it; the owner thread drops the runtime, which cannot be dropped from async code.
#[derive(Clone)]
pub struct DedicatedExecutor {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    handle: tokio::runtime::Handle,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.lock().ok().and_then(|mut s| s.take()) {
            let _ = stop.send(());
        }
    }
}

impl fmt::Debug for DedicatedExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DedicatedExecutor")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl DedicatedExecutor {
    /// Starts `threads` worker threads named `name`.
    pub fn new(name: &str, threads: usize) -> Result<Self, ExecutorError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name(name)
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("{name}-owner"))
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
                // What still runs belongs to clients that are gone or were answered with an
                // error; it is not waited for.
                runtime.shutdown_timeout(Duration::from_millis(100));
            })?;
        Ok(Self {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                handle,
                stop: Mutex::new(Some(stop)),
            }),
        })
    }

    /// A physical optimizer rule that moves execution of every plan onto this executor.
    pub fn rule(&self) -> Arc<dyn PhysicalOptimizerRule + Send + Sync> {
        Arc::new(ExecuteOn {
            executor: self.clone(),
        })
    }
}

/// Wraps the root of every physical plan in [`OnExecutor`]. Added last, after DataFusion's own
/// rules, so nothing rewrites the plan around it.
#[derive(Debug)]
pub struct ExecuteOn {
    executor: DedicatedExecutor,
}

impl PhysicalOptimizerRule for ExecuteOn {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if plan.name() == OnExecutor::NAME {
            return Ok(plan);
        }
        Ok(Arc::new(OnExecutor {
            input: plan,
            executor: self.executor.clone(),
        }))
    }

    fn name(&self) -> &str {
        "execute_on_dedicated_executor"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Batches in flight per partition between the executor and the caller: enough to overlap
/// them, few enough that a slow client holds back execution instead of buffering its result.
const HANDOVER: usize = 2;

/// Executes its input on a [`DedicatedExecutor`]; the stream it returns only receives.
#[derive(Debug, Clone)]
pub struct OnExecutor {
    input: Arc<dyn ExecutionPlan>,
    executor: DedicatedExecutor,
}

impl OnExecutor {
    const NAME: &str = "OnExecutor";
}

impl DisplayAs for OnExecutor {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", Self::NAME, self.executor.inner.name)
    }
}

impl ExecutionPlan for OnExecutor {
    fn name(&self) -> &str {
        Self::NAME
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
            Some(input) if children.is_empty() => Ok(Arc::new(Self {
                input,
                executor: self.executor.clone(),
            })),
            _ => Err(DataFusionError::Internal(
                "OnExecutor takes exactly one input".into(),
            )),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(HANDOVER);
        let input = Arc::clone(&self.input);
        let schema = input.schema();
        let failed = tx.clone();
        // The input is executed inside the task, so operators that spawn their own tasks
        // (repartitioning, merging) spawn them on the executor too.
        let work = async move {
            let mut stream = match input.execute(partition, context) {
                Ok(stream) => stream,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            loop {
                tokio::select! {
                    batch = stream.next() => match batch {
                        Some(batch) => {
                            if tx.send(batch).await.is_err() {
                                return;
                            }
                        }
                        None => return,
                    },
                    // The caller dropped the stream: stop executing.
                    () = tx.closed() => return,
                }
            }
        };
        self.executor.inner.handle.spawn(async move {
            // A panic must end the stream with an error, never as if the result were complete.
            if let Err(panic) = AssertUnwindSafe(work).catch_unwind().await {
                let reason = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                let _ = failed
                    .send(Err(DataFusionError::Execution(format!(
                        "query execution panicked: {reason}"
                    ))))
                    .await;
            }
        });
        let batches = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        input_stats
            .first()
            .cloned()
            .ok_or_else(|| DataFusionError::Internal("OnExecutor has one input".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::SessionContext;

    fn session(executor: &DedicatedExecutor) -> SessionContext {
        SessionContext::new_with_state(
            SessionStateBuilder::new()
                .with_default_features()
                .with_physical_optimizer_rule(executor.rule())
                .build(),
        )
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_query_runs_on_the_executor_threads_and_returns_every_row() -> Result<()> {
        let executor = DedicatedExecutor::new("lkplake-test-query", 2)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let ctx = session(&executor);
        let df = ctx
            .sql("SELECT count(*) AS n, sum(value) AS total FROM generate_series(1, 100000) AS t(value)")
            .await?;
        let plan = df.clone().create_physical_plan().await?;
        assert_eq!(plan.name(), "OnExecutor");
        let batches = df.collect().await?;
        let text = arrow::util::pretty::pretty_format_batches(&batches)?.to_string();
        assert!(text.contains("| 100000 | 5000050000 |"), "{text}");
        Ok(())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_rule_wraps_a_plan_once() -> Result<()> {
        let executor = DedicatedExecutor::new("lkplake-test-query", 1)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let ctx = session(&executor);
        let plan = ctx.sql("SELECT 1").await?.create_physical_plan().await?;
        let again = executor
            .rule()
            .optimize(Arc::clone(&plan), &ConfigOptions::new())?;
        assert_eq!(again.name(), "OnExecutor");
        assert_eq!(again.children()[0].name(), plan.children()[0].name());
        Ok(())
    }
}
