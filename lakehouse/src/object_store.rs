//! Object stores a lake can live on besides the local disk. delta-rs finds a store by the URL's
//! scheme in a process-wide registry; the S3 handlers are put there once, before the first S3
//! lake is opened.

use std::sync::Once;

/// Registers the S3 handlers (`s3://`, `s3a://`) with delta-rs; later calls do nothing.
pub(crate) fn register() {
    static S3: Once = Once::new();
    S3.call_once(|| deltalake::aws::register_handlers(None));
}
