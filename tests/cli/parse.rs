//! `lkplake parse`.

use crate::common::{json_lines, lkplake, temp_dir};

#[test]
fn parse_prints_one_json_object_per_report_with_the_wire_field_names() {
    let out = lkplake(&["parse", "examples/reports"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports = json_lines(&out);
    assert_eq!(reports.len(), 5);
    for r in &reports {
        for field in [
            "schema_version",
            "report_key",
            "message_id",
            "date",
            "subject",
            "kind",
            "headline",
            "commit",
            "base_commit",
            "branch",
            "quoted",
            "source",
            "tests",
        ] {
            assert!(r.get(field).is_some(), "missing {field}");
        }
        let test = &r["tests"][0];
        for field in [
            "testcase",
            "tbox_group",
            "machine",
            "params",
            "headline",
            "commits",
            "rows",
            "failures",
        ] {
            assert!(test.get(field).is_some(), "missing tests[].{field}");
        }
        for field in ["description", "threads", "sockets", "cpu", "memory_gb"] {
            assert!(
                test["machine"].get(field).is_some(),
                "missing machine.{field}"
            );
        }
        let row = &test["rows"][0];
        assert!(
            row["values"][0].get("mean").is_some() && row["values"][0].get("stddev_pct").is_some()
        );
        assert!(row["values"][0].get("change").is_some());
        assert!(row.get("change_unit").is_some());
    }
    let vm = reports
        .iter()
        .find(|r| r["tests"][0]["testcase"] == "vm-scalability")
        .unwrap_or_else(|| panic!("no vm-scalability report"));
    assert_eq!(vm["date"], "2023-01-19T14:00:52Z");
    assert_eq!(vm["kind"], "improvement");
    assert_eq!(vm["headline"]["metric"], "vm-scalability.throughput");
    assert_eq!(vm["headline"]["change_pct"], 34.5);
    assert_eq!(
        vm["source"]["path"],
        "examples/reports/002_5fa9b7d75deb5046.txt"
    );
    assert_eq!(vm["source"]["index"], 0);
    let throughput = vm["tests"][0]["rows"]
        .as_array()
        .and_then(|rows| {
            rows.iter()
                .find(|r| r["metric"] == "vm-scalability.throughput")
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(throughput["values"][0]["mean"], 2.352e8);
    assert_eq!(throughput["values"][1]["mean"], 3.164e8);
    assert_eq!(throughput["values"][1]["change"], 34.5);
    assert_eq!(throughput["change_unit"], "percent");
}

#[test]
fn parse_reads_stdin_and_gzipped_mbox() {
    let seed = std::fs::read("examples/reports/004_185fc374d8b9a81a.txt").unwrap_or_default();
    let out = lkplake(&["parse", "-"], Some(&seed));
    assert!(out.status.success());
    let reports = json_lines(&out);
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0]["source"]["path"], "-");

    let out = lkplake(
        &["parse", "parse/tests/fixtures/cgroups-lkp-cc.mbox.gz"],
        None,
    );
    assert!(out.status.success());
    let lines = json_lines(&out);
    let mentions = lines
        .iter()
        .filter(|l| l.get("mention_key").is_some())
        .count();
    let links_of = |kind: &str| {
        lines
            .iter()
            .filter(|l| l.get("link_key").is_some() && l["kind"] == kind)
            .count()
    };
    let links = links_of("closes") + links_of("fixes") + links_of("applied") + links_of("revert");
    assert_eq!(
        (lines.len() - mentions - links, mentions),
        (45, 55),
        "reports, then mentions"
    );
    // closes: 73 (mail, Message-ID) pairs, as infra/bench/count_links.py counts them
    // (parse/tests/fixtures/links/cgroups-closes.tsv); fixes: 46 hashes in 45 mails' own
    // `Fixes:` lines (Python's `email` and `^[ \t]*fixes:[ \t]*(?:commit[ \t]+)?([0-9a-f]{7,40})`
    // with a digit, before any diff, quotes left out); applied: b4's notices 488 (two commits)
    // and 568, the patchwork bot's 839, and 1308's "applied ... as"; no revert.
    assert_eq!(
        [
            links_of("closes"),
            links_of("fixes"),
            links_of("applied"),
            links_of("revert")
        ],
        [73, 46, 5, 0]
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "2014 messages: 45 reports (7 quoted copies), 55 mentions, 124 links, 1848 not reports, 0 failed"
        ),
        "{stderr}"
    );
}

/// Decoding and parsing run on several threads; what is printed keeps the input's order and
/// is the same whatever their number.
#[test]
fn parse_on_several_threads_prints_what_one_thread_prints_in_input_order() {
    let corpus = "parse/tests/fixtures/cgroups-lkp-cc.mbox.gz";
    let one = lkplake(&["parse", "--threads", "1", corpus], None);
    let three = lkplake(&["parse", "--threads", "3", corpus], None);
    assert!(one.status.success() && three.status.success());
    assert!(one.stdout == three.stdout, "the outputs differ");
    // The corpus's reports, mentions and links in file order (the corpus test's list of report
    // mails starts at 0, 87, 98): their sources' message indexes never go down.
    let lines = json_lines(&three);
    let indexes: Vec<u64> = lines
        .iter()
        .map(|l| l["source"]["index"].as_u64().unwrap_or(u64::MAX))
        .collect();
    assert_eq!(indexes.len(), 45 + 55 + 124);
    assert!(indexes.windows(2).all(|w| w[0] <= w[1]), "{indexes:?}");
    let cited: Vec<u64> = lines
        .iter()
        .filter(|l| l.get("link_key").is_none())
        .map(|l| l["source"]["index"].as_u64().unwrap_or(u64::MAX))
        .collect();
    assert_eq!(cited.len(), 100);
    assert_eq!(&cited[..3], &[0, 87, 92]);
    let zero = lkplake(&["parse", "--threads", "0", corpus], None);
    assert_eq!(zero.status.code(), Some(2), "no threads is a usage error");
}

#[test]
fn unreadable_and_broken_inputs_fail_with_file_message_and_reason() {
    let dir = temp_dir("broken");
    let seed =
        std::fs::read_to_string("examples/reports/002_5fa9b7d75deb5046.txt").unwrap_or_default();
    let truncated = &seed[..seed.find("To reproduce:").unwrap_or(seed.len())];
    let mbox = format!(
        "From a Thu Jan  1 00:00:00 1970\nSubject: hi\n\nnot a report\n\nFrom b Thu Jan  1 00:00:00 1970\n{truncated}"
    );
    let path = dir.join("two.mbox");
    std::fs::write(&path, mbox).unwrap_or_else(|e| panic!("{e}"));
    let good = "examples/reports/003_9c167c0450c9a958.txt";
    let out = lkplake(
        &[
            "parse",
            path.to_str().unwrap_or_default(),
            good,
            "/nonexistent/report.eml",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "the good input is still parsed");
    // The seed cut before its table still says what it reports: a mention of it.
    assert_eq!(
        lines[0]["commit"], "cb67f4282bf9693658dbda934a441ddbbb1446df",
        "{lines:?}"
    );
    assert_eq!(lines[0]["metric"], "vm-scalability.throughput");
    // Seed 003's key, from what its text prints: the compared commits (`commit:` list) and the
    // main test (the axis line of its table, testcase and tbox_group apart from the rest).
    let params: std::collections::BTreeMap<String, String> = [
        ("compiler", "gcc-9"),
        ("cpufreq_governor", "performance"),
        ("kconfig", "x86_64-rhel-8.3"),
        ("mode", "process"),
        ("nr_task", "16"),
        ("rootfs", "debian-10.4-x86_64-20200603.cgz"),
        ("test", "mmap1"),
        ("ucode", "0x5003006"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let key = lkplake_schemas::key::report_key_of(
        &["edb4f1ceb1".to_owned(), "c0af5203b9".to_owned()],
        "will-it-scale",
        "lkp-csl-2sp9",
        &params,
    );
    assert_eq!(lines[1]["report_key"], key.as_str(), "{lines:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/report.eml"), "{stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn table_format_prints_one_line_per_test() {
    let out = lkplake(
        &[
            "parse",
            "--format",
            "table",
            "examples/reports/001_f80904916b16d277.txt",
        ],
        None,
    );
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[1].contains("aim9")
            && lines[1].contains("lkp-ivb-2ep1")
            && lines[1].contains("(quoted)")
    );
    assert!(lines[1].contains("aim9.disk_src.ops_per_sec +11.8%"));
}
