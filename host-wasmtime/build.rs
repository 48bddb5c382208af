//! Embeds the lock component.
//!
//! In this repository's workspace it is built from `lock-wasm` on every build, so the host and
//! its tests always embed the current code, never a stale copy:
//! 1. `cargo rustc -p lock-wasm --target wasm32-unknown-unknown --profile wasm --crate-type cdylib`
//!    (and the same for the example plugin `job-plugin`) into its own target directory;
//! 2. `wit_component::ComponentEncoder` turns the core module into a component;
//! 3. the component is written to `$OUT_DIR/lock.component.wasm` (embedded by the library) and
//!    copied to `target/lock.component.wasm` for other tools (jco, size reports).
//!
//! Built from its published package (no workspace around it), the crate embeds the copy it
//! ships, `component/lock.component.wasm`; a test in the workspace fails when that copy differs
//! from a fresh build (`scripts/ship-component.sh` refreshes it).

include!("build/guest.rs");

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let shipped = manifest.join("component/lock.component.wasm");
    println!("cargo:rerun-if-changed={}", shipped.display());
    let workspace = manifest.parent().unwrap().to_path_buf();
    if !workspace.join("lock-wasm/Cargo.toml").is_file() {
        let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("lock.component.wasm");
        std::fs::copy(&shipped, &out).unwrap_or_else(|e| panic!("{}: {e}", shipped.display()));
        println!("cargo:rustc-env=LOCK_COMPONENT_FILE={}", out.display());
        return;
    }
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
