//! `lkplake regressions`: the `regressions` view the way a kernel engineer reads it every week:
//! which culprits are open, discussed, answered by a fix, fixed or recovered, in which subsystem,
//! since when.

use crate::sql::{OutputFormat, execute};
use chrono::NaiveDate;
use clap::{Args, ValueEnum};
use lkplake_query::{Engine, EngineConfig};

/// A status of the `regressions` view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Status {
    /// A regression nobody answered yet.
    Open,
    /// A regression a reply cites.
    Discussed,
    /// A regression a patch answers (its `Closes:` names a report, or its `Fixes:` the culprit).
    FixPosted,
    /// A regression whose fix was applied, or whose culprit a patch reverts.
    Fixed,
    /// A regression a later report brought back to the level before the culprit.
    Recovered,
    /// An improvement.
    Improvement,
    /// Given by hand (`lkplake triage`): taken as a real regression.
    Acknowledged,
    /// Given by hand: someone is working on it.
    Investigating,
    /// Given by hand: not a regression.
    Invalid,
    /// Given by hand: real, and kept on purpose.
    Wontfix,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Discussed => "discussed",
            Status::FixPosted => "fix-posted",
            Status::Fixed => "fixed",
            Status::Recovered => "recovered",
            Status::Improvement => "improvement",
            Status::Acknowledged => "acknowledged",
            Status::Investigating => "investigating",
            Status::Invalid => "invalid",
            Status::Wontfix => "wontfix",
        }
    }
}

#[derive(Debug, Args)]
pub struct RegressionsArgs {
    #[command(flatten)]
    pub lake: crate::args::LakeArg,
    /// Only culprits with these statuses (comma-separated; default: every status).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub status: Vec<Status>,
    /// Only culprits of this subsystem, as the view names it (`mm`, `xfs`, `mm/memcontrol`).
    #[arg(long)]
    pub subsystem: Option<String>,
    /// Only culprits last reported on or after this day (YYYY-MM-DD, UTC).
    #[arg(long)]
    pub since: Option<NaiveDate>,
    /// How to print them.
    #[arg(long, env = "LKPLAKE_FORMAT", value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// The columns printed, in order: what to look at first, then where it came from.
const COLUMNS: &str = "status, subsystem, commit, commit_title, verdict, reports, worst_change_pct, \
                       first_report, last_report, replies, repliers, fix_posted, \
                       coalesce(triage_fix, fix_commit) AS fix_commit, \
                       recovered_commit, auto_status, triaged_by, triage_note";

/// The query for `args`: the view filtered, most recently reported first.
fn query(args: &RegressionsArgs) -> String {
    let mut filters = Vec::new();
    if !args.status.is_empty() {
        let statuses: Vec<String> = args
            .status
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        filters.push(format!("status IN ({})", statuses.join(", ")));
    }
    if let Some(subsystem) = &args.subsystem {
        filters.push(format!("subsystem = '{}'", subsystem.replace('\'', "''")));
    }
    if let Some(since) = args.since {
        filters.push(format!("last_report >= TIMESTAMP '{since} 00:00:00'"));
    }
    let filter = if filters.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", filters.join(" AND "))
    };
    format!("SELECT {COLUMNS} FROM regressions{filter} ORDER BY last_report DESC, commit")
}

pub async fn run(args: &RegressionsArgs) -> anyhow::Result<bool> {
    let engine = Engine::open(&args.lake.url, &EngineConfig::default()).await?;
    let mut out = std::io::stdout().lock();
    execute(&engine, &query(args), args.format.into(), &mut out).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(status: Vec<Status>, subsystem: Option<&str>, since: Option<&str>) -> RegressionsArgs {
        RegressionsArgs {
            lake: crate::args::LakeArg {
                url: lkplake_lake::LakeUrl::local(std::path::Path::new("lake"))
                    .unwrap_or_else(|e| panic!("{e}")),
            },
            status,
            subsystem: subsystem.map(str::to_owned),
            since: since.map(|d| d.parse().unwrap_or_else(|e| panic!("{d}: {e}"))),
            format: OutputFormat::Csv,
        }
    }

    #[test]
    fn filters_become_a_where_clause_with_quotes_doubled() {
        let sql = query(&args(
            vec![Status::Open, Status::Discussed],
            Some("x'fs"),
            Some("2026-07-15"),
        ));
        assert!(
            sql.ends_with(
                "FROM regressions WHERE status IN ('open', 'discussed') AND subsystem = 'x''fs' \
                 AND last_report >= TIMESTAMP '2026-07-15 00:00:00' ORDER BY last_report DESC, commit"
            ),
            "{sql}"
        );
    }

    #[test]
    fn no_filter_lists_every_culprit() {
        let sql = query(&args(Vec::new(), None, None));
        assert!(
            sql.ends_with("FROM regressions ORDER BY last_report DESC, commit"),
            "{sql}"
        );
    }
}
