//! `lock-vectors PATH...`: runs conformance vector files (or directories of them) against the
//! native `lock-core`, so a user can write a scenario and check it.

use std::path::Path;
use std::process::ExitCode;

use lock_conformance::{load_file, run_loaded, vector_files, NativeDriver, Report};

const USAGE: &str = "usage: lock-vectors PATH...

Runs conformance vector files (JSON, see tests/vectors/README.md) against the native lock-core.
A PATH may be a file or a directory of *.json files.
Exit status: 0 all passed, 1 a step failed, 2 a file could not be loaded or bad usage.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return if args.is_empty() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let mut total = Report::default();
    let mut load_failed = false;
    for arg in &args {
        let files = match vector_files(Path::new(arg)) {
            Ok(files) => files,
            Err(e) => {
                eprintln!("error: {e}");
                load_failed = true;
                continue;
            }
        };
        for path in files {
            match load_file(&path) {
                Ok(loaded) => {
                    let report = run_loaded(&mut NativeDriver::default(), &loaded);
                    let status = if report.failures.is_empty() {
                        "ok"
                    } else {
                        "FAILED"
                    };
                    println!(
                        "{status:6} {} ({} scenarios, {} steps)",
                        path.display(),
                        report.scenarios,
                        report.steps
                    );
                    total.merge(report);
                }
                Err(e) => {
                    eprintln!("error: cannot load {e}");
                    load_failed = true;
                }
            }
        }
    }
    println!("{total}");
    if load_failed {
        ExitCode::from(2)
    } else if total.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
