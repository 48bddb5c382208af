//! The whole shared vector suite, unchanged, against the real built component: the files every
//! runtime runs and the lock kinds' (`kinds/`).

use std::path::Path;

use host_wasmtime::LockComponent;
use lock_conformance::{load_file, run_loaded, vector_files, Report};
use lockhost::vectors::component_driver;

#[test]
fn all_vectors_pass_through_the_component() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut driver = component_driver(LockComponent::embedded().unwrap());
    let mut total = Report::default();
    let mut files = vector_files(&dir).unwrap();
    files.extend(vector_files(&dir.join("kinds")).unwrap());
    for path in files {
        total.merge(run_loaded(&mut driver, &load_file(&path).unwrap()));
    }
    assert!(total.scenarios >= 170, "{total}");
    assert!(total.failures.is_empty(), "{total}");
}
