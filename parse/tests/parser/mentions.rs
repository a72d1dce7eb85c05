//! Replies that cite a report. Every expected value was read off the decoded corpus mails and
//! is recorded in `parse/tests/fixtures/failures-and-mentions.md`, section 2.2 (the 34 human
//! replies that quote a performance report's opening sentence or rows).

use crate::failures::corpus_message;
use lkplake_parse::Parsed;
use lkplake_schemas::{Kind, Mention};

fn mention(index: u64) -> (Mention, usize) {
    match corpus_message(index) {
        Parsed::Mention {
            mention, reports, ..
        } => (*mention, reports.len()),
        other => panic!("message {index}: expected a mention, got {other:?}"),
    }
}

/// (corpus index, Message-ID, sender, cited commit as quoted, headline metric and change as
/// quoted, quoted rows).
type Cited = (
    u64,
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    Option<f64>,
    usize,
);

#[rustfmt::skip]
const CITED: [Cited; 34] = [
        (92, "<agxxuHOfNLX-32kI@linux.dev>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("01b9da291c"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 3),
        (107, "<agoYp1zW9afZ6uQz@linux.dev>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 3),
        (115, "<agdS5rIhcjIBVSog@linux.dev>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 0),
        (118, "<19693be6-7132-446e-b3fc-b7e9f56e5949@linux.dev>", "Qi Zheng <qi.zheng@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 0),
        (119, "<93b7c3f206f158e7387cbb5f0bf5845b59b93053@linux.dev>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 0),
        (122, "<46e9f5cf-34cb-466d-a53a-5778768af4d9@linux.dev>", "Qi Zheng <qi.zheng@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 0),
        (124, "<agSJ4ulNDZ17ah8H@linux.dev>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 0),
        (125, "<agSAT4ldp3dzKWPl@linux.dev>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 0),
        (128, "<0e1b8994-944d-4dda-8966-3cd43661796d@linux.dev>", "Qi Zheng <qi.zheng@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 0),
        (130, "<agNO8G8tPnPuVrGq@linux.dev>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("01b9da291c4969354807b52956f4aae1f41b4924"), Some("stress-ng.switch.ops_per_sec"), Some(67.7), 0),
        (505, "<CAADnVQ+NKZtNxS+jBW=tMnmca18S2jfuGCR+ap1bPHYyhxy6HQ@mail.gmail.com>", "Alexei Starovoitov <alexei.starovoitov@gmail.com>", Some("01d37228d331047a0bbbd1026cec2ccabef6d88d"), Some("netperf.Throughput_Mbps"), Some(37.9), 2),
        (506, "<7c41d8d7-7d5a-4c3d-97b3-23642e376ff9@suse.cz>", "Vlastimil Babka <vbabka@suse.cz>", Some("01d37228d331047a0bbbd1026cec2ccabef6d88d"), Some("netperf.Throughput_Mbps"), Some(37.9), 2),
        (689, "<ZqF89Z4uIwnSbpAe@google.com>", "Roman Gushchin <roman.gushchin@linux.dev>", Some("98c9daf5ae6be008f78c07b744bcff7bcc6e98da"), Some("aim7.jobs-per-min"), Some(-29.4), 0),
        (691, "<vlp7oxwkvzddnslivtpaiaiuexo5r7smziuvtrjdmckszbsbgs@zib46axtkiqy>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("98c9daf5ae6be008f78c07b744bcff7bcc6e98da"), Some("aim7.jobs-per-min"), Some(-29.4), 0),
        (693, "<ro4jb3noagpeb4dnacexutfqwbdfygryrpfbqa3zbnj5a32nya@jymadbhn7r3y>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("98c9daf5ae6be008f78c07b744bcff7bcc6e98da"), Some("aim7.jobs-per-min"), Some(-29.4), 0),
        (694, "<Zp58t2DNWwlYQaHe@google.com>", "Roman Gushchin <roman.gushchin@linux.dev>", Some("98c9daf5ae6be008f78c07b744bcff7bcc6e98da"), Some("aim7.jobs-per-min"), Some(-29.4), 0),
        (695, "<x2vfqt3frbghlxonagfx52suetu7fod7taktrc6fnt2jwmzg6l@kbdwghkf3htr>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("98c9daf5ae6be008f78c07b744bcff7bcc6e98da"), Some("aim7.jobs-per-min"), Some(-29.4), 0),
        (696, "<Zpqe6NSVBQGiS86m@google.com>", "Roman Gushchin <roman.gushchin@linux.dev>", Some("98c9daf5ae6be008f78c07b744bcff7bcc6e98da"), Some("aim7.jobs-per-min"), Some(-29.4), 0),
        (698, "<ZpWgP-h5X7GKj1ay@google.com>", "Roman Gushchin <roman.gushchin@linux.dev>", Some("98c9daf5ae6be008f78c07b744bcff7bcc6e98da"), Some("aim7.jobs-per-min"), Some(-29.4), 0),
        (704, "<ZpF-A9rl8TiuZJPZ@google.com>", "Roman Gushchin <roman.gushchin@linux.dev>", Some("98c9daf5ae6be008f78c07b744bcff7bcc6e98da"), Some("aim7.jobs-per-min"), Some(-29.4), 0),
        (754, "<20240520034933.wei3dffiuhq7uxhv@linux.dev>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("70a64b7919cbd6c12306051ff2825839a9d65605"), Some("will-it-scale.per_process_ops"), Some(-11.9), 2),
        (756, "<jg2rpsollyfck5drndajpxtqbjtigtuxql4j5s66egygfrcjqa@okdilkpx5v5e>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("70a64b7919cbd6c12306051ff2825839a9d65605"), Some("will-it-scale.per_process_ops"), Some(-11.9), 1),
        (758, "<pdfcrrgqz6vy6xarsw6gswtoa32wjd2gpcagmreh7ksuy66i63@dowfkmloe37q>", "Shakeel Butt <shakeel.butt@linux.dev>", Some("70a64b7919cbd6c12306051ff2825839a9d65605"), Some("will-it-scale.per_process_ops"), Some(-11.9), 0),
        (759, "<CAJD7tkbsvRpYTkrjZ8k2ArQSaU+YkF=6rqtVHdjd1ovErvUE6w@mail.gmail.com>", "Yosry Ahmed <yosryahmed@google.com>", Some("70a64b7919cbd6c12306051ff2825839a9d65605"), Some("will-it-scale.per_process_ops"), Some(-11.9), 0),
        (799, "<CAJD7tka0o+jn3UkXB+ZfZvRw1v+KysJbaGQvJdHcSmAhYC5TQA@mail.gmail.com>", "Yosry Ahmed <yosryahmed@google.com>", Some("8d59d2214c2362e7a9d185d80b613e632581af7b"), Some("vm-scalability.throughput"), Some(-36.6), 0),
        (819, "<CAJD7tkameJBrJQxRj+ibKL6-yd-i0wyoyv2cgZdh3ZepA1p7wA@mail.gmail.com>", "Yosry Ahmed <yosryahmed@google.com>", Some("c7fbfc7b4e089c4a9b292b1973a42a5761c1342f"), Some("will-it-scale.per_thread_ops"), Some(-30.2), 0),
        (821, "<CAJD7tkYnn6CxSJdo0QJ1hc6cFY_qWLuJ0=S6g_Pm=GBV+Ss-jw@mail.gmail.com>", "Yosry Ahmed <yosryahmed@google.com>", Some("c7fbfc7b4e089c4a9b292b1973a42a5761c1342f"), Some("will-it-scale.per_thread_ops"), Some(-30.2), 0),
        (869, "<CAJD7tkaBnSwarz8yHu9RL_3DtaLRfjrcZ7m0YZZgHJsJdtHaZw@mail.gmail.com>", "Yosry Ahmed <yosryahmed@google.com>", None, None, None, 2),
        (873, "<CAJD7tkYXJ3vcGvteNH98tB_C7OTo718XSxL=mFsUa7kO8vzFzA@mail.gmail.com>", "Yosry Ahmed <yosryahmed@google.com>", Some("51d74c18a9c61e7ee33bc90b522dd7f6e5b80bb5"), Some("will-it-scale.per_thread_ops"), Some(-25.8), 0),
        (874, "<CAJD7tka5UnHBz=eX1LtynAjJ+O_oredMKBBL3kFNfG7PHjuMCw@mail.gmail.com>", "Yosry Ahmed <yosryahmed@google.com>", Some("51d74c18a9c61e7ee33bc90b522dd7f6e5b80bb5"), Some("will-it-scale.per_thread_ops"), Some(-25.8), 0),
        (875, "<ZTXLeAAI1chMamkU@feng-clx>", "Feng Tang <feng.tang@intel.com>", Some("51d74c18a9c61e7ee33bc90b522dd7f6e5b80bb5"), Some("will-it-scale.per_thread_ops"), Some(-25.8), 0),
        (876, "<CAJD7tkbjZri4ayBOT9rJ0yMAi__c-1SVmRh_5oXezr7U6dvALg@mail.gmail.com>", "Yosry Ahmed <yosryahmed@google.com>", Some("51d74c18a9c61e7ee33bc90b522dd7f6e5b80bb5"), Some("will-it-scale.per_thread_ops"), Some(-25.8), 0),
        (877, "<CALvZod5hKvjm3WVSOGc5PpR9eNHFkt=BDmcrBe5CeWgFzP7jgQ@mail.gmail.com>", "Shakeel Butt <shakeelb@google.com>", Some("51d74c18a9c61e7ee33bc90b522dd7f6e5b80bb5"), Some("will-it-scale.per_thread_ops"), Some(-25.8), 0),
        (1139, "<daf56c43-feba-4075-1361-94b9a2dae15a@redhat.com>", "Waiman Long <longman@redhat.com>", Some("7aaa45f8374887d98cd479a6bdd3b4c74e6a981a"), Some("kbuild.buildtime_per_iteration"), Some(2583.0), 371),
];

#[test]
fn every_human_reply_quoting_a_report_is_a_mention_of_what_it_quotes() {
    for (index, message_id, sender, commit, metric, change, rows) in CITED {
        let (m, _) = mention(index);
        assert_eq!(m.message_id.as_deref(), Some(message_id), "{index}");
        assert_eq!(m.sender.as_deref(), Some(sender), "{index} sender");
        assert_eq!(m.commit.as_deref(), commit, "{index} commit");
        assert_eq!(m.metric.as_deref(), metric, "{index} metric");
        assert_eq!(m.change_pct, change, "{index} change");
        assert_eq!(m.rows.len(), rows, "{index} rows");
        let kind = metric.map(|_| Kind::Regression);
        assert_eq!(m.kind, kind, "{index} kind");
        assert!(!m.mention_key.is_empty(), "{index} key");
    }
}

#[test]
fn quoted_rows_are_kept_as_printed_without_quote_marks() {
    assert_eq!(
        mention(506).0.rows,
        vec![
            "0.10 ± 4% +11.3 11.43 ± 3% perf-profile.self.cycles-pp.try_charge_memcg",
            "0.00 +13.7 13.72 ± 2% perf-profile.self.cycles-pp.page_counter_try_charge",
        ]
    );
    assert_eq!(
        mention(869).0.rows,
        vec![
            "36509 -25.8% 27079 -25.2% 27305 -25.0% 27383 will-it-scale.per_thread_ops",
            "76580 -30.0% 53575 -28.9% 54415 -26.7% 56152 will-it-scale.per_thread_ops",
        ]
    );
    assert_eq!(
        mention(756).0.rows,
        vec!["91713 -11.9% 80789 -13.2% 79612 will-it-scale.per_process_ops"]
    );
}

#[test]
fn a_mention_keeps_its_thread_the_quoted_suite_and_box() {
    let (m, quoted_reports) = mention(506);
    assert_eq!(
        m.in_reply_to.as_deref(),
        Some("<202503101254.cfd454df-lkp@intel.com>")
    );
    assert!(
        m.references
            .iter()
            .any(|r| r == "<202503101254.cfd454df-lkp@intel.com>")
    );
    assert_eq!(m.testcase.as_deref(), Some("netperf"));
    assert_eq!(quoted_reports, 0, "two rows are no report");
    let (m, quoted_reports) = mention(1139);
    assert_eq!(m.testcase.as_deref(), Some("kbuild"));
    assert_eq!(m.machine.as_deref(), Some("lkp-csl-2sp9"));
    assert_eq!(
        quoted_reports, 1,
        "the whole quoted report is kept as a quoted copy"
    );
}

#[test]
fn a_reply_quoting_a_functional_report_cites_the_failure_it_names() {
    let (m, _) = mention(310);
    assert_eq!(m.kind, Some(Kind::Failure));
    assert_eq!(
        m.metric.as_deref(),
        Some(
            "WARNING:possible_recursive_locking_detected_migration_is_trying_to_acquire_lock:at:set_cpus_allowed_force_but_task_is_already_holding_lock:at:cpu_stopper_thread"
        )
    );
    assert_eq!(
        m.commit.as_deref(),
        Some("b079d93796528053cde322f2ca838c2d21c297e7")
    );
    assert_eq!(m.change_pct, None);
}

#[test]
fn robot_reports_and_follow_ups_with_tables_of_their_own_are_not_mentions() {
    for index in [131, 98, 109, 692, 753, 755] {
        assert!(
            matches!(corpus_message(index), Parsed::Reports(_)),
            "{index} is a report"
        );
    }
}
