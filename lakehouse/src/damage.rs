//! Saying which file of a damaged table is at fault. Delta's own errors say what could not be
//! parsed but not where ("Json error: Encountered unexpected 'g'"), and delta-kernel appends a
//! backtrace to their text; a user restoring a lake from a backup needs the file's path.

use crate::{LakeError, LakeUrl};
use std::path::{Path, PathBuf};

/// What is wrong with table `name`, for the user: the damaged log entry when the lake is local
/// and one is found, else the error itself without its backtrace.
pub(crate) async fn diagnose(url: &LakeUrl, name: &str, error: &LakeError) -> String {
    let brief = error.to_string();
    let entry = match url.local_table(name) {
        Some(dir) => damaged_log_entry(&dir.join("_delta_log")).await,
        None => None,
    };
    match entry {
        Some((file, reason)) => format!(
            "lake table {name}: its log entry {} is damaged ({reason}), so the table cannot be read: restore that file from a backup; its data files are not touched ({brief})",
            file.display()
        ),
        None => brief,
    }
}

/// `message` up to the backtrace delta-kernel puts after it (lines `   0: frame`, `   1: …`).
pub fn without_backtrace(message: &str) -> String {
    message
        .lines()
        .take_while(|line| !line.trim_start().starts_with("0: "))
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A Delta error for the user: without its backtrace, and with what to do when the disk is
/// full (delta-rs words it "Failed to parse parquet: ... No space left on device").
pub(crate) fn explain(error: &deltalake::DeltaTableError) -> String {
    let text = without_backtrace(&error.to_string());
    if text.contains("(os error 28)") {
        format!(
            "{text}; the disk holding the lake is full: free space and run again (nothing is lost: what was not committed is read from Kafka again)"
        )
    } else {
        text
    }
}

/// The first commit file of the log that is not JSON lines, with why: a commit is one JSON
/// object per line, and an empty file is no commit either.
async fn damaged_log_entry(log: &Path) -> Option<(PathBuf, String)> {
    let mut dir = tokio::fs::read_dir(log).await.ok()?;
    let mut commits = Vec::new();
    while let Ok(Some(entry)) = dir.next_entry().await {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            commits.push(path);
        }
    }
    commits.sort();
    for path in commits {
        let fault = match tokio::fs::read(&path).await {
            Ok(text) => entry_fault(&text),
            Err(e) => Some(format!("cannot be read: {e}")),
        };
        if let Some(reason) = fault {
            return Some((path, reason));
        }
    }
    None
}

/// Why `text` is not a Delta commit, if it is not.
fn entry_fault(text: &[u8]) -> Option<String> {
    let Ok(text) = std::str::from_utf8(text) else {
        return Some("not UTF-8 text".to_owned());
    };
    if text.trim().is_empty() {
        return Some("empty".to_owned());
    }
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .find_map(
            |(i, line)| match serde_json::from_str::<serde_json::Value>(line) {
                Ok(serde_json::Value::Object(_)) => None,
                Ok(_) => Some(format!("line {} is not a JSON object", i + 1)),
                Err(e) => Some(format!("line {}: {e}", i + 1)),
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_errors_backtrace_is_left_out() {
        let message = "lake table metrics: Kernel error: Json error: Encountered unexpected 'g' whilst parsing object\n   0: buoyant_kernel::error::Error::with_backtrace\n   1: <buoyant_kernel::error::Error as core::convert::From<arrow_schema::error::ArrowError>>::from\n             at /rustc/library/alloc/src/boxed.rs:2240:9";
        assert_eq!(
            without_backtrace(message),
            "lake table metrics: Kernel error: Json error: Encountered unexpected 'g' whilst parsing object"
        );
    }

    #[test]
    fn a_commit_of_json_objects_is_whole_and_anything_else_is_named() {
        assert_eq!(entry_fault(b"{\"commitInfo\":{}}\n{\"add\":{}}\n"), None);
        assert_eq!(entry_fault(b""), Some("empty".to_owned()));
        assert_eq!(
            entry_fault(b"{\"commitInfo\":{}}\n[1]\n"),
            Some("line 2 is not a JSON object".to_owned())
        );
        let cut =
            entry_fault(b"{\"commitInfo\":{}}\n{\"add\":{\"path\":\"part-0").unwrap_or_default();
        assert!(cut.starts_with("line 2: EOF while parsing"), "{cut}");
        assert_eq!(
            entry_fault(&[0xff, 0xfe]),
            Some("not UTF-8 text".to_owned())
        );
    }
}
