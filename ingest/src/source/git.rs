//! public-inbox archives: the git repositories lore.kernel.org serves and anyone clones.
//!
//! A v2 inbox is a directory whose `git/0.git`, `git/1.git`, ... are its epochs; a lore mirror
//! (on GitHub, one repository per epoch, named `<list>.0`) is one such repository on its own.
//! Either way each commit adds one message as the blob `m`; a deletion (a purge, a spam
//! removal) commits `d` instead and is skipped. Messages are read in commit order, oldest
//! first, along the first-parent line, which public-inbox keeps linear.
//!
//! The git binary reads them: `git rev-list` lists the commits and one `git cat-file --batch`
//! process streams every blob, so an archive of any size costs one message of memory. That is
//! the same work `git cat-file --batch-all-objects` does to dump a repository (BENCHMARKS.md
//! compares the two), and git's own pack reading is what public-inbox relies on.

use super::{Epoch, InputRead, Message};
use crate::error::SourceError;
use lkplake_schemas::Source;
use std::borrow::Cow;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::process::{Child, Command, Stdio};

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
    // missing blob reads as a commit without a message instead.
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
/// that commit is no longer in the epoch's history: see [`InputRead::rewritten`]).
pub(super) fn read_epoch(
    epoch: &Epoch,
    each: &mut dyn FnMut(Message<'_>) -> ControlFlow<()>,
) -> Result<InputRead, SourceError> {
    let Some(head) = head(epoch)? else {
        return Ok(InputRead::default());
    };
    let mut read = InputRead {
        head: Some(head.clone()),
        ..InputRead::default()
    };
    let after = match &epoch.after {
        Some(after) if *after == head => return Ok(read),
        Some(after) => {
            // `merge-base --is-ancestor` exits 1 for "no" and 128 for a commit it no longer
            // has (purged and collected): both mean the history was rewritten.
            let ancestor = git(epoch)
                .args(["merge-base", "--is-ancestor", after, &head])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| failed(epoch, "merge-base", spawn_reason(&e)))?;
            if ancestor.success() {
                Some(after.as_str())
            } else {
                tracing::warn!(
                    inbox = %epoch.inbox,
                    epoch = epoch.number,
                    checkpoint = %after,
                    head = %head,
                    "the epoch's history was rewritten (its checkpoint commit is no longer an ancestor of its head, as after a purge): \
                     reading it again from its first commit; the transformer skips the reports already in the lake"
                );
                read.rewritten = true;
                None
            }
        }
        None => None,
    };
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
    let mut rev_list = spawn(
        git(epoch).args(["rev-list", "--reverse", "--first-parent", &range]),
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
    let mut skipped = Vec::new();
    let result = read_answers(
        epoch,
        BufReader::with_capacity(1 << 20, answers),
        first_index,
        &mut read,
        &mut skipped,
        each,
    );
    if !matches!(result, Ok(ControlFlow::Continue(()))) {
        stop(&mut rev_list);
        stop(&mut cat_file);
    }
    // The feeder ends once rev-list's output ends or cat-file's input closes.
    let fed = feeder.join();
    if result?.is_break() {
        read.stopped = true;
        return Ok(read);
    }

    match fed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(failed(epoch, "cat-file", e)),
        Err(_) => return Err(failed(epoch, "cat-file", "the thread feeding it failed")),
    }
    finish(rev_list, epoch, "rev-list")?;
    finish(cat_file, epoch, "cat-file")?;
    warn_of_lost_messages(epoch, &skipped)?;
    Ok(read)
}

/// Of the commits read without an `m`, says which hold no deletion (`d`) either: their message
/// is not in this repository (a partial clone lacks the blob, or the commit is not
/// public-inbox's), so it was not read, and the user must hear of it.
fn warn_of_lost_messages(epoch: &Epoch, skipped: &[String]) -> Result<(), SourceError> {
    if skipped.is_empty() {
        return Ok(());
    }
    let mut check = spawn(
        git(epoch).args(["cat-file", "--batch-check=%(objectname) %(rest)"]),
        epoch,
        "cat-file",
    )?;
    let (Some(mut requests), Some(answers)) = (check.stdin.take(), check.stdout.take()) else {
        stop(&mut check);
        return Err(failed(epoch, "cat-file", "its pipes could not be opened"));
    };
    let asked: Vec<String> = skipped.to_vec();
    // Written from a thread: the answers must be read while the questions are still going in.
    let feeder = std::thread::spawn(move || -> std::io::Result<()> {
        for commit in &asked {
            writeln!(requests, "{commit}:d {commit}")?;
        }
        requests.flush()
    });
    let lost: Vec<String> = BufReader::new(answers)
        .lines()
        .map_while(Result::ok)
        .filter_map(|answer| answer.strip_suffix(":d missing").map(str::to_owned))
        .collect();
    let _ = feeder.join();
    finish(check, epoch, "cat-file")?;
    if let Some(first) = lost.first() {
        tracing::warn!(
            inbox = %epoch.inbox,
            epoch = epoch.number,
            commits = lost.len(),
            first = %first,
            "commits with neither a message `m` nor a deletion `d` in this repository (a partial clone missing the blobs?): their mail was not read"
        );
    }
    Ok(())
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

/// Reads `cat-file --batch` answers: `<oid> <type> <size> <commit>` and the object's bytes, or
/// `<commit>:m missing` for a commit without a message (a deletion).
fn read_answers(
    epoch: &Epoch,
    mut answers: impl BufRead,
    first_index: u64,
    read: &mut InputRead,
    skipped: &mut Vec<String>,
    each: &mut dyn FnMut(Message<'_>) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, SourceError> {
    let io = |e: std::io::Error| failed(epoch, "cat-file", e);
    let mut line = String::new();
    let mut blob = Vec::new();
    let mut index = first_index;
    loop {
        line.clear();
        if answers.read_line(&mut line).map_err(io)? == 0 {
            return Ok(ControlFlow::Continue(()));
        }
        let header = line.trim_end();
        if let Some(spec) = header.strip_suffix(" missing") {
            // No `m` in this commit: a deletion (`d`), or a message whose blob this clone lacks.
            let commit = spec.strip_suffix(":m").unwrap_or(spec);
            read.last_commit = Some(commit.to_owned());
            read.skipped += 1;
            skipped.push(commit.to_owned());
            index += 1;
            continue;
        }
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
        let size: usize = size
            .parse()
            .map_err(|_| failed(epoch, "cat-file", format!("bad size in {header:?}")))?;
        blob.clear();
        blob.resize(size + 1, 0);
        answers.read_exact(&mut blob).map_err(io)?;
        // Each object is followed by a newline.
        blob.truncate(size);
        let commit = commit.to_owned();
        read.last_commit = Some(commit.clone());
        if kind != "blob" {
            read.skipped += 1;
            index += 1;
            continue;
        }
        read.messages += 1;
        let source = Source {
            path: epoch.inbox.clone(),
            index,
            epoch: Some(epoch.number),
            commit: Some(commit),
        };
        index += 1;
        if each(Message {
            source,
            bytes: Cow::Borrowed(&blob),
        })
        .is_break()
        {
            return Ok(ControlFlow::Break(()));
        }
    }
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
    use crate::source::{Input, expand_paths, read};

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

    #[test]
    fn a_message_whose_blob_this_clone_lacks_is_skipped_and_the_rest_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path();
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
        // Loose objects, one commit per message, so one blob can be taken away.
        let mut parent: Option<String> = None;
        let mut blobs = Vec::new();
        for text in ["one\n", "two\n"] {
            let blob = git(&["hash-object", "-w", "--stdin"], text);
            let tree = git(&["mktree"], &format!("100644 blob {blob}\tm\n"));
            let mut args = vec!["commit-tree", tree.as_str(), "-m", "x"];
            if let Some(p) = &parent {
                args.extend(["-p", p.as_str()]);
            }
            parent = Some(git(&args, ""));
            blobs.push(blob);
        }
        let head = parent.unwrap();
        git(&["update-ref", "refs/heads/master", &head], "");
        let lost = &blobs[0];
        std::fs::remove_file(git_dir.join("objects").join(&lost[..2]).join(&lost[2..])).unwrap();
        let (seen, read) = messages(&epoch_of(git_dir, None));
        let texts: Vec<_> = seen.iter().map(|s| (s.0.as_str(), s.1)).collect();
        assert_eq!(texts, [("two\n", 1)]);
        assert_eq!((read.messages, read.skipped), (1, 1));
        assert_eq!(read.head.as_deref(), Some(head.as_str()));
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
