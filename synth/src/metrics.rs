//! The metrics of a job: the test's own (by testcase and parameters), the monitors' and the
//! perf-profile call chains', each with the range its level is drawn from, and the group that
//! orders it in a table.

use crate::machines::MachineDef;
use crate::monitors::{
    MEMINFO, NUMA_MEMINFO, NUMA_NUMASTAT, NUMA_VMSTAT, PERF_C2C, PERF_SCHED_KINDS,
    PERF_SCHED_SITES, PERF_STAT_COUNTERS, PERF_STAT_METRICS, PERF_STAT_RATIOS, PROC_VMSTAT,
    SCHED_DEBUG, SLAB_CACHES, SOFTIRQS, SYSTEM, TURBOSTAT,
};
use crate::rng::Rng;
use crate::testcases::{Stack, TestcaseDef};
use lkplake_schemas::metric::program;
use std::collections::{BTreeMap, HashSet};

/// Order of metric groups in a table, as the modern robot prints them: the test's own metrics,
/// then the monitors, then perf-stat, sched_debug and the profiles.
pub(crate) fn group_of(name: &str, testcase: &str) -> u8 {
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
pub(crate) struct MetricDef {
    pub(crate) name: String,
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) group: u8,
    /// Position in the vocabulary: row order within a monitor group.
    pub(crate) order: u32,
    /// Can be a report's headline: the test's own index metrics, which have a direction.
    pub(crate) headline: bool,
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
pub(crate) fn testcase_metrics(
    tc: &TestcaseDef,
    p: &BTreeMap<String, String>,
    m: &MachineDef,
) -> Vec<(String, f64, f64, bool)> {
    let name = tc.name;
    let mut out = index_metrics(name, p, m);
    let runtime = seconds(p.get("runtime").map(String::as_str))
        .or_else(|| seconds(p.get("testtime").map(String::as_str)));
    match name {
        // will-it-scale prints no `time.*` metrics.
        "will-it-scale" => {}
        // These run a fixed amount of work, not for a set time: elapsed time from the default
        // range.
        "aim7" | "hackbench" | "fsmark" => time_metrics(&mut out, name, None, m),
        _ => time_metrics(&mut out, name, runtime, m),
    }
    out
}

/// The metrics the test itself computes, by testcase.
fn index_metrics(
    name: &str,
    p: &BTreeMap<String, String>,
    m: &MachineDef,
) -> Vec<(String, f64, f64, bool)> {
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or_default();
    let t = |suffix: &str| format!("{name}.{suffix}");
    let mut out: Vec<(String, f64, f64, bool)> = Vec::new();
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
        }
        "vm-scalability" => {
            out.push((t("throughput"), 1e5, 5e8, true));
            out.push((t("median"), 1e4, 2e7, true));
            out.push((t("workload"), 1e7, 5e10, false));
            out.push((t("stddev%"), 0.5, 30.0, false));
        }
        "stress-ng" => stress_ng_metrics(name, p, &mut out),
        "aim7" => out.push((t("jobs-per-min"), 1e3, 5e5, true)),
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
        }
        "lmbench3" => lmbench_metrics(name, get("test"), &mut out),
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
    out
}

/// stress-ng's metrics: its stressor's ops and ops per second, and what some stressors report
/// besides.
fn stress_ng_metrics(
    name: &str,
    p: &BTreeMap<String, String>,
    out: &mut Vec<(String, f64, f64, bool)>,
) {
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or_default();
    let t = |suffix: &str| format!("{name}.{suffix}");
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

/// lmbench3's bandwidths and latencies of the transport under test.
fn lmbench_metrics(name: &str, test: &str, out: &mut Vec<(String, f64, f64, bool)>) {
    let t = |suffix: &str| format!("{name}.{suffix}");
    match test {
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
    }
}

/// The `time.*` metrics of the test's run, elapsed time around its runtime when it has one.
fn time_metrics(
    out: &mut Vec<(String, f64, f64, bool)>,
    name: &str,
    runtime: Option<f64>,
    m: &MachineDef,
) {
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

/// The monitors a job's tables can show (everything but the test's own metrics).
pub(crate) fn monitor_metrics(m: &MachineDef, rng: &mut Rng) -> Vec<(String, f64, f64)> {
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
pub(crate) fn profile_metrics(stacks: &[Stack], rng: &mut Rng) -> Vec<(String, f64, f64)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::MACHINES;
    use crate::table::DIRECTIONS;
    use crate::testcases::TESTCASES;

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
}
