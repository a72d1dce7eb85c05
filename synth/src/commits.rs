//! The kernel side of a report: the trees and branches the robot tests, commit subjects in
//! kernel style, the people who write them and the lists they go to.

use crate::rng::Rng;

/// A tree and branch the robot tests, with the repository line it prints.
#[derive(Debug)]
pub(crate) struct Branch {
    pub(crate) name: &'static str,
    pub(crate) repo: &'static str,
    pub(crate) area: Option<Area>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Area {
    Mm,
    Cgroup,
    Sched,
    Fs,
    Net,
    Lock,
}

pub(crate) static BRANCHES: &[Branch] = &[
    Branch {
        name: "linus:master",
        repo: "https://git.kernel.org/cgit/linux/kernel/git/torvalds/linux.git master",
        area: None,
    },
    Branch {
        name: "linux-next:master",
        repo: "https://git.kernel.org/cgit/linux/kernel/git/next/linux-next.git master",
        area: None,
    },
    Branch {
        name: "akpm-mm:mm-stable",
        repo: "https://git.kernel.org/cgit/linux/kernel/git/akpm/mm.git mm-stable",
        area: Some(Area::Mm),
    },
    Branch {
        name: "tj-cgroup:for-next",
        repo: "https://git.kernel.org/cgit/linux/kernel/git/tj/cgroup.git for-next",
        area: Some(Area::Cgroup),
    },
    Branch {
        name: "tip:sched/core",
        repo: "https://git.kernel.org/cgit/linux/kernel/git/tip/tip.git sched/core",
        area: Some(Area::Sched),
    },
    Branch {
        name: "tip:locking/core",
        repo: "https://git.kernel.org/cgit/linux/kernel/git/tip/tip.git locking/core",
        area: Some(Area::Lock),
    },
    Branch {
        name: "brauner-vfs:vfs.misc",
        repo: "https://git.kernel.org/cgit/linux/kernel/git/vfs/vfs.git vfs.misc",
        area: Some(Area::Fs),
    },
    Branch {
        name: "net-next:main",
        repo: "https://git.kernel.org/cgit/linux/kernel/git/netdev/net-next.git main",
        area: Some(Area::Net),
    },
];

/// Commit subject prefixes (the robot's subject tag is the part before the first colon).
const PREFIXES: &[(&str, Area)] = &[
    ("mm", Area::Mm),
    ("mm: memcontrol", Area::Cgroup),
    ("mm/page_alloc", Area::Mm),
    ("mm/vmscan", Area::Mm),
    ("mm/slub", Area::Mm),
    ("mm/mmap", Area::Mm),
    ("mm/gup", Area::Mm),
    ("mm,thp,rmap", Area::Mm),
    ("mm/mempolicy", Area::Mm),
    ("shmem", Area::Mm),
    ("memcg", Area::Cgroup),
    ("cgroup", Area::Cgroup),
    ("cgroup/rstat", Area::Cgroup),
    ("cgroup/cpuset", Area::Cgroup),
    ("sched/fair", Area::Sched),
    ("sched/core", Area::Sched),
    ("sched/eevdf", Area::Sched),
    ("kernel/fork", Area::Sched),
    ("locking/rwsem", Area::Lock),
    ("locking/mutex", Area::Lock),
    ("futex", Area::Lock),
    ("percpu", Area::Lock),
    ("ext4", Area::Fs),
    ("xfs", Area::Fs),
    ("btrfs", Area::Fs),
    ("fs", Area::Fs),
    ("libfs", Area::Fs),
    ("ipc/msg", Area::Fs),
    ("net", Area::Net),
    ("tcp", Area::Net),
    ("net: sock", Area::Net),
];
const VERBS: &[&str] = &[
    "simplify",
    "rework",
    "convert",
    "optimize",
    "avoid",
    "remove",
    "introduce",
    "batch",
    "defer",
    "drop",
    "factor out",
    "cache",
    "reduce",
    "make lockless",
];

fn objects(area: Area) -> &'static [&'static str] {
    match area {
        Area::Mm => &[
            "the page fault retry path",
            "per-cpu page list batching",
            "folio refcount updates in the lru path",
            "vma lock handling in munmap",
            "zone lock contention on free",
            "anon folio allocation",
            "tlb flush batching",
            "huge page zeroing",
            "readahead window sizing",
            "page table reclaim",
        ],
        Area::Cgroup => &[
            "stats flushing threshold",
            "objcg charging in the slab hooks",
            "rstat updates on the hot path",
            "memcg stock draining",
            "per-node lruvec stats",
            "cpuset mask setup",
        ],
        Area::Sched => &[
            "task placement on wakeup",
            "newidle balancing",
            "the lag of sleeping entities",
            "idle cpu selection",
            "per-cpu counters for mm struct",
            "runqueue lock hold time",
        ],
        Area::Fs => &[
            "directory offset tracking",
            "inode allocation",
            "the buffered write path",
            "journal commit batching",
            "dentry cache lookups",
            "message allocation",
        ],
        Area::Net => &[
            "socket memory accounting",
            "skb allocation in the xmit path",
            "the backlog processing",
            "sk_buff recycling",
        ],
        Area::Lock => &[
            "optimistic spinning",
            "the slow path of the write lock",
            "waiter handoff",
            "percpu counter batching",
        ],
    }
}

pub(crate) const FIRST_NAMES: &[&str] = &[
    "Wei", "Anna", "Marco", "Priya", "Jonas", "Sara", "Kenji", "Olga", "Tomas", "Lena", "Ravi",
    "Mei", "David", "Elena", "Hiro", "Nadia", "Pavel", "Ines", "Chen", "Lukas",
];
pub(crate) const LAST_NAMES: &[&str] = &[
    "Zhang",
    "Novak",
    "Rossi",
    "Raman",
    "Berg",
    "Lind",
    "Sato",
    "Petrova",
    "Horak",
    "Vogel",
    "Iyer",
    "Lin",
    "Moreau",
    "Costa",
    "Tanaka",
    "Haddad",
    "Kuznetsov",
    "Silva",
    "Wang",
    "Becker",
];
pub(crate) const MAIL_DOMAINS: &[&str] = &[
    "gmail.com",
    "kernel.org",
    "linux.dev",
    "redhat.com",
    "suse.com",
    "google.com",
    "meta.com",
    "bytedance.com",
    "huawei.com",
    "amd.com",
    "oracle.com",
];

pub(crate) fn area_list(area: Area) -> &'static str {
    match area {
        Area::Mm => "<linux-mm@kvack.org>",
        Area::Cgroup => "<cgroups@vger.kernel.org>",
        Area::Sched | Area::Lock => "<x86@kernel.org>",
        Area::Fs => "<linux-fsdevel@vger.kernel.org>",
        Area::Net => "<netdev@vger.kernel.org>",
    }
}

/// A commit subject line in kernel style.
pub(crate) fn commit_title(rng: &mut Rng, area: Area) -> String {
    let candidates: Vec<&str> = PREFIXES
        .iter()
        .filter(|(_, a)| *a == area)
        .map(|(p, _)| *p)
        .collect();
    let prefix = if candidates.is_empty() {
        "mm"
    } else {
        candidates[rng.below(candidates.len())]
    };
    format!("{prefix}: {} {}", rng.pick(VERBS), rng.pick(objects(area)))
}
