//! Runs every shared vector file against the native core.

use std::path::Path;

use lock_conformance::{load_file, run_loaded, vector_files, NativeDriver, Report};

#[test]
fn all_vectors_pass_natively() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let files = vector_files(&dir).unwrap();
    assert!(!files.is_empty(), "no vector files in {}", dir.display());
    let mut total = Report::default();
    for path in files {
        let loaded = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
        total.merge(run_loaded(&mut NativeDriver::default(), &loaded));
    }
    assert!(total.failures.is_empty(), "{total}");
    println!("{total}");
}
