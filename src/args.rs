//! Flags several commands share, declared once and flattened into each.

use crate::UsageError;
use anyhow::Context;
use clap::Args;
use lkplake_ingest::kafka::MAX_MESSAGE_BYTES;
use lkplake_lake::LakeUrl;
use lkplake_schemas::metric::DirectionTable;
use std::path::PathBuf;

/// `--lake`: every command that reads or writes the lake.
#[derive(Debug, Args, Clone)]
pub struct LakeArg {
    /// Where the lake is: a directory, a file:// URL, or s3://bucket/prefix (AWS_* variables).
    #[arg(long = "lake", env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub url: LakeUrl,
}

/// `--directions`: the commands that run a transformer.
#[derive(Debug, Args, Clone)]
pub struct DirectionsArg {
    /// Which way is better for metrics the built-in tables get wrong or do not know: lines of
    /// `PATTERN higher|lower`, the pattern a regex over whole metric names (`#` comments).
    #[arg(long = "directions", env = "LKPLAKE_DIRECTIONS")]
    pub file: Option<PathBuf>,
}

impl DirectionsArg {
    /// The built-in directions with the overrides of the file, if any.
    pub async fn table(&self) -> anyhow::Result<DirectionTable> {
        let Some(file) = &self.file else {
            return Ok(DirectionTable::default());
        };
        let text = tokio::fs::read_to_string(file)
            .await
            .with_context(|| format!("reading the directions file {}", file.display()))?;
        DirectionTable::default()
            .with_overrides_text(&text)
            .map_err(|e| {
                UsageError::owned(format!("directions file {}: {e}", file.display())).into()
            })
    }
}

/// `--max-message-bytes`: the commands that run ingest.
#[derive(Debug, Args, Clone)]
pub struct MessageSizeArg {
    /// The largest message to produce, in bytes; less when the broker describes a topic's
    /// `max.message.bytes` as smaller. A report larger is dead-lettered with the reason; a
    /// dead letter for an input larger keeps its first 64 KiB, with the input's path, size and
    /// SHA-256. A single message over 64 MiB is not read whole, and only its first 64 KiB are
    /// kept: it is dead-lettered with those, marked truncated, naming its path, message index
    /// and the limit, and `dlq replay` refuses it.
    #[arg(long = "max-message-bytes", env = "LKPLAKE_MAX_MESSAGE_BYTES", default_value_t = MAX_MESSAGE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..=MAX_MESSAGE_BYTES as u64))]
    pub bytes: u64,
}

impl MessageSizeArg {
    /// The limit, in bytes.
    pub fn get(&self) -> usize {
        usize::try_from(self.bytes).unwrap_or(MAX_MESSAGE_BYTES)
    }
}
