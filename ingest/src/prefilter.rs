//! The byte-level prefilter: settles most list mail as "not a report" from its raw bytes,
//! before `mail-parser` decodes it.
//!
//! 98 % of the mail on a kernel list is not a report, and decoding it (MIME tree, charsets)
//! costs several times what the parser does (BENCHMARKS.md, "Parser"). The parser itself
//! rejects a body that holds none of its markers ([`MARKERS`]). That verdict can be reached
//! on the raw bytes without decoding only when decoding cannot create a marker: the mail is
//! one text/plain part (or has no MIME headers at all), carries no transfer encoding, and
//! names a charset in which every ASCII character of the decoded text is the same byte in the
//! raw mail. Then the decoded body holds a marker only if the raw bytes do.
//!
//! Everything else goes through the full decoder as before: quoted-printable (`=25stddev`
//! is `%stddev`), base64, HTML (entities, tags splitting a word), multipart mail (part
//! headers decide the encoding), UTF-16 and UTF-7 and the escape-driven charsets
//! (ISO-2022, HZ), bare text and web pages, and headers this test does not read with
//! certainty. A wrong "not a report" would silently lose a report, so every doubt answers
//! "decode it".

use crate::decode::scan_header_block;
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

/// True when the raw bytes prove that the message is mail that is not a report, so
/// [`crate::parse_message`] would answer `NotAReport` after decoding it. False means
/// "decode and parse it": it may be a report, or this test cannot tell.
pub fn settles_as_not_a_report(bytes: &[u8]) -> bool {
    if has_marker(bytes) {
        return false;
    }
    // The decoder must take the mail path, and `mail-parser` must find the same header block:
    // one that ends in an empty line (a line of blanks, the two read differently), within the
    // head the decoder's test reads.
    let mut fields = Fields::default();
    let mut current: Option<(Field, Vec<u8>)> = None;
    let mut first = true;
    let block = scan_header_block(bytes, &mut |line| {
        if matches!(line[0], b' ' | b'\t') {
            // `mail-parser` reads an indented first line as a field of its own.
            fields.plain_text &= !first;
            if let Some((_, value)) = &mut current {
                value.extend_from_slice(line);
            }
            return;
        }
        first = false;
        fields.judge(current.take());
        let colon = memchr::memchr(b':', line).unwrap_or(line.len());
        let name = &line[..colon];
        let value = line.get(colon + 1..).unwrap_or_default();
        if name.eq_ignore_ascii_case(b"content-type") {
            current = Some((Field::Type, value.to_vec()));
        } else if name.eq_ignore_ascii_case(b"content-transfer-encoding") {
            current = Some((Field::Encoding, value.to_vec()));
        }
    });
    fields.judge(current);
    block.is_mail && block.ends_in_empty_line && fields.plain_text && fields.identity_encoding
}

/// What the header fields allow; every field of a name must allow it (a mail may repeat one).
struct Fields {
    plain_text: bool,
    identity_encoding: bool,
}

impl Default for Fields {
    /// A mail without MIME headers is one text/plain part with no transfer encoding.
    fn default() -> Self {
        Fields {
            plain_text: true,
            identity_encoding: true,
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
            Some((Field::Encoding, value)) => {
                self.identity_encoding &= is_identity_encoding(&value)
            }
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

/// No transfer encoding: `mail-parser` decodes only base64 and quoted-printable, but an
/// encoding this test does not know is left to it.
fn is_identity_encoding(value: &[u8]) -> bool {
    let value = String::from_utf8_lossy(value);
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "7bit" | "8bit" | "binary"
    )
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
    fn a_marker_anywhere_in_the_raw_bytes_means_decode() {
        for marker in MARKERS {
            let body = format!("x {} y\n", String::from_utf8_lossy(marker));
            assert!(!settles_as_not_a_report(&mail("", &body)), "{body}");
        }
    }

    #[test]
    fn encodings_that_can_hide_a_marker_mean_decode() {
        for headers in [
            "Content-Transfer-Encoding: quoted-printable\n",
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
            "Applied, thanks.\n",
        );
        assert!(settles_as_not_a_report(&raw));
        let full =
            crate::parser::parse_document(&crate::decode::decode(&raw), &Source::file("t", 0));
        assert_eq!(full, Ok(crate::Parsed::NotAReport));
    }
}
