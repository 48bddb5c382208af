//! A plugin component that serialises a scheduled job across plugin instances through the lock
//! service its host provides (the `locks` import, backed by the lock component).

wit_bindgen::generate!({
    path: "wit",
    world: "job-plugin",
});

use example::job_plugin::locks;

/// How long a job's lock is kept after it ran: one scheduling period.
const PERIOD_MS: u64 = 60_000;

struct Plugin;

impl Guest for Plugin {
    fn run_job(job: String, worker: String) -> String {
        match locks::try_acquire(&job, &worker, PERIOD_MS) {
            Ok(fence) => format!("ran {job} with fence {fence}"),
            Err(code) => format!("skipped {job}: {code}"),
        }
    }
}

export!(Plugin);
