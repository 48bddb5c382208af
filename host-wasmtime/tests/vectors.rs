//! The whole shared vector suite, unchanged, against the real built component.

use std::path::Path;

use host_wasmtime::conformance::ComponentDriver;
use host_wasmtime::LockComponent;
use lock_conformance::{load_file, run_loaded, vector_files, Report};

#[test]
fn all_vectors_pass_through_the_component() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut driver = ComponentDriver::new(LockComponent::embedded().unwrap());
    let mut total = Report::default();
    for path in vector_files(&dir).unwrap() {
        total.merge(run_loaded(&mut driver, &load_file(&path).unwrap()));
    }
    assert!(total.scenarios >= 95, "{total}");
    assert!(total.failures.is_empty(), "{total}");
}

#[test]
fn the_component_imports_nothing() {
    let component = LockComponent::embedded().unwrap();
    assert_eq!(component.imports(), Vec::<String>::new());
}

#[test]
fn the_on_disk_artifact_loads_from_its_file_and_passes_the_vectors() {
    let file = Path::new(env!("LOCK_COMPONENT_FILE"));
    let component = LockComponent::from_file(file).unwrap();
    assert_eq!(component.imports(), Vec::<String>::new());
    let mut driver = ComponentDriver::new(component);
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/waiting.json");
    let report = run_loaded(&mut driver, &load_file(&vectors).unwrap());
    assert!(
        report.scenarios > 0 && report.failures.is_empty(),
        "{report}"
    );
    let missing = LockComponent::from_file(Path::new("/nonexistent/lock.wasm")).unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/lock.wasm"),
        "{missing}"
    );
}
