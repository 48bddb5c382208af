//! [`Locks`] for async code: the blocking [`crate::Locks`]'s API, awaited.

use crate::local::LocalInstant;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{AcquireOptions, Fence, KeyInfo, Limits, QueryPage, Request, Response};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::aio::engine::AsyncEngine;
use crate::aio::lease::Lease;
use crate::aio::store::AsyncStore;
use crate::decider::AnyDecider;
use crate::kinds::OwnedOptions;
use crate::lease::{local_end, LeaseState};
use crate::listen::{AsyncSubscription, Hub};
use crate::locks::Error;
use crate::queue::{steal_request, stolen, Acquiring, Granted, Want};
use crate::store::StoreError;

struct Shared {
    engine: AsyncEngine<AnyDecider>,
    /// The notices of hand-offs, heard on one connection for all waiting tasks.
    hub: Arc<Hub>,
    /// The longest a waiter naps between two looks at its key without notices.
    poll: Duration,
    /// Where its tasks run (acquires, releases of dropped leases, keep-alives).
    runtime: Handle,
}

/// Locks over one store namespace, for async code (tokio). Cheap to clone (clones share the
/// store's connections); share one per process: the waiting tasks of one `Locks` hear their
/// hand-offs on one listening connection, and no task holds a thread while it waits.
///
/// Every call is **cancel-safe**: dropping an [`acquire`](Self::acquire) future at any point
/// leaves nothing behind. The acquire runs in a task of its own, which never stops in the
/// middle of a store call; told that its caller is gone, it leaves the key's queue, and a grant
/// it was handed meanwhile is released, as if the acquire had returned a lease that was dropped
/// at once.
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
        // Never sent: dropped with this future, which the task sees as its caller gone.
        let (caller, gone) = oneshot::channel::<()>();
        let (locks, key, owner) = (self.clone(), key.to_owned(), owner.to_owned());
        let options = OwnedOptions::of(options);
        let task = self
            .shared
            .runtime
            .spawn(async move { (locks.acquiring(&key, &owner, ttl, wait, options, gone)).await });
        let answer = task.await;
        drop(caller);
        answer.unwrap_or_else(|e| {
            Err(Error::Store(StoreError::Server {
                store: self.describe(),
                reason: format!("the acquire task failed: {e}"),
            }))
        })
    }

    /// The task of one acquire: [`Acquiring`] driven on this `Locks`, stopping (and cleaning
    /// up) when `gone` says the caller left.
    async fn acquiring(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        options: OwnedOptions,
        gone: oneshot::Receiver<()>,
    ) -> Result<Lease, Error> {
        let engine = &self.shared.engine;
        let poll = self.shared.poll;
        let mut acquiring = Acquiring::with_options(key, owner, ttl, wait, poll, options);
        let mut watcher: Option<AsyncSubscription> = None;
        let mut watch_failed = false;
        let mut gone = Caller(Some(gone));
        let granted: Granted = loop {
            if gone.left() {
                self.abandon(key, owner).await;
                return Err(Error::WaitTimedOut);
            }
            let step = match acquiring.want() {
                Want::Ask => {
                    let decided = engine.request(key, |now| acquiring.request(now)).await;
                    match decided {
                        Ok(decided) => {
                            acquiring.asked(decided, |r| self.unexpected(r), LocalInstant::now())
                        }
                        Err(e) => {
                            if gone.left() {
                                self.abandon(key, owner).await;
                            }
                            return Err(Error::Store(e));
                        }
                    }
                }
                Want::Renew => {
                    let decided = engine.renew_wait(key, owner, acquiring.until()).await;
                    acquiring.renewed(decided, |r| self.unexpected(r), LocalInstant::now())
                }
                Want::Look => acquiring.looked(engine.look(key).await, LocalInstant::now()),
                Want::Pause(pause) => {
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = gone.leaving() => {}
                    }
                    continue;
                }
                Want::Nap(nap) => {
                    let heard = match watcher.as_mut() {
                        Some(w) => tokio::select! {
                            heard = w.wait(nap) => heard.map(|_| ()),
                            () = gone.leaving() => Ok(()),
                        },
                        None => {
                            tokio::select! {
                                () = tokio::time::sleep(nap) => {}
                                () = gone.leaving() => {}
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
                Ok(Some(granted)) => break granted,
                Ok(None) => {}
                Err(e) => {
                    if acquiring.in_line() {
                        let cancel = |now| Request::CancelWait { key, owner, now };
                        let _ = engine.request(key, cancel).await;
                    }
                    return Err(e);
                }
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
        let lease = Lease::new(self.clone(), state);
        if gone.left() {
            let _ = lease.release().await;
            return Err(Error::WaitTimedOut);
        }
        Ok(lease)
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

    /// Leaves nothing of an acquire whose caller is gone: if `owner` holds `key`, releases it;
    /// if it waits for it, leaves the queue. Best effort: a store that cannot be reached lets
    /// the lease end at its deadline and the wait within [`WAIT_ALIVE`](crate::WAIT_ALIVE).
    async fn abandon(&self, key: &str, owner: &str) {
        let engine = &self.shared.engine;
        let Ok(Ok(Some(info))) = engine.inspect(key).await.map(|d| d.reply) else {
            return;
        };
        let held = (info.holders.iter()).find(|h| h.owner == owner && h.ended.is_none());
        if let Some(fence) = held.map(|h| h.fence) {
            let release = |now| Request::Release {
                key,
                owner,
                fence,
                now,
            };
            let _ = engine.request(key, release).await;
        } else if info.waiters.iter().any(|w| w.owner == owner) {
            let _ = engine
                .request(key, |now| Request::CancelWait { key, owner, now })
                .await;
        }
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

/// The caller of an acquire, which the acquire's task hears leave (its future dropped).
struct Caller(Option<oneshot::Receiver<()>>);

impl Caller {
    /// Whether the caller left.
    fn left(&mut self) -> bool {
        let closed = match &mut self.0 {
            None => return true,
            Some(rx) => matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed)),
        };
        if closed {
            self.0 = None;
        }
        closed
    }

    /// Completes when the caller leaves (at once if it has).
    async fn leaving(&mut self) {
        if let Some(rx) = &mut self.0 {
            let _ = rx.await;
            self.0 = None;
        }
    }
}
