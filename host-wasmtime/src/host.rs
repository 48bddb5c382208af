//! [`LockHost`]: a thread-safe handle over one lock component instance, with blocking acquire,
//! lease guards, keep-alive, lost-lock callbacks, one timer thread and optional persistence.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::{Clock, MonotonicClock};
use crate::persist;
use crate::types::{AcquireOutcome, Event, EventKind, Grant, KeyInfo, Stats};
use crate::{ComponentTable, Error, LockComponent, SandboxLimits};

/// What an `on_lost` callback is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostLease {
    /// The key.
    pub key: String,
    /// The owner that lost it.
    pub owner: String,
    /// The lost lease's fencing token.
    pub fence: u64,
    /// When it expired (table clock, ms).
    pub at: u64,
}

type LostCallback = Box<dyn FnOnce(&LostLease) + Send>;

/// Builds a [`LockHost`].
pub struct LockHostBuilder {
    limits: lock_core::Limits,
    sandbox: SandboxLimits,
    seed: u64,
    clock: Option<Arc<dyn Clock>>,
    component: Option<LockComponent>,
    persist: Option<(PathBuf, Duration)>,
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
    /// Keeps the table in `path`: loaded at start if the file exists (a corrupt file is an
    /// error, never an empty table), saved atomically every `interval` and at shutdown.
    #[must_use]
    pub fn persist_to(mut self, path: impl Into<PathBuf>, interval: Duration) -> Self {
        self.persist = Some((path.into(), interval));
        self
    }

    /// Loads the component, restores the persisted table if any, and starts the timer thread.
    ///
    /// # Errors
    /// [`Error::Host`] if the component cannot be loaded or the limits are refused,
    /// [`Error::Persist`] if the persisted file cannot be read or is corrupt.
    pub fn build(self) -> Result<LockHost, Error> {
        let component = match self.component {
            Some(c) => c,
            None => LockComponent::embedded()?,
        };
        let mut table = component.instantiate(&self.limits, self.seed, self.sandbox)?;
        let mut clock = self.clock;
        let mut restored_waiters = false;
        if let Some((path, _)) = &self.persist {
            if let Some(saved) = persist::load(path)? {
                table.restore(&saved.snapshot)?.map_err(|e| {
                    Error::Persist(format!(
                        "{}: {}",
                        path.display(),
                        crate::error::describe(&e)
                    ))
                })?;
                let restored = table.stats(0)?;
                restored_waiters = restored.waiters > 0;
                let restored_clock = restored.clock;
                if clock.is_none() {
                    // Continue the saved clock, counting the time the host was down.
                    let resume = restored_clock.saturating_add(saved.downtime_ms());
                    clock = Some(Arc::new(MonotonicClock::starting_at(resume)));
                }
            }
        }
        let clock = clock.unwrap_or_else(|| Arc::new(MonotonicClock::default()));
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                table,
                waiting: HashSet::new(),
                outcomes: HashMap::new(),
                watchers: HashMap::new(),
                keepalives: BTreeSet::new(),
                keepalive_of: HashMap::new(),
                shutdown: false,
                next_save: 0,
                armed: 0,
                quiet_until: 0,
                restored_waiters,
            }),
            granted: Condvar::new(),
            timer: Condvar::new(),
            clock,
            persist: self.persist,
        });
        let weak = Arc::downgrade(&inner);
        let thread = std::thread::Builder::new()
            .name("lock-timer".into())
            .spawn(move || timer_loop(&weak))
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

/// A thread-safe, cheap-to-clone handle over one lock table in one component instance.
///
/// ```no_run
/// use std::time::Duration;
/// let locks = host_wasmtime::LockHost::new()?;
/// let lease = locks.acquire("nightly-report", "host-1/worker-3", Duration::from_secs(30), Duration::from_secs(5))?;
/// lease.keep_alive(); // extends before expiry until released
/// lease.on_lost(|lost| eprintln!("lost {} (fence {})", lost.key, lost.fence));
/// // ... do the work, passing lease.fence() to the resource ...
/// lease.release()?; // also runs on drop
/// # Ok::<(), host_wasmtime::Error>(())
/// ```
#[derive(Clone)]
pub struct LockHost {
    inner: Arc<Inner>,
    _shutdown: Arc<Shutdown>,
}

impl std::fmt::Debug for LockHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockHost")
    }
}

struct Inner {
    state: Mutex<State>,
    /// Signalled when a blocked acquire's outcome arrives.
    granted: Condvar,
    /// Signalled when the next wake-up may have moved earlier.
    timer: Condvar,
    clock: Arc<dyn Clock>,
    persist: Option<(PathBuf, Duration)>,
}

struct State {
    table: ComponentTable,
    /// (key, owner) of blocked acquires.
    waiting: HashSet<(String, String)>,
    /// Hand-off results for blocked acquires.
    outcomes: HashMap<(String, String), WaitOutcome>,
    /// Live guards by fence, for lost-lock notification.
    watchers: HashMap<u64, Arc<LeaseShared>>,
    /// Keep-alive renewals: (due, fence).
    keepalives: BTreeSet<(u64, u64)>,
    keepalive_of: HashMap<u64, u64>,
    shutdown: bool,
    next_save: u64,
    /// The instant the timer thread sleeps until; 0 while it is awake. Requests wake it only
    /// when they create something due earlier, so the hot path never pays for a context switch.
    armed: u64,
    /// No time-driven event (expiry, hand-off at expiry, wait timeout) can happen before this
    /// instant: the table's next wake-up as last read by the timer thread, lowered by every
    /// deadline created since (see [`Inner::arm`]). A call at an earlier `now` produces no
    /// event except a hand-off on release, so it need not poll the table's events (a second
    /// component call, about 40 % of a try-acquire + release pair).
    quiet_until: u64,
    /// The persisted table came back with waiters from a previous run: their hand-offs are not
    /// tracked in `waiting`, so every release polls.
    restored_waiters: bool,
}

enum WaitOutcome {
    Granted(Grant),
    TimedOut,
}

/// Stops the timer thread and saves the table when the last [`LockHost`] clone is dropped.
struct Shutdown {
    inner: Arc<Inner>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Shutdown {
    fn drop(&mut self) {
        let _ = self.inner.save();
        if let Ok(mut st) = self.inner.state.lock() {
            st.shutdown = true;
        }
        self.inner.timer.notify_all();
        self.inner.granted.notify_all();
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            // Never join oneself: should the last handle ever be dropped on the timer thread
            // (by a callback owning it), that thread exits on its own once it sees `shutdown`.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

fn timer_loop(weak: &Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let callbacks = match inner.lock() {
            Ok(mut st) if !st.shutdown => inner.run_due(&mut st),
            _ => return,
        };
        run_callbacks(callbacks);
        let Ok(mut st) = inner.lock() else { return };
        if st.shutdown {
            return;
        }
        let now = inner.clock.now_ms();
        let wait_ms = inner
            .next_due(&mut st)
            .map_or(1_000, |t| t.saturating_sub(now))
            .clamp(1, 1_000);
        st.armed = now.saturating_add(wait_ms);
        if let Ok((mut st, _)) = inner.timer.wait_timeout(st, Duration::from_millis(wait_ms)) {
            st.armed = 0;
        };
    }
}

fn run_callbacks(callbacks: Vec<(LostCallback, LostLease)>) {
    for (callback, lost) in callbacks {
        // A panicking callback must not take the timer thread (or a caller) down.
        let _ = catch_unwind(AssertUnwindSafe(|| callback(&lost)));
    }
}

impl Inner {
    fn lock(&self) -> Result<MutexGuard<'_, State>, Error> {
        self.state
            .lock()
            .map_err(|_| Error::Persist("lock host state poisoned by a panic".into()))
    }

    /// The earliest instant the timer thread must act at. Refreshes `quiet_until` from the
    /// table (called with the lock held, right after `run_due` drained every event).
    fn next_due(&self, st: &mut State) -> Option<u64> {
        let table = st.table.next_wakeup();
        st.quiet_until = match table {
            Ok(Some(at)) => at,
            Ok(None) => u64::MAX,
            Err(_) => 0,
        };
        let table = table.ok().flatten();
        let keepalive = st.keepalives.first().map(|(due, _)| *due);
        let save = self.persist.as_ref().map(|_| st.next_save);
        [table, keepalive, save].into_iter().flatten().min()
    }

    /// Handles timeouts, renews due keep-alives, saves if due. Returns callbacks to run unlocked.
    fn run_due(&self, st: &mut State) -> Vec<(LostCallback, LostLease)> {
        let mut callbacks = Vec::new();
        let now = self.clock.now_ms();
        if st.table.handle_timeout(now).is_ok() {
            self.drain(st, &mut callbacks);
        }
        while let Some(&(due, fence)) = st.keepalives.first() {
            if due > now {
                break;
            }
            st.keepalives.remove(&(due, fence));
            st.keepalive_of.remove(&fence);
            let Some(shared) = st.watchers.get(&fence).cloned() else {
                continue;
            };
            if let Ok(Ok(grant)) =
                st.table
                    .extend(&shared.key, &shared.owner, fence, shared.ttl_ms, now)
            {
                shared.deadline.store(grant.deadline, Ordering::SeqCst);
                schedule_keepalive(st, &shared);
            }
            self.drain(st, &mut callbacks);
        }
        if let Some((path, interval)) = &self.persist {
            if now >= st.next_save {
                let _ = persist::save(path, &mut st.table, now);
                st.next_save =
                    now.saturating_add(u64::try_from(interval.as_millis()).unwrap_or(u64::MAX));
            }
        }
        callbacks
    }

    /// Records that something is due at `at` (a new lease, wait or keep-alive deadline): wakes
    /// the timer thread if it sleeps past `at`, and lowers `quiet_until`.
    fn arm(&self, st: &mut State, at: u64) {
        st.quiet_until = st.quiet_until.min(at);
        if at < st.armed {
            st.armed = 0;
            self.timer.notify_all();
        }
    }

    /// Drains the table's events after a request at `now`, unless none can exist: nothing was
    /// due (`now < quiet_until`) and, for a release, nobody of ours waits to be handed the lock.
    fn drain_after(
        &self,
        st: &mut State,
        now: u64,
        release: bool,
        callbacks: &mut Vec<(LostCallback, LostLease)>,
    ) {
        let hand_off_possible = release && (!st.waiting.is_empty() || st.restored_waiters);
        if now >= st.quiet_until || hand_off_possible {
            self.drain(st, callbacks);
        }
    }

    /// Drains the table's events and dispatches them.
    fn drain(&self, st: &mut State, callbacks: &mut Vec<(LostCallback, LostLease)>) {
        let Ok(events) = st.table.poll_events() else {
            return;
        };
        for Event { key, at, kind } in events {
            match kind {
                EventKind::Expired(x) => {
                    if let Some(shared) = st.watchers.remove(&x.fence) {
                        shared.lost.store(true, Ordering::SeqCst);
                        if let Some(due) = st.keepalive_of.remove(&x.fence) {
                            st.keepalives.remove(&(due, x.fence));
                        }
                        let callback = shared.on_lost.lock().ok().and_then(|mut c| c.take());
                        if let Some(callback) = callback {
                            callbacks.push((
                                callback,
                                LostLease {
                                    key,
                                    owner: x.owner,
                                    fence: x.fence,
                                    at,
                                },
                            ));
                        }
                    }
                }
                EventKind::Granted(x) => {
                    let grant = Grant {
                        fence: x.fence,
                        deadline: x.deadline,
                    };
                    self.arm(st, x.deadline);
                    st.outcomes
                        .insert((key, x.owner), WaitOutcome::Granted(grant));
                    self.granted.notify_all();
                }
                EventKind::WaitTimedOut(owner) => {
                    st.outcomes.insert((key, owner), WaitOutcome::TimedOut);
                    self.granted.notify_all();
                }
            }
        }
    }

    fn save(&self) -> Result<(), Error> {
        let Some((path, _)) = &self.persist else {
            return Ok(());
        };
        let mut st = self.lock()?;
        let now = self.clock.now_ms();
        persist::save(path, &mut st.table, now)
    }
}

fn schedule_keepalive(st: &mut State, shared: &LeaseShared) {
    // Renew once two thirds of the TTL have passed.
    let due = shared
        .deadline
        .load(Ordering::SeqCst)
        .saturating_sub(shared.ttl_ms / 3);
    if let Some(old) = st.keepalive_of.insert(shared.fence, due) {
        st.keepalives.remove(&(old, shared.fence));
    }
    st.keepalives.insert((due, shared.fence));
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

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
        LockHostBuilder {
            limits: lock_core::Limits::default(),
            sandbox: SandboxLimits::default(),
            seed: 0,
            clock: None,
            component: None,
            persist: None,
        }
    }

    /// The host clock's current reading (ms).
    #[must_use]
    pub fn now(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// Takes `key` for `owner` if it is free, without waiting. If `owner` already holds it, the
    /// guard is for the same lease (a retried acquire is safe).
    ///
    /// # Errors
    /// [`Error::Lock`] with `held(deadline)` if another owner holds it, or any other lock error.
    pub fn try_acquire(&self, key: &str, owner: &str, ttl: Duration) -> Result<Lease, Error> {
        let ttl_ms = millis(ttl);
        let mut callbacks = Vec::new();
        let result = {
            let mut st = self.inner.lock()?;
            let now = self.inner.clock.now_ms();
            let result = st.table.try_acquire(key, owner, ttl_ms, now)?;
            self.inner.drain_after(&mut st, now, false, &mut callbacks);
            match result? {
                AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g) => {
                    Ok(self.guard(&mut st, key, owner, ttl_ms, g))
                }
                AcquireOutcome::Queued(_) | AcquireOutcome::AlreadyWaiting(_) => {
                    Err(Error::AlreadyWaiting)
                }
            }
        };
        run_callbacks(callbacks);
        result
    }

    /// Takes `key` for `owner`, blocking the calling thread until the lock is handed over by the
    /// table's FIFO queue or `wait` has passed.
    ///
    /// # Errors
    /// [`Error::WaitTimedOut`] if not granted in time, [`Error::AlreadyWaiting`] if this owner
    /// already waits for this key in another call, or [`Error::Lock`] / [`Error::Host`].
    pub fn acquire(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, Error> {
        let ttl_ms = millis(ttl);
        let mut callbacks = Vec::new();
        let mut st = self.inner.lock()?;
        let now = self.inner.clock.now_ms();
        let wait_deadline = now.saturating_add(millis(wait));
        let outcome = st.table.acquire(key, owner, ttl_ms, wait_deadline, now)?;
        self.inner.drain_after(&mut st, now, false, &mut callbacks);
        let id = (key.to_owned(), owner.to_owned());
        let result = match outcome? {
            AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g) => {
                Ok(self.guard(&mut st, key, owner, ttl_ms, g))
            }
            AcquireOutcome::AlreadyWaiting(_) => Err(Error::AlreadyWaiting),
            AcquireOutcome::Queued(_) => {
                st.waiting.insert(id.clone());
                self.inner.arm(&mut st, wait_deadline);
                loop {
                    if let Some(outcome) = st.outcomes.remove(&id) {
                        st.waiting.remove(&id);
                        break match outcome {
                            WaitOutcome::Granted(g) => {
                                Ok(self.guard(&mut st, key, owner, ttl_ms, g))
                            }
                            WaitOutcome::TimedOut => Err(Error::WaitTimedOut),
                        };
                    }
                    if st.shutdown {
                        st.waiting.remove(&id);
                        break Err(Error::WaitTimedOut);
                    }
                    let now = self.inner.clock.now_ms();
                    if now >= wait_deadline {
                        // The table decides: handling the timeout yields our wait-timed-out (or
                        // a hand-off that happened first).
                        if let Err(e) = st.table.handle_timeout(now) {
                            st.waiting.remove(&id);
                            break Err(e.into());
                        }
                        self.inner.drain(&mut st, &mut callbacks);
                        continue;
                    }
                    let step = Duration::from_millis((wait_deadline - now).clamp(1, 50));
                    st = match self.inner.granted.wait_timeout(st, step) {
                        Ok((guard, _)) => guard,
                        Err(_) => {
                            return Err(Error::Persist(
                                "lock host state poisoned by a panic".into(),
                            ))
                        }
                    };
                }
            }
        };
        drop(st);
        run_callbacks(callbacks);
        result
    }

    /// Runs `work` while holding `key`, releasing when it returns (or panics).
    ///
    /// # Errors
    /// The errors of [`acquire`](Self::acquire); the release error if the lease was lost
    /// meanwhile ([`Error::Lock`] with `expired`): the work may have overlapped another holder.
    pub fn with_lock<R>(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        work: impl FnOnce(&Lease) -> R,
    ) -> Result<R, Error> {
        let lease = self.acquire(key, owner, ttl, wait)?;
        let value = work(&lease);
        lease.release()?;
        Ok(value)
    }

    /// The holder and queue of `key`, if held.
    ///
    /// # Errors
    /// [`Error::Lock`] for an invalid key, or [`Error::Host`].
    pub fn inspect(&self, key: &str) -> Result<Option<KeyInfo>, Error> {
        self.with_table(|t, now| t.inspect(key, now).map(|r| r.map_err(Error::Lock)))?
    }

    /// Gauges and counters.
    ///
    /// # Errors
    /// [`Error::Host`].
    pub fn stats(&self) -> Result<Stats, Error> {
        self.with_table(|t, now| t.stats(now))
    }

    /// The whole table as snapshot bytes.
    ///
    /// # Errors
    /// [`Error::Host`].
    pub fn snapshot(&self) -> Result<Vec<u8>, Error> {
        self.with_table(|t, now| t.snapshot(now))
    }

    /// Saves the table to the persistence file now (no-op without persistence).
    ///
    /// # Errors
    /// [`Error::Persist`] if the file cannot be written.
    pub fn save(&self) -> Result<(), Error> {
        self.inner.save()
    }

    /// Does now what the timer thread does at its next wake-up (expiries, hand-offs, lost-lock
    /// callbacks, keep-alives). Useful with a [`ManualClock`](crate::ManualClock).
    pub fn tick(&self) {
        let callbacks = match self.inner.lock() {
            Ok(mut st) => self.inner.run_due(&mut st),
            Err(_) => return,
        };
        self.inner.timer.notify_all();
        run_callbacks(callbacks);
    }

    fn with_table<T>(
        &self,
        f: impl FnOnce(&mut ComponentTable, u64) -> Result<T, crate::HostError>,
    ) -> Result<T, Error> {
        let mut callbacks = Vec::new();
        let value = {
            let mut st = self.inner.lock()?;
            let now = self.inner.clock.now_ms();
            let value = f(&mut st.table, now)?;
            self.inner.drain(&mut st, &mut callbacks);
            value
        };
        run_callbacks(callbacks);
        Ok(value)
    }

    fn guard(&self, st: &mut State, key: &str, owner: &str, ttl_ms: u64, g: Grant) -> Lease {
        let shared = st
            .watchers
            .entry(g.fence)
            .or_insert_with(|| {
                Arc::new(LeaseShared {
                    key: key.to_owned(),
                    owner: owner.to_owned(),
                    fence: g.fence,
                    ttl_ms,
                    deadline: AtomicU64::new(g.deadline),
                    lost: AtomicBool::new(false),
                    released: AtomicBool::new(false),
                    on_lost: Mutex::new(None),
                })
            })
            .clone();
        self.inner.arm(st, g.deadline);
        Lease {
            host: self.clone(),
            shared,
        }
    }
}

/// State shared by a guard and the host.
struct LeaseShared {
    key: String,
    owner: String,
    fence: u64,
    ttl_ms: u64,
    deadline: AtomicU64,
    lost: AtomicBool,
    released: AtomicBool,
    on_lost: Mutex<Option<LostCallback>>,
}

/// A held lock. Released when dropped (or by [`release`](Lease::release), which is idempotent).
pub struct Lease {
    host: LockHost,
    shared: Arc<LeaseShared>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.shared.key)
            .field("owner", &self.shared.owner)
            .field("fence", &self.shared.fence)
            .field("deadline", &self.deadline())
            .finish()
    }
}

impl Lease {
    /// The key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.shared.key
    }
    /// The owner.
    #[must_use]
    pub fn owner(&self) -> &str {
        &self.shared.owner
    }
    /// The fencing token: pass it with every write to the protected resource.
    #[must_use]
    pub fn fence(&self) -> u64 {
        self.shared.fence
    }
    /// The current deadline (host clock, ms); moves with `extend` and keep-alive.
    #[must_use]
    pub fn deadline(&self) -> u64 {
        self.shared.deadline.load(Ordering::SeqCst)
    }
    /// Whether the table reported this lease expired (the lock was lost).
    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// Moves the deadline to now + `ttl`.
    ///
    /// # Errors
    /// [`Error::Lock`] with `expired` if the lease was lost, or another lock/host error.
    pub fn extend(&self, ttl: Duration) -> Result<(), Error> {
        let mut callbacks = Vec::new();
        let result = {
            let inner = &self.host.inner;
            let mut st = inner.lock()?;
            let now = inner.clock.now_ms();
            let r = st.table.extend(
                &self.shared.key,
                &self.shared.owner,
                self.shared.fence,
                millis(ttl),
                now,
            )?;
            inner.drain_after(&mut st, now, false, &mut callbacks);
            r.map(|g| {
                self.shared.deadline.store(g.deadline, Ordering::SeqCst);
                inner.arm(&mut st, g.deadline);
                if st.keepalive_of.contains_key(&self.shared.fence) {
                    schedule_keepalive(&mut st, &self.shared);
                }
            })
            .map_err(Error::Lock)
        };
        run_callbacks(callbacks);
        result
    }

    /// Keeps the lease alive: the timer thread extends it by its TTL whenever two thirds of the
    /// TTL have passed, until it is released or lost.
    pub fn keep_alive(&self) {
        if let Ok(mut st) = self.host.inner.lock() {
            if !self.is_lost() && !self.shared.released.load(Ordering::SeqCst) {
                schedule_keepalive(&mut st, &self.shared);
                let due = st
                    .keepalive_of
                    .get(&self.shared.fence)
                    .copied()
                    .unwrap_or(0);
                self.host.inner.arm(&mut st, due);
            }
        }
    }

    /// Calls `callback` once if the lease expires before it is released (immediately if it was
    /// already lost). A panicking callback is caught.
    pub fn on_lost(&self, callback: impl FnOnce(&LostLease) + Send + 'static) {
        let lost = {
            let Ok(_st) = self.host.inner.lock() else {
                return;
            };
            if self.is_lost() {
                true
            } else {
                if let Ok(mut slot) = self.shared.on_lost.lock() {
                    *slot = Some(Box::new(callback));
                    return;
                }
                false
            }
        };
        if lost {
            let info = LostLease {
                key: self.shared.key.clone(),
                owner: self.shared.owner.clone(),
                fence: self.shared.fence,
                at: self.deadline(),
            };
            run_callbacks(vec![(Box::new(callback), info)]);
        }
    }

    /// Releases the lock. Only the first call does work; later calls return `Ok(())`.
    ///
    /// # Errors
    /// [`Error::Lock`] with `expired` if the lease was lost before the release: the critical
    /// section may have overlapped another holder's.
    pub fn release(&self) -> Result<(), Error> {
        if self.shared.released.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut callbacks = Vec::new();
        let result = {
            let inner = &self.host.inner;
            let mut st = inner.lock()?;
            st.watchers.remove(&self.shared.fence);
            if let Some(due) = st.keepalive_of.remove(&self.shared.fence) {
                st.keepalives.remove(&(due, self.shared.fence));
            }
            let now = inner.clock.now_ms();
            let r =
                st.table
                    .release(&self.shared.key, &self.shared.owner, self.shared.fence, now)?;
            inner.drain_after(&mut st, now, true, &mut callbacks);
            r.map_err(Error::Lock)
        };
        run_callbacks(callbacks);
        result
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = self.release();
    }
}
