//! Report sources: files, directories (recursively, which covers Maildir folders), mbox and
//! mbox.gz archives, public-inbox archives (v2 inboxes and lore mirrors, read with git), and stdin.
//! A source yields raw messages with their origin; decoding and parsing happen elsewhere.

mod git;

use crate::error::SourceError;
use flate2::read::MultiGzDecoder;
use lkplake_schemas::Source;
use std::borrow::Cow;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// One input of a run, as [`inputs`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Standard input (`-`).
    Stdin,
    /// A file: one message, or an mbox / mbox.gz archive.
    File(PathBuf),
    /// One epoch of a public-inbox archive.
    Epoch(Epoch),
}

impl Input {
    /// How messages, summaries and errors name it.
    pub fn name(&self) -> String {
        match self {
            Input::Stdin => "-".to_owned(),
            Input::File(path) => path.display().to_string(),
            Input::Epoch(epoch) => format!("{} epoch {}", epoch.inbox, epoch.number),
        }
    }
}

/// One epoch (git repository) of a public-inbox archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Epoch {
    /// The archive as the user named it: a v2 inbox directory, or the repository itself.
    pub inbox: String,
    /// The epoch's number: `git/<number>.git`, or the end of a lore mirror's name.
    pub number: u32,
    /// The repository.
    pub git_dir: PathBuf,
    /// Read only the commits after this one (where a follower stopped); all without it.
    pub after: Option<String>,
}

impl Epoch {
    /// The commit the epoch's `HEAD` names now (`None` while it has no commit).
    pub fn head(&self) -> Result<Option<String>, SourceError> {
        git::head(self)
    }

    /// `git fetch` from the epoch's remote, if it has one; returns the remote's name.
    pub fn fetch(&self) -> Result<Option<String>, SourceError> {
        git::fetch(self)
    }
}

/// One message of an input, with where it came from.
#[derive(Debug)]
pub struct Message<'a> {
    /// Its origin, for the report and any dead letter.
    pub source: Source,
    /// The message as stored (an mbox's `>From ` lines unescaped).
    pub bytes: Cow<'a, [u8]>,
}

/// What reading one input found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputRead {
    /// Messages handed over.
    pub messages: u64,
    /// Commits of an epoch without a message (deletions), skipped.
    pub skipped: u64,
    /// An epoch's head when reading began: read to the end, everything up to it was handed over.
    pub head: Option<String>,
    /// The last commit of an epoch read, handed over or skipped.
    pub last_commit: Option<String>,
    /// The epoch's history no longer holds the commit reading was to resume after (a purge
    /// rewrote it), so it was read from its first commit.
    pub rewritten: bool,
    /// The reader asked to stop before the end.
    pub stopped: bool,
}

/// Reads one input's messages in order and hands each to `each` until it breaks.
pub fn read(
    input: &Input,
    each: &mut dyn FnMut(Message<'_>) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    /// Reads of 1 MiB: few system calls, and a gzip stream decoded in large steps.
    const BUFFER: usize = 1 << 20;
    match input {
        Input::Epoch(epoch) => git::read_epoch(epoch, each),
        Input::Stdin => stream(Path::new("-"), std::io::stdin().lock(), false, each),
        Input::File(path) => {
            let file = std::fs::File::open(path).map_err(|source| SourceError::Io {
                path: path.to_owned(),
                source,
            })?;
            if path.extension().is_some_and(|e| e == "gz") {
                let gunzip = MultiGzDecoder::new(std::io::BufReader::with_capacity(BUFFER, file));
                stream(
                    path,
                    std::io::BufReader::with_capacity(BUFFER, gunzip),
                    true,
                    each,
                )
            } else {
                stream(
                    path,
                    std::io::BufReader::with_capacity(BUFFER, file),
                    false,
                    each,
                )
            }
        }
    }
}

/// Hands over the messages of one input as they are read: an mbox is split at its `From `
/// lines on the way, so memory holds one message at a time rather than the input (a list's
/// archive is gigabytes). Splitting is [`InputFile`]'s: a first line starting with `From `
/// makes the input an mbox, and every later such line starts a message; anything else is one
/// message.
fn stream(
    path: &Path,
    mut reader: impl std::io::BufRead,
    gzip: bool,
    each: &mut dyn FnMut(Message<'_>) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    let fail = |source| {
        let path = path.to_owned();
        if gzip {
            SourceError::Gzip { path, source }
        } else {
            SourceError::Io { path, source }
        }
    };
    let name = path.display().to_string();
    let mut read = InputRead::default();
    let mut message = Vec::new();
    reader.read_until(b'\n', &mut message).map_err(fail)?;
    if !message.starts_with(b"From ") {
        reader.read_to_end(&mut message).map_err(fail)?;
        read.messages = 1;
        let flow = each(Message {
            source: Source::file(name, 0),
            bytes: Cow::Borrowed(&message),
        });
        read.stopped = flow.is_break();
        return Ok(read);
    }
    // `buf[..filled]` holds the entry being read from its `From ` line on, and whatever of
    // the next ones the last read brought. Reads go straight into `buf` (a read as large as
    // the reader's own buffer bypasses it), and separators are searched for in each read's
    // new bytes and the five before them, for one cut by the read: reading line by line cost
    // more than parsing the mail it split.
    const SEPARATOR: &[u8] = b"\nFrom ";
    const READ: usize = 1 << 20;
    let mut buf = message;
    let mut filled = buf.len();
    let mut scanned = 0;
    loop {
        if buf.len() - filled < READ {
            buf.resize(filled + READ, 0);
        }
        let n = match reader.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(fail(e)),
        };
        filled += n;
        let eof = n == 0;
        let mut start = 0;
        let ends = memchr::memmem::find_iter(&buf[scanned..filled], SEPARATOR)
            .map(|p| scanned + p + 1)
            .chain(eof.then_some(filled));
        for end in ends {
            let flow = each(Message {
                source: Source::file(name.clone(), read.messages),
                bytes: mbox_message(&buf[start..end]),
            });
            read.messages += 1;
            start = end;
            if flow.is_break() {
                read.stopped = true;
                return Ok(read);
            }
        }
        if eof {
            return Ok(read);
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        scanned = filled.saturating_sub(SEPARATOR.len() - 1);
    }
}

/// The bytes of one input file (decompressed), split into messages, all in memory: for tests
/// and benchmarks of a known file. Runs read inputs with [`read`], which streams them.
#[derive(Debug)]
pub struct InputFile {
    /// Path as the user named it (`-` for stdin).
    pub path: String,
    data: Vec<u8>,
    /// Byte ranges of the messages in `data`.
    spans: Vec<std::ops::Range<usize>>,
    is_mbox: bool,
}

/// One message of an input file.
#[derive(Debug)]
pub struct RawMessage<'a> {
    /// Its position in the input, from 0.
    pub index: u64,
    /// The message as stored (an mbox's `>From ` lines unescaped).
    pub bytes: Cow<'a, [u8]>,
}

impl InputFile {
    /// Wraps bytes already in memory (a test fixture, stdin).
    pub fn from_bytes(path: impl Into<String>, data: Vec<u8>) -> Self {
        let is_mbox = data.starts_with(b"From ");
        let spans = if is_mbox {
            mbox_spans(&data)
        } else {
            std::iter::once(0..data.len()).collect()
        };
        Self {
            path: path.into(),
            data,
            spans,
            is_mbox,
        }
    }

    /// Reads a file, gunzipping `.gz` files.
    pub fn read(path: &Path) -> Result<Self, SourceError> {
        let io = |source| SourceError::Io {
            path: path.to_owned(),
            source,
        };
        let raw = std::fs::read(path).map_err(io)?;
        let data = if path.extension().is_some_and(|e| e == "gz") {
            let mut out = Vec::with_capacity(raw.len() * 4);
            MultiGzDecoder::new(raw.as_slice())
                .read_to_end(&mut out)
                .map_err(|source| SourceError::Gzip {
                    path: path.to_owned(),
                    source,
                })?;
            out
        } else {
            raw
        };
        Ok(Self::from_bytes(path.display().to_string(), data))
    }

    /// Total size of the (decompressed) input.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the (decompressed) input holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The messages, in file order.
    pub fn messages(&self) -> impl Iterator<Item = RawMessage<'_>> + '_ {
        self.spans.iter().enumerate().map(move |(index, span)| {
            let slice = &self.data[span.clone()];
            let bytes = if self.is_mbox {
                mbox_message(slice)
            } else {
                Cow::Borrowed(slice)
            };
            RawMessage {
                index: index as u64,
                bytes,
            }
        })
    }
}

/// Splits an mbox at its `From ` separator lines. mboxrd escapes body lines that start with
/// `From ` as `>From `, so every line that starts with `From ` separates messages.
fn mbox_spans(data: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut starts = vec![0];
    for pos in memchr::memmem::find_iter(data, b"\nFrom ") {
        starts.push(pos + 1);
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| start..starts.get(i + 1).copied().unwrap_or(data.len()))
        .collect()
}

/// One mbox entry without its separator line, with mboxrd `>From ` escaping undone.
fn mbox_message(entry: &[u8]) -> Cow<'_, [u8]> {
    let body = match memchr::memchr(b'\n', entry) {
        Some(nl) if entry.starts_with(b"From ") => &entry[nl + 1..],
        _ => entry,
    };
    if memchr::memmem::find(body, b">From ").is_none() {
        return Cow::Borrowed(body);
    }
    let mut out = Vec::with_capacity(body.len());
    for line in body.split_inclusive(|&b| b == b'\n') {
        let quotes = line.iter().take_while(|&&b| b == b'>').count();
        if quotes > 0 && line[quotes..].starts_with(b"From ") {
            out.extend_from_slice(&line[1..]);
        } else {
            out.extend_from_slice(line);
        }
    }
    Cow::Owned(out)
}

/// The inputs of a run and their total size, found in one walk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inputs {
    /// In the order they are read, each with its size as stored (a file's length, an epoch's
    /// objects on disk; 0 for stdin and for what does not exist).
    pub inputs: Vec<(Input, u64)>,
    /// Their sum.
    pub bytes: u64,
}

/// Expands the user's paths (see [`expand_paths`]) and sizes the inputs, once, for progress.
pub fn inputs(paths: &[PathBuf]) -> Result<Inputs, SourceError> {
    Ok(sized(expand_paths(paths)?))
}

/// Sizes inputs already found, for progress.
pub fn sized(inputs: Vec<Input>) -> Inputs {
    let inputs: Vec<(Input, u64)> = inputs
        .into_iter()
        .map(|input| {
            let size = match &input {
                Input::Stdin => 0,
                Input::File(path) => std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
                Input::Epoch(epoch) => git::stored_bytes(epoch),
            };
            (input, size)
        })
        .collect();
    let bytes = inputs.iter().map(|(_, size)| size).sum();
    Inputs { inputs, bytes }
}

/// Expands the user's paths into inputs: a public-inbox archive into its epochs, in order;
/// other directories recursively (sorted, so runs are repeatable; a Maildir's `tmp/` holds
/// half-delivered mail and is skipped; an archive met on the way is read as one); `-` as stdin.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<Input>, SourceError> {
    let mut out = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            out.push(Input::Stdin);
        } else if path.is_dir() {
            walk(path, &mut out)?;
        } else {
            // Surface a missing file as an I/O error when it is read, with its path.
            out.push(Input::File(path.clone()));
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<Input>) -> Result<(), SourceError> {
    if let Some(epochs) = git::epochs(dir)? {
        out.extend(epochs.into_iter().map(Input::Epoch));
        return Ok(());
    }
    let io = |source| SourceError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    let is_maildir = ["cur", "new"].iter().all(|d| dir.join(d).is_dir());
    for entry in entries {
        let name = entry
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with('.') || (is_maildir && name == "tmp") {
            continue;
        }
        if entry.is_dir() {
            walk(&entry, out)?;
        } else {
            out.push(Input::File(entry));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mbox_splits_on_from_lines_and_unescapes_mboxrd() {
        let mbox = b"From a@b Thu Jan  1 00:00:00 1970\nSubject: one\n\n>From here\n>>From there\n\nFrom c@d Thu Jan  1 00:00:00 1970\nSubject: two\n\nbody\n";
        let file = InputFile::from_bytes("x.mbox", mbox.to_vec());
        let messages: Vec<_> = file.messages().collect();
        assert_eq!(messages.len(), 2);
        assert_eq!(
            messages[0].bytes.as_ref(),
            b"Subject: one\n\nFrom here\n>From there\n\n".as_slice()
        );
        assert_eq!(messages[1].index, 1);
        assert_eq!(
            messages[1].bytes.as_ref(),
            b"Subject: two\n\nbody\n".as_slice()
        );
    }

    #[test]
    fn a_plain_file_is_one_message() {
        let file = InputFile::from_bytes("r.txt", b"Hello,\nFrom me\n".to_vec());
        assert_eq!(file.messages().count(), 1);
    }

    /// Every message `read` hands over for `input`: its index and bytes.
    fn streamed(input: &Input, stop_after: Option<u64>) -> (Vec<(u64, Vec<u8>)>, InputRead) {
        let mut messages = Vec::new();
        let read = read(input, &mut |m| {
            messages.push((m.source.index, m.bytes.into_owned()));
            match stop_after {
                Some(n) if messages.len() as u64 == n => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
        (messages, read)
    }

    fn corpus() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroups-lkp-cc.mbox.gz")
    }

    #[test]
    fn a_streamed_mbox_gz_hands_over_exactly_the_messages_of_the_whole_file_split() {
        let whole = InputFile::read(&corpus()).unwrap_or_else(|e| panic!("{e}"));
        let expected: Vec<(u64, Vec<u8>)> = whole
            .messages()
            .map(|m| (m.index, m.bytes.into_owned()))
            .collect();
        let (messages, read) = streamed(&Input::File(corpus()), None);
        // The corpus is 2,014 mails (../shared/corpus, as copied into the fixtures).
        assert_eq!(read.messages, 2014);
        assert!(!read.stopped);
        assert_eq!(messages.len(), 2014);
        assert!(messages == expected, "a streamed message differs");
    }

    #[test]
    fn streaming_stops_where_the_reader_breaks() {
        let (messages, read) = streamed(&Input::File(corpus()), Some(3));
        assert_eq!(read.messages, 3);
        assert!(read.stopped);
        assert_eq!(
            messages.iter().map(|m| m.0).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn a_streamed_plain_file_is_one_message_and_an_mbox_file_is_unescaped() {
        let dir = std::env::temp_dir().join(format!("lkplake-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let plain = dir.join("r.txt");
        std::fs::write(&plain, b"Hello,\nFrom me\n").unwrap_or_else(|e| panic!("{e}"));
        let (messages, _) = streamed(&Input::File(plain), None);
        assert_eq!(messages, vec![(0, b"Hello,\nFrom me\n".to_vec())]);
        let mbox = dir.join("x.mbox");
        std::fs::write(
            &mbox,
            b"From a@b Thu Jan  1 00:00:00 1970\nSubject: one\n\n>From here\n\nFrom c@d Thu Jan  1 00:00:00 1970\nSubject: two\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (messages, _) = streamed(&Input::File(mbox), None);
        assert_eq!(
            messages,
            vec![
                (0, b"Subject: one\n\nFrom here\n\n".to_vec()),
                (1, b"Subject: two\n".to_vec())
            ]
        );
        let empty = dir.join("empty");
        std::fs::write(&empty, b"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(streamed(&Input::File(empty), None).0, vec![(0, Vec::new())]);
        std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_damaged_gzip_is_named_after_the_messages_before_the_damage() {
        let dir = std::env::temp_dir().join(format!("lkplake-gzip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let raw = std::fs::read(corpus()).unwrap_or_else(|e| panic!("{e}"));
        let cut = dir.join("cut.mbox.gz");
        std::fs::write(&cut, &raw[..raw.len() / 2]).unwrap_or_else(|e| panic!("{e}"));
        let mut handed = 0;
        let err = read(&Input::File(cut.clone()), &mut |_| {
            handed += 1;
            ControlFlow::Continue(())
        })
        .expect_err("half a gzip stream is an error");
        assert!(
            matches!(&err, SourceError::Gzip { path, .. } if *path == cut),
            "{err}"
        );
        // What was readable was handed over before the error.
        assert!(handed > 0);
        std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    }
}
