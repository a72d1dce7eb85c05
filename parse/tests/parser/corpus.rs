//! The mailing-list corpus: 2,014 real mails. Eighteen of them have expected values written
//! by reading the decoded mail (`fixtures/corpus/NNNN.expected`, format in NOTES.md there);
//! the whole archive pins how every mail is classified.

use crate::fixtures::{FailColumns, fail_rows, parse_bytes, read, repo_root};
use lkplake_parse::Parsed;
use lkplake_parse::source::InputFile;
use lkplake_schemas::{Report, Row, Source, Test};
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    repo_root().join("parse/tests/fixtures/corpus")
}

/// One `test` block of an `.expected` file.
#[derive(Debug, Default)]
struct ExpectedTest {
    testcase: String,
    tbox_group: String,
    params: Vec<(String, String)>,
    commits: Vec<String>,
    rows: Vec<String>,
    fails: Vec<String>,
}

#[derive(Debug, Default)]
struct Expected {
    message_id: String,
    quoted: bool,
    kind: String,
    headline: String,
    commit: String,
    base_commit: String,
    tests: Vec<ExpectedTest>,
}

fn load_expected(path: &PathBuf) -> Expected {
    let text = String::from_utf8(read(path)).unwrap_or_default();
    let mut e = Expected::default();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        if line == "test" {
            e.tests.push(ExpectedTest::default());
            continue;
        }
        let (key, value) = line.split_once(": ").unwrap_or((line, ""));
        let value = value.to_owned();
        match (key, e.tests.last_mut()) {
            ("message_id", _) => e.message_id = value,
            ("quoted", _) => e.quoted = value == "true",
            ("kind", _) => e.kind = value,
            ("headline", _) => e.headline = value,
            ("commit", None) => e.commit = value,
            ("base_commit", _) => e.base_commit = value,
            ("testcase", Some(t)) => t.testcase = value,
            ("tbox_group", Some(t)) => t.tbox_group = value,
            ("param", Some(t)) => {
                let (k, v) = value.split_once('=').unwrap_or((&value, ""));
                t.params.push((k.to_owned(), v.to_owned()));
            }
            ("commits", Some(t)) => t.commits = value.split(' ').map(str::to_owned).collect(),
            ("row", Some(t)) => t.rows.push(value),
            ("fail", Some(t)) => t.fails.push(value),
            _ => panic!("{}: unexpected line {line:?}", path.display()),
        }
    }
    e
}

/// The oracle for one printed row: a plain whitespace split of the clean line written into
/// the `.expected` file, independent of the parser's token grammar.
/// `(mean, stddev_pct, change)` per column.
type Columns = Vec<(f64, Option<f64>, Option<f64>)>;

fn printed_row(line: &str) -> (String, Columns) {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let (metric, nums) = toks.split_last().unwrap_or_else(|| panic!("empty row"));
    let num = |t: &str| -> f64 {
        t.trim_end_matches('%')
            .parse()
            .unwrap_or_else(|_| panic!("number {t:?} in {line:?}"))
    };
    let mut values = Vec::new();
    let mut i = 0;
    while i < nums.len() {
        let change = if values.is_empty() {
            None
        } else {
            Some(num(nums[i]))
        };
        if change.is_some() {
            i += 1;
        }
        let mean = num(nums[i]);
        i += 1;
        let mut sd = None;
        if let Some(t) = nums.get(i) {
            if *t == "±" {
                sd = Some(num(nums[i + 1]));
                i += 2;
            } else if let Some(rest) = t.strip_prefix('±') {
                sd = Some(num(rest));
                i += 1;
            }
        }
        values.push((mean, sd, change));
    }
    ((*metric).to_owned(), values)
}

/// The oracle for one printed fail:runs row: `:9 67% 6:6 name <-------- (1)` read token by
/// token, the first token that is neither a count nor a percentage being the name.
fn printed_fail(line: &str) -> (String, FailColumns) {
    let mut columns = Vec::new();
    let mut reproduction = None;
    for tok in line.split_whitespace() {
        if let Some(pct) = tok.strip_suffix('%') {
            reproduction = Some(
                pct.parse()
                    .unwrap_or_else(|_| panic!("{tok:?} in {line:?}")),
            );
        } else if let Some((fail, runs)) = tok.split_once(':')
            && runs.parse::<u32>().is_ok()
            && (fail.is_empty() || fail.parse::<u32>().is_ok())
        {
            columns.push((
                fail.parse().unwrap_or(0),
                runs.parse().unwrap_or(0),
                reproduction.take(),
            ));
        } else {
            return (tok.to_owned(), columns);
        }
    }
    panic!("no failure name in {line:?}")
}

fn as_tuples(row: &Row) -> Columns {
    row.values
        .iter()
        .map(|v| (v.mean, v.stddev_pct, v.change))
        .collect()
}

fn prefix_match(a: &str, b: &str) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn same_identity(test: &Test, e: &ExpectedTest) -> bool {
    let mut params: Vec<(String, String)> = e
        .params
        .iter()
        .filter(|(k, _)| k != "testcase" && k != "tbox_group")
        .cloned()
        .collect();
    params.sort();
    let actual: Vec<(String, String)> = test.params.clone().into_iter().collect();
    test.testcase == e.testcase
        && test.tbox_group == e.tbox_group
        && actual == params
        && test.commits.len() == e.commits.len()
        && test
            .commits
            .iter()
            .zip(&e.commits)
            .all(|(a, b)| prefix_match(a, b))
}

fn check_fixture(index: &str) {
    let dir = corpus_dir();
    let expected = load_expected(&dir.join(format!("{index}.expected")));
    let parsed = parse_bytes(&read(&dir.join(format!("{index}.eml"))))
        .unwrap_or_else(|e| panic!("{index}: parse error {e}"));
    let reports: Vec<Report> = match parsed {
        Parsed::NotAReport | Parsed::Links(_) => panic!("{index}: expected a report"),
        // A reply that quotes whole tables is a mention carrying the quoted reports.
        Parsed::Mention { reports, .. } if expected.quoted => reports,
        Parsed::Mention { .. } => panic!("{index}: expected a report, not a mention"),
        Parsed::Reports(reports) => reports,
    };
    let main = &reports[0];
    assert_eq!(
        main.message_id.as_deref(),
        Some(expected.message_id.as_str()),
        "{index} message_id"
    );
    assert_eq!(main.quoted, expected.quoted, "{index} quoted");
    assert_eq!(
        main.kind.map_or("none", |k| k.as_str()),
        expected.kind,
        "{index} kind"
    );
    let headline = main.headline.as_ref().map_or("none".to_owned(), |h| {
        format!("{} {}", h.metric, h.change_pct)
    });
    let expected_headline = match expected.headline.split_once(' ') {
        Some((m, c)) => format!("{m} {}", c.parse::<f64>().unwrap_or(f64::NAN)),
        None => expected.headline.clone(),
    };
    assert_eq!(headline, expected_headline, "{index} headline");
    if expected.commit != "none" {
        assert!(
            prefix_match(&main.commit.id, &expected.commit),
            "{index} commit {} vs {}",
            main.commit.id,
            expected.commit
        );
    }
    if expected.base_commit != "none" {
        assert!(
            prefix_match(&main.base_commit.id, &expected.base_commit),
            "{index} base {}",
            main.base_commit.id
        );
    }

    let tests: Vec<&Test> = reports.iter().flat_map(|r| &r.tests).collect();
    for (n, e) in expected.tests.iter().enumerate() {
        if e.testcase == "none" {
            // A table without a parameter header joins the test it measures again, and never
            // adds a second value for a metric that test already has.
            for line in &e.rows {
                let (metric, _) = printed_row(line);
                assert!(
                    tests
                        .iter()
                        .any(|t| t.rows.iter().any(|r| r.metric == metric)),
                    "{index} orphan row {metric}"
                );
            }
            continue;
        }
        let test = tests
            .iter()
            .find(|t| same_identity(t, e))
            .unwrap_or_else(|| {
                panic!(
                    "{index}: no parsed test matches expected test {n} ({} {})",
                    e.testcase, e.tbox_group
                )
            });
        // Tables of the same test (an excerpt in the body, the full table attached) are one
        // measurement: the parsed rows are the expected rows of all of them, first one wins.
        let mut want: Vec<(String, Columns)> = Vec::new();
        // A table without a parameter header joins the test over the same commits, after it.
        let same_commits = |o: &ExpectedTest| {
            o.commits.len() == test.commits.len()
                && o.commits
                    .iter()
                    .zip(&test.commits)
                    .all(|(a, b)| prefix_match(a, b))
        };
        let identified = expected
            .tests
            .iter()
            .filter(|o| o.testcase != "none" && same_identity(test, o));
        let orphans = expected
            .tests
            .iter()
            .filter(|o| o.testcase == "none" && same_commits(o));
        for same in identified.chain(orphans) {
            for line in &same.rows {
                let (metric, values) = printed_row(line);
                if !want.iter().any(|(m, _)| *m == metric) {
                    want.push((metric, values));
                }
            }
        }
        let got: Vec<(String, Columns)> = test
            .rows
            .iter()
            .map(|r| (r.metric.clone(), as_tuples(r)))
            .collect();
        assert_eq!(got.len(), want.len(), "{index} test {n}: row count");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{index} test {n}");
        }
        let fails = fail_rows(test);
        let want_fails: Vec<(String, FailColumns)> =
            e.fails.iter().map(|l| printed_fail(l)).collect();
        assert_eq!(fails, want_fails, "{index} test {n}: failures");
    }
}

macro_rules! fixture_tests {
    ($($name:ident => $index:literal),* $(,)?) => {
        $(#[test] fn $name() { check_fixture($index); })*
    };
}

fixture_tests! {
    corpus_0000_robot_report_sent_as_a_patch_reply_with_in_addition_box => "0000",
    corpus_0187_functional_report_keeps_its_fail_runs_rows => "0187",
    corpus_0189_stress_ng_improvement_on_tj_cgroup => "0189",
    corpus_0279_single_will_it_scale_table => "0279",
    corpus_0311_fail_rows_with_annotations_after_the_name => "0311",
    corpus_0507_seven_tables_from_six_additional_tests => "0507",
    corpus_0692_follow_up_names_the_quoted_commit_not_its_fix_up_column => "0692",
    corpus_0707_headerless_perf_c2c_table_joins_the_main_test => "0707",
    corpus_0750_negative_means_and_in_addition => "0750",
    corpus_0754_reply_quoting_follow_up_tables_at_two_depths => "0754",
    corpus_0796_multipart_follow_up_with_attached_full_tables => "0796",
    corpus_0800_operator_preface_before_the_report => "0800",
    corpus_0828_aim7_improvement_with_second_aim7_test => "0828",
    corpus_0835_headerless_functional_report_with_a_tag_as_base => "0835",
    corpus_0869_quoted_printable_reply_quoting_four_column_tables => "0869",
    corpus_0870_follow_up_without_commit_lists => "0870",
    corpus_1139_reply_quoting_a_whole_2022_kbuild_report => "1139",
    corpus_1946_2020_follow_up_with_a_tag_as_base => "1946",
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    messages: u64,
    messages_with_reports: u64,
    reports: u64,
    quoted: u64,
    mentions: u64,
    not_reports: u64,
    failed: u64,
    tests: u64,
    rows: u64,
    failure_rows: u64,
}

#[test]
fn every_corpus_mail_is_a_report_a_mention_or_not_a_report() {
    let path = repo_root().join("parse/tests/fixtures/cgroups-lkp-cc.mbox.gz");
    let file = InputFile::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut counts = Counts::default();
    let mut report_indexes = Vec::new();
    let mut mention_indexes = Vec::new();
    for message in file.messages() {
        counts.messages += 1;
        let source = Source::file(file.path.clone(), message.index);
        let reports = match lkplake_parse::parse_message(&message.bytes, &source) {
            Ok(Parsed::Reports(reports)) => {
                counts.messages_with_reports += 1;
                report_indexes.push(message.index);
                reports
            }
            Ok(Parsed::Mention { reports, .. }) => {
                counts.mentions += 1;
                mention_indexes.push(message.index);
                reports
            }
            // A patch or notice that links a report is still no report (the links test
            // counts its links).
            Ok(Parsed::NotAReport | Parsed::Links(_)) => {
                counts.not_reports += 1;
                Vec::new()
            }
            Err(e) => {
                counts.failed += 1;
                eprintln!("message {}: {e}", message.index);
                Vec::new()
            }
        };
        for r in &reports {
            counts.reports += 1;
            counts.quoted += u64::from(r.quoted);
            counts.tests += r.tests.len() as u64;
            counts.rows += r.tests.iter().map(|t| t.rows.len() as u64).sum::<u64>();
            counts.failure_rows += r.tests.iter().map(|t| t.failures.len() as u64).sum::<u64>();
        }
    }
    // NOTES.md counts 39 mails with a %stddev table: 20 original reports, 13 robot follow-ups
    // and 6 replies quoting one. Two of them (756, 757) hold only a table without a parameter
    // header (a fragment that names no test); 753 quotes a second report besides its own. The
    // six robot functional reports with a fail:runs table (187, 311, 396, 447, 752, 835) are
    // reports too (failures-and-mentions.md, section 1).
    assert_eq!(
        report_indexes,
        vec![
            0, 87, 98, 109, 131, 187, 189, 279, 311, 396, 398, 447, 507, 547, 658, 690, 692, 697,
            701, 707, 710, 743, 749, 750, 752, 753, 755, 760, 787, 796, 800, 824, 825, 828, 835,
            870, 878, 1946
        ]
    );
    // failures-and-mentions.md, section 2.2: the 34 human replies that quote a performance
    // report's opening or rows; section 1.4: the 19 replies that quote a functional report's
    // `noticed "..." on:` line or its table (393, 446), less 1109, 1519 and 2009, whose
    // 2019-2022 opening (`FYI, we noticed the following commit`) names no failure; and the
    // robot operator's replies without a table of their own that quote an opening (322, 483,
    // 757, 798, 820, all from Oliver Sang).
    assert_eq!(
        mention_indexes,
        vec![
            92, 107, 115, 118, 119, 122, 124, 125, 128, 130, 310, 322, 323, 324, 325, 326, 327,
            356, 357, 358, 393, 438, 446, 483, 494, 505, 506, 511, 656, 689, 691, 693, 694, 695,
            696, 698, 704, 754, 756, 757, 758, 759, 798, 799, 819, 820, 821, 869, 873, 874, 875,
            876, 877, 961, 1139
        ]
    );
    assert_eq!(
        counts,
        Counts {
            messages: 2014,
            messages_with_reports: 38,
            // 38 performance reports (6 quoted copies), the 6 functional reports and the
            // quoted copy of 447 in 446.
            reports: 45,
            quoted: 7,
            mentions: 55,
            not_reports: 1921,
            failed: 0,
            tests: 74,
            rows: 20279,
            // 2 + 3 + 2 + 1 + 1 + 2 rows of the six functional reports, and 1 row quoted in 446.
            failure_rows: 12,
        }
    );
}

/// The byte-level prefilter answers "not a report" without decoding only where decoding and
/// parsing the mail in full answers the same: on every corpus mail, including the reports
/// sent quoted-printable and the replies sent as HTML or multipart, the two paths agree.
#[test]
fn the_prefilter_settles_only_mail_that_the_full_parse_finds_empty() {
    use lkplake_parse::decode::decode;
    use lkplake_parse::parser::parse_document;
    use lkplake_parse::prefilter::{Plain, read_plain, read_raw};
    let path = repo_root().join("parse/tests/fixtures/cgroups-lkp-cc.mbox.gz");
    let file = InputFile::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let (mut settled, mut plain_links) = (0, 0);
    for message in file.messages() {
        let source = Source::file(file.path.clone(), message.index);
        let full = parse_document(&decode(&message.bytes), &source);
        assert_eq!(
            lkplake_parse::parse_message(&message.bytes, &source),
            full,
            "message {}",
            message.index
        );
        match read_plain(&message.bytes, read_raw(&message.bytes)) {
            Plain::Settled => {
                settled += 1;
                assert_eq!(full, Ok(Parsed::NotAReport), "message {}", message.index);
            }
            // Read for its links without decoding its body: no report, maybe links, the
            // same as the full parse (asserted above).
            Plain::Links(_) => plain_links += 1,
            Plain::Decode => {}
        }
    }
    // Counted independently with Python's `email` package: 1,545 mails have no marker in their
    // bytes and header fields that name text/plain (or nothing) in an ASCII-preserving
    // charset; 1,452 of them have no transfer encoding but 7bit, 8bit or binary, and 93 are
    // quoted-printable with no marker in the payload Python decodes (carriage returns taken
    // out, as `mail-parser` does). One of the 1,545, 1308, has a header line
    // `84;0;0cTo: kernel test robot <lkp@intel.com>` (terminal residue pasted into the
    // header), which the decoder does not take for mail: the prefilter leaves it to it. Those
    // whose text holds a link's marker are now read for their links, the rest settled.
    assert_eq!(settled + plain_links, 1544);
    assert!(
        settled > 0 && plain_links > 0,
        "{settled} settled, {plain_links} read plain"
    );
}
