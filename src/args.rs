//! Flags several commands share, declared once and flattened into each.

use crate::UsageError;
use clap::Args;
use lkplake_ingest::kafka::MAX_MESSAGE_BYTES;
use lkplake_lake::{Format, LakeUrl};
use lkplake_schemas::metric::DirectionTable;
use std::path::PathBuf;

/// `--lake`: every command that reads or writes the lake.
#[derive(Debug, Args, Clone)]
pub struct LakeArg {
    /// Where the lake is: a directory, a file:// URL, or s3://bucket/prefix (AWS_* variables).
    #[arg(
        id = "lake",
        long = "lake",
        value_name = "LAKE",
        env = "LKPLAKE_LAKE",
        default_value = "./lake"
    )]
    pub url: LakeUrl,
}

/// `--directions`: the commands that run a transformer.
#[derive(Debug, Args, Clone)]
pub struct DirectionsArg {
    /// Which way is better for metrics the built-in tables get wrong or do not know: lines of
    /// `PATTERN higher|lower`, the pattern a regex over whole metric names (`#` comments).
    #[arg(
        id = "directions",
        long = "directions",
        value_name = "DIRECTIONS",
        env = "LKPLAKE_DIRECTIONS"
    )]
    pub file: Option<PathBuf>,
}

impl DirectionsArg {
    /// The built-in directions with the overrides of the file, if any.
    pub async fn table(&self) -> anyhow::Result<DirectionTable> {
        let Some(file) = &self.file else {
            return Ok(DirectionTable::default());
        };
        // A file that cannot be read is a file given wrong, as is one that cannot be parsed.
        let text = tokio::fs::read_to_string(file).await.map_err(|e| {
            UsageError::owned(format!(
                "reading the directions file {}: {e}",
                file.display()
            ))
        })?;
        DirectionTable::default()
            .with_overrides_text(&text)
            .map_err(|e| {
                UsageError::owned(format!("directions file {}: {e}", file.display())).into()
            })
    }
}

/// `--lake-format`: the commands that run a transformer, which creates a lake that is missing.
#[derive(Debug, Args, Clone)]
pub struct LakeFormatArg {
    /// The format of a lake this command creates, 1 to 3 (docs/CLI.md, "Lake format"); a lake
    /// that exists keeps its own (`lkplake upgrade` rewrites one).
    #[arg(
        id = "lake_format",
        long = "lake-format",
        value_name = "FORMAT",
        env = "LKPLAKE_LAKE_FORMAT",
        default_value_t = Format::NEW_LAKES,
        value_parser = lake_format
    )]
    pub format: Format,
}

fn lake_format(text: &str) -> Result<Format, String> {
    text.parse::<u32>()
        .ok()
        .and_then(Format::from_number)
        .ok_or_else(|| format!("lkplake knows lake formats 1 to {}", Format::LATEST))
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
    #[arg(id = "max_message_bytes", long = "max-message-bytes", value_name = "MAX_MESSAGE_BYTES", env = "LKPLAKE_MAX_MESSAGE_BYTES", default_value_t = MAX_MESSAGE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..=MAX_MESSAGE_BYTES as u64))]
    pub bytes: u64,
}

impl MessageSizeArg {
    /// The limit, in bytes.
    pub fn get(&self) -> usize {
        usize::try_from(self.bytes).unwrap_or(MAX_MESSAGE_BYTES)
    }
}

/// `--sources-topic`: where a follower keeps each source's position and `dlq replay` the
/// letters it replayed.
#[derive(Debug, Args, Clone)]
pub struct SourcesTopicArg {
    /// The compacted topic where each source's position and each replayed letter are kept.
    #[arg(id = "sources_topic", long = "sources-topic", value_name = "SOURCES_TOPIC", env = "LKPLAKE_SOURCES_TOPIC", default_value = lkplake_kafka::SOURCES_TOPIC)]
    pub name: String,
}
