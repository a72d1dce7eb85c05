//! Report sources: files, directories (recursively, which covers Maildir folders), mbox and
//! mbox.gz archives, public-inbox archives (v2 inboxes and lore mirrors, read with git), and stdin.
//! A source yields raw messages with their origin; decoding and parsing happen elsewhere.

mod git;

use crate::error::{SourceError, TooLarge};
use flate2::read::MultiGzDecoder;
use lkplake_schemas::Source;
use std::borrow::Cow;
use std::io::{BufRead, Read};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// The most one message may be, in bytes as stored (decompressed; an mbox entry with its
/// `From ` line). A larger one is not read whole: it is handed over as [`Handed::TooLarge`]
/// with its first bytes, and reading goes on with the next message. So reading any input
/// holds at most about this much of it in memory whatever its size: a 2 GB file fed by
/// mistake, a `.gz` that is one huge text, an archive that is not an mbox. Reports are far
/// smaller (a mail of 20,000 tables is about 5 MB).
pub const MAX_MAIL_BYTES: usize = 64 << 20;

/// What is kept of a message larger than [`MAX_MAIL_BYTES`]: its first bytes, enough to see
/// what it is. A dead letter of an input too large for the topic keeps as many
/// (`lkplake_ingest::kafka::LETTER_HEAD` is this).
pub const TOO_LARGE_HEAD: usize = 64 << 10;

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
    /// Stop at the first message this repository lacks (see [`InputRead::missing`]) rather
    /// than read on: set for a followed epoch, whose checkpoint must not pass that message.
    pub stop_at_missing: bool,
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

/// What reading an input hands over: a message, or one too large to be read whole.
#[derive(Debug)]
pub enum Handed<'a> {
    /// A message, whole.
    Message(Message<'a>),
    /// A message larger than the limit, read no further than needed to know it.
    TooLarge(Oversize),
}

/// A message too large to read whole: where it is, its first bytes, and the error that says
/// so (the dead letter it becomes keeps all three).
#[derive(Debug)]
pub struct Oversize {
    /// Its origin, as a whole message's would be.
    pub source: Source,
    /// Its first bytes, at most [`TOO_LARGE_HEAD`] and at most the limit (an mbox entry's
    /// without its `From ` line).
    pub head: Vec<u8>,
    /// Why it was not read whole, naming the input, the message and the limit.
    pub error: TooLarge,
}

/// What reading one input found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputRead {
    /// Messages handed over.
    pub messages: u64,
    /// Commits of an epoch without a message (deletions), skipped.
    pub skipped: u64,
    /// Messages of an epoch whose blob this repository lacks (a partial clone): their commit
    /// adds an `m` that cannot be read, so they were not handed over. Reading went on past
    /// them, or stopped at the first with [`Epoch::stop_at_missing`].
    pub missing: u64,
    /// The first of those messages.
    pub first_missing: Option<MissingMessage>,
    /// An epoch's head when reading began: read to the end, everything up to it was handed over.
    pub head: Option<String>,
    /// The last commit of an epoch read (handed over or skipped) before the first missing
    /// message, if any.
    pub last_commit: Option<String>,
    /// The epoch's history no longer holds the commit reading was to resume after (a purge
    /// rewrote it), so it was read from its first commit.
    pub rewritten: bool,
    /// The reader asked to stop before the end.
    pub stopped: bool,
}

impl InputRead {
    /// The commit an epoch's checkpoint may name once every message handed over was delivered:
    /// its head when every message up to it was read; else the last commit before the first
    /// missing message, so that the next reading starts at that message again (`None` when
    /// there is none: the checkpoint stays where it was).
    pub fn checkpoint(&self) -> Option<&str> {
        match self.first_missing {
            None => self.head.as_deref(),
            Some(_) => self.last_commit.as_deref(),
        }
    }
}

/// A message an epoch's commit adds whose blob the repository lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingMessage {
    /// The commit adding it.
    pub commit: String,
    /// Its index in the epoch (commits from the first, as [`Source::index`] counts).
    pub index: u64,
}

/// Reads one input's messages in order and hands each to `each` until it breaks. A message
/// larger than [`MAX_MAIL_BYTES`] ends the reading with [`SourceError::TooLarge`]; runs read
/// with [`read_bounded`], which hands it over and goes on.
pub fn read(
    input: &Input,
    each: &mut dyn FnMut(Message<'_>) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    read_within(input, MAX_MAIL_BYTES, each)
}

/// [`read`] with `limit` for the largest message.
fn read_within(
    input: &Input,
    limit: usize,
    each: &mut dyn FnMut(Message<'_>) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    let mut too_large = None;
    let read = read_bounded(input, limit, &mut |handed| match handed {
        Handed::Message(message) => each(message),
        Handed::TooLarge(oversize) => {
            too_large = Some(oversize.error);
            ControlFlow::Break(())
        }
    })?;
    match too_large {
        Some(error) => Err(SourceError::TooLarge(error)),
        None => Ok(read),
    }
}

/// Reads one input's messages in order and hands each to `each` until it breaks; a message
/// larger than `limit` bytes is handed over as [`Handed::TooLarge`] without being read whole,
/// and reading goes on after it. Memory holds one message at a time, never the input.
pub fn read_bounded(
    input: &Input,
    limit: usize,
    each: &mut dyn FnMut(Handed<'_>) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    /// Reads of 1 MiB: few system calls, and a gzip stream decoded in large steps.
    const BUFFER: usize = 1 << 20;
    match input {
        // A blob over the limit is read no further than its first bytes, as a file is.
        Input::Epoch(epoch) => git::read_epoch(epoch, limit, each),
        Input::Stdin => stream(Path::new("-"), std::io::stdin().lock(), false, limit, each),
        Input::File(path) => {
            let file = std::fs::File::open(path).map_err(|source| SourceError::Io {
                path: path.to_owned(),
                source,
            })?;
            // Any `.gz` (`x.mbox.gz` or a lone `x.gz`) is decompressed as it is read and split
            // like the file it holds: an mbox message by message, anything else as one message.
            if path.extension().is_some_and(|e| e == "gz") {
                let gunzip = MultiGzDecoder::new(std::io::BufReader::with_capacity(BUFFER, file));
                stream(
                    path,
                    std::io::BufReader::with_capacity(BUFFER, gunzip),
                    true,
                    limit,
                    each,
                )
            } else {
                stream(
                    path,
                    std::io::BufReader::with_capacity(BUFFER, file),
                    false,
                    limit,
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
/// message. No message is read beyond `limit` bytes and one more (see [`Handed::TooLarge`]).
fn stream(
    path: &Path,
    mut reader: impl BufRead,
    gzip: bool,
    limit: usize,
    each: &mut dyn FnMut(Handed<'_>) -> ControlFlow<()>,
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
    // The first line says what the input is. It is read no further than the limit allows: a
    // file without line breaks is one message, and a large one is too large either way.
    let mut first = Vec::new();
    (&mut reader)
        .take(past(limit, 0))
        .read_until(b'\n', &mut first)
        .map_err(fail)?;
    if first.starts_with(b"From ") {
        split_mbox(&name, &mut reader, first, limit, each).map_err(fail)
    } else {
        single(name, &mut reader, first, limit, each).map_err(fail)
    }
}

/// How many bytes to read, `held` being held already, to know whether a message is larger
/// than `limit`: up to the limit and one more.
fn past(limit: usize, held: usize) -> u64 {
    let wanted = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    wanted.saturating_sub(u64::try_from(held).unwrap_or(u64::MAX))
}

/// Hands over an input that is one message, `message` holding its first bytes; the rest of
/// a message larger than `limit` is left unread.
fn single(
    name: String,
    reader: &mut impl Read,
    mut message: Vec<u8>,
    limit: usize,
    each: &mut dyn FnMut(Handed<'_>) -> ControlFlow<()>,
) -> std::io::Result<InputRead> {
    reader
        .take(past(limit, message.len()))
        .read_to_end(&mut message)?;
    let source = Source::file(name, 0);
    let handed = if message.len() > limit {
        message.truncate(head_len(message.len(), limit));
        Handed::TooLarge(oversize(source, message, limit))
    } else {
        Handed::Message(Message {
            source,
            bytes: Cow::Borrowed(&message),
        })
    };
    Ok(InputRead {
        messages: 1,
        stopped: each(handed).is_break(),
        ..InputRead::default()
    })
}

/// How much of a message of `len` bytes too large for `limit` is kept.
fn head_len(len: usize, limit: usize) -> usize {
    len.min(TOO_LARGE_HEAD).min(limit)
}

/// The hand-over of a message too large, from its kept first bytes.
fn oversize(source: Source, head: Vec<u8>, limit: usize) -> Oversize {
    let error = TooLarge {
        path: source.path.clone(),
        index: source.index,
        limit,
        kept: head.len(),
    };
    Oversize {
        source,
        head,
        error,
    }
}

/// The line that starts each mbox entry, with the line break before it.
const SEPARATOR: &[u8] = b"\nFrom ";

/// The bytes asked of the reader at a time.
const READ: usize = 1 << 20;

/// Splits an mbox as it is read, `first` holding its first line.
///
/// `buf[..filled]` holds the entry being read from its `From ` line on, and whatever of the
/// next ones the last read brought. Reads go straight into `buf` (a read as large as the
/// reader's own buffer bypasses it), and separators are searched for in each read's new bytes
/// and the five before them, for one cut by the read: reading line by line cost more than
/// parsing the mail it split. An entry that grows past `limit` before its end is found is
/// handed over as too large and the rest of it skipped, so `buf` stays under `limit` and two
/// reads whatever the entry's size.
fn split_mbox(
    name: &str,
    reader: &mut impl Read,
    first: Vec<u8>,
    limit: usize,
    each: &mut dyn FnMut(Handed<'_>) -> ControlFlow<()>,
) -> std::io::Result<InputRead> {
    let mut read = InputRead::default();
    let mut buf = first;
    let mut filled = buf.len();
    let mut scanned = 0;
    loop {
        if buf.len() - filled < READ {
            buf.resize(filled + READ, 0);
        }
        let n = read_some(reader, &mut buf[filled..])?;
        filled += n;
        let eof = n == 0;
        let mut start = 0;
        let ends = memchr::memmem::find_iter(&buf[scanned..filled], SEPARATOR)
            .map(|p| scanned + p + 1)
            .chain(eof.then_some(filled));
        for end in ends {
            let flow = hand_entry(name, &mut read, &buf[start..end], limit, each);
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
        // The last five bytes may begin the next entry's separator; the rest is this entry's.
        if filled.saturating_sub(SEPARATOR.len() - 1) > limit {
            let head = mbox_message(&buf[..head_len(filled, limit)]).into_owned();
            let source = Source::file(name, read.messages);
            read.messages += 1;
            if each(Handed::TooLarge(oversize(source, head, limit))).is_break() {
                read.stopped = true;
                return Ok(read);
            }
            match skip_entry(reader, &mut buf, filled)? {
                Some(next) => (filled, scanned) = (next, 0),
                None => return Ok(read),
            }
        }
    }
}

/// Hands over one whole mbox entry, or its first bytes when it is larger than `limit`.
fn hand_entry(
    name: &str,
    read: &mut InputRead,
    entry: &[u8],
    limit: usize,
    each: &mut dyn FnMut(Handed<'_>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let source = Source::file(name, read.messages);
    read.messages += 1;
    if entry.len() > limit {
        let head = mbox_message(&entry[..head_len(entry.len(), limit)]).into_owned();
        each(Handed::TooLarge(oversize(source, head, limit)))
    } else {
        each(Handed::Message(Message {
            source,
            bytes: mbox_message(entry),
        }))
    }
}

/// Reads past the rest of an mbox entry too large to keep, `buf[..filled]` holding its last
/// bytes read, up to the next entry's `From ` line. Only the last bytes of each read are kept
/// (a separator may be cut by a read), so memory does not grow with the entry. Returns how
/// many bytes of the next entry `buf` then holds from its start, `None` at the end of input.
fn skip_entry(
    reader: &mut impl Read,
    buf: &mut Vec<u8>,
    mut filled: usize,
) -> std::io::Result<Option<usize>> {
    loop {
        let tail = filled.saturating_sub(SEPARATOR.len() - 1);
        buf.copy_within(tail..filled, 0);
        filled -= tail;
        if buf.len() - filled < READ {
            buf.resize(filled + READ, 0);
        }
        let n = read_some(reader, &mut buf[filled..])?;
        if n == 0 {
            return Ok(None);
        }
        filled += n;
        if let Some(at) = memchr::memmem::find(&buf[..filled], SEPARATOR) {
            buf.copy_within(at + 1..filled, 0);
            return Ok(Some(filled - (at + 1)));
        }
    }
}

/// One read, retried when a signal interrupted it.
fn read_some(reader: &mut impl Read, into: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match reader.read(into) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// The bytes of one input file (decompressed), split into messages, all in memory: for tests
/// and benchmarks of a known file. Runs read inputs with [`read_bounded`], which streams them.
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

    /// What [`read_bounded`] handed over, as owned values.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Message(u64, Vec<u8>),
        TooLarge(u64, Vec<u8>, TooLarge),
    }

    fn seen(handed: Handed<'_>) -> Seen {
        match handed {
            Handed::Message(m) => Seen::Message(m.source.index, m.bytes.into_owned()),
            Handed::TooLarge(o) => Seen::TooLarge(o.source.index, o.head, o.error),
        }
    }

    /// Everything `read_bounded` hands over for `input` with messages of at most `limit` bytes.
    fn bounded(input: &Input, limit: usize) -> (Vec<Seen>, InputRead) {
        let mut all = Vec::new();
        let read = read_bounded(input, limit, &mut |handed| {
            all.push(seen(handed));
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        (all, read)
    }

    /// A reader that gives at most 7 bytes a read, so that separators and the limit fall
    /// across reads.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(7).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    const FROM_LINE: &str = "From a@b Thu Jan  1 00:00:00 1970\n";

    #[test]
    fn a_single_message_over_the_limit_is_handed_over_as_too_large_with_its_first_bytes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("big.txt");
        let data = format!("Subject: big\n\n{}\n", "x".repeat(5000));
        std::fs::write(&path, &data).unwrap_or_else(|e| panic!("{e}"));
        let (all, read) = bounded(&Input::File(path.clone()), 1000);
        let error = TooLarge {
            path: path.display().to_string(),
            index: 0,
            limit: 1000,
            kept: 1000,
        };
        assert_eq!(
            all,
            vec![Seen::TooLarge(0, data.as_bytes()[..1000].to_vec(), error)]
        );
        assert_eq!(read.messages, 1);
        assert!(!read.stopped);
    }

    /// A reader of `data` that counts the bytes it gave.
    struct Counted<'a> {
        data: &'a [u8],
        given: usize,
    }

    impl Read for Counted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            self.given += n;
            Ok(n)
        }
    }

    #[test]
    fn a_single_message_over_the_limit_is_read_no_further_than_the_limit_and_one_byte() {
        let data = format!("Subject: big\n\n{}\n", "x".repeat(5000));
        let mut reader = std::io::BufReader::with_capacity(
            4,
            Counted {
                data: data.as_bytes(),
                given: 0,
            },
        );
        let mut kept = Vec::new();
        let read = stream(
            Path::new("big.txt"),
            &mut reader,
            false,
            1000,
            &mut |handed| {
                if let Handed::TooLarge(too_large) = handed {
                    kept = too_large.head;
                }
                ControlFlow::Continue(())
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.messages, 1);
        assert_eq!(kept, &data.as_bytes()[..1000]);
        // 1,001 bytes tell that the message is larger than 1,000; the reader's 4-byte buffer
        // may have taken up to 3 more. Not the other 4,000.
        let given = reader.get_ref().given;
        assert!(
            (1001..=1004).contains(&given),
            "{given} of {} bytes read",
            data.len()
        );
    }

    #[test]
    fn a_message_too_large_is_a_typed_error_naming_the_path_and_the_limit() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("one-long-line.txt");
        // No line break at all: the first line is read no further than the limit either.
        std::fs::write(&path, "y".repeat(5000)).unwrap_or_else(|e| panic!("{e}"));
        let err = read_within(&Input::File(path.clone()), 1000, &mut |_| {
            ControlFlow::Continue(())
        })
        .expect_err("a message over the limit is an error");
        let name = path.display().to_string();
        assert!(
            matches!(&err, SourceError::TooLarge(e) if e.path == name && e.index == 0 && e.limit == 1000 && e.kept == 1000),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "{name}, message 0: larger than 1000 bytes, the most one message may be; it was not read whole (its first 1000 bytes are kept); split it into smaller files if it really is mail"
            )
        );
    }

    #[test]
    fn a_single_message_of_exactly_the_limit_is_read_whole() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("exact.txt");
        let data = format!("Subject: exact\n\n{}", "z".repeat(1000 - 16));
        assert_eq!(data.len(), 1000);
        std::fs::write(&path, &data).unwrap_or_else(|e| panic!("{e}"));
        let (all, _) = bounded(&Input::File(path), 1000);
        assert_eq!(all, vec![Seen::Message(0, data.into_bytes())]);
    }

    /// An mbox of a small message, one of 5,000 bytes and more, and another small one; and what
    /// a reader of messages of at most 1,000 bytes hands over for it, read from `path`.
    fn mbox_with_a_large_entry(path: &str) -> (Vec<u8>, Vec<Seen>) {
        let one = "Subject: one\n\nsmall\n";
        let big = format!("Subject: big\n\n{}\n", "x\n".repeat(2500));
        let three = "Subject: three\n\nsmall\n";
        let mbox = format!("{FROM_LINE}{one}{FROM_LINE}{big}{FROM_LINE}{three}");
        let kept = 1000 - FROM_LINE.len();
        let expected = vec![
            Seen::Message(0, one.as_bytes().to_vec()),
            Seen::TooLarge(
                1,
                big.as_bytes()[..kept].to_vec(),
                TooLarge {
                    path: path.to_owned(),
                    index: 1,
                    limit: 1000,
                    kept,
                },
            ),
            Seen::Message(2, three.as_bytes().to_vec()),
        ];
        (mbox.into_bytes(), expected)
    }

    #[test]
    fn an_mbox_entry_over_the_limit_is_handed_over_as_too_large_and_reading_goes_on() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("large.mbox");
        let (mbox, expected) = mbox_with_a_large_entry(&path.display().to_string());
        std::fs::write(&path, &mbox).unwrap_or_else(|e| panic!("{e}"));
        // Read in one piece: the large entry is found whole, then cut.
        let (all, read) = bounded(&Input::File(path), 1000);
        assert_eq!(all, expected);
        assert_eq!(read.messages, 3);
        assert!(!read.stopped);
    }

    #[test]
    fn an_mbox_entry_over_the_limit_is_skipped_without_holding_it_when_read_in_small_pieces() {
        let (mbox, expected) = mbox_with_a_large_entry("trickle.mbox");
        let mut all = Vec::new();
        let read = stream(
            Path::new("trickle.mbox"),
            std::io::BufReader::with_capacity(4, Trickle(&mbox)),
            false,
            1000,
            &mut |handed| {
                all.push(seen(handed));
                ControlFlow::Continue(())
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // The entry outgrew the limit before its end was read: it was handed over from its
        // first bytes and the rest skipped up to the next `From ` line, which a read had cut.
        assert_eq!(all, expected);
        assert_eq!(read.messages, 3);
    }

    #[test]
    fn a_lone_gz_of_an_mbox_streams_its_three_messages() {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let messages = [
            "Subject: one\n\nfirst body\n",
            "Subject: two\n\nsecond body\n",
            "Subject: three\n\nthird body\n",
        ];
        let mbox: String = messages.iter().map(|m| format!("{FROM_LINE}{m}")).collect();
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(mbox.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("three.gz");
        std::fs::write(&path, gz.finish().unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        // A limit under the whole input but over each message: the input is split as it is
        // decompressed, never taken as one message.
        let limit = 80;
        assert!(mbox.len() > limit);
        let (all, read) = bounded(&Input::File(path), limit);
        let expected: Vec<Seen> = (0u64..)
            .zip(messages)
            .map(|(i, m)| Seen::Message(i, m.as_bytes().to_vec()))
            .collect();
        assert_eq!(all, expected);
        assert_eq!(read.messages, 3);
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
