//! `lkplake-synth`: deterministic synthetic kernel test robot performance reports, for
//! benchmarks, demos and tests. A crate of its own so the 3,800 lines of the generator are
//! compiled only into what generates data (`lkplake gen`, benchmarks), never into the parser
//! or its fuzz target.
//!
//! Real reports are scarce (the shipped corpus holds a few dozen) and carry no ground truth,
//! so neither the parser's throughput at scale nor the lake's trend analysis can be measured on
//! them alone. This crate writes as many reports as asked for, in the exact layouts the robot
//! used (the 2019 – early 2023 "Greeting, FYI, we noticed ... due to commit:" mails and the
//! modern "kernel test robot noticed ... on:" ones), over series whose levels are known, with
//! steps planted on purpose at known reports.
//!
//! The model:
//! - A *job* is one (testcase, tbox_group, params) configuration, active over a window of the
//!   time span, with a fixed toolchain (compiler, kconfig, rootfs are job parameters: changing
//!   one starts a new series in the lake, exactly as it does for real data).
//! - A *series* is (job, metric). Each has a base level and a noise level of 0.5 %–8 % of the
//!   level (0.5 %–3 % for headline metrics, which LKP picks for their stability).
//! - A report compares a base and a head commit at a date on one job; about one in ten adds
//!   one or two more jobs in an "In addition to that" box. Both columns are
//!   `level × (1 + noise)`. Where a step is planted, the head column already has the new
//!   level, and every later report of that job starts from it.
//! - A job prints its `series_per_testcase` core series in every report, so each core series
//!   has a point in every report of its job; the rest of the 20–150 rows of a table come from
//!   a per-job pool (monitors, perf-profile call chains) and are stationary.
//!
//! Everything is drawn from splitmix64 streams seeded from the configured seed, so one config
//! always gives byte-identical reports, and no dependency is needed beyond the crate's own.

#![warn(missing_docs)]

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, Utc};
use lkplake_schemas::key::canonical_params;
use lkplake_schemas::metric::{Direction, DirectionTable, change_unit, program};
use lkplake_schemas::{ChangeUnit, Kind};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::LazyLock;

mod lifecycle;
pub use lifecycle::{
    Lifecycle, PlantedCulprit, PlantedLink, PlantedMail, lifecycle, write_lifecycle,
};

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthConfig {
    /// Number of reports (one mail each).
    pub reports: usize,
    /// Seed of every random draw: the same config gives byte-identical output.
    pub seed: u64,
    /// Year of the first report (dates are China time, like the robot's).
    pub start_year: i32,
    /// Number of years the reports spread over, dates increasing with the report index.
    pub years: u32,
    /// Core series per job (testcase × machine × parameters): metrics printed in every report
    /// of the job, so that each of them forms a complete time series. At most 150 (the most
    /// rows a table gets).
    pub series_per_testcase: usize,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            reports: 1000,
            seed: 0x6c6b_706c_616b_6521,
            start_year: 2019,
            years: 7,
            series_per_testcase: 40,
        }
    }
}

/// The layout a report is written in; chosen by date, as the robot changed it in early 2023.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynthFormat {
    /// "Greeting, FYI, we noticed ... due to commit:", `in testcase:`, `on test machine:`,
    /// `with following parameters:`, ASCII plots after the table.
    Legacy,
    /// "kernel test robot noticed ... on:", `testcase:`, `test machine:`, `parameters:`.
    Modern,
}

/// The truth about one test (one comparison table) of a generated report.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthTest {
    /// The testcase, e.g. `vm-scalability`.
    pub testcase: String,
    /// The machine group, e.g. `lkp-csl-2sp3`.
    pub tbox_group: String,
    /// Canonical `k=v` parameters, sorted, joined by `,` (every axis except testcase and
    /// tbox_group), as [`canonical_params`] prints them.
    pub params: String,
    /// The machine description as printed.
    pub machine: String,
    /// Number of table rows.
    pub rows: usize,
    /// The metric the report's headline names, e.g. `vm-scalability.throughput`.
    pub headline_metric: String,
    /// The headline change as the table prints it (signed, base against head).
    pub headline_change_pct: f64,
}

/// One generated report with the truth it was generated from.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthReport {
    /// File name for [`write_all`], e.g. `000123.eml`.
    pub file_name: String,
    /// The whole mail: RFC 822 headers and body.
    pub text: String,
    /// Testcase of the main test.
    pub testcase: String,
    /// Machine of the main test.
    pub tbox_group: String,
    /// The commit under test, 40 hex digits.
    pub commit_id: String,
    /// Its title as the commit line prints it (a patch from the list: without the
    /// `[PATCH v2 1/3]` tag).
    pub commit_title: String,
    /// The commit it is compared against, 40 hex digits (tables print its first 10).
    pub base_commit_id: String,
    /// Canonical parameters of the main test.
    pub params: String,
    /// With angle brackets.
    pub message_id: String,
    /// The `Subject:` header, unfolded.
    pub subject: String,
    /// The `Date:` header.
    pub date: DateTime<Utc>,
    /// Which of the robot's layouts it is written in.
    pub format: SynthFormat,
    /// The verdict the prose states, from the headline's direction.
    pub kind: Kind,
    /// The metric the headline names.
    pub headline_metric: String,
    /// As the table prints it.
    pub headline_change_pct: f64,
    /// The main test first, then the tests of the "In addition to that" box.
    pub tests: Vec<SynthTest>,
}

/// A step planted in the level of one series: from report `at_report_index` on, the series'
/// level is `1 + change_pct / 100` times what it was.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedStep {
    /// The series' testcase.
    pub testcase: String,
    /// The series' machine group.
    pub tbox_group: String,
    /// Canonical `k=v` parameters, sorted, joined by `,`.
    pub params: String,
    /// The series' metric.
    pub metric: String,
    /// Index into [`Synth::reports`] of the report whose head column first shows the step.
    pub at_report_index: usize,
    /// Relative change of the level, signed, 3–40 %.
    pub change_pct: f64,
    /// The series' noise level (standard deviation relative to the level, in percent). Noise
    /// is a normal distribution truncated at 3 standard deviations; steps are at least 4 of
    /// them, so each step shows in the report that carries it.
    pub noise_pct: f64,
}

/// The generated reports and the steps planted in them.
#[derive(Debug, Clone, PartialEq)]
pub struct Synth {
    /// In date order, the order [`write_all`] numbers them.
    pub reports: Vec<SynthReport>,

    /// Ordered by report index.
    pub steps: Vec<PlantedStep>,
}

/// Writes each report to its own file `dir/<file_name>`, creating `dir` if needed.
pub fn write_all(synth: &Synth, dir: &Path) -> std::io::Result<()> {
    write_files(dir, synth.reports.iter().map(|r| (&r.file_name, &r.text)))
}

fn write_files<'a>(
    dir: &Path,
    files: impl Iterator<Item = (&'a String, &'a String)>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, text) in files {
        std::fs::write(dir.join(name), text.as_bytes())?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Randomness
// ---------------------------------------------------------------------------------------------

/// Noise is normal, truncated at this many standard deviations: a planted step's visibility
/// then has a hard bound that tests can check without flakiness.
const NOISE_LIMIT_SIGMA: f64 = 3.0;
/// Smallest step, in noise standard deviations of the series: the difference of two noisy
/// columns has √2 σ, so a 4 σ step stands out by 2.8 of them.
const MIN_STEP_SIGMAS: f64 = 4.0;
const MIN_STEP_PCT: f64 = 3.0;
const MAX_STEP_PCT: f64 = 40.0;
/// Appearances of a job between two steps of its headline, where the robot does not force one.
const EVENT_GAP: usize = 3;
/// Levels below this print with too little resolution (`%.2f`) for a small step to show.
const MIN_STEP_LEVEL: f64 = 0.5;

/// splitmix64: tiny, fast, statistically sound for simulation, and trivially seedable.
#[derive(Debug, Clone)]
struct Rng {
    state: u64,
}

impl Rng {
    fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// An independent stream for one purpose (`what`) under `seed`, so that drawing more for
    /// one purpose never shifts the draws of another.
    fn derive(seed: u64, what: u64) -> Self {
        Self::new(mix(seed, what))
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (0 when n is 0).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in lo..=hi.
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Log-uniform in [lo, hi): metric levels span orders of magnitude.
    fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if lo <= 0.0 || hi <= lo {
            return lo.max(hi);
        }
        (lo.ln() + self.unit() * (hi.ln() - lo.ln())).exp()
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// One element of a non-empty slice (all callers pass non-empty vocabulary tables).
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Index drawn with probability proportional to `weights` (0 when all are zero).
    fn weighted(&mut self, weights: impl Iterator<Item = f64> + Clone) -> usize {
        let total: f64 = weights.clone().sum();
        let mut at = self.unit() * total;
        let mut last = 0;
        for (i, w) in weights.enumerate() {
            if w <= 0.0 {
                continue;
            }
            last = i;
            if at < w {
                return i;
            }
            at -= w;
        }
        last
    }

    /// Standard normal by Box-Muller.
    fn gaussian(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln stays finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Standard normal truncated to ±[`NOISE_LIMIT_SIGMA`] by rejection.
    fn bounded_gaussian(&mut self) -> f64 {
        for _ in 0..64 {
            let z = self.gaussian();
            if z.abs() <= NOISE_LIMIT_SIGMA {
                return z;
            }
        }
        0.0
    }

    fn hex(&mut self, len: usize) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        (0..len)
            .map(|_| char::from(DIGITS[self.below(16)]))
            .collect()
    }
}

fn mix(a: u64, b: u64) -> u64 {
    Rng::new(a ^ b.rotate_left(29) ^ 0xD6E8_FEB8_6659_FD93).next_u64()
}

/// FNV-1a: a stable hash of a name (std's hasher may change between releases).
fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

// ---------------------------------------------------------------------------------------------
// Vocabulary: machines, toolchains, testcases, metrics, commits. Surveyed from the sample
// reports, the cgroups/LKP corpus (2020-2026) and lkp-tests' job files.
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct MachineDef {
    tbox: &'static str,
    threads: u32,
    sockets: u32,
    /// Empty for boxes the robot names only by codename (`104 threads 2 sockets (Skylake)`).
    cpu: &'static str,
    codename: &'static str,
    memory_gb: u32,
    /// First year the box shows up in reports.
    since: i32,
    ucode: &'static [&'static str],
}

impl MachineDef {
    /// As the report prints it. Legacy reports often left out the codename.
    fn description(&self, format: SynthFormat) -> String {
        let cpu = match (format, self.cpu.is_empty()) {
            (_, true) => format!("({})", self.codename),
            (SynthFormat::Modern, false) => format!("{} ({})", self.cpu, self.codename),
            (SynthFormat::Legacy, false) => self.cpu.to_owned(),
        };
        format!(
            "{} threads {} sockets {cpu} with {}G memory",
            self.threads, self.sockets, self.memory_gb
        )
    }
}

const CSL_UCODE: &[&str] = &["0x5003006", "0x500320a", "0x5003604"];

static MACHINES: &[MachineDef] = &[
    MachineDef {
        tbox: "lkp-csl-2sp7",
        threads: 96,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Gold 6252 CPU @ 2.10GHz",
        codename: "Cascade Lake",
        memory_gb: 512,
        since: 2019,
        ucode: CSL_UCODE,
    },
    MachineDef {
        tbox: "lkp-csl-2sp3",
        threads: 96,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Platinum 8260L CPU @ 2.40GHz",
        codename: "Cascade Lake",
        memory_gb: 128,
        since: 2019,
        ucode: CSL_UCODE,
    },
    MachineDef {
        tbox: "lkp-csl-2sp9",
        threads: 88,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz",
        codename: "Cascade Lake",
        memory_gb: 128,
        since: 2019,
        ucode: CSL_UCODE,
    },
    MachineDef {
        tbox: "lkp-csl-2ap4",
        threads: 192,
        sockets: 4,
        cpu: "Intel(R) Xeon(R) Platinum 9242 CPU @ 2.30GHz",
        codename: "Cascade Lake",
        memory_gb: 192,
        since: 2019,
        ucode: &["0x500002c", "0x5003006"],
    },
    MachineDef {
        tbox: "lkp-csl-d02",
        threads: 36,
        sockets: 1,
        cpu: "Intel(R) Core(TM) i9-10980XE CPU @ 3.00GHz",
        codename: "Cascade Lake",
        memory_gb: 128,
        since: 2020,
        ucode: &["0x5003006"],
    },
    MachineDef {
        tbox: "lkp-skl-fpga01",
        threads: 104,
        sockets: 2,
        cpu: "",
        codename: "Skylake",
        memory_gb: 192,
        since: 2018,
        ucode: &["0x2006a08", "0x2006e05"],
    },
    MachineDef {
        tbox: "lkp-skl-d08",
        threads: 36,
        sockets: 1,
        cpu: "Intel(R) Core(TM) i9-9980XE CPU @ 3.00GHz",
        codename: "Skylake",
        memory_gb: 32,
        since: 2019,
        ucode: &["0x50003"],
    },
    MachineDef {
        tbox: "lkp-ivb-2ep1",
        threads: 48,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) CPU E5-2697 v2 @ 2.70GHz",
        codename: "Ivy Bridge-EP",
        memory_gb: 112,
        since: 2016,
        ucode: &["0x42e"],
    },
    MachineDef {
        tbox: "lkp-hsw-4ex1",
        threads: 144,
        sockets: 4,
        cpu: "Intel(R) Xeon(R) CPU E7-8890 v3 @ 2.50GHz",
        codename: "Haswell",
        memory_gb: 512,
        since: 2016,
        ucode: &["0x16"],
    },
    MachineDef {
        tbox: "lkp-cfl-d1",
        threads: 12,
        sockets: 1,
        cpu: "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz",
        codename: "Coffee Lake",
        memory_gb: 16,
        since: 2019,
        ucode: &["0xf0"],
    },
    MachineDef {
        tbox: "lkp-icl-2sp2",
        threads: 128,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
        codename: "Ice Lake",
        memory_gb: 256,
        since: 2021,
        ucode: &["0xd000331", "0xd000389"],
    },
    MachineDef {
        tbox: "lkp-icl-2sp7",
        threads: 64,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz",
        codename: "Ice Lake",
        memory_gb: 256,
        since: 2021,
        ucode: &["0xd000389"],
    },
    MachineDef {
        tbox: "lkp-icl-2sp8",
        threads: 64,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz",
        codename: "Ice Lake",
        memory_gb: 256,
        since: 2021,
        ucode: &["0xd000389"],
    },
    MachineDef {
        tbox: "lkp-icl-2sp9",
        threads: 64,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz",
        codename: "Ice Lake",
        memory_gb: 256,
        since: 2021,
        ucode: &["0xd000389"],
    },
    MachineDef {
        tbox: "lkp-cpl-4sp2",
        threads: 224,
        sockets: 4,
        cpu: "Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz",
        codename: "Cooper Lake",
        memory_gb: 192,
        since: 2021,
        ucode: &["0x7002402"],
    },
    MachineDef {
        tbox: "lkp-spr-2sp4",
        threads: 224,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Platinum 8480CTDX",
        codename: "Sapphire Rapids",
        memory_gb: 512,
        since: 2023,
        ucode: &[],
    },
    MachineDef {
        tbox: "lkp-spr-r02",
        threads: 224,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Platinum 8480CTDX",
        codename: "Sapphire Rapids",
        memory_gb: 256,
        since: 2023,
        ucode: &[],
    },
    MachineDef {
        tbox: "igk-spr-2sp1",
        threads: 224,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) Platinum 8480CTDX",
        codename: "Sapphire Rapids",
        memory_gb: 256,
        since: 2024,
        ucode: &[],
    },
    MachineDef {
        tbox: "lkp-emr-2sp1",
        threads: 256,
        sockets: 4,
        cpu: "INTEL(R) XEON(R) PLATINUM 8592+",
        codename: "Emerald Rapids",
        memory_gb: 256,
        since: 2024,
        ucode: &[],
    },
    MachineDef {
        tbox: "lkp-srf-2sp1",
        threads: 256,
        sockets: 2,
        cpu: "GENUINE INTEL(R) XEON(R)",
        codename: "Sierra Forest",
        memory_gb: 128,
        since: 2024,
        ucode: &[],
    },
    MachineDef {
        tbox: "lkp-srf-2sp2",
        threads: 192,
        sockets: 2,
        cpu: "Intel(R) Xeon(R) 6740E CPU @ 2.4GHz",
        codename: "Sierra Forest",
        memory_gb: 256,
        since: 2025,
        ucode: &[],
    },
];

fn machine(tbox: &str) -> Option<&'static MachineDef> {
    MACHINES.iter().find(|m| m.tbox == tbox)
}

/// (compiler, kconfig, rootfs, first year, last year): the robot moved all three together.
const TOOLCHAINS: &[(&str, &str, &str, i32, i32)] = &[
    (
        "gcc-7",
        "x86_64-rhel-7.6",
        "debian-x86_64-20191114.cgz",
        i32::MIN,
        2020,
    ),
    (
        "gcc-9",
        "x86_64-rhel-8.3",
        "debian-10.4-x86_64-20200603.cgz",
        2020,
        2022,
    ),
    (
        "gcc-11",
        "x86_64-rhel-8.3",
        "debian-11.1-x86_64-20220510.cgz",
        2022,
        2023,
    ),
    (
        "gcc-12",
        "x86_64-rhel-8.3",
        "debian-11.1-x86_64-20220510.cgz",
        2023,
        2024,
    ),
    (
        "gcc-13",
        "x86_64-rhel-8.3",
        "debian-12-x86_64-20240206.cgz",
        2024,
        2024,
    ),
    (
        "gcc-12",
        "x86_64-rhel-9.4",
        "debian-12-x86_64-20240206.cgz",
        2024,
        2025,
    ),
    (
        "gcc-14",
        "x86_64-rhel-9.4",
        "debian-13-x86_64-20250902.cgz",
        2025,
        i32::MAX,
    ),
];

type Choices = &'static [&'static str];

#[derive(Debug)]
struct TestcaseDef {
    name: &'static str,
    /// Relative frequency in the robot's output.
    weight: f64,
    /// Job parameters in the order the `parameters:` block prints them (the job file's
    /// order); `cpufreq_governor` follows them.
    params: &'static [(&'static str, Choices)],
    machines: &'static [&'static str],
    /// Kernel call chains (outermost frame first) its profiles are drawn from.
    stacks: &'static [Stack],
    description: &'static str,
    url: &'static str,
}

type Stack = &'static [&'static str];

const SYSCALL: [&str; 2] = ["entry_SYSCALL_64_after_hwframe", "do_syscall_64"];

const ST_IDLE: Stack = &[
    "common_startup_64",
    "start_secondary",
    "cpu_startup_entry",
    "do_idle",
    "cpuidle_idle_call",
    "cpuidle_enter",
    "cpuidle_enter_state",
    "intel_idle",
];
const ST_IDLE_TTWU: Stack = &[
    "common_startup_64",
    "start_secondary",
    "cpu_startup_entry",
    "do_idle",
    "flush_smp_call_function_queue",
    "__flush_smp_call_function_queue",
    "sched_ttwu_pending",
    "ttwu_do_activate",
    "enqueue_task",
    "enqueue_task_fair",
];
const ST_TIMER: Stack = &[
    "asm_sysvec_apic_timer_interrupt",
    "sysvec_apic_timer_interrupt",
    "__sysvec_apic_timer_interrupt",
    "hrtimer_interrupt",
    "__hrtimer_run_queues",
    "tick_nohz_handler",
    "update_process_times",
    "sched_tick",
    "task_tick_fair",
];
const ST_RCU: Stack = &[
    "ret_from_fork_asm",
    "ret_from_fork",
    "kthread",
    "smpboot_thread_fn",
    "run_ksoftirqd",
    "handle_softirqs",
    "rcu_core",
    "rcu_do_batch",
    "kmem_cache_free",
];
const ST_FAULT_ANON: Stack = &[
    "asm_exc_page_fault",
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "do_anonymous_page",
    "vma_alloc_folio_noprof",
    "alloc_pages_mpol",
    "__alloc_frozen_pages_noprof",
    "get_page_from_freelist",
    "clear_page_erms",
];
const ST_FAULT_MEMCG: Stack = &[
    "asm_exc_page_fault",
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "do_anonymous_page",
    "__mem_cgroup_charge",
    "charge_memcg",
    "try_charge_memcg",
    "page_counter_try_charge",
];
const ST_FAULT_FILE: Stack = &[
    "asm_exc_page_fault",
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "do_fault",
    "do_read_fault",
    "filemap_map_pages",
    "next_uptodate_folio",
];
const ST_FAULT_SHMEM: Stack = &[
    "asm_exc_page_fault",
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "do_fault",
    "__do_fault",
    "shmem_fault",
    "shmem_get_folio_gfp",
    "shmem_alloc_and_add_folio",
    "shmem_add_to_page_cache",
    "__lruvec_stat_mod_folio",
];
const ST_COW: Stack = &[
    "asm_exc_page_fault",
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "__handle_mm_fault",
    "do_wp_page",
    "wp_page_copy",
    "copy_mc_enhanced_fast_string",
];
const ST_MUNMAP: Stack = &[
    "__munmap",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_munmap",
    "__vm_munmap",
    "do_vmi_munmap",
    "do_vmi_align_munmap",
    "unmap_region",
    "unmap_vmas",
    "unmap_page_range",
    "zap_pte_range",
    "tlb_flush_mmu",
    "free_pages_and_swap_cache",
    "folios_put_refs",
];
const ST_MMAP: Stack = &[
    "__mmap",
    SYSCALL[0],
    SYSCALL[1],
    "vm_mmap_pgoff",
    "do_mmap",
    "mmap_region",
    "__mmap_region",
    "vma_link_file",
    "vma_interval_tree_insert",
];
const ST_FALLOCATE: Stack = &[
    "fallocate64",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_fallocate",
    "vfs_fallocate",
    "shmem_fallocate",
    "shmem_get_folio_gfp",
    "shmem_alloc_and_add_folio",
    "filemap_add_folio",
    "__filemap_add_folio",
    "__lruvec_stat_mod_folio",
];
const ST_TRUNCATE: Stack = &[
    "ftruncate64",
    SYSCALL[0],
    SYSCALL[1],
    "do_sys_ftruncate",
    "do_truncate",
    "notify_change",
    "shmem_setattr",
    "shmem_undo_range",
    "truncate_inode_folio",
    "filemap_remove_folio",
    "__filemap_remove_folio",
];
const ST_RECLAIM: Stack = &[
    "ret_from_fork_asm",
    "ret_from_fork",
    "kthread",
    "kswapd",
    "balance_pgdat",
    "shrink_node",
    "shrink_node_memcgs",
    "shrink_lruvec",
    "evict_folios",
    "shrink_folio_list",
    "__remove_mapping",
];
const ST_WAKEUP: Stack = &[
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_mq_timedsend",
    "do_mq_timedsend",
    "wake_up_q",
    "try_to_wake_up",
    "select_task_rq",
    "select_task_rq_fair",
    "select_idle_sibling",
    "select_idle_cpu",
    "available_idle_cpu",
];
const ST_SCHEDULE: Stack = &[
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_futex",
    "do_futex",
    "futex_wait",
    "futex_wait_queue",
    "schedule",
    "__schedule",
    "pick_next_task_fair",
    "sched_balance_newidle",
    "sched_balance_rq",
    "update_sd_lb_stats",
    "update_sg_lb_stats",
];
const ST_PIPE_WRITE: Stack = &[
    "write",
    SYSCALL[0],
    SYSCALL[1],
    "ksys_write",
    "vfs_write",
    "pipe_write",
    "__wake_up_sync_key",
    "__wake_up_common",
    "autoremove_wake_function",
    "try_to_wake_up",
    "ttwu_queue_wakelist",
];
const ST_PIPE_READ: Stack = &[
    "read",
    SYSCALL[0],
    SYSCALL[1],
    "ksys_read",
    "vfs_read",
    "pipe_read",
    "schedule",
    "__schedule",
    "dequeue_task_fair",
    "dequeue_entities",
    "dequeue_entity",
    "update_curr",
];
const ST_TCP_SEND: Stack = &[
    "__send",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_sendto",
    "__sys_sendto",
    "tcp_sendmsg",
    "tcp_sendmsg_locked",
    "__tcp_push_pending_frames",
    "tcp_write_xmit",
    "__tcp_transmit_skb",
    "__ip_queue_xmit",
    "ip_finish_output2",
    "__dev_queue_xmit",
    "__local_bh_enable_ip",
    "do_softirq",
    "handle_softirqs",
    "net_rx_action",
    "__napi_poll",
    "process_backlog",
    "__netif_receive_skb_one_core",
    "ip_local_deliver_finish",
    "tcp_v4_rcv",
];
const ST_TCP_RECV: Stack = &[
    "recv",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_recvfrom",
    "__sys_recvfrom",
    "inet_recvmsg",
    "tcp_recvmsg",
    "tcp_recvmsg_locked",
    "skb_copy_datagram_iter",
    "__skb_datagram_iter",
    "_copy_to_iter",
    "rep_movs_alternative",
];
const ST_SKB_ALLOC: Stack = &[
    "__send",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_sendto",
    "__sys_sendto",
    "tcp_sendmsg",
    "tcp_sendmsg_locked",
    "tcp_stream_alloc_skb",
    "__alloc_skb",
    "kmalloc_reserve",
    "__kmalloc_node_track_caller_noprof",
    "__memcg_slab_post_alloc_hook",
    "obj_cgroup_charge",
];
const ST_UNIX: Stack = &[
    "write",
    SYSCALL[0],
    SYSCALL[1],
    "ksys_write",
    "vfs_write",
    "sock_write_iter",
    "unix_stream_sendmsg",
    "sock_alloc_send_pskb",
    "alloc_skb_with_frags",
    "__alloc_skb",
    "kmem_cache_alloc_node_noprof",
];
const ST_EXT4_WRITE: Stack = &[
    "write",
    SYSCALL[0],
    SYSCALL[1],
    "ksys_write",
    "vfs_write",
    "ext4_buffered_write_iter",
    "generic_perform_write",
    "ext4_da_write_begin",
    "__filemap_get_folio",
    "filemap_add_folio",
    "__filemap_add_folio",
];
const ST_XFS_WRITE: Stack = &[
    "write",
    SYSCALL[0],
    SYSCALL[1],
    "ksys_write",
    "vfs_write",
    "xfs_file_buffered_write",
    "iomap_file_buffered_write",
    "iomap_write_iter",
    "iomap_write_begin",
    "__filemap_get_folio",
    "filemap_add_folio",
];
const ST_CREAT: Stack = &[
    "creat64",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_creat",
    "do_sys_openat2",
    "do_filp_open",
    "path_openat",
    "open_last_lookups",
    "lookup_open",
    "ext4_create",
    "__ext4_new_inode",
];
const ST_UNLINK: Stack = &[
    "unlink",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_unlink",
    "do_unlinkat",
    "vfs_unlink",
    "ext4_unlink",
    "__ext4_unlink",
    "ext4_delete_entry",
];
const ST_FSYNC: Stack = &[
    "fsync",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_fsync",
    "ext4_sync_file",
    "file_write_and_wait_range",
    "__filemap_fdatawrite_range",
    "do_writepages",
    "ext4_writepages",
    "ext4_do_writepages",
];
const ST_FORK: Stack = &[
    "_Fork",
    SYSCALL[0],
    SYSCALL[1],
    "__do_sys_clone",
    "kernel_clone",
    "copy_process",
    "dup_mm",
    "dup_mmap",
    "copy_page_range",
    "copy_p4d_range",
    "copy_pte_range",
];
const ST_EXEC: Stack = &[
    "execve",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_execve",
    "do_execveat_common",
    "bprm_execve",
    "load_elf_binary",
    "begin_new_exec",
    "exec_mmap",
    "mmput",
    "exit_mmap",
];
const ST_EXIT: Stack = &[
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_exit_group",
    "do_group_exit",
    "do_exit",
    "mmput",
    "exit_mmap",
    "unmap_vmas",
    "unmap_page_range",
    "zap_pmd_range",
    "zap_pte_range",
];
const ST_LOCK: Stack = &[
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_fcntl",
    "do_fcntl",
    "fcntl_setlk",
    "do_lock_file_wait",
    "posix_lock_inode",
    "_raw_spin_lock",
    "native_queued_spin_lock_slowpath",
];
const ST_FUTEX: Stack = &[
    "syscall",
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_futex",
    "do_futex",
    "futex_wake",
    "wake_up_q",
    "try_to_wake_up",
    "_raw_spin_lock_irqsave",
    "native_queued_spin_lock_slowpath",
];
const ST_MSG: Stack = &[
    SYSCALL[0],
    SYSCALL[1],
    "__x64_sys_msgsnd",
    "do_msgsnd",
    "load_msg",
    "alloc_msg",
    "__kmalloc_noprof",
    "__memcg_slab_post_alloc_hook",
    "obj_cgroup_charge",
];

const PERF: (&str, Choices) = ("cpufreq_governor", &["performance"]);

static TESTCASES: &[TestcaseDef] = &[
    TestcaseDef {
        name: "will-it-scale",
        weight: 3.0,
        params: &[
            ("nr_task", &["100%", "50%", "16"]),
            ("mode", &["process", "thread"]),
            (
                "test",
                &[
                    "mmap1",
                    "mmap2",
                    "page_fault1",
                    "page_fault2",
                    "page_fault3",
                    "fallocate1",
                    "fallocate2",
                    "tlb_flush2",
                    "context_switch1",
                    "lock1",
                    "futex2",
                    "signal1",
                    "poll2",
                    "brk1",
                    "pread1",
                    "unlink2",
                    "malloc1",
                    "read2",
                ],
            ),
        ],
        machines: &[
            "lkp-csl-2sp9",
            "lkp-skl-fpga01",
            "lkp-icl-2sp9",
            "lkp-icl-2sp7",
            "lkp-cpl-4sp2",
            "lkp-spr-2sp4",
            "lkp-csl-d02",
            "lkp-skl-d08",
        ],
        stacks: &[
            ST_MMAP,
            ST_MUNMAP,
            ST_FAULT_ANON,
            ST_FAULT_MEMCG,
            ST_FALLOCATE,
            ST_LOCK,
            ST_FUTEX,
            ST_PIPE_WRITE,
        ],
        description: "Will It Scale takes a testcase and runs it from 1 through to n parallel copies to see if the testcase will scale. It builds both a process and threads based test in order to see any differences between the two.",
        url: "https://github.com/antonblanchard/will-it-scale",
    },
    TestcaseDef {
        name: "vm-scalability",
        weight: 2.5,
        params: &[
            ("runtime", &["300s"]),
            ("size", &["128G", "256G", "512G", "1T", "8T"]),
            (
                "test",
                &[
                    "truncate-seq",
                    "truncate",
                    "lru-shm",
                    "small-allocs",
                    "anon-w-seq",
                    "anon-cow-seq",
                    "anon-r-rand",
                    "lru-file-mmap-read",
                    "mmap-xread-seq-mt",
                    "msync",
                ],
            ),
        ],
        machines: &[
            "lkp-csl-2sp3",
            "lkp-csl-2ap4",
            "lkp-hsw-4ex1",
            "lkp-cpl-4sp2",
            "lkp-icl-2sp2",
            "lkp-emr-2sp1",
        ],
        stacks: &[
            ST_FAULT_ANON,
            ST_FAULT_MEMCG,
            ST_FAULT_FILE,
            ST_FAULT_SHMEM,
            ST_COW,
            ST_MUNMAP,
            ST_TRUNCATE,
            ST_RECLAIM,
        ],
        description: "The motivation behind this suite is to exercise functions and regions of the mm/ of the Linux kernel which are of interest to us.",
        url: "https://git.kernel.org/cgit/linux/kernel/git/wfg/vm-scalability.git/",
    },
    TestcaseDef {
        name: "stress-ng",
        weight: 3.0,
        params: &[
            ("nr_threads", &["100%", "10%", "1"]),
            ("testtime", &["60s"]),
            (
                "test",
                &[
                    "switch",
                    "msg",
                    "shm",
                    "mmapfork",
                    "bigheap",
                    "cpu-online",
                    "mremap",
                    "metamix",
                    "fork",
                    "pipe",
                    "futex",
                    "sem",
                    "sock",
                    "vm-rw",
                ],
            ),
        ],
        machines: &[
            "lkp-spr-r02",
            "lkp-icl-2sp8",
            "lkp-icl-2sp9",
            "lkp-spr-2sp4",
            "lkp-srf-2sp1",
            "lkp-emr-2sp1",
            "lkp-csl-d02",
            "lkp-csl-2sp7",
        ],
        stacks: &[
            ST_WAKEUP,
            ST_SCHEDULE,
            ST_MSG,
            ST_FORK,
            ST_EXIT,
            ST_PIPE_WRITE,
            ST_FAULT_ANON,
            ST_MMAP,
            ST_FUTEX,
        ],
        description: "stress-ng will stress test a computer system in various selectable ways. It was designed to exercise various physical subsystems of a computer as well as the various operating system kernel interfaces.",
        url: "https://github.com/ColinIanKing/stress-ng",
    },
    TestcaseDef {
        name: "aim7",
        weight: 1.2,
        params: &[
            ("disk", &["1BRD_48G", "4BRD_12G"]),
            ("fs", &["ext4", "xfs", "btrfs", "f2fs"]),
            (
                "test",
                &[
                    "disk_rr",
                    "disk_rw",
                    "disk_cp",
                    "disk_src",
                    "disk_wrt",
                    "sync_disk_rw",
                    "creat-clo",
                ],
            ),
            ("load", &["3000", "1000", "300"]),
        ],
        machines: &[
            "lkp-icl-2sp2",
            "lkp-csl-2sp7",
            "lkp-cpl-4sp2",
            "lkp-ivb-2ep1",
        ],
        stacks: &[
            ST_EXT4_WRITE,
            ST_XFS_WRITE,
            ST_CREAT,
            ST_UNLINK,
            ST_FSYNC,
            ST_LOCK,
        ],
        description: "AIM7 is a traditional UNIX system level benchmark suite which is used to test and measure the performance of multiuser system.",
        url: "https://sourceforge.net/projects/aimbench/files/aim-suite7/",
    },
    TestcaseDef {
        name: "netperf",
        weight: 1.5,
        params: &[
            ("ip", &["ipv4"]),
            ("runtime", &["300s"]),
            ("nr_threads", &["200%", "50%", "25%", "1"]),
            ("cluster", &["cs-localhost"]),
            (
                "test",
                &[
                    "TCP_STREAM",
                    "TCP_MAERTS",
                    "TCP_SENDFILE",
                    "UDP_STREAM",
                    "SCTP_STREAM",
                    "TCP_RR",
                    "UDP_RR",
                    "SCTP_RR",
                    "TCP_CRR",
                ],
            ),
        ],
        machines: &[
            "lkp-icl-2sp2",
            "igk-spr-2sp1",
            "lkp-csl-2sp7",
            "lkp-cpl-4sp2",
        ],
        stacks: &[ST_TCP_SEND, ST_TCP_RECV, ST_SKB_ALLOC, ST_SCHEDULE],
        description: "Netperf is a benchmark that can be use to measure various aspect of networking performance.",
        url: "http://www.netperf.org/netperf/",
    },
    TestcaseDef {
        name: "unixbench",
        weight: 1.0,
        params: &[
            ("runtime", &["300s"]),
            ("nr_task", &["1", "100%", "30%"]),
            (
                "test",
                &[
                    "spawn",
                    "shell1",
                    "shell8",
                    "execl",
                    "fsbuffer",
                    "fsdisk",
                    "pipe",
                    "syscall",
                    "context1",
                    "dhry2reg",
                    "whetstone-double",
                ],
            ),
        ],
        machines: &["lkp-icl-2sp9", "lkp-skl-d08", "lkp-csl-d02", "lkp-cfl-d1"],
        stacks: &[
            ST_FORK,
            ST_EXEC,
            ST_EXIT,
            ST_PIPE_WRITE,
            ST_PIPE_READ,
            ST_FAULT_FILE,
        ],
        description: "UnixBench is the original BYTE UNIX benchmark suite aims to test performance of Unix-like system.",
        url: "https://github.com/kdlucas/byte-unixbench",
    },
    TestcaseDef {
        name: "hackbench",
        weight: 1.0,
        params: &[
            ("nr_threads", &["100%", "50%", "800%"]),
            ("iterations", &["4"]),
            ("mode", &["process", "threads"]),
            ("ipc", &["pipe", "socket"]),
        ],
        machines: &[
            "lkp-icl-2sp2",
            "lkp-csl-2sp7",
            "lkp-srf-2sp1",
            "lkp-skl-fpga01",
        ],
        stacks: &[ST_PIPE_WRITE, ST_PIPE_READ, ST_UNIX, ST_WAKEUP, ST_SCHEDULE],
        description: "Hackbench is both a benchmark and a stress test for the Linux kernel scheduler.",
        url: "https://github.com/linux-test-project/ltp/blob/master/testcases/kernel/sched/cfs-scheduler/hackbench.c",
    },
    TestcaseDef {
        name: "lmbench3",
        weight: 0.8,
        params: &[
            ("test_memory_size", &["50%"]),
            ("nr_threads", &["100%", "20%"]),
            ("mode", &["development"]),
            ("test", &["TCP", "UNIX", "PIPE"]),
        ],
        machines: &["lkp-spr-2sp4", "igk-spr-2sp1", "lkp-icl-2sp2"],
        stacks: &[
            ST_TCP_SEND,
            ST_TCP_RECV,
            ST_UNIX,
            ST_PIPE_WRITE,
            ST_PIPE_READ,
            ST_SKB_ALLOC,
        ],
        description: "lmbench is a suite of simple, portable benchmarks for UNIX and POSIX systems.",
        url: "http://www.bitmover.com/lmbench/",
    },
    TestcaseDef {
        name: "aim9",
        weight: 0.6,
        params: &[
            ("testtime", &["300s", "5s"]),
            (
                "test",
                &[
                    "disk_src",
                    "page_test",
                    "brk_test",
                    "exec_test",
                    "fork_test",
                    "shell_rtns_3",
                    "creat-clo",
                    "signal_test",
                    "sync_disk_rw",
                ],
            ),
        ],
        machines: &["lkp-ivb-2ep1", "lkp-skl-d08", "lkp-cfl-d1"],
        stacks: &[
            ST_FORK,
            ST_EXEC,
            ST_CREAT,
            ST_EXT4_WRITE,
            ST_FAULT_ANON,
            ST_EXIT,
        ],
        description: "Suite IX is the AIM Independent Resource Benchmark, the famous synthetic benchmark.",
        url: "https://sourceforge.net/projects/aimbench/files/aim-suite9/",
    },
    TestcaseDef {
        name: "fsmark",
        weight: 0.8,
        params: &[
            ("iterations", &["1x", "8"]),
            ("nr_threads", &["32t", "4", "1"]),
            ("disk", &["1SSD", "1HDD", "1BRD_32G"]),
            ("fs", &["ext4", "xfs", "btrfs", "f2fs"]),
            ("filesize", &["4K", "8K", "16MB", "9B"]),
            ("test_size", &["400M", "24G", "64G"]),
            ("sync_method", &["NoSync", "fsyncBeforeClose"]),
            ("nr_directories", &["16d"]),
            ("nr_files_per_directory", &["256fpd"]),
        ],
        machines: &["lkp-icl-2sp7", "lkp-csl-2sp7", "lkp-cfl-d1", "lkp-skl-d08"],
        stacks: &[ST_EXT4_WRITE, ST_XFS_WRITE, ST_CREAT, ST_FSYNC, ST_UNLINK],
        description: "The fsmark is a file system benchmark to test synchronous write workloads, for example, mail servers workload.",
        url: "https://sourceforge.net/projects/fsmark/",
    },
    TestcaseDef {
        name: "phoronix-test-suite",
        weight: 0.5,
        params: &[
            ("test", &["osbench-1.0.2"]),
            (
                "option_a",
                &[
                    "Launch Programs",
                    "Create Threads",
                    "Create Processes",
                    "Create Files",
                    "Memory Allocations",
                ],
            ),
        ],
        machines: &["lkp-csl-2sp7", "lkp-icl-2sp7"],
        stacks: &[ST_FORK, ST_EXEC, ST_EXIT, ST_FAULT_ANON, ST_COW],
        description: "The Phoronix Test Suite is the most comprehensive testing and benchmarking platform available that provides an extensible framework for which new tests can be easily added.",
        url: "http://www.phoronix-test-suite.com/",
    },
    TestcaseDef {
        name: "kbuild",
        weight: 0.5,
        params: &[
            ("runtime", &["300s"]),
            ("nr_task", &["50%", "200%"]),
            ("target", &["autoksyms_recursive", "vmlinux"]),
            ("build_kconfig", &["defconfig", "allyesconfig"]),
        ],
        machines: &["lkp-csl-2sp9", "lkp-icl-2sp2", "lkp-cpl-4sp2"],
        stacks: &[ST_FAULT_FILE, ST_EXEC, ST_FORK, ST_EXIT, ST_TIMER],
        description: "A kernel build benchmark: builds the kernel over and over with the given number of jobs.",
        url: "https://github.com/intel/lkp-tests/blob/master/programs/kbuild/",
    },
];

/// A metric and the range its level is drawn from (log-uniform).
type Spec = (&'static str, f64, f64);

const PERF_C2C: &[Spec] = &[
    ("perf-c2c.DRAM.local", 50.0, 2e4),
    ("perf-c2c.DRAM.remote", 50.0, 2e4),
    ("perf-c2c.HITM.local", 20.0, 1e4),
    ("perf-c2c.HITM.remote", 20.0, 5e3),
    ("perf-c2c.HITM.total", 50.0, 1.5e4),
];
const SYSTEM: &[Spec] = &[
    ("cpuidle..time", 1e8, 1e11),
    ("cpuidle..usage", 1e5, 1e9),
    ("uptime.boot", 80.0, 400.0),
    ("uptime.idle", 1e3, 1e5),
    ("vmstat.cpu.id", 2.0, 95.0),
    ("vmstat.cpu.sy", 2.0, 90.0),
    ("vmstat.cpu.us", 1.0, 60.0),
    ("vmstat.io.bo", 10.0, 1e5),
    ("vmstat.memory.cache", 1e6, 3e7),
    ("vmstat.memory.free", 1e7, 5e8),
    ("vmstat.procs.r", 1.0, 250.0),
    ("vmstat.system.cs", 1e3, 4e7),
    ("vmstat.system.in", 1e3, 2e6),
    ("mpstat.cpu.all.idle%", 1.0, 70.0),
    ("mpstat.cpu.all.iowait%", 0.01, 1.0),
    ("mpstat.cpu.all.irq%", 0.05, 2.0),
    ("mpstat.cpu.all.soft%", 0.02, 5.0),
    ("mpstat.cpu.all.sys%", 1.0, 70.0),
    ("mpstat.cpu.all.usr%", 0.5, 40.0),
    ("mpstat.max_utilization.seconds", 1.0, 60.0),
    ("mpstat.max_utilization_pct", 40.0, 100.0),
];
const NUMA_NUMASTAT: &[Spec] = &[
    ("local_node", 1e5, 1e9),
    ("numa_hit", 1e5, 1e9),
    ("other_node", 1e3, 1e6),
];
const NUMA_MEMINFO: &[Spec] = &[
    ("Active", 1e4, 2e7),
    ("Active(anon)", 1e4, 2e7),
    ("AnonHugePages", 1e4, 5e6),
    ("AnonPages", 1e5, 2e7),
    ("FilePages", 1e5, 2e7),
    ("KernelStack", 1e4, 1e5),
    ("Mapped", 1e4, 1e6),
    ("MemUsed", 1e6, 5e7),
    ("PageTables", 1e3, 1e6),
    ("SUnreclaim", 1e5, 2e6),
    ("Shmem", 1e4, 1e7),
];
const NUMA_VMSTAT: &[Spec] = &[
    ("nr_active_anon", 1e3, 5e6),
    ("nr_anon_pages", 1e4, 5e6),
    ("nr_file_pages", 1e4, 5e6),
    ("nr_mapped", 1e3, 3e5),
    ("nr_page_table_pages", 100.0, 3e5),
    ("nr_shmem", 1e3, 3e6),
    ("nr_zone_active_anon", 1e3, 5e6),
    ("numa_hit", 1e5, 1e9),
    ("numa_local", 1e5, 1e9),
];
const MEMINFO: &[Spec] = &[
    ("meminfo.Active", 1e5, 5e7),
    ("meminfo.Active(anon)", 1e5, 5e7),
    ("meminfo.AnonHugePages", 1e4, 1e7),
    ("meminfo.AnonPages", 1e5, 5e7),
    ("meminfo.Cached", 1e6, 5e7),
    ("meminfo.Committed_AS", 1e6, 5e7),
    ("meminfo.Inactive", 1e5, 3e7),
    ("meminfo.Inactive(anon)", 1e5, 3e7),
    ("meminfo.KernelStack", 1e4, 2e5),
    ("meminfo.Mapped", 1e4, 2e6),
    ("meminfo.Memused", 1e6, 1e8),
    ("meminfo.PageTables", 1e4, 2e6),
    ("meminfo.SUnreclaim", 1e5, 3e6),
    ("meminfo.Shmem", 1e4, 2e7),
    ("meminfo.Slab", 1e5, 5e6),
    ("meminfo.max_used_kB", 1e6, 1e8),
];
const TURBOSTAT: &[Spec] = &[
    ("turbostat.Avg_MHz", 300.0, 3000.0),
    ("turbostat.Busy%", 5.0, 70.0),
    ("turbostat.Bzy_MHz", 2000.0, 3800.0),
    ("turbostat.C1", 1e4, 1e8),
    ("turbostat.C1%", 0.1, 20.0),
    ("turbostat.C1E%", 0.1, 30.0),
    ("turbostat.C6%", 1.0, 60.0),
    ("turbostat.CPU%c1", 1.0, 60.0),
    ("turbostat.CPU%c6", 0.5, 50.0),
    ("turbostat.CoreTmp", 40.0, 80.0),
    ("turbostat.IPC", 0.3, 2.5),
    ("turbostat.IRQ", 1e6, 2e8),
    ("turbostat.NMI", 1e4, 1e7),
    ("turbostat.POLL", 1e3, 1e6),
    ("turbostat.PkgTmp", 40.0, 80.0),
    ("turbostat.PkgWatt", 100.0, 700.0),
    ("turbostat.RAMWatt", 10.0, 60.0),
];
const PROC_VMSTAT: &[Spec] = &[
    ("proc-vmstat.nr_active_anon", 1e4, 1e7),
    ("proc-vmstat.nr_anon_pages", 1e4, 1e7),
    ("proc-vmstat.nr_file_pages", 1e5, 1e7),
    ("proc-vmstat.nr_inactive_anon", 1e4, 5e6),
    ("proc-vmstat.nr_kernel_stack", 1e3, 5e4),
    ("proc-vmstat.nr_mapped", 1e4, 5e5),
    ("proc-vmstat.nr_page_table_pages", 1e3, 5e5),
    ("proc-vmstat.nr_shmem", 1e4, 5e6),
    ("proc-vmstat.nr_slab_reclaimable", 1e4, 2e5),
    ("proc-vmstat.nr_slab_unreclaimable", 1e4, 5e5),
    ("proc-vmstat.nr_zone_active_anon", 1e4, 1e7),
    ("proc-vmstat.numa_hint_faults", 1e3, 1e6),
    ("proc-vmstat.numa_hit", 1e6, 1e10),
    ("proc-vmstat.numa_local", 1e6, 1e10),
    ("proc-vmstat.numa_pte_updates", 1e3, 1e6),
    ("proc-vmstat.pgactivate", 1e3, 1e7),
    ("proc-vmstat.pgalloc_normal", 1e6, 1e10),
    ("proc-vmstat.pgfault", 1e5, 1e10),
    ("proc-vmstat.pgfree", 1e6, 1e10),
    ("proc-vmstat.pgmigrate_success", 1e3, 1e6),
    ("proc-vmstat.pgreuse", 1e4, 1e7),
    ("proc-vmstat.thp_fault_alloc", 10.0, 1e5),
    ("proc-vmstat.unevictable_pgs_culled", 1e3, 1e5),
];
const PERF_STAT_COUNTERS: &[Spec] = &[
    ("branch-instructions", 1e9, 1e11),
    ("branch-misses", 1e6, 1e9),
    ("cache-misses", 1e6, 1e9),
    ("cache-references", 1e7, 5e9),
    ("context-switches", 1e3, 4e7),
    ("cpu-cycles", 1e10, 1e12),
    ("cpu-migrations", 10.0, 1e7),
    ("dTLB-load-misses", 1e5, 1e8),
    ("dTLB-loads", 1e9, 1e11),
    ("dTLB-stores", 1e9, 5e10),
    ("iTLB-load-misses", 1e5, 1e8),
    ("instructions", 1e9, 5e11),
    ("minor-faults", 1e3, 1e7),
    ("node-load-misses", 1e4, 1e7),
    ("node-loads", 1e5, 1e8),
    ("page-faults", 1e3, 1e7),
];
const PERF_STAT_RATIOS: &[Spec] = &[
    ("MPKI", 0.1, 10.0),
    ("branch-miss-rate%", 0.2, 5.0),
    ("cache-miss-rate%", 1.0, 60.0),
    ("cpi", 0.4, 6.0),
    ("cycles-between-cache-misses", 100.0, 5e4),
    ("dTLB-store-miss-rate%", 0.01, 0.5),
    ("iTLB-load-miss-rate%", 5.0, 60.0),
    ("instructions-per-iTLB-miss", 500.0, 5e4),
    ("ipc", 0.2, 2.5),
];
const PERF_STAT_METRICS: &[Spec] = &[
    ("metric.GHz", 0.1, 3.0),
    ("metric.K/sec", 10.0, 1000.0),
    ("metric.M/sec", 10.0, 1000.0),
];
const SCHED_DEBUG: &[Spec] = &[
    ("sched_debug.cfs_rq:/.avg_vruntime.avg", 1e4, 1e8),
    ("sched_debug.cfs_rq:/.avg_vruntime.max", 1e4, 2e8),
    ("sched_debug.cfs_rq:/.avg_vruntime.stddev", 1e3, 1e7),
    ("sched_debug.cfs_rq:/.h_nr_queued.avg", 0.2, 3.0),
    ("sched_debug.cfs_rq:/.load.avg", 1e3, 1e6),
    ("sched_debug.cfs_rq:/.load.max", 1e5, 5e6),
    ("sched_debug.cfs_rq:/.load_avg.avg", 10.0, 5e3),
    ("sched_debug.cfs_rq:/.load_avg.max", 500.0, 6e4),
    ("sched_debug.cfs_rq:/.min_vruntime.avg", 1e4, 1e8),
    ("sched_debug.cfs_rq:/.runnable_avg.avg", 50.0, 1200.0),
    ("sched_debug.cfs_rq:/.runnable_avg.stddev", 20.0, 400.0),
    ("sched_debug.cfs_rq:/.util_avg.avg", 50.0, 1000.0),
    ("sched_debug.cfs_rq:/.util_avg.stddev", 20.0, 300.0),
    ("sched_debug.cfs_rq:/.util_est.avg", 20.0, 800.0),
    ("sched_debug.cpu.avg_idle.avg", 1e4, 1e6),
    ("sched_debug.cpu.avg_idle.min", 500.0, 1e5),
    ("sched_debug.cpu.clock.avg", 1e5, 1e6),
    ("sched_debug.cpu.clock.stddev", 1.0, 100.0),
    ("sched_debug.cpu.curr->pid.avg", 500.0, 5e4),
    ("sched_debug.cpu.curr->pid.max", 5e3, 1e5),
    ("sched_debug.cpu.nr_running.avg", 0.2, 3.0),
    ("sched_debug.cpu.nr_switches.avg", 1e4, 1e7),
    ("sched_debug.cpu.nr_switches.max", 1e4, 2e7),
    ("sched_debug.cpu.nr_switches.min", 1e3, 5e6),
    ("sched_debug.cpu.nr_switches.stddev", 1e3, 1e6),
    ("sched_debug.cpu.nr_uninterruptible.stddev", 1.0, 100.0),
    ("sched_debug.cpu_clk", 1e5, 1e6),
    ("sched_debug.ktime", 1e5, 1e6),
];
const PERF_SCHED_SITES: &[&str] = &[
    "smpboot_thread_fn.kthread.ret_from_fork.ret_from_fork_asm",
    "schedule_timeout.rcu_gp_fqs_loop.rcu_gp_kthread.kthread",
    "do_wait.kernel_wait4.do_syscall_64.entry_SYSCALL_64_after_hwframe",
    "worker_thread.kthread.ret_from_fork.ret_from_fork_asm",
    "pipe_read.vfs_read.ksys_read.do_syscall_64",
    "schedule_hrtimeout_range.do_poll.constprop.0.do_sys_poll",
    "__cond_resched.zap_pmd_range.isra.0.unmap_page_range",
    "do_task_dead.do_exit.do_group_exit.__x64_sys_exit_group.x64_sys_call",
    "schedule_timeout.__wait_for_common.wait_for_completion_state.kernel_clone",
    "irqentry_exit_to_user_mode.asm_exc_page_fault.[unknown]",
];
const PERF_SCHED_KINDS: &[Spec] = &[
    ("sch_delay.avg.ms", 0.001, 2.0),
    ("sch_delay.max.ms", 0.5, 50.0),
    ("wait_and_delay.avg.ms", 1.0, 500.0),
    ("wait_and_delay.count", 10.0, 1e6),
    ("wait_and_delay.max.ms", 10.0, 5000.0),
    ("wait_time.avg.ms", 1.0, 500.0),
    ("wait_time.max.ms", 10.0, 5000.0),
];
const SLAB_CACHES: &[&str] = &[
    "kmalloc-64",
    "kmalloc-256",
    "kmalloc-cg-64",
    "dentry",
    "filp",
    "vm_area_struct",
    "anon_vma",
    "anon_vma_chain",
    "radix_tree_node",
    "buffer_head",
    "task_struct",
    "mm_struct",
    "skbuff_head_cache",
    "ext4_inode_cache",
    "xfs_inode",
    "sighand_cache",
];
const SOFTIRQS: &[Spec] = &[
    ("softirqs.NET_RX", 1e3, 1e8),
    ("softirqs.RCU", 1e5, 1e8),
    ("softirqs.SCHED", 1e5, 1e8),
    ("softirqs.TIMER", 1e4, 1e7),
    ("interrupts.CAL:Function_call_interrupts", 1e4, 1e8),
    ("interrupts.RES:Rescheduling_interrupts", 1e4, 1e8),
    ("interrupts.TLB:TLB_shootdowns", 1e3, 1e8),
];

/// A tree and branch the robot tests, with the repository line it prints.
#[derive(Debug)]
struct Branch {
    name: &'static str,
    repo: &'static str,
    area: Option<Area>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Area {
    Mm,
    Cgroup,
    Sched,
    Fs,
    Net,
    Lock,
}

static BRANCHES: &[Branch] = &[
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

const FIRST_NAMES: &[&str] = &[
    "Wei", "Anna", "Marco", "Priya", "Jonas", "Sara", "Kenji", "Olga", "Tomas", "Lena", "Ravi",
    "Mei", "David", "Elena", "Hiro", "Nadia", "Pavel", "Ines", "Chen", "Lukas",
];
const LAST_NAMES: &[&str] = &[
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
const MAIL_DOMAINS: &[&str] = &[
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

fn area_list(area: Area) -> &'static str {
    match area {
        Area::Mm => "<linux-mm@kvack.org>",
        Area::Cgroup => "<cgroups@vger.kernel.org>",
        Area::Sched | Area::Lock => "<x86@kernel.org>",
        Area::Fs => "<linux-fsdevel@vger.kernel.org>",
        Area::Net => "<netdev@vger.kernel.org>",
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics of a job
// ---------------------------------------------------------------------------------------------

/// Order of metric groups in a table, as the modern robot prints them: the test's own metrics,
/// then the monitors, then perf-stat, sched_debug and the profiles.
fn group_of(name: &str, testcase: &str) -> u8 {
    let program = program(name);
    if program == testcase {
        return 0;
    }
    if let Some(rest) = name.strip_prefix("perf-profile.") {
        return if rest.starts_with("calltrace") {
            18
        } else if rest.starts_with("children") {
            19
        } else {
            20
        };
    }
    match program {
        "perf-c2c" => 1,
        "cpuidle" => 2,
        "uptime" => 3,
        "numa-numastat" => 4,
        "vmstat" => 5,
        "mpstat" => 6,
        "numa-meminfo" => 7,
        "numa-vmstat" => 8,
        "meminfo" => 9,
        "turbostat" => 10,
        "softirqs" => 11,
        "interrupts" => 12,
        "slabinfo" => 13,
        "perf-sched" => 15,
        "perf-stat" => 16,
        "sched_debug" => 17,
        _ => 14,
    }
}

#[derive(Debug, Clone)]
struct MetricDef {
    name: String,
    lo: f64,
    hi: f64,
    group: u8,
    /// Position in the vocabulary: row order within a monitor group.
    order: u32,
    /// Can be a report's headline: the test's own index metrics, which have a direction.
    headline: bool,
}

/// `100%` of 96 threads is 96; `16` is 16.
fn resolve_count(value: &str, threads: u32) -> u32 {
    match value.strip_suffix('%') {
        Some(pct) => (f64::from(threads) * pct.parse::<f64>().unwrap_or(100.0) / 100.0)
            .round()
            .max(1.0) as u32,
        None => value.parse().unwrap_or(threads),
    }
}

fn seconds(value: Option<&str>) -> Option<f64> {
    value?.strip_suffix('s')?.parse().ok()
}

/// The test's own metrics, the primary headline first: (name, lo, hi, headline-capable).
fn testcase_metrics(
    tc: &TestcaseDef,
    p: &BTreeMap<String, String>,
    m: &MachineDef,
) -> Vec<(String, f64, f64, bool)> {
    let name = tc.name;
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or_default();
    let t = |suffix: &str| format!("{name}.{suffix}");
    let mut out: Vec<(String, f64, f64, bool)> = Vec::new();
    let mut runtime = seconds(p.get("runtime").map(String::as_str))
        .or_else(|| seconds(p.get("testtime").map(String::as_str)));
    let mut with_time = true;
    match name {
        "will-it-scale" => {
            let process = get("mode") == "process";
            let ops = if process {
                "per_process_ops"
            } else {
                "per_thread_ops"
            };
            out.push((t(ops), 1e4, 2e7, true));
            let n = resolve_count(get("nr_task"), m.threads);
            let unit = if process { "processes" } else { "threads" };
            out.push((format!("{name}.{n}.{unit}"), 1e5, 1e9, false));
            out.push((t("workload"), 1e5, 1e9, false));
            with_time = false;
        }
        "vm-scalability" => {
            out.push((t("throughput"), 1e5, 5e8, true));
            out.push((t("median"), 1e4, 2e7, true));
            out.push((t("workload"), 1e7, 5e10, false));
            out.push((t("stddev%"), 0.5, 30.0, false));
        }
        "stress-ng" => {
            let test = get("test");
            out.push((format!("{name}.{test}.ops_per_sec"), 10.0, 4e7, true));
            out.push((format!("{name}.{test}.ops"), 1e3, 2e9, false));
            match test {
                "switch" => out.push((
                    format!(
                        "{name}.switch.nanosecs_per_context_switch_{}_method",
                        get("method").replace('-', "_")
                    ),
                    200.0,
                    2e4,
                    false,
                )),
                "bigheap" => out.push((t("bigheap.realloc_calls_per_sec"), 1e3, 1e6, true)),
                "cpu-online" => {
                    out.push((
                        t("cpu-online.millisecs_per_online_action"),
                        1.0,
                        50.0,
                        false,
                    ));
                }
                _ => {}
            }
        }
        "aim7" => {
            out.push((t("jobs-per-min"), 1e3, 5e5, true));
            runtime = None;
        }
        "netperf" => {
            let test = get("test");
            let (unit, lo, hi) = if test.ends_with("_RR") || test.ends_with("_CRR") {
                ("tps", 1e3, 1e5)
            } else {
                ("Mbps", 100.0, 5e4)
            };
            out.push((format!("{name}.Throughput_{unit}"), lo, hi, true));
            out.push((
                format!("{name}.Throughput_total_{unit}"),
                lo * 50.0,
                hi * 50.0,
                true,
            ));
            out.push((t("workload"), 1e7, 1e10, false));
        }
        "unixbench" => {
            out.push((t("throughput"), 1e3, 1e6, true));
            out.push((t("score"), 100.0, 2e4, true));
            out.push((t("workload"), 1e6, 1e10, false));
        }
        "hackbench" => {
            out.push((t("throughput"), 1e4, 1e6, true));
            out.push((t("throughput_avg"), 1e4, 1e6, true));
            out.push((t("throughput_best"), 1e4, 1e6, true));
            out.push((t("throughput_worst"), 1e4, 1e6, true));
            runtime = None;
        }
        "lmbench3" => match get("test") {
            "UNIX" => {
                out.push((t("AF_UNIX.sock.stream.bandwidth.MB/sec"), 5e3, 5e4, true));
                out.push((t("AF_UNIX.sock.stream.latency.us"), 2.0, 30.0, true));
            }
            "PIPE" => {
                out.push((t("PIPE.bandwidth.MB/sec"), 3e3, 3e4, true));
                out.push((t("PIPE.latency.us"), 2.0, 30.0, true));
            }
            _ => {
                out.push((t("TCP.socket.bandwidth.10MB.MB/sec"), 1e4, 3e5, true));
                out.push((t("TCP.socket.bandwidth.64B.MB/sec"), 100.0, 5e3, true));
                out.push((t("TCP.localhost.latency"), 5.0, 60.0, true));
            }
        },
        "aim9" => {
            out.push((
                format!("{name}.{}.ops_per_sec", get("test")),
                1e3,
                1e6,
                true,
            ));
        }
        "fsmark" => {
            out.push((t("files_per_sec"), 100.0, 2e5, true));
            out.push((t("app_overhead"), 1e5, 1e9, true));
            runtime = None;
        }
        "phoronix-test-suite" => {
            let option: String = get("option_a").split_whitespace().collect();
            out.push((
                format!("{name}.osbench.{option}.us_per_event"),
                5.0,
                300.0,
                true,
            ));
        }
        "kbuild" => {
            out.push((t("buildtime_per_iteration"), 20.0, 1500.0, true));
            out.push((t("workload"), 1.0, 50.0, false));
        }
        _ => {}
    }
    if with_time {
        let (lo, hi) = runtime.map_or((10.0, 400.0), |r| (r, r * 1.1));
        let cpu = f64::from(m.threads) * 98.0;
        for (suffix, lo, hi) in [
            ("elapsed_time", lo, hi),
            ("elapsed_time.max", lo, hi),
            ("involuntary_context_switches", 1e2, 1e8),
            ("minor_page_faults", 1e4, 1e9),
            ("percent_of_cpu_this_job_got", 30.0_f64.min(cpu), cpu),
            ("system_time", 1.0, 3e4),
            ("user_time", 1.0, 1e4),
            ("voluntary_context_switches", 1e3, 1e9),
        ] {
            out.push((format!("{name}.time.{suffix}"), lo, hi, false));
        }
    }
    out
}

/// The monitors a job's tables can show (everything but the test's own metrics).
fn monitor_metrics(m: &MachineDef, rng: &mut Rng) -> Vec<(String, f64, f64)> {
    let mut out: Vec<(String, f64, f64)> = Vec::new();
    let mut add = |name: String, lo: f64, hi: f64| out.push((name, lo, hi));
    for &(n, lo, hi) in PERF_C2C.iter().chain(SYSTEM) {
        add(n.to_owned(), lo, hi);
    }
    let nodes = m.sockets.max(1);
    for node in 0..nodes {
        for &(n, lo, hi) in NUMA_NUMASTAT {
            add(format!("numa-numastat.node{node}.{n}"), lo, hi);
        }
    }
    for node in 0..nodes {
        for &(n, lo, hi) in NUMA_MEMINFO {
            add(format!("numa-meminfo.node{node}.{n}"), lo, hi);
        }
    }
    for node in 0..nodes {
        for &(n, lo, hi) in NUMA_VMSTAT {
            add(format!("numa-vmstat.node{node}.{n}"), lo, hi);
        }
    }
    for &(n, lo, hi) in MEMINFO.iter().chain(TURBOSTAT) {
        add(n.to_owned(), lo, hi);
    }
    for &(n, lo, hi) in SOFTIRQS {
        add(n.to_owned(), lo, hi);
    }
    // Three distinct CPUs: a table never names one metric twice.
    let mut cpus: Vec<usize> = (0..3).map(|_| rng.below(m.threads as usize)).collect();
    cpus.sort_unstable();
    cpus.dedup();
    for cpu in cpus {
        add(format!("softirqs.CPU{cpu}.RCU"), 1e4, 1e6);
    }
    let mut caches: Vec<&str> = SLAB_CACHES.to_vec();
    for i in 0..4.min(caches.len()) {
        let j = i + rng.below(caches.len() - i);
        caches.swap(i, j);
    }
    caches.truncate(4);
    caches.sort_unstable();
    for cache in caches {
        add(format!("slabinfo.{cache}.active_objs"), 1e3, 1e6);
        add(format!("slabinfo.{cache}.active_slabs"), 10.0, 3e4);
        add(format!("slabinfo.{cache}.num_objs"), 1e3, 1e6);
        add(format!("slabinfo.{cache}.num_slabs"), 10.0, 3e4);
    }
    for &(n, lo, hi) in PROC_VMSTAT {
        add(n.to_owned(), lo, hi);
    }
    let mut sites: Vec<&str> = (0..4).map(|_| *rng.pick(PERF_SCHED_SITES)).collect();
    sites.sort_unstable();
    sites.dedup();
    for &(kind, lo, hi) in PERF_SCHED_KINDS {
        for site in &sites {
            add(format!("perf-sched.{kind}.{site}"), lo, hi);
        }
    }
    // perf-stat prints per-interval values (`i`), whole-run ratios (`overall`) and per-second
    // counters (`ps`).
    for &(n, lo, hi) in PERF_STAT_COUNTERS
        .iter()
        .chain(PERF_STAT_RATIOS)
        .chain(PERF_STAT_METRICS)
    {
        add(format!("perf-stat.i.{n}"), lo, hi);
    }
    for &(n, lo, hi) in PERF_STAT_RATIOS {
        add(format!("perf-stat.overall.{n}"), lo, hi);
    }
    for &(n, lo, hi) in PERF_STAT_COUNTERS {
        add(format!("perf-stat.ps.{n}"), lo, hi);
    }
    add("perf-stat.total.instructions".to_owned(), 1e12, 1e14);
    for &(n, lo, hi) in SCHED_DEBUG {
        add(n.to_owned(), lo, hi);
    }
    out
}

/// perf-profile rows from a few call chains: a `calltrace` per frame (the frame and up to four
/// callers, callee first, as perf prints them), `children` per function, `self` for leaves.
/// Shares shrink towards the leaf, as cumulative cycles do.
fn profile_metrics(stacks: &[Stack], rng: &mut Rng) -> Vec<(String, f64, f64)> {
    let mut seen = HashSet::new();
    let mut calltrace = Vec::new();
    let mut children = Vec::new();
    let mut selfs = Vec::new();
    for stack in stacks {
        let share = if stack.first() == Some(&"common_startup_64") {
            rng.log_uniform(8.0, 60.0)
        } else {
            rng.log_uniform(2.0, 40.0)
        };
        let len = stack.len();
        for k in 0..len {
            let level = share * (1.0 - 0.6 * k as f64 / len as f64);
            let frames: Vec<&str> = stack[k.saturating_sub(4)..=k]
                .iter()
                .rev()
                .copied()
                .collect();
            let name = format!("perf-profile.calltrace.cycles-pp.{}", frames.join("."));
            if seen.insert(name.clone()) {
                calltrace.push((name, level * 0.85, level * 1.15));
            }
            let name = format!("perf-profile.children.cycles-pp.{}", stack[k]);
            if seen.insert(name.clone()) {
                children.push((name, level * 0.9, level * 1.2));
            }
        }
        let mut self_frames = vec![stack[len - 1]];
        for _ in 0..2 {
            self_frames.push(*rng.pick(stack));
        }
        for (i, frame) in self_frames.into_iter().enumerate() {
            let name = format!("perf-profile.self.cycles-pp.{frame}");
            if seen.insert(name.clone()) {
                let (lo, hi) = if i == 0 {
                    (share * 0.2, share * 0.5)
                } else {
                    (0.05, 2.0)
                };
                selfs.push((name, lo, hi));
            }
        }
    }
    calltrace.into_iter().chain(children).chain(selfs).collect()
}

// ---------------------------------------------------------------------------------------------
// Jobs and their series
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Job {
    testcase: &'static TestcaseDef,
    machine: &'static MachineDef,
    /// The `parameters:` block, in job-file order.
    prose_params: Vec<(String, String)>,
    /// Every axis of the parameter header, testcase and tbox_group included.
    axes: BTreeMap<String, String>,
    /// Canonical parameters (axes minus testcase and tbox_group).
    params_key: String,
    /// Core metrics first (`core` of them, the primary headline at 0), then the pool.
    metrics: Vec<MetricDef>,
    core: usize,
    /// Level each metric starts at, and its noise (relative standard deviation).
    level0: Vec<f64>,
    noise: Vec<f64>,
    weight: f64,
    /// Fraction of the time span during which the job runs.
    window: (f64, f64),
}

impl Job {
    fn identity(&self) -> (&'static str, &'static str, String) {
        (
            self.testcase.name,
            self.machine.tbox,
            self.params_key.clone(),
        )
    }
}

fn new_job(rng: &mut Rng, config: &SynthConfig, series: usize) -> Job {
    let tc = &TESTCASES[rng.weighted(TESTCASES.iter().map(|t| t.weight))];
    let window = if rng.chance(0.3) {
        (0.0, 1.0)
    } else {
        let start = rng.uniform(-0.2, 0.85).max(0.0);
        (start, (start + rng.uniform(0.3, 1.0)).min(1.0))
    };
    // Machine and toolchain are those of the job's first year, so no report shows a box or a
    // rootfs from its future.
    let first_year = config
        .start_year
        .saturating_add((window.0 * f64::from(config.years.max(1))).floor() as i32);
    let candidates: Vec<&'static MachineDef> =
        tc.machines.iter().filter_map(|t| machine(t)).collect();
    let current: Vec<&'static MachineDef> = candidates
        .iter()
        .copied()
        .filter(|m| m.since <= first_year)
        .collect();
    let pool = if current.is_empty() {
        &candidates
    } else {
        &current
    };
    let m: &'static MachineDef = match pool.len() {
        0 => &MACHINES[0],
        n => pool[rng.below(n)],
    };
    let toolchains: Vec<_> = TOOLCHAINS
        .iter()
        .filter(|t| t.3 <= first_year && first_year <= t.4)
        .collect();
    let &(compiler, kconfig, rootfs, _, _) = match toolchains.len() {
        0 => &TOOLCHAINS[0],
        n => toolchains[rng.below(n)],
    };

    let mut prose: Vec<(String, String)> = Vec::new();
    for (key, choices) in tc.params {
        // Not every job of a testcase sets every parameter (small-allocs has no size).
        if *key == "size" && rng.chance(0.2) {
            continue;
        }
        prose.push(((*key).to_owned(), (*rng.pick(choices)).to_owned()));
        let value = prose.last().map(|(_, v)| v.clone()).unwrap_or_default();
        match (tc.name, *key, value.as_str()) {
            ("stress-ng", "test", "switch") => {
                prose.push((
                    "method".to_owned(),
                    (*rng.pick(&["mq", "pipe", "sem-sysv"])).to_owned(),
                ));
            }
            ("stress-ng", "test", "metamix" | "shm") if rng.chance(0.6) => {
                prose.push(("disk".to_owned(), "1HDD".to_owned()));
                prose.push((
                    "fs".to_owned(),
                    (*rng.pick(&["xfs", "ext4", "btrfs"])).to_owned(),
                ));
            }
            ("netperf", "test", "TCP_SENDFILE") => {
                prose.push(("send_size".to_owned(), "10K".to_owned()));
            }
            _ => {}
        }
    }
    prose.push((PERF.0.to_owned(), PERF.1[0].to_owned()));
    if first_year <= 2022 && !m.ucode.is_empty() && rng.chance(0.4) {
        prose.push(("ucode".to_owned(), (*rng.pick(m.ucode)).to_owned()));
    }
    let rootfs = if tc.name == "phoronix-test-suite" {
        "debian-x86_64-phoronix"
    } else {
        rootfs
    };
    let mut axes: BTreeMap<String, String> = prose.iter().cloned().collect();
    axes.insert("compiler".to_owned(), compiler.to_owned());
    axes.insert("kconfig".to_owned(), kconfig.to_owned());
    axes.insert("rootfs".to_owned(), rootfs.to_owned());
    let mut key_params = axes.clone();
    axes.insert("tbox_group".to_owned(), m.tbox.to_owned());
    axes.insert("testcase".to_owned(), tc.name.to_owned());
    key_params.remove("tbox_group");
    let params_key = canonical_params(&key_params);

    // The test's own metrics are always core series; monitors fill the rest at random.
    let own = testcase_metrics(tc, &key_params, m);
    let mut stacks: Vec<Stack> = vec![ST_IDLE];
    let mut family: Vec<Stack> = tc.stacks.to_vec();
    for _ in 0..rng.between(2, 4) {
        if family.is_empty() {
            break;
        }
        stacks.push(family.swap_remove(rng.below(family.len())));
    }
    for extra in [ST_IDLE_TTWU, ST_TIMER, ST_RCU] {
        if rng.chance(0.3) {
            stacks.push(extra);
        }
    }
    let mut pool: Vec<(String, f64, f64)> = monitor_metrics(m, rng);
    pool.extend(profile_metrics(&stacks, rng));
    let own_names: HashSet<&str> = own.iter().map(|(n, ..)| n.as_str()).collect();
    pool.retain(|(n, ..)| !own_names.contains(n.as_str()));

    let def = |(i, (name, lo, hi, headline)): (usize, (String, f64, f64, bool))| MetricDef {
        group: group_of(&name, tc.name),
        order: i as u32,
        name,
        lo,
        hi,
        headline,
    };
    let mut own_defs: Vec<MetricDef> = own.into_iter().enumerate().map(def).collect();
    let mut pool_defs: Vec<MetricDef> = pool
        .into_iter()
        .map(|(n, lo, hi)| (n, lo, hi, false))
        .enumerate()
        .map(def)
        .collect();
    let core_target = series.clamp(1, 150);
    own_defs.truncate(core_target);
    let from_pool = core_target
        .saturating_sub(own_defs.len())
        .min(pool_defs.len());
    for i in 0..from_pool {
        let j = i + rng.below(pool_defs.len() - i);
        pool_defs.swap(i, j);
    }
    let core = own_defs.len() + from_pool;
    let mut metrics = own_defs;
    metrics.extend(pool_defs);

    let series_seed = rng.next_u64();
    let (level0, noise): (Vec<f64>, Vec<f64>) = metrics
        .iter()
        .map(|d| {
            let level =
                Rng::derive(series_seed, hash_str(&level_key(&d.name))).log_uniform(d.lo, d.hi);
            let mut r = Rng::derive(series_seed, !hash_str(&d.name));
            let noise = if d.headline {
                r.log_uniform(0.005, 0.03)
            } else {
                r.log_uniform(0.005, 0.08)
            };
            (level, noise)
        })
        .unzip();

    Job {
        testcase: tc,
        machine: m,
        prose_params: prose,
        axes,
        params_key,
        metrics,
        core,
        level0,
        noise,
        weight: rng.log_uniform(0.3, 3.0),
        window,
    }
}

/// Metrics that measure nearly the same thing share their level (an `elapsed_time.max` below
/// its `elapsed_time`, or more active slabs than slabs, would look wrong): the name of the
/// metric whose level a metric takes. Both draw from the same range.
fn level_key(name: &str) -> std::borrow::Cow<'_, str> {
    const SAME: &[(&str, &str)] = &[
        ("elapsed_time.max", "elapsed_time"),
        (".active_objs", ".num_objs"),
        (".active_slabs", ".num_slabs"),
        (".numa_local", ".numa_hit"),
        (".local_node", ".numa_hit"),
        (".nr_zone_active_anon", ".nr_active_anon"),
        (".Active(anon)", ".Active"),
        (".minor-faults", ".page-faults"),
        (".pgfree", ".pgalloc_normal"),
    ];
    for (suffix, instead) in SAME {
        if let Some(stem) = name.strip_suffix(suffix) {
            return format!("{stem}{instead}").into();
        }
    }
    name.into()
}

/// Smallest step a series can carry and still show in the report that carries it.
fn min_step_pct(noise: f64) -> f64 {
    (noise * 100.0 * MIN_STEP_SIGMAS).max(MIN_STEP_PCT)
}

/// Plans the steps of one job over its appearances (report index, main test or not):
/// returns, per report index, the (metric index, change %) pairs.
///
/// A report whose "In addition" box lists the job always carries a headline step (the robot
/// lists only tests that moved). As the main test, an appearance carries one with probability
/// 0.2, and not within [`EVENT_GAP`] appearances of the previous one, so that series have flat
/// stretches for change-point detection to work on. A headline step drags some of the test's
/// other metrics along (and a few monitors); independently, about one core series in ten gets
/// a step of its own somewhere.
fn plan_steps(
    job: &Job,
    appearances: &[(usize, bool)],
    rng: &mut Rng,
) -> BTreeMap<usize, Vec<(usize, f64)>> {
    let mut plan: BTreeMap<usize, Vec<(usize, f64)>> = BTreeMap::new();
    let mut level: Vec<f64> = job.level0[..job.core].to_vec();
    let headlines: Vec<usize> = (0..job.core).filter(|&i| job.metrics[i].headline).collect();
    let independent = 0.1 / appearances.len().saturating_sub(1).max(1) as f64;
    let mut last_event: Option<usize> = None;
    for (k, &(report, main)) in appearances.iter().enumerate() {
        let mut here: Vec<(usize, f64)> = Vec::new();
        let mut step = |m: usize, pct: f64, here: &mut Vec<(usize, f64)>| {
            let lo = min_step_pct(job.noise[m]);
            if lo > MAX_STEP_PCT || level[m] < MIN_STEP_LEVEL || here.iter().any(|&(i, _)| i == m) {
                return;
            }
            let mut pct = pct.signum() * pct.abs().clamp(lo, MAX_STEP_PCT);
            let after = level[m] * (1.0 + pct / 100.0);
            let def = &job.metrics[m];
            // Keep levels plausible: percentages under 100, everything within its range's
            // neighbourhood. Flip the step rather than drop it.
            if (def.name.ends_with('%') && after > 95.0) || after > def.hi * 4.0 {
                pct = -pct.abs();
            } else if after < def.lo / 4.0 {
                pct = pct.abs();
            }
            level[m] *= 1.0 + pct / 100.0;
            here.push((m, pct));
        };
        let rested = last_event.is_none_or(|e| k >= e + EVENT_GAP);
        let event = !main || (rested && rng.chance(0.2));
        if event {
            last_event = Some(k);
        }
        if event && !headlines.is_empty() {
            let lead = if rng.chance(0.75) {
                headlines[0]
            } else {
                headlines[rng.below(headlines.len())]
            };
            let lo = min_step_pct(job.noise[lead]);
            let sign = if rng.chance(0.5) { 1.0 } else { -1.0 };
            let size = rng.log_uniform(lo, MAX_STEP_PCT);
            step(lead, sign * size, &mut here);
            for m in 0..job.core {
                if m == lead {
                    continue;
                }
                let def = &job.metrics[m];
                if def.group == 0 && rng.chance(0.4) {
                    let same = if def.headline || rng.chance(0.5) {
                        sign
                    } else {
                        -sign
                    };
                    let size = size * rng.uniform(0.6, 1.1);
                    step(m, same * size, &mut here);
                } else if def.group != 0 && rng.chance(0.05) {
                    let s = if rng.chance(0.5) { 1.0 } else { -1.0 };
                    let size = rng.log_uniform(min_step_pct(job.noise[m]), MAX_STEP_PCT);
                    step(m, s * size, &mut here);
                }
            }
        }
        if k > 0 {
            for m in 0..job.core {
                if !job.metrics[m].headline && rng.chance(independent) {
                    let s = if rng.chance(0.5) { 1.0 } else { -1.0 };
                    let size = rng.log_uniform(min_step_pct(job.noise[m]), MAX_STEP_PCT);
                    step(m, s * size, &mut here);
                }
            }
        }
        if !here.is_empty() {
            plan.insert(report, here);
        }
    }
    plan
}

// ---------------------------------------------------------------------------------------------
// Number formatting, exactly as lkp-tests prints tables
// ---------------------------------------------------------------------------------------------

/// A mean as LKP prints it: `%.2f` below 1000, the truncated integer up to 1e8, four
/// significant digits in exponent form above (`2.352e+08`).
fn fmt_mean(v: f64) -> String {
    let a = v.abs();
    if a < 1000.0 {
        format!("{v:.2}")
    } else if a < 1e8 {
        (v.trunc() as i64).to_string()
    } else {
        fmt_g4(v)
    }
}

/// C's `%.4g` for values whose exponent is at least 4 (always exponent form): mantissa without
/// trailing zeros, exponent signed with at least two digits.
fn fmt_g4(v: f64) -> String {
    let s = format!("{v:.3e}");
    let (mantissa, exponent) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// A change as LKP prints it: `+34.5%` relative (exponent form when huge), `-0.1` absolute.
fn fmt_change(base: f64, head: f64, unit: ChangeUnit) -> String {
    match unit {
        ChangeUnit::Absolute => format!("{:+.1}", head - base),
        ChangeUnit::Percent => {
            let pct = (head - base) / base * 100.0;
            if pct.abs() < 1e5 {
                format!("{pct:+.1}%")
            } else {
                let g = format!("{pct:.1e}");
                let (m, e) = g.split_once('e').unwrap_or((g.as_str(), "0"));
                let e: i32 = e.parse().unwrap_or(0);
                let m = m.trim_end_matches('0').trim_end_matches('.');
                let sign = if m.starts_with('-') { "" } else { "+" };
                format!("{sign}{m}e{}{:02}%", if e < 0 { '-' } else { '+' }, e.abs())
            }
        }
    }
}

/// One table row in LKP's column layout: mean `%10s`, ` ±%3d%%` or six blanks, change
/// right-aligned in ten plus its `%` (or a blank), mean `%11s`, stddev, two blanks, metric.
fn push_row(
    out: &mut String,
    base: f64,
    base_sd: Option<u32>,
    change: &str,
    head: f64,
    head_sd: Option<u32>,
    metric: &str,
) {
    let sd = |sd: Option<u32>| match sd {
        Some(s) => format!(" ±{s:>3}%"),
        None => "      ".to_owned(),
    };
    let (number, suffix) = match change.strip_suffix('%') {
        Some(n) => (n, "%"),
        None => (change, " "),
    };
    let _ = writeln!(
        out,
        "{:>10}{}{number:>10}{suffix}{:>11}{}  {metric}",
        fmt_mean(base),
        sd(base_sd),
        fmt_mean(head),
        sd(head_sd),
    );
}

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

static DIRECTIONS: LazyLock<DirectionTable> = LazyLock::new(DirectionTable::default);

const EQUALS: &str =
    "=========================================================================================";
const STARS: &str = "***************************************************************************************************";
const ARROW: &str = "-------------------------------------------------------------------------------------------------->";

/// One row before printing.
#[derive(Debug)]
struct RowOut {
    metric: usize,
    group: u8,
    order: u32,
    base: f64,
    head: f64,
    change: String,
}

/// One comparison table before printing, with the truth about it.
#[derive(Debug)]
struct TestOut {
    job: usize,
    rows: String,
    n_rows: usize,
    headline_metric: String,
    headline_change: String,
    headline_change_pct: f64,
    kind: Kind,
    /// Base and head value and noise of the headline metric, for legacy plots.
    headline_levels: (f64, f64, f64),
}

/// Draws and prints one job's table for one report, advancing the job's core levels past the
/// steps planted here and recording them.
#[allow(clippy::too_many_arguments)]
fn render_test(
    job_index: usize,
    job: &Job,
    levels: &mut [f64],
    steps_here: &[(usize, f64)],
    report: usize,
    main: bool,
    rng: &mut Rng,
    steps_out: &mut Vec<PlantedStep>,
) -> TestOut {
    let target = if main {
        rng.between(20, 150)
    } else {
        rng.between(20, 80)
    };
    let pool = job.metrics.len() - job.core;
    let extra = target.saturating_sub(job.core).min(pool);
    let mut chosen: Vec<usize> = (job.core..job.metrics.len()).collect();
    for i in 0..extra {
        let j = i + rng.below(chosen.len() - i);
        chosen.swap(i, j);
    }
    chosen.truncate(extra);

    let step_of =
        |m: usize| -> Option<f64> { steps_here.iter().find(|&&(i, _)| i == m).map(|&(_, p)| p) };
    let mut rows: Vec<RowOut> = Vec::with_capacity(job.core + extra);
    for m in (0..job.core).chain(chosen) {
        let def = &job.metrics[m];
        let noise = job.noise[m];
        let (base_level, head_level) = if m < job.core {
            let before = levels[m];
            let after = match step_of(m) {
                Some(pct) => {
                    steps_out.push(PlantedStep {
                        testcase: job.testcase.name.to_owned(),
                        tbox_group: job.machine.tbox.to_owned(),
                        params: job.params_key.clone(),
                        metric: def.name.clone(),
                        at_report_index: report,
                        change_pct: pct,
                        noise_pct: noise * 100.0,
                    });
                    before * (1.0 + pct / 100.0)
                }
                None => before,
            };
            levels[m] = after;
            (before, after)
        } else {
            (job.level0[m], job.level0[m])
        };
        let base = base_level * (1.0 + noise * rng.bounded_gaussian());
        let head = head_level * (1.0 + noise * rng.bounded_gaussian());
        let change = fmt_change(base, head, change_unit(&def.name));
        rows.push(RowOut {
            metric: m,
            group: def.group,
            order: def.order,
            base,
            head,
            change,
        });
    }
    rows.sort_by(|a, b| {
        a.group.cmp(&b.group).then_with(|| match a.group {
            0 => job.metrics[a.metric].name.cmp(&job.metrics[b.metric].name),
            18..=20 => (a.head - a.base).total_cmp(&(b.head - b.base)),
            _ => a.order.cmp(&b.order),
        })
    });

    // The headline: the test's own index metric that stepped most here; without a step, the
    // one that moved most (as the robot would pick it), else the primary one.
    let printed = |r: &RowOut| r.change.trim_end_matches('%').parse::<f64>().unwrap_or(0.0);
    let headline = (0..job.core)
        .filter(|&m| job.metrics[m].headline)
        .filter_map(|m| step_of(m).map(|p| (m, p)))
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .map(|(m, _)| m)
        .or_else(|| {
            rows.iter()
                .filter(|r| job.metrics[r.metric].headline)
                .max_by(|a, b| printed(a).abs().total_cmp(&printed(b).abs()))
                .map(|r| r.metric)
        })
        .unwrap_or(0);

    let mut text = String::new();
    let mut headline_change = String::new();
    let mut headline_levels = (0.0, 0.0, 0.0);
    for row in &rows {
        let noise = job.noise[row.metric];
        let sd = |rng: &mut Rng| {
            let s = (noise * 100.0 * rng.uniform(0.4, 1.6)).trunc() as u32;
            (s > 2).then_some(s)
        };
        let (bsd, hsd) = (sd(rng), sd(rng));
        push_row(
            &mut text,
            row.base,
            bsd,
            &row.change,
            row.head,
            hsd,
            &job.metrics[row.metric].name,
        );
        if row.metric == headline {
            headline_change = row.change.clone();
            headline_levels = (row.base, row.head, noise);
        }
    }
    let headline_metric = job.metrics[headline].name.clone();
    let headline_change_pct: f64 = headline_change.trim_end_matches('%').parse().unwrap_or(0.0);
    let direction = DIRECTIONS
        .direction(&headline_metric)
        .unwrap_or(Direction::HigherIsBetter);
    let kind = if headline_change_pct * direction.sign() >= 0.0 {
        Kind::Improvement
    } else {
        Kind::Regression
    };
    TestOut {
        job: job_index,
        rows: text,
        n_rows: rows.len(),
        headline_metric,
        headline_change,
        headline_change_pct,
        kind,
        headline_levels,
    }
}

/// The number the prose states: the table's change without its sign, except where the robot
/// kept the sign (a lower-is-better metric that fell, and, in legacy and some modern reports,
/// a regression that fell).
fn stated_number(test: &TestOut, format: SynthFormat, rng: &mut Rng) -> String {
    let number = test.headline_change.trim_end_matches('%');
    let magnitude = number.trim_start_matches(['+', '-']);
    if !number.starts_with('-') {
        return magnitude.to_owned();
    }
    let keep_sign = match (test.kind, format) {
        (Kind::Improvement | Kind::Failure, _) | (Kind::Regression, SynthFormat::Legacy) => true,
        (Kind::Regression, SynthFormat::Modern) => rng.chance(0.4),
    };
    if keep_sign {
        format!("-{magnitude}")
    } else {
        magnitude.to_owned()
    }
}

/// The "In addition to that" box: one entry per extra test, each closed by a rule, the value
/// column as wide as its longest cell.
fn addition_box(entries: &[(String, String, Vec<String>)]) -> String {
    let mut rows: Vec<(&str, &str)> = Vec::new();
    let mut breaks: Vec<usize> = Vec::new();
    for (change, machine, params) in entries {
        rows.push(("testcase: change", change.as_str()));
        rows.push(("test machine", machine.as_str()));
        for (i, p) in params.iter().enumerate() {
            rows.push((if i == 0 { "test parameters" } else { "" }, p.as_str()));
        }
        breaks.push(rows.len());
    }
    let width = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0) + 2;
    let rule = format!("+------------------+{}+\n", "-".repeat(width));
    let mut out = rule.clone();
    for (i, (label, value)) in rows.iter().enumerate() {
        let _ = writeln!(out, "| {label:<16} | {value:<w$} |", w = width - 2);
        if breaks.contains(&(i + 1)) {
            out.push_str(&rule);
        }
    }
    out
}

/// A legacy ASCII plot of the headline metric over bisect samples ('+' good, 'O' bad), on
/// round y ticks two lines apart, like the gnuplot dumb terminal the robot used.
fn ascii_plot(out: &mut String, metric: &str, levels: (f64, f64, f64), rng: &mut Rng) {
    const WIDTH: usize = 66;
    let (good, bad, noise) = levels;
    let good_samples: Vec<f64> = (0..rng.between(15, 30))
        .map(|_| good * (1.0 + noise * rng.bounded_gaussian()))
        .collect();
    let bad_samples: Vec<f64> = (0..rng.between(10, 25))
        .map(|_| bad * (1.0 + noise * rng.bounded_gaussian()))
        .collect();
    let all = || good_samples.iter().chain(&bad_samples).copied();
    let min = all().fold(f64::INFINITY, f64::min);
    let max = all().fold(f64::NEG_INFINITY, f64::max);
    let step = nice_step(((max - min) / 7.0).max(max.abs() * 1e-3).max(1e-6));
    let lo = (min / step).floor() * step;
    let hi = ((max / step).ceil() * step).max(lo + step);
    let ticks = ((hi - lo) / step).round().max(1.0) as usize;
    let height = ticks * 2;
    let mut grid = vec![vec![b' '; WIDTH]; height + 1];
    let mut place = |samples: &[f64], mark: u8, offset: usize| {
        for (i, v) in samples.iter().enumerate() {
            let x = (offset + i * (WIDTH - 4) / samples.len().max(1)).min(WIDTH - 2) + 1;
            let y = (((hi - v) / (hi - lo)) * height as f64).round() as usize;
            grid[y.clamp(1, height.saturating_sub(1).max(1))][x] = mark;
        }
    };
    place(&good_samples, b'+', 0);
    place(&bad_samples, b'O', 2);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let label = |v: f64| format!("{v:.decimals$}");
    let _ = writeln!(out, "\n\n{metric:^80}\n");
    let rule = "-".repeat(WIDTH);
    for (y, row) in grid.iter().enumerate() {
        let value = hi - step * (y / 2) as f64;
        let content = String::from_utf8_lossy(row).into_owned();
        if y == 0 || y == height {
            let _ = writeln!(out, "{:>8} +{rule}+", label(value));
        } else if y.is_multiple_of(2) {
            let content = match content.strip_prefix("  ") {
                Some(rest) => format!("-+{rest}"),
                None => content,
            };
            let _ = writeln!(out, "{:>8} |{content}|", label(value));
        } else {
            let _ = writeln!(out, "         |{content}|");
        }
    }
    out.push_str("\n\n[*] bisect-good sample\n[O] bisect-bad sample\n");
}

/// The round axis step (1, 2 or 5 times a power of ten) nearest above `raw`.
fn nice_step(raw: f64) -> f64 {
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// A commit subject line in kernel style.
fn commit_title(rng: &mut Rng, area: Area) -> String {
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

fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(60).collect()
}

/// Folds a header line once before 78 columns, as the robot's mailer does.
fn fold(name: &str, value: &str) -> String {
    let limit = 78usize.saturating_sub(name.len() + 2);
    if value.len() <= limit {
        return format!("{name}: {value}");
    }
    match value.get(..limit).and_then(|v| v.rfind(' ')) {
        Some(at) if at > 0 => format!("{name}: {}\n{}", &value[..at], &value[at..]),
        _ => format!("{name}: {value}"),
    }
}

/// The robot's time zone: its Date headers and Message-ID stamps are China time.
fn china() -> FixedOffset {
    FixedOffset::east_opt(8 * 3600).unwrap_or_else(|| unreachable!("+08:00 is a valid offset"))
}

fn year_start(year: i32) -> i64 {
    NaiveDate::from_ymd_opt(year, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map_or(0, |d| d.and_utc().timestamp() - 8 * 3600)
}

/// Everything fixed about one report before its tables are drawn.
#[derive(Debug)]
struct Slot {
    time: DateTime<Utc>,
    jobs: Vec<usize>,
}

/// Generates the reports and the steps planted in them.
pub fn generate(config: &SynthConfig) -> Synth {
    let n = config.reports;
    if n == 0 {
        return Synth {
            reports: Vec::new(),
            steps: Vec::new(),
        };
    }
    let start_year = config.start_year.clamp(1971, 9000);
    let years = config.years.clamp(1, 1000);
    let start = year_start(start_year);
    let end = year_start(start_year.saturating_add(years as i32));
    let span = (end - start).max(1) as f64;

    // Jobs: about one per 15 reports, so each series has a few dozen points (jobs also run
    // in an "In addition" box, and only over their window).
    let mut rng = Rng::derive(config.seed, 1);
    let wanted = (n / 15).clamp(n.min(6), 3000);
    let mut jobs: Vec<Job> = Vec::with_capacity(wanted);
    let mut seen = HashSet::new();
    for _ in 0..wanted {
        for _ in 0..20 {
            let job = new_job(&mut rng, config, config.series_per_testcase);
            if seen.insert(job.identity()) {
                jobs.push(job);
                break;
            }
        }
    }
    if jobs.is_empty() {
        return Synth {
            reports: Vec::new(),
            steps: Vec::new(),
        };
    }

    // Schedule: dates increase with the index; each report runs one active job, sometimes
    // with one or two more in an "In addition" box.
    let mut rng = Rng::derive(config.seed, 2);
    let mut slots: Vec<Slot> = Vec::with_capacity(n);
    for i in 0..n {
        let f = (i as f64 + rng.uniform(0.1, 0.9)) / n as f64;
        let secs = start + (f * span) as i64;
        let time = DateTime::<Utc>::from_timestamp(secs, 0).unwrap_or_default();
        let active = |j: &Job| j.window.0 <= f && f <= j.window.1;
        let any_active = jobs.iter().any(active);
        let weight = |j: &Job| {
            if !any_active || active(j) {
                j.weight
            } else {
                0.0
            }
        };
        let main = rng.weighted(jobs.iter().map(&weight));
        let mut chosen = vec![main];
        if jobs.len() > 1 && rng.chance(0.1) {
            let extra = if rng.chance(0.25) { 2 } else { 1 };
            for _ in 0..8 {
                if chosen.len() > extra {
                    break;
                }
                let j = rng.weighted(jobs.iter().map(&weight));
                if !chosen.contains(&j) {
                    chosen.push(j);
                }
            }
        }
        slots.push(Slot { time, jobs: chosen });
    }

    // Steps, planned per job over its appearances.
    let mut appearances: Vec<Vec<(usize, bool)>> = vec![Vec::new(); jobs.len()];
    for (i, slot) in slots.iter().enumerate() {
        for (k, &j) in slot.jobs.iter().enumerate() {
            appearances[j].push((i, k == 0));
        }
    }
    let plans: Vec<BTreeMap<usize, Vec<(usize, f64)>>> = jobs
        .iter()
        .enumerate()
        .map(|(j, job)| {
            let mut r = Rng::derive(config.seed, 0x1000_0000 + j as u64);
            plan_steps(job, &appearances[j], &mut r)
        })
        .collect();

    let mut levels: Vec<Vec<f64>> = jobs.iter().map(|j| j.level0[..j.core].to_vec()).collect();
    let modern_from = year_start(2023) + 59 * 86400; // 2023-03-01, China time
    let mut reports = Vec::with_capacity(n);
    let mut steps = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        let mut rng = Rng::derive(config.seed, 0x2000_0000 + i as u64);
        let format = if slot.time.timestamp() >= modern_from {
            SynthFormat::Modern
        } else {
            SynthFormat::Legacy
        };
        let tests: Vec<TestOut> = slot
            .jobs
            .iter()
            .enumerate()
            .map(|(k, &j)| {
                render_test(
                    j,
                    &jobs[j],
                    &mut levels[j],
                    plans[j].get(&i).map_or(&[], Vec::as_slice),
                    i,
                    k == 0,
                    &mut rng,
                    &mut steps,
                )
            })
            .collect();
        reports.push(render_report(
            i, slot, format, &jobs, &tests, None, &mut rng,
        ));
    }
    Synth { reports, steps }
}

/// A commit the caller chose for a report (the lifecycle scenario sends several reports of one
/// culprit); the report is then never one of a patch from the list.
struct Culprit {
    commit: String,
    title: String,
}

/// Writes one mail around its rendered tables.
fn render_report(
    index: usize,
    slot: &Slot,
    format: SynthFormat,
    jobs: &[Job],
    tests: &[TestOut],
    culprit: Option<&Culprit>,
    rng: &mut Rng,
) -> SynthReport {
    let tz = china();
    let local = slot.time.with_timezone(&tz);
    let year = local.year();
    let main = &tests[0];
    let main_job = &jobs[main.job];

    // Commits and people.
    let head = rng.hex(40);
    let base = rng.hex(40);
    let area = *rng.pick(&[
        Area::Mm,
        Area::Mm,
        Area::Cgroup,
        Area::Sched,
        Area::Fs,
        Area::Net,
        Area::Lock,
    ]);
    let title = commit_title(rng, area);
    let base_title = commit_title(rng, area);
    // Drawn either way, so that a chosen culprit leaves every later draw where it was.
    let (head, title) = match culprit {
        Some(c) => (c.commit.clone(), c.title.clone()),
        None => (head, title),
    };
    let tag = title.split(':').next().unwrap_or("mm").to_owned();
    let first = *rng.pick(FIRST_NAMES);
    let last = *rng.pick(LAST_NAMES);
    let author_mail = format!(
        "{}.{}@{}",
        first.to_lowercase(),
        last.to_lowercase(),
        rng.pick(MAIL_DOMAINS)
    );
    let roll = rng.unit();
    let patch = roll < 0.15 && culprit.is_none();
    let branch: &Branch = if roll < 0.5 {
        &BRANCHES[0]
    } else if roll < 0.75 {
        &BRANCHES[1]
    } else {
        BRANCHES
            .iter()
            .find(|b| b.area == Some(area))
            .unwrap_or(&BRANCHES[0])
    };
    let (robot_mail, robot_name, mutt_host) = if year <= 2020 {
        ("rong.a.chen@intel.com", "Rong Chen", "shao2-debian")
    } else {
        (
            "oliver.sang@intel.com",
            "Oliver Sang",
            "xsang-OptiPlex-9020",
        )
    };

    // Message-ID: the modern robot stamps the report's generation time (China time) into it;
    // legacy mails went out through mutt.
    let generated = slot.time - chrono::Duration::seconds(rng.between(300, 5 * 3600) as i64);
    // A patch from the list: when it was posted, and its own Message-ID (the report replies to
    // it and links it).
    let posted = slot.time - chrono::Duration::days(rng.between(2, 20) as i64);
    let patch_serial = rng.between(1000, 999_999);
    let message_id = match format {
        SynthFormat::Modern => format!(
            "<{}.{}-{}@intel.com>",
            generated.with_timezone(&tz).format("%Y%m%d%H%M"),
            rng.hex(8),
            if year <= 2023 { "oliver.sang" } else { "lkp" }
        ),
        SynthFormat::Legacy => format!(
            "<{}.GA{}@{mutt_host}>",
            slot.time.format("%Y%m%d%H%M%S"),
            rng.between(1000, 32767)
        ),
    };
    let bare_id = message_id.trim_matches(['<', '>']);

    let stated = stated_number(main, format, rng);
    let kind = main.kind.as_str();
    let version = rng.between(1, 5);
    let of = rng.between(1, 6);
    let part = rng.between(1, of);
    let patch_subject = format!("[PATCH v{version} {part}/{of}] {title}");
    let subject = if patch && format == SynthFormat::Modern {
        format!("Re: {patch_subject}")
    } else {
        let metric = &main.headline_metric;
        let short = &head[..10];
        match format {
            SynthFormat::Modern => {
                format!(
                    "[{}] [{tag}]  {short}: {metric} {stated}% {kind}",
                    branch.name
                )
            }
            SynthFormat::Legacy if !patch && rng.chance(0.4) => {
                format!(
                    "[{}] [{tag}] {short}: {metric} {stated}% {kind}",
                    branch.name
                )
            }
            SynthFormat::Legacy => format!("[{tag}] {short}: {metric} {stated}% {kind}"),
        }
    };

    // Headers.
    let mut text = String::new();
    let _ = writeln!(text, "Date: {}", local.format("%a, %-d %b %Y %H:%M:%S %z"));
    let _ = writeln!(text, "From: kernel test robot <{robot_mail}>");
    let _ = writeln!(text, "To: {first} {last} <{author_mail}>");
    match format {
        SynthFormat::Modern => {
            let _ = writeln!(
                text,
                "CC: <oe-lkp@lists.linux.dev>, <lkp@intel.com>, <linux-kernel@vger.kernel.org>,\n\t{}",
                area_list(area)
            );
        }
        SynthFormat::Legacy => {
            let _ = writeln!(
                text,
                "Cc: LKML <linux-kernel@vger.kernel.org>, lkp@lists.01.org, lkp@intel.com,\n\t{}",
                area_list(area).trim_matches(['<', '>'])
            );
        }
    }
    let _ = writeln!(text, "{}", fold("Subject", &subject));
    let _ = writeln!(text, "Message-ID: {message_id}");
    if patch && format == SynthFormat::Modern {
        let _ = writeln!(
            text,
            "In-Reply-To: <{}.{patch_serial}-{part}-{author_mail}>",
            posted.format("%Y%m%d%H%M%S"),
        );
    }
    if format == SynthFormat::Legacy {
        text.push_str("User-Agent: Mutt/1.10.1 (2018-07-13)\n");
    }
    text.push_str(
        "Content-Type: text/plain; charset=utf-8\nContent-Disposition: inline\nContent-Transfer-Encoding: 8bit\nMIME-Version: 1.0\n\n",
    );

    // Opening.
    let metric = &main.headline_metric;
    match format {
        SynthFormat::Modern => {
            let _ = write!(
                text,
                "\nHello,\n\nkernel test robot noticed a {stated}% {kind} of {metric} on:\n\n\n"
            );
        }
        SynthFormat::Legacy => {
            let _ = write!(
                text,
                "\nGreeting,\n\nFYI, we noticed a {stated}% {kind} of {metric} due to commit:\n\n\n"
            );
        }
    }
    let commit_line_title = if patch && format == SynthFormat::Modern {
        &patch_subject
    } else {
        &title
    };
    let _ = writeln!(text, "commit: {head} (\"{commit_line_title}\")");
    let base_repo = BRANCHES
        .iter()
        .find(|b| b.area == Some(area))
        .unwrap_or(&BRANCHES[0])
        .repo;
    if patch {
        let owner = match format {
            SynthFormat::Modern => "intel-lab-lkp",
            SynthFormat::Legacy => "0day-ci",
        };
        let _ = writeln!(
            text,
            "url: https://github.com/{owner}/linux/commits/{first}-{last}/{}/{}",
            slug(&title),
            posted.format("%Y%m%d-%H%M%S")
        );
        let _ = writeln!(text, "base: {base_repo}");
        if format == SynthFormat::Modern {
            let _ = writeln!(
                text,
                "patch link: https://lore.kernel.org/all/{}.{patch_serial}-{part}-{author_mail}/",
                posted.format("%Y%m%d%H%M%S"),
            );
            let _ = writeln!(text, "patch subject: {patch_subject}");
        }
    } else {
        let _ = writeln!(text, "{}", branch.repo);
    }
    if format == SynthFormat::Modern && main.kind == Kind::Regression && !patch && rng.chance(0.15)
    {
        let _ = write!(
            text,
            "\n[still regression on linus/master      {}]\n",
            rng.hex(40)
        );
    }

    let entries: Vec<(String, String, Vec<String>)> = tests[1..]
        .iter()
        .map(|t| {
            let job = &jobs[t.job];
            let number = stated_number(t, format, rng);
            let gap = if format == SynthFormat::Modern && t.kind == Kind::Regression {
                "  "
            } else {
                " "
            };
            let change = format!(
                "{}: {}{gap}{number}% {}",
                job.testcase.name,
                t.headline_metric,
                t.kind.as_str()
            );
            let mut params: Vec<String> = job
                .prose_params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            params.sort();
            (change, job.machine.description(format), params)
        })
        .collect();

    let params_block = |text: &mut String| {
        for (k, v) in &main_job.prose_params {
            let _ = writeln!(text, "\t{k}: {v}");
        }
    };
    match format {
        SynthFormat::Modern => {
            let _ = writeln!(text, "\ntestcase: {}", main_job.testcase.name);
            if year >= 2024 {
                let axis = |k: &str| main_job.axes.get(k).map_or("", String::as_str);
                let _ = writeln!(text, "config: {}", axis("kconfig"));
                let _ = writeln!(text, "compiler: {}", axis("compiler"));
            }
            let _ = writeln!(
                text,
                "test machine: {}\nparameters:\n",
                main_job.machine.description(format)
            );
            params_block(&mut text);
            text.push_str("\n\n");
        }
        SynthFormat::Legacy => {
            let _ = writeln!(
                text,
                "\nin testcase: {}\non test machine: {}\nwith following parameters:\n",
                main_job.testcase.name,
                main_job.machine.description(format)
            );
            params_block(&mut text);
            let _ = write!(
                text,
                "\ntest-description: {}\ntest-url: {}\n\n\n",
                main_job.testcase.description, main_job.testcase.url
            );
        }
    }
    if !entries.is_empty() {
        text.push_str(
            "In addition to that, the commit also has significant impact on the following tests:\n\n",
        );
        text.push_str(&addition_box(&entries));
        text.push_str("\n\n");
    }
    if main.kind == Kind::Regression {
        match format {
            SynthFormat::Modern => {
                let _ = write!(
                    text,
                    "If you fix the issue in a separate patch/commit (i.e. not just a new version of\nthe same patch/commit), kindly add following tags\n| Reported-by: kernel test robot <{robot_mail}>\n| Closes: https://lore.kernel.org/oe-lkp/{bare_id}\n\n\n"
                );
            }
            SynthFormat::Legacy => {
                let _ = write!(
                    text,
                    "If you fix the issue, kindly add following tag\nReported-by: kernel test robot <{robot_mail}>\n\n\n"
                );
            }
        }
    }
    let _ = write!(text, "Details are as below:\n{ARROW}\n\n\n");
    match format {
        SynthFormat::Modern => {
            let _ = write!(
                text,
                "The kernel config and materials to reproduce are available at:\nhttps://download.01.org/0day-ci/archive/{}/{bare_id}\n\n",
                generated.with_timezone(&tz).format("%Y%m%d")
            );
        }
        SynthFormat::Legacy if year <= 2020 => {
            text.push_str("To reproduce:\n\n        git clone https://github.com/intel/lkp-tests.git\n        cd lkp-tests\n        bin/lkp install job.yaml  # job file is attached in this email\n        bin/lkp run     job.yaml\n\n");
        }
        SynthFormat::Legacy => {
            text.push_str("To reproduce:\n\n        git clone https://github.com/intel/lkp-tests.git\n        cd lkp-tests\n        sudo bin/lkp install job.yaml           # job file is attached in this email\n        bin/lkp split-job --compatible job.yaml # generate the yaml file for lkp run\n        sudo bin/lkp run generated-yaml-file\n\n        # if come across any failure that blocks the test,\n        # please remove ~/.lkp and /lkp dir to run from a clean state.\n\n");
        }
    }

    // Tables.
    let detail = |text: &mut String, test: &TestOut| {
        let job = &jobs[test.job];
        let names: Vec<&str> = job.axes.keys().map(String::as_str).collect();
        let values: Vec<&str> = job.axes.values().map(String::as_str).collect();
        let _ = write!(
            text,
            "{EQUALS}\n{}:\n  {}\n\ncommit: \n  {} (\"{base_title}\")\n  {} (\"{title}\")\n\n{} {} \n---------------- --------------------------- \n         %stddev     %change         %stddev\n             \\          |                \\  \n",
            names.join("/"),
            values.join("/"),
            &base[..10],
            &head[..10],
            &base[..16],
            &head[..27],
        );
        text.push_str(&test.rows);
    };
    detail(&mut text, main);
    if format == SynthFormat::Legacy {
        ascii_plot(&mut text, &main.headline_metric, main.headline_levels, rng);
    }
    for test in &tests[1..] {
        let job = &jobs[test.job];
        let machine_line = if year >= 2026 {
            String::new()
        } else {
            format!("{}: {}", job.machine.tbox, job.machine.description(format))
        };
        let _ = writeln!(text, "\n\n\n{STARS}\n{machine_line}");
        detail(&mut text, test);
    }
    text.push_str("\n\n\n\nDisclaimer:\nResults have been estimated based on internal Intel analysis and are provided\nfor informational purposes only. Any difference in system hardware or software\ndesign or configuration may affect actual performance.\n\n\n");
    match (format, year) {
        (SynthFormat::Modern, _) => {
            text.push_str(
                "-- \n0-DAY CI Kernel Test Service\nhttps://github.com/intel/lkp-tests/wiki\n\n",
            );
        }
        (SynthFormat::Legacy, ..=2021) => {
            let _ = write!(
                text,
                "---\n0DAY/LKP+ Test Infrastructure                   Open Source Technology Center\nhttps://lists.01.org/hyperkitty/list/lkp@lists.01.org       Intel Corporation\n\nThanks,\n{robot_name}\n"
            );
        }
        (SynthFormat::Legacy, _) => {
            let _ = write!(
                text,
                "-- \n0-DAY CI Kernel Test Service\nhttps://github.com/intel/lkp-tests\n\n\nThanks,\n{robot_name}\n"
            );
        }
    }

    let truth = tests
        .iter()
        .map(|t| {
            let job = &jobs[t.job];
            SynthTest {
                testcase: job.testcase.name.to_owned(),
                tbox_group: job.machine.tbox.to_owned(),
                params: job.params_key.clone(),
                machine: job.machine.description(format),
                rows: t.n_rows,
                headline_metric: t.headline_metric.clone(),
                headline_change_pct: t.headline_change_pct,
            }
        })
        .collect();
    SynthReport {
        file_name: format!("{index:06}.eml"),
        text,
        testcase: main_job.testcase.name.to_owned(),
        tbox_group: main_job.machine.tbox.to_owned(),
        commit_id: head,
        commit_title: title,
        base_commit_id: base,
        params: main_job.params_key.clone(),
        message_id,
        subject,
        date: slot.time,
        format,
        kind: main.kind,
        headline_metric: main.headline_metric.clone(),
        headline_change_pct: main.headline_change_pct,
        tests: truth,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lkplake_ingest::parser::{Parsed, parse_message};
    use lkplake_schemas::{Report, Source};
    use std::collections::HashMap;

    fn config(reports: usize, seed: u64) -> SynthConfig {
        SynthConfig {
            reports,
            seed,
            start_year: 2019,
            years: 7,
            series_per_testcase: 40,
        }
    }

    fn parse(report: &SynthReport) -> Report {
        let source = Source::file(report.file_name.clone(), 0);
        match parse_message(report.text.as_bytes(), &source) {
            Ok(Parsed::Reports(mut reports)) => {
                assert_eq!(reports.len(), 1, "{}: one report", report.file_name);
                reports.remove(0)
            }
            other => panic!("{}: {other:?}\n{}", report.file_name, report.text),
        }
    }

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        let a = generate(&config(60, 11));
        let b = generate(&config(60, 11));
        assert_eq!(a, b);
        let c = generate(&config(60, 12));
        assert_ne!(a.reports[0].text, c.reports[0].text);
    }

    #[test]
    fn every_report_parses_to_what_was_generated() {
        let synth = generate(&config(400, 7));
        assert_eq!(synth.reports.len(), 400);
        for truth in &synth.reports {
            let r = parse(truth);
            let name = &truth.file_name;
            assert_eq!(r.commit.id, truth.commit_id, "{name}: commit");
            assert_eq!(r.base_commit.id, truth.base_commit_id[..10], "{name}: base");
            assert_eq!(r.message_id.as_deref(), Some(truth.message_id.as_str()));
            assert_eq!(r.date, Some(truth.date), "{name}: date");
            assert_eq!(r.kind, Some(truth.kind), "{name}: kind");
            let headline = r
                .headline
                .as_ref()
                .map(|h| (h.metric.as_str(), h.change_pct));
            assert_eq!(
                headline,
                Some((truth.headline_metric.as_str(), truth.headline_change_pct)),
                "{name}: headline"
            );
            assert_eq!(r.tests.len(), truth.tests.len(), "{name}: tests");
            for (parsed, t) in r.tests.iter().zip(&truth.tests) {
                assert_eq!(parsed.testcase, t.testcase, "{name}");
                assert_eq!(parsed.tbox_group, t.tbox_group, "{name}");
                assert_eq!(canonical_params(&parsed.params), t.params, "{name}");
                assert_eq!(parsed.rows.len(), t.rows, "{name}: rows of {}", t.testcase);
                assert_eq!(
                    parsed.machine.description.as_deref(),
                    Some(t.machine.as_str()),
                    "{name}: machine"
                );
                let h = parsed
                    .headline
                    .as_ref()
                    .map(|h| (h.metric.as_str(), h.change_pct));
                assert_eq!(
                    h,
                    Some((t.headline_metric.as_str(), t.headline_change_pct)),
                    "{name}: headline of {}",
                    t.testcase
                );
                assert_eq!(parsed.commits.len(), 2);
            }
            assert_eq!(truth.testcase, truth.tests[0].testcase);
            assert_eq!(truth.tbox_group, truth.tests[0].tbox_group);
            assert_eq!(truth.params, truth.tests[0].params);
        }
    }

    /// Bound on the difference between a printed mean and the value it was printed from.
    fn printed_error(v: f64) -> f64 {
        if v < 1000.0 {
            0.005
        } else if v < 1e8 {
            1.0
        } else {
            v * 5e-4
        }
    }

    #[test]
    fn planted_steps_show_in_the_parsed_values() {
        let synth = generate(&config(400, 3));
        assert!(synth.steps.len() > 50, "{} steps", synth.steps.len());
        let mut parsed: HashMap<usize, Report> = HashMap::new();
        let mut agree = 0;
        for step in &synth.steps {
            assert!(
                (MIN_STEP_PCT..=MAX_STEP_PCT).contains(&step.change_pct.abs()),
                "{step:?}"
            );
            assert!(step.change_pct.abs() >= MIN_STEP_SIGMAS * step.noise_pct - 1e-9);
            let report = parsed
                .entry(step.at_report_index)
                .or_insert_with(|| parse(&synth.reports[step.at_report_index]));
            let test = report
                .tests
                .iter()
                .find(|t| {
                    t.testcase == step.testcase
                        && t.tbox_group == step.tbox_group
                        && canonical_params(&t.params) == step.params
                })
                .unwrap_or_else(|| panic!("no test for {step:?}"));
            let row = test
                .rows
                .iter()
                .find(|r| r.metric == step.metric)
                .unwrap_or_else(|| panic!("no row for {step:?}"));
            let (b, h) = (row.values[0].mean, row.values[1].mean);
            // The truth: head/base = (1 + step) (1 + e_head) / (1 + e_base), |e| <= 3 sigma.
            let s = NOISE_LIMIT_SIGMA * step.noise_pct / 100.0;
            let expected = 1.0 + step.change_pct / 100.0;
            let (lo, hi) = (
                expected * (1.0 - s) / (1.0 + s),
                expected * (1.0 + s) / (1.0 - s),
            );
            let (obs_lo, obs_hi) = (
                (h - printed_error(h)) / (b + printed_error(b)),
                (h + printed_error(h)) / (b - printed_error(b)),
            );
            assert!(
                obs_hi >= lo * 0.999 && obs_lo <= hi * 1.001,
                "{step:?}: base {b} head {h}, expected ratio in [{lo}, {hi}]"
            );
            if (h - b).signum() == step.change_pct.signum() {
                agree += 1;
            }
        }
        let share = f64::from(agree) / synth.steps.len() as f64;
        assert!(share > 0.97, "only {share} of steps show their direction");
    }

    #[test]
    fn reports_cover_both_formats_additions_and_the_row_range() {
        let synth = generate(&config(500, 5));
        let formats: HashSet<SynthFormat> = synth.reports.iter().map(|r| r.format).collect();
        assert_eq!(formats.len(), 2);
        let with_box = synth.reports.iter().filter(|r| r.tests.len() > 1).count();
        assert!(
            (20..=90).contains(&with_box),
            "{with_box} reports with a box"
        );
        let testcases: HashSet<&str> = synth.reports.iter().map(|r| r.testcase.as_str()).collect();
        assert!(testcases.len() >= 6, "{testcases:?}");
        for r in &synth.reports {
            assert!((20..=150).contains(&r.tests[0].rows), "{}", r.tests[0].rows);
            for t in &r.tests {
                assert!(t.rows >= 20);
            }
            assert!(r.text.contains("%stddev"));
        }
        assert!(synth.reports.windows(2).all(|w| w[0].date < w[1].date));
        assert!(synth.reports.iter().any(|r| r.kind == Kind::Regression));
        assert!(synth.reports.iter().any(|r| r.kind == Kind::Improvement));
        let first = synth.reports.first().map(|r| r.date.to_rfc3339());
        assert!(first.is_some_and(|d| d.starts_with("2018-12-31") || d.starts_with("2019")));
    }

    #[test]
    fn odd_configs_still_give_parseable_reports() {
        assert!(generate(&config(0, 1)).reports.is_empty());
        for (series, start_year, years) in [(0, 2024, 1), (500, 2019, 2), (1, 2020, 40)] {
            let cfg = SynthConfig {
                reports: 40,
                seed: 99,
                start_year,
                years,
                series_per_testcase: series,
            };
            let synth = generate(&cfg);
            assert_eq!(synth.reports.len(), 40);
            for truth in &synth.reports {
                let r = parse(truth);
                assert_eq!(r.tests.len(), truth.tests.len());
                assert!((20..=150).contains(&r.tests[0].rows.len()));
                assert_eq!(r.tests[0].rows.len(), truth.tests[0].rows);
            }
            if start_year >= 2024 {
                assert!(
                    synth
                        .reports
                        .iter()
                        .all(|r| r.format == SynthFormat::Modern)
                );
            }
        }
    }

    #[test]
    fn headline_metrics_have_a_direction() {
        for tc in TESTCASES {
            for (k, choices) in tc.params {
                for v in *choices {
                    let mut p = BTreeMap::new();
                    for (k2, c2) in tc.params {
                        p.insert((*k2).to_owned(), c2[0].to_owned());
                    }
                    p.insert((*k).to_owned(), (*v).to_owned());
                    p.insert("method".to_owned(), "mq".to_owned());
                    for (name, lo, hi, headline) in testcase_metrics(tc, &p, &MACHINES[0]) {
                        assert!(lo <= hi, "{name}");
                        if headline {
                            assert!(DIRECTIONS.direction(&name).is_some(), "{name}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rows_are_laid_out_like_lkp() {
        let mut out = String::new();
        push_row(
            &mut out,
            5222.7,
            Some(19),
            "-22.2%",
            4060.2,
            Some(16),
            "numa-meminfo.node1.Active(anon)",
        );
        push_row(
            &mut out,
            1.69,
            None,
            "+0.1",
            1.80,
            Some(2),
            "turbostat.C1E%",
        );
        push_row(
            &mut out,
            14072.0,
            None,
            "+4.1%",
            14642.0,
            None,
            "vmstat.system.cs",
        );
        push_row(
            &mut out,
            2.352e8,
            None,
            "+34.5%",
            3.164e8,
            None,
            "vm-scalability.median",
        );
        push_row(
            &mut out,
            2.40,
            Some(107),
            "+5.3",
            7.74,
            Some(47),
            "perf-profile.children.cycles-pp.path_openat",
        );
        assert_eq!(
            out,
            "      5222 ± 19%     -22.2%       4060 ± 16%  numa-meminfo.node1.Active(anon)\n\
             \x20     1.69            +0.1        1.80 ±  2%  turbostat.C1E%\n\
             \x20    14072            +4.1%      14642        vmstat.system.cs\n\
             \x202.352e+08           +34.5%  3.164e+08        vm-scalability.median\n\
             \x20     2.40 ±107%      +5.3        7.74 ± 47%  perf-profile.children.cycles-pp.path_openat\n"
        );
    }

    #[test]
    fn means_print_like_lkp() {
        assert_eq!(fmt_mean(0.004), "0.00");
        assert_eq!(fmt_mean(98.316), "98.32");
        assert_eq!(fmt_mean(9835435.9), "9835435");
        assert_eq!(fmt_mean(1.34e10), "1.34e+10");
        assert_eq!(fmt_mean(8.8e8), "8.8e+08");
        assert_eq!(fmt_mean(5e11), "5e+11");
        assert_eq!(fmt_mean(2.3524e8), "2.352e+08");
        assert_eq!(fmt_change(100.0, 134.5, ChangeUnit::Percent), "+34.5%");
        assert_eq!(fmt_change(0.34, 0.20, ChangeUnit::Absolute), "-0.1");
        assert_eq!(fmt_change(1.0, 1201.0, ChangeUnit::Percent), "+1.2e+05%");
    }

    #[test]
    fn write_all_writes_one_file_per_report() -> std::io::Result<()> {
        let synth = generate(&config(5, 1));
        let dir = std::env::temp_dir().join(format!("lkplake-synth-{}", std::process::id()));
        write_all(&synth, &dir)?;
        for r in &synth.reports {
            assert_eq!(std::fs::read_to_string(dir.join(&r.file_name))?, r.text);
        }
        std::fs::remove_dir_all(&dir)
    }
}
