//! [`LockHost`]: a thread-safe handle over one lock component instance, with blocking acquire,
//! lease guards, keep-alive, lost-lock callbacks, one timer thread and optional persistence.
//!
//! Every request goes through `Inner::request` (the `inner` module): one path under the state
//! lock, callbacks run after unlocking.

use std::sync::Arc;
use std::time::Duration;

use crate::inner::{span, Inner, State, WaitOutcome};
use crate::lease::Lease;
use crate::lease_shared::{run_callbacks, Callbacks, LeaseShared};
use crate::persist::Recovery;
use crate::timer::Shutdown;
use crate::{ComponentTable, Error, HostError};
use lock_core::{AcquireOptions, AcquireOutcome, Grant, Instant, KeyInfo, QueryPage, Stats};

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
    pub(crate) inner: Arc<Inner>,
    pub(crate) _shutdown: Arc<Shutdown>,
}

impl std::fmt::Debug for LockHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockHost")
    }
}

impl LockHost {
    /// The host clock's current reading (ms).
    #[must_use]
    pub fn now(&self) -> Instant {
        self.inner.clock.now()
    }

    /// What was found in the persisted files at start (`None` without persistence).
    #[must_use]
    pub fn recovery(&self) -> Option<Recovery> {
        self.inner.recovery.clone()
    }

    /// The last failed periodic save, shutdown save or token reservation, until a save
    /// succeeds (`None` if all is well or without persistence). Failures are also passed to
    /// the hook set with [`LockHostBuilder::on_persist_error`](crate::LockHostBuilder::on_persist_error).
    #[must_use]
    pub fn persist_error(&self) -> Option<Error> {
        self.inner
            .lock()
            .ok()
            .and_then(|st| st.persist_error.clone())
    }

    /// Takes `key` for `owner` if it is free, without waiting. If `owner` already holds it, the
    /// guard is for the same lease (a retried acquire is safe).
    ///
    /// # Errors
    /// [`Error::Lock`] with `held(deadline)` if another owner holds it, or any other lock error.
    pub fn try_acquire(&self, key: &str, owner: &str, ttl: Duration) -> Result<Lease, Error> {
        let ttl = span(ttl);
        self.inner.request(|st, now, callbacks| {
            match self
                .inner
                .call(st.table.try_acquire(key, owner, ttl, now))??
            {
                AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g) => {
                    self.guard(st, key, owner, ttl, g, callbacks)
                }
                AcquireOutcome::Queued { .. } | AcquireOutcome::AlreadyWaiting { .. } => {
                    Err(Error::AlreadyWaiting)
                }
            }
        })
    }

    /// Takes `key` for `owner`, blocking the calling thread until the lock is handed over by the
    /// table's FIFO queue or `wait` has passed. A zero `wait` is a [`try_acquire`](Self::try_acquire):
    /// a held key is refused with `held(deadline)`, never `WaitTimedOut`.
    ///
    /// Never returns a lease that is already over: a hand-off whose lease expired before this
    /// thread woke up is dropped and the acquire goes on (a new request to the table) until
    /// `wait` has passed.
    ///
    /// # Errors
    /// [`Error::WaitTimedOut`] if not granted in time, [`Error::AlreadyWaiting`] if this owner
    /// already waits for this key in another call, or [`Error::Lock`] / [`Error::Host`] (at
    /// once, also for a thread already blocked, when the component traps).
    pub fn acquire(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, Error> {
        self.acquire_with(key, owner, ttl, wait, &AcquireOptions::EXCLUSIVE)
    }

    /// [`acquire`](Self::acquire) with the lock kinds: a shared lease or one of N permits, a
    /// minimum hold, a lock-delay, metadata (see [`AcquireOptions`]). A request is granted at
    /// once only if it fits and nobody waits ahead of it; otherwise it queues FIFO, whatever
    /// its mode (the Web Locks request queue).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use host_wasmtime::{AcquireOptions, LockHost};
    ///
    /// let locks = LockHost::new()?;
    /// let (ttl, wait) = (Duration::from_secs(30), Duration::from_secs(5));
    /// let reader = AcquireOptions::shared().metadata("plugin report-7");
    /// let lease = locks.acquire_with("catalog", "plugin-a", ttl, wait, &reader)?;
    /// # drop(lease);
    /// # Ok::<(), host_wasmtime::Error>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`acquire`](Self::acquire), and the options' refusals ([`Error::Lock`] with
    /// `permits-mismatch`, `mode-mismatch`, `metadata-too-long`...).
    pub fn acquire_with(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        options: &AcquireOptions<'_>,
    ) -> Result<Lease, Error> {
        let ttl = span(ttl);
        let mut callbacks = Vec::new();
        let result = self.acquire_locked(key, owner, ttl, wait, options, &mut callbacks);
        run_callbacks(callbacks);
        result
    }

    /// Takes `key` now whatever its holders (Web Locks' `steal`): every live lease ends, its
    /// `on_lost` runs with [`LostLease::stolen`](crate::LostLease::stolen) set, and its
    /// holder's next call answers [`LockError::Stolen`](lock_core::LockError::Stolen); the
    /// stealer gets a fresh fence; the queue is kept. Exclusive only.
    ///
    /// # Errors
    /// [`Error::Lock`] (a validation error, or `mode-mismatch` for a shared steal), or
    /// [`Error::Host`].
    pub fn steal(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
    ) -> Result<Lease, Error> {
        let ttl = span(ttl);
        self.inner.request(|st, now, callbacks| {
            let outcome = self
                .inner
                .call(st.table.steal(key, owner, ttl, options, now))??;
            // The stolen leases' events (and their `on_lost`) are drained with this call.
            self.inner.drain(st, callbacks);
            match outcome {
                AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g) => {
                    self.guard(st, key, owner, ttl, g, callbacks)
                }
                AcquireOutcome::Queued { .. } | AcquireOutcome::AlreadyWaiting { .. } => {
                    Err(Error::AlreadyWaiting)
                }
            }
        })
    }

    /// The keys in use whose name starts with `prefix` and comes after `after` (`""` for the
    /// first page), with every lease and waiter: at most `limit` (1 to
    /// [`QUERY_MAX`](lock_core::QUERY_MAX)), and the cursor of the next page.
    ///
    /// # Errors
    /// [`Error::Lock`] with `query-limit`, or for a bad prefix or cursor; [`Error::Host`].
    pub fn query(&self, prefix: &str, after: &str, limit: usize) -> Result<QueryPage, Error> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        self.with_table(|t, now| {
            (t.query(prefix, after, limit, now)).map(|r| r.map_err(Error::Lock))
        })?
    }

    fn acquire_locked(
        &self,
        key: &str,
        owner: &str,
        ttl: lock_core::Duration,
        wait: Duration,
        options: &AcquireOptions<'_>,
        callbacks: &mut Callbacks,
    ) -> Result<Lease, Error> {
        let inner = &self.inner;
        let mut st = inner.lock()?;
        let mut now = inner.begin(&mut st, callbacks)?;
        let wait_deadline = now.saturating_add(span(wait));
        let id = (key.to_owned(), owner.to_owned());
        loop {
            let outcome = if options.is_plain() {
                inner.call(st.table.acquire(key, owner, ttl, wait_deadline, now))?
            } else {
                let table = &mut st.table;
                inner.call(table.acquire_with(key, owner, ttl, wait_deadline, options, now))?
            };
            match outcome? {
                AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g) => {
                    return self.guard(&mut st, key, owner, ttl, g, callbacks);
                }
                AcquireOutcome::AlreadyWaiting { .. } => return Err(Error::AlreadyWaiting),
                AcquireOutcome::Queued { .. } => {}
            }
            st.waiting.insert(id.clone());
            inner.arm(&mut st, wait_deadline);
            let outcome = loop {
                if let Some(outcome) = st.outcomes.remove(&id) {
                    break Ok(outcome);
                }
                if st.shutdown {
                    break Err(Error::WaitTimedOut);
                }
                if st.table.is_poisoned() {
                    break Err(Error::Host(HostError::Poisoned(
                        "the table became unusable while waiting".into(),
                    )));
                }
                now = match inner.begin(&mut st, callbacks) {
                    Ok(now) => now,
                    Err(e) => break Err(e),
                };
                if st.outcomes.contains_key(&id) {
                    continue;
                }
                // The table decides when the wait is over; wake up at its deadline to let
                // `begin` apply it (or earlier, when a hand-off signals).
                let step =
                    Duration::from_millis(wait_deadline.saturating_since(now).0.clamp(1, 50));
                st = inner
                    .granted
                    .wait_timeout(st, step)
                    .map_err(|_| Error::Persist("lock host state poisoned by a panic".into()))?
                    .0;
            };
            st.waiting.remove(&id);
            match outcome {
                Ok(WaitOutcome::Granted(g)) => {
                    // The hand-off may have ended before this thread woke: the table, brought
                    // up to now, says whether it is still ours. If not, never hand out a lease
                    // that ended: ask the table again with what remains of the wait.
                    now = inner.begin(&mut st, callbacks)?;
                    let held = inner.call(st.table.inspect(key, now))??;
                    let ours = (held.iter().flat_map(|i| &i.holders))
                        .find(|h| h.owner == owner && h.fence == g.fence && h.ended.is_none());
                    if let Some(h) = ours {
                        let grant = Grant {
                            fence: h.fence,
                            deadline: h.deadline,
                        };
                        return self.guard(&mut st, key, owner, ttl, grant, callbacks);
                    }
                }
                Ok(WaitOutcome::TimedOut) => return Err(Error::WaitTimedOut),
                Ok(WaitOutcome::Failed(e)) => return Err(e),
                Err(e) => {
                    // Leave the queue, so no hand-off is ever made to a caller that left.
                    let _ = st.table.cancel_wait(key, owner, now);
                    inner.drain(&mut st, callbacks);
                    return Err(e);
                }
            }
        }
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
    /// callbacks, keep-alives, a due save). Useful with a [`ManualClock`](crate::ManualClock).
    pub fn tick(&self) {
        let mut callbacks = Vec::new();
        let save_due = match self.inner.lock() {
            Ok(mut st) => self.inner.run_due(&mut st, &mut callbacks),
            Err(_) => false,
        };
        self.inner.timer.notify_all();
        run_callbacks(callbacks);
        self.inner.renew_ahead();
        if save_due {
            if let Err(e) = self.inner.save() {
                self.inner.report(e);
            }
        }
    }

    fn with_table<T>(
        &self,
        f: impl FnOnce(&mut ComponentTable, Instant) -> Result<T, HostError>,
    ) -> Result<T, Error> {
        self.inner
            .request(|st, now, _| self.inner.call(f(&mut st.table, now)))
    }

    /// The guard for a grant, once its fence is covered by the reservation. If the reservation
    /// cannot be written the lease is released at once and the error returned: a token that is
    /// not durably reserved never leaves the host.
    fn guard(
        &self,
        st: &mut State,
        key: &str,
        owner: &str,
        ttl: lock_core::Duration,
        g: Grant,
        callbacks: &mut Callbacks,
    ) -> Result<Lease, Error> {
        if let Err(e) = self.inner.admit_fence(st, g.fence) {
            let now = self.inner.clock.now();
            let _ = st.table.release(key, owner, g.fence, now);
            self.inner.drain_after_release(st, callbacks);
            return Err(e);
        }
        let shared = st
            .watchers
            .entry(g.fence)
            .or_insert_with(|| Arc::new(LeaseShared::new(key, owner, g.fence, ttl, g.deadline)))
            .clone();
        self.inner.arm(st, g.deadline);
        Ok(Lease {
            inner: Arc::clone(&self.inner),
            _shutdown: Arc::clone(&self._shutdown),
            shared,
        })
    }
}
