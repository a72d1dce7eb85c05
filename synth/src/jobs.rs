//! Jobs and their series: a job is one (testcase, machine, parameters) configuration with its
//! metrics, their starting levels and noise; its steps are planned over its appearances.

use crate::SynthConfig;
use crate::machines::{MACHINES, MachineDef, TOOLCHAINS, machine};
use crate::metrics::{MetricDef, group_of, monitor_metrics, profile_metrics, testcase_metrics};
use crate::rng::{Rng, hash_str};
use crate::testcases::{
    PERF, ST_IDLE, ST_IDLE_TTWU, ST_RCU, ST_TIMER, Stack, TESTCASES, TestcaseDef,
};
use lkplake_schemas::key::canonical_params;
use std::collections::{BTreeMap, HashSet};

/// Smallest step, in noise standard deviations of the series: the difference of two noisy
/// columns has √2 σ, so a 4 σ step stands out by 2.8 of them.
pub(crate) const MIN_STEP_SIGMAS: f64 = 4.0;
pub(crate) const MIN_STEP_PCT: f64 = 3.0;
pub(crate) const MAX_STEP_PCT: f64 = 40.0;
/// Appearances of a job between two steps of its headline, where the robot does not force one.
const EVENT_GAP: usize = 3;
/// Levels below this print with too little resolution (`%.2f`) for a small step to show.
const MIN_STEP_LEVEL: f64 = 0.5;

/// One (testcase, machine, parameters) configuration with its series.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) testcase: &'static TestcaseDef,
    pub(crate) machine: &'static MachineDef,
    /// The `parameters:` block, in job-file order.
    pub(crate) prose_params: Vec<(String, String)>,
    /// Every axis of the parameter header, testcase and tbox_group included.
    pub(crate) axes: BTreeMap<String, String>,
    /// Canonical parameters (axes minus testcase and tbox_group).
    pub(crate) params_key: String,
    /// Core metrics first (`core` of them, the primary headline at 0), then the pool.
    pub(crate) metrics: Vec<MetricDef>,
    pub(crate) core: usize,
    /// Level each metric starts at, and its noise (relative standard deviation).
    pub(crate) level0: Vec<f64>,
    pub(crate) noise: Vec<f64>,
    pub(crate) weight: f64,
    /// Fraction of the time span during which the job runs.
    pub(crate) window: (f64, f64),
}

impl Job {
    pub(crate) fn identity(&self) -> (&'static str, &'static str, String) {
        (
            self.testcase.name,
            self.machine.tbox,
            self.params_key.clone(),
        )
    }
}

/// Draws a job: its testcase, window, machine, toolchain, parameters, metrics and their levels.
pub(crate) fn new_job(rng: &mut Rng, config: &SynthConfig, series: usize) -> Job {
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
    let m = pick_machine(tc, first_year, rng);
    let (compiler, kconfig, rootfs) = pick_toolchain(first_year, rng);
    let prose = prose_params(tc, m, first_year, rng);
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
    let (metrics, core) = job_metrics(tc, m, &key_params, series, rng);
    let (level0, noise) = series_levels(&metrics, rng.next_u64());

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

/// One of the testcase's machines that was in service in `first_year` (any of them if none
/// was yet).
fn pick_machine(tc: &TestcaseDef, first_year: i32, rng: &mut Rng) -> &'static MachineDef {
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
    match pool.len() {
        0 => &MACHINES[0],
        n => pool[rng.below(n)],
    }
}

/// A toolchain the robot used in `first_year`: (compiler, kconfig, rootfs).
fn pick_toolchain(first_year: i32, rng: &mut Rng) -> (&'static str, &'static str, &'static str) {
    let toolchains: Vec<_> = TOOLCHAINS
        .iter()
        .filter(|t| t.3 <= first_year && first_year <= t.4)
        .collect();
    let &(compiler, kconfig, rootfs, _, _) = match toolchains.len() {
        0 => &TOOLCHAINS[0],
        n => toolchains[rng.below(n)],
    };
    (compiler, kconfig, rootfs)
}

/// The `parameters:` block, in job-file order: a value per parameter of the testcase (and the
/// parameters some values bring along), the governor, and on older boxes now and then the
/// microcode.
fn prose_params(
    tc: &TestcaseDef,
    m: &MachineDef,
    first_year: i32,
    rng: &mut Rng,
) -> Vec<(String, String)> {
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
    prose
}

/// The job's metrics, its `core` series first (the primary headline at 0), then the pool; and
/// `core`.
fn job_metrics(
    tc: &TestcaseDef,
    m: &MachineDef,
    key_params: &BTreeMap<String, String>,
    series: usize,
    rng: &mut Rng,
) -> (Vec<MetricDef>, usize) {
    // The test's own metrics are always core series; monitors fill the rest at random.
    let own = testcase_metrics(tc, key_params, m);
    let stacks = profile_stacks(tc, rng);
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
    (metrics, core)
}

/// The call chains the job's profile shows: the idle loop, two to four of the testcase's own,
/// and now and then a wakeup, timer or RCU chain.
fn profile_stacks(tc: &TestcaseDef, rng: &mut Rng) -> Vec<Stack> {
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
    stacks
}

/// Each metric's starting level and noise, from streams of its own under `series_seed`, so
/// that the levels of one job's metrics do not depend on which of them it has.
fn series_levels(metrics: &[MetricDef], series_seed: u64) -> (Vec<f64>, Vec<f64>) {
    metrics
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
        .unzip()
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
pub(crate) fn plan_steps(
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
