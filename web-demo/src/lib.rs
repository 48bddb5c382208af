//! The in-browser playground of the expiring-lock core.
//!
//! A person explores lock expiry: simulated clients try-acquire, wait, release and extend leases
//! on keys; a live timeline shows holders shrinking to their deadline, fences, queues, hand-offs
//! and expiries; an event log tells it in plain words; the clock is real, or virtual (pause,
//! step, x0.1 to x100) and then every run is deterministic. A session exports as a conformance
//! vector file that every runner accepts, and an imported vector file replays step by step.
//!
//! - [`app`]: the model (pure Rust over `lock-core`, tested natively);
//! - [`clock`]: the real/virtual clock;
//! - [`view`]: HTML of the dynamic parts;
//! - `page` (wasm32 only): the DOM wiring (web-sys) and the frame timer (gloo-timers).
//!
//! Built for `wasm32-unknown-unknown` by `scripts/build-web.sh` into `web-demo/dist/`.

pub mod app;
pub mod clock;
pub mod view;

#[cfg(target_arch = "wasm32")]
mod page;

/// Runs vector files (name, text) against `lock-core` compiled into this module, with the
/// shared Rust runner: the browser's WebAssembly engine runs the same contract as every other
/// runtime. Returns the report as JSON: `{"scenarios", "steps", "failures": ["file / scenario / step N: ..."]}`.
#[must_use]
pub fn run_vectors(files: &[(String, String)]) -> String {
    let mut report = lock_conformance::Report::default();
    let mut failures: Vec<String> = Vec::new();
    for (name, text) in files {
        match lock_conformance::parse_file(name, text) {
            Ok(loaded) => report.merge(lock_conformance::run_loaded(
                &mut lock_conformance::NativeDriver::default(),
                &loaded,
            )),
            Err(e) => failures.push(format!("cannot load: {e}")),
        }
    }
    failures.extend(report.failures.iter().map(ToString::to_string));
    serde_json::json!({
        "files": files.len(),
        "scenarios": report.scenarios,
        "steps": report.steps,
        "failures": failures,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_shared_vectors_pass_through_run_vectors() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors");
        let files: Vec<(String, String)> = lock_conformance::vector_files(dir.as_ref())
            .unwrap()
            .into_iter()
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read_to_string(p).unwrap())
            })
            .collect();
        let report: serde_json::Value = serde_json::from_str(&super::run_vectors(&files)).unwrap();
        assert_eq!(report["failures"], serde_json::json!([]));
        assert!(report["scenarios"].as_u64().unwrap() >= 96);
        let broken = super::run_vectors(&[("bad.json".into(), "{\"scenarios\": []}".into())]);
        assert!(broken.contains("cannot load: bad.json"), "{broken}");
    }
}
