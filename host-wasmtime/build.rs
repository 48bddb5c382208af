//! Builds the lock component from `lock-wasm` (and the example plugin `job-plugin`) for every
//! build of the host, so the host and its tests always embed the current artifacts, never a
//! stale copy.
//!
//! 1. `cargo rustc -p lock-wasm --target wasm32-unknown-unknown --profile wasm --crate-type cdylib`
//!    (and the same for `job-plugin`) into its own target directory;
//! 2. `wit_component::ComponentEncoder` turns the core module into a component;
//! 3. the component is written to `$OUT_DIR/lock.component.wasm` (embedded by the library) and
//!    copied to `target/lock.component.wasm` for other tools (jco, size reports).

include!("build/guest.rs");

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest.parent().unwrap().to_path_buf();
    watch(
        &workspace,
        &[
            "lock-core/src",
            "lock-core/Cargo.toml",
            "lock-wasm/src",
            "lock-wasm/Cargo.toml",
            "wit",
            "examples/job-plugin/src",
            "examples/job-plugin/wit",
            "examples/job-plugin/Cargo.toml",
        ],
    );
    build_guests(
        &workspace,
        &[
            ("lock-wasm", "lock_wasm", "lock"),
            ("job-plugin", "job_plugin", "job-plugin"),
        ],
    );
    // Where the on-disk copy of the lock component is, for tests of loading it from a file.
    println!(
        "cargo:rustc-env=LOCK_COMPONENT_FILE={}",
        target_root(&workspace)
            .join("lock.component.wasm")
            .display()
    );
}
