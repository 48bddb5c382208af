//! Writes the conformance vectors as seeds for the `restore` fuzz target: for every scenario,
//! the snapshot of its table after its last step, and every snapshot a `restore` step carries
//! (valid or deliberately broken). `scripts/fuzz.sh` runs it before fuzzing, so the fuzzer starts
//! from the states the vectors pin down instead of from nothing.
//!
//! `cargo run -p lock-conformance --example fuzz_seeds -- VECTOR_DIR CORPUS_DIR`

use std::path::Path;

use lock_conformance::{load_file, vector_files, Answer, Driver, NativeDriver, Op};

/// The `restore` target reads its first byte as a mode (odd: frame the rest itself); 0 passes
/// the snapshot bytes through as they are.
fn seed(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 1);
    out.push(0);
    out.extend_from_slice(bytes);
    out
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [vectors, corpus] = args.as_slice() else {
        return Err("usage: fuzz_seeds VECTOR_DIR CORPUS_DIR".into());
    };
    std::fs::create_dir_all(corpus).map_err(|e| format!("{corpus}: {e}"))?;
    let mut written = 0;
    for path in vector_files(Path::new(vectors))? {
        let loaded = load_file(&path).map_err(|e| e.to_string())?;
        for (n, (scenario, steps)) in loaded.file.scenarios.iter().zip(&loaded.steps).enumerate() {
            let mut driver = NativeDriver::default();
            driver.start(&scenario.limits.resolve())?;
            let mut seeds = Vec::new();
            for step in steps {
                if let Op::Restore { bytes: Some(bytes) } = &step.op {
                    seeds.push(seed(bytes));
                }
                // A restore of "the latest snapshot" needs one; this seed run does not track it.
                if !matches!(step.op, Op::Restore { bytes: None }) {
                    driver.run(&step.op)?;
                    driver.drain_events()?;
                }
            }
            if let Answer::Snapshot(bytes) = driver.run(&Op::Snapshot { now: 0 })? {
                seeds.push(seed(&bytes));
            }
            for (i, bytes) in seeds.iter().enumerate() {
                let name = format!("{}-{n}-{i}", loaded.label.trim_end_matches(".json"));
                std::fs::write(Path::new(corpus).join(name), bytes)
                    .map_err(|e| format!("{corpus}: {e}"))?;
                written += 1;
            }
        }
    }
    println!("{written} restore seeds from the vectors in {corpus}");
    Ok(())
}
