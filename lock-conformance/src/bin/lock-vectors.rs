//! `lock-vectors PATH...`: runs conformance vector files (or directories of them) against the
//! native `lock-core`, so a user can write a scenario and check it; `--campaign PATH...` runs
//! leader election's campaign vectors.

use std::process::ExitCode;

use lock_conformance::{run_paths, NativeDriver};

const USAGE: &str = "usage: lock-vectors PATH...
       lock-vectors --campaign PATH...

Runs conformance vector files (JSON, see tests/vectors/README.md) against the native lock-core;
with --campaign, leader election's campaign vectors (tests/vectors/election/).
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
    if args[0] == "--campaign" {
        return ExitCode::from(lock_conformance::campaign::run_campaign_paths(&args[1..]));
    }
    ExitCode::from(run_paths(&mut NativeDriver::default(), &args, ""))
}
