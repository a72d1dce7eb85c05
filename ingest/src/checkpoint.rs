//! Where each followed source stands, kept in Kafka itself.
//!
//! The pattern of Kafka Connect's source offsets: a compacted topic (`lkp.sources`) keyed by
//! source, whose last value per key is that source's position. A position is written only
//! after the broker acknowledged every message read before it, so a producer that restarts,
//! here or on another machine, resumes from it and loses nothing; what it sends again (read
//! after the last checkpoint, before a crash) carries the same report keys, and the
//! transformer skips those already in the lake.
//!
//! Keys: `epoch:<inbox>#<number>` for an archive epoch (the inbox as the user names it, so run
//! the follower with the same path on another machine), `file:<path>` for a file, and
//! `dlq:<topic>:<partition>:<offset>` for a dead letter that `dlq replay` delivered.

use crate::kafka::{KafkaIngestError, read_topic};
use crate::source::Input;
use rdkafka::message::Message as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The default checkpoint topic.
pub const SOURCES_TOPIC: &str = "lkp.sources";

/// How far a source has been delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Position {
    /// Every message of the epoch up to and including this commit was delivered.
    Epoch {
        /// 40 hex digits.
        commit: String,
    },
    /// The file was delivered whole when it had this size.
    File {
        /// Bytes, as stored.
        size: u64,
    },
    /// The dead letter's reports were delivered to the reports topic.
    Replayed,
}

/// The checkpoint key of an input (`None` for stdin, which cannot be followed).
pub fn key_of(input: &Input) -> Option<String> {
    match input {
        Input::Stdin => None,
        Input::File(path) => Some(format!("file:{}", path.display())),
        Input::Epoch(epoch) => Some(format!("epoch:{}#{}", epoch.inbox, epoch.number)),
    }
}

/// The checkpoint key of a dead letter.
pub fn dead_letter_key(topic: &str, partition: i32, offset: i64) -> String {
    format!("dlq:{topic}:{partition}:{offset}")
}

/// Every source's last saved position.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoints {
    positions: HashMap<String, Position>,
}

impl Checkpoints {
    /// Reads the checkpoint topic from its start to its end; the last value of a key wins, a
    /// value that is not a position (another tool's record) is ignored. Blocks: call it off the
    /// async runtime.
    pub fn load(brokers: &str, topic: &str) -> Result<Self, KafkaIngestError> {
        let mut positions = HashMap::new();
        read_topic(brokers, topic, |message| {
            let Some(key) = message.key().and_then(|k| std::str::from_utf8(k).ok()) else {
                return;
            };
            match message
                .payload()
                .and_then(|p| serde_json::from_slice::<Position>(p).ok())
            {
                Some(position) => {
                    positions.insert(key.to_owned(), position);
                }
                // A tombstone forgets the source.
                None if message.payload().is_none() => {
                    positions.remove(key);
                }
                None => {}
            }
        })?;
        Ok(Self { positions })
    }

    /// The position saved for `key`.
    pub fn get(&self, key: &str) -> Option<&Position> {
        self.positions.get(key)
    }

    /// Records a position (after it was saved).
    pub fn set(&mut self, key: String, position: Position) {
        self.positions.insert(key, position);
    }

    /// What is left to read of `inputs`: each epoch from after its checkpoint commit (and not
    /// at all when that is its head), each file unless it was delivered at its present size.
    pub fn pending(&self, inputs: Vec<Input>) -> Vec<Input> {
        inputs
            .into_iter()
            .filter_map(|input| {
                let saved = key_of(&input).and_then(|key| self.positions.get(&key));
                match (input, saved) {
                    (Input::Epoch(mut epoch), Some(Position::Epoch { commit })) => {
                        // An epoch whose head is still the checkpoint has nothing new; one
                        // whose head cannot be read is read anyway, to report why.
                        if epoch.head().ok().flatten().as_ref() == Some(commit) {
                            return None;
                        }
                        epoch.after = Some(commit.clone());
                        Some(Input::Epoch(epoch))
                    }
                    (Input::File(path), Some(Position::File { size })) => {
                        let now = std::fs::metadata(&path).map(|m| m.len()).ok();
                        (now != Some(*size)).then_some(Input::File(path))
                    }
                    (input, _) => Some(input),
                }
            })
            .collect()
    }
}

/// Saves positions to the checkpoint topic.
pub struct Checkpointer {
    producer: FutureProducer,
    topic: String,
    /// What is saved, to skip saving a position twice.
    pub saved: Checkpoints,
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl Checkpointer {
    /// A checkpointer that sends with `producer` to `topic`, starting from `saved`.
    pub fn new(producer: FutureProducer, topic: impl Into<String>, saved: Checkpoints) -> Self {
        Self {
            producer,
            topic: topic.into(),
            saved,
        }
    }

    /// Saves a position and returns once the broker acknowledged it. The caller must have seen
    /// every message before the position acknowledged first.
    pub async fn save(&mut self, key: String, position: Position) -> Result<(), KafkaIngestError> {
        if self.saved.get(&key) == Some(&position) {
            return Ok(());
        }
        let payload = serde_json::to_vec(&position).map_err(|e| KafkaIngestError::Checkpoint {
            topic: self.topic.clone(),
            key: key.clone(),
            reason: e.to_string(),
        })?;
        self.producer
            .send(
                FutureRecord::to(&self.topic).key(&key).payload(&payload),
                Timeout::Never,
            )
            .await
            .map_err(|(e, _)| KafkaIngestError::Checkpoint {
                topic: self.topic.clone(),
                key: key.clone(),
                reason: e.to_string(),
            })?;
        tracing::debug!(%key, ?position, "checkpoint saved");
        self.saved.set(key, position);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Epoch;
    use std::path::PathBuf;

    #[test]
    fn positions_are_tagged_json_that_other_tools_can_read() {
        let epoch = Position::Epoch {
            commit: "a".repeat(40),
        };
        assert_eq!(
            serde_json::to_string(&epoch).unwrap(),
            format!(r#"{{"kind":"epoch","commit":"{}"}}"#, "a".repeat(40))
        );
        assert_eq!(
            serde_json::to_string(&Position::File { size: 7 }).unwrap(),
            r#"{"kind":"file","size":7}"#
        );
    }

    #[test]
    fn keys_name_the_inbox_and_epoch_or_the_file() {
        let epoch = Input::Epoch(Epoch {
            inbox: "lore/linux-block".into(),
            number: 2,
            git_dir: PathBuf::from("lore/linux-block/git/2.git"),
            after: None,
        });
        assert_eq!(key_of(&epoch).as_deref(), Some("epoch:lore/linux-block#2"));
        assert_eq!(
            key_of(&Input::File(PathBuf::from("mail/new/1"))).as_deref(),
            Some("file:mail/new/1")
        );
        assert_eq!(key_of(&Input::Stdin), None);
    }

    #[test]
    fn a_file_delivered_at_its_present_size_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let same = dir.path().join("same");
        let grown = dir.path().join("grown");
        let new = dir.path().join("new");
        std::fs::write(&same, "12345").unwrap();
        std::fs::write(&grown, "1234567").unwrap();
        std::fs::write(&new, "1").unwrap();
        let mut saved = Checkpoints::default();
        saved.set(
            format!("file:{}", same.display()),
            Position::File { size: 5 },
        );
        saved.set(
            format!("file:{}", grown.display()),
            Position::File { size: 5 },
        );
        let pending = saved.pending(vec![
            Input::File(same),
            Input::File(grown.clone()),
            Input::File(new.clone()),
        ]);
        assert_eq!(pending, vec![Input::File(grown), Input::File(new)]);
    }
}
