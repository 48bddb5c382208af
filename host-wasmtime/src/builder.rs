//! [`LockHostBuilder`]: limits, clock, sandbox, persistence, and the recovery of a persisted
//! table at start.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::clock::{Clock, MonotonicClock};
use crate::inner::{slice_for, Inner, PersistErrorHook, Persistence, State};
use crate::persist::{self, Recovery, Reservation, CLOCK_BLOCK, FENCE_BLOCK};
use crate::timer::{self, Shutdown};
use crate::{ComponentTable, Error, HostError, LockComponent, LockHost, SandboxLimits};
use lock_core::{Fence, Instant};

impl LockHost {
    /// A host with default limits, the embedded component and the real clock.
    ///
    /// # Errors
    /// See [`LockHostBuilder::build`].
    pub fn new() -> Result<Self, Error> {
        Self::builder().build()
    }

    /// A builder for limits, clock, sandbox and persistence.
    #[must_use]
    pub fn builder() -> LockHostBuilder {
        LockHostBuilder::default()
    }
}

/// Builds a [`LockHost`].
#[derive(Default)]
pub struct LockHostBuilder {
    limits: lock_core::Limits,
    sandbox: SandboxLimits,
    seed: u64,
    clock: Option<Arc<dyn Clock>>,
    component: Option<LockComponent>,
    persist: Option<(PathBuf, Duration)>,
    on_persist_error: Option<PersistErrorHook>,
}

impl LockHostBuilder {
    /// The table's limits (default: `lock_core::Limits::default()`).
    #[must_use]
    pub fn limits(mut self, limits: lock_core::Limits) -> Self {
        self.limits = limits;
        self
    }
    /// Memory cap and per-call time bound of the component instance.
    #[must_use]
    pub fn sandbox(mut self, sandbox: SandboxLimits) -> Self {
        self.sandbox = sandbox;
        self
    }
    /// Seed of the table's key hashing (pass a random one if keys come from untrusted parties).
    #[must_use]
    pub fn hash_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// The clock (default: a [`MonotonicClock`]; tests pass a [`ManualClock`](crate::ManualClock)).
    #[must_use]
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }
    /// Another build of the component (default: the embedded one).
    #[must_use]
    pub fn component(mut self, component: LockComponent) -> Self {
        self.component = Some(component);
        self
    }
    /// Keeps the table in `path` (and its token reservation in `path.reserve`): loaded at start
    /// if present (a corrupt file is an error, never an empty table), saved atomically every
    /// `interval` and at shutdown. Fencing tokens are reserved durably ahead of use, so no token
    /// is issued twice across crashes, however long `interval` is; leases granted after the last
    /// save are not restored after a crash (their tokens stay used).
    #[must_use]
    pub fn persist_to(mut self, path: impl Into<PathBuf>, interval: Duration) -> Self {
        self.persist = Some((path.into(), interval));
        self
    }
    /// Called (on the timer thread, or the thread dropping the last handle) when a periodic
    /// save, the shutdown save or a reservation write fails; the error is also kept for
    /// [`LockHost::persist_error`].
    #[must_use]
    pub fn on_persist_error(mut self, hook: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        self.on_persist_error = Some(Box::new(hook));
        self
    }

    /// Loads the component, recovers the persisted table if any, reserves tokens, and starts
    /// the timer thread.
    ///
    /// # Errors
    /// [`Error::Host`] if the component cannot be loaded or the limits are refused;
    /// [`Error::Persist`], naming the file, if a persisted file cannot be read, is corrupt,
    /// does not fit the sandbox, or the reservation cannot be written (a missing or read-only
    /// directory fails here, not at the first save).
    pub fn build(self) -> Result<LockHost, Error> {
        let component = match self.component {
            Some(c) => c,
            None => LockComponent::embedded()?,
        };
        let mut table = component.instantiate(&self.limits, self.seed, self.sandbox)?;
        let (clock, ceilings, recovery) = match &self.persist {
            Some((path, _)) => {
                let (clock, ceilings, recovery) =
                    recover(&mut table, path, self.sandbox, self.clock)?;
                (clock, Some(ceilings), Some(recovery))
            }
            None => (
                self.clock
                    .unwrap_or_else(|| Arc::new(MonotonicClock::default())),
                None,
                None,
            ),
        };
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                table,
                waiting: HashSet::new(),
                outcomes: HashMap::new(),
                watchers: HashMap::new(),
                keepalives: BTreeSet::new(),
                keepalive_of: HashMap::new(),
                shutdown: false,
                next_save: Instant::ZERO,
                armed: Instant::ZERO,
                quiet_until: Instant::ZERO,
                slice: slice_for(&self.limits),
                ceilings,
                fence_seen: recovery.as_ref().map_or(Fence::ZERO, |r| r.fence_floor),
                renew_wanted: false,
                persist_error: None,
            }),
            granted: Condvar::new(),
            timer: Condvar::new(),
            clock,
            persist: self.persist.map(|(path, interval)| Persistence {
                path,
                interval,
                save_io: Mutex::new(()),
                reserve_io: Mutex::new(ceilings.unwrap_or_default()),
                on_error: self.on_persist_error,
            }),
            recovery,
        });
        let thread = timer::spawn(&inner)
            .map_err(|e| Error::Persist(format!("could not start the timer thread: {e}")))?;
        let guard = Arc::new(Shutdown {
            inner: Arc::clone(&inner),
            thread: Mutex::new(Some(thread)),
        });
        Ok(LockHost {
            inner,
            _shutdown: guard,
        })
    }
}

/// Restores the table file into `table`, drops its waiters, raises its fence floor above the
/// previous run's reservation, resumes the clock, and writes a fresh reservation.
fn recover(
    table: &mut ComponentTable,
    path: &Path,
    sandbox: SandboxLimits,
    clock: Option<Arc<dyn Clock>>,
) -> Result<(Arc<dyn Clock>, Reservation, Recovery), Error> {
    let reserved = persist::load_reservation(path)?;
    let saved = persist::load(path)?;
    let mut recovery = Recovery::default();
    let (mut resume, mut last_fence) = (Instant::ZERO, Fence::ZERO);
    if let Some(saved) = &saved {
        if reserved.is_none() {
            return Err(Error::Persist(format!(
                "{} has no token reservation beside it ({}): tokens issued after its last save \
                 could be issued again; restore that file or start from an empty table",
                path.display(),
                persist::reservation_path(path).display()
            )));
        }
        // The snapshot is copied into the sandbox and decoded there: it needs at least its own
        // size twice over.
        if saved.snapshot.len() > sandbox.memory_bytes / 2 {
            return Err(too_big(path, saved.snapshot.len(), sandbox));
        }
        table
            .restore(&saved.snapshot)
            .map_err(|e| match e {
                HostError::Trap(why) => Error::Persist(format!(
                    "{} could not be restored within the sandbox (memory cap {} bytes, \
                     SandboxLimits::memory_bytes; call bound {:?} plus an allowance per byte): {why}",
                    path.display(),
                    sandbox.memory_bytes,
                    sandbox.call_timeout
                )),
                other => Error::Persist(format!("{}: {other}", path.display())),
            })?
            .map_err(|e| Error::Persist(format!("{}: {e}", path.display())))?;
        let stats = table.stats(Instant::ZERO)?;
        recovery.loaded = true;
        recovery.leases = stats.live_leases;
        recovery.waiters_dropped = table.cancel_all_waits(stats.clock)?;
        resume = stats
            .clock
            .saturating_add(lock_core::Duration(saved.downtime_ms));
        last_fence = stats.last_fence;
    }
    let reserved = reserved.unwrap_or_default();
    recovery.fence_floor = reserved.fence_ceiling.max(last_fence);
    table.raise_fence_floor(recovery.fence_floor)?;
    let clock = match clock {
        Some(clock) => clock,
        None => {
            // Continue the saved clock, counting the time the host was down, and never below
            // a reading the previous run may have used.
            resume = resume.max(reserved.clock_ceiling);
            Arc::new(MonotonicClock::starting_at(resume.0)) as Arc<dyn Clock>
        }
    };
    recovery.clock = clock.now();
    let ceilings = Reservation {
        fence_ceiling: recovery.fence_floor.saturating_add(FENCE_BLOCK),
        clock_ceiling: recovery.clock.saturating_add(CLOCK_BLOCK),
    };
    persist::save_reservation(path, ceilings)?;
    Ok((clock, ceilings, recovery))
}

fn too_big(path: &Path, len: usize, sandbox: SandboxLimits) -> Error {
    Error::Persist(format!(
        "{} holds a {len}-byte table that does not fit the sandbox memory cap of {} bytes \
         (SandboxLimits::memory_bytes): raise the cap to restore it",
        path.display(),
        sandbox.memory_bytes
    ))
}
