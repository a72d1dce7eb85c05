//! Running the binary, temporary places, the test broker, and reading the lake back.

use deltalake::arrow::array::RecordBatch;
use deltalake::datafusion::prelude::SessionContext;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// The checkout the tests read their inputs from. Taken at run time, as nextest sets it, so a
/// test archive run against another checkout (`infra/soak-transformers.sh`) reads that one.
pub fn root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from)
}

/// The `lkplake` under test: nextest's run-time path, which follows an archive extracted
/// elsewhere, else the one cargo built.
fn binary() -> PathBuf {
    std::env::var_os("NEXTEST_BIN_EXE_lkplake")
        .map_or_else(|| env!("CARGO_BIN_EXE_lkplake").into(), PathBuf::from)
}

pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.args(args)
        .current_dir(root())
        .env("LKPLAKE_LOG", "warn,buoyant_kernel=off");
    cmd
}

/// [`command`] with the variables that reach an S3 lake (empty for a local one).
pub fn command_with(args: &[&str], storage: &[(String, String)]) -> Command {
    let mut cmd = command(args);
    cmd.envs(storage.iter().map(|(k, v)| (k, v)));
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
    temp_dir_in(&std::env::temp_dir(), name)
}

/// A new folder of its own under `base`, named like `temp_dir`'s.
pub fn temp_dir_in(base: &Path, name: &str) -> PathBuf {
    let dir = base.join(unique(&format!("lkplake-{name}")));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// The Kafka-protocol broker of the test run. `./infra/test.sh` starts Tansu and sets this;
/// without it the pipeline tests cannot mean anything, so they fail loudly.
pub fn broker() -> String {
    std::env::var("LKPLAKE_TEST_BROKERS").unwrap_or_else(|_| {
        panic!("LKPLAKE_TEST_BROKERS is not set: run the tests with ./infra/test.sh, which installs and starts Tansu")
    })
}

/// An S3 server of the test run, which `./infra/test.sh` installs and starts; without it the
/// object-store tests cannot mean anything, so they fail loudly.
pub struct S3 {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The directory s3s-fs keeps its buckets in, one directory each; `None` for moto, which
    /// keeps them in memory.
    pub data: Option<PathBuf>,
}

pub const S3_ACCESS_KEY: &str = "lkplake-test";
pub const S3_SECRET_KEY: &str = "lkplake-test-secret";

fn test_var(name: &str, server: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with ./infra/test.sh, which installs and starts {server}")
    })
}

/// s3s-fs from crates.io, the default S3 server of the tests.
pub fn s3() -> S3 {
    S3 {
        endpoint: test_var("LKPLAKE_TEST_S3_ENDPOINT", "s3s-fs"),
        data: Some(PathBuf::from(test_var("LKPLAKE_TEST_S3_DATA", "s3s-fs"))),
    }
}

/// Python moto in server mode, a second S3 implementation independent of s3s-fs.
pub fn moto() -> S3 {
    S3 {
        endpoint: test_var("LKPLAKE_TEST_MOTO_ENDPOINT", "moto"),
        data: None,
    }
}

impl S3 {
    /// The directory of s3s-fs's buckets.
    pub fn data(&self) -> &Path {
        self.data
            .as_deref()
            .unwrap_or_else(|| panic!("{} keeps its objects in memory", self.endpoint))
    }

    /// A new, empty bucket. s3s-fs serves each directory below its data directory as a
    /// bucket, so making one there is a `mkdir`; moto is asked with a signed CreateBucket.
    /// Everything else goes through the S3 protocol.
    pub fn bucket(&self, name: &str) -> String {
        // Short: s3s-fs keeps each object's metadata in a file named after the bucket and the
        // key in base64, and Linux takes 255 bytes in a file name, so a 40-character bucket
        // with a partitioned Parquet key failed with "File name too long" (an S3 500).
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let prefix: String = name
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(6)
            .collect();
        let bucket = format!("{}-{}-{nanos:x}", prefix.to_lowercase(), std::process::id());
        match &self.data {
            Some(data) => {
                std::fs::create_dir_all(data.join(&bucket)).unwrap_or_else(|e| panic!("{e}"));
            }
            None => {
                let out = Command::new("curl")
                    .args(["--silent", "--show-error", "--fail", "--request", "PUT"])
                    .args(["--aws-sigv4", "aws:amz:us-east-1:s3"])
                    .args(["--user", &format!("{S3_ACCESS_KEY}:{S3_SECRET_KEY}")])
                    .arg(format!("{}/{bucket}", self.endpoint))
                    .output()
                    .unwrap_or_else(|e| panic!("curl: {e}"));
                assert!(
                    out.status.success(),
                    "creating bucket {bucket} on {}: {}",
                    self.endpoint,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        bucket
    }

    /// The standard AWS variables that reach this server, as lkplake reads them.
    pub fn storage(&self) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", S3_SECRET_KEY),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }
}

/// Topics, group and lake of one test.
pub struct Pipeline {
    pub topic: String,
    pub dlq: String,
    /// The transformer's dead-letter topic.
    pub transform_dlq: String,
    pub group: String,
    /// Checkpoints of `--follow` and `dlq replay`.
    pub sources: String,
    /// The local lake's directory (unused when the lake is on S3).
    pub lake: PathBuf,
    /// What `--lake` is given: the local directory, or an `s3://` URL.
    pub lake_url: String,
    /// The AWS variables an S3 lake is reached with; empty for a local lake.
    pub storage: Vec<(String, String)>,
    /// The test run's broker, unless the test starts its own.
    pub brokers: String,
}

/// Messages the broker at `brokers` holds in `topic`: the sum of its partitions' high
/// watermarks, 0 while the topic does not exist. What the tests wait for instead of sleeping.
pub fn topic_messages(brokers: &str, topic: &str) -> i64 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let timeout = std::time::Duration::from_secs(10);
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .unwrap_or_else(|e| panic!("{e}"));
    let Ok(metadata) = consumer.fetch_metadata(Some(topic), timeout) else {
        return 0;
    };
    let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return 0;
    };
    found
        .partitions()
        .iter()
        .map(|part| {
            consumer
                .fetch_watermarks(topic, part.id(), timeout)
                .map_or(0, |(_, high)| high)
        })
        .sum()
}

/// Polls `topic` until it holds more than `above` messages, at most `limit`; returns how many.
pub fn wait_for_messages(
    brokers: &str,
    topic: &str,
    above: i64,
    limit: std::time::Duration,
) -> i64 {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let held = topic_messages(brokers, topic);
        if held > above {
            return held;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{topic} still holds {held} messages (waiting for more than {above}) after {limit:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

impl Pipeline {
    pub fn new(name: &str) -> Self {
        let lake = temp_dir(&format!("{name}-lake"));
        Self {
            topic: unique(&format!("{name}-reports")),
            dlq: unique(&format!("{name}-dlq")),
            transform_dlq: unique(&format!("{name}-transform-dlq")),
            group: unique(&format!("{name}-group")),
            sources: unique(&format!("{name}-sources")),
            lake_url: lake.to_string_lossy().into_owned(),
            lake,
            storage: Vec::new(),
            brokers: broker(),
        }
    }

    /// A pipeline whose lake is a prefix of a new bucket on the test run's S3 server.
    pub fn on_s3(name: &str) -> Self {
        Self::on_server(name, &s3())
    }

    /// A pipeline whose lake is a prefix of a new bucket on `s3`.
    pub fn on_server(name: &str, s3: &S3) -> Self {
        let bucket = s3.bucket(name);
        Self {
            lake_url: format!("s3://{bucket}/lkp/lake"),
            storage: s3.storage(),
            ..Self::new(name)
        }
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env("LKPLAKE_BROKERS", &self.brokers)
            .env("LKPLAKE_TOPIC", &self.topic)
            .env("LKPLAKE_DLQ_TOPIC", &self.dlq)
            .env("LKPLAKE_TRANSFORM_DLQ_TOPIC", &self.transform_dlq)
            .env("LKPLAKE_GROUP", &self.group)
            .env("LKPLAKE_SOURCES_TOPIC", &self.sources)
            .env("LKPLAKE_LAKE", &self.lake_url)
            .envs(self.storage.iter().map(|(k, v)| (k, v)));
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
        query_at(&self.lake_url, &self.storage, sql)
    }

    /// The data files table `name`'s current version references.
    pub fn live_files(&self, name: &str) -> Vec<String> {
        live_files_at(&format!("{}/{name}", self.lake_url), &self.storage)
    }
}

/// Runs `work` to completion on a runtime of its own: the tests are synchronous, delta-rs is not.
pub fn block_on<F: Future>(work: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
        .block_on(work)
}

/// The `commitInfo` of every commit of table `url`, newest first, as delta-rs reads the log;
/// fields it has no name for (`operationMetrics`) are in `info`.
pub fn commit_infos(url: &str, storage: &[(String, String)]) -> Vec<deltalake::kernel::CommitInfo> {
    use futures::TryStreamExt;
    block_on(async {
        let table = open_delta(url, storage)
            .await
            .unwrap_or_else(|| panic!("{url} is not a Delta table"));
        table
            .history(None)
            .try_collect()
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"))
    })
}

/// Table `url` (a local path or an `s3://` URL) opened with delta-rs directly, not through
/// lkplake's own lake code; `None` when no commit made it a table yet.
async fn open_delta(url: &str, storage: &[(String, String)]) -> Option<deltalake::DeltaTable> {
    if !url.contains("://") {
        // delta-rs cannot even build a local store on a directory that does not exist.
        if !Path::new(url)
            .join("_delta_log/00000000000000000000.json")
            .exists()
        {
            return None;
        }
    }
    let uri = deltalake::ensure_table_uri(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    let options = storage.iter().cloned().collect();
    match deltalake::open_table_with_storage_options(uri, options).await {
        Ok(table) => Some(table),
        Err(deltalake::DeltaTableError::NotATable(_)) => None,
        Err(e) => panic!("{url}: {e}"),
    }
}

/// Records `format` as table `table`'s lake format (`lkplake.format`), as a later lkplake
/// writing another format would, with delta-rs directly.
pub fn set_lake_format(lake: &Path, table: &str, format: &str) {
    let url = lake.join(table).to_string_lossy().into_owned();
    block_on(async {
        let delta = open_delta(&url, &[])
            .await
            .unwrap_or_else(|| panic!("{url} is not a Delta table"));
        delta
            .set_tbl_properties()
            .with_properties([("lkplake.format".to_owned(), format.to_owned())].into())
            .with_raise_if_not_exists(false)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
    });
}

/// Runs SQL over the local lake with DataFusion.
pub fn query(lake: &Path, sql: &str) -> Vec<RecordBatch> {
    query_at(&lake.to_string_lossy(), &[], sql)
}

/// Runs SQL with DataFusion over the lake at `lake` (a local path or an `s3://` URL).
pub fn query_at(lake: &str, storage: &[(String, String)], sql: &str) -> Vec<RecordBatch> {
    block_on(async {
        let ctx = SessionContext::new();
        for name in ["metrics", "reports", "failures", "mentions", "links"] {
            let table = open_delta(&format!("{lake}/{name}"), storage).await;
            let provider: std::sync::Arc<dyn datafusion::catalog::TableProvider> =
                if let Some(table) = table {
                    table
                        .table_provider()
                        .await
                        .unwrap_or_else(|e| panic!("{name}: {e}"))
                } else {
                    // No transformer has created the table yet: it is empty.
                    let schema = match name {
                        "metrics" => lkplake_schemas::tables::METRICS.clone(),
                        "failures" => lkplake_schemas::tables::FAILURES.clone(),
                        "mentions" => lkplake_schemas::tables::MENTIONS.clone(),
                        "links" => lkplake_schemas::tables::LINKS.clone(),
                        _ => lkplake_schemas::tables::REPORTS.clone(),
                    };
                    std::sync::Arc::new(
                        datafusion::datasource::MemTable::try_new(schema, vec![vec![]])
                            .unwrap_or_else(|e| panic!("{name}: {e}")),
                    )
                };
            ctx.register_table(name, provider)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        ctx.sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    })
}

/// The data files a local Delta table's current version references.
pub fn live_files(table: &Path) -> Vec<String> {
    live_files_at(&table.to_string_lossy(), &[])
}

/// The data files the current version of the table at `url` references.
pub fn live_files_at(url: &str, storage: &[(String, String)]) -> Vec<String> {
    block_on(async {
        let table = open_delta(url, storage)
            .await
            .unwrap_or_else(|| panic!("{url} is not a table"));
        table
            .get_file_uris()
            .unwrap_or_else(|e| panic!("{e}"))
            .collect()
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

/// A lake holding the five seed reports, written by `lkplake run` (embedded broker).
pub fn seed_lake(name: &str) -> PathBuf {
    let lake = temp_dir(name);
    run_into(&lake, &[Path::new("examples/reports")]);
    lake
}

/// `lkplake gen --out OUT ARGS...` (count, seed, years, truth), which must succeed.
pub fn generate(out: &Path, args: &[&str]) {
    let out_arg = out.to_string_lossy();
    let mut all = vec!["gen", "--out", &out_arg];
    all.extend_from_slice(args);
    let result = lkplake(&all, None);
    assert!(
        result.status.success(),
        "lkplake gen failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
}

/// `lkplake run --lake LAKE INPUTS...` on the embedded cluster, which must succeed; its stderr.
pub fn run_into(lake: &Path, inputs: &[&Path]) -> String {
    let lake_arg = lake.to_string_lossy();
    let inputs: Vec<String> = inputs
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["run", "--lake", &lake_arg];
    args.extend(inputs.iter().map(String::as_str));
    let out = lkplake(&args, None);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "lkplake run failed: {stderr}");
    stderr
}

/// A plain HTTP/1.1 GET on loopback; the response's head and body.
pub fn http_get(port: u16, path_and_query: &str, accept: Option<&str>) -> (String, String) {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path_and_query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .unwrap_or_else(|e| panic!("read: {e}"));
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {response:?}"));
    (head.to_owned(), body.to_owned())
}

/// `lkplake sql --lake LAKE --format json SQL`, parsed: one JSON object per row.
pub fn sql_json(lake: &Path, sql: &str) -> Vec<serde_json::Value> {
    let out = lkplake(
        &[
            "sql",
            "--lake",
            &lake.to_string_lossy(),
            "--format",
            "json",
            sql,
        ],
        None,
    );
    assert!(
        out.status.success(),
        "lkplake sql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out)
}

/// Runs `cmd` with `input` on stdin and waits for it.
pub fn run_with_stdin(mut cmd: Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input)
            .unwrap_or_else(|e| panic!("stdin: {e}"));
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait: {e}"))
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

pub const PG_PASSWORD: &str = "lkp-s3cret pass";

/// `lkplake serve --pg` on a free loopback port with [`PG_PASSWORD`], stopped on drop.
pub struct Server {
    pub port: u16,
    child: std::process::Child,
    log: PathBuf,
}

impl Server {
    pub fn start(lake: &Path, extra: &[&str]) -> Self {
        Self::start_on(&lake.to_string_lossy(), &[], extra)
    }

    /// `serve` over the lake at `lake` (a path or an `s3://` URL), reached with `storage`.
    pub fn start_on(lake: &str, storage: &[(String, String)], extra: &[&str]) -> Self {
        let port = free_port();
        let log = temp_dir("serve-log").join("serve.log");
        let file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec![
            "serve",
            "--lake",
            lake,
            "--pg",
            &listen,
            "--password",
            PG_PASSWORD,
        ];
        args.extend_from_slice(extra);
        let child = command_with(&args, storage)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn lkplake serve: {e}"));
        let mut server = Self { port, child, log };
        server.wait_ready();
        server
    }

    fn wait_ready(&mut self) {
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("lkplake serve exited with {status}: {}", self.log());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!(
            "lkplake serve did not listen on {} in 30 s: {}",
            self.port,
            self.log()
        );
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the server to exit (after a signal the test sent), at most 60 s.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let started = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if started.elapsed() > std::time::Duration::from_secs(60) {
                panic!("lkplake serve did not exit within 60 s: {}", self.log());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A libpq connection string for `password`.
    pub fn dsn(&self, password: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=lkplake dbname=lkplake password='{}' connect_timeout=10",
            self.port,
            password.replace('\'', "\\'")
        )
    }

    /// psql with unaligned, tuples-only output, stopping at the first error.
    pub fn psql(&self, password: &str, sql: &str) -> Output {
        self.psql_session(password, &[sql])
    }

    /// psql with unaligned, tuples-only output and verbose errors, stopping at the first error;
    /// the caller adds what it runs (`-c` statements, or statements on stdin) before the DSN.
    pub fn psql_command(&self) -> Command {
        let mut cmd = Command::new("psql");
        cmd.args([
            "-X",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            "VERBOSITY=verbose",
        ]);
        cmd
    }

    /// psql sending each statement as its own query, in one session.
    pub fn psql_session(&self, password: &str, statements: &[&str]) -> Output {
        let mut cmd = self.psql_command();
        for sql in statements {
            cmd.args(["-c", sql]);
        }
        cmd.arg(self.dsn(password))
            .output()
            .unwrap_or_else(|e| panic!("psql (postgresql-client) must be installed: {e}"))
    }

    /// Statements run by Python psycopg 3 (`tests/clients/pg_client.py`); its JSON answer.
    pub fn psycopg(
        &self,
        password: &str,
        statements: &serde_json::Value,
        load: &[&str],
    ) -> serde_json::Value {
        let mut cmd = Command::new("python3");
        cmd.arg(root().join("tests/clients/pg_client.py"))
            .arg(self.dsn(password))
            .args(load);
        let out = run_with_stdin(cmd, statements.to_string().as_bytes());
        let stdout = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "pg_client.py (needs psycopg: ./infra/test.sh installs it) gave no JSON ({e}): {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The commit files of `table`'s Delta log, oldest first.
pub fn log_entries(lake: &Path, table: &str) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(lake.join(table).join("_delta_log"))
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    entries.sort();
    entries
}

/// Sends SIGTERM to `pid`, the signal a deployment stops lkplake's processes with.
pub fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill: {e}"));
    assert!(status.success(), "kill -TERM {pid}: {status}");
}
