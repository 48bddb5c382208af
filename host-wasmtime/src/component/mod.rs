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

mod batch;
mod cache;
mod records;
mod sandbox;
mod table;
mod wit;

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store, StoreLimits, StoreLimitsBuilder};

pub use batch::Batch;
pub use cache::{CacheOutcome, ComponentCache, CACHE_DIR_ENV};
pub use records::{ComponentRecords, RecordStep};
pub use sandbox::{
    sandbox_engine, SandboxLimits, EPOCH_TICK, RESTORE_TIME_PER_BYTE, SNAPSHOT_TIME_PER_ENTRY,
};
pub use table::ComponentTable;
use wit::Lock;

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
    /// The component answered a value this build does not know (an error or limit name from a
    /// component built from another `lock-core`).
    Mismatch(String),
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Load(e) => write!(f, "could not load the lock component: {e}"),
            HostError::Trap(e) => write!(f, "the lock component trapped: {e}"),
            HostError::Mismatch(e) => write!(f, "the lock component does not match this host: {e}"),
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
    /// The embedded component ([`LOCK_COMPONENT`]), compiled once per process and shared by
    /// every host of the process; the compiled code is kept in [`ComponentCache::from_env`]
    /// (`EXPIRING_LOCK_CACHE_DIR`, else the user's cache directory), so a later process loads
    /// it instead of compiling.
    ///
    /// # Errors
    /// [`HostError::Load`] if wasmtime cannot compile it.
    pub fn embedded() -> Result<Self, HostError> {
        static COMPILED: OnceLock<Result<LockComponent, HostError>> = OnceLock::new();
        COMPILED
            .get_or_init(|| {
                Self::from_bytes_cached(LOCK_COMPONENT, &ComponentCache::from_env())
                    .map(|(component, _)| component)
            })
            .clone()
    }

    /// Compiles a component, or loads its compiled code from `cache` (and stores it there after
    /// compiling); says which happened.
    ///
    /// # Errors
    /// [`HostError::Load`] if wasmtime cannot compile it.
    pub fn from_bytes_cached(
        bytes: &[u8],
        cache: &ComponentCache,
    ) -> Result<(Self, CacheOutcome), HostError> {
        let engine = sandbox_engine()?;
        let (component, outcome) = cache.load_or_compile(&engine, bytes).map_err(load)?;
        let component = LockComponent {
            linker: Linker::new(&engine),
            engine,
            component,
        };
        Ok((component, outcome))
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
        Self::from_bytes_cached(bytes, &ComponentCache::Off).map(|(component, _)| component)
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
        let (mut store, bindings) = self.instance(sandbox)?;
        let created = bindings
            .expiring_lock_table()
            .lock_table()
            .call_create(&mut store, wit::limits(limits), seed)
            .map_err(load)?;
        let table = created.map_err(|e| {
            // The core's own message (`invalid-limits` names the limit).
            HostError::Load(wit::error(&e).map_or_else(|| format!("{e:?}"), |e| e.to_string()))
        })?;
        Ok(ComponentTable {
            store,
            bindings,
            table,
            ticks: sandbox.ticks(),
            poisoned: None,
        })
    }
}

impl LockComponent {
    /// A new instance in its own store, bounded by `sandbox`.
    fn instance(&self, sandbox: SandboxLimits) -> Result<(Store<StoreState>, Lock), HostError> {
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
        Ok((store, bindings))
    }

    /// The component's per-key `records` interface in a new instance: what a host runs on the
    /// records of a shared store (see `lock-store`).
    ///
    /// # Errors
    /// [`HostError::Load`] if instantiation fails.
    pub fn records(&self, sandbox: SandboxLimits) -> Result<ComponentRecords, HostError> {
        let (store, bindings) = self.instance(sandbox)?;
        Ok(ComponentRecords {
            store,
            bindings,
            ticks: sandbox.ticks(),
            poisoned: None,
        })
    }
}

fn load(e: impl fmt::Display) -> HostError {
    HostError::Load(e.to_string())
}
