//! Runs the campaign vectors (`tests/vectors/election/`) against the native core, and checks
//! that the loader refuses what the format does not allow.

use std::path::Path;

use lock_conformance::campaign::{load_campaign_file, run_campaign_file};

fn dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/election")
}

#[test]
fn campaign_vectors_pass_natively() {
    let files = lock_conformance::vector_files(&dir()).unwrap();
    let mut steps = 0;
    for path in files {
        let (failures, n) = run_campaign_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        steps += n;
    }
    assert!(steps > 100, "ran only {steps} steps");
    println!("campaign vectors: {steps} steps passed");
}

#[test]
fn the_campaign_loader_refuses_unknown_fields_ops_and_refusals() {
    let tmp = std::env::temp_dir().join(format!("campaign-bad-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let case = |name: &str, step: &str| {
        let path = tmp.join(name);
        let text = format!(
            r#"{{"description": "x", "scenarios": [{{"name": "s", "options": {{"ttl": 1000}}, "steps": [{step}]}}]}}"#
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let unknown_field = case("field.json", r#"{"op": "lost", "now": 0, "fence": 1}"#);
    assert!(load_campaign_file(&unknown_field).is_err());
    let unknown_op = case("op.json", r#"{"op": "steal", "now": 0}"#);
    assert!(load_campaign_file(&unknown_op).is_err());
    let missing = case("missing.json", r#"{"op": "poll", "now": 0, "actions": []}"#);
    assert!(load_campaign_file(&missing).is_err());
    let refusal = case(
        "refusal.json",
        r#"{"op": "refused", "now": 0, "refusal": "closed", "ends": true}"#,
    );
    assert!(run_campaign_file(&refusal).unwrap_err().contains("closed"));
    // A wrong expectation is a failure, not a pass.
    let wrong = case(
        "wrong.json",
        r#"{"op": "poll", "now": 0, "actions": ["done"], "timeout": null}"#,
    );
    let (failures, _) = run_campaign_file(&wrong).unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains(r#"got ["campaign"]"#), "{failures:?}");
    let _ = std::fs::remove_dir_all(&tmp);
}
