//! A broker that goes away and comes back: a durable Tansu (its SQLite engine, started by
//! `infra/tansu.sh start-durable`) stopped in the middle of an ingest and again in the middle
//! of a transform, and started again on the same files. Producer and transformer wait and go
//! on by themselves; nobody restarts them.

use crate::common::{Pipeline, Server, free_port, root, scalar_i64, temp_dir, wait_for_messages};
use crate::pipeline::{
    assert_each_report_once, expected, generated, scrape_until, spawn_transformer,
};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A Tansu of this test's own, keeping its data in `dir`.
struct DurableBroker {
    port: u16,
    dir: PathBuf,
}

impl DurableBroker {
    fn start() -> Self {
        let broker = Self {
            port: free_port(),
            dir: temp_dir("tansu-durable"),
        };
        broker.up();
        broker
    }

    fn script(&self, args: &[&str]) {
        let out = Command::new(root().join("infra/tansu.sh"))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("infra/tansu.sh: {e}"));
        assert!(
            out.status.success(),
            "infra/tansu.sh {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn up(&self) {
        self.script(&[
            "start-durable",
            &self.port.to_string(),
            &self.dir.to_string_lossy(),
        ]);
    }

    fn down(&self) {
        self.script(&["stop", &self.port.to_string()]);
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for DurableBroker {
    fn drop(&mut self) {
        let _ = Command::new(root().join("infra/tansu.sh"))
            .args(["stop", &self.port.to_string()])
            .output();
    }
}

/// Waits for `child` to exit, at most `limit`; its status, or a failure with `what` it was.
fn exit_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("{e}")) {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_durable_broker_stopped_during_ingest_and_during_transform_loses_and_doubles_nothing() {
    let reports = generated("broker-restart", 2000);
    let e = expected(&[&reports]);
    assert_eq!(e.reports, 2000);
    let broker = DurableBroker::start();
    let p = Pipeline {
        brokers: broker.address(),
        ..Pipeline::new("broker-restart")
    };
    let http_port = free_port();
    let http = format!("127.0.0.1:{http_port}");
    let brokers = broker.address();

    // Down in the middle of the ingest.
    let ingest_log = temp_dir("restart-ingest").join("ingest.log");
    let mut ingest = p
        .cmd(&["ingest", "--partitions", "3", &reports])
        .stderr(std::fs::File::create(&ingest_log).unwrap_or_else(|e| panic!("{e}")))
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let sent = wait_for_messages(&brokers, &p.topic, 0, Duration::from_secs(120));
    assert!(
        ingest.try_wait().ok().flatten().is_none(),
        "ingest ended before the broker was stopped ({sent} messages in the topic): {}",
        std::fs::read_to_string(&ingest_log).unwrap_or_default()
    );
    broker.down();
    std::thread::sleep(Duration::from_secs(5));
    broker.up();
    let status = exit_within(&mut ingest, Duration::from_secs(300), "ingest");
    let ingested = std::fs::read_to_string(&ingest_log).unwrap_or_default();
    eprintln!("{ingested}");
    assert!(status.success(), "ingest failed: {ingested}");
    assert!(
        ingested.contains("2000 reports (0 quoted copies)"),
        "{ingested}"
    );

    // The exporter of a server watching the pipeline, to see the broker go down; the lake
    // exists before it starts, as in production (`compact` opens and creates it).
    assert!(p.run(&["compact"]).status.success());
    let server = Server::start_on(
        &p.lake_url,
        &[],
        &[
            "--http",
            &http,
            "--refresh",
            "300ms",
            "--brokers",
            &brokers,
            "--topic",
            &p.topic,
            "--dlq-topic",
            &p.dlq,
        ],
    );

    // Down in the middle of the transform.
    let (mut transformer, log) = spawn_transformer(&p, &["--until-idle"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let written = scalar_i64(&p.query("SELECT count(DISTINCT report_key) FROM reports"));
        assert!(
            written < 2000,
            "the transform ended before the broker was stopped"
        );
        if written > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "nothing transformed in 120 s: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    broker.down();
    scrape_until(http_port, "lkp_pipeline_up 0 with the broker down", |s| {
        s.iter().any(|(n, v)| n == "lkp_pipeline_up" && *v == 0.0)
    });
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        transformer.try_wait().ok().flatten().is_none(),
        "the transformer gave up while the broker was down: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    broker.up();
    let status = exit_within(&mut transformer, Duration::from_secs(300), "transform");
    let transformed = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "transform failed: {transformed}");
    scrape_until(http_port, "lkp_pipeline_up 1 with the broker back", |s| {
        s.iter().any(|(n, v)| n == "lkp_pipeline_up" && *v == 1.0)
    });
    drop(server);
    assert_each_report_once(&p, &e);
}
