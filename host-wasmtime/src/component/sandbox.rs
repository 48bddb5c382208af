//! The sandbox around every component instance: a memory cap and a per-call time bound, enforced
//! by epoch interruption with one ticker thread for every sandboxed engine of the process.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use wasmtime::{Config, Engine};

use super::{load, HostError};

/// Resource limits of one component instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Largest linear memory of the instance, in bytes (default 1 GiB).
    pub memory_bytes: usize,
    /// How long one call may run before it traps (default 1 s). A call is stopped no earlier
    /// than this and at most two [`EPOCH_TICK`]s (20 ms) later. Work that grows with the table
    /// gets more: `snapshot` and `restore` are allowed this plus [`SNAPSHOT_TIME_PER_ENTRY`] per
    /// lease, waiter and remembered expiry (per [`RESTORE_TIME_PER_BYTE`] of the bytes for a
    /// restore), and [`LockHost`](crate::LockHost) applies expiries in bounded slices, so the
    /// documented limits never reach the bound. Zero makes every call trap at once.
    pub call_timeout: Duration,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 1 << 30,
            call_timeout: Duration::from_secs(1),
        }
    }
}

impl SandboxLimits {
    /// The epoch deadline, in ticks of [`EPOCH_TICK`], that bounds a call to `call_timeout`
    /// (for stores of [`sandbox_engine`] that a plugin host runs itself): never shorter than
    /// `call_timeout`, at most two ticks longer; 0 for a zero bound.
    #[must_use]
    pub fn epoch_ticks(&self) -> u64 {
        ticks_for(self.call_timeout)
    }

    pub(super) fn ticks(&self) -> u64 {
        self.epoch_ticks()
    }
}

/// The epoch deadline (in ticks from now) that stops a call no earlier than `timeout`: the
/// ticker may advance the epoch right after the deadline is set, so one tick is added to the
/// rounded-up count. Zero stays zero: every call traps at once (a way to test trap handling).
pub(super) fn ticks_for(timeout: Duration) -> u64 {
    if timeout.is_zero() {
        return 0;
    }
    let tick = EPOCH_TICK.as_nanos();
    u64::try_from(timeout.as_nanos().div_ceil(tick))
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// Extra time a snapshot may take per lease, waiter and remembered expiry (measured: about
/// 0.3 µs per lease in a release build; the allowance leaves room for slow and debug builds).
pub const SNAPSHOT_TIME_PER_ENTRY: Duration = Duration::from_micros(5);
/// Extra time a restore may take per byte of the snapshot (measured: about 15 ns per byte in a
/// release build).
pub const RESTORE_TIME_PER_BYTE: Duration = Duration::from_nanos(200);

/// How often the shared ticker thread advances the epoch of every sandbox engine: the
/// granularity of [`SandboxLimits::call_timeout`].
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// An engine configured for sandboxed components: epoch interruption on (a check at function
/// entries and loop heads, cheaper than fuel metering, which cost 15-20 % per call here), and
/// registered with the one ticker thread that advances every such engine's epoch each
/// [`EPOCH_TICK`]. The lock component, the benchmark floors and plugin hosts use it.
///
/// # Errors
/// [`HostError::Load`] if wasmtime refuses the configuration.
pub fn sandbox_engine() -> Result<Engine, HostError> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config).map_err(load)?;
    ticker_register(&engine);
    Ok(engine)
}

/// Engines the ticker advances (weak: a dropped engine is forgotten), and whether it runs.
static TICKED: OnceLock<Mutex<(Vec<wasmtime::EngineWeak>, bool)>> = OnceLock::new();

fn ticker_register(engine: &Engine) {
    let ticked = TICKED.get_or_init(|| Mutex::new((Vec::new(), false)));
    let mut guard = ticked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    guard.0.push(engine.weak());
    if !guard.1 {
        guard.1 = true;
        let spawned = std::thread::Builder::new()
            .name("wasm-epoch-ticker".into())
            .spawn(move || loop {
                std::thread::sleep(EPOCH_TICK);
                let mut guard = ticked
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                guard.0.retain(|weak| match weak.upgrade() {
                    Some(engine) => {
                        engine.increment_epoch();
                        true
                    }
                    None => false,
                });
                if guard.0.is_empty() {
                    guard.1 = false;
                    return;
                }
            });
        if spawned.is_err() {
            // No thread, no ticks: calls are then unbounded in time, as without a sandbox.
            guard.1 = false;
        }
    }
}
