#!/usr/bin/env python3
"""Counts the mails whose own `Closes:` or `Link:` trailer names a Message-ID, independently of
lkplake's parser (ingest/src/parser/links.rs), for the acceptance test of issue 37: every
report a later patch closes must come out linked, and no quoted suggestion may.

  count_links.py [--json] [--robot] PATH...

PATH is an mbox (`.mbox`, `.mbox.gz`, any file whose first line starts with `From `), a single
mail, a public-inbox archive (a v2 inbox directory of `git/N.git` epochs, or one bare
repository such as a lore mirror: the blob `m` of every commit, oldest first, read with `git`),
or a directory read recursively (each file one mail, or an mbox). Python's `email` package
undoes the transfer encodings (quoted-printable soft breaks, `=40`, base64) of the text/plain
parts that are not attachments; everything else is regular expressions over that text:

- a trailer counts only at the start of a line (blanks before it allowed, as in a cover
  letter's change log) of the mail's own text: `> Closes:` (a reply quoting it) and `| Closes:`
  (the box of tags every robot report prints) do not, nor does anything after the first
  `diff --git` line (a diff's lines are some file's text);
- its URL must be a lore or lkml path (`lore.kernel.org/<list>/<id>/`, `/r/`, `/all/`, a bare
  `lore.kernel.org/<id>`, `lkml.kernel.org/r/<id>`) or a `msgid.link` one, and the path segment
  holding the Message-ID is the first with an `@` (or `%40`); percent escapes are decoded;
- a trailer whose value is empty takes the URL from the next unquoted line (a client that
  wrapped it);
- a mail naming its own Message-ID does not count.

Prints one line per Message-ID, `COUNT<TAB><message-id>` (how many mails name it), sorted by
Message-ID, then a `#` summary line: mails read, mails with such a trailer, (mail, Message-ID)
pairs, distinct Message-IDs. `--robot` keeps only the robot's Message-IDs
(`<YYYYMMDDhhmm.xxxxxxxx-lkp@intel.com>`, `-oliver.sang@intel.com` in older reports); `--json`
prints one JSON object instead.
"""

import email
import email.policy
import gzip
import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from collections import Counter

TRAILER = re.compile(r"^[ \t]*(?:closes|link):(.*)$", re.IGNORECASE)
QUOTED = re.compile(r"^[ \t]*>")
URL = re.compile(
    r'https?://(?:lore\.kernel\.org|lkml\.kernel\.org|(?:patch\.)?msgid\.link)/([^\s<>"]+)',
    re.IGNORECASE,
)
ROBOT = re.compile(r"^<[0-9]{12}\.[0-9A-Za-z]{8}-[a-z.]+@intel\.com>$")


def read_inputs(paths):
    """Yields the raw bytes of every mail under the paths."""
    for path in paths:
        epochs = os.path.join(path, "git")
        if os.path.isdir(path) and is_git(path):
            yield from read_git(path)
        elif os.path.isdir(epochs) and not os.path.isfile(os.path.join(path, "m")):
            names = [n for n in os.listdir(epochs) if re.fullmatch(r"[0-9]+\.git", n)]
            for name in sorted(names, key=lambda n: int(n.split(".")[0])):
                yield from read_git(os.path.join(epochs, name))
        elif os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    yield from read_file(os.path.join(root, name))
        else:
            yield from read_file(path)


def is_git(path):
    """A bare git repository (a public-inbox epoch, a lore mirror)."""
    return os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(
        os.path.join(path, "objects"))


def read_git(gitdir):
    """The blob `m` of every commit of a public-inbox epoch, oldest first (a commit that deletes
    its message has none, and is skipped)."""
    commits = subprocess.run(
        ["git", "--git-dir", gitdir, "rev-list", "--reverse", "HEAD"],
        check=True, capture_output=True).stdout.split()
    batch = subprocess.Popen(["git", "--git-dir", gitdir, "cat-file", "--batch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask():
        for commit in commits:
            batch.stdin.write(commit + b":m\n")
        batch.stdin.close()

    threading.Thread(target=ask, daemon=True).start()
    for _ in commits:
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[-1] == b"missing":
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        yield data
    batch.wait()


def read_file(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data.startswith(b"From "):
        yield from split_mbox(data)
    else:
        yield data


def split_mbox(data):
    """mbox (mboxo or mboxrd): a message starts at each line that starts with `From `."""
    current = []
    for line in data.splitlines(keepends=True):
        if line.startswith(b"From "):
            if current:
                yield b"".join(current)
            current = []
            continue
        # mboxrd escapes body lines `>From ` as `>>From `; unescape one level.
        if re.match(rb"^>+From ", line):
            line = line[1:]
        current.append(line)
    if current:
        yield b"".join(current)


def body_text(raw):
    """The text/plain parts, transfer encodings and charsets undone; the raw text otherwise."""
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
    except Exception:  # noqa: BLE001 - a mail the stdlib cannot read is read raw
        return None, raw.decode("utf-8", "replace")
    parts = []
    for part in msg.walk():
        if part.get_content_maintype() == "multipart":
            continue
        if msg.is_multipart() and (part.get_content_type() != "text/plain"
                                   or part.get_content_disposition() == "attachment"):
            continue
        try:
            parts.append(part.get_content())
        except Exception:  # noqa: BLE001
            payload = part.get_payload(decode=True) or b""
            parts.append(payload.decode("utf-8", "replace"))
    msgid = msg.get("Message-ID")
    msgid = str(msgid).strip() if msgid else None
    text = "\n".join(p for p in parts if isinstance(p, str))
    return msgid, text


def url_message_id(value):
    """The Message-ID (with angle brackets) a lore/lkml/msgid.link URL holds, or None."""
    m = URL.search(value)
    if not m:
        return None
    path = m.group(1).split("#", 1)[0].split("?", 1)[0]
    for segment in path.split("/"):
        decoded = urllib.parse.unquote(segment)
        if "@" in decoded:
            decoded = decoded.lstrip("<").rstrip(".,;:)]>")
            return "<%s>" % decoded
    return None


def trailer_targets(text):
    """The Message-IDs the unquoted `Closes:`/`Link:` trailers of the text name."""
    lines = []
    for line in text.splitlines():
        if line.startswith("diff --git "):
            break
        if not QUOTED.match(line):
            lines.append(line)
    found = []
    for i, line in enumerate(lines):
        m = TRAILER.match(line)
        if not m:
            continue
        value = m.group(1).strip()
        if not value and i + 1 < len(lines):
            value = lines[i + 1].strip()
        target = url_message_id(value)
        if target and target not in found:
            found.append(target)
    return found


def main(argv):
    as_json = "--json" in argv
    robot_only = "--robot" in argv
    paths = [a for a in argv if not a.startswith("--")]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    per_id = Counter()
    mails = linking = pairs = 0
    for raw in read_inputs(paths):
        mails += 1
        own_id, text = body_text(raw)
        targets = [t for t in trailer_targets(text) if t != own_id]
        if robot_only:
            targets = [t for t in targets if ROBOT.match(t)]
        if targets:
            linking += 1
            pairs += len(targets)
            per_id.update(targets)
    if as_json:
        print(json.dumps({
            "mails": mails,
            "linking_mails": linking,
            "links": pairs,
            "message_ids": dict(sorted(per_id.items())),
        }, indent=1))
    else:
        for msgid, count in sorted(per_id.items()):
            print("%d\t%s" % (count, msgid))
        print("# mails %d, linking mails %d, links %d, message ids %d"
              % (mails, linking, pairs, len(per_id)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
