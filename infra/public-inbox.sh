#!/usr/bin/env bash
# Build public-inbox archives (the format lore.kernel.org serves) from mbox files, for tests.
#
#   infra/public-inbox.sh install
#       install Debian's public-inbox (1.9.0 on bookworm) unless public-inbox-init is on PATH
#   infra/public-inbox.sh v2 MBOX DIR [ROTATE_BYTES]
#       build a real v2 inbox in DIR (public-inbox-init -V2, then one public-inbox-mda run per
#       message, oldest first; see "Order" below). MBOX may be plain or .gz. ROTATE_BYTES makes
#       the inbox roll over into git/1.git, git/2.git, ... (see "Epochs" below). About 0.4 s
#       per message (2,014 messages: 14 minutes).
#   infra/public-inbox.sh deliver DIR MAILFILE...
#       deliver more mail into an existing inbox built by `v2` (new mail arriving; it lands in a
#       new epoch once the current one is full). A MAILFILE is one message, or an mbox (.gz ok)
#       when it starts with a `From ` line.
#   infra/public-inbox.sh purge DIR MESSAGE-ID-OR-FILE
#       public-inbox-purge: erase a message from history. Every epoch is rewritten with
#       fast-export | fast-import: the message's commit keeps its place but its `m` blob becomes
#       empty, its author `<>` and its subject "purged <oid>"; every later commit gets a new id
#       (the branch is not a fast-forward any more); git gc --prune=all drops the old objects.
#   infra/public-inbox.sh remove DIR MESSAGE-ID-OR-FILE
#       public-inbox-learn rm: the ordinary removal (what lore does to spam): appends a commit
#       whose tree holds `d` (the removed message) instead of `m`; history is not rewritten.
#   infra/public-inbox.sh lore MBOX REPO
#       build a lore-style bare git repository with plain git (git fast-import), like the
#       GitHub mirrors of lore epochs (github.com/linux-mailinglist-archives/<list>.0): one
#       commit per message on refs/heads/master, oldest first (see "Order"), each tree holding
#       exactly one blob `m`: the message as split from the mbox, byte for byte (v2 inboxes,
#       lore's included, lack Delivered-To: and X-Original-To:, which public-inbox's importer
#       drops). Author from From: and Date:, committer date from the top Received:, commit
#       message the Subject:. 2,014 messages: 5 seconds.
#   infra/public-inbox.sh stats DIR-OR-REPO
#       per epoch: commits, commits writing `m` / `d`, merges, size.
#
# Splitting an mbox: a message starts at a line beginning "From " at the start of the file or
# after a blank line; the blank line before the next "From " is dropped (public-inbox writes it
# after every message). Lines matching ^>+From lose one ">" (mboxrd, what public-inbox writes and
# lore's downloads are, "From mboxrd@z ..."; public-inbox's own reader PublicInbox::MboxReader does
# the same). MBOX_FORMAT=mboxo unescapes only ">From ", MBOX_FORMAT=none leaves bodies alone.
# public-inbox-mda itself does no unescaping: it takes one message and strips a leading From line.
# Order: archives are oldest first. lore's search downloads (and /work/shared/corpus/*.mbox.gz)
# are newest first, so MBOX_ORDER=auto (default) reverses an mbox whose Date: headers go
# backwards at most neighbouring messages; MBOX_ORDER=mbox keeps the file's order, =reverse
# always reverses, =date sorts by Date: (stable).
#
# Epochs: public-inbox 1.9.0 has no config key for the epoch size. V2Writable::new hard-codes
# rotate_bytes = 1 GiB / $PACKING_FACTOR (0.4), i.e. about 2.5 GiB of raw mail per epoch, and
# public-inbox's own tests set $v2w->{rotate_bytes} by hand. So with ROTATE_BYTES the -mda runs
# go through `perl -MPiGroundwork` (written to DIR/.pi-groundwork/lib), which wraps
# PublicInbox::V2Writable::new to set {rotate_bytes}. Each -mda run decides on a new epoch when
# the newest epoch's *.pack files, divided by 0.4, reach rotate_bytes; so the private git config
# sets fastimport.unpackLimit=0 (otherwise git keeps a one-message import as loose objects and
# the packs never grow) and gc.autoDetach=false (-mda's `git gc --auto` repacks every 50
# deliveries; in the foreground the next run sees the result). An epoch so ends with about
# 0.4 * ROTATE_BYTES of packs (cgroups corpus, 25 MB of mail: ROTATE_BYTES=10000000 gives
# 2 epochs, 1136 + 877 messages, 4.0 + 3.7 MB of packs).
#
# Everything public-inbox reads or writes besides DIR's inbox lives in DIR/.pi-groundwork/:
# config (PI_CONFIG), home (HOME, with the git config), emergency (PI_EMERGENCY: a copy of
# every message -mda did not store: duplicates, rejects), lib, rotate_bytes, deliver.log.
# ~/.public-inbox is never touched.
#
# Environment (v2 / deliver):
#   PI_NAME        inbox name (default: basename of DIR)
#   PI_ADDRESS     inbox address (default: from the mbox's most frequent List-Id, e.g.
#                  <cgroups.vger.kernel.org> -> cgroups@vger.kernel.org; else NAME@example.invalid)
#   PI_INDEXLEVEL  basic (default: over.sqlite3 only, no Xapian), medium or full
#   PI_PRECHECK    0 (default): -mda --no-precheck. 1: -mda's checks (exactly one Message-ID,
#                  From/Subject/Date present, <= 500 KB, PI_ADDRESS in To or Cc) drop mail
#   PI_FILTER      publicinbox.NAME.filter (default PublicInbox::Filter::Mirror: store all).
#                  Empty: -mda's strict default PublicInbox::Filter::Base, which refuses HTML,
#                  image, audio and video parts and .exe/.zip... attachments
# Environment (lore): LORE_NAME, LORE_ADDRESS for the committer (default: from REPO's name and
#   the List-Id, like "cgroups.vger.kernel.org.0 <cgroups@vger.kernel.org>").
set -euo pipefail

die() { echo "public-inbox.sh: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit "${1:-0}"; }

install() {
    if command -v public-inbox-init >/dev/null 2>&1; then return 0; fi
    echo "installing public-inbox (about 30 s, 140 Debian packages)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q public-inbox >/dev/null; then
        apt-get update -q >/dev/null
        apt-get install -y -q public-inbox >/dev/null
    fi
}

need_pi() {
    command -v public-inbox-init >/dev/null 2>&1 || die "public-inbox is not installed; run: $0 install"
}

# mbox_py MODE MBOX ARGS...: the mbox reader shared by v2, deliver and lore.
#   mbox_py split MBOX OUTDIR     writes OUTDIR/000001 ... (one raw message each) and prints
#                                 "count<TAB>address-from-the-most-frequent-List-Id"
#   mbox_py fastimport MBOX NAME ADDRESS   writes a git fast-import stream (lore layout)
# MBOX_ORDER: auto (default; an mbox whose Date: headers mostly go backwards, as lore's search
# downloads do, is reversed so the archive is oldest first), mbox (as is), reverse, date.
mbox_py() {
    python3 - "$@" <<'EOF'
import collections, email.header, email.utils, gzip, os, re, sys
mode, src = sys.argv[1:3]
fmt, order = os.environ.get('MBOX_FORMAT', 'mboxrd'), os.environ.get('MBOX_ORDER', 'auto')
raw = open(src, 'rb').read()
if raw[:2] == b'\x1f\x8b':
    raw = gzip.decompress(raw)
esc = {'mboxrd': re.compile(rb'^>(>*From )', re.M), 'mboxo': re.compile(rb'^>(From )', re.M)}.get(fmt)

def split(raw):
    if not raw.startswith(b'From '):    # one plain message: taken as is
        return [raw]
    msgs, cur, prev_blank = [], None, True
    for line in raw.splitlines(keepends=True):
        if line.startswith(b'From ') and prev_blank:
            if cur is not None:
                msgs.append(b''.join(cur))
            cur = []
        else:
            cur.append(line)
        prev_blank = line in (b'\n', b'\r\n')
    msgs.append(b''.join(cur))
    out = []
    for m in msgs:      # drop the separating blank line, then unescape
        m = re.sub(rb'\r?\n\r?\n\Z', lambda x: x.group(0)[:len(x.group(0)) // 2], m)
        out.append(esc.sub(rb'\1', m) if esc else m)
    return out

def headers(m):
    h = re.split(rb'\r?\n\r?\n', m, 1)[0].decode('utf-8', 'surrogateescape')
    out = collections.defaultdict(list)
    for f in re.split(r'\r?\n(?![ \t])', h):
        k, sep, v = f.partition(':')
        if sep:
            out[k.strip().lower()].append(v.strip())
    return out

def decode(v):
    try:
        return str(email.header.make_header(email.header.decode_header(v)))
    except Exception:
        return v

def date(v):        # -> (epoch, "+hhmm") or None
    try:
        t = email.utils.parsedate_tz(v) if v else None
    except Exception:
        t = None
    if not t:
        return None
    off = (t[9] or 0) // 60
    return email.utils.mktime_tz(t), '%s%02d%02d' % ('-' if off < 0 else '+', abs(off) // 60, abs(off) % 60)

msgs = split(raw)
hdrs = [headers(m) for m in msgs]
dates = [date((h.get('date') or [''])[0]) for h in hdrs]
pairs = [(a[0], b[0]) for a, b in zip(dates, dates[1:]) if a and b]
back = sum(1 for a, b in pairs if b < a)
idx = list(range(len(msgs)))
if order == 'reverse' or (order == 'auto' and back > len(pairs) - back):
    idx.reverse()
    print('%s: Date goes backwards at %d of %d neighbours; reversed (MBOX_ORDER=mbox keeps it)'
          % (src, back, len(pairs)), file=sys.stderr)
elif order == 'date':
    idx.sort(key=lambda i: dates[i][0] if dates[i] else 0)
ids = collections.Counter()
for h in hdrs:
    for x in h.get('list-id', []):
        g = re.search(r'<\s*([^>\s]+)\s*>', x)
        if g:
            ids[g.group(1).lower()] += 1
top = ids.most_common(1)[0][0] if ids else ''
lid_addr = top.replace('.', '@', 1) if '.' in top else ''

if mode == 'split':
    out = sys.argv[3]
    os.makedirs(out, exist_ok=True)
    for n, i in enumerate(idx, 1):
        with open(os.path.join(out, '%06d' % n), 'wb') as f:
            f.write(msgs[i])
    print('%d\t%s' % (len(msgs), lid_addr))
    sys.exit(0)

# fastimport: author from From:, author date from Date:, committer date from the newest
# (topmost) Received: header, commit message the Subject: (folding kept, as the mirrors do).
cname, caddr = sys.argv[3], sys.argv[4] or lid_addr or 'archive@example.invalid'
w = sys.stdout.buffer.write
last = (0, '+0000')
for n, i in enumerate(idx, 1):
    m, h = msgs[i], hdrs[i]
    name, addr = email.utils.parseaddr(decode((h.get('from') or [''])[0]))
    name = re.sub(r'[<>\r\n]', '', name).strip() or addr
    addr = re.sub(r'[<>\s]', '', addr)
    ad = dates[i] or last
    last = ad
    rcv = h.get('received') or ['']
    cd = date(rcv[0].rsplit(';', 1)[-1]) if ';' in rcv[0] else None
    cd = cd or ad
    subj = (h.get('subject') or ['(no subject)'])[0]
    subj = decode(subj) if '=?' in subj else subj
    msg = (subj.replace('\r', '') + '\n').encode('utf-8', 'surrogateescape')
    w(b'blob\nmark :%d\ndata %d\n' % (2 * n - 1, len(m)))
    w(m)
    w(b'\ncommit refs/heads/master\nmark :%d\n' % (2 * n))
    w(('author %s <%s> %d %s\ncommitter %s <%s> %d %s\n' % (name, addr, ad[0], ad[1], cname, caddr, cd[0], cd[1]))
      .encode('utf-8', 'surrogateescape'))
    w(b'data %d\n' % len(msg) + msg)
    if n > 1:
        w(b'from :%d\n' % (2 * n - 2))
    w(b'M 100644 :%d m\n\n' % (2 * n - 1))
w(b'done\n')
print('%s: %d messages' % (src, len(msgs)), file=sys.stderr)
EOF
}

# Per-inbox private state, and the wrapper module that sets {rotate_bytes}.
state_setup() {
    local dir=$1
    st=$dir/.pi-groundwork
    mkdir -p "$st/home" "$st/lib" "$st/emergency"
    export PI_CONFIG=$st/config PI_EMERGENCY=$st/emergency HOME=$st/home
    export GIT_CONFIG_NOSYSTEM=1
    cat >"$HOME/.gitconfig" <<'EOF'
[user]
	name = public-inbox.sh
	email = public-inbox.sh@example.invalid
[fastimport]
	unpackLimit = 0
[gc]
	autoDetach = false
EOF
    cat >"$st/lib/PiGroundwork.pm" <<'EOF'
# Loaded by infra/public-inbox.sh into public-inbox-mda (perl -MPiGroundwork): public-inbox 1.9.0
# has no setting for the epoch size, only V2Writable's hard-coded {rotate_bytes}.
package PiGroundwork;
use strict;
use warnings;
use PublicInbox::V2Writable;
my $new = \&PublicInbox::V2Writable::new;
{
	no warnings 'redefine';
	*PublicInbox::V2Writable::new = sub {
		my $self = $new->(@_);
		$self->{rotate_bytes} = int($ENV{PI_ROTATE_BYTES}) if $ENV{PI_ROTATE_BYTES};
		$self;
	};
}
1;
EOF
    if [[ -f $st/rotate_bytes ]]; then export PI_ROTATE_BYTES; PI_ROTATE_BYTES=$(<"$st/rotate_bytes"); fi
}

inbox_name() { git config --file "$PI_CONFIG" --get-regexp '^publicinbox\..*\.inboxdir$' | head -1 | sed -e 's/^publicinbox\.//' -e 's/\.inboxdir .*//'; }

# deliver_dir DIR MSGDIR: one public-inbox-mda per file, in name order; appends to deliver.log.
# -mda exits 0 for a duplicate (it prints CONFLICT) and for mail its precheck drops (silently),
# and keeps a copy of both in emergency/new; a copy there is how "not stored" is told apart.
deliver_dir() {
    local dir=$1 msgdir=$2 name addr f rc why n=0 ok=0 dup=0 drop=0 err=0 t0 before after pre=()
    local -a em
    name=$(inbox_name)
    addr=$(git config --file "$PI_CONFIG" "publicinbox.$name.address" | head -1)
    [[ ${PI_PRECHECK:-0} = 1 ]] || pre=(--no-precheck)
    shopt -s nullglob
    t0=$(now)
    for f in "$msgdir"/*; do
        n=$((n + 1))
        em=("$PI_EMERGENCY"/new/*); before=${#em[@]}
        rc=0
        ORIGINAL_RECIPIENT=$addr perl -w -I"$st/lib" -MPiGroundwork /usr/bin/public-inbox-mda "${pre[@]}" \
            <"$f" 2>"$st/mda.err" || rc=$?
        em=("$PI_EMERGENCY"/new/*); after=${#em[@]}
        why=
        if [[ $rc -ne 0 ]]; then
            err=$((err + 1)); why="failed rc=$rc"
        elif grep -q '^CONFLICT' "$st/mda.err"; then
            dup=$((dup + 1)); why=duplicate
        elif ((after > before)); then
            drop=$((drop + 1)); why="dropped by precheck"
        else
            ok=$((ok + 1))
            # git gc --auto (every 50 deliveries) says "Auto packing the repository ... See
            # "git help gc" for manual housekeeping." on two lines; anything else is logged
            ! grep -qv -e '^Auto packing the repository' -e '^See "git help gc"' "$st/mda.err" ||
                why="stored, with warnings"
        fi
        [[ -z $why ]] || printf '%s\t%s\t%s\n' "$f" "$why" "$(tr '\n' ' ' <"$st/mda.err")" >>"$st/deliver.log"
        if ((n % 250 == 0)); then echo "  $n messages, $(elapsed "$t0") s" >&2; fi
    done
    shopt -u nullglob
    echo "delivered $n messages in $(elapsed "$t0") s: stored=$ok duplicates=$dup" \
        "precheck_dropped=$drop failed=$err (65 = refused by the filter); see $st/deliver.log" >&2
}

v2() {
    [[ $# -ge 2 && $# -le 3 ]] || usage 1
    local mbox=$1 dir=$2 rotate=${3:-} name addr n split t0
    need_pi
    [[ -r $mbox ]] || die "cannot read $mbox"
    [[ ! -e $dir/inbox.lock ]] || die "$dir already holds an inbox; use: $0 deliver $dir MAILFILE..."
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    state_setup "$dir"
    [[ -z $rotate ]] || { echo "$rotate" >"$st/rotate_bytes"; export PI_ROTATE_BYTES=$rotate; }
    t0=$(now)
    split=$st/split
    rm -rf "$split"
    IFS=$'\t' read -r n addr < <(mbox_py split "$mbox" "$split")
    echo "split $mbox: $n messages ($(elapsed "$t0") s)" >&2
    name=${PI_NAME:-$(basename "$dir")}
    addr=${PI_ADDRESS:-${addr:-$name@example.invalid}}
    local -a filter=()
    [[ -z ${PI_FILTER-PublicInbox::Filter::Mirror} ]] || filter=(-c "filter=${PI_FILTER-PublicInbox::Filter::Mirror}")
    public-inbox-init -V2 -L "${PI_INDEXLEVEL:-basic}" "${filter[@]}" \
        "$name" "$dir" "http://localhost/$name" "$addr"
    git config --file "$PI_CONFIG" publicinboxmda.spamcheck none
    echo "inbox $name <$addr> in $dir${rotate:+, rotate_bytes=$rotate}" >&2
    deliver_dir "$dir" "$split"
    rm -rf "$split"
    stats "$dir"
}

deliver() {
    [[ $# -ge 2 ]] || usage 1
    local dir=$1 f i=0 tmp
    shift
    need_pi
    [[ -f $dir/inbox.lock && -f $dir/.pi-groundwork/config ]] || die "$dir is not an inbox built by $0 v2"
    dir=$(cd "$dir" && pwd)
    state_setup "$dir"
    tmp=$st/split
    rm -rf "$tmp"
    for f in "$@"; do
        i=$((i + 1))
        mbox_py split "$f" "$tmp/$(printf %04d $i)" >/dev/null
    done
    mkdir -p "$tmp/all"
    for f in "$tmp"/[0-9]*/*; do mv "$f" "$tmp/all/$(basename "$(dirname "$f")")-$(basename "$f")"; done
    deliver_dir "$dir" "$tmp/all"
    rm -rf "$tmp"
}

# message_file DIR MESSAGE-ID-OR-FILE: prints a path holding the message (the stored copy when
# given a Message-ID; public-inbox matches on Message-ID and content hash, not on bytes).
message_file() {
    local dir=$1 arg=$2 out=$st/lookup.eml
    if [[ -f $arg ]]; then echo "$arg"; return; fi
    rm -f "$out"
    perl -MPublicInbox::Inbox -e '
        my ($dir, $mid, $out) = @ARGV;
        $mid =~ s/\A\s*<//; $mid =~ s/>\s*\z//;
        my $ibx = PublicInbox::Inbox->new({ inboxdir => $dir, name => "x", version => 2 });
        my $ref = $ibx->msg_by_mid($mid) or die "<$mid> is not in $dir\n";
        open my $fh, ">", $out or die "$out: $!\n";
        print $fh $$ref;
        close $fh or die "$out: $!\n";' "$dir" "$arg" "$out" || return 1
    [[ -s $out ]] || return 1   # perl can exit 0 after die here (public-inbox END blocks)
    echo "$out"
}

# with_message CMD DIR MESSAGE-ID-OR-FILE: runs CMD on DIR's inbox with the message on stdin.
with_message() {
    [[ $# -eq 3 ]] || usage 1
    local cmd=$1 dir=$2 f
    need_pi
    dir=$(cd "$dir" && pwd)
    state_setup "$dir"
    f=$(message_file "$dir" "$3") || exit 1
    case $cmd in
    purge) public-inbox-purge "$dir" <"$f" ;;
    remove) public-inbox-learn rm --all <"$f" ;;
    esac
}

purge() { with_message purge "$@"; }

remove() { with_message remove "$@"; }

lore() {
    [[ $# -eq 2 ]] || usage 1
    local mbox=$1 repo=$2 t0
    [[ -r $mbox ]] || die "cannot read $mbox"
    [[ ! -e $repo ]] || die "$repo exists"
    t0=$(now)
    git init -q --bare -b master "$repo"
    mbox_py fastimport "$mbox" "${LORE_NAME:-$(basename "$repo" .git)}" "${LORE_ADDRESS:-}" |
    git --git-dir="$repo" fast-import --quiet --done --date-format=raw
    echo "lore repo $repo: fast-import done in $(elapsed "$t0") s" >&2
    git --git-dir="$repo" gc -q
    echo "lore repo $repo built (after git gc) in $(elapsed "$t0") s" >&2
    stats "$repo"
}

stats() {
    [[ $# -eq 1 ]] || usage 1
    local d=$1 g
    local -a dirs=()
    if [[ -d $d/git ]]; then
        for ((g = 0; ; g++)); do [[ -d $d/git/$g.git ]] || break; dirs+=("$d/git/$g.git"); done
        printf '%s: v2 inbox, %d epoch(s)\n' "$d" "${#dirs[@]}"
    else
        dirs=("$d")
    fi
    for g in "${dirs[@]}"; do
        git --git-dir="$g" rev-parse -q --verify HEAD >/dev/null || { echo "$g: empty"; continue; }
        printf '%s: commits=%s merges=%s size=%s ' "$g" "$(git --git-dir="$g" rev-list --count HEAD)" \
            "$(git --git-dir="$g" rev-list --merges --count HEAD)" "$(du -sh "$g" | cut -f1)"
        git --git-dir="$g" log --format=%H --raw --no-renames HEAD |
            awk -F'\t' '/^:/ { split($1, a, " "); if (a[5] != "D") n[$2]++ }
                END { s = ""; for (k in n) s = s "writes_" k "=" n[k] " "; print s }'
    done
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
install | v2 | deliver | purge | remove | lore | stats) "$cmd" "$@" ;;
-h | --help | help) usage 0 ;;
*) usage 1 ;;
esac
