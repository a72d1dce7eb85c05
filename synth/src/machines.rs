//! The robot's test machines and the toolchains it built kernels with, surveyed from the sample
//! reports, the cgroups/LKP corpus (2020-2026) and lkp-tests' job files.

use crate::SynthFormat;

#[derive(Debug)]
pub(crate) struct MachineDef {
    pub(crate) tbox: &'static str,
    pub(crate) threads: u32,
    pub(crate) sockets: u32,
    /// Empty for boxes the robot names only by codename (`104 threads 2 sockets (Skylake)`).
    cpu: &'static str,
    codename: &'static str,
    memory_gb: u32,
    /// First year the box shows up in reports.
    pub(crate) since: i32,
    pub(crate) ucode: &'static [&'static str],
}

impl MachineDef {
    /// As the report prints it. Legacy reports often left out the codename.
    pub(crate) fn description(&self, format: SynthFormat) -> String {
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

pub(crate) static MACHINES: &[MachineDef] = &[
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

pub(crate) fn machine(tbox: &str) -> Option<&'static MachineDef> {
    MACHINES.iter().find(|m| m.tbox == tbox)
}

/// (compiler, kconfig, rootfs, first year, last year): the robot moved all three together.
pub(crate) const TOOLCHAINS: &[(&str, &str, &str, i32, i32)] = &[
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
