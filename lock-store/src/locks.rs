//! [`Locks`]: the lock API for services, over any [`Store`], with the store's clock.
//!
//! The same shape as `host_wasmtime::LockHost`: try-acquire, acquire with a wait, a [`Lease`]
//! with its fence and deadline, extend, keep-alive, a lost-lock callback, idempotent release
//! (also on drop), `with_lock`, inspect. Every answer is decided by `lock-core` on the key's
//! record; this module only waits, retries and keeps the holder's own view conservative.

use crate::local::{LocalInstant, ProcessClock};
use std::fmt;
use std::time::Duration;

use lock_core::{
    AcquireOptions, Fence, Grant, Instant, KeyInfo, Limits, QueryPage, Request, Response,
};

use crate::client::Client;
use crate::decider::{AnyDecider, Native};
use crate::engine::Engine;
use crate::give_up::GiveUp;
use crate::held::{local_end, LeaseState};
use crate::lease::Lease;
use crate::listen::Subscription;
use crate::store::{Store, StoreError};
use lock_protocol::clock::StoreClock;
use lock_protocol::decided::Decided;
use lock_protocol::kinds::OwnedOptions;
use lock_protocol::queue::{steal_request, stolen, Acquiring, Want};

pub use lock_protocol::{Error, WAIT_ALIVE};

/// Locks over one store namespace. Cheap to clone (clones share the connection); give each
/// thread that blocks in `acquire` its own `Locks` (or a clone: calls take turns on the
/// connection, never while sleeping).
#[derive(Clone)]
pub struct Locks {
    pub(crate) client: Client,
}

impl fmt::Debug for Locks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locks")
            .field("store", &self.describe())
            .finish()
    }
}

impl Locks {
    /// Locks over a store of your own with the default [`Options`](crate::Options) (to open one
    /// by URL: [`Locks::open`]).
    pub fn new(store: impl Store + 'static) -> Self {
        match Locks::build(
            Box::new(store),
            AnyDecider::Native(Native),
            Limits::default(),
            true,
        ) {
            Ok(locks) => locks,
            Err(_) => unreachable!("the default limits are valid"),
        }
    }

    pub(crate) fn build(
        store: Box<dyn Store>,
        decider: AnyDecider,
        limits: Limits,
        adopt_held: bool,
    ) -> Result<Self, Error> {
        Ok(Locks {
            client: Client::new(store, decider, limits, adopt_held)?,
        })
    }

    /// Opens namespace `namespace` of the store at `url` with the default
    /// [`Options`](crate::Options) (each server call bounded by 5 s). URLs:
    /// `redis://HOST[:PORT][/DB]`, `postgres://USER@HOST[:PORT]/DB`,
    /// `mysql://USER@HOST[:PORT]/DB` (or `mariadb://`), `sqlite://PATH`, `memory:`, `noop:`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use lock_store::Locks; // features = ["redis"]
    ///
    /// let locks = Locks::open("redis://127.0.0.1:6379", "jobs")?;
    /// let lease = locks.acquire("nightly-report", "replica-1", Duration::from_secs(30), Duration::from_secs(10))?;
    /// lease.keep_alive();                      // extends every 10 s while the work runs
    /// lease.on_lost(|l| eprintln!("lost {} (fence {})", l.key, l.fence.0));
    /// // ... write the report, passing lease.fence() to the storage that keeps it ...
    /// lease.release()?;                        // the next waiter, in any process, is handed the key
    /// # Ok::<(), lock_store::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Store`]: a bad URL or namespace, a store this build lacks, a server that cannot
    /// be reached.
    pub fn open(url: &str, namespace: &str) -> Result<Self, Error> {
        crate::Options::new().open(url, namespace)
    }

    /// A decider's answer of the wrong kind for the request: the one place it becomes an error.
    pub(crate) fn unexpected(&self, answer: &Response) -> Error {
        self.client.unexpected(answer)
    }

    /// The store and namespace, for messages (no password).
    #[must_use]
    pub fn describe(&self) -> String {
        self.client.describe()
    }

    fn engine(&self) -> std::sync::MutexGuard<'_, Engine<Box<dyn Store>, AnyDecider>> {
        self.client.engine()
    }

    /// One request on `key` at the store's time.
    pub(crate) fn request<'r>(
        &self,
        key: &str,
        make: impl Fn(Instant) -> Request<'r>,
    ) -> Result<Decided<Response>, StoreError> {
        self.client.request(key, make)
    }

    /// Takes `key` for `owner` for `ttl` if nobody else holds it.
    ///
    /// # Errors
    /// [`Error::Lock`] with `held(deadline)` if another owner holds it (or any other lock
    /// error), [`Error::AlreadyWaiting`], [`Error::Store`].
    pub fn try_acquire(&self, key: &str, owner: &str, ttl: Duration) -> Result<Lease, Error> {
        self.acquire(key, owner, ttl, Duration::ZERO)
    }

    /// Takes `key` for `owner` for `ttl`, waiting up to `wait` in the key's FIFO queue (shared
    /// by every process on the store). A zero `wait` is [`try_acquire`](Self::try_acquire).
    ///
    /// The returned lease is live: a hand-off that ended before this caller saw it is never
    /// returned (the acquire goes on with what remains of the wait). While it waits, the caller
    /// keeps its place alive (`renew-wait`, see [`WAIT_ALIVE`]): if its process dies, it leaves
    /// the queue within that time and is never handed the key. It hears its hand-off from the
    /// store where it can (Redis, PostgreSQL: one listening connection shared by the waiting
    /// calls of this `Locks` and its clones, closed 10 s after the last of them) and looks by
    /// itself at the key's next deadline and at least every second (every 50 ms on
    /// stores that cannot notify). A connection lost while it waits does not end the wait: it
    /// tries again every 50 ms until the wait is over (an outage longer than [`WAIT_ALIVE`]
    /// costs its place: it queues again, at the back).
    ///
    /// # Errors
    /// [`Error::WaitTimedOut`], [`Error::AlreadyWaiting`], [`Error::Lock`], [`Error::Store`]
    /// (when queueing fails, or the store is still unreachable when the wait is over; this
    /// caller is then no longer queued, if the store can still be reached).
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
    /// its mode (the Web Locks request queue). The options'
    /// [`wait_alive`](AcquireOptions::wait_alive) is not read: a waiter keeps its place by
    /// renewing it every [`WAIT_ALIVE`] or less.
    ///
    /// ```
    /// use std::time::Duration;
    /// use lock_store::{AcquireOptions, Locks};
    ///
    /// let locks = Locks::open("memory:", "docs")?;
    /// let (ttl, wait) = (Duration::from_secs(30), Duration::ZERO);
    /// let reader = AcquireOptions::shared().metadata("report on host-3");
    /// let a = locks.acquire_with("doc-7", "reader-a", ttl, wait, &reader)?;
    /// let b = locks.acquire_with("doc-7", "reader-b", ttl, wait, &reader)?; // beside a
    /// assert!(locks.try_acquire("doc-7", "writer", ttl).is_err()); // waits for both
    /// assert_eq!(locks.inspect("doc-7")?.unwrap().holders.len(), 2);
    /// # let _ = (a, b);
    /// # Ok::<(), lock_store::Error>(())
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
        self.acquiring(key, owner, ttl, wait, options, None)
    }

    /// [`acquire_with`](Self::acquire_with), which another thread may give up through
    /// `give_up` (see [`GiveUp`]): the acquire then cancels its wait, releases a lease it was
    /// handed meanwhile, and answers [`Error::GaveUp`]. Given up before it starts, it asks
    /// nothing.
    ///
    /// # Errors
    /// Those of [`acquire_with`](Self::acquire_with), and [`Error::GaveUp`].
    pub fn acquire_or_give_up(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        options: &AcquireOptions<'_>,
        give_up: &GiveUp,
    ) -> Result<Lease, Error> {
        self.acquiring(key, owner, ttl, wait, options, Some(give_up))
    }

    /// An acquire, given up through `give_up` if any (without one, nothing is allocated or
    /// locked for it, and naps wait for the notice in one piece).
    fn acquiring(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        options: &AcquireOptions<'_>,
        give_up: Option<&GiveUp>,
    ) -> Result<Lease, Error> {
        let given_up = || give_up.is_some_and(GiveUp::is_given_up);
        // A lease of this owner on this key dropped a moment ago may still be being released.
        self.client.after_departures(key, owner, given_up);
        let mut gave_up = false;
        let mut acquiring = Acquiring::with_options(
            key,
            owner,
            ttl,
            wait,
            self.client.poll,
            OwnedOptions::of(options),
        );
        acquiring.adopt_held(self.client.adopt_held);
        let mut watcher: Option<Subscription> = None;
        let mut watch_failed = false;
        let granted = loop {
            if !gave_up && given_up() {
                gave_up = true;
                acquiring.give_up(Error::GaveUp, LocalInstant::now())?;
            }
            let step = match acquiring.want() {
                Want::Ask => match self.request(key, |now| acquiring.request(now)) {
                    Ok(decided) => {
                        acquiring.asked(decided, |r| self.unexpected(r), LocalInstant::now())
                    }
                    Err(e) => acquiring.ask_failed(e),
                },
                Want::Renew => {
                    let decided = self.request(key, |now| acquiring.request(now));
                    acquiring.renewed(decided, |r| self.unexpected(r), LocalInstant::now())
                }
                Want::Leave => {
                    let decided = self.request(key, |now| acquiring.request(now));
                    acquiring.left(decided, LocalInstant::now())
                }
                Want::Look => acquiring.looked(
                    self.engine().inspect(key, Instant::ZERO),
                    LocalInstant::now(),
                ),
                Want::Pause(pause) => {
                    // A give-up's own pauses are not cut short by it.
                    match give_up.filter(|_| !gave_up) {
                        Some(give_up) => {
                            give_up.sleep(pause);
                        }
                        None => std::thread::sleep(pause),
                    }
                    continue;
                }
                Want::Nap(nap) => {
                    if nap_or_notice(watcher.as_ref(), nap, give_up).is_err() {
                        // The notice connection failed: look by ourselves from now on.
                        watcher = None;
                        acquiring.watching(false);
                    }
                    continue;
                }
            };
            match step {
                // Handed the key after its caller gave up: the give-up releases it.
                Ok(Some(_)) if given_up() => {}
                Ok(Some(granted)) => break granted,
                Ok(None) => {}
                // Over: an error that ended the wait while queued has left the key first.
                Err(e) => return Err(e),
            }
            // Notices of hand-offs, if the store sends them (one listening connection for all
            // the waiting calls of this `Locks`).
            if acquiring.in_line() && watcher.is_none() && !watch_failed {
                let subscribed = (self.client.hub).subscribe(key, owner, || {
                    // The store is held only to learn how to connect: the other calls of
                    // this `Locks` (a lease's keep-alive, say) do not wait for the connect.
                    let open = self.engine().store_mut().watcher();
                    open.map(|open| open()).transpose()
                });
                match subscribed {
                    Ok(Some(w)) => {
                        watcher = Some(w);
                        acquiring.watching(true);
                    }
                    // The store cannot notify, or listening failed: look by ourselves.
                    Ok(None) | Err(_) => watch_failed = true,
                }
            }
        };
        Ok(self.lease(key, owner, ttl, granted.grant, granted.clock))
    }

    /// Takes `key` now whatever its holders (Web Locks' `steal`, Redisson's `forceUnlock` and
    /// acquire): every live lease ends with a `stolen` event, and its holder's next call
    /// answers [`LockError::Stolen`](crate::LockError::Stolen) (its `on_lost` runs with that refusal); the stealer gets a
    /// fresh fence; the queue is kept. Exclusive only. For an operator's forced take-over: the
    /// old holder may still be working, so the resource must check fences.
    ///
    /// # Errors
    /// [`Error::Lock`] (a validation error, or `mode-mismatch` for a shared steal),
    /// [`Error::Store`].
    pub fn steal(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
    ) -> Result<Lease, Error> {
        let decided = self.request(key, steal_request(key, owner, ttl, *options))?;
        let granted = stolen(decided, |r| self.unexpected(r))?;
        Ok(self.lease(key, owner, ttl, granted.grant, granted.clock))
    }

    fn lease(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        grant: Grant,
        clock: Option<StoreClock>,
    ) -> Lease {
        let state = LeaseState::new(key, owner, grant, ttl, local_end(clock, grant.deadline));
        Lease::new(self.client.clone(), state)
    }

    /// Runs `work` while holding `key`, releasing when it returns.
    ///
    /// # Errors
    /// The errors of [`acquire`](Self::acquire); the release's error if the lease was lost
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

    /// The holder and queue of `key` at the store's time, `None` if free.
    ///
    /// # Errors
    /// [`Error::Lock`] for an invalid key, [`Error::Store`].
    pub fn inspect(&self, key: &str) -> Result<Option<KeyInfo>, Error> {
        let decided = self.engine().inspect(key, Instant::ZERO)?;
        decided.reply.map_err(Error::Lock)
    }

    /// The keys in use whose name starts with `prefix` and comes after `after` (`""` for the
    /// first page), in byte order, with every lease and waiter: at most `limit` (1 to
    /// [`QUERY_MAX`](crate::QUERY_MAX)), and the cursor of the next page if more match (Web
    /// Locks' `query()`, for dashboards). Reads the namespace's key list, then each candidate
    /// key in order until the page is full.
    ///
    /// ```
    /// use std::time::Duration;
    /// use lock_store::Locks;
    ///
    /// let locks = Locks::open("memory:", "query_doc")?;
    /// let _a = locks.try_acquire("jobs/a", "replica-1", Duration::from_secs(30))?;
    /// let _b = locks.try_acquire("jobs/b", "replica-2", Duration::from_secs(30))?;
    /// let page = locks.query("jobs/", "", 1)?;
    /// assert_eq!(page.keys[0].0, "jobs/a");
    /// let rest = locks.query("jobs/", page.next.as_deref().unwrap(), 1)?;
    /// assert_eq!((rest.keys[0].0.as_str(), rest.next), ("jobs/b", None));
    /// # Ok::<(), lock_store::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Lock`] with `query-limit`, or for a bad prefix or cursor (checked as keys, but
    /// may be empty); [`Error::Store`].
    pub fn query(&self, prefix: &str, after: &str, limit: usize) -> Result<QueryPage, Error> {
        let (page, _events) = self.engine().query(prefix, after, limit, Instant::ZERO)?;
        page.map_err(Error::Lock)
    }

    /// The keys of the namespace that have a record (held, waited for, or remembering a recent
    /// expiry), in byte order.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub fn keys(&self) -> Result<Vec<String>, Error> {
        Ok(self.engine().store_mut().keys()?)
    }

    /// The last fencing token the namespace issued.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub fn last_fence(&self) -> Result<Fence, Error> {
        Ok(self.engine().store_mut().last_fence()?)
    }
}

/// A waiter's nap of `nap`: until this caller's hand-off notice if `watcher` hears them, cut
/// short when `give_up` is given up (heard within 20 ms while listening for the notice).
///
/// # Errors
/// `Err(())` if the notice connection failed.
fn nap_or_notice(
    watcher: Option<&Subscription>,
    nap: Duration,
    give_up: Option<&GiveUp>,
) -> Result<(), ()> {
    /// A give-up is heard within this while a waiter listens for its notice.
    const SLICE: Duration = Duration::from_millis(20);
    match (watcher, give_up) {
        (None, None) => std::thread::sleep(nap),
        (None, Some(give_up)) => {
            give_up.sleep(nap);
        }
        (Some(watcher), None) => {
            watcher.wait(nap)?;
        }
        (Some(watcher), Some(give_up)) => {
            let until = std::time::Instant::now() + nap;
            loop {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() || give_up.is_given_up() || watcher.wait(left.min(SLICE))? {
                    break;
                }
            }
        }
    }
    Ok(())
}
