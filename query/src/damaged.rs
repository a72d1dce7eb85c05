//! A lake table that exists but cannot be read, served so that everything else still is: it
//! has the table's columns, so views over it still plan, and any query that reads it fails
//! with what is wrong and which file, instead of the whole lake failing to open.

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// Table `error` is about, with its columns and no readable rows.
#[derive(Debug)]
pub struct DamagedTable {
    schema: SchemaRef,
    error: String,
}

impl DamagedTable {
    /// A stand-in with `schema` whose every scan fails with `error`.
    pub fn provider(schema: SchemaRef, error: String) -> Arc<dyn TableProvider> {
        Arc::new(Self { schema, error })
    }
}

#[async_trait]
impl TableProvider for DamagedTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(DataFusionError::External(Box::new(Damage(
            self.error.clone(),
        ))))
    }
}

/// Why a damaged table cannot be read, as the error of a query that reads it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Damage(String);
