//! `lockstore`'s conventions: help and version, exit statuses (`flock(1)`, `timeout(1)`,
//! `env(1)`), the store from the environment, `--json`, and read-only commands that create
//! nothing. Over SQLite files (the server stores have the same paths: `read_only.rs`).
#[path = "../../lock-store/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lockstore() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockstore"));
    c.env_remove("LOCKSTORE_URL")
        .env_remove("LOCKSTORE_NAMESPACE");
    c
}

fn out(c: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// A SQLite URL in a fresh directory (the file does not exist yet).
fn fresh(label: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(common::unique_namespace(label));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("locks.db");
    let url = format!("sqlite://{}", file.display());
    (file, url)
}

fn sqlite_rows(file: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(file)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

#[test]
fn help_version_and_usage_errors() {
    for args in [
        &["--help"][..],
        &["help"],
        &["run", "--help"],
        &["help", "run"],
    ] {
        let (code, stdout, _) = out(lockstore().args(args));
        assert_eq!(code, 0, "{args:?}");
        assert!(stdout.contains("Usage: lockstore"), "{args:?}: {stdout}");
    }
    let (_, top, _) = out(lockstore().arg("--help"));
    for needle in [
        "Exit status",
        "126",
        "127",
        "LOCKSTORE_URL",
        "LOCKSTORE_NAMESPACE",
        "install",
        "uninstall",
    ] {
        assert!(top.contains(needle), "--help lacks {needle}: {top}");
    }
    let (_, run, _) = out(lockstore().args(["run", "--help"]));
    for needle in [
        "Exit status",
        "[default: 10s]",
        "[default: 0s]",
        "[default: default]",
        "[env: LOCKSTORE_URL=]",
        "--owner",
    ] {
        assert!(run.contains(needle), "run --help lacks {needle}: {run}");
    }
    let (code, version, _) = out(lockstore().arg("--version"));
    assert_eq!(code, 0);
    assert_eq!(
        version.trim(),
        format!("lockstore {}", env!("CARGO_PKG_VERSION"))
    );
    // No command: the help, as a usage error.
    let (code, _, stderr) = out(&mut lockstore());
    assert_eq!(code, 2);
    assert!(stderr.contains("Usage: lockstore"), "{stderr}");
    for args in [
        &["frobnicate"][..],
        &[
            "run",
            "--store",
            "memory:",
            "--key",
            "k",
            "--ttl",
            "5 parsecs",
            "--",
            "true",
        ],
        &["run", "--store", "memory:", "--key", "k", "--ttl", "5s"],
        &["inspect", "--store", "memory:"],
    ] {
        let (code, _, stderr) = out(lockstore().args(args));
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
    // A misspelt command is named with its likely meaning.
    let (_, _, stderr) = out(lockstore().arg("lsit"));
    assert!(stderr.contains("list"), "{stderr}");
}

#[test]
fn reads_of_a_missing_namespace_create_nothing_and_exit_6() {
    let (file, url) = fresh("cliro");
    for args in [
        &["inspect", "--store", &url, "job"][..],
        &["list", "--store", &url],
        &["query", "--store", &url],
        &["query", "--store", &url, "--json", "--prefix", "job"],
    ] {
        let (code, stdout, stderr) = out(lockstore().args(args));
        assert_eq!(code, 6, "{args:?}: {stdout} {stderr}");
        assert!(stderr.contains("does not exist"), "{stderr}");
    }
    assert!(!file.exists(), "a read created {}", file.display());
    // Once the file holds another namespace, a misspelt one still does not exist.
    let (code, _, stderr) =
        out(lockstore().args(["install", "--store", &url, "--namespace", "jobs"]));
    assert_eq!(code, 0, "{stderr}");
    let (code, _, _) =
        out(lockstore().args(["inspect", "--store", &url, "--namespace", "jbos", "x"]));
    assert_eq!(code, 6);
    let (code, stdout, _) =
        out(lockstore().args(["inspect", "--store", &url, "--namespace", "jobs", "x"]));
    assert_eq!((code, stdout.trim()), (0, "x: free"));
    assert_eq!(
        sqlite_rows(
            &file,
            "SELECT count(*) FROM expiring_lock_meta WHERE namespace = 'jbos'"
        ),
        0
    );
}

#[test]
fn store_from_the_environment_json_and_readable_times() {
    let (file, url) = fresh("clienv");
    // The holder's command runs until the test lets it go (this file appears).
    let go = file.with_file_name("go");
    let env = || {
        let mut c = lockstore();
        c.env("LOCKSTORE_URL", &url)
            .env("LOCKSTORE_NAMESPACE", "jobs");
        c
    };
    let mut holder = env()
        .args([
            "run",
            "--key",
            "report",
            "--ttl",
            "30s",
            "--owner",
            "replica-1",
            "--",
            "sh",
            "-c",
            &format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display()),
        ])
        .spawn()
        .unwrap();
    let listed = common::eventually("the holder listed", || {
        let (code, stdout, _) = out(env().args(["list"]));
        (code == 0 && stdout.contains("held by")).then_some(stdout)
    });
    assert!(listed.contains("namespace \"jobs\": 1 keys"), "{listed}");
    assert!(
        listed.contains("report: held by replica-1 with fence 1, since 20"),
        "{listed}"
    );
    // What remains of the 30 s lease (kept alive).
    let left: f64 = listed
        .split("Z (in ")
        .nth(1)
        .and_then(|rest| rest.split("s)").next())
        .and_then(|secs| secs.parse().ok())
        .unwrap_or_else(|| panic!("no remaining time in {listed}"));
    assert!((20.0..=30.0).contains(&left), "{left} s left in {listed}");
    let (code, json, _) = out(env().args(["inspect", "--json", "report"]));
    assert_eq!(code, 0);
    assert!(json.starts_with("{\"key\":\"report\",\"state\":\"held\",\"holder\":{\"owner\":\"replica-1\",\"fence\":1,\"deadline_ms\":"), "{json}");
    assert!(json.trim_end().ends_with("\"waiters\":[]}"), "{json}");
    // Held: 3, with who holds it.
    let (code, _, stderr) =
        out(env().args(["run", "--key", "report", "--ttl", "5s", "--", "true"]));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("held by replica-1 (fence 1)"), "{stderr}");
    // A waiter shows the wait it asked for (40 s), not the renewal horizon (WAIT_ALIVE, 2 s),
    // in text and in JSON.
    let mut waiter = env()
        .args(["run", "--key", "report", "--ttl", "5s", "--wait", "40s"])
        .args(["--owner", "replica-2", "--", "true"])
        .spawn()
        .unwrap();
    let shown = common::eventually("the waiter shown", || {
        let (code, stdout, _) = out(env().args(["inspect", "report"]));
        (code == 0 && stdout.contains("replica-2")).then_some(stdout)
    });
    let line = shown.lines().find(|l| l.contains("replica-2")).unwrap();
    assert!(line.contains("1. replica-2 waits until 20"), "{shown}");
    assert!(
        line.contains(
            "for a 5.0s lease (keeps its place while it renews it; next renewal due by 20"
        ),
        "{shown}"
    );
    let left: f64 = line
        .split("Z (in ")
        .nth(1)
        .and_then(|rest| rest.split("s)").next())
        .and_then(|secs| secs.parse().ok())
        .unwrap_or_else(|| panic!("no remaining wait in {shown}"));
    assert!(
        (30.0..=40.0).contains(&left),
        "{left} s of the wait left in {shown}"
    );
    let (code, json, _) = out(env().args(["inspect", "--json", "report"]));
    assert_eq!(code, 0);
    let field = |name: &str| -> u64 {
        let at = json
            .find(&format!("\"{name}\":"))
            .unwrap_or_else(|| panic!("{name} in {json}"));
        let digits: String = json[at + name.len() + 3..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap()
    };
    let (until, renew_by) = (field("wait_until_ms"), field("renew_by_ms"));
    let now = now_ms();
    assert!(until > now + 30_000 && until <= now + 40_000, "{json}");
    // Kept alive at most WAIT_ALIVE ahead (a loaded machine may have let it fall behind).
    assert!(renew_by <= now + 2_000 && renew_by < until, "{json}");
    std::fs::write(&go, b"").unwrap();
    assert!(holder.wait().unwrap().success());
    assert!(waiter.wait().unwrap().success());
    let (code, json, _) = out(env().args(["list", "--json"]));
    assert_eq!(code, 0);
    assert!(json.contains("\"last_fence\":2,\"keys\":[]"), "{json}");
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(since.unwrap().as_millis()).unwrap()
}

#[test]
fn commands_that_cannot_run_exit_126_or_127_and_store_errors_5() {
    let (_file, url) = fresh("cliexec");
    let run = |cmd: &str| {
        out(lockstore().args([
            "run", "--store", &url, "--key", "k", "--ttl", "5s", "--", cmd,
        ]))
    };
    let (code, _, stderr) = run("/no/such/command");
    assert_eq!(code, 127, "{stderr}");
    let not_executable = std::env::temp_dir().join(common::unique_namespace("noexec"));
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    let (code, _, stderr) = run(not_executable.to_str().unwrap());
    assert_eq!(code, 126, "{stderr}");
    let _ = std::fs::remove_file(not_executable);
    let (code, _, _) = run("false");
    assert_eq!(code, 1);
    // A store that cannot be written: 5, with the store's words.
    let (code, _, stderr) = out(lockstore().args([
        "run",
        "--store",
        "sqlite:///no/such/dir/locks.db",
        "--key",
        "k",
        "--ttl",
        "5s",
        "--",
        "true",
    ]));
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("/no/such/dir/locks.db"), "{stderr}");
    // A bad URL or namespace is a usage error.
    let (code, _, stderr) = out(lockstore().args(["list", "--store", "ftp://x"]));
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) =
        out(lockstore().args(["list", "--store", &url, "--namespace", "Bad Name"]));
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn uninstall_asks_for_yes() {
    let (file, url) = fresh("cliun");
    let (code, _, _) = out(lockstore().args([
        "run", "--store", &url, "--key", "k", "--ttl", "5s", "--", "true",
    ]));
    assert_eq!(code, 0);
    let (code, _, stderr) = out(lockstore().args(["uninstall", "--store", &url]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--yes"), "{stderr}");
    let (code, _, _) = out(lockstore().args(["list", "--store", &url]));
    assert_eq!(code, 0, "the namespace went without --yes");
    let (code, stdout, _) = out(lockstore().args(["uninstall", "--store", &url, "--yes"]));
    assert_eq!(code, 0);
    assert!(stdout.contains("uninstalled"), "{stdout}");
    let (code, _, _) = out(lockstore().args(["list", "--store", &url]));
    assert_eq!(code, 6);
    // A client that had it open sees it gone too, and its next write installs it again.
    let (code, _, _) = out(lockstore().args(["install", "--store", &url]));
    assert_eq!(code, 0);
    let open = lock_store::Locks::open(&url, "default").unwrap();
    assert!(open.inspect("k").unwrap().is_none());
    let (code, _, _) = out(lockstore().args(["uninstall", "--store", &url, "--yes"]));
    assert_eq!(code, 0);
    assert!(matches!(
        open.inspect("k"),
        Err(lock_store::Error::Store(
            lock_store::StoreError::NoNamespace { .. }
        ))
    ));
    open.try_acquire("k", "again", std::time::Duration::from_secs(5))
        .unwrap()
        .release()
        .unwrap();
    let (code, _, _) = out(lockstore().args(["uninstall", "--store", &url, "--yes"]));
    assert_eq!(code, 0);
    assert_eq!(
        sqlite_rows(&file, "SELECT count(*) FROM expiring_lock_records"),
        0
    );
}

/// The lock kinds from the command line: shared holders side by side with their metadata, an
/// exclusive `run` refused meanwhile, `query` as text and JSON, `steal` stopping both holders'
/// commands with a message that says why, and a minimum hold that outlives its command.
#[test]
fn shared_steal_query_and_min_hold_from_the_cli() {
    let (_file, url) = fresh("clikinds");
    let env = || {
        let mut c = lockstore();
        c.env("LOCKSTORE_URL", &url)
            .env("LOCKSTORE_NAMESPACE", "kinds");
        c
    };
    let reader = |name: &str| {
        env()
            .args(["run", "--key", "report", "--ttl", "3s", "--shared"])
            .args(["--owner", name, "--metadata", &format!("{name} reads")])
            .args(["--", "sleep", "30"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let readers = [reader("reader-1"), reader("reader-2")];
    let page = common::eventually("both readers in the query", || {
        let (code, stdout, _) = out(env().args(["query", "--json", "--prefix", "rep"]));
        let page: serde_json::Value = serde_json::from_str(&stdout).ok()?;
        let holders = page["keys"][0]["holders"].as_array()?.len();
        (code == 0 && holders == 2).then_some(page)
    });
    assert_eq!(page["next"], serde_json::Value::Null, "{page}");
    let key = &page["keys"][0];
    assert_eq!(key["key"], "report", "{page}");
    for holder in key["holders"].as_array().unwrap() {
        assert_eq!(holder["mode"], "shared", "{page}");
        let owner = holder["owner"].as_str().unwrap();
        assert_eq!(holder["metadata"], format!("{owner} reads"), "{page}");
    }
    let (code, text, _) = out(env().args(["query"]));
    assert_eq!(code, 0);
    assert!(text.contains("report: held shared by reader-"), "{text}");
    assert!(text.contains("(reader-1 reads)"), "{text}");
    // An exclusive run waits for both: without a wait it is refused as held.
    let (code, _, stderr) =
        out(env().args(["run", "--key", "report", "--ttl", "5s", "--", "true"]));
    assert_eq!(code, 3, "{stderr}");
    // A query's limit is checked: a usage error.
    let (code, _, stderr) = out(env().args(["query", "--limit", "0"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("query-limit") || stderr.contains("1000"),
        "{stderr}"
    );

    // The operator steals the key: both readers' commands are stopped, each told why.
    let (code, _, stderr) = out(env()
        .args([
            "steal", "--key", "report", "--ttl", "5s", "--owner", "operator", "--",
        ])
        .args(["true"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("operator stole \"report\" with fence 3"),
        "{stderr}"
    );
    for reader in readers {
        let output = reader.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(4), "{stderr}");
        assert!(stderr.contains("it was stolen at"), "{stderr}");
    }
    let (code, _, stderr) = out(env().args([
        "steal", "--key", "report", "--ttl", "5s", "--wait", "1s", "--", "true",
    ]));
    assert_eq!(code, 2, "{stderr}");

    // A minimum hold keeps the key after a command that ended at once.
    let (code, _, stderr) = out(env()
        .args([
            "run",
            "--key",
            "nightly",
            "--ttl",
            "30s",
            "--min-hold",
            "20s",
        ])
        .args(["--", "true"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("stays held until"), "{stderr}");
    let (code, _, stderr) =
        out(env().args(["run", "--key", "nightly", "--ttl", "5s", "--", "true"]));
    assert_eq!(code, 3, "{stderr}");
    let (code, json, _) = out(env().args(["inspect", "--json", "nightly"]));
    assert_eq!(code, 0);
    let info: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(info["holders"][0]["ended"], "released", "{json}");
    assert!(info["holders"][0]["min_until_ms"].is_u64(), "{json}");
    // Granted before its minimum hold ends, and shown as a UTC time too.
    let granted = info["holders"][0]["granted_at_ms"]
        .as_u64()
        .expect("granted_at_ms");
    assert!(
        granted <= info["holders"][0]["min_until_ms"].as_u64().unwrap(),
        "{json}"
    );
    assert!(
        info["holders"][0]["granted_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{json}"
    );
    let (code, text, _) = out(env().args(["inspect", "nightly"]));
    assert_eq!(code, 0);
    assert!(text.contains(" since "), "{text}");
}
