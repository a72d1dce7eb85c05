//! Test builds only: a log store that holds each commit's put at a meeting point.
//!
//! delta-rs commits by listing the log for its latest version and then putting the next one
//! with a conditional put. Two writers race for a version only when both list before either
//! puts, a window of one request; met there ([`lkplake_faults::meet`]), both have listed the
//! same version and put the same one, so the store must refuse one of them on every run.

use std::sync::Arc;

use bytes::Bytes;
use deltalake::kernel::Version;
use deltalake::kernel::transaction::TransactionError;
use deltalake::logstore::object_store::ObjectStore;
use deltalake::logstore::{CommitOrBytes, LogStore, LogStoreConfig, LogStoreRef};
use deltalake::{DeltaResult, DeltaTable};
use uuid::Uuid;

/// The table, not loaded yet, its commits' puts held at `lkplake_faults::BEFORE_PUT.<name>`
/// when `LKPLAKE_MEET` names that point.
pub(crate) fn hold_puts(table: DeltaTable, name: &str) -> DeltaTable {
    DeltaTable::new(Arc::new(Meeting {
        point: format!("{}.{name}", lkplake_faults::BEFORE_PUT),
        inner: table.log_store(),
    }))
}

/// Forwards everything to the table's own log store, meeting before each put.
#[derive(Debug)]
struct Meeting {
    point: String,
    inner: LogStoreRef,
}

#[async_trait::async_trait]
impl LogStore for Meeting {
    fn name(&self) -> String {
        self.inner.name()
    }

    async fn refresh(&self) -> DeltaResult<()> {
        self.inner.refresh().await
    }

    async fn read_commit_entry(&self, version: Version) -> DeltaResult<Option<Bytes>> {
        self.inner.read_commit_entry(version).await
    }

    async fn write_commit_entry(
        &self,
        version: Version,
        commit_or_bytes: CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        lkplake_faults::meet(&self.point).await;
        self.inner
            .write_commit_entry(version, commit_or_bytes, operation_id)
            .await
    }

    async fn abort_commit_entry(
        &self,
        version: Version,
        commit_or_bytes: CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        self.inner
            .abort_commit_entry(version, commit_or_bytes, operation_id)
            .await
    }

    async fn get_latest_version(&self, start_version: Version) -> DeltaResult<Version> {
        self.inner.get_latest_version(start_version).await
    }

    fn object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.object_store(operation_id)
    }

    fn root_object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.root_object_store(operation_id)
    }

    fn config(&self) -> &LogStoreConfig {
        self.inner.config()
    }
}
