//! The `lockhost` binary: exit codes, messages, help.

use std::process::Command;

fn lockhost(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockhost"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn vectors_pass_and_a_wrong_expectation_fails_with_its_location() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors");
    let (code, out, _) = lockhost(&["vectors", dir]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("0 failed (through the wasm component)"),
        "{out}"
    );

    let bad = std::env::temp_dir().join(format!("lockhost-cli-{}.json", std::process::id()));
    std::fs::write(
        &bad,
        r#"{"description": "d", "scenarios": [{"name": "wrong", "steps": [
            {"op": "try-acquire", "now": 0, "key": "k", "owner": "a", "ttl": 10, "ok": {"acquired": {"fence": 2, "deadline": 10}}}]}]}"#,
    )
    .unwrap();
    let (code, out, _) = lockhost(&["vectors", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("/ wrong / step 1: expected"), "{out}");

    std::fs::write(&bad, "{").unwrap();
    let (code, _, err) = lockhost(&["vectors", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot load"), "{err}");
}

#[test]
fn usage_errors_and_help() {
    let (code, _, err) = lockhost(&["frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown command 'frobnicate'"), "{err}");
    let (code, _, err) = lockhost(&["vectors"]);
    assert_eq!(code, 2);
    assert!(err.contains("needs at least one PATH"), "{err}");
    let (code, _, err) = lockhost(&["bench", "zero"]);
    assert_eq!(code, 2, "{err}");
    for command in ["vectors", "demo", "bench"] {
        let (code, out, _) = lockhost(&[command, "--help"]);
        assert_eq!(code, 0);
        assert!(
            out.starts_with(&format!("usage: lockhost {command}")),
            "{out}"
        );
    }
    let (code, out, _) = lockhost(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("lockhost vectors PATH..."), "{out}");
}

/// Issue 9, defect 14: running nothing, or a file that cannot run, used to pass or fail as a step.
#[test]
fn nothing_to_run_and_unrunnable_files_are_load_errors() {
    let dir = std::env::temp_dir().join(format!("lockhost-cli-empty-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("x.json")).unwrap();
    for path in [dir.clone(), dir.join("x.json")] {
        let (code, out, err) = lockhost(&["vectors", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{}: {out}{err}", path.display());
        assert!(err.contains("without *.json"), "{err}");
    }
    let cases = [
        (
            "limits.json",
            r#"{"description": "d", "scenarios": [{"name": "zero keys", "limits": {"max_keys": 0}, "steps": [
                {"op": "next-wakeup", "ok": null}]}]}"#,
            "max_keys",
        ),
        (
            "restore.json",
            r#"{"description": "d", "scenarios": [{"name": "nothing to restore", "steps": [
                {"op": "restore", "ok": "restored"}]}]}"#,
            "earlier snapshot",
        ),
    ];
    for (name, text, why) in cases {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        let (code, out, err) = lockhost(&["vectors", file.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(err.contains(why), "{name}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lockhost demo` plays to its end, its election among three plugins included: each leads in
/// turn with a higher fence, the resignation hands over, the resigner's late write is refused by
/// fence, the line is served in order, and nobody leads once all have left. (The body threads
/// and the story's thread print side by side: only what each line says is checked, not their
/// order.)
#[test]
fn the_demo_plays_its_election_to_the_end() {
    let (code, out, err) = lockhost(&["demo"]);
    assert_eq!(code, 0, "{out}{err}");
    let fence_after = |text: &str| -> u64 {
        let line = out
            .lines()
            .find(|l| l.contains(text))
            .unwrap_or_else(|| panic!("no {text:?} in:\n{out}"));
        let rest = &line[line.find(text).unwrap() + text.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("no fence in {line:?}"))
    };
    let (a, b, c) = (
        fence_after("> plugin-a leads (fence "),
        fence_after("> plugin-b leads (fence "),
        fence_after("> plugin-c leads (fence "),
    );
    assert!(a < b && b < c, "{a} {b} {c}:\n{out}");
    assert_eq!(fence_after("plugin-a still leads with fence "), a, "{out}");
    assert_eq!(
        fence_after("plugin-b leads at once with fence "),
        b,
        "{out}"
    );
    assert_eq!(
        fence_after("plugin-c, next in line, leads with fence "),
        c,
        "{out}"
    );
    for line in [
        "in line behind it: plugin-b, plugin-c",
        "plugin-a's term stops: resigned",
        &format!("plugin-a's late write with fence {a}: refused"),
        "plugin-a campaigns on, in line again: plugin-c, plugin-a",
        "plugin-b's term stops: shut-down",
        "plugin-c's term stops: shut-down",
        "all three left: no leader (terms led: 1, 1, 1)",
    ] {
        assert!(out.contains(line), "no {line:?} in:\n{out}");
    }
    assert!(!out.contains("write is refused"), "{out}");
}
