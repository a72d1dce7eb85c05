//! public-inbox archives as sources: real v2 inboxes built by Debian's public-inbox (its
//! `public-inbox-init -V2` and `public-inbox-mda`, through `infra/public-inbox.sh`), lore-style
//! single repositories built with plain git, `ingest --follow` against Tansu, and dead-letter
//! replay.

use crate::common::{
    Pipeline, broker, json_lines, lkplake, scalar_i64, sigterm, temp_dir, topic_messages,
    wait_for_messages,
};
use crate::pipeline::{assert_lake_matches, expected};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CORPUS: &str = "parse/tests/fixtures/cgroups-lkp-cc.mbox.gz";
/// The 39 corpus mails that carry a comparison table or the robot's "Details are as below"
/// (every report of the corpus: 38, 6 of them quoted copies) and 20 others, in corpus order.
const REPORT_MAILS: &str = "tests/fixtures/cgroups-report-mails.mbox.gz";

fn public_inbox(args: &[&str]) {
    let out = Command::new("infra/public-inbox.sh")
        .args(args)
        .current_dir(crate::common::root())
        .output()
        .unwrap_or_else(|e| panic!("infra/public-inbox.sh: {e}"));
    assert!(
        out.status.success(),
        "infra/public-inbox.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn git(git_dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("git: {e}"));
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `lkplake parse` as JSON: each report without its source, by report key, sorted, so two
/// readings of the same mails compare equal whatever their order.
fn reports_by_key(path: &str) -> (BTreeMap<String, Vec<String>>, Vec<serde_json::Value>) {
    let out = lkplake(&["parse", path], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Mentions (replies citing a report) are printed too; these are the reports.
    let reports: Vec<serde_json::Value> = json_lines(&out)
        .into_iter()
        .filter(|r| r.get("report_key").is_some())
        .collect();
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &reports {
        let mut r = r.clone();
        let key = r["report_key"].as_str().unwrap_or_default().to_owned();
        r.as_object_mut().map(|o| o.remove("source"));
        by_key.entry(key).or_default().push(r.to_string());
    }
    for copies in by_key.values_mut() {
        copies.sort();
    }
    (by_key, reports)
}

/// Each report's source names a commit of its epoch whose `m` is the mail the report is from.
fn assert_sources_name_their_mail(
    reports: &[serde_json::Value],
    git_dir_of: impl Fn(u64) -> std::path::PathBuf,
) {
    for r in reports {
        let source = &r["source"];
        let commit = source["commit"]
            .as_str()
            .unwrap_or_else(|| panic!("no commit in {source}"));
        assert_eq!(commit.len(), 40, "{source}");
        let epoch = source["epoch"]
            .as_u64()
            .unwrap_or_else(|| panic!("no epoch in {source}"));
        let mail = git(&git_dir_of(epoch), &["show", &format!("{commit}:m")]);
        let message_id = r["message_id"].as_str().unwrap_or_default();
        assert!(
            mail.contains(message_id.trim_matches(|c| c == '<' || c == '>')),
            "{commit}:m is not the mail {message_id}"
        );
    }
}

#[test]
fn a_v2_inbox_and_a_lore_repository_yield_exactly_the_reports_of_their_mbox() {
    let dir = temp_dir("archives");
    let inbox = dir.join("cgroups");
    let lore = dir.join("cgroups.vger.kernel.org.0");
    let (inbox_arg, lore_arg) = (inbox.to_string_lossy(), lore.to_string_lossy());
    // A small epoch size: the 59 mails span several epochs, read in order.
    public_inbox(&["v2", REPORT_MAILS, &inbox_arg, "1000000"]);
    public_inbox(&["lore", CORPUS, &lore_arg]);
    assert!(
        inbox.join("git/1.git").is_dir(),
        "the inbox rolled over into a second epoch"
    );

    let (from_mbox, _) = reports_by_key(REPORT_MAILS);
    let (from_inbox, inbox_reports) = reports_by_key(&inbox_arg);
    assert_eq!(
        inbox_reports.len(),
        38,
        "38 reports, 6 of them quoted copies"
    );
    assert_eq!(from_inbox, from_mbox, "same keys, same rows");
    assert_sources_name_their_mail(&inbox_reports, |epoch| {
        inbox.join(format!("git/{epoch}.git"))
    });
    assert!(
        inbox_reports.iter().any(|r| r["source"]["epoch"] == 1),
        "reports come from both epochs"
    );

    let (from_corpus, _) = reports_by_key(CORPUS);
    let (from_lore, lore_reports) = reports_by_key(&lore_arg);
    assert_eq!(from_lore, from_corpus, "same keys, same rows");
    assert_sources_name_their_mail(&lore_reports, |_| lore.clone());
    assert!(lore_reports.iter().all(|r| r["source"]["epoch"] == 0));
}

#[test]
fn a_v2_inbox_through_tansu_lands_the_lake_of_its_mbox_with_each_mail_found_by_its_source() {
    let dir = temp_dir("archive-lake");
    let inbox = dir.join("cgroups");
    let inbox_arg = inbox.to_string_lossy().into_owned();
    public_inbox(&["v2", REPORT_MAILS, &inbox_arg, "1000000"]);
    let p = Pipeline::new("archive");
    let out = p.ingest(&[&inbox_arg]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "59 messages: 38 reports (6 quoted copies), 8 mentions, 0 links, 19 not reports skipped, 0 dead-lettered"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p.transform_until_idle();
    assert_lake_matches(&p, &expected(&[REPORT_MAILS]));
    // The `source` column: `inbox#epoch:commit`, from which git shows the mail.
    let batches = p.query("SELECT DISTINCT source, message_id FROM reports ORDER BY source");
    let sources = crate::common::column_strings(&batches, 0);
    let ids = crate::common::column_strings(&batches, 1);
    assert_eq!(
        sources.len(),
        expected(&[REPORT_MAILS]).reports,
        "each report kept in the lake names its own mail: {sources:?}"
    );
    for (source, id) in sources.iter().zip(&ids) {
        let (inbox_part, rest) = source
            .rsplit_once('#')
            .unwrap_or_else(|| panic!("{source}"));
        assert_eq!(inbox_part, inbox_arg);
        let (epoch, commit) = rest.split_once(':').unwrap_or_else(|| panic!("{source}"));
        let mail = git(
            &inbox.join(format!("git/{epoch}.git")),
            &["show", &format!("{commit}:m")],
        );
        assert!(
            mail.contains(id.trim_matches(|c| c == '<' || c == '>')),
            "{source}"
        );
    }
}

/// A running `lkplake ingest --follow`, its stderr collected line by line.
struct Follower {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Follower {
    fn start(p: &Pipeline, paths: &[&str], extra: &[&str]) -> Self {
        let mut args = vec!["ingest", "--partitions", "3", "--follow", "--poll", "1s"];
        args.extend_from_slice(extra);
        args.extend_from_slice(paths);
        Self::spawn(p.cmd(&args))
    }

    fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("follower: {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stderr line containing `text` (a bound on waiting, not on speed).
    fn wait_for(&mut self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        if let Some(line) = self.seen.iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        while Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                self.seen.push(line.clone());
                if line.contains(text) {
                    return line;
                }
            }
        }
        panic!("no line with {text:?} in {:#?}", self.seen);
    }

    fn sigterm(mut self) -> (std::process::ExitStatus, Vec<String>) {
        sigterm(self.child.id());
        let status = self.child.wait().unwrap_or_else(|e| panic!("{e}"));
        self.seen.extend(self.lines.try_iter());
        (status, self.seen)
    }

    fn kill_9(mut self) {
        self.child.kill().unwrap_or_else(|e| panic!("{e}"));
        let _ = self.child.wait();
    }
}

/// Transforms until the lake holds `reports` distinct reports (the follower may still be
/// producing), within a bound.
fn transform_until(p: &Pipeline, reports: i64) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        p.transform_until_idle();
        let now = scalar_i64(&p.query("SELECT count(DISTINCT report_key) FROM reports"));
        if now == reports {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{now} of {reports} reports in the lake"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The mails of an mbox.gz split in two mbox files at message `at`.
fn split_mbox(gz: &str, at: usize, dir: &Path) -> (String, String) {
    let mut data = Vec::new();
    gunzip(gz, &mut data);
    let mut starts = vec![0];
    starts.extend(
        data.windows(6)
            .enumerate()
            .filter(|(_, w)| *w == b"\nFrom ")
            .map(|(i, _)| i + 1),
    );
    let cut = starts[at];
    let (a, b) = (dir.join("first.mbox"), dir.join("second.mbox"));
    std::fs::write(&a, &data[..cut]).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&b, &data[cut..]).unwrap_or_else(|e| panic!("{e}"));
    (
        a.to_string_lossy().into_owned(),
        b.to_string_lossy().into_owned(),
    )
}

fn gunzip(gz: &str, out: &mut Vec<u8>) {
    let gunzip = Command::new("gzip")
        .args(["-dc", gz])
        .current_dir(crate::common::root())
        .output()
        .unwrap_or_else(|e| panic!("gzip: {e}"));
    assert!(gunzip.status.success(), "gzip -dc {gz}");
    *out = gunzip.stdout;
}

#[test]
fn a_follower_delivers_new_mail_once_across_a_kill_9_a_restart_and_a_purge() {
    let dir = temp_dir("follow");
    let inbox = dir.join("cgroups");
    let inbox_arg = inbox.to_string_lossy().into_owned();
    // The corpus is newest first: its second half (older mail) becomes the inbox, the first
    // half arrives while the follower runs.
    let (newer, older) = split_mbox(REPORT_MAILS, 30, &dir);
    public_inbox(&["v2", &older, &inbox_arg, "1000000"]);
    let p = Pipeline::new("follow");
    let e = expected(&[REPORT_MAILS]);

    let mut first = Follower::start(&p, &[&inbox_arg], &[]);
    first.wait_for(" messages: ");
    let read_first = topic_messages(&p.brokers, &p.topic);
    // Delivery with public-inbox-mda takes about half a second a mail: kill the follower in
    // the middle of it, once it has sent some of the new mail.
    let delivery = {
        let (inbox_arg, newer) = (inbox_arg.clone(), newer.clone());
        std::thread::spawn(move || public_inbox(&["deliver", &inbox_arg, &newer]))
    };
    wait_for_messages(&p.brokers, &p.topic, read_first, Duration::from_secs(120));
    assert!(
        !delivery.is_finished(),
        "delivery ended before the follower was killed"
    );
    first.kill_9();
    let mut second = Follower::start(&p, &[&inbox_arg], &[]);
    delivery
        .join()
        .unwrap_or_else(|_| panic!("delivery failed"));
    assert!(
        inbox.join("git/1.git").is_dir(),
        "delivery went on into a new epoch"
    );
    transform_until(&p, e.reports as i64);
    // Exactly once: every report, test and row once, nothing doubled by the re-sends.
    assert_lake_matches(&p, &e);
    second.wait_for("following");
    let (status, _) = second.sigterm();
    assert!(
        status.success(),
        "a follower stopped by SIGTERM exits 0: {status}"
    );

    // Restarted with nothing new, it reads nothing: every source is at its checkpoint.
    let mut idle = Follower::start(&p, &[&inbox_arg], &[]);
    idle.wait_for("following");
    std::thread::sleep(Duration::from_secs(3));
    let (status, lines) = idle.sigterm();
    assert!(status.success());
    assert!(
        !lines.iter().any(|l| l.contains(" messages: ")),
        "nothing was read again: {lines:#?}"
    );

    // A purge rewrites the epoch's history: it is read again from its start, and the lake
    // still holds everything exactly once.
    let report = p.query("SELECT message_id FROM reports ORDER BY message_id LIMIT 1");
    let message_id = crate::common::column_strings(&report, 0)[0].clone();
    public_inbox(&["purge", &inbox_arg, &message_id]);
    let mut after_purge = Follower::start(&p, &[&inbox_arg], &[]);
    after_purge.wait_for("history was rewritten");
    after_purge.wait_for(" messages: ");
    let (status, _) = after_purge.sigterm();
    assert!(status.success());
    p.transform_until_idle();
    assert_lake_matches(&p, &e);
}

#[test]
fn a_follower_with_fetch_picks_up_what_its_remote_gained() {
    let dir = temp_dir("fetch");
    // The remote: a v2 inbox with one (large) epoch, mirrored the way lore's epochs are cloned.
    let upstream = dir.join("upstream");
    let upstream_arg = upstream.to_string_lossy().into_owned();
    let (newer, older) = split_mbox(REPORT_MAILS, 30, &dir);
    public_inbox(&["v2", &older, &upstream_arg]);
    let clone = dir.join("cgroups.vger.kernel.org.0");
    let cloned = Command::new("git")
        .args(["clone", "--quiet", "--mirror"])
        .arg(upstream.join("git/0.git"))
        .arg(&clone)
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(cloned.success());
    let clone_arg = clone.to_string_lossy().into_owned();
    let p = Pipeline::new("fetch");
    let mut follower = Follower::start(&p, &[&clone_arg], &["--fetch"]);
    follower.wait_for(" messages: ");
    // New mail reaches the remote only; the follower's fetch brings it here.
    public_inbox(&["deliver", &upstream_arg, &newer]);
    let e = expected(&[REPORT_MAILS]);
    transform_until(&p, e.reports as i64);
    let (status, _) = follower.sigterm();
    assert!(status.success());
    assert_lake_matches(&p, &e);
    assert_eq!(
        git(&clone, &["rev-parse", "HEAD"]),
        git(&upstream.join("git/0.git"), &["rev-parse", "HEAD"]),
        "the follower fetched the remote's new head"
    );
}

#[test]
fn a_follower_killed_between_its_deliveries_and_their_checkpoint_sends_them_again_and_the_lake_keeps_one_copy()
 {
    let p = Pipeline::new("crash-checkpoint");
    let e = expected(&[REPORT_MAILS]);
    let out = p
        .cmd(&[
            "ingest",
            "--partitions",
            "3",
            "--follow",
            "--poll",
            "1s",
            REPORT_MAILS,
        ])
        .env("LKPLAKE_CRASH_AT", "ingest.before-checkpoint")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every message was acknowledged, none checkpointed: the restart reads the input again.
    let mut again = Follower::start(&p, &[REPORT_MAILS], &[]);
    again.wait_for(" messages: ");
    let (status, _) = again.sigterm();
    assert!(status.success(), "{status}");
    let out = p.transform_until_idle();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The 59 mails hold 38 reports and 8 mentions: each sent twice.
    assert_eq!(
        crate::pipeline::transform_summary(&stderr).0,
        2 * (38 + 8),
        "{stderr}"
    );
    assert_lake_matches(&p, &e);
}

#[test]
fn a_dead_letter_a_fixed_parser_reads_is_replayed_once_and_the_rest_stay() {
    use rdkafka::config::ClientConfig;
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    // Two letters as an older parser left them: seed 002, which this parser reads, and the
    // same report cut inside its table, after the header and before the first row, which no
    // parser can. And a third as ingest leaves a message over 64 MiB: marked truncated, its
    // head (seed 002 again, which would parse) must not pass for the whole mail.
    let seed = std::fs::read("examples/reports/002_5fa9b7d75deb5046.txt")
        .unwrap_or_else(|e| panic!("{e}"));
    let cut: Vec<u8> = String::from_utf8_lossy(&seed)
        .split("2.352e+08")
        .next()
        .map(|head| head.as_bytes().to_vec())
        .unwrap_or_default();
    let p = Pipeline::new("replay");
    // Ingesting nothing creates the topics.
    let empty = temp_dir("replay-nothing");
    assert!(p.ingest(&[&empty.to_string_lossy()]).status.success());
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker())
        .create()
        .unwrap_or_else(|e| panic!("{e}"));
    for (path, raw, truncated) in [
        ("old/002.txt", &seed, None),
        ("old/cut.txt", &cut, None),
        ("old/huge.txt", &seed, Some("67108864")),
    ] {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "lkplake-error",
                value: Some("an older parser's reason"),
            })
            .insert(Header {
                key: "lkplake-path",
                value: Some(path),
            })
            .insert(Header {
                key: "lkplake-index",
                value: Some("0"),
            });
        let headers = match truncated {
            Some(limit) => headers.insert(Header {
                key: "lkplake-truncated",
                value: Some(limit),
            }),
            None => headers,
        };
        producer
            .send(
                BaseRecord::to(&p.dlq)
                    .key(path)
                    .payload(raw.as_slice())
                    .headers(headers),
            )
            .unwrap_or_else(|(e, _)| panic!("{e}"));
    }
    producer
        .flush(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));

    let out = p.run(&["dlq", "replay"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "letters still fail: {stderr}");
    assert!(
        stderr.contains("3 letters: 1 replayed now (1 reports, 0 mentions and 0 links produced to"),
        "{stderr}"
    );
    assert!(stderr.contains("2 still failing"), "{stderr}");
    let refused = format!(
        "lkplake dlq replay: 0:2 (old/huge.txt#0) still fails: it holds only the first {} bytes of a message larger than 67108864 bytes, the most one message may be, which ingest did not read further",
        seed.len()
    );
    assert!(stderr.contains(&refused), "{stderr}");
    // Again: the replayed letter is not sent twice.
    let out = p.run(&["dlq", "replay"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("3 letters: 0 replayed now (0 reports, 0 mentions and 0 links produced to"),
        "{stderr}"
    );
    assert!(stderr.contains("1 replayed before"), "{stderr}");
    p.transform_until_idle();
    // Seed 002, read by hand: one report, vm-scalability on lkp-csl-2sp3, kept with the
    // source of the original letter.
    let rows = p.query("SELECT testcase, machine, source FROM reports");
    assert_eq!(crate::common::column_strings(&rows, 0), ["vm-scalability"]);
    assert_eq!(crate::common::column_strings(&rows, 1), ["lkp-csl-2sp3"]);
    assert_eq!(crate::common::column_strings(&rows, 2), ["old/002.txt#0"]);

    // `dlq show` gives back a letter's exact bytes (the first letter is at offset 0).
    let out = p.run(&["dlq", "show", "0"]);
    assert!(out.status.success());
    assert_eq!(out.stdout, seed);
    let out = p.run(&["dlq", "show", "7"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "no such letter is a usage error"
    );
}

/// A Maildir holding one read mail, a copy of `seed`.
fn maildir_with(name: &str, seed: &str) -> std::path::PathBuf {
    let maildir = temp_dir(name);
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(maildir.join(sub)).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::copy(seed, maildir.join("cur/1.host:2,S")).unwrap_or_else(|e| panic!("{e}"));
    maildir
}

#[test]
fn a_follower_reads_mail_that_lands_in_a_maildir_and_only_that() {
    let maildir = maildir_with(
        "follow-maildir",
        "examples/reports/000_304c359333adb001.txt",
    );
    let p = Pipeline::new("follow-maildir");
    let maildir_arg = maildir.to_string_lossy().into_owned();
    let mut follower = Follower::start(&p, &[&maildir_arg], &[]);
    follower.wait_for("1 inputs, 1 messages: 1 reports");
    // Half-delivered mail in tmp/ is not read; delivered mail in new/ is, once.
    std::fs::copy(
        "examples/reports/002_5fa9b7d75deb5046.txt",
        maildir.join("tmp/2.host"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::rename(maildir.join("tmp/2.host"), maildir.join("new/2.host"))
        .unwrap_or_else(|e| panic!("{e}"));
    follower.wait_for(
        "1 inputs, 1 messages: 1 reports (0 quoted copies), 0 mentions, 0 links, 0 not reports skipped",
    );
    std::thread::sleep(Duration::from_secs(3));
    let (status, lines) = follower.sigterm();
    assert!(status.success());
    let rounds = lines.iter().filter(|l| l.contains(" messages: ")).count();
    assert_eq!(
        rounds, 2,
        "one round per delivered mail, none again: {lines:#?}"
    );
    p.transform_until_idle();
    // Seeds 000 (phoronix-test-suite) and 002 (vm-scalability), read by hand.
    let rows = p.query("SELECT DISTINCT testcase FROM reports ORDER BY testcase");
    assert_eq!(
        crate::common::column_strings(&rows, 0),
        ["phoronix-test-suite", "vm-scalability"]
    );
}

/// `lkplake run --follow` on the embedded cluster, polling `maildir` every second.
fn run_follow(lake: &str, maildir: &str) -> Follower {
    Follower::spawn(crate::common::command(&[
        "run", "--follow", "--poll", "1s", "--lake", lake, maildir,
    ]))
}

#[test]
fn run_follow_on_the_embedded_cluster_keeps_the_lake_current_until_sigterm() {
    let maildir = maildir_with("run-follow", "examples/reports/004_185fc374d8b9a81a.txt");
    let lake = temp_dir("run-follow-lake");
    let (lake_arg, maildir_arg) = (lake.to_string_lossy(), maildir.to_string_lossy());
    let mut run = run_follow(&lake_arg, &maildir_arg);
    run.wait_for("1 inputs, 1 messages: 1 reports");
    std::fs::copy(
        "examples/reports/002_5fa9b7d75deb5046.txt",
        maildir.join("new/2.host"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Both reach the lake while it runs (the transformer flushes every 5 s).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let batches = crate::common::query(
            &lake,
            "SELECT DISTINCT testcase FROM reports ORDER BY testcase",
        );
        let testcases = crate::common::column_strings(&batches, 0);
        // Seeds 002 (vm-scalability) and 004 (lmbench3), read by hand.
        if testcases == ["lmbench3", "vm-scalability"] {
            break;
        }
        assert!(Instant::now() < deadline, "the lake holds {testcases:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let (status, lines) = run.sigterm();
    assert!(status.success(), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.starts_with("lkplake transform: ")),
        "{lines:#?}"
    );
}

/// Issue 37, item 6: `run --follow` moves a regression along as its mail arrives: open once the
/// report lands, fix-posted once the patch closing it does, fixed once b4's applied notice for
/// that patch does (tests/fixtures/fixes/README.md), each within a poll and a flush.
#[test]
fn run_follow_moves_a_regression_along_as_its_fix_and_applied_notice_arrive() {
    let maildir = maildir_with(
        "follow-fixes",
        "tests/fixtures/same-key/netperf-three-tests.eml",
    );
    let lake = temp_dir("follow-fixes-lake");
    let (lake_arg, maildir_arg) = (lake.to_string_lossy(), maildir.to_string_lossy());
    let run = run_follow(&lake_arg, &maildir_arg);
    // The culprit's status as `lkplake sql` reads it; nothing while the lake has no view yet.
    let status = || -> Vec<String> {
        let sql = "SELECT status FROM regressions WHERE verdict = 'regression'";
        let out = lkplake(&["sql", "--lake", &lake_arg, "--format", "csv", sql], None);
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout.lines().skip(1).map(str::to_owned).collect()
    };
    let wait_for = |want: &str| {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let now = status();
            if now == [want] {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{want} expected, the lake says {now:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait_for("open");
    for (mail, name, then) in [
        ("fix-patch.eml", "new/2.host", "fix-posted"),
        ("applied-notice.eml", "new/3.host", "fixed"),
    ] {
        std::fs::copy(
            Path::new("tests/fixtures/fixes").join(mail),
            maildir.join(name),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        wait_for(then);
    }
    let (exit, lines) = run.sigterm();
    assert!(exit.success(), "{lines:#?}");
}

/// Seeds 000 (phoronix-test-suite), 002 (vm-scalability) and 004 (lmbench3), read by hand:
/// one report each.
const THREE_SEEDS: [&str; 3] = [
    "examples/reports/000_304c359333adb001.txt",
    "examples/reports/002_5fa9b7d75deb5046.txt",
    "examples/reports/004_185fc374d8b9a81a.txt",
];

/// A lore-style repository (`git_dir`, bare) whose commits each add one of `mails` as `m`, in
/// order, stored as loose objects so that one blob can be taken away as a partial clone lacks
/// it. Returns each commit and its blob.
fn loose_archive(git_dir: &Path, mails: &[&str]) -> Vec<(String, String)> {
    let run = |args: &[&str], input: &[u8]| -> String {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir").arg(git_dir).args(args).envs([
            ("GIT_AUTHOR_NAME", "a"),
            ("GIT_AUTHOR_EMAIL", "a@b"),
            ("GIT_COMMITTER_NAME", "a"),
            ("GIT_COMMITTER_EMAIL", "a@b"),
        ]);
        let out = crate::common::run_with_stdin(cmd, input);
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    run(
        &["init", "--quiet", "--bare", "--initial-branch=master"],
        b"",
    );
    let mut parent: Option<String> = None;
    let mut made = Vec::new();
    for mail in mails {
        let bytes = std::fs::read(crate::common::root().join(mail))
            .unwrap_or_else(|e| panic!("{mail}: {e}"));
        let blob = run(&["hash-object", "-w", "--stdin"], &bytes);
        let tree = run(&["mktree"], format!("100644 blob {blob}\tm\n").as_bytes());
        let mut args = vec!["commit-tree", tree.as_str(), "-m", "x"];
        if let Some(p) = &parent {
            args.extend(["-p", p.as_str()]);
        }
        let commit = run(&args, b"");
        made.push((commit.clone(), blob));
        parent = Some(commit);
    }
    if let Some(head) = &parent {
        run(&["update-ref", "refs/heads/master", head], b"");
    }
    made
}

/// Where git keeps a loose object.
fn loose_object(git_dir: &Path, id: &str) -> std::path::PathBuf {
    git_dir.join("objects").join(&id[..2]).join(&id[2..])
}

/// The testcase of each report `lkplake parse` printed, in order.
fn parsed_testcases(out: &std::process::Output) -> Vec<String> {
    json_lines(out)
        .iter()
        .filter(|r| r.get("report_key").is_some())
        .map(|r| {
            r["tests"][0]["testcase"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn parse_reads_an_archive_past_a_message_its_clone_lacks_counts_it_names_it_and_exits_1() {
    let dir = temp_dir("missing-blob");
    let archive = dir.join("list.vger.kernel.org.0");
    let made = loose_archive(&archive, &THREE_SEEDS);
    let lost = loose_object(&archive, &made[1].1);
    let kept = std::fs::read(&lost).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(&lost).unwrap_or_else(|e| panic!("{e}"));
    let archive_arg = archive.to_string_lossy().into_owned();

    let out = lkplake(&["parse", &archive_arg], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(parsed_testcases(&out), ["phoronix-test-suite", "lmbench3"]);
    assert!(
        stderr.contains("lkplake parse: 2 messages: 2 reports (0 quoted copies)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(", 1 messages missing from their archive's repository"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("the first in commit {}", made[1].0)),
        "the warning names the commit: {stderr}"
    );

    // The blob back (what a fetch of it does), every message is read and the exit is clean.
    std::fs::write(&lost, kept).unwrap_or_else(|e| panic!("{e}"));
    let out = lkplake(&["parse", &archive_arg], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        parsed_testcases(&out),
        ["phoronix-test-suite", "vm-scalability", "lmbench3"]
    );
    assert!(!stderr.contains("messages missing"), "{stderr}");
}

#[test]
fn a_follower_stops_at_a_message_its_clone_lacks_and_delivers_it_once_the_blob_is_back() {
    let dir = temp_dir("follow-missing-blob");
    let archive = dir.join("list.vger.kernel.org.0");
    let made = loose_archive(&archive, &THREE_SEEDS);
    let lost = loose_object(&archive, &made[1].1);
    let kept = std::fs::read(&lost).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(&lost).unwrap_or_else(|e| panic!("{e}"));
    let archive_arg = archive.to_string_lossy().into_owned();
    let p = Pipeline::new("follow-missing-blob");

    let mut follower = Follower::start(&p, &[&archive_arg], &[]);
    // The first message is delivered; the epoch stops at the second, the third waits.
    let first = follower.wait_for("1 inputs, 1 messages: 1 reports");
    assert!(
        first.contains(", 1 messages missing from their archive's repository"),
        "{first}"
    );
    follower.wait_for(&format!("lacks the message of commit {}", made[1].0));
    // Its checkpoint stayed before the missing message: the next poll tries it again.
    follower.wait_for("1 inputs, 0 messages: 0 reports");
    std::fs::write(&lost, kept).unwrap_or_else(|e| panic!("{e}"));
    follower.wait_for("1 inputs, 2 messages: 2 reports");
    // Once read, nothing is left unread: the run's end is the normal end of a follower.
    let (status, lines) = follower.sigterm();
    assert_eq!(
        status.code(),
        Some(0),
        "every message was read in the end: {lines:#?}"
    );

    p.transform_until_idle();
    let rows = p.query("SELECT DISTINCT testcase FROM reports ORDER BY testcase");
    assert_eq!(
        crate::common::column_strings(&rows, 0),
        ["lmbench3", "phoronix-test-suite", "vm-scalability"]
    );
}
