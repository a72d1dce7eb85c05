//! How the binary starts, fails and stops: exit statuses that say what failed, errors that
//! name the address or path, and SIGTERM handled without losing an answer.

use crate::common::*;
use std::io::Read;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Nothing listens on port 1 of loopback.
const NOBODY: &str = "127.0.0.1:1";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `lkplake ARGS` and how long it took; killed (and failed) after 60 s.
fn timed(args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
    let mut cmd = command(args);
    cmd.env_remove("LKPLAKE_BROKERS")
        .env_remove("LKPLAKE_LAKE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{e}"));
    while child.try_wait().ok().flatten().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("lkplake {} still running after 60 s", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    (out, started.elapsed())
}

fn assert_broker_refused(args: &[&str]) {
    let (out, took) = timed(args, &[]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "the broker status: {text}");
    assert!(
        text.contains("no Kafka broker answers at 127.0.0.1:1"),
        "{text}"
    );
    assert!(text.contains("Connection refused"), "the reason: {text}");
    // It used to wait 60 s in silence, then blame a topic.
    assert!(took < Duration::from_secs(15), "took {took:?}: {text}");
}

#[test]
fn an_unreachable_broker_is_named_with_its_reason_within_fifteen_seconds() {
    let lake = temp_dir("unreachable-lake");
    let lake = lake.to_string_lossy();
    assert_broker_refused(&["ingest", "--brokers", NOBODY, "examples/reports"]);
    assert_broker_refused(&["transform", "--brokers", NOBODY, "--lake", &lake]);
    assert_broker_refused(&[
        "run",
        "--brokers",
        NOBODY,
        "--lake",
        &lake,
        "examples/reports",
    ]);
}

#[test]
fn a_lake_that_cannot_be_written_is_named_and_exits_with_the_lake_status() {
    // A directory cannot be made below a regular file, whoever runs the test (root included).
    let dir = temp_dir("unwritable-lake");
    let file = dir.join("a-file");
    std::fs::write(&file, b"not a directory").unwrap_or_else(|e| panic!("{e}"));
    let lake = file.join("lake");
    let lake = lake.to_string_lossy();

    let (out, _) = timed(&["run", "--lake", &lake, "examples/reports"], &[]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.contains(lake.as_ref()), "names the path: {text}");
    assert!(text.contains("Not a directory"), "{text}");
    assert!(
        !text.contains("lkplake ingest:"),
        "nothing is read before the lake is known to be writable: {text}"
    );

    let brokers = broker();
    let (out, _) = timed(&["transform", "--brokers", &brokers, "--lake", &lake], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));

    // Readers never create a lake: a wrong path says where it looked.
    let missing = dir.join("no-lake-here");
    let missing = missing.to_string_lossy();
    let (out, _) = timed(&["sql", "--lake", &missing, "SELECT 1"], &[]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.contains("no lake table at"), "{text}");
    assert!(text.contains(missing.as_ref()), "{text}");
}

#[test]
fn usage_mistakes_exit_with_two_and_say_what_to_pass() {
    let (out, _) = timed(&["ingest", "examples/reports"], &[]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("no broker given: pass --brokers"), "{text}");

    let dir = temp_dir("bad-directions");
    let directions = dir.join("directions");
    std::fs::write(&directions, "will-it-scale\\.per_process_ops upward\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let lake = dir.join("lake");
    let (out, _) = timed(
        &[
            "run",
            "--lake",
            &lake.to_string_lossy(),
            "--directions",
            &directions.to_string_lossy(),
            "examples/reports",
        ],
        &[],
    );
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("line 1"), "{text}");
    assert!(text.contains("not `upward`"), "{text}");

    // A scheme no store of this build serves (s3:// is one: tests/cli/objectstore.rs).
    let (out, _) = timed(
        &["run", "--lake", "gs://bucket/lake", "examples/reports"],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap refuses the value: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("gs://bucket/lake") && stderr(&out).contains("not gs://"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_directions_file_decides_which_way_is_better_in_the_lake() {
    let dir = temp_dir("directions");
    let directions = dir.join("directions");
    // Seed 003's headline metric, turned around; seed 002's stays at its default.
    std::fs::write(
        &directions,
        "# a fork of will-it-scale that prints time per operation\nwill-it-scale\\.per_process_ops lower\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let lake = dir.join("lake");
    let (out, _) = timed(
        &[
            "run",
            "--lake",
            &lake.to_string_lossy(),
            "--directions",
            &directions.to_string_lossy(),
            "examples/reports",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let direction = |metric: &str| {
        column_strings(
            &query(
                &lake,
                &format!("SELECT DISTINCT direction FROM metrics WHERE metric = '{metric}'"),
            ),
            0,
        )
    };
    assert_eq!(
        direction("will-it-scale.per_process_ops"),
        ["lower_is_better"]
    );
    assert_eq!(direction("vm-scalability.throughput"), ["higher_is_better"]);
}

#[test]
fn sigterm_to_serve_during_a_long_query_lets_the_client_finish_and_refuses_newcomers() {
    let lake = seed_lake("serve-sigterm");
    let server = Server::start(&lake, &["--statement-timeout", "600s", "--grace", "600s"]);
    // The sum of 1..N is N(N+1)/2; N is large enough for the query to outlast the signal,
    // which the client's own timing below proves.
    const N: u64 = 150_000_000;
    let client = format!(
        r#"
import json, sys, time, psycopg
with psycopg.connect(sys.argv[1]) as conn:
    started = time.monotonic()
    try:
        total = conn.execute("SELECT sum(value) FROM generate_series(1, {N}) AS t(value)").fetchone()[0]
        print(json.dumps({{"sum": int(total), "seconds": time.monotonic() - started}}))
    except psycopg.Error as e:
        print(json.dumps({{"sqlstate": e.sqlstate, "error": str(e), "seconds": time.monotonic() - started}}))
"#
    );
    let started = Instant::now();
    let child = std::process::Command::new("python3")
        .args(["-c", &client, &server.dsn(PG_PASSWORD)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3 with psycopg: {e}"));
    std::thread::sleep(Duration::from_secs(2));
    let signalled_after = started.elapsed();
    sigterm(server.pid());
    // The listener closes at once: a newcomer is refused rather than left waiting.
    let mut refused = false;
    for _ in 0..50 {
        if std::net::TcpStream::connect(("127.0.0.1", server.port)).is_err() {
            refused = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        refused,
        "still accepting 5 s after SIGTERM: {}",
        server.log()
    );

    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} {}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        )
    });
    let seconds = answer["seconds"].as_f64().unwrap_or_default();
    assert!(
        seconds > signalled_after.as_secs_f64(),
        "the query ended ({seconds} s) before the signal ({signalled_after:?}): make N larger"
    );
    assert_eq!(
        answer["sum"].as_u64(),
        Some(N * (N + 1) / 2),
        "the client got its answer: {answer} {}",
        server.log()
    );
    let mut server = server;
    let exit = server.wait();
    assert!(exit.success(), "{exit}: {}", server.log());
    assert!(
        server.log().contains("lkplake serve: stopped"),
        "{}",
        server.log()
    );
}

#[test]
fn sigterm_to_serve_says_goodbye_to_an_idle_client_with_postgres_own_error() {
    let lake = seed_lake("serve-goodbye");
    let server = Server::start(&lake, &[]);
    // An idle session (psql reading statements from stdin, none yet), as Grafana's pool keeps.
    let mut psql = std::process::Command::new("psql")
        .args([
            "-X",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            &server.dsn(PG_PASSWORD),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("psql: {e}"));
    let mut stdin = psql.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    use std::io::Write;
    writeln!(stdin, "SELECT 40 + 2;").unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_secs(2));
    sigterm(server.pid());
    std::thread::sleep(Duration::from_secs(2));
    let _ = writeln!(stdin, "SELECT 1;");
    drop(stdin);
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = psql.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = psql.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let _ = psql.wait();
    assert!(out.starts_with("42\n"), "the first answer: {out} {err}");
    assert!(
        err.contains("terminating connection due to administrator command"),
        "psql reports the reason, not a reset: {err}"
    );
    let mut server = server;
    assert!(server.wait().success(), "{}", server.log());
}
