//! A plugin host: two instances of the `job-plugin` component (each in its own store, on its own
//! thread) import the `locks` service, which the host backs with ONE shared lock table (the lock
//! component behind a `LockHost`). Both race for the same scheduled job; exactly one runs it.
//!
//! `cargo run -p host-wasmtime --example job_plugins`

use std::sync::{Arc, Barrier};
use std::time::Duration;

use host_wasmtime::{Error, Lease, LockHost};
use lock_core::LockError;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::Store;

wasmtime::component::bindgen!({
    path: "../examples/job-plugin/wit",
    world: "job-plugin",
});

/// The example plugin, built from `examples/job-plugin` by the host's build script.
const JOB_PLUGIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/job-plugin.component.wasm"));

/// What one plugin instance's store holds: the shared lock host, and the leases it took (kept
/// for the job's period, released when the instance goes away).
struct PluginState {
    locks: LockHost,
    held: Vec<Lease>,
}

impl example::job_plugin::locks::Host for PluginState {
    fn try_acquire(&mut self, key: String, owner: String, ttl_ms: u64) -> Result<u64, String> {
        match self
            .locks
            .try_acquire(&key, &owner, Duration::from_millis(ttl_ms))
        {
            Ok(lease) => {
                let fence = lease.fence().0;
                self.held.push(lease);
                Ok(fence)
            }
            Err(e) => Err(code(&e)),
        }
    }

    fn release(&mut self, key: String, owner: String, fence: u64) -> Result<(), String> {
        let Some(i) = self
            .held
            .iter()
            .position(|l| l.key() == key && l.owner() == owner && l.fence().0 == fence)
        else {
            return Err("not-held".into());
        };
        self.held.swap_remove(i).release().map_err(|e| code(&e))
    }
}

/// The WIT name of an error, which is what the plugin sees.
fn code(e: &Error) -> String {
    match e {
        Error::Lock(LockError::Held { .. }) => "held".into(),
        Error::Lock(other) => other.to_string(),
        other => other.to_string(),
    }
}

/// One second in ticks of the sandbox engine's epoch.
const SECOND_IN_TICKS: u64 = 1_000 / host_wasmtime::component::EPOCH_TICK.as_millis() as u64;

/// Runs `plugins` instances of the job plugin at once, all asking to run `job`; returns what
/// each answered (in instance order).
///
/// # Errors
/// If a plugin cannot be compiled, instantiated or called.
pub fn race(locks: &LockHost, plugins: usize, job: &str) -> wasmtime::Result<Vec<String>> {
    let engine = host_wasmtime::component::sandbox_engine()
        .map_err(|e| wasmtime::Error::msg(e.to_string()))?;
    let component = Component::new(&engine, JOB_PLUGIN)?;
    let mut linker: Linker<PluginState> = Linker::new(&engine);
    JobPlugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
    let start = Arc::new(Barrier::new(plugins));
    let handles: Vec<_> = (0..plugins)
        .map(|i| {
            let (engine, component, linker) = (engine.clone(), component.clone(), linker.clone());
            let (locks, start, job) = (locks.clone(), Arc::clone(&start), job.to_owned());
            std::thread::spawn(move || -> wasmtime::Result<String> {
                let mut store = Store::new(
                    &engine,
                    PluginState {
                        locks,
                        held: Vec::new(),
                    },
                );
                // The sandbox engine bounds calls by epochs: allow this plugin 1 s per call.
                store.set_epoch_deadline(SECOND_IN_TICKS);
                let plugin = JobPlugin::instantiate(&mut store, &component, &linker)?;
                start.wait();
                store.set_epoch_deadline(SECOND_IN_TICKS);
                let answer = plugin.call_run_job(&mut store, &job, &format!("plugin-{i}"))?;
                // Keep the lock for the job's period, as a scheduler would: leak the guards on
                // purpose so they outlive this demo's stores.
                std::mem::forget(std::mem::take(&mut store.data_mut().held));
                Ok(answer)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("plugin thread panicked"))
        .collect()
}

#[allow(dead_code)]
fn main() -> wasmtime::Result<()> {
    let locks = LockHost::new().map_err(|e| wasmtime::Error::msg(e.to_string()))?;
    for answer in race(&locks, 2, "nightly-report")? {
        println!("{answer}");
    }
    Ok(())
}
