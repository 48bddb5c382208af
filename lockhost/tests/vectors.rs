//! The whole shared vector suite, unchanged, against the real built component.

use std::path::Path;

use host_wasmtime::LockComponent;
use lock_conformance::{load_file, run_loaded, vector_files, Report};
use lockhost::vectors::component_driver;

#[test]
fn all_vectors_pass_through_the_component() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut driver = component_driver(LockComponent::embedded().unwrap());
    let mut total = Report::default();
    for path in vector_files(&dir).unwrap() {
        total.merge(run_loaded(&mut driver, &load_file(&path).unwrap()));
    }
    assert!(total.scenarios >= 95, "{total}");
    assert!(total.failures.is_empty(), "{total}");
}
