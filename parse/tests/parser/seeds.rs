//! The five seed reports, each in a different state of damage. Every expected value below
//! was read off the report text by hand.

use crate::fixtures::seed;
use lkplake_schemas::{ChangeUnit, Kind, Report, Row, Value};

fn row<'a>(report: &'a Report, metric: &str) -> &'a Row {
    report.tests[0]
        .rows
        .iter()
        .find(|r| r.metric == metric)
        .unwrap_or_else(|| panic!("no row {metric}"))
}

fn v(mean: f64, stddev_pct: Option<f64>, change: Option<f64>) -> Value {
    Value {
        mean,
        stddev_pct,
        change,
    }
}

fn params(report: &Report) -> Vec<(String, String)> {
    report.tests[0]
        .params
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn seed_000_raw_mail_with_latin1_question_marks() {
    let r = seed("000_304c359333adb001.txt");
    assert_eq!(
        r.message_id.as_deref(),
        Some("<202309122106.b440c4c6-oliver.sang@intel.com>")
    );
    assert_eq!(
        r.date.map(|d| d.to_rfc3339()).as_deref(),
        Some("2023-09-12T13:52:39+00:00")
    );
    assert_eq!(
        r.subject.as_deref(),
        Some(
            "[linus:master] [kernel/fork] 14ef95be6f: phoronix-test-suite.osbench.LaunchPrograms.us_per_event -8.2% improvement"
        )
    );
    assert_eq!(r.kind, Some(Kind::Improvement));
    let headline = r
        .headline
        .as_ref()
        .map(|h| (h.metric.as_str(), h.change_pct));
    assert_eq!(
        headline,
        Some((
            "phoronix-test-suite.osbench.LaunchPrograms.us_per_event",
            -8.2
        ))
    );
    assert_eq!(r.commit.id, "14ef95be6f5558fb9e43aaf06ef9a1d6e0cae6c8");
    assert_eq!(
        r.commit.title.as_deref(),
        Some("kernel/fork: group allocation/free of per-cpu counters for mm struct")
    );
    assert_eq!(r.base_commit.id, "c439d5e8a0");
    assert_eq!(
        r.base_commit.title.as_deref(),
        Some("pcpcntr: add group allocation/free")
    );
    assert_eq!(r.branch.as_deref(), Some("linus:master"));
    assert!(!r.quoted);
    assert_eq!(r.tests.len(), 1);
    let t = &r.tests[0];
    assert_eq!(
        (t.testcase.as_str(), t.tbox_group.as_str()),
        ("phoronix-test-suite", "lkp-csl-2sp7")
    );
    assert_eq!(
        params(&r),
        pairs(&[
            ("compiler", "gcc-12"),
            ("cpufreq_governor", "performance"),
            ("kconfig", "x86_64-rhel-8.3"),
            ("option_a", "Launch Programs"),
            ("rootfs", "debian-x86_64-phoronix"),
            ("test", "osbench-1.0.2"),
        ])
    );
    assert_eq!(t.machine.threads, Some(96));
    assert_eq!(t.machine.sockets, Some(2));
    assert_eq!(
        t.machine.cpu.as_deref(),
        Some("Intel(R) Xeon(R) Gold 6252 CPU @ 2.10GHz (Cascade Lake)")
    );
    assert_eq!(t.machine.memory_gb, Some(512));
    assert_eq!(t.commits, vec!["c439d5e8a0", "14ef95be6f"]);
    assert_eq!(t.rows.len(), 66);
    assert_eq!(t.rows[0].metric, "numa-meminfo.node1.Active(anon)");
    assert_eq!(
        t.rows[0].values,
        vec![
            v(5222.0, Some(19.0), None),
            v(4060.0, Some(16.0), Some(-22.2))
        ]
    );
    let c1e = row(&r, "turbostat.C1E%");
    assert_eq!(c1e.change_unit, ChangeUnit::Absolute);
    assert_eq!(
        c1e.values,
        vec![v(1.69, None, None), v(1.80, Some(2.0), Some(0.1))]
    );
    let wake = row(&r, "perf-profile.children.cycles-pp.wake_up_new_task");
    assert_eq!(
        wake.values,
        vec![v(0.49, Some(46.0), None), v(0.14, Some(111.0), Some(-0.4))]
    );
    let last = &t.rows[65];
    assert_eq!(last.metric, "perf-stat.total.instructions");
    assert_eq!(
        last.values,
        vec![v(3.723e11, None, None), v(3.878e11, None, Some(4.2))]
    );
    assert!(t.failures.is_empty());
}

#[test]
fn seed_001_quoted_reply_with_collapsed_whitespace() {
    let r = seed("001_f80904916b16d277.txt");
    assert!(r.quoted);
    // From the attribution line "On Mon, Feb 19, 2024 at 01:44:05PM +0800, kernel test robot wrote:".
    assert_eq!(
        r.date.map(|d| d.to_rfc3339()).as_deref(),
        Some("2024-02-19T05:44:05+00:00")
    );
    // The only id in the text is obfuscated (`oliver.sang@xxxxxxxxx`): better none than a wrong one.
    assert_eq!(r.message_id, None);
    assert_eq!(r.kind, Some(Kind::Improvement));
    let headline = r
        .headline
        .as_ref()
        .map(|h| (h.metric.as_str(), h.change_pct));
    assert_eq!(headline, Some(("aim9.disk_src.ops_per_sec", 11.8)));
    assert_eq!(r.commit.id, "a616bc666748063733c62e15ea417a90772a40e0");
    assert_eq!(
        r.commit.title.as_deref(),
        Some("libfs: Convert simple directory offsets to use a Maple Tree")
    );
    assert_eq!(r.base_commit.id, "f3f24869a1");
    assert_eq!(
        r.base_commit.title.as_deref(),
        Some("test_maple_tree: testing the cyclic allocation")
    );
    assert_eq!(r.branch.as_deref(), Some("cel/linux:simple-offset-maple"));
    let t = &r.tests[0];
    assert_eq!(
        (t.testcase.as_str(), t.tbox_group.as_str()),
        ("aim9", "lkp-ivb-2ep1")
    );
    assert_eq!(
        params(&r),
        pairs(&[
            ("compiler", "gcc-12"),
            ("cpufreq_governor", "performance"),
            ("kconfig", "x86_64-rhel-8.3"),
            ("rootfs", "debian-11.1-x86_64-20220510.cgz"),
            ("test", "disk_src"),
            ("testtime", "300s"),
        ])
    );
    assert_eq!(
        (t.machine.threads, t.machine.sockets, t.machine.memory_gb),
        (Some(48), Some(2), Some(112))
    );
    assert_eq!(
        t.machine.cpu.as_deref(),
        Some("Intel(R) Xeon(R) CPU E5-2697 v2 @ 2.70GHz (Ivy Bridge-EP)")
    );
    assert_eq!(t.rows.len(), 119);
    let soft = &t.rows[0];
    assert_eq!(soft.metric, "mpstat.cpu.all.soft%");
    assert_eq!(soft.change_unit, ChangeUnit::Absolute);
    assert_eq!(
        soft.values,
        vec![v(0.34, Some(4.0), None), v(0.20, Some(4.0), Some(-0.1))]
    );
    let ksoftirqd = row(&r, "perf-profile.children.cycles-pp.run_ksoftirqd");
    assert_eq!(
        ksoftirqd.values,
        vec![v(0.01, Some(264.0), None), v(1.06, Some(40.0), Some(1.0))]
    );
    let ctx = row(&r, "aim9.time.involuntary_context_switches");
    assert_eq!(
        ctx.values,
        vec![
            v(1309.0, Some(15.0), None),
            v(35915.0, Some(23.0), Some(2643.5))
        ]
    );
    let last = &t.rows[118];
    assert_eq!(last.metric, "perf-profile.self.cycles-pp.mas_wr_node_store");
    assert_eq!(
        last.values,
        vec![v(0.0, None, None), v(0.34, Some(20.0), Some(0.3))]
    );
}

#[test]
fn seed_002_openwall_web_archive_page() {
    let r = seed("002_5fa9b7d75deb5046.txt");
    assert_eq!(
        r.message_id.as_deref(),
        Some("<202301192158.78fda163-oliver.sang@intel.com>")
    );
    assert_eq!(
        r.date.map(|d| d.to_rfc3339()).as_deref(),
        Some("2023-01-19T14:00:52+00:00")
    );
    assert_eq!(
        r.subject.as_deref(),
        Some(
            "[linus:master] [mm,thp,rmap] cb67f4282b: vm-scalability.throughput 34.5% improvement"
        )
    );
    assert!(!r.quoted);
    assert_eq!(r.kind, Some(Kind::Improvement));
    let headline = r
        .headline
        .as_ref()
        .map(|h| (h.metric.as_str(), h.change_pct));
    assert_eq!(headline, Some(("vm-scalability.throughput", 34.5)));
    assert_eq!(r.commit.id, "cb67f4282bf9693658dbda934a441ddbbb1446df");
    assert_eq!(
        r.commit.title.as_deref(),
        Some("mm,thp,rmap: simplify compound page mapcount handling")
    );
    assert_eq!(r.base_commit.id, "dad6a5eb55");
    assert_eq!(
        r.base_commit.title.as_deref(),
        Some("mm,hugetlb: use folio fields in second tail page")
    );
    assert_eq!(r.branch.as_deref(), Some("linus:master"));
    let t = &r.tests[0];
    assert_eq!(
        (t.testcase.as_str(), t.tbox_group.as_str()),
        ("vm-scalability", "lkp-csl-2sp3")
    );
    assert_eq!(
        params(&r),
        pairs(&[
            ("compiler", "gcc-11"),
            ("cpufreq_governor", "performance"),
            ("kconfig", "x86_64-rhel-8.3"),
            ("rootfs", "debian-11.1-x86_64-20220510.cgz"),
            ("runtime", "300s"),
            ("size", "128G"),
            ("test", "truncate-seq"),
        ])
    );
    assert_eq!(
        t.machine.description.as_deref(),
        Some(
            "96 threads 2 sockets Intel(R) Xeon(R) Platinum 8260L CPU @ 2.40GHz (Cascade Lake) with 128G memory"
        )
    );
    assert_eq!(t.rows.len(), 18);
    let throughput = row(&r, "vm-scalability.throughput");
    assert_eq!(
        throughput.values,
        vec![v(2.352e8, None, None), v(3.164e8, None, Some(34.5))]
    );
    let filp = row(&r, "perf-profile.children.cycles-pp.do_filp_open");
    assert_eq!(
        filp.values,
        vec![v(2.40, Some(107.0), None), v(7.74, Some(47.0), Some(5.3))]
    );
    assert_eq!(t.rows[17].metric, "perf-stat.ps.node-loads");
    assert_eq!(
        t.rows[17].values,
        vec![
            v(598933.0, Some(3.0), None),
            v(420034.0, Some(3.0), Some(-29.9))
        ]
    );
}

#[test]
fn seed_003_whole_message_on_one_line_with_ascii_plot() {
    let r = seed("003_9c167c0450c9a958.txt");
    assert_eq!(
        (r.message_id.as_deref(), r.date, r.subject.as_deref()),
        (None, None, None)
    );
    assert_eq!(r.kind, Some(Kind::Improvement));
    let headline = r
        .headline
        .as_ref()
        .map(|h| (h.metric.as_str(), h.change_pct));
    assert_eq!(headline, Some(("will-it-scale.per_process_ops", 7.4)));
    assert_eq!(r.commit.id, "c0af5203b9dbf4cd8b424298b1cb809f4535802a");
    assert_eq!(
        r.commit.title.as_deref(),
        Some("[PATCH 2/2] mm: Change p4d_page_vaddr to return pud_t *")
    );
    assert_eq!(r.base_commit.id, "edb4f1ceb1");
    assert_eq!(
        r.base_commit.title.as_deref(),
        Some("mm: Change pud_page_vaddr to return pmd_t *")
    );
    assert_eq!(
        r.branch.as_deref(),
        Some("Aneesh-Kumar-K-V/mm-Change-pud_page_vaddr-to-return-pmd_t/20210617-045835")
    );
    let t = &r.tests[0];
    assert_eq!(
        (t.testcase.as_str(), t.tbox_group.as_str()),
        ("will-it-scale", "lkp-csl-2sp9")
    );
    assert_eq!(
        params(&r),
        pairs(&[
            ("compiler", "gcc-9"),
            ("cpufreq_governor", "performance"),
            ("kconfig", "x86_64-rhel-8.3"),
            ("mode", "process"),
            ("nr_task", "16"),
            ("rootfs", "debian-10.4-x86_64-20200603.cgz"),
            ("test", "mmap1"),
            ("ucode", "0x5003006"),
        ])
    );
    assert_eq!(
        (
            t.machine.threads,
            t.machine.sockets,
            t.machine.memory_gb,
            t.machine.cpu.as_deref()
        ),
        (
            Some(88),
            Some(2),
            Some(128),
            Some("Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz")
        )
    );
    assert_eq!(t.rows.len(), 49);
    assert_eq!(t.rows[0].metric, "will-it-scale.16.processes");
    assert_eq!(
        t.rows[0].values,
        vec![v(10634491.0, None, None), v(11422635.0, None, Some(7.4))]
    );
    let last = &t.rows[48];
    assert_eq!(last.metric, "perf-profile.self.cycles-pp.tlb_flush_mmu");
    assert_eq!(
        last.values,
        vec![v(0.10, Some(6.0), None), v(0.23, Some(8.0), Some(0.1))]
    );
    // The plot after the table ("will-it-scale.per_process_ops 720000 +---") is not a row.
    assert_eq!(
        t.rows
            .iter()
            .filter(|r| r.metric == "will-it-scale.per_process_ops")
            .count(),
        1
    );
}

#[test]
fn seed_004_archive_page_without_headers() {
    let r = seed("004_185fc374d8b9a81a.txt");
    // No headers: the id comes from the archive URL and the date from the id's stamp (UTC+8).
    assert_eq!(
        r.message_id.as_deref(),
        Some("<202503312148.c74b0351-lkp@intel.com>")
    );
    assert_eq!(
        r.date.map(|d| d.to_rfc3339()).as_deref(),
        Some("2025-03-31T13:48:00+00:00")
    );
    assert_eq!(r.kind, Some(Kind::Improvement));
    let headline = r
        .headline
        .as_ref()
        .map(|h| (h.metric.as_str(), h.change_pct));
    assert_eq!(
        headline,
        Some(("lmbench3.TCP.socket.bandwidth.10MB.MB/sec", 32.2))
    );
    assert_eq!(r.commit.id, "6570c41610d1d2d3b143c253010b38ce9cbc0012");
    assert_eq!(r.base_commit.id, "7514d3cb91");
    assert_eq!(r.base_commit.title.as_deref(), Some("foo"));
    assert_eq!(
        r.branch.as_deref(),
        Some(
            "Nikhil-Dhama/mm-pcp-scale-batch-to-reduce-number-of-high-order-pcp-flushes-on-deallocation/20250326-012247"
        )
    );
    let t = &r.tests[0];
    assert_eq!(
        (t.testcase.as_str(), t.tbox_group.as_str()),
        ("lmbench3", "lkp-spr-2sp4")
    );
    assert_eq!(
        params(&r),
        pairs(&[
            ("compiler", "gcc-12"),
            ("cpufreq_governor", "performance"),
            ("kconfig", "x86_64-rhel-9.4"),
            ("mode", "development"),
            ("nr_threads", "100%"),
            ("rootfs", "debian-12-x86_64-20240206.cgz"),
            ("test", "TCP"),
            ("test_memory_size", "50%"),
        ])
    );
    assert_eq!(
        (
            t.machine.threads,
            t.machine.sockets,
            t.machine.memory_gb,
            t.machine.cpu.as_deref()
        ),
        (
            Some(224),
            Some(2),
            Some(512),
            Some("Intel(R) Xeon(R) Platinum 8480CTDX (Sapphire Rapids)")
        )
    );
    assert_eq!(t.rows.len(), 28);
    let load = row(&r, "sched_debug.cfs_rq:/.load.min");
    assert_eq!(
        load.values,
        vec![
            v(2343.0, Some(10.0), None),
            v(1938.0, Some(17.0), Some(-17.3))
        ]
    );
    let pid = row(&r, "sched_debug.cpu.curr->pid.min");
    assert_eq!(
        pid.values,
        vec![
            v(13803.0, Some(10.0), None),
            v(10740.0, Some(14.0), Some(-22.2))
        ]
    );
    let last = &t.rows[27];
    assert_eq!(last.metric, "perf-stat.ps.cpu-cycles");
    assert_eq!(
        last.values,
        vec![
            v(5.691e11, None, None),
            v(3.702e11, Some(70.0), Some(-35.0))
        ]
    );
}

#[test]
fn every_seed_has_a_distinct_report_key() {
    let names = [
        "000_304c359333adb001.txt",
        "001_f80904916b16d277.txt",
        "002_5fa9b7d75deb5046.txt",
        "003_9c167c0450c9a958.txt",
        "004_185fc374d8b9a81a.txt",
    ];
    let mut keys: Vec<String> = names.iter().map(|n| seed(n).report_key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 5);
}
