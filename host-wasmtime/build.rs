//! Builds the lock component from `lock-wasm` (and the example plugin `job-plugin`) for every
//! build of the host, so the host and its tests always embed the current artifacts, never a
//! stale copy.
//!
//! 1. `cargo rustc -p lock-wasm --target wasm32-unknown-unknown --profile wasm --crate-type cdylib`
//!    (and the same for `job-plugin`) into its own target directory (a nested cargo must not
//!    share the outer build's lock);
//! 2. `wit_component::ComponentEncoder` turns the core module into a component;
//! 3. the component is written to `$OUT_DIR/lock.component.wasm` (embedded by the library) and
//!    copied to `target/lock.component.wasm` for other tools (jco, size reports).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    for watched in [
        "lock-core/src",
        "lock-core/Cargo.toml",
        "lock-wasm/src",
        "lock-wasm/Cargo.toml",
        "wit",
        "examples/job-plugin/src",
        "examples/job-plugin/wit",
        "examples/job-plugin/Cargo.toml",
        "examples/bench-floor/src",
        "examples/bench-floor/wit",
        "examples/bench-floor/Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let target_root =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let guest_target = target_root.join("guest");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The guests are rlibs for native builds (their export names cannot be linked natively);
    // for wasm32 they are built as cdylibs here.
    for package in ["lock-wasm", "job-plugin", "bench-floor"] {
        let status = Command::new(&cargo)
            .current_dir(&root)
            .args([
                "rustc",
                "-p",
                package,
                "--target",
                "wasm32-unknown-unknown",
                "--profile",
                "wasm",
            ])
            .args(["--crate-type", "cdylib", "--target-dir"])
            .arg(&guest_target)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .status()
            .expect("could not run cargo to build the guest components");
        if !status.success() {
            panic!(
                "building {package} for wasm32-unknown-unknown failed; is the target installed? \
                 (`rustup target add wasm32-unknown-unknown`, or run scripts/setup.sh)"
            );
        }
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    for (module, component) in [
        ("lock_wasm", "lock"),
        ("job_plugin", "job-plugin"),
        ("bench_floor", "bench-floor"),
    ] {
        let bytes =
            componentize(&guest_target.join(format!("wasm32-unknown-unknown/wasm/{module}.wasm")));
        std::fs::write(out_dir.join(format!("{component}.component.wasm")), &bytes).unwrap();
        std::fs::write(
            target_root.join(format!("{component}.component.wasm")),
            &bytes,
        )
        .unwrap();
    }
    // Where the on-disk copy of the lock component is, for tests of loading it from a file.
    println!(
        "cargo:rustc-env=LOCK_COMPONENT_FILE={}",
        target_root.join("lock.component.wasm").display()
    );
}

fn componentize(module: &Path) -> Vec<u8> {
    let bytes = std::fs::read(module).unwrap_or_else(|e| panic!("{}: {e}", module.display()));
    wit_component::ComponentEncoder::default()
        .module(&bytes)
        .and_then(|e| e.validate(true).encode())
        .unwrap_or_else(|e| {
            panic!(
                "turning {} into a component failed: {e:?}",
                module.display()
            )
        })
}
