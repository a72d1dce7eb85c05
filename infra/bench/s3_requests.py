"""The requests s3s-fs logged between two byte offsets of its log (RUST_LOG=s3s::service=debug),
by kind: LIST, HEAD, GET (whole object or a range), PUT, DELETE, other.
Usage: s3_requests.py LOG FROM TO  -> prints "N (LIST a, GET b, ...)"."""

import re
import sys
from collections import Counter

REQUEST = re.compile(r"s3s::service: req: Request \{ method: (\w+), uri: (\S+),")


def kinds(log: str, start: int, end: int) -> Counter:
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read(end - start).decode("utf-8", "replace")
    counts = Counter()
    for method, uri in REQUEST.findall(text):
        if method == "GET" and ("list-type=" in uri or uri.rstrip("/").count("/") <= 1):
            counts["LIST"] += 1
        else:
            counts[method] += 1
    return counts


def describe(counts: Counter) -> str:
    total = sum(counts.values())
    parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{total} ({parts})" if total else "0"


if __name__ == "__main__":
    log, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(describe(kinds(log, start, end)))
