//! `lkplake triage`: a person's status for a culprit, appended to the lake's `triage` table.
//!
//! The robot's reports and the mail around them give each culprit an automatic status (open,
//! discussed, fix-posted, fixed, recovered); what they cannot say is that someone looked and
//! judged it noise, or is on it. That judgement is a row of `triage`: who, when, from which
//! status to which, and why. Rows are only ever appended, so a culprit's history stays; the
//! newest stands over the automatic status in the `regressions` view, which shows both.
//!
//! Unlike everything else in the lake, these rows come from no mail: a lake rebuilt from the
//! archives would lose them. `--export` writes the history as JSON lines and `--import`
//! appends the rows of such a file that a lake does not hold yet, so the judgements follow the
//! mail into a new lake (and a file of them can be kept beside the archives).

use anyhow::{Context, bail};
use chrono::{DateTime, SubsecRound, Utc};
use clap::{Args, ValueEnum};
use datafusion::arrow::array::{Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use lkplake_lake::{LakeUrl, derived};
use lkplake_query::columns::{micros, strings};
use lkplake_query::{Engine, EngineConfig};
use lkplake_schemas::tables::{TRIAGE, TRIAGE_TABLE};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A status a person gives a culprit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Verdict {
    /// Seen, and taken as a real regression.
    Acknowledged,
    /// Someone is working on it.
    Investigating,
    /// Not a regression: noise, a broken test, a setup change.
    Invalid,
    /// Real, and kept on purpose (a trade-off the change makes).
    Wontfix,
    /// Fixed, by a commit the mail around it does not name (`--fix`).
    Fixed,
}

impl Verdict {
    const ALL: [Verdict; 5] = [
        Verdict::Acknowledged,
        Verdict::Investigating,
        Verdict::Invalid,
        Verdict::Wontfix,
        Verdict::Fixed,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Verdict::Acknowledged => "acknowledged",
            Verdict::Investigating => "investigating",
            Verdict::Invalid => "invalid",
            Verdict::Wontfix => "wontfix",
            Verdict::Fixed => "fixed",
        }
    }
}

#[derive(Debug, Args)]
pub struct TriageArgs {
    #[command(flatten)]
    pub lake: crate::args::LakeArg,
    /// The culprit commit: 7 to 40 hex digits of it, as `lkplake regressions` lists it.
    #[arg(required_unless_present_any = ["export", "import"])]
    pub culprit: Option<String>,
    /// The status it gets.
    #[arg(long, value_enum, required_unless_present_any = ["export", "import"])]
    pub status: Option<Verdict>,
    /// Why, in a sentence.
    #[arg(long)]
    pub note: Option<String>,
    /// Who decides (default: $USER).
    #[arg(long, env = "USER", default_value = "unknown")]
    pub by: String,
    /// The commit that fixed it (with `--status fixed` only).
    #[arg(long)]
    pub fix: Option<String>,
    /// Instead, write the lake's whole triage history as JSON lines, oldest first, to FILE
    /// (`-`: standard output): to keep it apart from the lake, or to carry it to a lake
    /// rebuilt from the same mail with `--import`.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["culprit", "status", "note", "fix", "import"]
    )]
    pub export: Option<PathBuf>,
    /// Instead, append the rows of a history `--export` wrote that the lake does not hold yet
    /// (running it twice adds nothing). A line that is not such a row refuses the whole file.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["culprit", "status", "note", "fix"])]
    pub import: Option<PathBuf>,
}

/// A culprit row of the `regressions` view the request may name.
#[derive(Debug, Clone, PartialEq)]
struct Culprit {
    commit: String,
    verdict: String,
    /// The status it has now: a person's newest, else the automatic one.
    status: String,
}

/// A row of `triage`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Entry {
    culprit: String,
    verdict: String,
    at: DateTime<Utc>,
    by: String,
    from: String,
    to: String,
    note: Option<String>,
    fix: Option<String>,
}

/// A commit id as given: 7 to 40 hex digits, lowercased.
fn commit_id(what: &str, text: &str) -> anyhow::Result<String> {
    let id = text.trim().to_ascii_lowercase();
    if !(7..=40).contains(&id.len()) || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("{what} {text:?} is not a commit id: give 7 to 40 hex digits");
    }
    Ok(id)
}

/// Decides the row for `args` among the culprits whose commit starts with the one asked for.
/// A regression is chosen over an improvement of the same commit.
fn entry(
    args: &TriageArgs,
    status: Verdict,
    found: &[Culprit],
    at: DateTime<Utc>,
) -> anyhow::Result<Entry> {
    let asked = args.culprit.as_deref().unwrap_or_default();
    let fix = args
        .fix
        .as_deref()
        .map(|f| commit_id("--fix", f))
        .transpose()?;
    if fix.is_some() && status != Verdict::Fixed {
        bail!("--fix names the fixing commit: it goes with --status fixed only");
    }
    let mut commits: Vec<&str> = found.iter().map(|c| c.commit.as_str()).collect();
    commits.dedup();
    let culprit = match commits.as_slice() {
        [] => bail!(
            "no culprit {asked} in the lake: `lkplake regressions` lists the culprits it holds"
        ),
        [_] => found
            .iter()
            .find(|c| c.verdict == "regression")
            .unwrap_or(&found[0]),
        many => bail!(
            "{asked} names {} culprits ({}): give more digits",
            many.len(),
            many.join(", ")
        ),
    };
    let to = status.as_str();
    // A fixing commit is news even for a culprit fixed already (by a fix the mail names).
    if culprit.status == to && fix.is_none() {
        bail!("culprit {} is {to} already", culprit.commit);
    }
    Ok(Entry {
        culprit: culprit.commit.clone(),
        verdict: culprit.verdict.clone(),
        at,
        by: args.by.clone(),
        from: culprit.status.clone(),
        to: to.to_owned(),
        note: args.note.clone(),
        fix,
    })
}

/// The culprits whose commit starts with `prefix`, one per verdict, with their status now.
async fn culprits(engine: &Engine, prefix: &str) -> anyhow::Result<Vec<Culprit>> {
    let sql = format!(
        "SELECT commit, verdict, status FROM regressions \
         WHERE starts_with(lower(commit), '{prefix}') ORDER BY commit, verdict"
    );
    let batches = engine.sql(&sql).await?.collect().await?;
    let mut out = Vec::new();
    for batch in &batches {
        let column = |i: usize| strings(batch.column(i));
        let (commit, verdict, status) = (column(0)?, column(1)?, column(2)?);
        for row in 0..batch.num_rows() {
            out.push(Culprit {
                commit: commit.value(row).to_owned(),
                verdict: verdict.value(row).to_owned(),
                status: status.value(row).to_owned(),
            });
        }
    }
    Ok(out)
}

fn batch(entries: &[Entry]) -> anyhow::Result<RecordBatch> {
    let text = |value: fn(&Entry) -> &str| -> Arc<dyn Array> {
        Arc::new(StringArray::from_iter_values(entries.iter().map(value)))
    };
    let optional = |value: fn(&Entry) -> Option<&str>| -> Arc<dyn Array> {
        Arc::new(StringArray::from_iter(entries.iter().map(value)))
    };
    let at = TimestampMicrosecondArray::from_iter_values(
        entries.iter().map(|e| e.at.timestamp_micros()),
    )
    .with_timezone("UTC");
    Ok(RecordBatch::try_new(
        TRIAGE.clone(),
        vec![
            text(|e| &e.culprit),
            text(|e| &e.verdict),
            Arc::new(at),
            text(|e| &e.by),
            text(|e| &e.from),
            text(|e| &e.to),
            optional(|e| e.note.as_deref()),
            optional(|e| e.fix.as_deref()),
        ],
    )?)
}

/// Every row of the lake's `triage` table, oldest first.
async fn history(engine: &Engine) -> anyhow::Result<Vec<Entry>> {
    let sql = "SELECT culprit, verdict, triaged_at, triaged_by, from_status, to_status, note, \
               fix_commit FROM triage \
               ORDER BY triaged_at, culprit, verdict, to_status, triaged_by";
    let batches = engine.sql(sql).await?.collect().await?;
    let mut out = Vec::new();
    for batch in &batches {
        let column = |i: usize| strings(batch.column(i));
        let (culprit, verdict, by) = (column(0)?, column(1)?, column(3)?);
        let (from, to, note, fix) = (column(4)?, column(5)?, column(6)?, column(7)?);
        let at = micros(batch.column(2))?;
        let optional =
            |a: &StringArray, row: usize| a.is_valid(row).then(|| a.value(row).to_owned());
        for row in 0..batch.num_rows() {
            out.push(Entry {
                culprit: culprit.value(row).to_owned(),
                verdict: verdict.value(row).to_owned(),
                at: DateTime::from_timestamp_micros(at.value(row)).unwrap_or_default(),
                by: by.value(row).to_owned(),
                from: from.value(row).to_owned(),
                to: to.value(row).to_owned(),
                note: optional(&note, row),
                fix: optional(&fix, row),
            });
        }
    }
    Ok(out)
}

impl Entry {
    /// One line of `--export`, named as the table's columns are; the time to the microsecond.
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "culprit": self.culprit,
            "verdict": self.verdict,
            "triaged_at": self.at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "triaged_by": self.by,
            "from_status": self.from,
            "to_status": self.to,
            "note": self.note,
            "fix_commit": self.fix,
        })
    }

    /// A line of `--export`, checked as `lkplake triage` checks what a person gives.
    fn from_json(line: &str) -> Result<Entry, String> {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let field = |name: &str| -> Result<Option<String>, String> {
            match value.get(name) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(format!("{name} is {other}, not a string")),
            }
        };
        let required = |name: &str| field(name)?.ok_or_else(|| format!("no {name}"));
        let culprit = required("culprit")?;
        if culprit.len() != 40 || !culprit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("culprit {culprit:?} is not a 40-digit commit id"));
        }
        let verdict = required("verdict")?;
        if !["regression", "improvement"].contains(&verdict.as_str()) {
            return Err(format!(
                "verdict {verdict:?} is neither regression nor improvement"
            ));
        }
        let to = required("to_status")?;
        if !Verdict::ALL.iter().any(|v| v.as_str() == to) {
            return Err(format!("to_status {to:?} is not a status a person gives"));
        }
        let stamp = required("triaged_at")?;
        // The table keeps microseconds: a finer time would never equal the row it became.
        let at = DateTime::parse_from_rfc3339(&stamp)
            .map_err(|e| format!("triaged_at {stamp:?}: {e}"))?
            .with_timezone(&Utc)
            .trunc_subsecs(6);
        let fix = field("fix_commit")?
            .map(|f| commit_id("fix_commit", &f).map_err(|e| e.to_string()))
            .transpose()?;
        Ok(Entry {
            culprit: culprit.to_ascii_lowercase(),
            verdict,
            at,
            by: required("triaged_by")?,
            from: required("from_status")?,
            to,
            note: field("note")?,
            fix,
        })
    }
}

/// The rows of an exported history, or the first line that is not one, named.
fn read_history(path: &Path, text: &str) -> anyhow::Result<Vec<Entry>> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            Entry::from_json(line).map_err(|reason| {
                anyhow::anyhow!(
                    "{} line {}: {reason}; nothing was imported",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect()
}

async fn export(args: &TriageArgs, path: &Path) -> anyhow::Result<bool> {
    let engine = Engine::open(&args.lake.url, &EngineConfig::default()).await?;
    let rows = history(&engine).await?;
    let mut text = String::new();
    for entry in &rows {
        text.push_str(&entry.to_json().to_string());
        text.push('\n');
    }
    if path.as_os_str() == "-" {
        // Not `print!`, which panics on a closed pipe (`--export - | head`).
        use std::io::Write as _;
        std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("writing the triage history to standard output")?;
    } else {
        tokio::fs::write(path, text)
            .await
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "lkplake triage: {} rows of {} written to {}",
            rows.len(),
            args.lake.url,
            path.display()
        );
    }
    Ok(true)
}

async fn import(args: &TriageArgs, path: &Path) -> anyhow::Result<bool> {
    let text = tokio::fs::read_to_string(path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    let rows = read_history(path, &text)?;
    let engine = Engine::open(&args.lake.url, &EngineConfig::default()).await?;
    let held = history(&engine).await?;
    let mut seen: HashSet<&Entry> = held.iter().collect();
    let new: Vec<Entry> = rows.iter().filter(|r| seen.insert(r)).cloned().collect();
    if !new.is_empty() {
        append(&args.lake.url, &new).await?;
    }
    eprintln!(
        "lkplake triage: {} rows imported from {}, {} held already",
        new.len(),
        path.display(),
        rows.len() - new.len()
    );
    Ok(true)
}

async fn append(lake: &LakeUrl, entries: &[Entry]) -> anyhow::Result<()> {
    derived::append(lake, TRIAGE_TABLE, batch(entries)?)
        .await
        .with_context(|| format!("appending to {TRIAGE_TABLE} of {lake}"))
}

pub async fn run(args: &TriageArgs) -> anyhow::Result<bool> {
    if let Some(path) = &args.export {
        return export(args, path).await;
    }
    if let Some(path) = &args.import {
        return import(args, path).await;
    }
    let (Some(culprit), Some(status)) = (&args.culprit, args.status) else {
        bail!("give a CULPRIT and its --status, or --export or --import");
    };
    let prefix = commit_id("the culprit", culprit)?;
    let engine = Engine::open(&args.lake.url, &EngineConfig::default()).await?;
    let found = culprits(&engine, &prefix).await?;
    let entry = entry(args, status, &found, Utc::now())?;
    append(&args.lake.url, std::slice::from_ref(&entry)).await?;
    println!(
        "{} ({}): {} -> {} by {}",
        entry.culprit, entry.verdict, entry.from, entry.to, entry.by
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(status: Verdict, fix: Option<&str>) -> TriageArgs {
        TriageArgs {
            lake: crate::args::LakeArg {
                url: LakeUrl::local(Path::new("lake")).unwrap_or_else(|e| panic!("{e}")),
            },
            culprit: Some("1e8017bb42".into()),
            status: Some(status),
            note: Some("noise on this box".into()),
            by: "Oliver Sang".into(),
            fix: fix.map(str::to_owned),
            export: None,
            import: None,
        }
    }

    fn culprit(commit: &str, verdict: &str, status: &str) -> Culprit {
        Culprit {
            commit: commit.into(),
            verdict: verdict.into(),
            status: status.into(),
        }
    }

    const COMMIT: &str = "1e8017bb42651bb1dc84917b7864ae6159866b1d";
    const AUTOMATIC: [&str; 6] = [
        "open",
        "discussed",
        "fix-posted",
        "fixed",
        "recovered",
        "improvement",
    ];
    const BY_HAND: [Verdict; 5] = Verdict::ALL;

    fn at() -> DateTime<Utc> {
        DateTime::from_timestamp(1_783_600_000, 0).unwrap_or_default()
    }

    #[test]
    fn every_status_can_be_given_from_every_other_and_records_both() {
        let from_all = AUTOMATIC
            .iter()
            .copied()
            .chain(BY_HAND.iter().map(|v| v.as_str()));
        for from in from_all {
            for to in BY_HAND {
                let found = [culprit(COMMIT, "regression", from)];
                let result = entry(&args(to, None), to, &found, at());
                if from == to.as_str() {
                    let err = result.err().map(|e| e.to_string()).unwrap_or_default();
                    assert_eq!(err, format!("culprit {COMMIT} is {from} already"));
                    continue;
                }
                let entry = result.unwrap_or_else(|e| panic!("{from} -> {to:?}: {e}"));
                assert_eq!(
                    (
                        entry.from.as_str(),
                        entry.to.as_str(),
                        entry.culprit.as_str()
                    ),
                    (from, to.as_str(), COMMIT)
                );
                assert_eq!(
                    (entry.by.as_str(), entry.note.as_deref(), entry.at),
                    ("Oliver Sang", Some("noise on this box"), at())
                );
            }
        }
    }

    #[test]
    fn a_fixing_commit_goes_with_fixed_only_and_must_be_a_commit_id() {
        let found = [culprit(COMMIT, "regression", "open")];
        let fixed = entry(
            &args(Verdict::Fixed, Some("5A6B7C8D9E0F")),
            Verdict::Fixed,
            &found,
            at(),
        );
        assert_eq!(
            fixed.ok().and_then(|e| e.fix),
            Some("5a6b7c8d9e0f".to_owned())
        );
        let wrong = entry(
            &args(Verdict::Invalid, Some("5a6b7c8d9e0f")),
            Verdict::Invalid,
            &found,
            at(),
        );
        assert!(wrong.is_err_and(|e| e.to_string().contains("--status fixed only")));
        let short = entry(
            &args(Verdict::Fixed, Some("5a6b")),
            Verdict::Fixed,
            &found,
            at(),
        );
        assert!(short.is_err_and(|e| e.to_string().contains("not a commit id")));
        let fixed_already = [culprit(COMMIT, "regression", "fixed")];
        let named = entry(
            &args(Verdict::Fixed, Some("5a6b7c8d9e0f")),
            Verdict::Fixed,
            &fixed_already,
            at(),
        );
        assert_eq!(
            named.ok().map(|e| (e.from, e.to, e.fix)),
            Some((
                "fixed".to_owned(),
                "fixed".to_owned(),
                Some("5a6b7c8d9e0f".to_owned())
            ))
        );
    }

    #[test]
    fn a_regression_is_chosen_over_an_improvement_of_the_same_commit() {
        let found = [
            culprit(COMMIT, "improvement", "improvement"),
            culprit(COMMIT, "regression", "discussed"),
        ];
        let entry = entry(
            &args(Verdict::Acknowledged, None),
            Verdict::Acknowledged,
            &found,
            at(),
        );
        assert_eq!(
            entry.map(|e| (e.verdict, e.from)).ok(),
            Some(("regression".to_owned(), "discussed".to_owned()))
        );
    }

    #[test]
    fn an_unknown_or_ambiguous_culprit_is_refused_with_what_to_do() {
        let none = entry(&args(Verdict::Invalid, None), Verdict::Invalid, &[], at());
        assert!(none.is_err_and(|e| e.to_string().contains("`lkplake regressions` lists")));
        let two = [
            culprit("1e8017bb42aa", "regression", "open"),
            culprit("1e8017bb42bb", "regression", "open"),
        ];
        let many = entry(&args(Verdict::Invalid, None), Verdict::Invalid, &two, at());
        assert!(many.is_err_and(|e| e.to_string()
            == "1e8017bb42 names 2 culprits (1e8017bb42aa, 1e8017bb42bb): give more digits"));
    }

    fn exported(entry: &Entry) -> String {
        entry.to_json().to_string()
    }

    #[test]
    fn an_exported_row_reads_back_as_the_same_row() {
        let row = Entry {
            culprit: COMMIT.into(),
            verdict: "regression".into(),
            at: DateTime::from_timestamp_micros(1_783_600_000_123_456).unwrap_or_default(),
            by: "Oliver Sang".into(),
            from: "fix-posted".into(),
            to: "fixed".into(),
            note: None,
            fix: Some("5a6b7c8d9e0f".into()),
        };
        let line = exported(&row);
        assert_eq!(
            line,
            format!(
                "{{\"culprit\":\"{COMMIT}\",\"fix_commit\":\"5a6b7c8d9e0f\",\
                 \"from_status\":\"fix-posted\",\"note\":null,\"to_status\":\"fixed\",\
                 \"triaged_at\":\"2026-07-09T12:26:40.123456Z\",\"triaged_by\":\"Oliver Sang\",\
                 \"verdict\":\"regression\"}}"
            )
        );
        assert_eq!(Entry::from_json(&line), Ok(row.clone()));
        let finer = line.replace(".123456Z", ".123456789Z");
        assert_eq!(Entry::from_json(&finer), Ok(row), "kept to the microsecond");
    }

    #[test]
    fn an_imported_line_that_is_not_a_triage_row_is_named_with_its_reason() {
        let good = exported(&Entry {
            culprit: COMMIT.into(),
            verdict: "regression".into(),
            at: at(),
            by: "Oliver Sang".into(),
            from: "open".into(),
            to: "invalid".into(),
            note: Some("noise".into()),
            fix: None,
        });
        let cases = [
            (
                "culprit",
                "\"1e8017b\"",
                "culprit \"1e8017b\" is not a 40-digit commit id",
            ),
            (
                "verdict",
                "\"failure\"",
                "verdict \"failure\" is neither regression nor improvement",
            ),
            (
                "to_status",
                "\"open\"",
                "to_status \"open\" is not a status a person gives",
            ),
            (
                "triaged_at",
                "\"yesterday\"",
                "triaged_at \"yesterday\": premature end of input",
            ),
            ("triaged_by", "null", "no triaged_by"),
            ("note", "3", "note is 3, not a string"),
        ];
        for (field, value, reason) in cases {
            let mut row: serde_json::Value =
                serde_json::from_str(&good).unwrap_or_else(|e| panic!("{e}"));
            row[field] = serde_json::from_str(value).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                Entry::from_json(&row.to_string()),
                Err(reason.to_owned()),
                "{field}"
            );
        }
        let text = format!("{good}\n\n{{\"culprit\":");
        let err = read_history(Path::new("triage.jsonl"), &text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("triage.jsonl line 3: not JSON: EOF while parsing"),
            "{err}"
        );
        assert!(err.ends_with("; nothing was imported"), "{err}");
    }
}
