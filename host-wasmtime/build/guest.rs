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
        let mut bytes =
            componentize(&guest_target.join(format!("wasm32-unknown-unknown/wasm/{module}.wasm")));
        if *component == "lock" {
            bytes = with_contract_docs(bytes, &workspace.join("wit"));
        }
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

/// The component with the WIT contract's documentation embedded, so a plugin host author who
/// has only the `.wasm` reads it: `wasm-tools component wit lock.component.wasm` prints it above
/// the component's world. The component model's `package-docs` section documents only the
/// component's own (root) package, not the interfaces it exports from `expiring:lock`, so the
/// contract's files, doc comments included, are the root world's documentation.
#[allow(dead_code)] // lockhost's build script shares this file but embeds no lock component
fn with_contract_docs(mut component: Vec<u8>, wit_dir: &Path) -> Vec<u8> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(wit_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", wit_dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wit"))
        .collect();
    files.sort();
    let mut docs = String::from(
        "This component implements the WIT package expiring:lock (an expiring, owner-checked, \
         fenced lock table; it imports nothing). Its contract, documentation included:\n",
    );
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy();
        docs.push_str(&format!("\n```wit\n// {name}\n{}```\n", text));
    }
    let mut source = String::from("package root:component;\n\n");
    for line in docs.lines() {
        source.push_str("/// ");
        source.push_str(line);
        source.push('\n');
    }
    source.push_str("world root {}\n");
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_str("root.wit", &source)
        .expect("the contract's docs form a WIT document");
    let data = wit_parser::PackageMetadata::extract(&resolve, package)
        .encode()
        .expect("package docs encode");
    // A custom section (id 0): its name, then the data; valid anywhere in a component.
    let name = wit_parser::PackageMetadata::SECTION_NAME;
    let mut payload = Vec::new();
    leb128(name.len(), &mut payload);
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(&data);
    component.push(0);
    leb128(payload.len(), &mut component);
    component.extend_from_slice(&payload);
    component
}

#[allow(dead_code)]
fn leb128(mut value: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
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
