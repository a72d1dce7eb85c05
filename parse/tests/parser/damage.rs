//! Archive damage applied on purpose to real reports: every damaged copy must read back as
//! the same report (same key, same tests, same rows) as the original.

use crate::fixtures::{one_report, parse_bytes, read, seed_path};
use lkplake_parse::{ParseError, Parsed};
use lkplake_schemas::Report;

fn seed_text(name: &str) -> String {
    // The seeds are UTF-8 except 000, which is ISO-8859-1 with `?` for `±`.
    let bytes = read(&seed_path(name));
    String::from_utf8(bytes.clone()).unwrap_or_else(|_| bytes.iter().map(|&b| b as char).collect())
}

/// Drops the RFC 822 header block of a raw mail seed, keeping the body.
fn body_of(mail: &str) -> &str {
    mail.split_once("\n\n").map_or(mail, |(_, body)| body)
}

fn assert_same_report(damaged: &Report, original: &Report) {
    assert_eq!(damaged.report_key, original.report_key);
    assert_eq!(damaged.commit, original.commit);
    assert_eq!(damaged.base_commit, original.base_commit);
    assert_eq!(damaged.headline, original.headline);
    assert_eq!(damaged.tests.len(), original.tests.len());
    for (d, o) in damaged.tests.iter().zip(&original.tests) {
        assert_eq!(d.testcase, o.testcase);
        assert_eq!(d.params, o.params);
        assert_eq!(d.machine, o.machine);
        assert_eq!(d.rows.len(), o.rows.len());
        assert_eq!(d.rows, o.rows);
    }
}

const SEED_000: &str = "000_304c359333adb001.txt";
const SEED_002: &str = "002_5fa9b7d75deb5046.txt";
const SEED_004: &str = "004_185fc374d8b9a81a.txt";

#[test]
fn crlf_line_endings_change_nothing() {
    let original = one_report(seed_text(SEED_000).as_bytes());
    let crlf = seed_text(SEED_000).replace('\n', "\r\n");
    assert_same_report(&one_report(crlf.as_bytes()), &original);
}

#[test]
fn reply_quoting_at_depth_two_with_comments_inside_the_table_keeps_the_key() {
    let original = one_report(seed_text(SEED_002).as_bytes());
    let mut reply =
        String::from("On Thu, Jan 19, 2023 at 10:00:52PM +0800, kernel test robot wrote:\n");
    for line in seed_text(SEED_002).lines() {
        reply.push_str("> > ");
        reply.push_str(line);
        reply.push('\n');
        if line.contains("vm-scalability.median") {
            reply.push_str("> Why would the median move by exactly as much?\n\nNo idea, 42% of the time it does.\n");
        }
    }
    let quoted = one_report(reply.as_bytes());
    assert!(quoted.quoted);
    assert_same_report(&quoted, &original);
}

#[test]
fn whole_message_collapsed_onto_one_line_reads_the_same() {
    let original = one_report(seed_text(SEED_004).as_bytes());
    let one_line = seed_text(SEED_004)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_same_report(&one_report(one_line.as_bytes()), &original);
}

#[test]
fn lines_wrapped_by_a_mail_client_read_the_same() {
    let original = one_report(seed_text(SEED_004).as_bytes());
    let mut wrapped = String::new();
    for line in seed_text(SEED_004).lines() {
        let mut width = 0;
        for word in line.split(' ') {
            if width + word.len() > 40 && width > 0 {
                wrapped.push('\n');
                width = 0;
            } else if width > 0 {
                wrapped.push(' ');
                width += 1;
            }
            wrapped.push_str(word);
            width += word.len();
        }
        wrapped.push('\n');
    }
    assert!(wrapped.lines().count() > seed_text(SEED_004).lines().count() + 20);
    assert_same_report(&one_report(wrapped.as_bytes()), &original);
}

fn mime_mail(body_headers: &str, body: &str) -> String {
    format!(
        "From: kernel test robot <oliver.sang@intel.com>\nDate: Thu, 19 Jan 2023 22:00:52 +0800\nSubject: [linus:master] [mm,thp,rmap] cb67f4282b: vm-scalability.throughput 34.5% improvement\nMessage-ID: <202301192158.78fda163-oliver.sang@intel.com>\nMIME-Version: 1.0\n{body_headers}\n\n{body}"
    )
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(3).enumerate() {
        if i > 0 && i % 19 == 0 {
            out.push('\n');
        }
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for j in 0..4 {
            if j <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * j)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn quoted_printable(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut width = 0;
        for b in line.bytes() {
            let piece = if b == b'=' || b >= 0x80 {
                format!("={b:02X}")
            } else {
                (b as char).to_string()
            };
            if width + piece.len() > 75 {
                out.push_str("=\n");
                width = 0;
            }
            width += piece.len();
            out.push_str(&piece);
        }
        out.push('\n');
    }
    out
}

#[test]
fn base64_and_quoted_printable_bodies_decode_to_the_same_report() {
    let original = one_report(seed_text(SEED_002).as_bytes());
    let body = seed_text(SEED_002);
    let b64 = mime_mail(
        "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64",
        &base64(body.as_bytes()),
    );
    assert_same_report(&one_report(b64.as_bytes()), &original);
    let qp = mime_mail(
        "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable",
        &quoted_printable(&body),
    );
    assert!(qp.contains("=C2=B1"));
    assert_same_report(&one_report(qp.as_bytes()), &original);
}

#[test]
fn multipart_with_config_and_job_attachments_reads_only_the_report() {
    let original = one_report(seed_text(SEED_002).as_bytes());
    let body = format!(
        "--b1\nContent-Type: text/plain; charset=utf-8\n\n{}\n--b1\nContent-Type: text/plain; name=\"config-6.1.0\"\nContent-Disposition: attachment; filename=\"config-6.1.0\"\n\nCONFIG_64BIT=y\n# 1.0 +5.0% 2.0 fake.metric\n--b1\nContent-Type: text/plain; name=\"job.yaml\"\nContent-Disposition: attachment; filename=\"job.yaml\"\n\ntestcase: vm-scalability\n--b1--\n",
        seed_text(SEED_002)
    );
    let mail = mime_mail("Content-Type: multipart/mixed; boundary=\"b1\"", &body);
    assert_same_report(&one_report(mail.as_bytes()), &original);
}

#[test]
fn iso_8859_2_plus_minus_as_a_ogonek_reads_as_stddev() {
    let original = one_report(seed_text(SEED_002).as_bytes());
    let ogonek = seed_text(SEED_002).replace('±', "ą");
    assert_same_report(&one_report(ogonek.as_bytes()), &original);
    let latin1: Vec<u8> = seed_text(SEED_002)
        .chars()
        .map(|c| if c == '±' { 0xB1 } else { c as u8 })
        .collect();
    assert_same_report(&one_report(&latin1), &original);
}

#[test]
fn html_archive_page_with_entities_and_navigation_reads_the_same() {
    let original = one_report(seed_text(SEED_000).as_bytes());
    let body = body_of(&seed_text(SEED_000))
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('?', "&plusmn;");
    let page = format!(
        "<!DOCTYPE html><html><head><title>LKML: kernel test robot</title><style>pre {{ x: 1 }}</style></head><body>\n<a href=\"/\">[lkml]</a> &nbsp; [2023] [Sep] [12]\n<table><tr><td>Subject</td><td>[linus:master] [kernel/fork] 14ef95be6f: phoronix-test-suite.osbench.LaunchPrograms.us_per_event -8.2% improvement</td></tr></table>\n<pre>{body}</pre>\n<script>var x = 1 < 2;</script></body></html>"
    );
    let parsed = one_report(page.as_bytes());
    // No Date: line on the page; the robot's id in the archive URL stamps 2023-09-12 21:06 +0800.
    assert_eq!(
        parsed.date.map(|d| d.to_rfc3339()).as_deref(),
        Some("2023-09-12T13:06:00+00:00")
    );
    assert_eq!(
        parsed.message_id.as_deref(),
        Some("<202309122106.b440c4c6-oliver.sang@intel.com>")
    );
    assert_same_report(&parsed, &original);
}

#[test]
fn a_report_cut_before_its_table_is_a_mention_of_that_report() {
    let text = seed_text(SEED_002);
    let cut = &text[..text.find("To reproduce:").unwrap_or(text.len())];
    let Ok(Parsed::Mention {
        mention, reports, ..
    }) = parse_bytes(cut.as_bytes())
    else {
        panic!("expected a mention");
    };
    assert!(reports.is_empty());
    // Seed 002, read by hand: `FYI, we noticed a 34.5% improvement of
    // vm-scalability.throughput due to commit:`, `commit:
    // cb67f4282bf9693658dbda934a441ddbbb1446df`, `in testcase: vm-scalability`.
    assert_eq!(mention.kind, Some(lkplake_schemas::Kind::Improvement));
    assert_eq!(mention.metric.as_deref(), Some("vm-scalability.throughput"));
    assert_eq!(mention.change_pct, Some(34.5));
    assert_eq!(
        mention.commit.as_deref(),
        Some("cb67f4282bf9693658dbda934a441ddbbb1446df")
    );
    assert_eq!(mention.testcase.as_deref(), Some("vm-scalability"));
    assert_eq!(
        mention.message_id.as_deref(),
        Some("<202301192158.78fda163-oliver.sang@intel.com>"),
        "it cites itself"
    );
    assert!(mention.rows.is_empty());
}

#[test]
fn a_table_cut_after_its_header_is_an_empty_table_error() {
    let text = seed_text(SEED_002);
    let cut = &text[..text.find("2.352e+08").unwrap_or(text.len())];
    assert_eq!(parse_bytes(cut.as_bytes()), Err(ParseError::EmptyTable));
}

#[test]
fn patches_and_build_failure_reports_are_not_reports() {
    let patch = "From: Someone <a@b.c>\nSubject: [PATCH] mm: fix\nDate: Tue, 12 Sep 2023 21:52:39 +0800\n\nSigned-off-by: A <a@b.c>\n---\n mm/memcontrol.c | 2 +-\n";
    assert_eq!(parse_bytes(patch.as_bytes()), Ok(Parsed::NotAReport));
    let build = "From: kernel test robot <lkp@intel.com>\nSubject: [linux-next:master] BUILD REGRESSION 1234\nDate: Tue, 12 Sep 2023 21:52:39 +0800\n\nkernel test robot noticed the following build errors:\nmm/x.c:1:2: error: foo\n";
    assert_eq!(parse_bytes(build.as_bytes()), Ok(Parsed::NotAReport));
}
