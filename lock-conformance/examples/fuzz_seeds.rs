//! Writes the conformance vectors as seeds for the fuzz targets, so the fuzzer starts from the
//! behaviour the vectors pin down instead of from nothing:
//! - `restore`: for every scenario, the snapshot of its table after its last step, and every
//!   snapshot a `restore` step carries (valid or deliberately broken);
//! - `batch`: every scenario's operations as one batch in the `wire` encoding.
//!
//! `cargo run -p lock-conformance --example fuzz_seeds -- VECTOR_DIR CORPUS_DIR` writes
//! `CORPUS_DIR/restore/*` and `CORPUS_DIR/batch/*` (`scripts/fuzz.sh` runs it before fuzzing).

use std::path::Path;

use lock_conformance::{load_file, vector_files, Answer, Driver, NativeDriver, Op};
use lock_core::wire::{encode_request, Request};
use lock_core::Call;

/// The `wire` request of a vector operation, if the batch call has one (the changes).
fn request(op: &Op) -> Option<Request<'_>> {
    match lock_conformance::native::call(op) {
        Call::Request(request) => Some(request),
        _ => None,
    }
}

/// The `batch` target's input for these operations: the request bytes' length (u32 LE), the
/// request bytes, then the names.
fn batch_seed(ops: &[lock_conformance::format::Step]) -> Vec<u8> {
    let (mut bytes, mut names) = (Vec::new(), String::new());
    for request in ops.iter().filter_map(|step| request(&step.op)) {
        encode_request(&mut bytes, &mut names, &request);
    }
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    let mut out = len.to_le_bytes().to_vec();
    out.extend_from_slice(&bytes);
    out.extend_from_slice(names.as_bytes());
    out
}

/// The `restore` target reads its first byte as a mode (odd: frame the rest itself); 0 passes
/// the snapshot bytes through as they are.
fn restore_seed(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 1);
    out.push(0);
    out.extend_from_slice(bytes);
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join(name), bytes).map_err(|e| format!("{}: {e}", dir.display()))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [vectors, corpus] = args.as_slice() else {
        return Err("usage: fuzz_seeds VECTOR_DIR CORPUS_DIR".into());
    };
    let (restore_dir, batch_dir) = (
        Path::new(corpus).join("restore"),
        Path::new(corpus).join("batch"),
    );
    let (mut restores, mut batches) = (0, 0);
    for path in vector_files(Path::new(vectors))? {
        let loaded = load_file(&path).map_err(|e| e.to_string())?;
        let stem = loaded.label.trim_end_matches(".json").to_owned();
        for (n, (scenario, steps)) in loaded.file.scenarios.iter().zip(&loaded.steps).enumerate() {
            write(&batch_dir, &format!("{stem}-{n}"), &batch_seed(steps))?;
            batches += 1;
            let mut driver = NativeDriver::default();
            driver.start(&scenario.limits.resolve())?;
            let mut seeds = Vec::new();
            for step in steps {
                if let Op::Restore { bytes: Some(bytes) } = &step.op {
                    seeds.push(restore_seed(bytes));
                }
                // A restore of "the latest snapshot" needs one; this seed run does not track it.
                if !matches!(step.op, Op::Restore { bytes: None }) {
                    driver.run(&step.op)?;
                    driver.drain_events()?;
                }
            }
            if let Answer::Snapshot(bytes) = driver.run(&Op::Snapshot { now: 0 })? {
                seeds.push(restore_seed(&bytes));
            }
            for (i, bytes) in seeds.iter().enumerate() {
                write(&restore_dir, &format!("{stem}-{n}-{i}"), bytes)?;
                restores += 1;
            }
        }
    }
    println!("seeds from the vectors: {restores} for restore, {batches} for batch, in {corpus}");
    Ok(())
}
