//! Builds the benchmark's floor component (`examples/bench-floor`: a resource method with
//! `try-acquire`'s exact shape that does nothing) into `$OUT_DIR/bench-floor.component.wasm`.

include!("../host-wasmtime/build/guest.rs");

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest.parent().unwrap().to_path_buf();
    watch(
        &workspace,
        &[
            "examples/bench-floor/src",
            "examples/bench-floor/wit",
            "examples/bench-floor/Cargo.toml",
        ],
    );
    build_guests(&workspace, &[("bench-floor", "bench_floor", "bench-floor")]);
}
