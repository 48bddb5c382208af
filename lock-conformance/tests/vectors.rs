//! Runs every shared vector file against the native core: the files every runtime runs, and
//! those of the lock kinds (`kinds/`), which the other runtimes take up as their faces learn
//! them (see `tests/vectors/README.md`).

use std::path::Path;

use lock_conformance::{load_file, run_loaded, vector_files, NativeDriver, Report};

#[test]
fn all_vectors_pass_natively() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut files = vector_files(&root).unwrap();
    files.extend(vector_files(&root.join("kinds")).unwrap());
    let mut total = Report::default();
    for path in files {
        let loaded = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
        total.merge(run_loaded(&mut NativeDriver::default(), &loaded));
    }
    assert!(total.failures.is_empty(), "{total}");
    println!("{total}");
}
