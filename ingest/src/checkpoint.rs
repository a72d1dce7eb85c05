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

use crate::KafkaIngestError;
use lkplake_kafka::read_topic;
use lkplake_parse::source::Input;
use rdkafka::message::Message as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// How far a source has been delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Position {
    /// Every message of the epoch up to and including this commit was delivered.
    Epoch {
        /// 40 hex digits.
        commit: String,
    },
    /// The file was delivered whole when it was this ([`file_position`]).
    File {
        /// Bytes, as stored.
        size: u64,
        /// When its status last changed (ctime, nanoseconds since 1970), kept only when that
        /// and `modified_ns` were well before the file was fingerprinted: while both stay the
        /// same the content is the same, and a poll does not read the file to hash it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        changed_ns: Option<u64>,
        /// When its content last changed (mtime, nanoseconds since 1970), kept with
        /// `changed_ns` and only with it. The change time alone would do on a local
        /// filesystem; some FUSE, SMB and NFS mounts report one that never moves, and there a
        /// rewrite at the same size still moves the modification time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        modified_ns: Option<u64>,
        /// SHA-256 of its bytes as stored, in hex. Checkpoints saved before fingerprints have
        /// none: for them the same size means delivered, as it did then.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
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
    /// at all when that is its head), each file unless it was delivered as it is now (the same
    /// size, and the same settled change and modification times or else the same SHA-256).
    /// Blocks (git, file status, hashing): call it off the async runtime.
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
                    (
                        Input::File(path),
                        Some(Position::File {
                            size,
                            changed_ns,
                            modified_ns,
                            sha256,
                        }),
                    ) => {
                        let times = Times {
                            changed: *changed_ns,
                            modified: *modified_ns,
                        };
                        (!still_delivered(&path, *size, times, sha256.as_deref()))
                            .then_some(Input::File(path))
                    }
                    (input, _) => Some(input),
                }
            })
            .collect()
    }
}

/// How long before its fingerprint a file must have last changed for the fingerprint to keep
/// its times. A write during or after the fingerprint gives the file a change time no earlier
/// than the clock read before it, less the filesystem's timestamp granularity (a clock tick on
/// ext4 and XFS, 2 s on FAT); a change time settled longer ago than that therefore differs
/// after any later write, and so does a modification time the write moves. A file
/// fingerprinted sooner after a write (mail just delivered) keeps none, and is hashed again at
/// every poll that finds its size unchanged.
const SETTLED_NS: u64 = 2_000_000_000;

/// A followed file's position as it is now: its size and SHA-256, and its change and
/// modification times when both are settled (see `SETTLED_NS`). Take it before reading the
/// file: a rewrite while the file is read then differs from it, and the file is read again
/// rather than missed. Reads the file whole; blocks.
///
/// SHA-256 rather than a cheaper hash: it is in the tree already (dead letters name their
/// input with it), and next to reading the file from disk it costs little; the times spare
/// the reading itself for files that did not change.
#[allow(
    clippy::disallowed_methods,
    reason = "runs on ingest's parser thread and in follow's `spawn_blocking`, never on a runtime worker"
)]
pub fn file_position(path: &Path) -> std::io::Result<Position> {
    use sha2::{Digest, Sha256};
    // The clock first, then the times, then the bytes: see `SETTLED_NS`.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_nanos()).ok());
    let mut file = std::fs::File::open(path)?;
    let times = Times::of(&file.metadata()?);
    let mut hasher = Sha256::new();
    let size = std::io::copy(&mut file, &mut hasher)?;
    let sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // Both or neither: only the two together vouch for the content (see `Times::vouch`).
    let keep = times.settled(now);
    Ok(Position::File {
        size,
        changed_ns: times.changed.filter(|_| keep),
        modified_ns: times.modified.filter(|_| keep),
        sha256: Some(sha256),
    })
}

/// Whether the file at `path` is still what was delivered at `size`, `saved` times and
/// `sha256`: the same size (a stat), then the same settled times (the same stat, no reading),
/// or else the same SHA-256 (reading it whole). A file that cannot be looked at is read, to
/// report why.
fn still_delivered(path: &Path, size: u64, saved: Times, sha256: Option<&str>) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if meta.len() != size {
        return false;
    }
    let Some(sha256) = sha256 else {
        // Saved before fingerprints: the same size means delivered, as it did then.
        return true;
    };
    if saved.vouch(Times::of(&meta)) {
        return true;
    }
    match file_position(path) {
        Ok(Position::File {
            size: now_size,
            sha256: Some(now),
            ..
        }) => now_size == size && now == sha256,
        _ => false,
    }
}

/// A file's change time (ctime) and modification time (mtime), nanoseconds since 1970; `None`
/// for one the filesystem does not give.
///
/// The change time is the one to trust: every write moves it to the present and nothing sets
/// it back, where the modification time can be set to anything (`touch -d`, `cp -p`,
/// `rsync -t`, editors that keep it) and so could hide a rewrite at the same size. But some
/// FUSE, SMB and NFS mounts report a change time that never moves (or none, as 0); there the
/// modification time, which the write does move unless its writer sets it back, still tells.
/// Neither alone is enough everywhere, so the pair vouches for the content only when both
/// are known and both unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Times {
    changed: Option<u64>,
    modified: Option<u64>,
}

impl Times {
    #[cfg(unix)]
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            changed: since_1970(meta.ctime(), meta.ctime_nsec()),
            modified: since_1970(meta.mtime(), meta.mtime_nsec()),
        }
    }

    /// Without a change time, the modification time stands for both (see the Unix version
    /// for what that misses).
    #[cfg(not(unix))]
    fn of(meta: &std::fs::Metadata) -> Self {
        let modified = meta
            .modified()
            .ok()
            .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
            .and_then(|since| u64::try_from(since.as_nanos()).ok())
            .filter(|&ns| ns > 0);
        Self {
            changed: modified,
            modified,
        }
    }

    /// Whether both times are known and at least `SETTLED_NS` before `now`.
    fn settled(self, now: Option<u64>) -> bool {
        let before = |at: Option<u64>| match (at, now) {
            (Some(at), Some(now)) => at.saturating_add(SETTLED_NS) <= now,
            _ => false,
        };
        before(self.changed) && before(self.modified)
    }

    /// Whether these times, saved with a fingerprint, vouch that the file is unchanged as it
    /// is `now`: both were saved, and both are the same.
    fn vouch(self, now: Times) -> bool {
        self.changed.is_some() && self.modified.is_some() && self == now
    }
}

/// Seconds and nanoseconds since 1970 as nanoseconds; `None` before 1970, past `u64`, or at 0:
/// some FUSE, SMB and NFS mounts give 0 for a time they do not keep, and a time that never
/// moves cannot tell a rewrite.
#[cfg(any(unix, test))]
fn since_1970(seconds: i64, nanos: i64) -> Option<u64> {
    let seconds = u64::try_from(seconds).ok()?;
    let nanos = u64::try_from(nanos).ok()?;
    seconds
        .checked_mul(1_000_000_000)?
        .checked_add(nanos)
        .filter(|&ns| ns > 0)
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
#[allow(
    clippy::disallowed_methods,
    reason = "the tests write the files they fingerprint from plain test threads"
)]
mod tests {
    use super::*;
    use lkplake_parse::source::Epoch;
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
        let file = Position::File {
            size: 5,
            changed_ns: Some(1_700_000_000_000_000_000),
            modified_ns: Some(1_699_999_999_000_000_000),
            sha256: Some(FIVE_DIGITS_SHA256.to_owned()),
        };
        assert_eq!(
            serde_json::to_string(&file).unwrap(),
            format!(
                r#"{{"kind":"file","size":5,"changed_ns":1700000000000000000,"modified_ns":1699999999000000000,"sha256":"{FIVE_DIGITS_SHA256}"}}"#
            )
        );
        // A fingerprint without settled times leaves the fields out.
        let unsettled = Position::File {
            size: 7,
            changed_ns: None,
            modified_ns: None,
            sha256: None,
        };
        assert_eq!(
            serde_json::to_string(&unsettled).unwrap(),
            r#"{"kind":"file","size":7}"#
        );
    }

    #[test]
    fn a_file_checkpoint_saved_before_fingerprints_is_read_as_one_without() {
        assert_eq!(
            serde_json::from_str::<Position>(r#"{"kind":"file","size":7}"#).unwrap(),
            Position::File {
                size: 7,
                changed_ns: None,
                modified_ns: None,
                sha256: None,
            }
        );
    }

    #[test]
    fn a_file_checkpoint_saved_with_a_change_time_only_is_read_without_a_modification_time() {
        let saved = format!(
            r#"{{"kind":"file","size":5,"changed_ns":1700000000000000000,"sha256":"{FIVE_DIGITS_SHA256}"}}"#
        );
        assert_eq!(
            serde_json::from_str::<Position>(&saved).unwrap(),
            Position::File {
                size: 5,
                changed_ns: Some(1_700_000_000_000_000_000),
                modified_ns: None,
                sha256: Some(FIVE_DIGITS_SHA256.to_owned()),
            }
        );
    }

    #[test]
    fn keys_name_the_inbox_and_epoch_or_the_file() {
        let epoch = Input::Epoch(Epoch {
            inbox: "lore/linux-block".into(),
            number: 2,
            git_dir: PathBuf::from("lore/linux-block/git/2.git"),
            after: None,
            stop_at_missing: false,
        });
        assert_eq!(key_of(&epoch).as_deref(), Some("epoch:lore/linux-block#2"));
        assert_eq!(
            key_of(&Input::File(PathBuf::from("mail/new/1"))).as_deref(),
            Some("file:mail/new/1")
        );
        assert_eq!(key_of(&Input::Stdin), None);
    }

    /// SHA-256 of `12345`.
    const FIVE_DIGITS_SHA256: &str =
        "5994471abb01112afcc18159f6cc74b4f511b99806da59b3caf5a9c173cacfc5";

    fn file_key(path: &Path) -> String {
        key_of(&Input::File(path.to_owned())).unwrap()
    }

    /// SHA-256 of `bytes`, in hex, computed here rather than copied from the code under test.
    fn sha256_hex(bytes: &[u8]) -> String {
        use sha2::{Digest, Sha256};
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn a_file_is_fingerprinted_by_its_size_and_sha256_and_at_most_its_own_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mail");
        let written = b"12345";
        std::fs::write(&path, written).unwrap();
        let Position::File {
            size,
            changed_ns,
            modified_ns,
            sha256,
        } = file_position(&path).unwrap()
        else {
            panic!("a file's position is a file position");
        };
        assert_eq!(size, 5);
        assert_eq!(sha256, Some(sha256_hex(written)));
        assert_eq!(sha256.as_deref(), Some(FIVE_DIGITS_SHA256));
        // Just written, its times are not settled and are left out; but a loaded machine may
        // take longer than `SETTLED_NS` between the write and the fingerprint, and then they
        // are kept: both, and both the file's own.
        let own = Times::of(&std::fs::metadata(&path).unwrap());
        match (changed_ns, modified_ns) {
            (None, None) => {}
            (changed, modified) => assert_eq!((changed, modified), (own.changed, own.modified)),
        }
    }

    #[test]
    fn a_time_of_zero_is_unknown() {
        // What some FUSE, SMB and NFS mounts give for a time they do not keep.
        assert_eq!(since_1970(0, 0), None);
        assert_eq!(since_1970(-1, 0), None);
        assert_eq!(since_1970(0, 1), Some(1));
        assert_eq!(
            since_1970(1_700_000_000, 5),
            Some(1_700_000_000_000_000_005)
        );
    }

    #[test]
    fn only_both_times_saved_and_unchanged_vouch_for_a_file() {
        let at = 1_700_000_000_000_000_000;
        let saved = Times {
            changed: Some(at),
            modified: Some(at),
        };
        assert!(saved.vouch(saved));
        // A mount whose change time never moves: the rewrite moved the modification time.
        let rewritten = Times {
            changed: Some(at),
            modified: Some(at + 1_000_000_000),
        };
        assert!(!saved.vouch(rewritten));
        // A modification time set back (`touch -d`): the change time moved.
        let set_back = Times {
            changed: Some(at + 1_000_000_000),
            modified: Some(at),
        };
        assert!(!saved.vouch(set_back));
        // A change time the filesystem does not give (0, read as unknown) vouches for nothing,
        // even with the same modification time.
        let without_change_time = Times {
            changed: None,
            modified: Some(at),
        };
        assert!(!without_change_time.vouch(without_change_time));
        // Nor does a checkpoint saved with a change time only.
        let change_time_only = Times {
            changed: Some(at),
            modified: None,
        };
        assert!(!change_time_only.vouch(saved));
    }

    #[test]
    fn times_are_kept_only_when_both_settled_two_seconds_before_the_fingerprint() {
        let at = 1_700_000_000_000_000_000;
        let times = Times {
            changed: Some(at),
            modified: Some(at),
        };
        assert!(times.settled(Some(at + 2_000_000_000)));
        assert!(!times.settled(Some(at + 1_999_999_999)));
        assert!(!times.settled(None));
        // A modification time set into the future is not settled.
        let future = Times {
            changed: Some(at),
            modified: Some(at + 10_000_000_000),
        };
        assert!(!future.settled(Some(at + 2_000_000_000)));
        let unknown = Times {
            changed: None,
            modified: Some(at),
        };
        assert!(!unknown.settled(Some(at + 2_000_000_000)));
    }

    #[test]
    fn a_file_delivered_at_its_present_size_and_content_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let same = dir.path().join("same");
        let grown = dir.path().join("grown");
        let new = dir.path().join("new");
        std::fs::write(&same, "12345").unwrap();
        std::fs::write(&grown, "12345").unwrap();
        let mut saved = Checkpoints::default();
        saved.set(file_key(&same), file_position(&same).unwrap());
        saved.set(file_key(&grown), file_position(&grown).unwrap());
        std::fs::write(&grown, "1234567").unwrap();
        std::fs::write(&new, "1").unwrap();
        let pending = saved.pending(vec![
            Input::File(same),
            Input::File(grown.clone()),
            Input::File(new.clone()),
        ]);
        assert_eq!(pending, vec![Input::File(grown), Input::File(new)]);
    }

    #[test]
    fn a_file_rewritten_at_the_same_size_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mail");
        std::fs::write(&path, "12345").unwrap();
        let mut saved = Checkpoints::default();
        saved.set(file_key(&path), file_position(&path).unwrap());
        std::fs::write(&path, "54321").unwrap();
        assert_eq!(
            saved.pending(vec![Input::File(path.clone())]),
            vec![Input::File(path)]
        );
    }

    #[test]
    fn a_file_checkpoint_without_a_fingerprint_takes_the_same_size_as_delivered() {
        let dir = tempfile::tempdir().unwrap();
        let rewritten = dir.path().join("rewritten");
        let grown = dir.path().join("grown");
        std::fs::write(&rewritten, "54321").unwrap();
        std::fs::write(&grown, "1234567").unwrap();
        let mut saved = Checkpoints::default();
        for path in [&rewritten, &grown] {
            let old: Position = serde_json::from_str(r#"{"kind":"file","size":5}"#).unwrap();
            saved.set(file_key(path), old);
        }
        // As before fingerprints: a file of the saved size counts as delivered.
        let pending = saved.pending(vec![Input::File(rewritten), Input::File(grown.clone())]);
        assert_eq!(pending, vec![Input::File(grown)]);
    }

    #[test]
    fn settled_change_and_modification_times_vouch_for_a_file_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mail");
        std::fs::write(&path, "54321").unwrap();
        let times = Times::of(&std::fs::metadata(&path).unwrap());
        assert!(times.changed.is_some() && times.modified.is_some());
        let mut saved = Checkpoints::default();
        // A hash the file does not have: only its unchanged times can pass it.
        saved.set(
            file_key(&path),
            Position::File {
                size: 5,
                changed_ns: times.changed,
                modified_ns: times.modified,
                sha256: Some(FIVE_DIGITS_SHA256.to_owned()),
            },
        );
        assert_eq!(saved.pending(vec![Input::File(path)]), Vec::<Input>::new());
    }

    #[test]
    fn a_file_whose_modification_time_moved_is_hashed_though_its_change_time_did_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mail");
        std::fs::write(&path, "54321").unwrap();
        let times = Times::of(&std::fs::metadata(&path).unwrap());
        let mut saved = Checkpoints::default();
        // As on a mount whose change time never moves: the same change time, a modification
        // time one second off, and a hash the file does not have: the hash decides, and the
        // file is read again.
        saved.set(
            file_key(&path),
            Position::File {
                size: 5,
                changed_ns: times.changed,
                modified_ns: times.modified.map(|m| m - 1_000_000_000),
                sha256: Some(FIVE_DIGITS_SHA256.to_owned()),
            },
        );
        assert_eq!(
            saved.pending(vec![Input::File(path.clone())]),
            vec![Input::File(path)]
        );
    }

    #[test]
    fn a_file_checkpoint_with_a_change_time_only_is_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let same = dir.path().join("same");
        let rewritten = dir.path().join("rewritten");
        std::fs::write(&same, "12345").unwrap();
        std::fs::write(&rewritten, "54321").unwrap();
        let mut saved = Checkpoints::default();
        for path in [&same, &rewritten] {
            let changed = Times::of(&std::fs::metadata(path).unwrap()).changed;
            saved.set(
                file_key(path),
                Position::File {
                    size: 5,
                    changed_ns: changed,
                    modified_ns: None,
                    sha256: Some(FIVE_DIGITS_SHA256.to_owned()),
                },
            );
        }
        // The change time alone vouches for neither: `same` passes by its hash, `rewritten`
        // does not.
        let pending = saved.pending(vec![Input::File(same), Input::File(rewritten.clone())]);
        assert_eq!(pending, vec![Input::File(rewritten)]);
    }
}
