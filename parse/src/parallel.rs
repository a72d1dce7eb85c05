//! Parsing one input on every core, with the results handed back in input order.
//!
//! One thread reads and splits the input and runs the raw half of the byte-level
//! [`crate::prefilter`], which settles most list mail on the spot; the messages it cannot settle go, in batches, to worker
//! threads that decode and parse them; the caller's thread receives every message's outcome in
//! the order the input holds them (`parse` prints in that order, `ingest` checkpoints by it).
//! Settled mail is never copied: only its place in the order travels.

use crate::error::{ParseError, SourceError};
use crate::parser::{Parsed, parse_document, parse_links};
use crate::prefilter::{Plain, Raw, read_plain, read_raw};
use crate::source::{self, Handed, Input, InputRead, Oversize};
use lkplake_schemas::Source;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// What one message turned out to be, with where it is.
#[derive(Debug)]
pub struct Outcome {
    /// Its place in the input.
    pub source: Source,
    /// Its size as stored.
    pub size: usize,
    /// The message as stored, when it was read past the prefilter (decoded, or read for its
    /// links): a dead letter or an oversized report keeps it. `None` for mail the prefilter
    /// settled.
    pub raw: Option<Vec<u8>>,
    /// The parse, or why the message could not be parsed. A parser panic on one message is
    /// [`ParseError::Panicked`] for that message, not the end of the input.
    pub parsed: Result<Parsed, ParseError>,
}

/// A message on its way to a worker: settled already, or to be decoded.
enum Job {
    Settled(Source, usize),
    /// Plain mail the raw bytes leave open ([`Raw::NotAReportUnlessDecoded`], [`Raw::Links`]):
    /// the worker finishes the prefilter's work ([`read_plain`]).
    Plain(Source, Vec<u8>, Raw),
    Decode(Source, Vec<u8>),
    /// A message the reader refused (too large to read whole): its first bytes and why, kept
    /// in input order so that it becomes a dead letter where it stands.
    Refused(Source, Vec<u8>, ParseError),
}

/// A batch of messages and where its worker sends their outcomes.
type Batch = (Vec<Job>, SyncSender<Vec<Outcome>>);

/// A batch is sent once it holds this many messages or bytes: few channel operations per
/// message, and a bounded amount of mail in memory (at most [`DEPTH`] batches per worker).
const BATCH_MESSAGES: usize = 512;
const BATCH_BYTES: usize = 4 << 20;
const DEPTH: usize = 2;

/// How many threads decode and parse: one per core but the one the reading thread keeps busy.
/// On two cores, two workers beside the reader ran slower than one (over linux-block, medians
/// of five interleaved runs: 0.59 s against 0.51 s; BENCHMARKS.md, "Parsing").
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| usize::from(n).saturating_sub(1).max(1))
}

/// Reads `input` and hands each message's [`Outcome`] to `each`, in input order, on the
/// calling thread; `threads` workers decode and parse. Stops reading once `each` breaks. A
/// message larger than [`source::MAX_MAIL_BYTES`] is not read whole: its outcome is
/// [`ParseError::TooLarge`] with its first bytes as `raw`, and reading goes on after it.
pub fn parse_input(
    input: &Input,
    threads: usize,
    each: &mut dyn FnMut(Outcome) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    parse_input_within(input, threads, source::MAX_MAIL_BYTES, each)
}

/// [`parse_input`] with `limit` for the largest message.
fn parse_input_within(
    input: &Input,
    threads: usize,
    limit: usize,
    each: &mut dyn FnMut(Outcome) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    let threads = threads.max(1);
    let stop = AtomicBool::new(false);
    // Many workers take from one queue: crossbeam's channel is multi-consumer, std's is not.
    let (work_tx, work_rx) = crossbeam_channel::bounded::<Batch>(threads * DEPTH);
    let (order_tx, order_rx) = sync_channel::<Receiver<Vec<Outcome>>>(threads * DEPTH);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let work_rx = work_rx.clone();
            scope.spawn(move || work(&work_rx));
        }
        let stop = &stop;
        let reader = scope.spawn(move || read(input, limit, stop, &work_tx, &order_tx));
        let mut broke = false;
        for batch in order_rx {
            // A batch whose worker is gone (the channel closed) ends the delivery; the reader
            // then stops too.
            let Ok(outcomes) = batch.recv() else { break };
            if outcomes.into_iter().any(|outcome| each(outcome).is_break()) {
                stop.store(true, Ordering::Relaxed);
                broke = true;
                break;
            }
        }
        // The reader's own result; a panic in it is not caught here, the caller's thread
        // carries it on.
        let mut read = match reader.join() {
            Ok(read) => read,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        // Stopped by the caller even when the reader had read the whole input by then (its
        // batches wait in the channels): what it read after the break is not delivered.
        if let Ok(read) = &mut read {
            read.stopped |= broke;
        }
        read
    })
}

/// The reading thread: splits the input, settles what it can, and sends the rest in batches.
fn read(
    input: &Input,
    limit: usize,
    stop: &AtomicBool,
    work_tx: &crossbeam_channel::Sender<Batch>,
    order_tx: &SyncSender<Receiver<Vec<Outcome>>>,
) -> Result<InputRead, SourceError> {
    let mut batch = Vec::with_capacity(BATCH_MESSAGES);
    let mut bytes = 0;
    let send = |batch: Vec<Job>| -> bool {
        let (tx, rx) = sync_channel(1);
        order_tx.send(rx).is_ok() && work_tx.send((batch, tx)).is_ok()
    };
    let mut gone = false;
    let mut read = source::read_bounded(input, limit, &mut |handed| {
        if stop.load(Ordering::Relaxed) {
            return ControlFlow::Break(());
        }
        let job = match handed {
            Handed::Message(message) => job_for(message),
            Handed::TooLarge(Oversize {
                source,
                head,
                error,
            }) => Job::Refused(source, head, ParseError::TooLarge(error)),
        };
        if let Job::Decode(_, raw) | Job::Plain(_, raw, _) | Job::Refused(_, raw, _) = &job {
            bytes += raw.len();
        }
        batch.push(job);
        if batch.len() >= BATCH_MESSAGES || bytes >= BATCH_BYTES {
            bytes = 0;
            if !send(std::mem::replace(
                &mut batch,
                Vec::with_capacity(BATCH_MESSAGES),
            )) {
                gone = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    // What was read before an error in the input is delivered before the error.
    if !batch.is_empty() && !gone && !send(batch) {
        gone = true;
    }
    // Stopped by the caller: what was read before it stopped was delivered or dropped by it.
    if let Ok(read) = &mut read {
        read.stopped |= gone || stop.load(Ordering::Relaxed);
    }
    read
}

/// What a worker is to do with a message: nothing when its raw bytes settle it, else decode
/// it (the quoted-printable body the raw bytes leave open is decoded by the worker too).
fn job_for(message: source::Message<'_>) -> Job {
    match read_raw(&message.bytes) {
        Raw::NotAReport => Job::Settled(message.source, message.bytes.len()),
        Raw::Decode => Job::Decode(message.source, message.bytes.into_owned()),
        // The whole mail travels, though only its head and own text are read: a parser failure
        // dead-letters the mail as it came.
        plain => Job::Plain(message.source, message.bytes.into_owned(), plain),
    }
}

/// A worker: decodes and parses batches until the reader is done.
fn work(queue: &crossbeam_channel::Receiver<Batch>) {
    for (jobs, reply) in queue {
        let outcomes = jobs.into_iter().map(run).collect();
        if reply.send(outcomes).is_err() {
            return;
        }
    }
}

fn run(job: Job) -> Outcome {
    match job {
        Job::Refused(source, raw, error) => Outcome {
            source,
            size: raw.len(),
            raw: Some(raw),
            parsed: Err(error),
        },
        Job::Settled(source, size) => Outcome {
            source,
            size,
            raw: None,
            parsed: Ok(Parsed::NotAReport),
        },
        Job::Plain(source, raw, plain) => match read_plain(&raw, plain) {
            Plain::Settled => Outcome {
                source,
                size: raw.len(),
                raw: None,
                parsed: Ok(Parsed::NotAReport),
            },
            Plain::Links(body) => {
                let parsed = guarded(|| parse_links(&raw, body, &source));
                Outcome {
                    source,
                    size: raw.len(),
                    raw: Some(raw),
                    parsed,
                }
            }
            Plain::Decode => decoded(source, raw),
        },
        Job::Decode(source, raw) => decoded(source, raw),
    }
}

fn decoded(source: Source, raw: Vec<u8>) -> Outcome {
    let parsed = guarded(|| parse_document(&crate::decode::decode(&raw), &source));
    Outcome {
        source,
        size: raw.len(),
        raw: Some(raw),
        parsed,
    }
}

/// Runs the parser; a panic in it is the message's error, not the end of the input.
fn guarded(parse: impl FnOnce() -> Result<Parsed, ParseError>) -> Result<Parsed, ParseError> {
    std::panic::catch_unwind(AssertUnwindSafe(parse)).unwrap_or_else(|panic| {
        Err(ParseError::Panicked {
            reason: panic_reason(panic.as_ref()),
        })
    })
}

/// A panic's message, for a dead letter or an error.
pub fn panic_reason(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TooLarge;
    use crate::parser::parse_message;
    use crate::source::InputFile;
    use std::path::{Path, PathBuf};

    fn corpus() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroups-lkp-cc.mbox.gz")
    }

    /// Each message's index, size and parse, in the order delivered.
    type Seen = Vec<(u64, usize, Result<Parsed, ParseError>)>;

    fn outcomes(input: &Input, threads: usize) -> (Seen, InputRead) {
        let mut seen = Vec::new();
        let read = parse_input(input, threads, &mut |o| {
            seen.push((o.source.index, o.size, o.parsed));
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        (seen, read)
    }

    #[test]
    fn every_message_comes_back_in_input_order_with_the_parse_of_one_thread() {
        let file = InputFile::read(&corpus()).unwrap_or_else(|e| panic!("{e}"));
        let expected: Vec<_> = file
            .messages()
            .map(|m| {
                let source = Source::file(file.path.clone(), m.index);
                (m.index, m.bytes.len(), parse_message(&m.bytes, &source))
            })
            .collect();
        assert_eq!(expected.len(), 2014);
        for threads in [1, 2, 5] {
            let (seen, read) = outcomes(&Input::File(corpus()), threads);
            assert_eq!(read.messages, 2014);
            assert!(!read.stopped);
            assert!(seen == expected, "{threads} threads: outcomes differ");
        }
    }

    #[test]
    fn a_break_stops_reading_and_nothing_after_it_is_delivered() {
        let mut seen = Vec::new();
        let read = parse_input(&Input::File(corpus()), 2, &mut |o| {
            seen.push(o.source.index);
            if seen.len() == 700 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seen, (0..700).collect::<Vec<u64>>());
        assert!(read.stopped);
    }

    #[test]
    fn a_message_over_the_limit_becomes_a_too_large_outcome_and_reading_goes_on() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("large.mbox");
        let from = "From a@b Thu Jan  1 00:00:00 1970\n";
        let big = format!("From: a@b.c\nSubject: big\n\n{}", "x\n".repeat(2500));
        let mbox = format!(
            "{from}From: a@b.c\nSubject: one\n\nhello\n{from}{big}{from}From: a@b.c\nSubject: three\n\nbye\n"
        );
        std::fs::write(&path, mbox).unwrap_or_else(|e| panic!("{e}"));
        let mut seen = Vec::new();
        let read = parse_input_within(&Input::File(path.clone()), 2, 1000, &mut |o| {
            seen.push((o.source.index, o.raw, o.parsed));
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let kept = 1000 - from.len();
        let too_large = TooLarge {
            path: path.display().to_string(),
            index: 1,
            limit: 1000,
            kept,
        };
        assert_eq!(
            seen,
            vec![
                (0, None, Ok(Parsed::NotAReport)),
                (
                    1,
                    Some(big.as_bytes()[..kept].to_vec()),
                    Err(ParseError::TooLarge(too_large))
                ),
                (2, None, Ok(Parsed::NotAReport)),
            ]
        );
        assert_eq!(read.messages, 3);
        assert!(!read.stopped);
    }

    #[test]
    fn what_was_read_before_a_damaged_gzip_is_delivered_before_the_error() {
        let dir = std::env::temp_dir().join(format!("lkplake-parallel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let raw = std::fs::read(corpus()).unwrap_or_else(|e| panic!("{e}"));
        let cut = dir.join("cut.mbox.gz");
        std::fs::write(&cut, &raw[..raw.len() / 2]).unwrap_or_else(|e| panic!("{e}"));
        // The sequential reader's count of messages handed over before the damage.
        let mut before = 0u64;
        let sequential = source::read(&Input::File(cut.clone()), &mut |_| {
            before += 1;
            ControlFlow::Continue(())
        });
        assert!(matches!(sequential, Err(SourceError::Gzip { .. })));
        let mut delivered = Vec::new();
        let result = parse_input(&Input::File(cut.clone()), 2, &mut |o| {
            delivered.push(o.source.index);
            ControlFlow::Continue(())
        });
        assert!(
            matches!(&result, Err(SourceError::Gzip { path, .. }) if *path == cut),
            "{result:?}"
        );
        assert!(before > 0);
        assert_eq!(delivered, (0..before).collect::<Vec<u64>>());
        std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    }
}
