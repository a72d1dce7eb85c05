#!/usr/bin/env python3
"""Generated input for the large-input benchmarks (infra/bench/many-tables.sh, large-gz.sh).

Writes to stdout, and one line of counts to stderr for the caller to check against what
`lkplake parse` reports:

  gen_mail.py tables N      one report mail of N detail tables, each its own test (the shape of
                            parse/tests/fixtures/corpus/0750.eml, trimmed: no `commit:` list, one
                            row per table), so N tables of about 250 bytes
  gen_mail.py mbox BYTES    an mbox of about BYTES bytes: list discussion with a kernel test robot
                            report (3 tables) every 50th message, as a list archive is
  gen_mail.py text BYTES    one text of BYTES bytes that is not an mbox (no `From ` first line)

Everything is deterministic: the same arguments give the same bytes.
"""

import sys

BASE_TITLE = "4793cb599b1bdc3d"
HEAD_TITLE = "2125c0034c5dfd61171b494bd30"
HEAD_SHA = "2125c0034c5dfd61171b494bd309bb7637bff6eb"


def headline_change(k):
    """The change table k prints for its headline metric: +1.0%, +1.1%, ..."""
    return "+%d.%d%%" % (1 + k // 10, k % 10)


def detail(k, listed):
    """One detail table for test `t{k:05}`, in the robot's layout."""
    lines = [
        "=========================================================================================",
        "compiler/cpufreq_governor/kconfig/rootfs/tbox_group/test/testcase:",
        "  gcc-13/performance/x86_64-rhel-8.3/debian-12-x86_64-20240206.cgz/lkp-icl-2sp9/t%05d/stress-ng" % k,
        "",
    ]
    if listed:
        lines += [
            "commit: ",
            '  4793cb599b ("selftests: cgroup: skip test_cgcore_lesser_ns_open")',
            '  2125c0034c ("cgroup/cpuset: Make cpuset hotplug processing synchronous")',
            "",
        ]
    lines += [
        "%s %s " % (BASE_TITLE, HEAD_TITLE),
        "---------------- --------------------------- ",
        "         %stddev     %change         %stddev",
        "             \\          |                \\  ",
        "      7.72 \u00b1  2%%     %s       9.09 \u00b1  3%%  stress-ng.t%05d.ops_per_sec"
        % (headline_change(k), k),
        "",
    ]
    return "\n".join(lines)


def compact_detail(k):
    """A detail table as short as the robot's layout allows: parameter header, column titles,
    dash rule, stats header, one row (no `commit:` list, no decorative `\\ | \\` line)."""
    return (
        "tbox_group/test/testcase:\n"
        "  lkp-icl-2sp9/t%05d/stress-ng\n"
        "%s %s \n"
        "---------------- --------------------------- \n"
        "         %%stddev     %%change         %%stddev\n"
        "      7.72 \u00b1  2%%     %s       9.09 \u00b1  3%%  stress-ng.t%05d.ops_per_sec\n"
        % (k, BASE_TITLE, HEAD_TITLE, headline_change(k), k)
    )


def report(message_id, details, compact=False):
    """A whole report mail around the given detail tables (the first one is the headline's);
    `compact` separates them by an empty line rather than the robot's `***` and machine lines,
    so that 20,000 tables make about 5 MB."""
    head = (
        "From: kernel test robot <oliver.sang@intel.com>\n"
        "To: Waiman Long <longman@redhat.com>\n"
        "Subject: [linus:master] [cgroup/cpuset]  2125c0034c: stress-ng.t00000.ops_per_sec 1.0% improvement\n"
        "Date: Wed, 22 May 2024 22:37:55 +0800\n"
        "Message-ID: <{mid}>\n"
        "MIME-Version: 1.0\n"
        'Content-Type: text/plain; charset="utf-8"\n'
        "Content-Transfer-Encoding: 8bit\n\n"
        "Hello,\n\n"
        "kernel test robot noticed a 1.0% improvement of stress-ng.t00000.ops_per_sec on:\n\n\n"
        'commit: {sha} ("cgroup/cpuset: Make cpuset hotplug processing synchronous")\n'
        "https://git.kernel.org/cgit/linux/kernel/git/torvalds/linux.git master\n\n"
        "testcase: stress-ng\n"
        "test machine: 64 threads 2 sockets Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz (Ice Lake) with 256G memory\n"
        "parameters:\n\n"
        "\tcpufreq_governor: performance\n\n\n"
        "Details are as below:\n"
        "-------------------------------------------------------------------------------------------------->\n\n\n"
        "The kernel config and materials to reproduce are available at:\n"
        "https://download.01.org/0day-ci/archive/20240522/{mid}\n\n"
    ).format(mid=message_id, sha=HEAD_SHA)
    separator = "\n" if compact else (
        "\n***************************************************************************************************\n"
        "lkp-icl-2sp9: 64 threads 2 sockets Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz (Ice Lake) with 256G memory\n"
    )
    tail = (
        "\n\nDisclaimer:\n"
        "Results have been estimated based on internal Intel analysis and are provided\n"
        "for informational purposes only.\n\n"
        "-- \n0-DAY CI Kernel Test Service\nhttps://github.com/intel/lkp-tests/wiki\n"
    )
    return head + separator.join(details) + tail


WORDS = (
    "the queue depth of the block layer is limited by the tag set so a request waits when "
    "every tag is taken and the dispatch path retries it later which costs a context switch "
    "on the submitting side please keep the lock order as it was and resend with the fixes "
    "tag and a short note in the changelog about why the barrier is needed here thanks"
).split()


def body(i):
    """The text of discussion mail `i`: 30 to 89 lines of list prose."""
    words = len(WORDS)
    lines = []
    for line in range(30 + i % 60):
        start = (i * 7 + line * 3) % words
        lines.append(" ".join(WORDS[(start + j) % words] for j in range(12)))
    return "\n".join(lines)


# Bodies are made once and reused, so that generating gigabytes costs little beside gzip.
BODIES = [body(i) for i in range(997)]


def discussion(i):
    """A list mail that is not a report (no report marker anywhere), about 2-6 KB."""
    return (
        "From: Developer %d <dev%d@example.org>\n"
        "To: linux-block@vger.kernel.org\n"
        "Subject: Re: [PATCH v%d %d/5] blk-mq: rework tag allocation\n"
        "Date: Mon, 3 Jun 2024 10:%02d:%02d +0200\n"
        "Message-ID: <msg-%d@example.org>\n"
        "MIME-Version: 1.0\n"
        "Content-Type: text/plain; charset=utf-8\n\n"
        "%s\n"
    ) % (i % 97, i % 97, 1 + i % 4, 1 + i % 5, (i // 60) % 60, i % 60, i, BODIES[i % len(BODIES)])


def write(out, text):
    data = text.encode("utf-8")
    out.write(data)
    return len(data)


def tables(n):
    out = sys.stdout.buffer
    details = [compact_detail(k) for k in range(n)]
    size = write(out, report("202405222215.tables-%d@intel.com" % n, details, compact=True))
    last = n - 1
    sys.stderr.write(
        "tables %d bytes %d first t00000 %s last t%05d %s\n"
        % (n, size, headline_change(0), last, headline_change(last))
    )


def mbox(target):
    out = sys.stdout.buffer
    written = messages = reports = 0
    while written < target:
        if messages % 50 == 49:
            mail = report(
                "2024060%d%06d.r%d-lkp@intel.com" % (1 + reports % 9, reports, reports),
                [detail(k, True) for k in range(3)],
            )
            reports += 1
        else:
            mail = discussion(messages)
        written += write(out, "From mboxrd@z Thu Jan  1 00:00:00 1970\n" + mail + "\n")
        messages += 1
    sys.stderr.write("messages %d reports %d bytes %d\n" % (messages, reports, written))


def text(target):
    out = sys.stdout.buffer
    line = ("not a mail and not an mbox, " * 8 + "\n").encode()
    block = line * ((1 << 20) // len(line) + 1)
    written = 0
    while written < target:
        chunk = block[: target - written]
        out.write(chunk)
        written += len(chunk)
    sys.stderr.write("text bytes %d\n" % written)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("tables", "mbox", "text"):
        sys.exit(__doc__)
    kind, n = sys.argv[1], int(sys.argv[2])
    {"tables": tables, "mbox": mbox, "text": text}[kind](n)


if __name__ == "__main__":
    main()
