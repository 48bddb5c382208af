// Shared by the build scripts of `host-wasmtime` and `lockhost` (`include!`d): builds guest
// crates of this workspace for wasm32 and turns them into components.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cargo puts this workspace's artifacts.
fn target_root(workspace: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), PathBuf::from)
}

/// Builds each `(package, module)` for wasm32 (profile `wasm`) into its own target directory (a
/// nested cargo must not share the outer build's lock), turns it into a component, and writes
/// `$OUT_DIR/<component>.component.wasm` and `target/<component>.component.wasm`.
fn build_guests(workspace: &Path, guests: &[(&str, &str, &str)]) {
    let target_root = target_root(workspace);
    let guest_target = target_root.join("guest");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The guests are rlibs for native builds (their export names cannot be linked natively);
    // for wasm32 they are built as cdylibs here.
    for (package, _, _) in guests {
        let status = Command::new(&cargo)
            .current_dir(workspace)
            .args(["rustc", "-p", package, "--target", "wasm32-unknown-unknown"])
            .args(["--profile", "wasm", "--crate-type", "cdylib", "--target-dir"])
            .arg(&guest_target)
            // The same bytes wherever the registry is: paths in panic locations are remapped.
            .env("CARGO_ENCODED_RUSTFLAGS", remap_flags())
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
    for (_, module, component) in guests {
        let bytes =
            componentize(&guest_target.join(format!("wasm32-unknown-unknown/wasm/{module}.wasm")));
        std::fs::write(out_dir.join(format!("{component}.component.wasm")), &bytes).unwrap();
        std::fs::write(target_root.join(format!("{component}.component.wasm")), &bytes).unwrap();
    }
}

/// Rustc flags that remove the machine's paths from the guest's bytes (panic locations name
/// source files): the registry under `CARGO_HOME`, and the workspace, become fixed prefixes.
fn remap_flags() -> String {
    let cargo_home = std::env::var("CARGO_HOME").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cargo")
    });
    let workspace = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    format!(
        "--remap-path-prefix={}=/cargo\x1f--remap-path-prefix={}=/workspace",
        cargo_home.display(),
        workspace.display()
    )
}

/// Asks cargo to rerun the build script when any of these workspace paths changes.
fn watch(workspace: &Path, paths: &[&str]) {
    for watched in paths {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
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
