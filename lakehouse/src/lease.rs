//! Who writes the lake: each running transformer keeps a lease, a small JSON object under
//! `_lkplake/writers/` in the lake, written when it starts, renewed every [`RENEW_EVERY`] by a
//! task of its own (a long flush does not hold renewals back) and deleted when it stops. `lkplake upgrade` refuses a lake with a lease renewed within
//! [`LIVE_FOR`]: a transformer still writing format-1 rows while the table is rewritten would
//! make the upgrade's commit fail at the end. A transformer killed without deleting its lease
//! holds the lake no longer than [`LIVE_FOR`] after its last renewal.
//!
//! Ages are measured against the store's own modification times, so a writer's clock does not
//! matter; the reader's clock is compared with the store's, which for S3 is the server's.

use crate::{LakeError, LakeUrl};
use chrono::{DateTime, Utc};
use deltalake::logstore::object_store::ObjectStoreExt as _;
use deltalake::{DeltaTableBuilder, ObjectStore, Path};
use futures::TryStreamExt as _;
use std::sync::Arc;
use std::time::Duration;

/// How often a transformer renews its lease.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);

/// How long after its last renewal a lease still holds the lake: three renewals missed.
pub const LIVE_FOR: Duration = Duration::from_secs(30);

/// The folder, in the lake, of the leases.
const FOLDER: &str = "_lkplake";

/// A lease taken on a lake and renewed until released (see the module's doc).
#[derive(Debug)]
pub struct Lease {
    written: Written,
    renewing: tokio::task::JoinHandle<()>,
}

/// The lease object: where it is, and what it says.
#[derive(Debug, Clone)]
struct Written {
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// The lease's place for messages: the lake's URL and the path in it.
    named: String,
    body: String,
}

/// A lease another process holds, as found in the lake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// What the holder wrote: its host, process id and start time.
    pub who: String,
    /// The lease's path in the lake.
    pub path: String,
    /// When it was last renewed, by the store's clock.
    pub renewed: DateTime<Utc>,
}

async fn store(lake: &LakeUrl) -> Result<Arc<dyn ObjectStore>, LakeError> {
    crate::object_store::register();
    let url = lake.table(FOLDER)?;
    if let Some(path) = lake.local_table(FOLDER) {
        // delta-rs' local store cannot be built on a directory that does not exist.
        tokio::fs::create_dir_all(&path)
            .await
            .map_err(|source| LakeError::Io { path, source })?;
    }
    let store = DeltaTableBuilder::from_url(url)
        .and_then(|builder| builder.build_storage())
        .map_err(|e| LakeError::Lease {
            path: format!("{lake}/{FOLDER}"),
            reason: e.to_string(),
        })?;
    Ok(store.object_store(None))
}

fn failed(named: &str) -> impl Fn(deltalake::ObjectStoreError) -> LakeError + '_ {
    move |e| LakeError::Lease {
        path: named.to_owned(),
        reason: e.to_string(),
    }
}

impl Lease {
    /// Takes a lease on `lake` for this process, renewed until [`Lease::release`].
    pub async fn take(lake: &LakeUrl) -> Result<Self, LakeError> {
        let host = hostname().await;
        let pid = std::process::id();
        let started = Utc::now();
        let name = format!("{host}-{pid}-{}.json", started.timestamp_micros());
        let body = serde_json::json!({
            "host": host,
            "pid": pid,
            "started": started.to_rfc3339(),
            "role": "transformer",
        })
        .to_string();
        let written = Written {
            store: store(lake).await?,
            path: Path::from(format!("writers/{name}")),
            named: format!("{lake}/{FOLDER}/writers/{name}"),
            body,
        };
        written.put().await?;
        let renewer = written.clone();
        let renewing = tokio::spawn(async move {
            loop {
                tokio::time::sleep(RENEW_EVERY).await;
                // A missed renewal costs nothing yet: the lease holds for three.
                if let Err(e) = renewer.put().await {
                    tracing::warn!("{e}");
                }
            }
        });
        Ok(Self { written, renewing })
    }

    /// Stops renewing and deletes the lease: this process writes the lake no more.
    pub async fn release(self) -> Result<(), LakeError> {
        self.renewing.abort();
        let w = &self.written;
        w.store.delete(&w.path).await.map_err(failed(&w.named))
    }
}

impl Drop for Lease {
    /// A lease dropped without [`Lease::release`] (a return on an error) stops being renewed:
    /// it holds the lake no longer than [`LIVE_FOR`].
    fn drop(&mut self) {
        self.renewing.abort();
    }
}

impl Written {
    /// Writes the lease, which makes its modification time now.
    async fn put(&self) -> Result<(), LakeError> {
        self.store
            .put(&self.path, self.body.clone().into())
            .await
            .map(|_| ())
            .map_err(failed(&self.named))
    }
}

/// The leases on `lake` renewed within [`LIVE_FOR`] of `now`.
pub async fn holders(lake: &LakeUrl, now: DateTime<Utc>) -> Result<Vec<Holder>, LakeError> {
    let store = store(lake).await?;
    let folder = Path::from("writers");
    let objects: Vec<_> = store
        .list(Some(&folder))
        .try_collect()
        .await
        .map_err(failed(&format!("{lake}/{FOLDER}/{folder}")))?;
    let live_for = chrono::Duration::from_std(LIVE_FOR).unwrap_or_default();
    let mut live = Vec::new();
    for object in objects {
        if now - object.last_modified > live_for {
            continue;
        }
        let read = match store.get(&object.location).await {
            Ok(got) => got.bytes().await,
            Err(e) => Err(e),
        };
        let who = match read {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            // Released between the listing and the read: it holds nothing.
            Err(deltalake::ObjectStoreError::NotFound { .. }) => continue,
            Err(e) => return Err(failed(&format!("{lake}/{FOLDER}/{}", object.location))(e)),
        };
        live.push(Holder {
            who,
            path: format!("{FOLDER}/{}", object.location),
            renewed: object.last_modified,
        });
    }
    Ok(live)
}

async fn hostname() -> String {
    tokio::fs::read_to_string("/proc/sys/kernel/hostname")
        .await
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lease_holds_the_lake_until_released_or_three_renewals_late() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let lake = LakeUrl::local(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let lake = &lake;
        let held = |now| async move { holders(lake, now).await.unwrap_or_else(|e| panic!("{e}")) };
        assert_eq!(held(Utc::now()).await, []);
        let lease = Lease::take(lake).await.unwrap_or_else(|e| panic!("{e}"));
        let found = held(Utc::now()).await;
        assert_eq!(found.len(), 1);
        let pid = format!("\"pid\":{}", std::process::id());
        assert!(found[0].who.contains(&pid), "{}", found[0].who);
        assert!(
            found[0].path.starts_with("_lkplake/writers/"),
            "{}",
            found[0].path
        );
        let late =
            Utc::now() + chrono::Duration::from_std(LIVE_FOR + RENEW_EVERY).unwrap_or_default();
        assert_eq!(held(late).await, []);
        lease.release().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(held(Utc::now()).await, []);
    }
}
