//! `lkplake triage`: a person's status for a culprit, appended to the lake's `triage` table.
//!
//! The robot's reports and the mail around them give each culprit an automatic status (open,
//! discussed, fix-posted, fixed, recovered); what they cannot say is that someone looked and
//! judged it noise, or is on it. That judgement is a row of `triage`: who, when, from which
//! status to which, and why. Rows are only ever appended, so a culprit's history stays; the
//! newest stands over the automatic status in the `regressions` view, which shows both.

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use datafusion::arrow::array::{Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use lkplake_lake::{LakeUrl, derived};
use lkplake_query::columns::strings;
use lkplake_query::{Engine, EngineConfig};
use lkplake_schemas::tables::{TRIAGE, TRIAGE_TABLE};
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
    /// Where the lake is: a directory, a file:// URL, or s3://bucket/prefix (AWS_* variables).
    #[arg(long, env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub lake: LakeUrl,
    /// The culprit commit: 7 to 40 hex digits of it, as `lkplake regressions` lists it.
    pub culprit: String,
    /// The status it gets.
    #[arg(long, value_enum)]
    pub status: Verdict,
    /// Why, in a sentence.
    #[arg(long)]
    pub note: Option<String>,
    /// Who decides (default: $USER).
    #[arg(long, env = "USER", default_value = "unknown")]
    pub by: String,
    /// The commit that fixed it (with `--status fixed` only).
    #[arg(long)]
    pub fix: Option<String>,
}

/// A culprit row of the `regressions` view the request may name.
#[derive(Debug, Clone, PartialEq)]
struct Culprit {
    commit: String,
    verdict: String,
    /// The status it has now: a person's newest, else the automatic one.
    status: String,
}

/// The row `triage` gets.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    culprit: String,
    verdict: String,
    at: DateTime<Utc>,
    by: String,
    from: String,
    to: &'static str,
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
fn entry(args: &TriageArgs, found: &[Culprit], at: DateTime<Utc>) -> anyhow::Result<Entry> {
    let fix = args
        .fix
        .as_deref()
        .map(|f| commit_id("--fix", f))
        .transpose()?;
    if fix.is_some() && args.status != Verdict::Fixed {
        bail!("--fix names the fixing commit: it goes with --status fixed only");
    }
    let mut commits: Vec<&str> = found.iter().map(|c| c.commit.as_str()).collect();
    commits.dedup();
    let culprit = match commits.as_slice() {
        [] => bail!(
            "no culprit {} in the lake: `lkplake regressions` lists the culprits it holds",
            args.culprit
        ),
        [_] => found
            .iter()
            .find(|c| c.verdict == "regression")
            .unwrap_or(&found[0]),
        many => bail!(
            "{} names {} culprits ({}): give more digits",
            args.culprit,
            many.len(),
            many.join(", ")
        ),
    };
    let to = args.status.as_str();
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
        to,
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

fn batch(entry: &Entry) -> anyhow::Result<RecordBatch> {
    let text = |value: &str| -> Arc<dyn Array> { Arc::new(StringArray::from(vec![value])) };
    let optional = |value: &Option<String>| -> Arc<dyn Array> {
        Arc::new(StringArray::from(vec![value.clone()]))
    };
    let at =
        TimestampMicrosecondArray::from(vec![entry.at.timestamp_micros()]).with_timezone("UTC");
    Ok(RecordBatch::try_new(
        TRIAGE.clone(),
        vec![
            text(&entry.culprit),
            text(&entry.verdict),
            Arc::new(at),
            text(&entry.by),
            text(&entry.from),
            text(entry.to),
            optional(&entry.note),
            optional(&entry.fix),
        ],
    )?)
}

pub async fn run(args: &TriageArgs) -> anyhow::Result<bool> {
    let prefix = commit_id("the culprit", &args.culprit)?;
    let engine = Engine::open(&args.lake, &EngineConfig::default()).await?;
    let found = culprits(&engine, &prefix).await?;
    let entry = entry(args, &found, Utc::now())?;
    derived::append(&args.lake, TRIAGE_TABLE, batch(&entry)?)
        .await
        .with_context(|| format!("appending to {} of {}", TRIAGE_TABLE, args.lake))?;
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
            lake: LakeUrl::local(std::path::Path::new("lake")).unwrap_or_else(|e| panic!("{e}")),
            culprit: "1e8017bb42".into(),
            status,
            note: Some("noise on this box".into()),
            by: "Oliver Sang".into(),
            fix: fix.map(str::to_owned),
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
    const BY_HAND: [Verdict; 5] = [
        Verdict::Acknowledged,
        Verdict::Investigating,
        Verdict::Invalid,
        Verdict::Wontfix,
        Verdict::Fixed,
    ];

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
                let result = entry(&args(to, None), &found, at());
                if from == to.as_str() {
                    let err = result.err().map(|e| e.to_string()).unwrap_or_default();
                    assert_eq!(err, format!("culprit {COMMIT} is {from} already"));
                    continue;
                }
                let entry = result.unwrap_or_else(|e| panic!("{from} -> {to:?}: {e}"));
                assert_eq!(
                    (entry.from.as_str(), entry.to, entry.culprit.as_str()),
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
        let fixed = entry(&args(Verdict::Fixed, Some("5A6B7C8D9E0F")), &found, at());
        assert_eq!(
            fixed.ok().and_then(|e| e.fix),
            Some("5a6b7c8d9e0f".to_owned())
        );
        let wrong = entry(&args(Verdict::Invalid, Some("5a6b7c8d9e0f")), &found, at());
        assert!(wrong.is_err_and(|e| e.to_string().contains("--status fixed only")));
        let short = entry(&args(Verdict::Fixed, Some("5a6b")), &found, at());
        assert!(short.is_err_and(|e| e.to_string().contains("not a commit id")));
        let fixed_already = [culprit(COMMIT, "regression", "fixed")];
        let named = entry(
            &args(Verdict::Fixed, Some("5a6b7c8d9e0f")),
            &fixed_already,
            at(),
        );
        assert_eq!(
            named.ok().map(|e| (e.from, e.to, e.fix)),
            Some(("fixed".to_owned(), "fixed", Some("5a6b7c8d9e0f".to_owned())))
        );
    }

    #[test]
    fn a_regression_is_chosen_over_an_improvement_of_the_same_commit() {
        let found = [
            culprit(COMMIT, "improvement", "improvement"),
            culprit(COMMIT, "regression", "discussed"),
        ];
        let entry = entry(&args(Verdict::Acknowledged, None), &found, at());
        assert_eq!(
            entry.map(|e| (e.verdict, e.from)).ok(),
            Some(("regression".to_owned(), "discussed".to_owned()))
        );
    }

    #[test]
    fn an_unknown_or_ambiguous_culprit_is_refused_with_what_to_do() {
        let none = entry(&args(Verdict::Invalid, None), &[], at());
        assert!(none.is_err_and(|e| e.to_string().contains("`lkplake regressions` lists")));
        let two = [
            culprit("1e8017bb42aa", "regression", "open"),
            culprit("1e8017bb42bb", "regression", "open"),
        ];
        let many = entry(&args(Verdict::Invalid, None), &two, at());
        assert!(many.is_err_and(|e| e.to_string()
            == "1e8017bb42 names 2 culprits (1e8017bb42aa, 1e8017bb42bb): give more digits"));
    }
}
