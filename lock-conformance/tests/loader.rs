//! The loader refuses every malformed vector file with a message that says where, and the runner
//! reports a wrong expectation as `file / scenario / step N: expected X, got Y`.

use std::path::PathBuf;

use lock_conformance::{load_file, run_file, NativeDriver};

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lock-vectors-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn load_error(name: &str, text: &str) -> String {
    match load_file(&write(name, text)) {
        Ok(_) => panic!("{name} loaded but must be refused"),
        Err(e) => e.to_string(),
    }
}

const OK_STEP: &str = r#"{"op": "try-acquire", "now": 0, "key": "k", "owner": "a", "ttl": 10, "ok": {"acquired": {"fence": 1, "deadline": 10}}}"#;

fn file_with_step(step: &str) -> String {
    format!(r#"{{"description": "d", "scenarios": [{{"name": "s", "steps": [{step}]}}]}}"#)
}

#[test]
fn a_well_formed_file_loads() {
    let loaded = load_file(&write("good.json", &file_with_step(OK_STEP))).unwrap();
    assert_eq!(loaded.steps.len(), 1);
}

#[test]
fn unknown_fields_are_errors_at_every_level() {
    let cases = [
        ("top.json", r#"{"description": "d", "scenarios": [], "extra": 1}"#.to_string(), "unknown field `extra`"),
        ("scenario.json", r#"{"description": "d", "scenarios": [{"name": "s", "stepz": []}]}"#.to_string(), "unknown field `stepz`"),
        ("step.json", file_with_step(&OK_STEP.replace("\"ttl\"", "\"tll\"")), "unknown field `tll`"),
        ("outcome.json", file_with_step(&OK_STEP.replace("\"fence\": 1", "\"fense\": 1")), "unknown field `fense`"),
        ("variant.json", file_with_step(&OK_STEP.replace("acquired", "aquired")), "unknown variant `aquired`"),
        ("limits.json", r#"{"description": "d", "scenarios": [{"name": "s", "limits": {"max_key": 1}, "steps": []}]}"#.to_string(), "unknown field `max_key`"),
        ("op.json", file_with_step(r#"{"op": "acquire-now", "now": 0}"#), "unknown variant `acquire-now`"),
        ("event.json", file_with_step(&OK_STEP.replace("}}}", r#"}}, "events": [{"expired": {"key": "k", "owner": "a", "fence": 1, "when": 3}}]}"#)), "unknown field `when`"),
        ("stats.json", file_with_step(r#"{"op": "stats", "now": 0, "expect": {"live": 1}}"#), "unknown field `live`"),
    ];
    for (name, text, want) in cases {
        let message = load_error(name, &text);
        assert!(message.contains(want), "{name}: {message}");
        assert!(
            message.starts_with(name),
            "{name}: the message must name the file: {message}"
        );
    }
}

#[test]
fn steps_must_have_exactly_their_fields() {
    let cases = [
        (
            r#"{"op": "try-acquire", "now": 0, "key": "k", "owner": "a", "ok": "released"}"#,
            "needs \"ttl\"",
        ),
        (
            r#"{"op": "release", "now": 0, "key": "k", "owner": "a", "fence": 1, "ttl": 5, "ok": "released"}"#,
            "does not take \"ttl\"",
        ),
        (
            r#"{"op": "release", "now": 0, "key": "k", "owner": "a", "fence": 1}"#,
            "exactly one of \"ok\" and \"err\"",
        ),
        (
            r#"{"op": "release", "now": 0, "key": "k", "owner": "a", "fence": 1, "ok": "released", "err": "not-held"}"#,
            "exactly one of",
        ),
        (
            r#"{"op": "next-wakeup", "now": 3, "expect": null}"#,
            "does not take \"now\"",
        ),
        (r#"{"op": "next-wakeup"}"#, "needs \"expect\""),
        (
            r#"{"op": "handle-timeout", "now": 1, "ok": "released"}"#,
            "does not take \"ok\"",
        ),
        (
            r#"{"op": "restore", "hex": "zz", "ok": "restored"}"#,
            "not a hex digit",
        ),
        (
            r#"{"op": "inspect", "now": 0, "key": "k", "expect": {"owner": "a"}}"#,
            "a key needs either",
        ),
        (
            r#"{"op": "release", "now": 0, "key": "k", "owner": "a", "fence": 1, "mode": "shared", "ok": "released"}"#,
            "does not take \"mode\"",
        ),
        (
            r#"{"op": "query", "now": 0, "expect": {"keys": []}}"#,
            "needs \"limit\"",
        ),
        (
            r#"{"op": "handle-timeout-bounded", "now": 0, "max_changes": 1, "expect": 3}"#,
            "must be true or false",
        ),
        (
            r#"{"op": "inspect", "now": 0, "key": "k", "expect": {"holders": []}}"#,
            "a key needs either",
        ),
    ];
    for (step, want) in cases {
        let message = load_error("fields.json", &file_with_step(step));
        assert!(message.contains(want), "{step}: {message}");
        assert!(
            message.contains("s / step 1"),
            "{step}: the message must name the step: {message}"
        );
    }
}

#[test]
fn duplicate_or_empty_scenarios_are_errors() {
    let twice = format!(
        r#"{{"description": "d", "scenarios": [{{"name": "s", "steps": [{OK_STEP}]}}, {{"name": "s", "steps": [{OK_STEP}]}}]}}"#
    );
    assert!(load_error("twice.json", &twice).contains("used twice"));
    assert!(
        load_error("none.json", r#"{"description": "d", "scenarios": []}"#)
            .contains("no scenarios")
    );
    let empty = r#"{"description": "d", "scenarios": [{"name": "s", "steps": []}]}"#;
    assert!(load_error("empty.json", empty).contains("no steps"));
    assert!(load_error("broken.json", "{").contains("EOF"));
}

#[test]
fn a_wrong_expectation_is_reported_with_file_scenario_and_step() {
    let text = format!(
        r#"{{"description": "d", "scenarios": [{{"name": "wrong fence", "steps": [{OK_STEP}, {}]}}]}}"#,
        r#"{"op": "try-acquire", "now": 1, "key": "j", "owner": "a", "ttl": 10, "ok": {"acquired": {"fence": 9, "deadline": 11}}}"#
    );
    let report = run_file(&mut NativeDriver::default(), &write("wrong.json", &text)).unwrap();
    assert_eq!(report.failures.len(), 1);
    assert_eq!(
        report.failures[0].to_string(),
        r#"wrong.json / wrong fence / step 2: expected {"ok":{"acquired":{"fence":9,"deadline":11}}}, got {"ok":{"acquired":{"fence":2,"deadline":11}}}"#
    );
}

#[test]
fn missing_and_unexpected_events_are_failures() {
    let missing = file_with_step(
        r#"{"op": "try-acquire", "now": 0, "key": "k", "owner": "a", "ttl": 10, "ok": {"acquired": {"fence": 1, "deadline": 10}}},
           {"op": "handle-timeout", "now": 10}"#,
    );
    let report = run_file(
        &mut NativeDriver::default(),
        &write("missing.json", &missing),
    )
    .unwrap();
    assert_eq!(report.failures.len(), 1);
    assert!(
        report.failures[0]
            .message
            .starts_with("events: expected [], got [{\"expired\""),
        "{}",
        report.failures[0]
    );
    assert_eq!(report.failures[0].step, 2);
}

#[test]
fn stats_compare_only_listed_fields_and_show_the_difference() {
    let text =
        file_with_step(r#"{"op": "stats", "now": 0, "expect": {"live_leases": 3, "clock": 0}}"#);
    let report = run_file(&mut NativeDriver::default(), &write("stats.json", &text)).unwrap();
    assert_eq!(
        report.failures[0].message,
        r#"expected {"live_leases":3}, got {"live_leases":0}"#
    );
}
