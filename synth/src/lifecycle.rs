//! The regressions tracker's scenario (`lkplake gen --lifecycle`): the robot's reports and the
//! list mail that answers them, planted so that every automatic status of the `regressions`
//! view and every kind of `links` row occurs, with the truth a test compares the lake against.
//!
//! The story, in date order (all in the robot's modern layout, in 2025):
//! - culprit A regresses two tests on two machines: two reports;
//! - culprit B regresses one test, culprit D another, culprit E a third;
//! - culprit C improves one test (a lasting improvement: nothing later undoes it);
//! - a reply to A's first report quotes its opening, commit line and box of suggested tags
//!   (`| Closes: ...`): a mention, never a link;
//! - a patch with `Reported-by:`, `Closes:` (A's first report) and `Fixes:` (A) is posted;
//! - a revert of B is posted (and never applied);
//! - b4's applied notice names the fix's commit F: A is fixed;
//! - a later report of commit G on E's test goes the other way, back to the level before E: E
//!   is recovered (and G is an improvement of its own);
//! - nobody answers D: it stays open; a later regression H of D's test gets a reply and no
//!   fix: it is discussed.

use crate::commits::{Area, FIRST_NAMES, LAST_NAMES, MAIL_DOMAINS, commit_title};
use crate::jobs::{Job, new_job};
use crate::mail::{Culprit, fold, render_report};
use crate::rng::Rng;
use crate::table::{DIRECTIONS, render_test};
use crate::{Slot, SynthConfig, SynthFormat, SynthReport, write_files};
use chrono::{DateTime, Duration, FixedOffset, Utc};
use lkplake_schemas::Kind;
use lkplake_schemas::metric::Direction;
use std::path::Path;

/// One mail of the scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedMail {
    /// File name for [`write_lifecycle`]: its position in date order and what it is.
    pub file_name: String,
    /// The whole mail: RFC 822 headers and body.
    pub text: String,
    /// With angle brackets.
    pub message_id: String,
    /// The `Date:` header, in UTC.
    pub date: DateTime<Utc>,
}

/// A link the scenario's mail states, as the `links` table should hold it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedLink {
    /// `closes`, `fixes`, `revert` or `applied`.
    pub kind: &'static str,
    /// A report's Message-ID (with brackets), a commit id (as the trailer prints it) or a
    /// reverted commit's title.
    pub target: String,
    /// The linking mail's Message-ID, with brackets.
    pub message_id: String,
    /// The linking mail's date, in UTC.
    pub date: DateTime<Utc>,
    /// Its `From:` as written.
    pub sender: String,
    /// Its subject.
    pub subject: String,
    /// The patch's title (the subject without `Re:` and the `[PATCH]` tag).
    pub patch_title: String,
    /// The commit the mail names as the patch's (applied) or as the one reverted.
    pub commit: Option<String>,
}

/// A culprit of the scenario and what the `regressions` view should say of it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedCulprit {
    /// 40 hex digits.
    pub commit: String,
    /// As the reports' commit line prints it.
    pub title: String,
    /// Regression or improvement.
    pub verdict: Kind,
    /// The automatic status: `open`, `discussed`, `fix-posted`, `fixed`, `recovered` or
    /// `improvement`.
    pub status: &'static str,
    /// Message-IDs of the reports that name it.
    pub reports: Vec<String>,
    /// Distinct, sorted.
    pub testcases: Vec<String>,
    /// Distinct tbox groups, sorted.
    pub machines: Vec<String>,
    /// Replies that cite one of its reports.
    pub replies: usize,
    /// The first fix patch's date and title.
    pub fix_posted: Option<(DateTime<Utc>, String)>,
    /// The applied fix's commit and the notice's date.
    pub fix_merged: Option<(String, DateTime<Utc>)>,
    /// The revert's date.
    pub reverted: Option<DateTime<Utc>>,
    /// The Message-ID and commit of the report that brought the level back.
    pub recovered_by: Option<(String, String)>,
}

/// The scenario: its mails in date order and the truth about them.
#[derive(Debug, Clone, PartialEq)]
pub struct Lifecycle {
    /// In date order.
    pub mails: Vec<PlantedMail>,
    /// Ordered by commit.
    pub culprits: Vec<PlantedCulprit>,
    /// Ordered by kind, then target.
    pub links: Vec<PlantedLink>,
}

/// Writes each mail to `dir/<file_name>`, creating `dir` if needed.
pub fn write_lifecycle(lifecycle: &Lifecycle, dir: &Path) -> std::io::Result<()> {
    write_files(dir, lifecycle.mails.iter().map(|m| (&m.file_name, &m.text)))
}

/// A step this large shows in the report with the right sign whatever the noise: headline
/// noise is at most 3 %, truncated at 3 standard deviations, on both columns.
const STEP_PCT: f64 = 25.0;
const ROBOT: &str = "kernel test robot <oliver.sang@intel.com>";
const MAINTAINER: &str = "Andrew Morton <akpm@linux-foundation.org>";

/// Generates the scenario; the same seed gives byte-identical mail.
pub fn lifecycle(seed: u64) -> Lifecycle {
    let mut rng = Rng::derive(seed, 0x4c49_4645);
    let jobs = lifecycle_jobs(&mut rng);
    let mut levels: Vec<Vec<f64>> = jobs.iter().map(|j| j.level0[..j.core].to_vec()).collect();
    let start = DateTime::<Utc>::from_timestamp(1_740_967_980, 0).unwrap_or_default(); // 2025-03-03T02:13:00Z
    let at = |days: i64, minutes: i64| start + Duration::days(days) + Duration::minutes(minutes);
    let mut story = Story {
        rng,
        jobs: &jobs,
        levels: &mut levels,
        mails: Vec::new(),
    };
    let [a, b, c, d, e, g, h] = std::array::from_fn(|_| story.culprit());
    let a1 = story.report(0, &a, Kind::Regression, at(0, 0));
    let a2 = story.report(1, &a, Kind::Regression, at(0, 328));
    let rb = story.report(2, &b, Kind::Regression, at(1, 52));
    let rc = story.report(3, &c, Kind::Improvement, at(1, 437));
    let rd = story.report(4, &d, Kind::Regression, at(2, 119));
    let re = story.report(5, &e, Kind::Regression, at(2, 547));
    // On D's test, later: a second regression of that series, which only gets a reply.
    let rh = story.report(4, &h, Kind::Regression, at(3, 200));
    story.reply(&a1, at(3, 868));
    story.reply(&rh, at(4, 95));
    let fixer = story.person();
    let fix_title = commit_title(&mut story.rng, Area::Mm);
    let fix = story.fix_patch(&fixer, &fix_title, &a1, &a, at(5, 0));
    let reverter = story.person();
    let revert = story.revert(&reverter, &b, at(6, 700));
    let f = story.rng.hex(40);
    let applied = story.applied(&fix, &fix_title, &f, at(8, 1185));
    let rg = story.recovery(5, &g, at(20, 80));

    let links = planted_links(&a1, &a, &b, (&fix, &fix_title), &revert, (&applied, &f));
    let planted = |c: &Culprit, verdict, status, reports: &[&SynthReport]| PlantedCulprit {
        commit: c.commit.clone(),
        title: c.title.clone(),
        verdict,
        status,
        reports: reports.iter().map(|r| r.message_id.clone()).collect(),
        testcases: sorted(reports.iter().map(|r| r.testcase.clone())),
        machines: sorted(reports.iter().map(|r| r.tbox_group.clone())),
        replies: 0,
        fix_posted: None,
        fix_merged: None,
        reverted: None,
        recovered_by: None,
    };
    let mut culprits = vec![
        PlantedCulprit {
            replies: 1,
            fix_posted: Some((fix.date, fix_title.clone())),
            fix_merged: Some((f, applied.date)),
            ..planted(&a, Kind::Regression, "fixed", &[&a1, &a2])
        },
        PlantedCulprit {
            reverted: Some(revert.date),
            ..planted(&b, Kind::Regression, "fix-posted", &[&rb])
        },
        planted(&c, Kind::Improvement, "improvement", &[&rc]),
        planted(&d, Kind::Regression, "open", &[&rd]),
        PlantedCulprit {
            recovered_by: Some((rg.message_id.clone(), g.commit.clone())),
            ..planted(&e, Kind::Regression, "recovered", &[&re])
        },
        planted(&g, Kind::Improvement, "improvement", &[&rg]),
        PlantedCulprit {
            replies: 1,
            ..planted(&h, Kind::Regression, "discussed", &[&rh])
        },
    ];
    culprits.sort_by(|x, y| x.commit.cmp(&y.commit));
    let mut mails = story.mails;
    mails.sort_by_key(|m| m.date);
    for (i, mail) in mails.iter_mut().enumerate() {
        mail.file_name = format!("{i:02}-{}", mail.file_name);
    }
    Lifecycle {
        mails,
        culprits,
        links,
    }
}

/// The links the patches and the notice state: the fix closes A's first report and names A in
/// `Fixes:`, the notice names the fix's commit, the revert names B. (The replies quote the
/// robot's suggested `| Closes:` and state none.)
fn planted_links(
    first_report: &SynthReport,
    fixed: &Culprit,
    reverted: &Culprit,
    (fix, fix_title): (&Sent, &str),
    revert: &Sent,
    (applied, commit): (&Sent, &str),
) -> Vec<PlantedLink> {
    let revert_title = format!("Revert \"{}\"", reverted.title);
    let mut links = vec![
        fix.link("closes", first_report.message_id.clone(), fix_title, None),
        fix.link("fixes", fixed.commit[..12].to_owned(), fix_title, None),
        applied.link(
            "applied",
            commit.to_owned(),
            fix_title,
            Some(commit.to_owned()),
        ),
        revert.link(
            "revert",
            reverted.title.clone(),
            &revert_title,
            Some(reverted.commit.clone()),
        ),
    ];
    links.sort_by(|x, y| (x.kind, &x.target).cmp(&(y.kind, &y.target)));
    links
}

fn sorted(items: impl Iterator<Item = String>) -> Vec<String> {
    let set: std::collections::BTreeSet<String> = items.collect();
    set.into_iter().collect()
}

/// Six jobs on distinct testcases and machines whose primary headline can take a step of
/// [`STEP_PCT`] either way and show it.
fn lifecycle_jobs(rng: &mut Rng) -> Vec<Job> {
    let config = SynthConfig {
        start_year: 2025,
        years: 1,
        ..SynthConfig::default()
    };
    let mut jobs: Vec<Job> = Vec::new();
    for _ in 0..10_000 {
        if jobs.len() == 6 {
            break;
        }
        let job = new_job(rng, &config, config.series_per_testcase);
        let head = &job.metrics[0];
        let fits = head.headline
            && !head.name.ends_with('%')
            && job.level0[0] >= 100.0
            && job.noise[0] <= 0.03
            && jobs.iter().all(|j| {
                j.testcase.name != job.testcase.name && j.machine.tbox != job.machine.tbox
            });
        if fits {
            jobs.push(job);
        }
    }
    assert!(
        jobs.len() == 6,
        "the testcase table has six distinct jobs to offer"
    );
    jobs
}

/// A mail someone on the list sent.
struct Sent {
    message_id: String,
    date: DateTime<Utc>,
    sender: String,
    subject: String,
}

impl Sent {
    fn link(
        &self,
        kind: &'static str,
        target: String,
        patch_title: &str,
        commit: Option<String>,
    ) -> PlantedLink {
        PlantedLink {
            kind,
            target,
            message_id: self.message_id.clone(),
            date: self.date,
            sender: self.sender.clone(),
            subject: self.subject.clone(),
            patch_title: patch_title.to_owned(),
            commit,
        }
    }
}

struct Person {
    name: String,
    mail: String,
}

impl Person {
    fn from(&self) -> String {
        format!("{} <{}>", self.name, self.mail)
    }
}

struct Story<'a> {
    rng: Rng,
    jobs: &'a [Job],
    levels: &'a mut Vec<Vec<f64>>,
    mails: Vec<PlantedMail>,
}

impl Story<'_> {
    fn culprit(&mut self) -> Culprit {
        Culprit {
            commit: self.rng.hex(40),
            title: commit_title(&mut self.rng, Area::Mm),
        }
    }

    fn person(&mut self) -> Person {
        let first = *self.rng.pick(FIRST_NAMES);
        let last = *self.rng.pick(LAST_NAMES);
        let domain = *self.rng.pick(MAIL_DOMAINS);
        Person {
            name: format!("{first} {last}"),
            mail: format!("{}.{}@{domain}", first.to_lowercase(), last.to_lowercase()),
        }
    }

    /// The robot's report of `culprit` on job `job`, its headline moved by [`STEP_PCT`] the
    /// way `kind` says.
    fn report(
        &mut self,
        job: usize,
        culprit: &Culprit,
        kind: Kind,
        time: DateTime<Utc>,
    ) -> SynthReport {
        let sign = DIRECTIONS
            .direction(&self.jobs[job].metrics[0].name)
            .unwrap_or(Direction::HigherIsBetter)
            .sign();
        let pct = match kind {
            Kind::Improvement => STEP_PCT * sign,
            _ => -STEP_PCT * sign,
        };
        self.send_report(job, culprit, pct, time)
    }

    /// A report on job `job` whose step takes its headline back to where it was before the
    /// last step: an improvement.
    fn recovery(&mut self, job: usize, culprit: &Culprit, time: DateTime<Utc>) -> SynthReport {
        let sign = DIRECTIONS
            .direction(&self.jobs[job].metrics[0].name)
            .unwrap_or(Direction::HigherIsBetter)
            .sign();
        let before = -STEP_PCT * sign;
        let back = (1.0 / (1.0 + before / 100.0) - 1.0) * 100.0;
        self.send_report(job, culprit, back, time)
    }

    fn send_report(
        &mut self,
        job: usize,
        culprit: &Culprit,
        pct: f64,
        time: DateTime<Utc>,
    ) -> SynthReport {
        let index = self.mails.len();
        let mut steps = Vec::new();
        let test = render_test(
            job,
            &self.jobs[job],
            &mut self.levels[job],
            &[(0, pct)],
            index,
            true,
            &mut self.rng,
            &mut steps,
        );
        let slot = Slot {
            time,
            jobs: vec![job],
        };
        let report = render_report(
            index,
            &slot,
            SynthFormat::Modern,
            self.jobs,
            &[test],
            Some(culprit),
            &mut self.rng,
        );
        self.mails.push(PlantedMail {
            file_name: "report.eml".to_owned(),
            text: report.text.clone(),
            message_id: report.message_id.clone(),
            date: report.date,
        });
        report
    }

    /// A developer's reply to `report` quoting its opening down to the robot's box of
    /// suggested tags, then a line of their own.
    fn reply(&mut self, report: &SynthReport, date: DateTime<Utc>) -> Sent {
        let person = self.person();
        let message_id = format!("<{}.fsf@{}>", self.rng.hex(10), domain(&person.mail));
        let body = report.text.split_once("\n\n").map_or("", |(_, b)| b);
        let quoted: String = body
            .lines()
            .take_while(|l| !l.starts_with("Details are as below"))
            .map(|l| {
                if l.is_empty() {
                    ">\n".to_owned()
                } else {
                    format!("> {l}\n")
                }
            })
            .collect();
        let subject = format!("Re: {}", report.subject);
        let text = format!(
            "{}Date: {}\nMessage-ID: {message_id}\nIn-Reply-To: {id}\nReferences: {id}\n\
             MIME-Version: 1.0\nContent-Type: text/plain; charset=us-ascii\n\n\
             On {}, kernel test robot wrote:\n{quoted}\n\
             Thanks for the report. I can reproduce it here; looking into why the fast\n\
             path is skipped now.\n",
            people_headers(&person.from(), ROBOT, &subject),
            local_date(date),
            local_date(report.date),
            id = report.message_id,
        );
        self.sent(person.from(), subject, message_id, date, text, "reply.eml")
    }

    /// A patch fixing `culprit`, closing `report`.
    fn fix_patch(
        &mut self,
        person: &Person,
        title: &str,
        report: &SynthReport,
        culprit: &Culprit,
        date: DateTime<Utc>,
    ) -> Sent {
        let message_id = patch_id(&mut self.rng, person, date);
        let subject = format!("[PATCH] {title}");
        let text = format!(
            "{}Date: {}\nMessage-ID: {message_id}\nMIME-Version: 1.0\n\
             Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n\
             The robot reported a regression after the change below moved the charge\n\
             path off its per-cpu fast path. Take the fast path again when it can serve\n\
             the request.\n\n\
             Reported-by: {ROBOT}\n\
             Closes: https://lore.kernel.org/oe-lkp/{}\n\
             Fixes: {} (\"{}\")\n\
             Signed-off-by: {}\n{}",
            people_headers(&person.from(), MAINTAINER, &subject),
            local_date(date),
            report.message_id.trim_matches(['<', '>']),
            &culprit.commit[..12],
            culprit.title,
            person.from(),
            diff(&mut self.rng),
        );
        self.sent(person.from(), subject, message_id, date, text, "fix.eml")
    }

    /// A patch reverting `culprit`.
    fn revert(&mut self, person: &Person, culprit: &Culprit, date: DateTime<Utc>) -> Sent {
        let message_id = patch_id(&mut self.rng, person, date);
        let subject = format!("[PATCH] Revert \"{}\"", culprit.title);
        let text = format!(
            "{}Date: {}\nMessage-ID: {message_id}\nMIME-Version: 1.0\n\
             Content-Type: text/plain; charset=UTF-8\n\n\
             This reverts commit {}.\n\n\
             The change costs more than it saves on the robot's tests; take it out of\n\
             this cycle.\n\n\
             Signed-off-by: {}\n{}",
            people_headers(&person.from(), MAINTAINER, &subject),
            local_date(date),
            culprit.commit,
            person.from(),
            diff(&mut self.rng),
        );
        self.sent(person.from(), subject, message_id, date, text, "revert.eml")
    }

    /// b4's notice that `patch` was applied as `commit`.
    fn applied(&mut self, patch: &Sent, title: &str, commit: &str, date: DateTime<Utc>) -> Sent {
        let message_id = format!(
            "<{}.{}.{}.b4-ty@linux-foundation.org>",
            date.timestamp() * 100,
            self.rng.between(1000, 9999),
            self.rng.between(1_000_000_000, 9_999_999_999)
        );
        let subject = format!("Re: {}", patch.subject);
        let text = format!(
            "From: {MAINTAINER}\nTo: {}\nCc: linux-mm@kvack.org, linux-kernel@vger.kernel.org\n\
             {}\nIn-Reply-To: {id}\nReferences: {id}\nMessage-ID: {message_id}\nDate: {}\n\
             MIME-Version: 1.0\nContent-Type: text/plain; charset=\"utf-8\"\n\
             Content-Transfer-Encoding: 7bit\n\n\
             On {}, {} wrote:\n> The robot reported a regression after the change below moved the charge\n\n\
             Applied, thanks!\n\n[1/1] {title}\n      commit: {commit}\n\n\
             Best regards,\n-- \n{MAINTAINER}\n",
            patch.sender,
            fold("Subject", &subject),
            local_date(date),
            local_date(patch.date),
            patch.sender,
            id = patch.message_id,
        );
        self.sent(
            MAINTAINER.to_owned(),
            subject,
            message_id,
            date,
            text,
            "applied.eml",
        )
    }

    fn sent(
        &mut self,
        sender: String,
        subject: String,
        message_id: String,
        date: DateTime<Utc>,
        text: String,
        file_name: &str,
    ) -> Sent {
        self.mails.push(PlantedMail {
            file_name: file_name.to_owned(),
            text,
            message_id: message_id.clone(),
            date,
        });
        Sent {
            message_id,
            date,
            sender,
            subject,
        }
    }
}

fn people_headers(from: &str, to: &str, subject: &str) -> String {
    format!(
        "From: {from}\nTo: {to}\nCc: linux-mm@kvack.org, linux-kernel@vger.kernel.org\n{}\n",
        fold("Subject", subject)
    )
}

/// A `Date:` as a developer's mailer in California writes it.
fn local_date(date: DateTime<Utc>) -> String {
    let pacific =
        FixedOffset::west_opt(7 * 3600).unwrap_or_else(|| unreachable!("-07:00 is a valid offset"));
    date.with_timezone(&pacific)
        .format("%a, %-d %b %Y %H:%M:%S %z")
        .to_string()
}

/// `git send-email`'s Message-ID: the sending time, a serial, the patch number, the sender.
fn patch_id(rng: &mut Rng, person: &Person, date: DateTime<Utc>) -> String {
    format!(
        "<{}.{}-1-{}>",
        date.format("%Y%m%d%H%M%S"),
        rng.between(1000, 99_999),
        person.mail
    )
}

fn domain(mail: &str) -> &str {
    mail.split_once('@').map_or(mail, |(_, d)| d)
}

/// A one-line change to mm/memcontrol.c, as `git format-patch` writes it.
fn diff(rng: &mut Rng) -> String {
    let line = rng.between(1200, 4800);
    format!(
        "---\n mm/memcontrol.c | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n\
         diff --git a/mm/memcontrol.c b/mm/memcontrol.c\nindex {}..{} 100644\n\
         --- a/mm/memcontrol.c\n+++ b/mm/memcontrol.c\n\
         @@ -{line},7 +{line},7 @@ static int try_charge_memcg(struct mem_cgroup *memcg, gfp_t gfp_mask,\n\
         -\tif (consume_stock(memcg, nr_pages))\n\
         +\tif (drain_remote_stock(memcg) && consume_stock(memcg, nr_pages))\n \t\treturn 0;\n\
         -- \n2.47.3\n",
        rng.hex(12),
        rng.hex(12),
    )
}
