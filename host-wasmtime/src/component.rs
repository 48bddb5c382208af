//! One lock table inside one instance of the lock component, behind the generated bindings.
//!
//! [`LockComponent`] compiles the component once (an engine, the compiled code, a linker);
//! [`ComponentTable`] instantiates it in its own store with a memory cap and a per-call time
//! bound (epoch interruption), creates one `lock-table` resource and forwards every call. A trap
//! (a bug in the guest, a call running past its time bound, a memory cap hit) never unwinds into
//! the host: the call
//! returns [`HostError::Trap`] and the table is *poisoned*: every later call answers
//! [`HostError::Poisoned`] until the owner replaces it (for example from its last snapshot),
//! because a trap may have stopped the guest half-way through a change.

use std::fmt;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use lock_core::wire::{Request, Response};
use wasmtime::component::{Component, Linker, ResourceAny};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "lock",
    additional_derives: [PartialEq, Eq, Clone],
});

/// The WIT types of the contract (`expiring:lock/types`), as the host sees them.
pub use exports::expiring::lock::types;
use types::{AcquireOutcome, Event, Grant, KeyInfo, Limits, LockError, Stats};

/// The component built from `lock-wasm` by this crate's build script (it imports nothing).
pub const LOCK_COMPONENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lock.component.wasm"));

/// What can go wrong around a call, besides the lock's own answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostError {
    /// The component could not be compiled or instantiated.
    Load(String),
    /// The call trapped (guest bug, call time bound or memory cap exceeded); the table is poisoned.
    Trap(String),
    /// An earlier call trapped; this table refuses every call until it is replaced.
    Poisoned(String),
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Load(e) => write!(f, "could not load the lock component: {e}"),
            HostError::Trap(e) => write!(f, "the lock component trapped: {e}"),
            HostError::Poisoned(e) => {
                write!(
                    f,
                    "the lock table is unusable since the component trapped: {e}"
                )
            }
        }
    }
}

impl std::error::Error for HostError {}

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

    fn ticks(&self) -> u64 {
        self.epoch_ticks()
    }
}

/// The epoch deadline (in ticks from now) that stops a call no earlier than `timeout`: the
/// ticker may advance the epoch right after the deadline is set, so one tick is added to the
/// rounded-up count. Zero stays zero: every call traps at once (a way to test trap handling).
fn ticks_for(timeout: Duration) -> u64 {
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

/// The compiled lock component: compile once, instantiate many tables.
#[derive(Clone)]
pub struct LockComponent {
    engine: Engine,
    component: Component,
    linker: Linker<StoreState>,
}

impl fmt::Debug for LockComponent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockComponent")
    }
}

/// Per-store host state: the memory limiter.
pub struct StoreState {
    limits: StoreLimits,
}

impl LockComponent {
    /// The embedded component ([`LOCK_COMPONENT`]), compiled once per process and shared.
    ///
    /// # Errors
    /// [`HostError::Load`] if wasmtime cannot compile it.
    pub fn embedded() -> Result<Self, HostError> {
        static COMPILED: std::sync::OnceLock<Result<LockComponent, HostError>> =
            std::sync::OnceLock::new();
        COMPILED
            .get_or_init(|| Self::from_bytes(LOCK_COMPONENT))
            .clone()
    }

    /// Compiles a component from a file (e.g. a build of the same WIT world from elsewhere).
    ///
    /// # Errors
    /// [`HostError::Load`] if the file cannot be read or compiled.
    pub fn from_file(path: &Path) -> Result<Self, HostError> {
        let bytes =
            std::fs::read(path).map_err(|e| HostError::Load(format!("{}: {e}", path.display())))?;
        Self::from_bytes(&bytes)
    }

    /// Compiles a component (binary or, with the `wat` feature, text).
    ///
    /// # Errors
    /// [`HostError::Load`] if wasmtime cannot compile it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, HostError> {
        let engine = sandbox_engine()?;
        let component = Component::new(&engine, bytes).map_err(load)?;
        Ok(LockComponent {
            linker: Linker::new(&engine),
            engine,
            component,
        })
    }

    /// The names of everything the component imports (empty for the lock component).
    #[must_use]
    pub fn imports(&self) -> Vec<String> {
        self.component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// A new table in a new instance.
    ///
    /// # Errors
    /// [`HostError::Load`] if instantiation fails or the limits are refused
    /// (with the core's `invalid-limits` message).
    pub fn instantiate(
        &self,
        limits: &lock_core::Limits,
        seed: u64,
        sandbox: SandboxLimits,
    ) -> Result<ComponentTable, HostError> {
        let state = StoreState {
            limits: StoreLimitsBuilder::new()
                .memory_size(sandbox.memory_bytes)
                .build(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(sandbox.ticks());
        let bindings =
            Lock::instantiate(&mut store, &self.component, &self.linker).map_err(load)?;
        let created = bindings
            .expiring_lock_table()
            .lock_table()
            .call_create(&mut store, limits_to_wit(limits), seed)
            .map_err(load)?;
        let table = created.map_err(|e| HostError::Load(format!("{e:?}")))?;
        Ok(ComponentTable {
            store,
            bindings,
            table,
            ticks: sandbox.ticks(),
            poisoned: None,
        })
    }
}

fn load(e: impl fmt::Display) -> HostError {
    HostError::Load(e.to_string())
}

/// The core's limits in WIT terms (counts saturate at u32::MAX).
#[must_use]
pub fn limits_to_wit(l: &lock_core::Limits) -> Limits {
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    Limits {
        max_key_bytes: n(l.max_key_bytes),
        max_owner_bytes: n(l.max_owner_bytes),
        max_ttl: l.max_ttl,
        max_keys: n(l.max_keys),
        max_waiters_per_key: n(l.max_waiters_per_key),
        max_waiters: n(l.max_waiters),
        expired_retention: l.expired_retention,
        max_expired_records: n(l.max_expired_records),
        max_pending_events: n(l.max_pending_events),
    }
}

/// One lock table in its own component instance. Not `Sync`: wrap it in a mutex to share it
/// (see [`LockHost`](crate::LockHost)).
pub struct ComponentTable {
    store: Store<StoreState>,
    bindings: Lock,
    table: ResourceAny,
    ticks: u64,
    poisoned: Option<String>,
}

impl fmt::Debug for ComponentTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ComponentTable")
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

macro_rules! forward {
    ($(#[$doc:meta])* $name:ident => $call:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty) => {
        $(#[$doc])*
        ///
        /// # Errors
        /// [`HostError`] if the component traps or trapped before.
        pub fn $name(&mut self, $($arg: $ty),*) -> Result<$ret, HostError> {
            self.enter()?;
            let table = self.table;
            let result = self.bindings.expiring_lock_table().lock_table().$call(&mut self.store, table, $($arg),*);
            self.leave(result)
        }
    };
}

impl ComponentTable {
    fn enter(&mut self) -> Result<(), HostError> {
        if let Some(why) = &self.poisoned {
            return Err(HostError::Poisoned(why.clone()));
        }
        self.store.set_epoch_deadline(self.ticks);
        Ok(())
    }

    /// Changes how long each later call may run (see [`SandboxLimits::call_timeout`]).
    pub fn set_call_timeout(&mut self, timeout: Duration) {
        self.ticks = ticks_for(timeout);
    }

    /// A call whose work grows with the table: allowed the usual bound plus `extra`.
    fn call_with_allowance<T>(
        &mut self,
        extra: Duration,
        call: impl FnOnce(&Lock, &mut Store<StoreState>, ResourceAny) -> wasmtime::Result<T>,
    ) -> Result<T, HostError> {
        self.enter()?;
        let extra =
            u64::try_from(extra.as_nanos().div_ceil(EPOCH_TICK.as_nanos())).unwrap_or(u64::MAX);
        self.store
            .set_epoch_deadline(self.ticks.saturating_add(extra));
        let result = call(&self.bindings, &mut self.store, self.table);
        self.leave(result)
    }

    fn leave<T>(&mut self, result: wasmtime::Result<T>) -> Result<T, HostError> {
        result.map_err(|e| {
            let why = format!("{e:?}");
            self.poisoned = Some(why.clone());
            HostError::Trap(why)
        })
    }

    /// Whether an earlier call trapped.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    forward!(/// `try-acquire`.
        try_acquire => call_try_acquire(key: &str, owner: &str, ttl: u64, now: u64) -> Result<AcquireOutcome, LockError>);
    forward!(/// `acquire`.
        acquire => call_acquire(key: &str, owner: &str, ttl: u64, wait_deadline: u64, now: u64) -> Result<AcquireOutcome, LockError>);
    forward!(/// `release`.
        release => call_release(key: &str, owner: &str, fence: u64, now: u64) -> Result<(), LockError>);
    forward!(/// `extend`.
        extend => call_extend(key: &str, owner: &str, fence: u64, ttl: u64, now: u64) -> Result<Grant, LockError>);
    forward!(/// `cancel-wait`.
        cancel_wait => call_cancel_wait(key: &str, owner: &str, now: u64) -> Result<(), LockError>);
    forward!(/// `handle-timeout`.
        handle_timeout => call_handle_timeout(now: u64) -> ());
    forward!(/// `handle-timeout-bounded`: at most `max_changes` due changes; true if more are due.
        handle_timeout_bounded => call_handle_timeout_bounded(now: u64, max_changes: u32) -> bool);
    forward!(/// `raise-fence-floor`: every later fence is greater than `floor`.
        raise_fence_floor => call_raise_fence_floor(floor: u64) -> ());
    forward!(/// `cancel-all-waits`: drops every waiter; answers how many.
        cancel_all_waits => call_cancel_all_waits(now: u64) -> u32);
    forward!(/// `next-wakeup`.
        next_wakeup => call_next_wakeup() -> Option<u64>);
    forward!(/// `poll-events`: drains every pending event.
        poll_events => call_poll_events() -> Vec<Event>);
    forward!(/// `inspect`.
        inspect => call_inspect(key: &str, now: u64) -> Result<Option<KeyInfo>, LockError>);
    forward!(/// `stats`.
        stats => call_stats(now: u64) -> Stats);
    /// `snapshot`, allowed [`SNAPSHOT_TIME_PER_ENTRY`] per lease, waiter and remembered expiry
    /// beyond the call bound (read with a `stats` call first).
    ///
    /// # Errors
    /// [`HostError`] if the component traps or trapped before.
    pub fn snapshot(&mut self, now: u64) -> Result<Vec<u8>, HostError> {
        let stats = self.stats(now)?;
        let entries = stats.live_leases + stats.waiters + stats.expired_records;
        let extra =
            SNAPSHOT_TIME_PER_ENTRY.saturating_mul(u32::try_from(entries).unwrap_or(u32::MAX));
        self.call_with_allowance(extra, |lock, store, table| {
            lock.expiring_lock_table()
                .lock_table()
                .call_snapshot(store, table, now)
        })
    }

    /// `restore`, allowed [`RESTORE_TIME_PER_BYTE`] per byte beyond the call bound.
    ///
    /// # Errors
    /// [`HostError`] if the component traps (for example when the restored table does not fit
    /// the memory cap) or trapped before.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<Result<(), LockError>, HostError> {
        let extra =
            RESTORE_TIME_PER_BYTE.saturating_mul(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
        self.call_with_allowance(extra, |lock, store, table| {
            lock.expiring_lock_table()
                .lock_table()
                .call_restore(store, table, bytes)
        })
    }
    forward!(/// `batch` on encoded requests and names (see [`lock_core::wire`]); [`ComponentTable::batch`]
        /// is the typed way.
        batch_raw => call_batch(requests: &[u8], names: &str) -> Vec<u8>);

    /// Runs a [`Batch`] in one boundary crossing; one response per request, in order, with the
    /// core's own types.
    ///
    /// # Errors
    /// [`HostError`] if the component traps or trapped before, or answers bytes that are not
    /// responses (then it is poisoned like after a trap).
    pub fn batch(&mut self, batch: &Batch) -> Result<Vec<Response>, HostError> {
        let bytes = self.batch_raw(&batch.bytes, &batch.names)?;
        lock_core::wire::decode_responses(&bytes).map_err(|e| {
            let why = format!("the component answered a batch with {e}");
            self.poisoned = Some(why.clone());
            HostError::Trap(why)
        })
    }
}

/// Requests to run in one call, encoded as they are added ([`lock_core::wire`]), so the whole
/// batch crosses the boundary as one byte list and one string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    bytes: Vec<u8>,
    names: String,
    len: usize,
}

impl Batch {
    /// An empty batch.
    #[must_use]
    pub fn new() -> Self {
        Batch::default()
    }

    /// Number of requests.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every request, keeping the buffers.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.names.clear();
        self.len = 0;
    }

    /// Adds any request.
    pub fn push(&mut self, request: &Request<'_>) -> &mut Self {
        lock_core::wire::encode_request(&mut self.bytes, &mut self.names, request);
        self.len += 1;
        self
    }

    /// Adds `try-acquire`.
    pub fn try_acquire(&mut self, key: &str, owner: &str, ttl: u64, now: u64) -> &mut Self {
        self.push(&Request::TryAcquire {
            key,
            owner,
            ttl,
            now,
        })
    }
    /// Adds `acquire`.
    pub fn acquire(
        &mut self,
        key: &str,
        owner: &str,
        ttl: u64,
        wait_deadline: u64,
        now: u64,
    ) -> &mut Self {
        self.push(&Request::Acquire {
            key,
            owner,
            ttl,
            wait_deadline,
            now,
        })
    }
    /// Adds `release`.
    pub fn release(&mut self, key: &str, owner: &str, fence: u64, now: u64) -> &mut Self {
        self.push(&Request::Release {
            key,
            owner,
            fence,
            now,
        })
    }
    /// Adds `extend`.
    pub fn extend(&mut self, key: &str, owner: &str, fence: u64, ttl: u64, now: u64) -> &mut Self {
        self.push(&Request::Extend {
            key,
            owner,
            fence,
            ttl,
            now,
        })
    }
    /// Adds `cancel-wait`.
    pub fn cancel_wait(&mut self, key: &str, owner: &str, now: u64) -> &mut Self {
        self.push(&Request::CancelWait { key, owner, now })
    }
    /// Adds `handle-timeout`.
    pub fn handle_timeout(&mut self, now: u64) -> &mut Self {
        self.push(&Request::HandleTimeout { now })
    }

    /// The encoded requests (their names are kept apart), e.g. to test how malformed bytes are
    /// refused.
    pub fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }
}
