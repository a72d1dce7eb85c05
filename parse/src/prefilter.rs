//! The byte-level prefilter: settles most list mail as "not a report" from its raw bytes,
//! before `mail-parser` decodes it.
//!
//! "Not a report" here means "nothing to keep": neither a report nor a mention, and no link
//! ([`crate::parser::links`]) either. A plain mail whose text holds a link's marker
//! (`Closes:`, `Fixes:`, `revert`, `applied`) is [`Plain::Links`]: its links are read from
//! its body as the raw bytes give it, with only its header fields decoded. One list mail in
//! six holds such a marker (most are patches with a `Fixes:` or `Link:` trailer), and
//! decoding them all tripled the time to read an archive (BENCHMARKS.md, "Links").
//!
//! 98 % of the mail on a kernel list is not a report, and decoding it (MIME tree, charsets)
//! costs several times what the parser does (BENCHMARKS.md, "Parser"). The parser itself
//! rejects a body that holds none of its markers ([`MARKERS`]). That verdict can be reached
//! without `mail-parser` only when the text it would decode is known exactly: the mail is one
//! text/plain part (or has no MIME headers at all), carries no transfer encoding or
//! quoted-printable, and names a charset in which every ASCII character of the decoded text is
//! the same byte in the undecoded one. Then the body holds a marker only if the raw bytes do,
//! or, for quoted-printable (`=25stddev` is `%stddev`, `noti=\nced` is `noticed`), only if
//! the body decoded the way `mail-parser` decodes it does. About 58 % of the mail on
//! linux-block that the raw test alone left to the decoder is single-part quoted-printable.
//!
//! Everything else goes through the full decoder as before: base64, HTML (entities, tags
//! splitting a word), multipart mail (part headers decide the encoding), UTF-16 and UTF-7 and
//! the escape-driven charsets (ISO-2022, HZ), bare text and web pages, and headers this test
//! does not read with certainty. A wrong "not a report" would silently lose a report, so every
//! doubt answers "decode it".

use crate::decode::{decode_text, scan_header_block};
use aho_corasick::{AhoCorasick, MatchKind};
use std::sync::LazyLock;

/// The strings at least one of which the body of every report, reply citing a report and
/// report excerpt holds (the parser's own first test, [`crate::parser::parse_document`]).
pub const MARKERS: [&[u8]; 4] = [
    b"%stddev",
    b"fail:runs",
    b"noticed",
    b"Details are as below",
];

/// One pass over the bytes for all four markers (a SIMD multi-substring search), instead of
/// a pass for each.
static MARKER_SEARCH: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(MARKERS)
        .unwrap_or_else(|e| unreachable!("four literal markers always build: {e}"))
});

/// Whether the bytes hold one of the [`MARKERS`].
pub fn has_marker(bytes: &[u8]) -> bool {
    MARKER_SEARCH.is_match(bytes)
}

/// The strings at least one of which the raw bytes of a mail with a link hold: the trailers,
/// the revert and applied words, and `base64` (a body so encoded hides the others from a raw
/// search), each in lower case, capitalized and upper case (`Closes:`, `closes:`, `CLOSES:`).
/// Not seen by a raw search: a quoted-printable soft break inside a word (the prefilter
/// searches the decoded text too) and a subject encoded in base64 (read whatever the markers
/// say); mixed case (`CLoses:`) is not looked for at all: matching any case made the search
/// the slowest step of reading an archive (a case-insensitive automaton has no SIMD search;
/// over linux-block it took half the time, BENCHMARKS.md "Links").
///
/// They live here, beside the report markers, rather than with the link parser
/// ([`crate::parser::links`]): the prefilter looks for both and needs nothing of the parser.
pub const LINK_MARKERS: [&str; 6] = ["closes:", "link:", "fixes:", "revert", "applied", "base64"];

/// The [`LINK_MARKERS`] in their three cases.
pub fn cased_link_markers() -> impl Iterator<Item = String> {
    LINK_MARKERS.iter().flat_map(|m| {
        let mut capital = m.to_string();
        capital[..1].make_ascii_uppercase();
        [m.to_string(), capital, m.to_ascii_uppercase()]
    })
}

/// One pass over the bytes for all the [`LINK_MARKERS`] in their three cases.
static LINK_MARKER_SEARCH: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(cased_link_markers())
        .unwrap_or_else(|e| unreachable!("eighteen literal markers always build: {e}"))
});

/// Whether the raw bytes of a mail hold one of the [`LINK_MARKERS`]: mail that holds none has no
/// link, and need not be decoded to look for one.
pub fn may_link(bytes: &[u8]) -> bool {
    LINK_MARKER_SEARCH.is_match(bytes)
}

/// The report [`MARKERS`] (the first patterns) and the link markers
/// ([`cased_link_markers`]) in one automaton: one pass over the raw bytes
/// answers both, where two passes cost a third more time reading an archive.
static EITHER_SEARCH: LazyLock<AhoCorasick> = LazyLock::new(|| {
    let reports = MARKERS.iter().map(|m| m.to_vec());
    let links = cased_link_markers().map(String::into_bytes);
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(reports.chain(links))
        .unwrap_or_else(|e| unreachable!("literal markers always build: {e}"))
});

/// What one pass finds of the markers.
enum Markers {
    /// A report marker: the mail may be a report.
    Report,
    /// No report marker; the first link marker, if any, is at this offset.
    LinkAt(Option<usize>),
}

fn find_markers(bytes: &[u8]) -> Markers {
    let mut link = None;
    for found in EITHER_SEARCH.find_iter(bytes) {
        if found.pattern().as_usize() < MARKERS.len() {
            return Markers::Report;
        }
        link = link.or(Some(found.start()));
    }
    Markers::LinkAt(link)
}

/// True when the raw bytes prove that the message is mail that is not a report, so
/// [`crate::parse_message`] would answer `NotAReport` after decoding it. False means
/// "decode and parse it": it may be a report, or this test cannot tell.
pub fn settles_as_not_a_report(bytes: &[u8]) -> bool {
    read_plain(bytes, read_raw(bytes)) == Plain::Settled
}

/// What the raw bytes alone say, before any body is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raw {
    /// Mail that is not a report and makes no link.
    NotAReport,
    /// Single-part quoted-printable mail with no marker in its raw bytes: not a report unless
    /// its body, from `body_start` on, holds one once decoded.
    NotAReportUnlessDecoded {
        /// The offset of the body, just after the header block's empty line.
        body_start: usize,
        /// The `Subject:` is encoded in base64 (`=?UTF-8?B?...?=`), which hides a revert's
        /// `Revert "` from the raw search: its links are read whatever the markers say.
        hidden_subject: bool,
    },
    /// Plain mail, not quoted-printable, with no marker of a report but one of a link: its
    /// body from `body_start` to `end` is its own text as it stands.
    Links {
        /// The offset of the body, just after the header block's empty line.
        body_start: usize,
        /// Where its own text ends: at its first `diff --git ` line, else at its end (a
        /// diff's lines are some file's text, not the mail's, and most of a patch's bytes).
        end: usize,
    },
    /// It may be a report, or this test cannot tell.
    Decode,
}

/// The part of [`settles_as_not_a_report`] that decodes nothing: a marker search and one
/// pass over the header block. Parsing on several cores runs this on the thread that splits
/// the input and leaves decoding quoted-printable to the workers, so that thread, which every
/// message passes, does the least work.
pub fn read_raw(bytes: &[u8]) -> Raw {
    let Markers::LinkAt(link) = find_markers(bytes) else {
        return Raw::Decode;
    };
    // The decoder must take the mail path, and `mail-parser` must find the same header block:
    // one that ends in an empty line (a line of blanks, the two read differently), within the
    // head the decoder's test reads.
    let mut fields = Fields::default();
    let mut current: Option<(Field, Vec<u8>)> = None;
    let mut first = true;
    let (mut in_subject, mut hidden_subject) = (false, false);
    let block = scan_header_block(bytes, &mut |line, colon| {
        let Some(colon) = colon else {
            // `mail-parser` reads an indented first line as a field of its own.
            fields.plain_text &= !first;
            hidden_subject |= in_subject && base64_word(line);
            if let Some((_, value)) = &mut current {
                value.extend_from_slice(line);
            }
            return;
        };
        first = false;
        fields.judge(current.take());
        let name = &line[..colon];
        let value = &line[colon + 1..];
        in_subject = name.eq_ignore_ascii_case(b"subject");
        hidden_subject |= in_subject && base64_word(value);
        if name.eq_ignore_ascii_case(b"content-type") {
            current = Some((Field::Type, value.to_vec()));
        } else if name.eq_ignore_ascii_case(b"content-transfer-encoding") {
            current = Some((Field::Encoding, value.to_vec()));
        }
    });
    fields.judge(current);
    match block.body_start {
        Some(_) if !block.is_mail || !fields.plain_text || fields.other_encoding => Raw::Decode,
        None => Raw::Decode,
        // Whichever of the encodings named `mail-parser` goes by, the body it decodes must
        // hold no marker: the raw bytes do not, the quoted-printable text is left to see.
        Some(body_start) if fields.quoted_printable => Raw::NotAReportUnlessDecoded {
            body_start,
            hidden_subject,
        },
        // A link marker in the header block or the own text (not in a diff) is worth reading.
        Some(body_start) => {
            let end = own_end(bytes, body_start);
            if hidden_subject || link.is_some_and(|at| at < end) {
                Raw::Links { body_start, end }
            } else {
                Raw::NotAReport
            }
        }
    }
}

/// Whether a header line holds a base64 encoded word (`=?UTF-8?B?...?=`).
fn base64_word(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"?B?").is_some() || memchr::memmem::find(line, b"?b?").is_some()
}

/// Where the own text of the body starting at `body_start` ends: at its first line that
/// starts `diff --git `, else at the end of the bytes.
fn own_end(bytes: &[u8], body_start: usize) -> usize {
    let body = &bytes[body_start..];
    if body.starts_with(b"diff --git ") {
        return body_start;
    }
    memchr::memmem::find(body, b"\ndiff --git ").map_or(bytes.len(), |at| body_start + at + 1)
}

/// What a mail that [`read_raw`] found plain holds, once its quoted-printable body (if any)
/// is decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plain {
    /// Nothing to keep: no report, no mention, no link.
    Settled,
    /// No report, and maybe links: the body's text, from which they are read.
    Links(String),
    /// It may be a report: decode it whole.
    Decode,
}

/// The second half of the prefilter, for what [`read_raw`] answered of `bytes`: plain mail is
/// settled, or its body's text is given for its links, or it is left to the decoder.
/// Parsing on several cores runs this on the worker threads.
pub fn read_plain(bytes: &[u8], raw: Raw) -> Plain {
    match raw {
        Raw::NotAReport => Plain::Settled,
        Raw::Decode => Plain::Decode,
        Raw::Links { body_start, end } => {
            Plain::Links(decode_text(&bytes[body_start..end]).into_owned())
        }
        Raw::NotAReportUnlessDecoded {
            body_start,
            hidden_subject,
        } => {
            match decode_quoted_printable(&bytes[body_start..]) {
                None => Plain::Decode,
                Some(text) if has_marker(&text) => Plain::Decode,
                // A marker in the header fields counts too (`Subject: [PATCH] Revert "..."`).
                Some(text)
                    if hidden_subject || may_link(&text) || may_link(&bytes[..body_start]) =>
                {
                    let end = own_end(&text, 0);
                    Plain::Links(decode_text(&text[..end]).into_owned())
                }
                Some(_) => Plain::Settled,
            }
        }
    }
}

/// What the header fields allow; every field of a name must allow it (a mail may repeat one).
struct Fields {
    plain_text: bool,
    /// A transfer encoding this test does not decode (base64, uuencode, unknown names).
    other_encoding: bool,
    /// A field names quoted-printable.
    quoted_printable: bool,
}

impl Default for Fields {
    /// A mail without MIME headers is one text/plain part with no transfer encoding.
    fn default() -> Self {
        Fields {
            plain_text: true,
            other_encoding: false,
            quoted_printable: false,
        }
    }
}

/// The two header fields the prefilter reads.
enum Field {
    Type,
    Encoding,
}

impl Fields {
    /// Takes in one whole (unfolded) field.
    fn judge(&mut self, field: Option<(Field, Vec<u8>)>) {
        match field {
            Some((Field::Type, value)) => self.plain_text &= is_plain_text(&value),
            Some((Field::Encoding, value)) => match transfer_encoding(&value) {
                TransferEncoding::Identity => {}
                TransferEncoding::QuotedPrintable => self.quoted_printable = true,
                TransferEncoding::Other => self.other_encoding = true,
            },
            None => {}
        }
    }
}

/// `text/plain` with an ASCII-preserving charset, or no type at all.
fn is_plain_text(value: &[u8]) -> bool {
    let value = String::from_utf8_lossy(value).to_ascii_lowercase();
    let mut params = value.split(';');
    let mime = params.next().unwrap_or("").trim();
    if mime != "text/plain" {
        return false;
    }
    params.all(|param| match param.split_once('=') {
        Some((name, charset)) if name.trim() == "charset" => {
            ascii_preserving(charset.trim().trim_matches('"'))
        }
        _ => true,
    })
}

/// Charsets in which an ASCII byte always decodes to that character and every other byte to
/// some other character, never to nothing: the decoded text holds a marker only where the
/// raw bytes do. UTF-7, UTF-16/32, ISO-2022 and HZ (escapes that decode to nothing) and the
/// multi-byte East Asian charsets are left to the decoder.
fn ascii_preserving(charset: &str) -> bool {
    matches!(
        charset,
        "us-ascii" | "ascii" | "utf-8" | "utf8" | "koi8-r" | "koi8-u"
    ) || ["iso-8859-", "iso8859-", "windows-125", "cp125"]
        .iter()
        .any(|family| {
            charset
                .strip_prefix(family)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// How a `Content-Transfer-Encoding` value reads to this test.
enum TransferEncoding {
    /// 7bit, 8bit, binary: the body is its own text.
    Identity,
    QuotedPrintable,
    /// Base64 (which can hide anything) and names this test does not know, left to the decoder.
    Other,
}

fn transfer_encoding(value: &[u8]) -> TransferEncoding {
    let value = String::from_utf8_lossy(value);
    match value.trim().to_ascii_lowercase().as_str() {
        "7bit" | "8bit" | "binary" => TransferEncoding::Identity,
        "quoted-printable" => TransferEncoding::QuotedPrintable,
        _ => TransferEncoding::Other,
    }
}

/// The text of a quoted-printable body, decoded as `mail-parser` 0.11 decodes a part without a
/// boundary (`decode_quoted_printable_mime`), so the marker search sees what the parser would:
/// `=XX` in either case of hex is that byte, `=` and blanks before a line end join the lines,
/// `=` before another character keeps both, every `\r` goes, and blanks before a line end
/// go. `None` where `mail-parser` gives up on the part (`==`) and reads it some other way:
/// then the mail is left to the decoder.
fn decode_quoted_printable(body: &[u8]) -> Option<Vec<u8>> {
    enum State {
        Text,
        Equals,
        /// After `=` and a hex digit: the digit's value.
        Hex(u8),
    }
    let hex = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let mut text = Vec::with_capacity(body.len());
    let mut state = State::Text;
    let mut blanks = 0;
    let mut line_end: &[u8] = b"\n";
    let mut last = 0;
    for &b in body {
        match b {
            b'=' => match state {
                State::Text => state = State::Equals,
                _ => return None,
            },
            b'\n' => {
                if matches!(state, State::Equals) {
                    state = State::Text;
                } else {
                    text.truncate(text.len() - blanks);
                    text.extend_from_slice(line_end);
                }
                blanks = 0;
            }
            b'\r' => line_end = b"\r\n",
            _ => match state {
                State::Text => {
                    blanks = if b.is_ascii_whitespace() {
                        blanks + 1
                    } else {
                        0
                    };
                    text.push(b);
                }
                State::Equals => match hex(b) {
                    Some(high) => state = State::Hex(high),
                    None if b.is_ascii_whitespace() => {}
                    None => {
                        state = State::Text;
                        text.extend_from_slice(&[b'=', b]);
                        blanks = 0;
                    }
                },
                State::Hex(high) => {
                    state = State::Text;
                    match hex(b) {
                        Some(low) => text.push((high << 4) | low),
                        // The byte before, as `mail-parser` keeps it: the digit, or a line end
                        // that came between.
                        None => text.extend_from_slice(&[b'=', last, b]),
                    }
                    blanks = 0;
                }
            },
        }
        last = b;
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "From: A <a@example.org>\nSubject: [PATCH] block: fix\nDate: Tue, 12 Sep 2023 21:52:39 +0800\n";

    fn mail(extra_headers: &str, body: &str) -> Vec<u8> {
        format!("{HEAD}{extra_headers}\n{body}").into_bytes()
    }

    #[test]
    fn a_plain_patch_without_markers_is_settled() {
        assert!(settles_as_not_a_report(&mail("", "diff --git a/x b/x\n")));
        assert!(settles_as_not_a_report(&mail(
            "Content-Type: text/plain; charset=\"UTF-8\"\nContent-Transfer-Encoding: 8bit\n",
            "Looks good.\n"
        )));
        assert!(settles_as_not_a_report(&mail(
            "Content-Type: text/plain; charset=iso-8859-15; format=flowed\n",
            "Thanks\n"
        )));
    }

    #[test]
    fn a_trailer_before_the_diff_is_read_as_text_up_to_the_diff() {
        let body = "Fix the wakeup.\n\nFixes: 1e8017bb42ab (\"x\")\n---\ndiff --git a/x b/x\n+y\n";
        let bytes = mail("", body);
        let body_start = HEAD.len() + 1;
        let end = body_start + body.find("diff --git").unwrap_or_default();
        assert_eq!(read_raw(&bytes), Raw::Links { body_start, end });
        assert_eq!(
            read_plain(&bytes, read_raw(&bytes)),
            Plain::Links("Fix the wakeup.\n\nFixes: 1e8017bb42ab (\"x\")\n---\n".to_owned())
        );
    }

    #[test]
    fn a_subject_encoded_in_base64_is_read_for_a_revert_it_may_hide() {
        use lkplake_schemas::{LinkKind, Source};
        // `[PATCH] Revert "mm: x"`, encoded.
        let bytes: &[u8] =
            b"From: A <a@example.org>\nSubject: =?UTF-8?B?W1BBVENIXSBSZXZlcnQgIm1tOiB4Ig==?=\n\
             Date: Tue, 12 Sep 2023 21:52:39 +0800\nMessage-ID: <r@example.org>\n\n\
             It slowed the remote charge path.\n";
        assert!(matches!(read_raw(bytes), Raw::Links { .. }));
        let parsed = crate::parse_message(bytes, &Source::file("t", 0));
        let Ok(crate::Parsed::Links(links)) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(
            links
                .iter()
                .map(|l| (l.kind, l.target.as_str()))
                .collect::<Vec<_>>(),
            [(LinkKind::Revert, "mm: x")]
        );
    }

    #[test]
    fn a_link_marker_only_inside_the_diff_settles_the_mail() {
        let bytes = mail(
            "",
            "Tidy.\n---\ndiff --git a/x b/x\n+/* Fixes: see the revert */\n",
        );
        assert!(settles_as_not_a_report(&bytes));
    }

    #[test]
    fn a_quoted_printable_trailer_split_by_a_soft_break_is_read() {
        let bytes = mail(
            "Content-Transfer-Encoding: quoted-printable\n",
            "Clo=\nses: https://lore.kernel.org/oe-lkp/202605121641.b6a60cb0-lkp=40intel.com\n",
        );
        assert_eq!(
            read_plain(&bytes, read_raw(&bytes)),
            Plain::Links(
                "Closes: https://lore.kernel.org/oe-lkp/202605121641.b6a60cb0-lkp@intel.com\n"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_marker_anywhere_in_the_raw_bytes_means_decode() {
        for marker in MARKERS {
            let body = format!("x {} y\n", String::from_utf8_lossy(marker));
            assert!(!settles_as_not_a_report(&mail("", &body)), "{body}");
        }
    }

    const QP: &str =
        "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n";

    #[test]
    fn quoted_printable_without_a_marker_once_decoded_is_settled() {
        assert!(settles_as_not_a_report(&mail(
            QP,
            "Reviewed-by: A <a=40example.org>\nA long line =\nwrapped, x =3D y, caf=C3=A9=\n\n"
        )));
    }

    #[test]
    fn quoted_printable_that_decodes_to_a_marker_means_decode() {
        for body in [
            "=25stddev\n",
            "noti=\nced\n",
            "noti=  \nced\n",
            "no\rticed\n",
            "fail=3Aruns\n",
            "Details are as=\n below\n",
            "D=65tails are as below\n",
        ] {
            assert!(!settles_as_not_a_report(&mail(QP, body)), "{body:?}");
        }
        // Where `mail-parser` gives up on the part and reads it another way.
        assert!(!settles_as_not_a_report(&mail(QP, "a == b\n")));
    }

    #[test]
    fn the_quoted_printable_decoding_is_mail_parsers() {
        // Bodies from the characters quoted-printable treats specially; each decoded text is
        // compared with the text `mail-parser` gives for the same mail.
        let alphabet = b"=aA3dDF4 \t\r\n\x0b\x0cxyz";
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut gave_up = 0;
        for _ in 0..20_000 {
            let len = (seed % 40) as usize;
            let body: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    alphabet[(seed % alphabet.len() as u64) as usize]
                })
                .collect();
            let mut raw = format!("{HEAD}{QP}\n").into_bytes();
            raw.extend_from_slice(&body);
            let parsed = mail_parser::MessageParser::new().parse(&raw[..]);
            let theirs = parsed.as_ref().and_then(|m| m.body_text(0));
            match decode_quoted_printable(&body) {
                Some(ours) => {
                    let ours = String::from_utf8_lossy(&ours);
                    // `mail-parser` leaves out a body that is empty once decoded.
                    assert_eq!(
                        theirs.as_deref().unwrap_or(""),
                        ours,
                        "{:?}",
                        String::from_utf8_lossy(&body)
                    );
                }
                None => gave_up += 1,
            }
        }
        // Most bodies decode; the comparison is not empty.
        assert!(gave_up < 10_000, "{gave_up} of 20,000 gave up");
    }

    #[test]
    fn encodings_that_can_hide_a_marker_mean_decode() {
        for headers in [
            "Content-Transfer-Encoding: base64\n",
            "Content-Transfer-Encoding: x-uuencode\n",
            "Content-Type: text/html; charset=utf-8\n",
            "Content-Type: multipart/mixed; boundary=b\n",
            "Content-Type: text/plain; charset=utf-7\n",
            "Content-Type: text/plain; charset=utf-16le\n",
            "Content-Type: text/plain; charset=iso-2022-jp\n",
            "Content-Type: text/plain; charset=hz-gb-2312\n",
            "Content-Type: text/plain; charset=shift_jis\n",
            "Content-Type: text/plain;\n charset=utf-7\n",
            "Content-Type: text/plain\nContent-Type: text/html\n",
            "Content-Type: message/rfc822\n",
        ] {
            assert!(
                !settles_as_not_a_report(&mail(headers, "plain words\n")),
                "{headers}"
            );
        }
    }

    #[test]
    fn what_is_not_certainly_mail_means_decode() {
        // Bare text, a web page, headers without a body, a line of blanks in the header block.
        assert!(!settles_as_not_a_report(b"just some words\n"));
        assert!(!settles_as_not_a_report(
            b"<html><pre>Subject: x</pre></html>\n"
        ));
        assert!(!settles_as_not_a_report(HEAD.as_bytes()));
        assert!(!settles_as_not_a_report(
            format!(" Content-Type: text/html\n{HEAD}\nhi\n").as_bytes()
        ));
        assert!(!settles_as_not_a_report(
            format!("{HEAD} \nContent-Type: text/html\n\nhi\n").as_bytes()
        ));
    }

    #[test]
    fn a_settled_mail_parses_as_not_a_report_when_decoded() {
        use lkplake_schemas::Source;
        let raw = mail(
            "Content-Type: text/plain; charset=us-ascii\n",
            "Looks good, thanks.\n",
        );
        assert!(settles_as_not_a_report(&raw));
        let full =
            crate::parser::parse_document(&crate::decode::decode(&raw), &Source::file("t", 0));
        assert_eq!(full, Ok(crate::Parsed::NotAReport));
    }
}
