//! Change points grouped across series, the way Skia Perf groups anomalies: a culprit commit
//! moves many series at once (every metric of a test, the same test on several machines), and
//! an engineer wants the commit, not two hundred change points.
//!
//! A change point says the series changed somewhere between its last observation before
//! (`time_before`) and its first after (`time`), both included: the base and the head of one
//! report share the report's time, so a step inside one report has a range of one instant.
//! In order of where their ranges start, a point whose range meets the open group's joins it,
//! and the group's range shrinks to the intersection: the commit that did it is in every
//! member's range. Each group names the robot's report of a culprit that starts one of its members'
//! ranges, when the lake holds one; a group without one is a change the robot did not mail.

use crate::{Change, TrendError};
use datafusion::arrow::array::UInt32Array;
use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray};
use lkplake_query::Engine;
use lkplake_query::columns::strings;
use lkplake_schemas::tables::CHANGE_GROUPS;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Change points whose ranges share an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The intersection of the members' ranges: from this time ...
    pub time_before: i64,
    /// ... to this one, both included.
    pub time: i64,
    /// Indexes of the members in the change points given to [`group`].
    pub members: Vec<usize>,
}

/// Groups change points by overlapping ranges. In order of where their ranges start, a point
/// joins the open group when its range meets the group's (the group keeps the intersection),
/// else it opens the next group.
pub fn group(changes: &[Change]) -> Vec<Group> {
    let mut order: Vec<usize> = (0..changes.len()).collect();
    order.sort_by_key(|&i| (changes[i].time_before, changes[i].time));
    let mut groups: Vec<Group> = Vec::new();
    for i in order {
        let (start, end) = (changes[i].time_before, changes[i].time);
        match groups.last_mut() {
            Some(open) if start <= open.time && open.time_before <= end => {
                open.time_before = open.time_before.max(start);
                open.time = open.time.min(end);
                open.members.push(i);
            }
            _ => groups.push(Group {
                time_before: start,
                time: end,
                members: vec![i],
            }),
        }
    }
    groups
}

/// The robot's performance report of each culprit, by its first 10 hex digits: the earliest
/// original (a quoted copy only when there is no original).
pub async fn culprit_reports(engine: &Engine) -> Result<HashMap<String, String>, TrendError> {
    let sql = "SELECT lower(left(commit, 10)) AS culprit, \
               first_value(report_key ORDER BY quoted, date, report_key) AS report_key \
               FROM reports WHERE kind IN ('regression', 'improvement') GROUP BY 1";
    let mut out = HashMap::new();
    for batch in engine.sql(sql).await?.collect().await? {
        let (culprit, report) = (strings(batch.column(0))?, strings(batch.column(1))?);
        for row in 0..batch.num_rows() {
            out.insert(culprit.value(row).to_owned(), report.value(row).to_owned());
        }
    }
    Ok(out)
}

/// The `change_groups` rows: one per group, in order of time.
pub fn groups_batch(
    changes: &[Change],
    groups: &[Group],
    reports: &HashMap<String, String>,
) -> Result<RecordBatch, TrendError> {
    let joined = |g: &Group, f: &dyn Fn(&Change) -> &str| -> String {
        let values: BTreeSet<&str> = g.members.iter().map(|&i| f(&changes[i])).collect();
        values.into_iter().collect::<Vec<_>>().join(",")
    };
    let count = |g: &Group, kind: &str| -> u32 {
        let n = g
            .members
            .iter()
            .filter(|&&i| changes[i].kind.as_deref() == Some(kind));
        u32::try_from(n.count()).unwrap_or(u32::MAX)
    };
    // The report of the first member (in time) whose culprit the robot mailed.
    let report = |g: &Group| -> Option<String> {
        let mut members = g.members.clone();
        members.sort_by_key(|&i| (changes[i].time, i));
        members.iter().find_map(|&i| {
            let commit = changes[i].first_commit_after.to_ascii_lowercase();
            reports.get(commit.get(..10).unwrap_or(&commit)).cloned()
        })
    };
    let text = |values: Vec<String>| -> ArrayRef { Arc::new(StringArray::from(values)) };
    let time = |values: Vec<i64>| -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from(values).with_timezone("UTC"))
    };
    let number = |values: Vec<u32>| -> ArrayRef { Arc::new(UInt32Array::from(values)) };
    let ids = (1..).take(groups.len()).collect::<Vec<u32>>();
    let sizes = groups.iter().map(|g| g.members.len());
    Ok(RecordBatch::try_new(
        CHANGE_GROUPS.clone(),
        vec![
            number(ids),
            time(groups.iter().map(|g| g.time_before).collect()),
            time(groups.iter().map(|g| g.time).collect()),
            number(
                sizes
                    .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
                    .collect(),
            ),
            number(groups.iter().map(|g| count(g, "regression")).collect()),
            number(groups.iter().map(|g| count(g, "improvement")).collect()),
            text(
                groups
                    .iter()
                    .map(|g| joined(g, &|c| &c.series.testcase))
                    .collect(),
            ),
            text(
                groups
                    .iter()
                    .map(|g| joined(g, &|c| &c.series.machine))
                    .collect(),
            ),
            text(
                groups
                    .iter()
                    .map(|g| joined(g, &|c| &c.series.metric))
                    .collect(),
            ),
            text(
                groups
                    .iter()
                    .map(|g| joined(g, &|c| &c.first_commit_after))
                    .collect(),
            ),
            Arc::new(StringArray::from(
                groups.iter().map(report).collect::<Vec<_>>(),
            )),
        ],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SeriesKey;
    use datafusion::arrow::array::as_string_array;

    fn change(metric: &str, time_before: i64, time: i64, commit: &str, kind: &str) -> Change {
        Change {
            series: SeriesKey {
                testcase: "netperf".into(),
                machine: "igk-spr-2sp1".into(),
                params: String::new(),
                metric: metric.into(),
            },
            time,
            time_before,
            last_commit_before: "aaaaaaaaaa".into(),
            first_commit_after: commit.into(),
            mean_before: 1.0,
            mean_after: 2.0,
            change_pct: 100.0,
            pvalue: 0.001,
            kind: Some(kind.into()),
            direction: None,
            observations_before: 5,
            observations_after: 5,
        }
    }

    #[test]
    fn overlapping_ranges_join_one_group_whose_range_is_their_intersection() {
        let changes = [
            change("a", 10, 40, "c1", "regression"),
            change("b", 20, 50, "c1", "regression"),
            change("c", 30, 35, "c1", "improvement"),
            // Starts after the group's range ends: a group of its own.
            change("d", 36, 60, "c2", "regression"),
        ];
        let groups = group(&changes);
        assert_eq!(
            groups,
            vec![
                Group {
                    time_before: 30,
                    time: 35,
                    members: vec![0, 1, 2],
                },
                Group {
                    time_before: 36,
                    time: 60,
                    members: vec![3],
                },
            ]
        );
    }

    #[test]
    fn a_point_that_meets_the_first_range_but_not_the_intersection_opens_a_new_group() {
        // c meets a's range (10, 40] but not the intersection (12, 25] a and b leave.
        let changes = [
            change("a", 10, 40, "c1", "regression"),
            change("c", 30, 45, "c1", "regression"),
            change("b", 12, 25, "c0", "regression"),
        ];
        let groups = group(&changes);
        let members: Vec<Vec<usize>> = groups.iter().map(|g| g.members.clone()).collect();
        // In order of where ranges start: a (10); b (12) joins it, (12, 25]; c (30) opens
        // the next group.
        assert_eq!(members, vec![vec![0, 2], vec![1]]);
        assert_eq!((groups[0].time_before, groups[0].time), (12, 25));
    }

    #[test]
    fn a_group_names_the_report_of_a_culprit_that_starts_one_of_its_ranges() {
        let changes = [
            change("a", 10, 40, "1e8017bb42651bb1", "regression"),
            change("b", 20, 50, "1e8017bb42651bb1", "regression"),
            change("d", 60, 70, "7c1d2e3f4a5b", "improvement"),
        ];
        let groups = group(&changes);
        let reports = HashMap::from([("1e8017bb42".to_owned(), "report-1".to_owned())]);
        let batch = groups_batch(&changes, &groups, &reports).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(batch.num_rows(), 2);
        let column = |name: &str| {
            let array = batch
                .column_by_name(name)
                .unwrap_or_else(|| panic!("{name}"));
            as_string_array(array)
                .iter()
                .map(|v| v.map(str::to_owned))
                .collect::<Vec<_>>()
        };
        assert_eq!(column("report_key"), vec![Some("report-1".into()), None]);
        assert_eq!(
            column("metrics"),
            vec![Some("a,b".into()), Some("d".into())]
        );
        assert_eq!(
            column("commits"),
            vec![Some("1e8017bb42651bb1".into()), Some("7c1d2e3f4a5b".into())]
        );
    }
}
