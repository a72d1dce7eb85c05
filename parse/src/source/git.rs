//! public-inbox archives: the git repositories lore.kernel.org serves and anyone clones.
//!
//! A v2 inbox is a directory whose `git/0.git`, `git/1.git`, ... are its epochs; a lore mirror
//! (on GitHub, one repository per epoch, named `<list>.0`) is one such repository on its own.
//! Either way each commit adds one message as the blob `m`; a deletion (a purge, a spam
//! removal) commits `d` instead and is skipped. Messages are read in commit order, oldest
//! first, along the first-parent line, which public-inbox keeps linear. A message whose blob
//! the repository lacks (a partial clone) is counted, never skipped in silence: a run without
//! checkpoints reads on past it, a follower stops there until it can be read.
//!
//! The git binary reads them: `git rev-list` lists the commits and one `git cat-file --batch`
//! process streams every blob, so an archive of any size costs one message of memory, and a
//! blob larger than the most one message may be costs its first bytes only. That is
//! the same work `git cat-file --batch-all-objects` does to dump a repository (BENCHMARKS.md
//! compares the two), and git's own pack reading is what public-inbox relies on.

use super::{Epoch, Handed, InputRead, Message, MissingMessage, head_len, oversize};
use crate::error::SourceError;
use lkplake_schemas::Source;
use std::borrow::Cow;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The epochs of the archive at `path`, oldest first: a v2 inbox's `git/<N>.git`
/// repositories, or `path` itself when it is a bare repository (a lore mirror). `None` when
/// `path` is neither.
pub(super) fn epochs(path: &Path) -> Result<Option<Vec<Epoch>>, SourceError> {
    let inbox = path.display().to_string();
    let git = path.join("git");
    if git.is_dir() && !is_bare_repository(path) {
        let io = |source| SourceError::Io {
            path: git.clone(),
            source,
        };
        let mut epochs = Vec::new();
        for entry in std::fs::read_dir(&git).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            let Some(number) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".git"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if is_bare_repository(&entry.path()) {
                epochs.push(Epoch {
                    inbox: inbox.clone(),
                    number,
                    git_dir: entry.path(),
                    after: None,
                    stop_at_missing: false,
                });
            }
        }
        epochs.sort_by_key(|e| e.number);
        return Ok(Some(epochs));
    }
    if is_bare_repository(path) {
        return Ok(Some(vec![Epoch {
            inbox,
            number: epoch_of_name(path),
            git_dir: path.to_owned(),
            after: None,
            stop_at_missing: false,
        }]));
    }
    Ok(None)
}

fn is_bare_repository(path: &Path) -> bool {
    path.join("HEAD").is_file() && path.join("objects").is_dir() && path.join("refs").is_dir()
}

/// A lore repository is named after its epoch: `0.git` as cloned from lore,
/// `linux-block.vger.kernel.org.0` on GitHub. Anything else is epoch 0.
fn epoch_of_name(path: &Path) -> u32 {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let name = name.strip_suffix(".git").unwrap_or(name);
    name.rsplit('.')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Bytes the epoch's objects take on disk (what progress counts for it).
pub(super) fn stored_bytes(epoch: &Epoch) -> u64 {
    fn walk(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => walk(&e.path()),
                Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
                Err(_) => 0,
            })
            .sum()
    }
    walk(&epoch.git_dir.join("objects"))
}

fn git(epoch: &Epoch) -> Command {
    let mut command = Command::new("git");
    // A partial clone (the GitHub mirrors are) would otherwise fetch a missing blob from its
    // promisor remote in the middle of a read, over the network, for as long as that takes; a
    // missing blob is counted as a missing message instead (`InputRead::missing`), and a
    // follower's checkpoint stays before it.
    command
        .arg("--git-dir")
        .arg(&epoch.git_dir)
        .env("GIT_NO_LAZY_FETCH", "1");
    command
}

fn failed(epoch: &Epoch, what: &str, reason: impl std::fmt::Display) -> SourceError {
    SourceError::Git {
        path: epoch.git_dir.clone(),
        what: what.to_owned(),
        reason: reason.to_string(),
    }
}

/// Runs a git command to its end and returns its stdout, trimmed; `None` when it exits 1
/// (git's "no" for `merge-base --is-ancestor`, "not found" for `rev-parse --verify`).
fn git_output(epoch: &Epoch, args: &[&str]) -> Result<Option<String>, SourceError> {
    let what = args.first().copied().unwrap_or("git");
    let out = git(epoch)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed(epoch, what, spawn_reason(&e)))?;
    match out.status.code() {
        Some(0) => Ok(Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())),
        Some(1) => Ok(None),
        _ => Err(failed(
            epoch,
            what,
            String::from_utf8_lossy(&out.stderr).trim(),
        )),
    }
}

fn spawn_reason(e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::NotFound {
        "the git program is not installed (public-inbox archives are read with it)".to_owned()
    } else {
        e.to_string()
    }
}

/// The commit the epoch's `HEAD` names, if it has any.
pub(super) fn head(epoch: &Epoch) -> Result<Option<String>, SourceError> {
    // Exit 1 (`--verify --quiet`): an epoch with no commit yet, as a new inbox has.
    match git_output(
        epoch,
        &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
    ) {
        Ok(head) => Ok(head.filter(|h| !h.is_empty())),
        Err(SourceError::Git { reason, .. }) if reason.is_empty() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads the messages of `epoch` added after `epoch.after` (all of them without it, or when
/// that commit is no longer in the epoch's history: see [`InputRead::rewritten`]). A blob
/// larger than `limit` bytes is handed over as [`Handed::TooLarge`] from its first bytes, the
/// rest of it passed over unread.
pub(super) fn read_epoch(
    epoch: &Epoch,
    limit: usize,
    each: &mut dyn FnMut(Handed<'_>) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    let Some(head) = head(epoch)? else {
        return Ok(InputRead::default());
    };
    let mut read = InputRead {
        head: Some(head.clone()),
        ..InputRead::default()
    };
    if epoch.after.as_ref() == Some(&head) {
        return Ok(read);
    }
    let after = start_after(epoch, &head, &mut read)?;
    // Indexes count commits from the epoch's first, so a message keeps its index however
    // the reading was split up.
    let first_index = match after {
        Some(after) => git_output(epoch, &["rev-list", "--count", "--first-parent", after])?
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0),
        None => 0,
    };
    let range = match after {
        Some(after) => format!("{after}..{head}"),
        None => head.clone(),
    };
    let (mut reading, answers) = start_reading(epoch, &range)?;
    let mut trees = Trees::default();
    let result = read_answers(
        epoch,
        BufReader::with_capacity(1 << 20, answers),
        first_index,
        &mut read,
        &mut trees,
        limit,
        each,
    );
    if !matches!(result, Ok(Ending::End)) {
        stop(&mut reading.rev_list);
        stop(&mut reading.cat_file);
    }
    // The feeder ends once rev-list's output ends or cat-file's input closes.
    let fed = reading.feeder.join();
    match result? {
        Ending::End => {}
        Ending::Stopped => {
            read.stopped = true;
            return Ok(read);
        }
        Ending::AtMissing => {
            warn_of_missing(epoch, &read);
            return Ok(read);
        }
    }
    match fed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(failed(epoch, "cat-file", e)),
        Err(_) => return Err(failed(epoch, "cat-file", "the thread feeding it failed")),
    }
    finish(reading.rev_list, epoch, "rev-list")?;
    finish(reading.cat_file, epoch, "cat-file")?;
    trees.finish(epoch)?;
    warn_of_missing(epoch, &read);
    Ok(read)
}

/// The commit reading starts after: `epoch.after` while it is in the history of `head`; none
/// without it, or when a purge rewrote the history (`read.rewritten`), so reading starts at
/// the first commit.
fn start_after<'a>(
    epoch: &'a Epoch,
    head: &str,
    read: &mut InputRead,
) -> Result<Option<&'a str>, SourceError> {
    let Some(after) = &epoch.after else {
        return Ok(None);
    };
    if is_ancestor(epoch, after, head)? {
        return Ok(Some(after.as_str()));
    }
    tracing::warn!(
        inbox = %epoch.inbox,
        epoch = epoch.number,
        checkpoint = %after,
        head = %head,
        "the epoch's history was rewritten (its checkpoint commit is no longer an ancestor of its head, as after a purge): \
         reading it again from its first commit; the transformer skips the reports already in the lake"
    );
    read.rewritten = true;
    Ok(None)
}

/// Whether `after` is still in the history of `head`. `merge-base --is-ancestor` exits 1 for
/// "no" and 128 for a commit it no longer has (purged and collected): both mean the history
/// was rewritten.
fn is_ancestor(epoch: &Epoch, after: &str, head: &str) -> Result<bool, SourceError> {
    let ancestor = git(epoch)
        .args(["merge-base", "--is-ancestor", after, head])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| failed(epoch, "merge-base", spawn_reason(&e)))?;
    Ok(ancestor.success())
}

/// The git processes reading an epoch, and the thread that feeds one from the other.
#[derive(Debug)]
struct Reading {
    rev_list: Child,
    cat_file: Child,
    feeder: std::thread::JoinHandle<std::io::Result<()>>,
}

/// Starts reading the commits of `range`: `rev-list` lists them, oldest first, and a thread
/// asks `cat-file --batch` for each one's `m`. Returns the processes and `cat-file`'s answers.
fn start_reading(epoch: &Epoch, range: &str) -> Result<(Reading, ChildStdout), SourceError> {
    let mut rev_list = spawn(
        git(epoch).args(["rev-list", "--reverse", "--first-parent", range]),
        epoch,
        "rev-list",
    )?;
    let mut cat_file = match spawn(
        git(epoch).args([
            "cat-file",
            "--buffer",
            "--batch=%(objectname) %(objecttype) %(objectsize) %(rest)",
        ]),
        epoch,
        "cat-file",
    ) {
        Ok(child) => child,
        Err(e) => {
            stop(&mut rev_list);
            return Err(e);
        }
    };
    let (Some(commits), Some(requests), Some(answers)) = (
        rev_list.stdout.take(),
        cat_file.stdin.take(),
        cat_file.stdout.take(),
    ) else {
        stop(&mut rev_list);
        stop(&mut cat_file);
        return Err(failed(epoch, "cat-file", "its pipes could not be opened"));
    };
    // Every commit is asked for its `m`, with the commit id passed through as `%(rest)` so each
    // answer names the commit it belongs to. A thread feeds the requests while this one reads
    // the answers: with `--buffer`, git answers in large writes, and neither side waits for
    // the other.
    let feeder = std::thread::spawn(move || -> std::io::Result<()> {
        let mut requests = BufWriter::with_capacity(1 << 16, requests);
        for commit in BufReader::new(commits).lines() {
            let commit = commit?;
            writeln!(requests, "{commit}:m {commit}")?;
        }
        requests.flush()
    });
    let reading = Reading {
        rev_list,
        cat_file,
        feeder,
    };
    Ok((reading, answers))
}

/// Says which messages were not read because this repository lacks them, and how to get them.
fn warn_of_missing(epoch: &Epoch, read: &InputRead) {
    let Some(first) = &read.first_missing else {
        return;
    };
    let fetch = format!(
        "in a partial clone, `git --git-dir {} cat-file -p {}:m` fetches one from its promisor remote",
        epoch.git_dir.display(),
        first.commit
    );
    if epoch.stop_at_missing {
        tracing::warn!(
            inbox = %epoch.inbox,
            epoch = epoch.number,
            commit = %first.commit,
            index = first.index,
            "this repository lacks the message of commit {} (a partial clone without its blob?): the epoch is followed up to the commit before it, \
             and read from it again at every poll until it is here ({fetch})",
            first.commit
        );
    } else {
        tracing::warn!(
            inbox = %epoch.inbox,
            epoch = epoch.number,
            missing = read.missing,
            first_commit = %first.commit,
            first_index = first.index,
            "this repository lacks {} messages (a partial clone without their blobs?), the first in commit {}: they were not read ({fetch}, then read the archive again)",
            read.missing,
            first.commit
        );
    }
}

fn spawn(command: &mut Command, epoch: &Epoch, what: &str) -> Result<Child, SourceError> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(epoch, what, spawn_reason(&e)))
}

fn stop(child: &mut Child) {
    // Already exited is fine: either way it is gone.
    let _ = child.kill();
    let _ = child.wait();
}

fn finish(mut child: Child, epoch: &Epoch, what: &str) -> Result<(), SourceError> {
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    let status = child.wait().map_err(|e| failed(epoch, what, e))?;
    if status.success() {
        Ok(())
    } else {
        Err(failed(epoch, what, stderr.trim()))
    }
}

/// How reading `cat-file`'s answers ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Every commit was answered.
    End,
    /// The reader broke.
    Stopped,
    /// At a message this repository lacks, with [`Epoch::stop_at_missing`] set.
    AtMissing,
}

/// Reads `cat-file --batch` answers: `<oid> <type> <size> <commit>` and the object's bytes, or
/// `<commit>:m missing` for a commit whose `m` cannot be read (a deletion, or a message whose
/// blob this repository lacks: `trees` tells which).
fn read_answers(
    epoch: &Epoch,
    mut answers: impl BufRead,
    first_index: u64,
    read: &mut InputRead,
    trees: &mut Trees,
    limit: usize,
    each: &mut dyn FnMut(Handed<'_>) -> ControlFlow<()>,
) -> Result<Ending, SourceError> {
    let mut line = String::new();
    let mut blob = Vec::new();
    let mut index = first_index;
    loop {
        line.clear();
        let n = answers
            .read_line(&mut line)
            .map_err(|e| failed(epoch, "cat-file", e))?;
        if n == 0 {
            return Ok(Ending::End);
        }
        let header = line.trim_end();
        let this = index;
        index += 1;
        if let Some(spec) = header.strip_suffix(" missing") {
            let commit = spec.strip_suffix(":m").unwrap_or(spec).to_owned();
            match trees.without_message(epoch, &commit)? {
                Without::NoMessage => {
                    read.skipped += 1;
                    passed(read, commit);
                }
                Without::Missing => {
                    missed(read, commit, this);
                    if epoch.stop_at_missing {
                        return Ok(Ending::AtMissing);
                    }
                }
            }
            continue;
        }
        let (object, commit) = read_object(epoch, &mut answers, header, &mut blob, limit)?;
        if object == Object::NotABlob {
            read.skipped += 1;
            passed(read, commit);
            continue;
        }
        read.messages += 1;
        passed(read, commit.clone());
        let source = Source {
            path: epoch.inbox.clone(),
            index: this,
            epoch: Some(epoch.number),
            commit: Some(commit),
        };
        let handed = match object {
            Object::Head => Handed::TooLarge(oversize(source, blob.clone(), limit)),
            Object::Whole | Object::NotABlob => Handed::Message(Message {
                source,
                bytes: Cow::Borrowed(&blob),
            }),
        };
        if each(handed).is_break() {
            return Ok(Ending::Stopped);
        }
    }
}

/// What [`read_object`] put in its `blob`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Object {
    /// The whole blob.
    Whole,
    /// The first bytes of a blob larger than the limit (as many as [`head_len`] keeps).
    Head,
    /// Nothing: the object is not a blob (a commit's `m` that is a tree, say).
    NotABlob,
}

/// Reads the object whose answer `header` (`<oid> <type> <size> <commit>`) announces into
/// `blob`, or its first bytes when it is a blob larger than `limit`, and passes over the rest
/// of it and the newline after it, so the next answer starts where it should; returns what
/// `blob` holds, and the commit.
fn read_object(
    epoch: &Epoch,
    answers: &mut impl Read,
    header: &str,
    blob: &mut Vec<u8>,
    limit: usize,
) -> Result<(Object, String), SourceError> {
    let mut fields = header.split(' ');
    let (Some(_oid), Some(kind), Some(size), Some(commit)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(failed(
            epoch,
            "cat-file",
            format!("unexpected answer {header:?}"),
        ));
    };
    let bad_size = || failed(epoch, "cat-file", format!("bad size in {header:?}"));
    let size: u64 = size.parse().map_err(|_| bad_size())?;
    // A blob larger than the limit is never held whole: a huge file committed by mistake
    // costs its first bytes, not its size, in memory. Nor is anything that is not a blob.
    let within = usize::try_from(size).ok().filter(|&whole| whole <= limit);
    let (object, keep) = if kind != "blob" {
        (Object::NotABlob, 0)
    } else if let Some(whole) = within {
        (Object::Whole, whole)
    } else {
        // Larger than the limit (and maybe than memory can address): what is kept of any
        // message larger than the limit.
        let len = usize::try_from(size).unwrap_or(usize::MAX);
        (Object::Head, head_len(len, limit))
    };
    blob.clear();
    blob.resize(keep, 0);
    answers
        .read_exact(blob)
        .map_err(|e| failed(epoch, "cat-file", e))?;
    // What is left of the object, and the newline git writes after each.
    let rest = u64::try_from(keep)
        .ok()
        .and_then(|keep| size.checked_sub(keep))
        .and_then(|rest| rest.checked_add(1))
        .ok_or_else(bad_size)?;
    pass_over(answers, rest).map_err(|e| failed(epoch, "cat-file", e))?;
    Ok((object, commit.to_owned()))
}

/// Reads `n` bytes of `answers` and drops them, a buffer at a time; a stream that ends before
/// is an error, as a short `read_exact` is.
fn pass_over(answers: &mut impl Read, n: u64) -> std::io::Result<()> {
    let passed = std::io::copy(&mut answers.take(n), &mut std::io::sink())?;
    if passed < n {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "the answers ended {} bytes before the object did",
                n - passed
            ),
        ));
    }
    Ok(())
}

/// Records a commit read (its message handed over, or nothing to read in it): where a
/// checkpoint may stand, unless a message before it is missing.
fn passed(read: &mut InputRead, commit: String) {
    if read.first_missing.is_none() {
        read.last_commit = Some(commit);
    }
}

/// Records a message this repository lacks.
fn missed(read: &mut InputRead, commit: String, index: u64) {
    read.missing += 1;
    if read.first_missing.is_none() {
        read.first_missing = Some(MissingMessage { commit, index });
    }
}

/// What a commit whose `m` could not be read is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Without {
    /// Its tree names an `m` whose blob this repository lacks (a partial clone), or the tree
    /// itself is missing, so nothing says it holds no message: its message was not read.
    Missing,
    /// Its tree holds no `m`: a deletion (`d`), with nothing to read.
    NoMessage,
}

/// The command [`Trees`] runs, as its errors name it.
const TREES: &str = "cat-file --batch (the trees of commits without a readable message)";

/// Tells a deletion from a missing message by the commit's tree. `cat-file` answers
/// `<commit>:m missing` for both, and so does a `--batch-check` of `<commit>:d`, for a
/// deletion whose blob is missing too; the tree itself says which names it holds. One
/// `cat-file --batch` process, started at the first such commit and asked one tree at a
/// time: an archive has few (each deletion is one), a partial clone one per blob it lacks.
#[derive(Debug, Default)]
struct Trees {
    process: Option<TreeProcess>,
}

#[derive(Debug)]
struct TreeProcess {
    child: Child,
    requests: ChildStdin,
    answers: BufReader<ChildStdout>,
}

impl Trees {
    /// What `commit`, whose `m` could not be read, is.
    fn without_message(&mut self, epoch: &Epoch, commit: &str) -> Result<Without, SourceError> {
        let io = |e: std::io::Error| failed(epoch, TREES, e);
        let process = match self.process.take() {
            Some(process) => process,
            None => TreeProcess::start(epoch)?,
        };
        let process = self.process.insert(process);
        writeln!(process.requests, "{commit}^{{tree}}").map_err(io)?;
        process.requests.flush().map_err(io)?;
        let mut header = String::new();
        if process.answers.read_line(&mut header).map_err(io)? == 0 {
            return Err(failed(epoch, TREES, "it ended without answering"));
        }
        let header = header.trim_end();
        if header.ends_with(" missing") {
            // No tree either (a partial clone filtering trees out): it may hold a message.
            return Ok(Without::Missing);
        }
        let mut fields = header.split(' ');
        let (Some(oid), Some("tree"), Some(size)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(failed(
                epoch,
                TREES,
                format!("unexpected answer {header:?}"),
            ));
        };
        let size: usize = size
            .parse()
            .map_err(|_| failed(epoch, TREES, format!("bad size in {header:?}")))?;
        let mut tree = vec![0; size + 1];
        process.answers.read_exact(&mut tree).map_err(io)?;
        tree.truncate(size);
        // A tree holds binary object ids, half as long as the hex one (SHA-1 or SHA-256).
        if tree_names(&tree, oid.len() / 2).any(|name| name == b"m") {
            Ok(Without::Missing)
        } else {
            Ok(Without::NoMessage)
        }
    }

    /// Ends the process, if one was started, and says whether git ended well.
    fn finish(mut self, epoch: &Epoch) -> Result<(), SourceError> {
        let Some(process) = self.process.take() else {
            return Ok(());
        };
        let TreeProcess {
            child, requests, ..
        } = process;
        // End of input: cat-file exits.
        drop(requests);
        finish(child, epoch, TREES)
    }
}

impl Drop for Trees {
    /// A reading that ended early (an error, a stop) does not leave the process behind.
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            stop(&mut process.child);
        }
    }
}

impl TreeProcess {
    fn start(epoch: &Epoch) -> Result<Self, SourceError> {
        let mut child = spawn(git(epoch).args(["cat-file", "--batch"]), epoch, TREES)?;
        let (Some(requests), Some(answers)) = (child.stdin.take(), child.stdout.take()) else {
            stop(&mut child);
            return Err(failed(epoch, TREES, "its pipes could not be opened"));
        };
        Ok(Self {
            child,
            requests,
            answers: BufReader::new(answers),
        })
    }
}

/// The names of a tree object's entries: each entry is `<mode> <name>\0` and a binary object
/// id of `id_len` bytes.
fn tree_names(tree: &[u8], id_len: usize) -> impl Iterator<Item = &[u8]> {
    let mut rest = tree;
    std::iter::from_fn(move || {
        let space = memchr::memchr(b' ', rest)?;
        let after_mode = rest.get(space + 1..)?;
        let nul = memchr::memchr(0, after_mode)?;
        let name = after_mode.get(..nul)?;
        rest = after_mode.get(nul + 1 + id_len..).unwrap_or_default();
        Some(name)
    })
}

/// Runs `git fetch` in the epoch if it has a remote, and says which. The refspec is explicit
/// so a plain `git clone --bare` (which configures none) moves its branches like a
/// `--mirror` clone does.
pub(super) fn fetch(epoch: &Epoch) -> Result<Option<String>, SourceError> {
    let Some(remotes) = git_output(epoch, &["remote"])? else {
        return Ok(None);
    };
    let Some(remote) = remotes.lines().next().map(str::to_owned) else {
        return Ok(None);
    };
    let out = git(epoch)
        .args(["fetch", "--quiet", &remote, "+refs/heads/*:refs/heads/*"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed(epoch, "fetch", spawn_reason(&e)))?;
    if out.status.success() {
        Ok(Some(remote))
    } else {
        Err(failed(
            epoch,
            "fetch",
            String::from_utf8_lossy(&out.stderr).trim(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TooLarge;
    use crate::source::{Input, expand_paths, read, read_bounded};

    /// A bare repository built the way public-inbox writes one: each commit's tree holds one
    /// blob, `m` for a message or `d` for a deletion. `entries` are (file name, content).
    fn repository(dir: &Path, entries: &[(&str, &str)]) -> Vec<String> {
        let run = |args: &[&str], input: Option<&str>| {
            let mut child = Command::new("git")
                .arg("--git-dir")
                .arg(dir)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.unwrap_or("").as_bytes()).unwrap();
            drop(stdin);
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "git {args:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let init = Command::new("git")
            .args(["init", "--quiet", "--bare", "--initial-branch=master"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(init.success());
        if entries.is_empty() {
            return Vec::new();
        }
        let mut stream = String::new();
        for (n, (name, content)) in entries.iter().enumerate() {
            stream += &format!(
                "commit refs/heads/master\ncommitter a <a@b> {} +0000\ndata 1\n\ndeleteall\nM 100644 inline {name}\ndata {}\n{content}\n",
                1_700_000_000 + n,
                content.len()
            );
        }
        run(&["fast-import", "--quiet"], Some(&stream));
        run(&["rev-list", "--reverse", "HEAD"], None)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn epoch_of(dir: &Path, after: Option<&str>) -> Epoch {
        Epoch {
            inbox: "inbox".to_owned(),
            number: 0,
            git_dir: dir.to_owned(),
            after: after.map(str::to_owned),
            stop_at_missing: false,
        }
    }

    fn messages(epoch: &Epoch) -> (Vec<(String, u64, String)>, InputRead) {
        let mut seen = Vec::new();
        let read = read(&Input::Epoch(epoch.clone()), &mut |m| {
            seen.push((
                String::from_utf8(m.bytes.to_vec()).unwrap(),
                m.source.index,
                m.source.commit.clone().unwrap(),
            ));
            ControlFlow::Continue(())
        })
        .unwrap();
        (seen, read)
    }

    #[test]
    fn messages_come_in_commit_order_and_deletions_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let commits = repository(
            dir.path(),
            &[
                ("m", "Subject: one\n\n1\n"),
                ("d", "Subject: one\n\n1\n"),
                ("m", "Subject: two\n\n2\n"),
            ],
        );
        let (seen, read) = messages(&epoch_of(dir.path(), None));
        assert_eq!(
            seen,
            vec![
                ("Subject: one\n\n1\n".to_owned(), 0, commits[0].clone()),
                ("Subject: two\n\n2\n".to_owned(), 2, commits[2].clone()),
            ]
        );
        assert_eq!((read.messages, read.skipped), (2, 1));
        assert_eq!(read.head.as_deref(), Some(commits[2].as_str()));
        assert_eq!(read.last_commit.as_deref(), Some(commits[2].as_str()));
        assert!(!read.rewritten);
    }

    #[test]
    fn reading_after_a_commit_yields_only_later_messages_with_their_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let commits = repository(
            dir.path(),
            &[("m", "one\n"), ("m", "two\n"), ("m", "three\n")],
        );
        let (seen, read) = messages(&epoch_of(dir.path(), Some(&commits[0])));
        assert_eq!(
            seen,
            vec![
                ("two\n".to_owned(), 1, commits[1].clone()),
                ("three\n".to_owned(), 2, commits[2].clone()),
            ]
        );
        assert!(!read.rewritten);
        let (seen, _) = messages(&epoch_of(dir.path(), Some(&commits[2])));
        assert!(seen.is_empty(), "nothing after the head");
    }

    #[test]
    fn a_rewritten_history_is_read_again_from_its_first_commit() {
        let old = tempfile::tempdir().unwrap();
        let old_commits = repository(old.path(), &[("m", "one\n"), ("m", "two\n")]);
        let new = tempfile::tempdir().unwrap();
        repository(new.path(), &[("m", "one, purged\n"), ("m", "two\n")]);
        let (seen, read) = messages(&epoch_of(new.path(), Some(&old_commits[1])));
        assert!(read.rewritten);
        let texts: Vec<_> = seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(texts, ["one, purged\n", "two\n"]);
    }

    /// A bare repository of loose objects, so that one can be taken away as a partial clone
    /// lacks it: one commit per entry, each adding one blob (`m` or `d`, with the given text).
    /// Returns each commit and its blob, oldest first.
    fn loose_repository(git_dir: &Path, entries: &[(&str, &str)]) -> Vec<(String, String)> {
        let git = |args: &[&str], input: &str| -> String {
            let mut child = Command::new("git")
                .arg("--git-dir")
                .arg(git_dir)
                .args(args)
                .envs([
                    ("GIT_AUTHOR_NAME", "a"),
                    ("GIT_AUTHOR_EMAIL", "a@b"),
                    ("GIT_COMMITTER_NAME", "a"),
                    ("GIT_COMMITTER_EMAIL", "a@b"),
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "git {args:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        };
        git(
            &["init", "--quiet", "--bare", "--initial-branch=master"],
            "",
        );
        let mut parent: Option<String> = None;
        let mut made = Vec::new();
        for (name, text) in entries {
            let blob = git(&["hash-object", "-w", "--stdin"], text);
            let tree = git(&["mktree"], &format!("100644 blob {blob}\t{name}\n"));
            let mut args = vec!["commit-tree", tree.as_str(), "-m", "x"];
            if let Some(p) = &parent {
                args.extend(["-p", p.as_str()]);
            }
            let commit = git(&args, "");
            made.push((commit.clone(), blob));
            parent = Some(commit);
        }
        if let Some(head) = &parent {
            git(&["update-ref", "refs/heads/master", head], "");
        }
        made
    }

    /// Where git keeps a loose object.
    fn object_file(git_dir: &Path, id: &str) -> std::path::PathBuf {
        git_dir.join("objects").join(&id[..2]).join(&id[2..])
    }

    #[test]
    fn a_message_whose_blob_this_clone_lacks_is_counted_and_the_checkpoint_stays_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path();
        let made = loose_repository(git_dir, &[("m", "one\n"), ("m", "two\n"), ("m", "three\n")]);
        std::fs::remove_file(object_file(git_dir, &made[1].1)).unwrap();
        // Without checkpoints (`parse`, a one-off `ingest`), reading goes on past it.
        let (seen, read) = messages(&epoch_of(git_dir, None));
        assert_eq!(
            seen,
            vec![
                ("one\n".to_owned(), 0, made[0].0.clone()),
                ("three\n".to_owned(), 2, made[2].0.clone()),
            ]
        );
        assert_eq!((read.messages, read.skipped, read.missing), (2, 0, 1));
        assert_eq!(
            read.first_missing,
            Some(MissingMessage {
                commit: made[1].0.clone(),
                index: 1,
            })
        );
        assert_eq!(read.head.as_deref(), Some(made[2].0.as_str()));
        assert_eq!(read.checkpoint(), Some(made[0].0.as_str()));
    }

    #[test]
    fn a_followed_epoch_stops_at_a_missing_message_and_reads_it_once_its_blob_is_back() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path();
        let made = loose_repository(git_dir, &[("m", "one\n"), ("m", "two\n"), ("m", "three\n")]);
        let lost = object_file(git_dir, &made[1].1);
        let kept = std::fs::read(&lost).unwrap();
        std::fs::remove_file(&lost).unwrap();
        let mut epoch = epoch_of(git_dir, None);
        epoch.stop_at_missing = true;
        let (seen, read) = messages(&epoch);
        assert_eq!(seen, vec![("one\n".to_owned(), 0, made[0].0.clone())]);
        assert_eq!((read.messages, read.missing), (1, 1));
        assert_eq!(
            read.first_missing,
            Some(MissingMessage {
                commit: made[1].0.clone(),
                index: 1,
            })
        );
        assert!(!read.stopped, "not a stop the reader asked for");
        let checkpoint = read.checkpoint().map(str::to_owned);
        assert_eq!(checkpoint.as_deref(), Some(made[0].0.as_str()));

        // The blob arrives (a fetch): reading from the checkpoint reads it and what follows.
        std::fs::write(&lost, kept).unwrap();
        epoch.after = checkpoint;
        let (seen, read) = messages(&epoch);
        assert_eq!(
            seen,
            vec![
                ("two\n".to_owned(), 1, made[1].0.clone()),
                ("three\n".to_owned(), 2, made[2].0.clone()),
            ]
        );
        assert_eq!((read.messages, read.missing), (2, 0));
        assert_eq!(read.first_missing, None);
        assert_eq!(read.checkpoint(), Some(made[2].0.as_str()));
    }

    #[test]
    fn a_missing_first_message_leaves_the_checkpoint_where_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path();
        let made = loose_repository(git_dir, &[("m", "one\n"), ("m", "two\n")]);
        std::fs::remove_file(object_file(git_dir, &made[0].1)).unwrap();
        let mut epoch = epoch_of(git_dir, None);
        epoch.stop_at_missing = true;
        let (seen, read) = messages(&epoch);
        assert!(seen.is_empty(), "{seen:?}");
        assert_eq!(read.missing, 1);
        assert_eq!(read.checkpoint(), None);
    }

    #[test]
    fn a_deletion_whose_blob_is_missing_too_is_still_a_deletion() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path();
        let made = loose_repository(
            git_dir,
            &[("m", "one\n"), ("d", "one, deleted\n"), ("m", "two\n")],
        );
        std::fs::remove_file(object_file(git_dir, &made[1].1)).unwrap();
        let mut epoch = epoch_of(git_dir, None);
        epoch.stop_at_missing = true;
        let (seen, read) = messages(&epoch);
        let texts: Vec<_> = seen.iter().map(|s| (s.0.as_str(), s.1)).collect();
        assert_eq!(texts, [("one\n", 0), ("two\n", 2)]);
        assert_eq!((read.messages, read.skipped, read.missing), (2, 1, 0));
        assert_eq!(read.checkpoint(), Some(made[2].0.as_str()));
    }

    #[test]
    fn a_tree_check_git_cannot_answer_is_an_error_naming_the_epoch_and_the_command() {
        // An empty directory is no repository: git exits before it answers.
        let dir = tempfile::tempdir().unwrap();
        let epoch = epoch_of(dir.path(), None);
        let err = Trees::default()
            .without_message(&epoch, &"a".repeat(40))
            .expect_err("no repository, no answer");
        assert!(
            matches!(&err, SourceError::Git { path, what, .. } if path == dir.path() && what == TREES),
            "{err}"
        );
    }

    #[test]
    fn a_blob_over_the_limit_is_handed_over_from_its_first_bytes_and_reading_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let big = format!("Subject: big\n\n{}", "y".repeat(200));
        let commits = repository(
            dir.path(),
            &[("m", "one\n"), ("m", big.as_str()), ("m", "three\n")],
        );
        let mut seen = Vec::new();
        let epoch = Input::Epoch(epoch_of(dir.path(), None));
        let read = read_bounded(&epoch, 50, &mut |handed| {
            seen.push(match handed {
                Handed::Message(m) => (m.source.index, m.bytes.to_vec(), None),
                Handed::TooLarge(o) => (o.source.index, o.head, Some(o.error)),
            });
            ControlFlow::Continue(())
        })
        .unwrap();
        let error = TooLarge {
            path: "inbox".to_owned(),
            index: 1,
            limit: 50,
            kept: 50,
        };
        assert_eq!(
            seen,
            vec![
                (0, b"one\n".to_vec(), None),
                (1, big.as_bytes()[..50].to_vec(), Some(error)),
                (2, b"three\n".to_vec(), None),
            ]
        );
        assert_eq!((read.messages, read.skipped), (3, 0));
        assert_eq!(read.head.as_deref(), Some(commits[2].as_str()));
    }

    #[test]
    fn a_blob_over_the_limit_is_read_to_its_first_bytes_and_the_answers_stay_in_step() {
        let dir = tempfile::tempdir().unwrap();
        let epoch = epoch_of(dir.path(), None);
        let stream = format!("{}\nnext answer\n", "x".repeat(100));
        let mut answers = stream.as_bytes();
        let mut blob = Vec::new();
        let (object, commit) =
            read_object(&epoch, &mut answers, "b10b blob 100 c0mm17", &mut blob, 10).unwrap();
        assert_eq!((object, commit.as_str()), (Object::Head, "c0mm17"));
        assert_eq!(blob, b"xxxxxxxxxx");
        // The other 90 bytes and the newline were passed over: the next answer is next.
        assert_eq!(answers, b"next answer\n");

        // Within the limit: the whole blob, and again the next answer after it.
        let mut answers: &[u8] = b"0123456789\nnext answer\n";
        let (object, _) =
            read_object(&epoch, &mut answers, "b10b blob 10 c0mm17", &mut blob, 10).unwrap();
        assert_eq!(object, Object::Whole);
        assert_eq!(blob, b"0123456789");
        assert_eq!(answers, b"next answer\n");

        // Not a blob: nothing kept, all of it passed over.
        let mut answers: &[u8] = b"0123456789\nnext answer\n";
        let (object, _) =
            read_object(&epoch, &mut answers, "7ree tree 10 c0mm17", &mut blob, 1000).unwrap();
        assert_eq!(object, Object::NotABlob);
        assert!(blob.is_empty());
        assert_eq!(answers, b"next answer\n");
    }

    #[test]
    fn answers_that_end_inside_a_blob_over_the_limit_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let epoch = epoch_of(dir.path(), None);
        let mut answers: &[u8] = &[b'x'; 60];
        let err = read_object(
            &epoch,
            &mut answers,
            "b10b blob 100 c0mm17",
            &mut Vec::new(),
            10,
        )
        .expect_err("40 bytes and the newline are missing");
        assert!(
            matches!(&err, SourceError::Git { what, reason, .. }
                if what == "cat-file" && reason == "the answers ended 41 bytes before the object did"),
            "{err}"
        );
    }

    #[test]
    fn a_tree_names_its_entries() {
        let mut tree = b"100644 d\0".to_vec();
        tree.extend([7u8; 20]);
        tree.extend(b"40000 sub\0");
        tree.extend([9u8; 20]);
        let names: Vec<&[u8]> = tree_names(&tree, 20).collect();
        assert_eq!(names, [b"d".as_slice(), b"sub".as_slice()]);
    }

    #[test]
    fn an_epoch_without_commits_has_nothing_to_read() {
        let dir = tempfile::tempdir().unwrap();
        repository(dir.path(), &[]);
        let (seen, read) = messages(&epoch_of(dir.path(), None));
        assert!(seen.is_empty());
        assert_eq!(read.head, None);
    }

    #[test]
    fn a_v2_inbox_is_its_epochs_in_numeric_order() {
        let inbox = tempfile::tempdir().unwrap();
        for name in ["0.git", "1.git", "10.git", "2.git", "all.git"] {
            repository(&inbox.path().join("git").join(name), &[("m", "x\n")]);
        }
        let inputs = expand_paths(&[inbox.path().to_owned()]).unwrap();
        let numbers: Vec<_> = inputs
            .iter()
            .map(|i| match i {
                Input::Epoch(e) => e.number,
                other => panic!("not an epoch: {other:?}"),
            })
            .collect();
        assert_eq!(numbers, [0, 1, 2, 10]);
    }

    #[test]
    fn an_archive_inside_a_directory_is_read_as_an_archive() {
        let top = tempfile::tempdir().unwrap();
        std::fs::write(top.path().join("a.eml"), "Subject: a\n\nx\n").unwrap();
        repository(&top.path().join("list.0"), &[("m", "x\n")]);
        let inputs = expand_paths(&[top.path().to_owned()]).unwrap();
        assert_eq!(inputs.len(), 2, "{inputs:?}");
        assert_eq!(inputs[0], Input::File(top.path().join("a.eml")));
        assert!(matches!(&inputs[1], Input::Epoch(e) if e.git_dir == top.path().join("list.0")));
    }

    #[test]
    fn a_lore_mirror_is_named_after_its_epoch() {
        assert_eq!(
            epoch_of_name(Path::new("/m/linux-block.vger.kernel.org.0")),
            0
        );
        assert_eq!(
            epoch_of_name(Path::new("/m/linux-block.vger.kernel.org.3")),
            3
        );
        assert_eq!(epoch_of_name(Path::new("/i/git/12.git")), 12);
        assert_eq!(epoch_of_name(Path::new("/i/archive.git")), 0);
    }
}
