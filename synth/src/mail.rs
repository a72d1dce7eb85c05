//! The mail around the tables: the robot's headers and prose in its legacy and modern layouts,
//! the "In addition to that" box, the legacy ASCII plot and the footer.

use crate::commits::{
    Area, BRANCHES, Branch, FIRST_NAMES, LAST_NAMES, MAIL_DOMAINS, area_list, commit_title,
};
use crate::jobs::Job;
use crate::rng::Rng;
use crate::table::TestOut;
use crate::{Slot, SynthFormat, SynthReport, SynthTest};
use chrono::{DateTime, Datelike, FixedOffset, Utc};
use lkplake_schemas::Kind;
use std::fmt::Write as _;

const EQUALS: &str =
    "=========================================================================================";
const STARS: &str = "***************************************************************************************************";
const ARROW: &str = "-------------------------------------------------------------------------------------------------->";

/// A commit the caller chose for a report (the lifecycle scenario sends several reports of one
/// culprit); the report is then never one of a patch from the list.
pub(crate) struct Culprit {
    pub(crate) commit: String,
    pub(crate) title: String,
}

/// Writes one mail around its rendered tables.
pub(crate) fn render_report(
    index: usize,
    slot: &Slot,
    format: SynthFormat,
    jobs: &[Job],
    tests: &[TestOut],
    culprit: Option<&Culprit>,
    rng: &mut Rng,
) -> SynthReport {
    let main = &tests[0];
    let env = Envelope::draw(slot, format, main, culprit, rng);
    let subject = env.subject(main, rng);
    let mut text = String::new();
    env.headers(&mut text, &subject);
    env.opening(&mut text, main, rng);
    let entries = addition_entries(jobs, &tests[1..], format, rng);
    env.test_block(&mut text, &jobs[main.job]);
    if !entries.is_empty() {
        text.push_str(
            "In addition to that, the commit also has significant impact on the following tests:\n\n",
        );
        text.push_str(&addition_box(&entries));
        text.push_str("\n\n");
    }
    if main.kind == Kind::Regression {
        env.fix_tags(&mut text);
    }
    let _ = write!(text, "Details are as below:\n{ARROW}\n\n\n");
    env.reproduce(&mut text);
    env.tables(&mut text, jobs, tests, rng);
    env.footer(&mut text);
    env.finish(index, text, subject, jobs, tests)
}

/// The commit under test and the one it is compared against.
#[derive(Debug)]
struct Commits {
    head: String,
    base: String,
    /// What both touch: it picks the subsystem tree and the list the report is copied to.
    area: Area,
    title: String,
    base_title: String,
}

impl Commits {
    fn draw(culprit: Option<&Culprit>, rng: &mut Rng) -> Self {
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
        Self {
            head,
            base,
            area,
            title,
            base_title,
        }
    }
}

/// The commit's author, to whom the report goes.
#[derive(Debug)]
struct Author {
    first: &'static str,
    last: &'static str,
    mail: String,
}

impl Author {
    fn draw(rng: &mut Rng) -> Self {
        let first = *rng.pick(FIRST_NAMES);
        let last = *rng.pick(LAST_NAMES);
        let mail = format!(
            "{}.{}@{}",
            first.to_lowercase(),
            last.to_lowercase(),
            rng.pick(MAIL_DOMAINS)
        );
        Self { first, last, mail }
    }
}

/// The robot's address and signature, which changed hands after 2020.
#[derive(Debug, Clone, Copy)]
struct Robot {
    mail: &'static str,
    name: &'static str,
    /// The host its legacy mails went out from through mutt, which names it in the Message-ID.
    mutt_host: &'static str,
}

impl Robot {
    fn of(year: i32) -> Self {
        let (mail, name, mutt_host) = if year <= 2020 {
            ("rong.a.chen@intel.com", "Rong Chen", "shao2-debian")
        } else {
            (
                "oliver.sang@intel.com",
                "Oliver Sang",
                "xsang-OptiPlex-9020",
            )
        };
        Self {
            mail,
            name,
            mutt_host,
        }
    }
}

/// When the report was generated and its Message-ID; when the patch it answers (if it answers
/// one) was posted, and that patch's serial.
#[derive(Debug)]
struct Ids {
    generated: DateTime<Utc>,
    posted: DateTime<Utc>,
    patch_serial: usize,
    message_id: String,
}

impl Ids {
    fn draw(
        time: DateTime<Utc>,
        year: i32,
        format: SynthFormat,
        mutt_host: &str,
        rng: &mut Rng,
    ) -> Self {
        // Message-ID: the modern robot stamps the report's generation time (China time) into it;
        // legacy mails went out through mutt.
        let generated = time - chrono::Duration::seconds(rng.between(300, 5 * 3600) as i64);
        // A patch from the list: when it was posted, and its own Message-ID (the report replies to
        // it and links it).
        let posted = time - chrono::Duration::days(rng.between(2, 20) as i64);
        let patch_serial = rng.between(1000, 999_999);
        let message_id = match format {
            SynthFormat::Modern => format!(
                "<{}.{}-{}@intel.com>",
                generated.with_timezone(&china()).format("%Y%m%d%H%M"),
                rng.hex(8),
                if year <= 2023 { "oliver.sang" } else { "lkp" }
            ),
            SynthFormat::Legacy => format!(
                "<{}.GA{}@{mutt_host}>",
                time.format("%Y%m%d%H%M%S"),
                rng.between(1000, 32767)
            ),
        };
        Self {
            generated,
            posted,
            patch_serial,
            message_id,
        }
    }
}

/// Everything a report says besides its tables, drawn before any of it is written.
#[derive(Debug)]
struct Envelope {
    format: SynthFormat,
    date: DateTime<Utc>,
    /// The same date, China time.
    local: DateTime<FixedOffset>,
    year: i32,
    commits: Commits,
    author: Author,
    /// A patch from the list rather than a commit on a branch.
    patch: bool,
    branch: &'static Branch,
    robot: Robot,
    ids: Ids,
    /// The headline's change as the prose states it.
    stated: String,
    /// The patch's place in its series, and its subject.
    part: usize,
    patch_subject: String,
}

impl Envelope {
    fn draw(
        slot: &Slot,
        format: SynthFormat,
        main: &TestOut,
        culprit: Option<&Culprit>,
        rng: &mut Rng,
    ) -> Self {
        let local = slot.time.with_timezone(&china());
        let year = local.year();
        let commits = Commits::draw(culprit, rng);
        let author = Author::draw(rng);
        let roll = rng.unit();
        let patch = roll < 0.15 && culprit.is_none();
        let branch = branch_of(roll, commits.area);
        let robot = Robot::of(year);
        let ids = Ids::draw(slot.time, year, format, robot.mutt_host, rng);
        let stated = stated_number(main, format, rng);
        let version = rng.between(1, 5);
        let of = rng.between(1, 6);
        let part = rng.between(1, of);
        let patch_subject = format!("[PATCH v{version} {part}/{of}] {}", commits.title);
        Self {
            format,
            date: slot.time,
            local,
            year,
            commits,
            author,
            patch,
            branch,
            robot,
            ids,
            stated,
            part,
            patch_subject,
        }
    }

    /// The modern robot answers a patch from the list in its thread; the legacy one did not.
    fn replies(&self) -> bool {
        self.patch && self.format == SynthFormat::Modern
    }

    fn bare_id(&self) -> &str {
        self.ids.message_id.trim_matches(['<', '>'])
    }

    /// The `Subject:` header: `Re:` the patch's, or the robot's own naming the tree, the
    /// commit's tag and the headline.
    fn subject(&self, main: &TestOut, rng: &mut Rng) -> String {
        if self.replies() {
            return format!("Re: {}", self.patch_subject);
        }
        let tag = self.commits.title.split(':').next().unwrap_or("mm");
        let stated = &self.stated;
        let kind = main.kind.as_str();
        let metric = &main.headline_metric;
        let short = &self.commits.head[..10];
        match self.format {
            SynthFormat::Modern => {
                format!(
                    "[{}] [{tag}]  {short}: {metric} {stated}% {kind}",
                    self.branch.name
                )
            }
            SynthFormat::Legacy if !self.patch && rng.chance(0.4) => {
                format!(
                    "[{}] [{tag}] {short}: {metric} {stated}% {kind}",
                    self.branch.name
                )
            }
            SynthFormat::Legacy => format!("[{tag}] {short}: {metric} {stated}% {kind}"),
        }
    }

    fn headers(&self, text: &mut String, subject: &str) {
        let robot_mail = self.robot.mail;
        let (first, last) = (self.author.first, self.author.last);
        let author_mail = &self.author.mail;
        let _ = writeln!(
            text,
            "Date: {}",
            self.local.format("%a, %-d %b %Y %H:%M:%S %z")
        );
        let _ = writeln!(text, "From: kernel test robot <{robot_mail}>");
        let _ = writeln!(text, "To: {first} {last} <{author_mail}>");
        match self.format {
            SynthFormat::Modern => {
                let _ = writeln!(
                    text,
                    "CC: <oe-lkp@lists.linux.dev>, <lkp@intel.com>, <linux-kernel@vger.kernel.org>,\n\t{}",
                    area_list(self.commits.area)
                );
            }
            SynthFormat::Legacy => {
                let _ = writeln!(
                    text,
                    "Cc: LKML <linux-kernel@vger.kernel.org>, lkp@lists.01.org, lkp@intel.com,\n\t{}",
                    area_list(self.commits.area).trim_matches(['<', '>'])
                );
            }
        }
        let _ = writeln!(text, "{}", fold("Subject", subject));
        let _ = writeln!(text, "Message-ID: {}", self.ids.message_id);
        if self.replies() {
            let (patch_serial, part) = (self.ids.patch_serial, self.part);
            let _ = writeln!(
                text,
                "In-Reply-To: <{}.{patch_serial}-{part}-{author_mail}>",
                self.ids.posted.format("%Y%m%d%H%M%S"),
            );
        }
        if self.format == SynthFormat::Legacy {
            text.push_str("User-Agent: Mutt/1.10.1 (2018-07-13)\n");
        }
        text.push_str(
            "Content-Type: text/plain; charset=utf-8\nContent-Disposition: inline\nContent-Transfer-Encoding: 8bit\nMIME-Version: 1.0\n\n",
        );
    }

    /// The robot's opening line and the commit it blames, with where that comes from.
    fn opening(&self, text: &mut String, main: &TestOut, rng: &mut Rng) {
        let stated = &self.stated;
        let kind = main.kind.as_str();
        let metric = &main.headline_metric;
        match self.format {
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
        let head = &self.commits.head;
        let commit_line_title = if self.replies() {
            &self.patch_subject
        } else {
            &self.commits.title
        };
        let _ = writeln!(text, "commit: {head} (\"{commit_line_title}\")");
        self.origin(text);
        if self.format == SynthFormat::Modern
            && main.kind == Kind::Regression
            && !self.patch
            && rng.chance(0.15)
        {
            let _ = write!(
                text,
                "\n[still regression on linus/master      {}]\n",
                rng.hex(40)
            );
        }
    }

    /// Where the commit comes from: the patch's branch on GitHub, its base and its lore link,
    /// or the tree's repository line.
    fn origin(&self, text: &mut String) {
        if !self.patch {
            let _ = writeln!(text, "{}", self.branch.repo);
            return;
        }
        let area = self.commits.area;
        let base_repo = BRANCHES
            .iter()
            .find(|b| b.area == Some(area))
            .unwrap_or(&BRANCHES[0])
            .repo;
        let (first, last) = (self.author.first, self.author.last);
        let author_mail = &self.author.mail;
        let (patch_serial, part) = (self.ids.patch_serial, self.part);
        let patch_subject = &self.patch_subject;
        let posted = self.ids.posted;
        let owner = match self.format {
            SynthFormat::Modern => "intel-lab-lkp",
            SynthFormat::Legacy => "0day-ci",
        };
        let _ = writeln!(
            text,
            "url: https://github.com/{owner}/linux/commits/{first}-{last}/{}/{}",
            slug(&self.commits.title),
            posted.format("%Y%m%d-%H%M%S")
        );
        let _ = writeln!(text, "base: {base_repo}");
        if self.format == SynthFormat::Modern {
            let _ = writeln!(
                text,
                "patch link: https://lore.kernel.org/all/{}.{patch_serial}-{part}-{author_mail}/",
                posted.format("%Y%m%d%H%M%S"),
            );
            let _ = writeln!(text, "patch subject: {patch_subject}");
        }
    }

    /// The main test: testcase, toolchain (from 2024 on), machine and parameters.
    fn test_block(&self, text: &mut String, main_job: &Job) {
        let format = self.format;
        match format {
            SynthFormat::Modern => {
                let _ = writeln!(text, "\ntestcase: {}", main_job.testcase.name);
                if self.year >= 2024 {
                    let axis = |k: &str| main_job.axes.get(k).map_or("", String::as_str);
                    let _ = writeln!(text, "config: {}", axis("kconfig"));
                    let _ = writeln!(text, "compiler: {}", axis("compiler"));
                }
                let _ = writeln!(
                    text,
                    "test machine: {}\nparameters:\n",
                    main_job.machine.description(format)
                );
                params_block(text, main_job);
                text.push_str("\n\n");
            }
            SynthFormat::Legacy => {
                let _ = writeln!(
                    text,
                    "\nin testcase: {}\non test machine: {}\nwith following parameters:\n",
                    main_job.testcase.name,
                    main_job.machine.description(format)
                );
                params_block(text, main_job);
                let _ = write!(
                    text,
                    "\ntest-description: {}\ntest-url: {}\n\n\n",
                    main_job.testcase.description, main_job.testcase.url
                );
            }
        }
    }

    /// The tags the robot asks the fix of a regression to carry.
    fn fix_tags(&self, text: &mut String) {
        let robot_mail = self.robot.mail;
        let bare_id = self.bare_id();
        match self.format {
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

    /// Where to find the materials to reproduce the result (modern), or how to rerun the job
    /// (legacy).
    fn reproduce(&self, text: &mut String) {
        let bare_id = self.bare_id();
        match self.format {
            SynthFormat::Modern => {
                let _ = write!(
                    text,
                    "The kernel config and materials to reproduce are available at:\nhttps://download.01.org/0day-ci/archive/{}/{bare_id}\n\n",
                    self.ids.generated.with_timezone(&china()).format("%Y%m%d")
                );
            }
            SynthFormat::Legacy if self.year <= 2020 => {
                text.push_str("To reproduce:\n\n        git clone https://github.com/intel/lkp-tests.git\n        cd lkp-tests\n        bin/lkp install job.yaml  # job file is attached in this email\n        bin/lkp run     job.yaml\n\n");
            }
            SynthFormat::Legacy => {
                text.push_str("To reproduce:\n\n        git clone https://github.com/intel/lkp-tests.git\n        cd lkp-tests\n        sudo bin/lkp install job.yaml           # job file is attached in this email\n        bin/lkp split-job --compatible job.yaml # generate the yaml file for lkp run\n        sudo bin/lkp run generated-yaml-file\n\n        # if come across any failure that blocks the test,\n        # please remove ~/.lkp and /lkp dir to run from a clean state.\n\n");
            }
        }
    }

    /// The main test's table (with its plot in legacy reports), then one per test of the "In
    /// addition" box, each under a rule of stars.
    fn tables(&self, text: &mut String, jobs: &[Job], tests: &[TestOut], rng: &mut Rng) {
        let main = &tests[0];
        self.detail(text, &jobs[main.job], main);
        if self.format == SynthFormat::Legacy {
            ascii_plot(text, &main.headline_metric, main.headline_levels, rng);
        }
        for test in &tests[1..] {
            let job = &jobs[test.job];
            let machine_line = if self.year >= 2026 {
                String::new()
            } else {
                format!(
                    "{}: {}",
                    job.machine.tbox,
                    job.machine.description(self.format)
                )
            };
            let _ = writeln!(text, "\n\n\n{STARS}\n{machine_line}");
            self.detail(text, job, test);
        }
    }

    /// One table under its parameter header and the two commits' columns.
    fn detail(&self, text: &mut String, job: &Job, test: &TestOut) {
        let (base, head) = (&self.commits.base, &self.commits.head);
        let (base_title, title) = (&self.commits.base_title, &self.commits.title);
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
    }

    /// The disclaimer and the robot's signature.
    fn footer(&self, text: &mut String) {
        text.push_str("\n\n\n\nDisclaimer:\nResults have been estimated based on internal Intel analysis and are provided\nfor informational purposes only. Any difference in system hardware or software\ndesign or configuration may affect actual performance.\n\n\n");
        let robot_name = self.robot.name;
        match (self.format, self.year) {
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
    }

    /// The report, with the truth about it.
    fn finish(
        self,
        index: usize,
        text: String,
        subject: String,
        jobs: &[Job],
        tests: &[TestOut],
    ) -> SynthReport {
        let format = self.format;
        let main = &tests[0];
        let main_job = &jobs[main.job];
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
            commit_id: self.commits.head,
            commit_title: self.commits.title,
            base_commit_id: self.commits.base,
            params: main_job.params_key.clone(),
            message_id: self.ids.message_id,
            subject,
            date: self.date,
            format,
            kind: main.kind,
            headline_metric: main.headline_metric.clone(),
            headline_change_pct: main.headline_change_pct,
            tests: truth,
        }
    }
}

/// The tree a report names: mainline for half of them, linux-next for a quarter, else the
/// subsystem tree of the commit's area.
fn branch_of(roll: f64, area: Area) -> &'static Branch {
    if roll < 0.5 {
        &BRANCHES[0]
    } else if roll < 0.75 {
        &BRANCHES[1]
    } else {
        BRANCHES
            .iter()
            .find(|b| b.area == Some(area))
            .unwrap_or(&BRANCHES[0])
    }
}

fn params_block(text: &mut String, job: &Job) {
    for (k, v) in &job.prose_params {
        let _ = writeln!(text, "\t{k}: {v}");
    }
}

/// The entries of the "In addition to that" box, one per extra test: its change as the prose
/// states it, its machine and its sorted parameters.
fn addition_entries(
    jobs: &[Job],
    tests: &[TestOut],
    format: SynthFormat,
    rng: &mut Rng,
) -> Vec<(String, String, Vec<String>)> {
    tests
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
        .collect()
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
pub(crate) fn fold(name: &str, value: &str) -> String {
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
