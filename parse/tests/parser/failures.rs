//! Functional reports and their `fail:runs` tables. Every expected value below was read off the
//! decoded mails of the corpus (`parse/tests/fixtures/cgroups-lkp-cc.mbox.gz`, message
//! indexes in file order) and is recorded with the rows it comes from in
//! `parse/tests/fixtures/failures-and-mentions.md`, section 1.

use crate::fixtures::{FailColumns, fail_rows, repo_root};
use lkplake_parse::Parsed;
use lkplake_parse::source::InputFile;
use lkplake_schemas::{Kind, Report, Source};

/// The corpus message at `index`, parsed.
pub fn corpus_message(index: u64) -> Parsed {
    let path = repo_root().join("parse/tests/fixtures/cgroups-lkp-cc.mbox.gz");
    let file = InputFile::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let message = file
        .messages()
        .find(|m| m.index == index)
        .unwrap_or_else(|| panic!("no message {index} in the corpus"));
    lkplake_parse::parse_message(&message.bytes, &Source::file("corpus", index))
        .unwrap_or_else(|e| panic!("message {index}: {e}"))
}

fn report(index: u64) -> Report {
    match corpus_message(index) {
        Parsed::Reports(mut reports) if reports.len() == 1 => reports.remove(0),
        other => panic!("message {index}: expected one report, got {other:?}"),
    }
}

type Columns = FailColumns;

/// A failure row as the mail prints it: name, then its columns.
type Row = (&'static str, Columns);

fn rows(report: &Report) -> Vec<(String, Columns)> {
    fail_rows(&report.tests[0])
}

struct Functional {
    index: u64,
    message_id: &'static str,
    commit: &'static str,
    base: &'static str,
    testcase: &'static str,
    machine: &'static str,
    headline: (&'static str, f64),
    rows: Vec<Row>,
}

fn check(want: Functional) {
    let r = report(want.index);
    let i = want.index;
    assert_eq!(r.message_id.as_deref(), Some(want.message_id), "{i}");
    assert_eq!(r.kind, Some(Kind::Failure), "{i}");
    assert!(!r.quoted, "{i}");
    assert_eq!(r.commit.id, want.commit, "{i} commit");
    assert_eq!(r.base_commit.id, want.base, "{i} base commit");
    assert_eq!(r.tests.len(), 1, "{i}: one test");
    assert_eq!(r.tests[0].testcase, want.testcase, "{i}");
    assert_eq!(r.tests[0].tbox_group, want.machine, "{i}");
    assert!(r.tests[0].rows.is_empty(), "{i}: no performance rows");
    let headline = r
        .headline
        .as_ref()
        .map(|h| (h.metric.as_str(), h.change_pct));
    assert_eq!(headline, Some(want.headline), "{i} headline");
    let want_rows: Vec<(String, Columns)> = want
        .rows
        .into_iter()
        .map(|(m, c)| (m.to_owned(), c))
        .collect();
    assert_eq!(rows(&r), want_rows, "{i} rows");
}

#[test]
fn a_kernel_selftests_failure_report_keeps_both_rows_and_their_unequal_run_counts() {
    check(Functional {
        index: 187,
        message_id: "<202603222104.2c81684e-lkp@intel.com>",
        commit: "a72f73c4dd9b209c53cf8b03b6e97fcefad4262c",
        base: "ca174c705db52db3",
        testcase: "kernel-selftests",
        machine: "lkp-skl-d08",
        headline: (
            "kernel-selftests.cgroup.test_stress.sh.test_cgcore_destroy.fail",
            67.0,
        ),
        rows: vec![
            (
                "kernel-selftests.cgroup.test_core.test_cgcore_destroy.fail",
                vec![(0, 9, None), (6, 6, Some(67.0))],
            ),
            (
                "kernel-selftests.cgroup.test_stress.sh.test_cgcore_destroy.fail",
                vec![(0, 9, None), (6, 6, Some(67.0))],
            ),
        ],
    });
}

#[test]
fn rows_annotated_after_the_name_keep_the_name_and_the_rows_after_them() {
    check(Functional {
        index: 311,
        message_id: "<202510271206.24495a68-lkp@intel.com>",
        commit: "b079d93796528053cde322f2ca838c2d21c297e7",
        base: "abfc01077df66593",
        testcase: "rcutorture",
        machine: "vm-snb",
        headline: (
            "dmesg.WARNING:possible_recursive_locking_detected_migration_is_trying_to_acquire_lock:at:set_cpus_allowed_force_but_task_is_already_holding_lock:at:cpu_stopper_thread",
            100.0,
        ),
        rows: vec![
            (
                "dmesg.WARNING:possible_recursive_locking_detected",
                vec![(6, 6, None), (6, 6, Some(0.0))],
            ),
            (
                "dmesg.WARNING:possible_recursive_locking_detected_migration_is_trying_to_acquire_lock:at:do_set_cpus_allowed_but_task_is_already_holding_lock:at:cpu_stopper_thread",
                vec![(6, 6, None), (0, 6, Some(-100.0))],
            ),
            (
                "dmesg.WARNING:possible_recursive_locking_detected_migration_is_trying_to_acquire_lock:at:set_cpus_allowed_force_but_task_is_already_holding_lock:at:cpu_stopper_thread",
                vec![(0, 6, None), (6, 6, Some(100.0))],
            ),
        ],
    });
}

#[test]
fn a_report_without_a_parameter_header_takes_its_suite_from_the_prose() {
    check(Functional {
        index: 396,
        message_id: "<202508070722.46239e7c-lkp@intel.com>",
        commit: "954bacce36d976fe472090b55987df66da00c49b",
        base: "dfe25fbaedfc2a07",
        testcase: "kernel-selftests",
        machine: "unknown",
        headline: (
            "kernel-selftests.cgroup.test_cpu.test_cpucg_max.fail",
            100.0,
        ),
        rows: vec![
            (
                "kernel-selftests.cgroup.test_cpu.test_cpucg_max.fail",
                vec![(0, 6, None), (6, 6, Some(100.0))],
            ),
            (
                "kernel-selftests.cgroup.test_cpu.test_cpucg_max_nested.fail",
                vec![(0, 6, None), (6, 6, Some(100.0))],
            ),
        ],
    });
}

#[test]
fn a_stress_ng_failure_with_an_eleven_axis_header() {
    check(Functional {
        index: 447,
        message_id: "<202505221030.760980df-lkp@intel.com>",
        commit: "245618f8e45ff4f79327627b474b563da71c2c75",
        base: "3efe7571c3ae2b64",
        testcase: "stress-ng",
        machine: "lkp-icl-2sp4",
        headline: ("stress-ng.fpunch.fail", 100.0),
        rows: vec![(
            "stress-ng.fpunch.fail",
            vec![(0, 6, None), (6, 6, Some(100.0))],
        )],
    });
}

#[test]
fn a_failure_table_printed_at_the_end_of_the_mail() {
    check(Functional {
        index: 752,
        message_id: "<202405211653.efc447b0-oliver.sang@intel.com>",
        commit: "aab6103b97f1c7ca6cf33e78d5e6916e53fc265c",
        base: "70a64b7919cbd6c1",
        testcase: "kernel-selftests",
        machine: "unknown",
        headline: (
            "kernel-selftests.cgroup.test_kmem.test_percpu_basic.fail",
            100.0,
        ),
        rows: vec![(
            "kernel-selftests.cgroup.test_kmem.test_percpu_basic.fail",
            vec![(0, 6, None), (6, 6, Some(100.0))],
        )],
    });
}

#[test]
fn a_tag_as_the_base_column_of_a_failure_table() {
    check(Functional {
        index: 835,
        message_id: "<202311131653.14708bb6-oliver.sang@intel.com>",
        commit: "8dade3a353290abfbfd3c38279c29c3c4ecd7356",
        base: "v6.6-rc7",
        testcase: "trinity",
        machine: "unknown",
        headline: ("dmesg.WARNING:suspicious_RCU_usage", 42.0),
        rows: vec![
            (
                "dmesg.WARNING:suspicious_RCU_usage",
                vec![(0, 50, None), (21, 50, Some(42.0))],
            ),
            (
                "dmesg.include/linux/cgroup.h:#suspicious_rcu_dereference_check()usage",
                vec![(0, 50, None), (21, 50, Some(42.0))],
            ),
        ],
    });
}

#[test]
fn a_reply_quoting_a_failure_table_with_its_header_is_a_mention_carrying_the_quoted_copy() {
    let original = report(447);
    match corpus_message(446) {
        Parsed::Mention {
            mention, reports, ..
        } => {
            assert_eq!(
                mention.message_id.as_deref(),
                Some("<95753732-9714-42e0-8097-e2b4c3dd5820@linux.ibm.com>")
            );
            assert_eq!(reports.len(), 1);
            assert!(reports[0].quoted);
            assert_eq!(reports[0].report_key, original.report_key);
            assert_eq!(rows(&reports[0]), rows(&original));
        }
        other => panic!("446: expected a mention, got {other:?}"),
    }
}

#[test]
fn a_reply_quoting_only_failure_rows_is_a_mention_with_those_rows() {
    match corpus_message(393) {
        Parsed::Mention {
            mention, reports, ..
        } => {
            assert!(reports.is_empty(), "no parameter header quoted: no test");
            assert_eq!(
                mention.in_reply_to.as_deref(),
                Some("<202508070722.46239e7c-lkp@intel.com>")
            );
            assert_eq!(
                mention.rows,
                vec![
                    ":6 100% 6:6 kernel-selftests.cgroup.test_cpu.test_cpucg_max.fail",
                    ":6 100% 6:6 kernel-selftests.cgroup.test_cpu.test_cpucg_max_nested.fail",
                ]
            );
        }
        other => panic!("393: expected a mention, got {other:?}"),
    }
}
