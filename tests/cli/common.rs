//! Running the binary, temporary places, the test broker, and reading the lake back.

use deltalake::arrow::array::RecordBatch;
use lkplake_transform::lake::{Lake, session};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lkplake"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("LKPLAKE_LOG", "warn,buoyant_kernel=off");
    cmd
}

pub fn lkplake(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn lkplake: {e}"));
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .map(|mut s| s.write_all(input))
            .transpose()
            .unwrap_or_else(|e| panic!("{e}"));
    }
    drop(child.stdin.take());
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait: {e}"))
}

pub fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l}: {e}")))
        .collect()
}

/// A name no other test or run uses: topics, groups and lake folders stay apart.
pub fn unique(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{name}-{}-{nanos}", std::process::id())
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique(&format!("lkplake-{name}")));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    dir
}

/// The Kafka-protocol broker of the test run. `./infra/test.sh` starts Tansu and sets this;
/// without it the pipeline tests cannot mean anything, so they fail loudly.
pub fn broker() -> String {
    std::env::var("LKPLAKE_TEST_BROKERS").unwrap_or_else(|_| {
        panic!("LKPLAKE_TEST_BROKERS is not set: run the tests with ./infra/test.sh, which installs and starts Tansu")
    })
}

/// Topics, group and lake of one test.
pub struct Pipeline {
    pub topic: String,
    pub dlq: String,
    pub group: String,
    pub lake: PathBuf,
}

impl Pipeline {
    pub fn new(name: &str) -> Self {
        Self {
            topic: unique(&format!("{name}-reports")),
            dlq: unique(&format!("{name}-dlq")),
            group: unique(&format!("{name}-group")),
            lake: temp_dir(&format!("{name}-lake")),
        }
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env("LKPLAKE_BROKERS", broker())
            .env("LKPLAKE_TOPIC", &self.topic)
            .env("LKPLAKE_DLQ_TOPIC", &self.dlq)
            .env("LKPLAKE_GROUP", &self.group)
            .env("LKPLAKE_LAKE", &self.lake);
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = command(args);
        self.env(&mut cmd);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let out = self
            .cmd(args)
            .output()
            .unwrap_or_else(|e| panic!("spawn lkplake: {e}"));
        eprintln!(
            "$ lkplake {}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub fn ingest(&self, paths: &[&str]) -> Output {
        let mut args = vec!["ingest", "--partitions", "3"];
        args.extend_from_slice(paths);
        self.run(&args)
    }

    pub fn transform_until_idle(&self) -> Output {
        let out = self.run(&["transform", "--until-idle", "--flush-ms", "500"]);
        assert!(out.status.success(), "transform failed");
        out
    }

    pub fn query(&self, sql: &str) -> Vec<RecordBatch> {
        query(&self.lake, sql)
    }
}

/// Runs SQL over the lake with DataFusion.
pub fn query(lake: &Path, sql: &str) -> Vec<RecordBatch> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    runtime.block_on(async {
        let lake = Lake::open(lake).await.unwrap_or_else(|e| panic!("{e}"));
        let ctx = session(&lake).await.unwrap_or_else(|e| panic!("{e}"));
        ctx.sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    })
}

/// The single `i64` a `SELECT count(*)`-style query returns.
pub fn scalar_i64(batches: &[RecordBatch]) -> i64 {
    use deltalake::arrow::array::AsArray;
    use deltalake::arrow::datatypes::Int64Type;
    batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| b.column(0).as_primitive::<Int64Type>().value(0))
        .unwrap_or(0)
}

/// Column `i` of every row, rendered as text.
pub fn column_strings(batches: &[RecordBatch], i: usize) -> Vec<String> {
    use deltalake::arrow::util::display::ArrayFormatter;
    let mut out = Vec::new();
    for b in batches {
        let formatter = ArrayFormatter::try_new(b.column(i).as_ref(), &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        for row in 0..b.num_rows() {
            out.push(formatter.value(row).to_string());
        }
    }
    out
}
