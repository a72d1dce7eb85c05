//! `lkplake serve`'s limits on every protocol path: server-side cursors and suspended portals
//! (psycopg 3 in both implementations, psycopg2, asyncpg), per-connection settings, logins
//! counted only once they succeed, SQL text size and planning time. The clients are real
//! (`tests/clients/server_limits.py`); where a client cannot misbehave, raw sockets do.
//!
//! Seed 002's vm-scalability.throughput for the head commit is printed as 3.164e+08 in
//! `examples/reports/002_5fa9b7d75deb5046.txt`; the seed lake holds 5 report tests and 560
//! metric rows (see `clients.rs`).

use crate::common::{PG_PASSWORD, Server, seed_lake};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

const THROUGHPUT: f64 = 316_400_000.0;
const METRIC_ROWS: u64 = 560;

fn check(server: &Server, check: &str, env: &[(&str, &str)]) -> Value {
    check_with(server, check, env, &[])
}

fn check_with(server: &Server, check: &str, env: &[(&str, &str)], extra: &[&str]) -> Value {
    let out = Command::new("python3")
        .arg(crate::common::root().join("tests/clients/server_limits.py"))
        .args([check, "127.0.0.1", &server.port.to_string(), PG_PASSWORD])
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "server_limits.py {check} failed: {stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{check}: no JSON ({e}): {stdout}"))
}

#[test]
fn server_side_cursors_read_every_row_with_psycopg_psycopg2_and_asyncpg() {
    let lake = seed_lake("limits-cursors");
    let server = Server::start(&lake, &[]);
    for implementation in ["binary", "python"] {
        let got = check(&server, "cursors", &[("PSYCOPG_IMPL", implementation)]);
        let psycopg = &got["psycopg"];
        assert_eq!(psycopg["implementation"], implementation, "{got:#}");
        assert_eq!(
            psycopg["columns"],
            serde_json::json!(["head_value"]),
            "{got:#}"
        );
        assert_eq!(psycopg["throughput"].as_f64(), Some(THROUGHPUT), "{got:#}");
        assert_eq!(
            psycopg["metric_rows"].as_u64(),
            Some(METRIC_ROWS),
            "{got:#}"
        );
        assert_eq!(psycopg["first_metric_is_text"], true, "{got:#}");
        for client in ["psycopg2", "asyncpg"] {
            assert_eq!(
                got[client]["throughput"].as_f64(),
                Some(THROUGHPUT),
                "{client}: {got:#}"
            );
            assert_eq!(
                got[client]["metric_rows"].as_u64(),
                Some(METRIC_ROWS),
                "{client}: {got:#}"
            );
        }
    }
}

#[test]
fn a_cursor_obeys_the_statement_timeout_and_holds_no_running_slot_between_fetches() {
    let lake = seed_lake("limits-declare");
    let server = Server::start(&lake, &["--statement-timeout", "2s", "--max-running", "1"]);
    // Declared but not fetched from: nothing runs, so the one running slot stays free for
    // another client; the FETCH is a statement of its own and stops at the timeout.
    let mut psql = Command::new("timeout");
    psql.args([
        "120",
        "psql",
        "-X",
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
    ])
    .args(["-c", "BEGIN"])
    .args([
        "-c",
        "DECLARE c CURSOR FOR SELECT count(*) FROM generate_series(1, 10000000000000)",
    ])
    .args(["-c", "SELECT count(DISTINCT report_key) FROM reports"])
    .args(["-c", "FETCH ALL FROM c"])
    .arg(server.dsn(PG_PASSWORD));
    let out = psql.output().unwrap_or_else(|e| panic!("psql: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout, "5\n", "{stderr}\n{}", server.log());
    assert!(
        stderr.contains("canceling statement due to statement timeout (2000 ms)"),
        "{stderr}"
    );
    // The cursor's query no longer runs: the one running slot serves the next client.
    let out = server.psql(
        PG_PASSWORD,
        "SELECT count(DISTINCT report_key) FROM reports",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "5\n");
}

#[test]
fn a_suspended_portal_gives_its_running_slot_back_until_it_is_read_again() {
    let lake = seed_lake("limits-portal");
    let server = Server::start(&lake, &["--max-running", "1"]);
    let got = check(&server, "idle-portal", &[]);
    assert_eq!(got["first"], serde_json::json!([1, 2]), "{got:#}");
    assert_eq!(
        got["other_client"]["rows"],
        serde_json::json!([[5]]),
        "{got:#}"
    );
    assert_eq!(got["rest"], serde_json::json!([3, 4, 5]), "{got:#}");
}

/// Issue 38: a statement that reads no lake table (SELECT 1, SET, SHOW, a catalog query) never
/// queues behind the statements holding the running turns; one that reads the lake does.
#[test]
fn statements_that_read_no_lake_table_do_not_wait_for_a_running_turn() {
    let lake = seed_lake("limits-no-turn");
    let server = Server::start(&lake, &["--max-running", "1"]);
    let got = check(&server, "no-turn", &[]);
    assert_eq!(got.get("never_busy"), None, "{got:#}");
    let expected = serde_json::json!(["ok", [[1]], [["2000ms"]], [[1]], [[1]]]);
    assert_eq!(got["answers"]["simple"], expected, "{got:#}");
    assert_eq!(got["answers"]["extended"], expected, "{got:#}");
    assert_eq!(got["lake_query_still_waits"], true, "{got:#}");
    assert!(
        got["holder"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("canceling statement due to statement timeout")),
        "the endless count ran to its own timeout: {got:#}"
    );
}

/// Issue 38: a statement's turn bounds its execution, not the client's reading: a client that
/// stops reading an answer the server can read ahead (4 MB) does not hold the only turn; one
/// too large to read ahead (40 MB) holds it until it is read, as before.
#[test]
fn a_client_that_stops_reading_holds_no_turn_once_its_answer_is_read_ahead() {
    let lake = seed_lake("limits-slow-reader");
    let server = Server::start(&lake, &["--max-running", "1"]);
    let got = check(&server, "slow-reader", &[]);
    let small = &got["4MB"];
    assert_eq!(small["first_len"], 1001, "{got:#}");
    assert_eq!(
        small["other_client"]["rows"],
        serde_json::json!([[5]]),
        "{got:#}"
    );
    assert_eq!(small["rows"], 4000, "{got:#}");
    let large = &got["40MB"];
    assert!(
        large["other_client"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("canceling statement due to statement timeout")),
        "{got:#}"
    );
    assert_eq!(large["rows"], 40000, "{got:#}");
}

#[test]
fn set_timezone_changes_only_the_connection_that_set_it() {
    let lake = seed_lake("limits-timezone");
    let server = Server::start(&lake, &[]);
    let got = check(&server, "timezone", &[]);
    assert_eq!(got["tokyo"], "Asia/Tokyo", "{got:#}");
    assert_ne!(got["other_before"], "Asia/Tokyo", "{got:#}");
    assert_eq!(got["other_after"], got["other_before"], "{got:#}");
    assert_eq!(got["new_connection"], got["other_before"], "{got:#}");
}

/// What the server wrote to a socket before closing it, read within `wait`.
fn answer(socket: &mut TcpStream, wait: Duration) -> String {
    socket
        .set_read_timeout(Some(wait))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut got = Vec::new();
    let _ = socket.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn only_logged_in_connections_count_and_a_refused_client_is_told_why() {
    let lake = seed_lake("limits-logins");
    let server = Server::start(
        &lake,
        &[
            "--max-connections",
            "2",
            "--max-starting",
            "4",
            "--startup-timeout",
            "5s",
        ],
    );
    let connect =
        || TcpStream::connect(("127.0.0.1", server.port)).unwrap_or_else(|e| panic!("{e}"));
    // Five sockets start a login and never finish it: four fill --max-starting, and the one
    // left without a place after waiting a second is answered 53300. The four are told why
    // they are closed once the startup timeout passes.
    let mut sockets: Vec<TcpStream> = (0..5).map(|_| connect()).collect();
    for socket in &mut sockets {
        socket
            .write_all(&startup_message())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let answers: Vec<String> = sockets
        .iter_mut()
        .map(|socket| answer(socket, Duration::from_secs(60)))
        .collect();
    let refused = answers
        .iter()
        .filter(|a| {
            a.contains(
                "C53300\0Msorry, too many clients already (4 connections are still logging in)",
            )
        })
        .count();
    let timed_out = answers
        .iter()
        .filter(|a| {
            a.contains("C08006\0Mcanceling authentication due to timeout (the login must finish within 5000 ms)")
        })
        .count();
    assert_eq!((refused, timed_out), (1, 4), "{answers:#?}");

    // Two sockets still logging in do not take the two places of --max-connections.
    let _silent = [connect(), connect()];
    let got = check(&server, "logins", &[]);
    assert_eq!(got["logged_in"], serde_json::json!([1, 1]), "{got:#}");
    assert!(
        got["third"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("sorry, too many clients already (--max-connections 2)")),
        "{got:#}"
    );
    assert_eq!(
        got["third_after_one_left"]["rows"],
        serde_json::json!([[3]]),
        "{got:#}"
    );
}

/// A protocol 3.0 StartupMessage for user lkplake.
fn startup_message() -> Vec<u8> {
    let mut body = 196_608u32.to_be_bytes().to_vec();
    for part in ["user", "lkplake", "database", "lkplake", ""] {
        body.extend_from_slice(part.as_bytes());
        body.push(0);
    }
    let mut message = u32::try_from(body.len() + 4)
        .unwrap_or(u32::MAX)
        .to_be_bytes()
        .to_vec();
    message.extend_from_slice(&body);
    message
}

#[test]
fn sql_text_over_one_mebibyte_is_refused_and_planning_obeys_the_statement_timeout() {
    let lake = seed_lake("limits-sql-size");
    let server = Server::start(&lake, &[]);
    // Simple protocol: psql reading a 2 MiB statement from stdin.
    let long = format!("SELECT 1 AS x{}", " ".repeat(2 << 20));
    let mut psql = server.psql_command();
    psql.arg(server.dsn(PG_PASSWORD));
    let out = crate::common::run_with_stdin(psql, format!("{long};\n").as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a 2 MiB statement was run");
    assert!(
        stderr.contains("54000") && stderr.contains("1048576 bytes"),
        "{stderr}"
    );
    // Extended protocol: psycopg sends the same text in a Parse message.
    let got = server.psycopg(PG_PASSWORD, &serde_json::json!([long, "SELECT 2"]), &[]);
    assert_eq!(got[0]["error"]["sqlstate"], "54000", "{got:#}");
    assert_eq!(got[1]["rows"], serde_json::json!([[2]]), "{got:#}");

    // Planning 100,000 VALUES rows takes far more than 1 ms; Parse alone is refused.
    let got = check(&server, "plan-timeout", &[]);
    assert!(
        got["sql_bytes"].as_u64().is_some_and(|n| n < 1 << 20),
        "{got:#}"
    );
    assert_eq!(got["error"]["sqlstate"], "57014", "{got:#}");
    assert_eq!(got["after"], 42, "{got:#}");
}

#[test]
fn a_value_larger_than_the_memory_limit_is_refused_and_big_results_stream_to_the_client() {
    let lake = seed_lake("limits-memory");
    let server = Server::start(
        &lake,
        &["--memory-limit", "64M", "--statement-timeout", "3s"],
    );
    // repeat, lpad and rpad size their result from an argument: 2 GiB and 1 GB strings would
    // be built outside the memory pool; within it they are refused before they are built. A
    // string_agg grows its one value row by row: 1,000,000 values of 1,000 bytes make a 1 GB
    // string, with or without groups (grouped, it took 2.6 GB before the final aggregation
    // refused it); it is refused once what it gathered passes the limit.
    for sql in [
        "SELECT length(repeat('x', 2147483647))",
        "SELECT length(lpad('x', 1000000000))",
        "SELECT length(rpad('x', 1000000000, 'yz'))",
        "SELECT length(string_agg(repeat('x', 1000), ',')) FROM generate_series(1, 1000000)",
        "SELECT value % 2 AS k, length(string_agg(repeat('x', 1000), ',')) \
         FROM generate_series(1, 1000000) GROUP BY k",
    ] {
        let out = server.psql(PG_PASSWORD, sql);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sql} ran");
        assert!(stderr.contains("Resources exhausted"), "{sql}: {stderr}");
    }
    // Within the limit they answer: 2,000 and 70 characters; 1,000 values of 10 bytes and
    // 999 commas; a grouped, ordered string_agg as DataFusion gives it.
    for (sql, expected) in [
        (
            "SELECT length(repeat('ab', 1000)), length(lpad('x', 70))",
            "2000|70\n",
        ),
        (
            "SELECT length(string_agg(repeat('x', 10), ',')) FROM generate_series(1, 1000)",
            "10999\n",
        ),
        (
            "SELECT value % 3 AS k, string_agg(CAST(value AS VARCHAR), ',' ORDER BY value DESC) \
             FROM generate_series(1, 7) GROUP BY k ORDER BY k",
            "0|6,3\n1|7,4,1\n2|5,2\n",
        ),
    ] {
        let out = server.psql(PG_PASSWORD, sql);
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{sql}");
    }

    // psycopg's single-row mode asks for every row of a query that never ends. Sent as they are
    // made, rows reach the client before the 3 s timeout stops the query; collected first (as
    // pgwire's Execute did), none would, and memory would grow with the rows.
    let got = check(&server, "stream", &[]);
    assert!(
        got["rows_before_error"].as_u64().is_some_and(|n| n > 0),
        "{got:#}"
    );
    assert_eq!(got["error"]["sqlstate"], "57014", "{got:#}");
}
