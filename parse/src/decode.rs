//! Decoding: from the bytes of one message, in whatever state an archive left it, to its
//! headers and its body text.
//!
//! Three shapes arrive: RFC 822 mail (MIME, quoted-printable, base64, charsets: handled by
//! `mail-parser`), web archive pages (HTML tags and entities, navigation text around the
//! message, headers printed as text), and bare text (a body pasted without headers). Report
//! structure is not looked at here.

use chrono::{DateTime, FixedOffset, Utc};
use mail_parser::{HeaderName, MessageParser};
use std::borrow::Cow;
use std::sync::LazyLock;

/// The parts of a message the report parser reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Document {
    /// The `Subject:` header, decoded.
    pub subject: Option<String>,
    /// The `Date:` header, in UTC.
    pub date: Option<DateTime<Utc>>,
    /// With angle brackets.
    pub message_id: Option<String>,
    /// The `From:` header as `Name <address>` (or the bare address), decoded.
    pub sender: Option<String>,
    /// The `In-Reply-To:` Message-ID, with angle brackets.
    pub in_reply_to: Option<String>,
    /// The Message-IDs of `References:`, oldest first, with angle brackets.
    pub references: Vec<String>,
    /// The text the parser reads: the plain-text part, or the page's text for an archive page.
    pub body: String,
    /// The input was recognisably a mail: RFC 822 headers, or an archive page showing them.
    pub is_mail: bool,
    /// The input looked like binary data rather than text.
    pub is_binary: bool,
}

impl Document {
    /// Whether the headers place the mail in a thread (`In-Reply-To:` or `References:`).
    pub fn in_thread(&self) -> bool {
        self.in_reply_to.is_some() || !self.references.is_empty()
    }
}

/// Decodes one message.
pub fn decode(bytes: &[u8]) -> Document {
    if looks_like_rfc822(bytes)
        && let Some(doc) = decode_mail(bytes)
    {
        return doc;
    }
    let text = decode_text(bytes);
    let html = looks_like_html(&text);
    let text = if html {
        Cow::Owned(html_to_text(&text))
    } else {
        text
    };
    let mut doc = Document {
        body: text.into_owned(),
        is_binary: looks_binary(bytes),
        ..Document::default()
    };
    read_pseudo_headers(&mut doc);
    doc.is_mail = html || doc.subject.is_some() || doc.message_id.is_some() || doc.date.is_some();
    doc
}

/// The lines of some bytes, without their `\n` or `\r\n`; the last one may be cut (a head).
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', bytes)
        .map(Some)
        .chain(std::iter::once(None))
        .map_while(move |end| {
            let from = start;
            let line = match end {
                Some(end) => {
                    start = end + 1;
                    &bytes[from..end]
                }
                None if from < bytes.len() => &bytes[from..],
                None => return None,
            };
            Some(line.strip_suffix(b"\r").unwrap_or(line))
        })
}

/// The ASCII characters `char::is_whitespace` counts (vertical tab among them).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// NUL bytes or many control characters: not text in any charset a mail archive uses.
fn looks_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(8192)];
    let control = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x0c))
        .count();
    head.contains(&0) || control * 20 > head.len()
}

/// A mail starts with a block of `Name: value` header fields. Web pages and pasted bodies do
/// not; requiring a well-known field keeps a body that opens with `testcase: x` out.
pub(crate) fn looks_like_rfc822(bytes: &[u8]) -> bool {
    scan_header_block(bytes, &mut |_, _| {}).is_mail
}

/// What [`scan_header_block`] found.
pub(crate) struct HeaderBlock {
    /// The test of [`looks_like_rfc822`].
    pub is_mail: bool,
    /// Where the body starts, when the block ended in a line with nothing on it (rather than
    /// in a line of blanks or at the end of the 64 KiB head): just after that line.
    pub body_start: Option<usize>,
}

/// Reads the header block at the start of `bytes`, handing each of its lines (fields and
/// continuations, without line ends) to `each_line`, with the offset of a field line's colon
/// (`None` for a continuation line).
pub(crate) fn scan_header_block(
    bytes: &[u8],
    each_line: &mut dyn FnMut(&[u8], Option<usize>),
) -> HeaderBlock {
    let head = &bytes[..bytes.len().min(64 * 1024)];
    let mut fields = 0;
    let mut known = false;
    let mut body_start = None;
    // Byte by byte, and only the header block rather than the whole head: this runs on
    // every message of an archive, most of which are not reports. A line is read as the
    // text it decodes to would be (`str::trim`'s whitespace), converting it only when it
    // starts with a byte outside ASCII.
    for line in lines(head) {
        match line.iter().find(|&&b| !is_space(b)) {
            None => {
                if line.is_empty() {
                    let at = line.as_ptr().addr() - head.as_ptr().addr();
                    body_start = Some(
                        memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n + 1),
                    );
                }
                break;
            }
            Some(&b) if !b.is_ascii() && String::from_utf8_lossy(line).trim().is_empty() => break,
            Some(_) => {}
        }
        if line.starts_with(b" ") || line.starts_with(b"\t") {
            each_line(line, None);
            continue;
        }
        // A field name, then its colon: the first byte that cannot be in a name must be the
        // first colon of the line.
        let colon = line
            .iter()
            .position(|&b| !FIELD_NAME_BYTE[usize::from(b)])
            .unwrap_or(line.len());
        if colon == 0 || line.get(colon) != Some(&b':') {
            return HeaderBlock {
                is_mail: false,
                body_start: None,
            };
        }
        let name = &line[..colon];
        each_line(line, Some(colon));
        fields += 1;
        // One well-known field is enough; the rest of the block need not be compared.
        known = known || is_well_known_field(name);
    }
    HeaderBlock {
        is_mail: fields >= 2 && known,
        body_start,
    }
}

/// The bytes a header field name is taken to consist of here: letters, digits, `-` and `_`.
/// A table, because this test runs on every line of every header block of an archive.
static FIELD_NAME_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
        b += 1;
    }
    table
};

/// A field every mail carries one of, so a block with two fields and one of these is mail.
fn is_well_known_field(name: &[u8]) -> bool {
    [
        "from",
        "date",
        "subject",
        "message-id",
        "received",
        "return-path",
        "mime-version",
        "to",
        "delivered-to",
        "received-spf",
    ]
    .iter()
    .any(|field| name.eq_ignore_ascii_case(field.as_bytes()))
}

/// `mail-parser` reading only the header fields a [`Document`] keeps and those that shape the
/// body (the MIME fields), the same way its default does, and skipping the rest: its default
/// also parses every `Received:` and address field, which cost more than the body of a
/// typical list mail.
static MAIL_PARSER: LazyLock<MessageParser> = LazyLock::new(|| {
    MessageParser::new()
        .with_mime_headers()
        .header_text(HeaderName::Subject)
        .header_date(HeaderName::Date)
        .header_address(HeaderName::From)
        .header_id(HeaderName::MessageId)
        .header_id(HeaderName::InReplyTo)
        .header_id(HeaderName::References)
        .default_header_ignore()
});

fn decode_mail(bytes: &[u8]) -> Option<Document> {
    let message = MAIL_PARSER.parse(bytes)?;
    let mut body = String::new();
    for i in 0..message.text_body_count() {
        if let Some(text) = message.body_text(i) {
            if !body.is_empty() {
                body.push('\n');
            }
            body.push_str(&text);
        }
    }
    // Attachments are kernel configs, job files and reproduce scripts, except where a
    // follow-up attaches the full comparison tables: keep text attachments that hold one.
    for part in message.attachments() {
        if let Some(text) = part.text_contents().filter(|t| t.contains("%stddev")) {
            body.push('\n');
            body.push_str(text);
        }
    }
    if body.is_empty() {
        // A body without a usable text part (broken MIME): read what is there as text rather
        // than lose it.
        let start = memchr::memmem::find(bytes, b"\n\n").map_or(0, |p| p + 2);
        body = decode_text(&bytes[start..]).into_owned();
    }
    Some(with_headers(&message, body))
}

/// A plain mail's [`Document`] with `body` as its text: only the header fields are decoded
/// (the prefilter found the body needs no decoding, [`crate::prefilter::Plain::Links`]).
/// `bytes` must start with a header block the prefilter read whole (a blank line ends it, every
/// line a field or a continuation): only the six fields a document holds are parsed.
pub fn decode_headers(bytes: &[u8], body: String) -> Option<Document> {
    Some(with_headers(
        &MAIL_PARSER.parse_headers(&wanted_fields(bytes))?,
        body,
    ))
}

/// The header fields [`with_headers`] reads, each with its continuation lines, in their order,
/// then the blank line that ends a header block. A lore mail's DKIM, ARC and `Received:`
/// fields make its header block several kB; parsing them only to ignore them was a third of the
/// cost of reading a patch for its links.
fn wanted_fields(bytes: &[u8]) -> Vec<u8> {
    const WANTED: [&[u8]; 6] = [
        b"subject",
        b"date",
        b"from",
        b"message-id",
        b"in-reply-to",
        b"references",
    ];
    let mut out = Vec::with_capacity(1024);
    let mut keep = false;
    scan_header_block(bytes, &mut |line, colon| {
        if let Some(colon) = colon {
            keep = WANTED
                .iter()
                .any(|name| line[..colon].eq_ignore_ascii_case(name));
        }
        if keep {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    });
    out.push(b'\n');
    out
}

/// The document of a parsed message's header fields and `body`.
fn with_headers(message: &mail_parser::Message<'_>, body: String) -> Document {
    let date = message
        .date()
        .and_then(|d| DateTime::<Utc>::from_timestamp(d.to_timestamp(), 0));
    let ids = |value: &mail_parser::HeaderValue<'_>| -> Vec<String> {
        value
            .as_text_list()
            .unwrap_or_default()
            .iter()
            .map(|id| format!("<{id}>"))
            .collect()
    };
    let sender = message
        .from()
        .and_then(|from| from.first())
        .and_then(|addr| match (addr.name(), addr.address()) {
            (Some(name), Some(address)) => Some(format!("{name} <{address}>")),
            (None, Some(address)) => Some(address.to_owned()),
            (Some(name), None) => Some(name.to_owned()),
            (None, None) => None,
        });
    Document {
        subject: message.subject().map(collapse_whitespace),
        date,
        message_id: message.message_id().map(|id| format!("<{id}>")),
        sender,
        in_reply_to: ids(message.in_reply_to()).into_iter().next(),
        references: ids(message.references()),
        body,
        is_mail: true,
        is_binary: false,
    }
}

/// Text of unknown encoding: UTF-8 when it is valid, else Windows-1252 (a superset of
/// ISO-8859-1, where the byte 0xB1 is `±`).
pub fn decode_text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => {
            encoding_rs::WINDOWS_1252
                .decode_without_bom_handling(bytes)
                .0
        }
    }
}

fn looks_like_html(text: &str) -> bool {
    let head = &text.as_bytes()[..text.len().min(8192)];
    // A tag name must end at `>` or a space: `[<prev]` on a text archive page is no `<pre>`.
    ["<html", "<!doctype html", "<pre", "<body", "<div", "<table"]
        .iter()
        .any(|tag| {
            head.windows(tag.len() + 1).any(|w| {
                w[..tag.len()].eq_ignore_ascii_case(tag.as_bytes())
                    && matches!(w[tag.len()], b'>' | b' ' | b'\n' | b'\t')
            })
        })
}

/// Strips tags (keeping line structure: block tags and `<br>` end lines), drops `<script>`
/// and `<style>` content, and decodes entities.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        out.push_str(&decode_entities(&rest[..lt]));
        let after = &rest[lt..];
        let Some(gt) = after.find('>') else {
            out.push_str(&decode_entities(after));
            rest = "";
            break;
        };
        let tag = after[1..gt].trim_start_matches('/').to_ascii_lowercase();
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
            .collect();
        rest = &after[gt + 1..];
        if name == "script" || name == "style" {
            let close = format!("</{name}");
            let end = rest.to_ascii_lowercase().find(&close).unwrap_or(rest.len());
            rest = &rest[end..];
            if let Some(gt) = rest.find('>') {
                rest = &rest[gt + 1..];
            }
        } else if matches!(
            name.as_str(),
            "br" | "p" | "div" | "tr" | "li" | "pre" | "h1" | "h2" | "h3" | "table" | "hr"
        ) {
            out.push('\n');
        }
    }
    out.push_str(&decode_entities(rest));
    out
}

fn decode_entities(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let end = after.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| entity(&after[..e]));
        match (end, decoded) {
            (Some(e), Some(c)) => {
                out.push(c);
                rest = &after[e + 1..];
            }
            _ => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code);
    }
    Some(match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "plusmn" => '±',
        _ => return None,
    })
}

/// Web archives print the headers as text above the message: take the first `Subject:`,
/// `Date:` and `Message-ID:` lines (with folded continuations).
fn read_pseudo_headers(doc: &mut Document) {
    let lines: Vec<&str> = doc.body.lines().take(400).collect();
    for (i, line) in lines.iter().enumerate() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        if !matches!(name.as_str(), "subject" | "date" | "message-id") {
            continue;
        }
        let mut value = value.trim().to_owned();
        for next in &lines[i + 1..] {
            if next.starts_with([' ', '\t']) && !next.trim().is_empty() {
                value.push(' ');
                value.push_str(next.trim());
            } else {
                break;
            }
        }
        match name.as_str() {
            "subject" if doc.subject.is_none() => doc.subject = Some(collapse_whitespace(&value)),
            "date" if doc.date.is_none() => doc.date = parse_rfc2822_date(&value),
            "message-id" if doc.message_id.is_none() => {
                // Only the first line: what follows a Message-ID line is never its continuation.
                let first = line.split_once(':').map_or("", |(_, v)| v).trim();
                if first.starts_with('<') && first.ends_with('>') && !first.contains(' ') {
                    doc.message_id = Some(first.to_owned());
                }
            }
            _ => {}
        }
    }
}

/// Parses an RFC 2822 date as mail headers write it, tolerating runs of spaces and a trailing
/// zone comment such as `(PDT)`.
pub fn parse_rfc2822_date(value: &str) -> Option<DateTime<Utc>> {
    let value = value.split(" (").next().unwrap_or(value);
    let value = collapse_whitespace(value);
    DateTime::<FixedOffset>::parse_from_rfc2822(&value)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

/// Every run of whitespace as one space, none at the ends (how subjects are compared).
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_read_from_the_six_fields_alone_equal_those_of_the_whole_block() {
        let mail = b"ARC-Seal: i=1; a=rsa-sha256; d=subspace.kernel.org; s=arc-20240116;\r\n\
            \tt=1751932210; cv=none; b=AbCdEf\r\n\
            Received: from a by b; Tue, 8 Jul 2025 00:00:00 +0000\r\n\
            Received: from c by d; Tue, 8 Jul 2025 00:00:01 +0000\r\n\
            DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=linux.dev;\r\n\
            \th=from:to:subject:date:message-id; bh=xyz=\r\n\
            From: =?UTF-8?Q?Ren=C3=A9_M=C3=BCller?= <rene@linux.dev>\r\n\
            Subject: Re: [PATCH v2] mm/memcontrol: drain the stock\r\n\
            \tbefore a =?UTF-8?Q?remote=C2=A0charge?=\r\n\
            Date: Fri, 10 Jul 2026 18:02:11 -0700\r\n\
            Message-ID: <20260711010211.4021-1-rene@linux.dev>\r\n\
            In-Reply-To: <202607090957.6713a660-lkp@intel.com>\r\n\
            References: <202607090957.6713a660-lkp@intel.com>\r\n\
            \t<87a5b6c7d8.fsf@linux.dev>\r\n\
            X-Mailing-List: cgroups@vger.kernel.org\r\n\
            MIME-Version: 1.0\r\n\
            Content-Type: text/plain\r\n\
            \r\n\
            Closes: https://lore.kernel.org/oe-lkp/202607090957.6713a660-lkp@intel.com\r\n";
        let reduced = wanted_fields(mail);
        assert!(
            !reduced.windows(4).any(|w| w == b"DKIM"),
            "only the six fields"
        );
        let full = decode(mail);
        let light = decode_headers(mail, full.body.clone());
        assert_eq!(light.as_ref(), Some(&full));
        assert_eq!(
            full.subject.as_deref(),
            // The fold and the encoded no-break space are collapsed to one space each.
            Some("Re: [PATCH v2] mm/memcontrol: drain the stock before a remote charge")
        );
        assert_eq!(
            full.sender.as_deref(),
            Some("Ren\u{e9} M\u{fc}ller <rene@linux.dev>")
        );
        assert_eq!(full.references.len(), 2);
    }

    #[test]
    fn quoted_printable_plusminus_decodes() {
        let mail = b"From: a@b\r\nSubject: s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n5222 =C2=B1 19% -22.2% 4060=\r\n metric\r\n";
        let doc = decode(mail);
        assert_eq!(doc.body.trim_end(), "5222 \u{b1} 19% -22.2% 4060 metric");
        assert_eq!(doc.subject.as_deref(), Some("s"));
    }

    #[test]
    fn latin1_byte_b1_is_plusminus() {
        let doc = decode(b"1306 \xb1 19% metric\n");
        assert_eq!(doc.body, "1306 \u{b1} 19% metric\n");
    }

    #[test]
    fn html_pages_lose_tags_and_keep_entities_as_text() {
        let doc = decode(b"<html><body><pre>Message-ID: &lt;1@x&gt;\n 0.34 &plusmn; 4% <b>a</b>.b</pre><script>x<y</script></body></html>");
        assert!(doc.body.contains("0.34 \u{b1} 4% a.b"), "{:?}", doc.body);
        assert!(!doc.body.contains("x<y"));
        assert_eq!(doc.message_id.as_deref(), Some("<1@x>"));
    }

    #[test]
    fn mail_dates_become_utc() {
        let date = parse_rfc2822_date("Tue, 12 Sep 2023 21:52:39 +0800");
        assert_eq!(
            date.map(|d| d.to_rfc3339()).as_deref(),
            Some("2023-09-12T13:52:39+00:00")
        );
        assert!(parse_rfc2822_date("Thu,  9 Jul 2026 01:23:49 -0700 (PDT)").is_some());
    }
}
