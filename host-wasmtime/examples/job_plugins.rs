//! A plugin host: instances of the `job-plugin` component (each in its own store, on its own
//! thread) import the `locks` service, which the host backs with the lock component. Both race
//! for the same scheduled job; exactly one runs it.
//!
//! - `cargo run -p host-wasmtime --example job_plugins`: one host process, ONE shared lock table
//!   (a `LockHost`), two plugin instances.
//! - `cargo run -p host-wasmtime --example job_plugins -- --store URL`: TWO host processes
//!   (replicas), each with a plugin instance, sharing one store (`sqlite://PATH`, `redis://`,
//!   `postgres://`, `mysql://`; see `lock-store`). The same component decides in both, over the
//!   store's records and with the store's clock.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use host_wasmtime::LockHost;
use lock_core::LockError;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::Store;

wasmtime::component::bindgen!({
    path: "../examples/job-plugin/wit",
    world: "job-plugin",
});

/// The example plugin, built from `examples/job-plugin` by the host's build script.
const JOB_PLUGIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/job-plugin.component.wasm"));

/// What backs the plugins' `locks` import: one process's lock table, or a store shared by every
/// host process. Either way the lock component decides.
#[derive(Clone)]
pub enum LockService {
    /// One table in this process (`LockHost`).
    Host(LockHost),
    /// A namespace of a shared store (`lock_store::Options::component`).
    Store(lock_store::Locks),
}

/// A lease taken for a plugin, kept by its instance.
enum Held {
    Host(host_wasmtime::Lease),
    Store(lock_store::Lease),
}

impl Held {
    fn is(&self, key: &str, owner: &str, fence: u64) -> bool {
        match self {
            Held::Host(l) => l.key() == key && l.owner() == owner && l.fence().0 == fence,
            Held::Store(l) => l.key() == key && l.owner() == owner && l.fence().0 == fence,
        }
    }
}

impl LockService {
    fn try_acquire(&self, key: &str, owner: &str, ttl: Duration) -> Result<(u64, Held), String> {
        match self {
            LockService::Host(locks) => match locks.try_acquire(key, owner, ttl) {
                Ok(lease) => Ok((lease.fence().0, Held::Host(lease))),
                Err(host_wasmtime::Error::Lock(e)) => Err(code(&e)),
                Err(other) => Err(other.to_string()),
            },
            LockService::Store(locks) => match locks.try_acquire(key, owner, ttl) {
                Ok(lease) => Ok((lease.fence().0, Held::Store(lease))),
                Err(lock_store::Error::Lock(e)) => Err(code(&e)),
                Err(other) => Err(other.to_string()),
            },
        }
    }
}

/// What one plugin instance's store holds: the lock service, and the leases it took (kept for
/// the job's period, released when the instance goes away).
struct PluginState {
    locks: LockService,
    held: Vec<Held>,
}

impl example::job_plugin::locks::Host for PluginState {
    fn try_acquire(&mut self, key: String, owner: String, ttl_ms: u64) -> Result<u64, String> {
        let (fence, lease) = self
            .locks
            .try_acquire(&key, &owner, Duration::from_millis(ttl_ms))?;
        self.held.push(lease);
        Ok(fence)
    }

    fn release(&mut self, key: String, owner: String, fence: u64) -> Result<(), String> {
        let Some(i) = self.held.iter().position(|l| l.is(&key, &owner, fence)) else {
            return Err("not-held".into());
        };
        match self.held.swap_remove(i) {
            Held::Host(l) => l.release().map_err(|e| e.to_string()),
            Held::Store(l) => l.release().map_err(|e| e.to_string()),
        }
    }
}

/// The WIT name of a lock refusal, which is what the plugin sees.
fn code(e: &LockError) -> String {
    match e {
        LockError::Held { .. } => "held".into(),
        other => other.to_string(),
    }
}

/// One second in ticks of the sandbox engine's epoch.
const SECOND_IN_TICKS: u64 = 1_000 / host_wasmtime::component::EPOCH_TICK.as_millis() as u64;

/// Runs `plugins` instances of the job plugin at once, all asking to run `job` as
/// `<worker>-<i>`; returns what each answered (in instance order).
///
/// # Errors
/// If a plugin cannot be compiled, instantiated or called.
pub fn race(
    locks: &LockService,
    plugins: usize,
    job: &str,
    worker: &str,
) -> wasmtime::Result<Vec<String>> {
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
            let worker = format!("{worker}-{i}");
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
                let answer = plugin.call_run_job(&mut store, &job, &worker)?;
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

/// One host process over a shared store: the lock component decides, over `url`'s namespace
/// `namespace`; one plugin instance races for `job` as `worker`.
///
/// # Errors
/// If the store cannot be opened or the plugin cannot run.
pub fn host_process(
    url: &str,
    namespace: &str,
    job: &str,
    worker: &str,
) -> wasmtime::Result<String> {
    let fail = |e: &dyn std::fmt::Display| wasmtime::Error::msg(e.to_string());
    let component = lock_store::store::Component::embedded().map_err(|e| fail(&e))?;
    let locks = lock_store::Options::new()
        .component(component)
        .open(url, namespace)
        .map_err(|e| fail(&e))?;
    let mut answers = race(&LockService::Store(locks), 1, job, worker)?;
    answers
        .pop()
        .ok_or_else(|| wasmtime::Error::msg("no answer"))
}

/// `--store URL`: starts two host processes (this program again, with `--host-process`) at once
/// and prints what each plugin answered.
#[allow(dead_code)]
fn replicas(url: &str) -> wasmtime::Result<()> {
    let exe = std::env::current_exe()?;
    let started: Vec<_> = (1..=2)
        .map(|i| {
            std::process::Command::new(&exe)
                .args(["--host-process", url, &format!("host-{i}")])
                .stdout(std::process::Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let children: Vec<_> = started
        .into_iter()
        .map(std::process::Child::wait_with_output)
        .collect::<Result<_, _>>()?;
    for (i, child) in children.iter().enumerate() {
        let out = String::from_utf8_lossy(&child.stdout);
        println!("host process {}: {}", i + 1, out.trim());
        if !child.status.success() {
            return Err(wasmtime::Error::msg(format!(
                "host process {} failed: {}",
                i + 1,
                child.status
            )));
        }
    }
    Ok(())
}

#[allow(dead_code)]
fn main() -> wasmtime::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => {
            let locks = LockHost::new().map_err(|e| wasmtime::Error::msg(e.to_string()))?;
            for answer in race(&LockService::Host(locks), 2, "nightly-report", "plugin")? {
                println!("{answer}");
            }
            Ok(())
        }
        ["--store", url] => replicas(url),
        ["--host-process", url, worker] => {
            println!(
                "{}",
                host_process(url, "plugins", "nightly-report", worker)?
            );
            Ok(())
        }
        _ => Err(wasmtime::Error::msg(
            "usage: job_plugins [--store URL]   (two host processes sharing the store at URL)",
        )),
    }
}
