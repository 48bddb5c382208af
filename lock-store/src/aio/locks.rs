//! [`Locks`] for async code: the blocking [`crate::Locks`]'s API, awaited.

use crate::local::{LocalInstant, ProcessClock};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{AcquireOptions, Fence, KeyInfo, Limits, QueryPage, Response};
use tokio::runtime::Handle;
use tokio::sync::{oneshot, Notify};

use crate::aio::engine::AsyncEngine;
use crate::aio::lease::Lease;
use crate::async_store::AsyncStore;
use crate::decider::AnyDecider;
use crate::held::{local_end, LeaseState};
use crate::listen::{AsyncSubscription, Hub};
use crate::store::StoreError;
use lock_protocol::departures::{AttemptId, Departures};
use lock_protocol::kinds::OwnedOptions;
use lock_protocol::queue::{steal_request, stolen, Acquiring, Granted, Want};
use lock_protocol::Error;

struct Shared {
    engine: AsyncEngine<AnyDecider>,
    /// The notices of hand-offs, heard on one connection for all waiting tasks.
    hub: Arc<Hub>,
    /// The longest a waiter naps between two looks at its key without notices.
    poll: Duration,
    /// Where its tasks run (acquires, releases of dropped leases, keep-alives).
    runtime: Handle,
    /// The attempts that may still act on their keys (acquires, releases of dropped leases).
    departures: Mutex<Departures>,
    /// Woken when an attempt its caller left is over.
    departed: Notify,
    /// See [`Options::adopt_held`](crate::Options::adopt_held).
    adopt_held: bool,
}

/// Locks over one store namespace, for async code (tokio). Cheap to clone (clones share the
/// store's connections); share one per process: the waiting tasks of one `Locks` hear their
/// hand-offs on one listening connection, and no task holds a thread while it waits.
///
/// Every call is **cancel-safe**: dropping an [`acquire`](Self::acquire) future at any point
/// leaves nothing behind. The acquire runs in a task of its own, which never stops in the
/// middle of a store call; told that its caller is gone, it gives up (see
/// [`crate::Locks::acquire`]): it cancels its wait, and if the key was handed to it before the
/// cancel landed, releases that lease (its fence is spent; the next waiter is handed the key at
/// once). A new acquire of the same key by the same owner, right after a dropped one (a
/// `timeout` loop), waits until that give-up is over before it asks: it is never answered
/// "already waiting" for the wait its caller ended, and never handed the lease the give-up is
/// releasing. The same holds after a dropped [`Lease`].
#[derive(Clone)]
pub struct Locks {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Locks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locks")
            .field("store", &self.describe())
            .finish()
    }
}

impl Locks {
    /// Opens namespace `namespace` of the store at `url` with the default
    /// [`Options`](crate::Options) (the URLs of [`crate::Locks::open`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_store::Error> {
    /// use std::time::Duration;
    /// use lock_store::aio::Locks; // features = ["tokio", "redis"]
    ///
    /// let locks = Locks::open("memory:", "jobs").await?; // or "redis://127.0.0.1:6379"...
    /// let lease = locks.acquire("nightly-report", "replica-1", Duration::from_secs(30), Duration::from_secs(10)).await?;
    /// lease.keep_alive();
    /// tokio::select! {
    ///     () = async { /* write the report, passing lease.fence() along */ } => {}
    ///     lost = lease.lost() => eprintln!("lost {} (fence {})", lost.key, lost.fence.0),
    /// }
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::Locks::open`]; also [`Error::Store`] if called outside a tokio runtime.
    pub async fn open(url: &str, namespace: &str) -> Result<Self, Error> {
        crate::Options::new().open_async(url, namespace).await
    }

    /// Locks over `store` (must be called within a tokio runtime, whose tasks it uses).
    pub(crate) fn build(
        store: Arc<dyn AsyncStore>,
        decider: AnyDecider,
        limits: Limits,
        adopt_held: bool,
    ) -> Result<Self, Error> {
        let runtime = Handle::try_current().map_err(|_| {
            Error::Store(StoreError::Server {
                store: store.describe(),
                reason: "lock_store::aio::Locks must be opened within a tokio runtime".into(),
            })
        })?;
        Ok(Locks {
            shared: Arc::new(Shared {
                engine: AsyncEngine::new(store, decider, limits)?,
                hub: Arc::new(Hub::default()),
                poll: Duration::from_millis(50),
                runtime,
                departures: Mutex::new(Departures::default()),
                departed: Notify::new(),
                adopt_held,
            }),
        })
    }

    pub(crate) fn engine(&self) -> &AsyncEngine<AnyDecider> {
        &self.shared.engine
    }

    pub(crate) fn runtime(&self) -> &Handle {
        &self.shared.runtime
    }

    /// A decider's answer of the wrong kind for the request: the one place it becomes an error.
    pub(crate) fn unexpected(&self, answer: &Response) -> Error {
        Error::Store(StoreError::Server {
            store: self.describe(),
            reason: format!("unexpected answer {answer:?}"),
        })
    }

    /// The store and namespace, for messages (no password).
    #[must_use]
    pub fn describe(&self) -> String {
        self.shared.engine.store().describe()
    }

    /// Takes `key` for `owner` for `ttl` if nobody else holds it.
    ///
    /// # Errors
    /// As [`crate::Locks::try_acquire`].
    pub async fn try_acquire(&self, key: &str, owner: &str, ttl: Duration) -> Result<Lease, Error> {
        self.acquire(key, owner, ttl, Duration::ZERO).await
    }

    /// Takes `key` for `owner` for `ttl`, waiting up to `wait` in the key's FIFO queue (shared
    /// by every process and task on the store, blocking or async): the same waiting, renewing
    /// and looking as [`crate::Locks::acquire`], on timers and one shared listening connection
    /// instead of a thread.
    ///
    /// Cancel-safe (see [`Locks`]): the acquire runs as a task; dropping this future tells it
    /// to stop at its next step, and it then leaves nothing behind (it cancels its wait, or
    /// releases what it was handed).
    ///
    /// # Errors
    /// As [`crate::Locks::acquire`].
    pub async fn acquire(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, Error> {
        self.acquire_with(key, owner, ttl, wait, &AcquireOptions::EXCLUSIVE)
            .await
    }

    /// [`acquire`](Self::acquire) with the lock kinds (see [`crate::Locks::acquire_with`]).
    ///
    /// # Errors
    /// As [`crate::Locks::acquire_with`].
    pub async fn acquire_with(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        options: &AcquireOptions<'_>,
    ) -> Result<Lease, Error> {
        // An attempt of this owner on this key given up a moment ago (or a lease of it dropped)
        // may still be leaving the key: asking now would meet what it leaves.
        self.after_departures(key, owner).await;
        let id = self.departures().begin(key, owner, false);
        let mut caller = Attending {
            locks: self,
            key,
            id,
            attending: true,
        };
        // The answer; the task hears its caller leave when this receiver is dropped.
        let (answer, heard) = oneshot::channel::<Result<Lease, Error>>();
        let (locks, key, owner) = (self.clone(), key.to_owned(), owner.to_owned());
        let options = OwnedOptions::of(options);
        self.shared.runtime.spawn(async move {
            let attempt = Finishing {
                locks: &locks,
                key: &key,
                id,
            };
            let mut answer = answer;
            let result = locks
                .acquiring(&key, &owner, ttl, wait, options, &mut answer)
                .await;
            // Its caller left after the lease was decided and before it was heard: release it
            // here, still counted as this attempt (a new acquire by the owner waits for it).
            if let Err(Ok(lease)) = answer.send(result) {
                let _ = lease.release().await;
            }
            drop(attempt);
        });
        let answer = heard.await;
        caller.attending = false;
        answer.unwrap_or_else(|_| {
            Err(Error::Store(StoreError::Server {
                store: self.describe(),
                reason: "the acquire task failed".into(),
            }))
        })
    }

    /// The task of one acquire: [`Acquiring`] driven on this `Locks`, giving up (a transition of
    /// the protocol, which leaves nothing behind) when `answer`'s receiver is dropped.
    async fn acquiring(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        options: OwnedOptions,
        answer: &mut oneshot::Sender<Result<Lease, Error>>,
    ) -> Result<Lease, Error> {
        let engine = &self.shared.engine;
        let poll = self.shared.poll;
        let mut acquiring = Acquiring::with_options(key, owner, ttl, wait, poll, options);
        acquiring.adopt_held(self.shared.adopt_held);
        let mut watcher: Option<AsyncSubscription> = None;
        let mut watch_failed = false;
        let mut gave_up = false;
        let granted: Granted = loop {
            if !gave_up && answer.is_closed() {
                gave_up = true;
                // Nobody hears this error: the caller is gone.
                acquiring.give_up(Error::WaitTimedOut, LocalInstant::now())?;
            }
            let step = match acquiring.want() {
                Want::Ask => {
                    let decided = engine.request(key, |now| acquiring.request(now)).await;
                    match decided {
                        Ok(decided) => {
                            acquiring.asked(decided, |r| self.unexpected(r), LocalInstant::now())
                        }
                        Err(e) => acquiring.ask_failed(e),
                    }
                }
                Want::Renew => {
                    let decided = engine.renew_wait(key, owner, acquiring.until()).await;
                    acquiring.renewed(decided, |r| self.unexpected(r), LocalInstant::now())
                }
                Want::Leave => {
                    let decided = engine.request(key, |now| acquiring.request(now)).await;
                    acquiring.left(decided, LocalInstant::now())
                }
                Want::Look => acquiring.looked(engine.look(key).await, LocalInstant::now()),
                Want::Pause(pause) => {
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = answer.closed(), if !gave_up => {}
                    }
                    continue;
                }
                Want::Nap(nap) => {
                    let heard = match watcher.as_mut() {
                        Some(w) => tokio::select! {
                            heard = w.wait(nap) => heard.map(|_| ()),
                            () = answer.closed() => Ok(()),
                        },
                        None => {
                            tokio::select! {
                                () = tokio::time::sleep(nap) => {}
                                () = answer.closed() => {}
                            }
                            Ok(())
                        }
                    };
                    // The notice connection failed: look by ourselves from now on.
                    if heard.is_err() {
                        watcher = None;
                        acquiring.watching(false);
                    }
                    continue;
                }
            };
            match step {
                // Handed the key after its caller left: the give-up releases it.
                Ok(Some(_)) if answer.is_closed() => {}
                Ok(Some(granted)) => break granted,
                Ok(None) => {}
                // Over: an error that ended the wait while queued has left the key first.
                Err(e) => return Err(e),
            }
            if acquiring.in_line() && watcher.is_none() && !watch_failed {
                match self.subscribe(key, owner).await {
                    Some(w) => {
                        watcher = Some(w);
                        acquiring.watching(true);
                    }
                    None => watch_failed = true,
                }
            }
        };
        let state = LeaseState::new(
            key,
            owner,
            granted.grant,
            ttl,
            local_end(granted.clock, granted.grant.deadline),
        );
        Ok(Lease::new(self.clone(), state))
    }

    /// The attempts of this `Locks` that may still act on their keys.
    fn departures(&self) -> std::sync::MutexGuard<'_, Departures> {
        // Every change is one step on a map: nothing is left half-done by a panic.
        (self.shared.departures)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Completes once no attempt of `owner` on `key` that its caller left is still under way.
    async fn after_departures(&self, key: &str, owner: &str) {
        loop {
            let departed = self.shared.departed.notified();
            tokio::pin!(departed);
            // Registered before the check: a wake-up between the two is not lost.
            departed.as_mut().enable();
            if !self.departures().must_wait(key, owner) {
                return;
            }
            departed.await;
        }
    }

    /// The release of a dropped lease of `owner` on `key` begins: a new acquire by the same
    /// owner waits for it ([`Locks::released_dropped`] when it is over).
    pub(crate) fn releasing_dropped(&self, key: &str, owner: &str) -> AttemptId {
        self.departures().begin(key, owner, true)
    }

    /// Attempt `id` is over (see [`Locks::releasing_dropped`]).
    pub(crate) fn released_dropped(&self, key: &str, id: AttemptId) {
        if self.departures().finish(key, id) {
            self.shared.departed.notify_waiters();
        }
    }

    /// Takes `key` now whatever its holders (see [`crate::Locks::steal`]).
    ///
    /// # Errors
    /// As [`crate::Locks::steal`].
    pub async fn steal(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
    ) -> Result<Lease, Error> {
        let steal = steal_request(key, owner, ttl, *options);
        let decided = self.shared.engine.request(key, steal).await?;
        let granted = stolen(decided, |r| self.unexpected(r))?;
        let end = local_end(granted.clock, granted.grant.deadline);
        let state = LeaseState::new(key, owner, granted.grant, ttl, end);
        Ok(Lease::new(self.clone(), state))
    }

    /// Subscribes to the notice of `key`'s hand-off to `owner` (`None`: the store cannot
    /// notify, or listening failed: look by ourselves). Opening the listening connection
    /// blocks, so it runs on a blocking thread.
    async fn subscribe(&self, key: &str, owner: &str) -> Option<AsyncSubscription> {
        let open = self.shared.engine.store().watcher().await.ok()?;
        let (hub, key, owner) = (
            Arc::clone(&self.shared.hub),
            key.to_owned(),
            owner.to_owned(),
        );
        let subscribed = tokio::task::spawn_blocking(move || {
            hub.subscribe_async(&key, &owner, || open.map(|open| open()).transpose())
        });
        subscribed.await.ok()?.ok()?
    }

    /// Runs `work` while holding `key`, releasing when it returns. If the lease is lost first
    /// (see [`Lease::lost`]), `work` is dropped at its next await (cancelled) and the answer is
    /// the loss: [`Error::Lock`] with `expired` (or the store's refusal).
    ///
    /// # Errors
    /// The errors of [`acquire`](Self::acquire); the loss; the release's error.
    pub async fn with_lock<R>(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        work: impl AsyncFnOnce(&Lease) -> R,
    ) -> Result<R, Error> {
        let lease = self.acquire(key, owner, ttl, wait).await?;
        let done = {
            let work = work(&lease);
            tokio::pin!(work);
            tokio::select! {
                value = &mut work => Ok(value),
                lost = lease.lost() => Err(lost),
            }
        };
        match done {
            Ok(value) => {
                lease.release().await?;
                Ok(value)
            }
            Err(lost) => {
                let deadline = lease.deadline();
                let _ = lease.release().await;
                Err(Error::Lock(
                    lost.refusal
                        .unwrap_or(lock_core::LockError::Expired { deadline }),
                ))
            }
        }
    }

    /// The holder and queue of `key` at the store's time, `None` if free.
    ///
    /// # Errors
    /// [`Error::Lock`] for an invalid key, [`Error::Store`].
    pub async fn inspect(&self, key: &str) -> Result<Option<KeyInfo>, Error> {
        let decided = self.shared.engine.inspect(key).await?;
        decided.reply.map_err(Error::Lock)
    }

    /// The keys in use with a prefix, a page at a time (see [`crate::Locks::query`]).
    ///
    /// # Errors
    /// As [`crate::Locks::query`].
    pub async fn query(&self, prefix: &str, after: &str, limit: usize) -> Result<QueryPage, Error> {
        let engine = &self.shared.engine;
        engine.limits().check_query(prefix, after, limit)?;
        let mut names = engine.store().keys().await?;
        names.retain(|name| QueryPage::matches(prefix, after, name));
        names.sort_unstable();
        let mut in_use = Vec::new();
        for key in names {
            if in_use.len() > limit {
                break;
            }
            if let Some(info) = engine.inspect(&key).await?.reply? {
                in_use.push((key, info));
            }
        }
        Ok(QueryPage::from_ordered(in_use, limit))
    }

    /// The keys of the namespace that have a record, in byte order.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn keys(&self) -> Result<Vec<String>, Error> {
        Ok(self.shared.engine.store().keys().await?)
    }

    /// The last fencing token the namespace issued.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn last_fence(&self) -> Result<Fence, Error> {
        Ok(self.shared.engine.store().last_fence().await?)
    }
}

/// The caller's side of an acquire: if it is dropped while the answer is still due (its future
/// dropped), its attempt is marked as left, so that a new acquire by the same owner waits for
/// the attempt's give-up.
struct Attending<'a> {
    locks: &'a Locks,
    key: &'a str,
    id: AttemptId,
    attending: bool,
}

impl Drop for Attending<'_> {
    fn drop(&mut self) {
        if self.attending {
            (self.locks.departures()).leave(self.key, self.id);
        }
    }
}

/// The task's side of an acquire: its attempt is over when this is dropped (also if the task
/// panics or its runtime shuts down).
struct Finishing<'a> {
    locks: &'a Locks,
    key: &'a str,
    id: AttemptId,
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        self.locks.released_dropped(self.key, self.id);
    }
}
