//! Leader election in async code: [`Election`] drives the core's campaign recipe
//! ([`lock_core::election::Campaign`]) with an [`aio::Locks`](Locks), the body of each term a
//! future (`docs/election.md`). The same recipe as the blocking
//! [`crate::election::Election`]; what differs is only how it waits: one `select!` over the
//! body, the extension in flight, the control and the recipe's next instant.
//!
//! A future can be cancelled, where a thread cannot: a body that does not return within the
//! grace after its stop signal is **dropped**, and a shut-down asked while the campaign waits in
//! line drops its acquire (which leaves nothing behind).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_core::election::{Action, Campaign};
pub use lock_core::election::{BadCampaign, CampaignOptions, Refusal, StopReason};
use lock_core::{AcquireOptions, Fence, Instant};
pub use lock_election::Leader;
use tokio::sync::{watch, Notify};

use crate::aio::{Lease, Locks};
use crate::local::{LocalInstant, ProcessClock};
use lock_protocol::Error;

/// A campaign waits in line this long at a time, then asks again at once (a shut-down is
/// heard at once: it drops the wait).
const WAIT_CHUNK: Duration = Duration::from_secs(5);

impl Locks {
    /// The current leader of the election `name`, if any (one read; see [`Election`]).
    ///
    /// # Errors
    /// [`Error::Lock`] for a bad name, [`Error::Store`].
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        Ok(self.inspect(name).await?.as_ref().and_then(Leader::of))
    }
}

/// A term, as the leader's body sees it: its fence and its stop signal.
#[derive(Clone, Debug)]
pub struct Term {
    fence: Fence,
    stop: watch::Receiver<Option<StopReason>>,
}

impl Term {
    /// The term's fencing token: pass it with every write, so that a resource that checks it
    /// refuses this leader once another has begun.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.fence
    }

    /// Why the stop signal fired, once it has.
    #[must_use]
    pub fn stopped(&self) -> Option<StopReason> {
        *self.stop.borrow()
    }

    /// Completes when the stop signal fires, with why: race the work against it
    /// (`tokio::select!`), then return.
    pub async fn stop(&self) -> StopReason {
        let mut stop = self.stop.clone();
        loop {
            if let Some(reason) = *stop.borrow_and_update() {
                return reason;
            }
            if stop.changed().await.is_err() {
                // The campaign is gone: its term is over.
                return (*stop.borrow()).unwrap_or(StopReason::ShutDown);
            }
        }
    }
}

/// Asks a running [`Election::run`] to resign its term or to shut down, from any task or
/// thread.
#[derive(Clone, Debug, Default)]
pub struct Control {
    resign: Arc<AtomicBool>,
    shut_down: Arc<AtomicBool>,
    wake: Arc<Notify>,
}

impl Control {
    /// Ends the current term (its stop signal fires; once the body returns the lease is
    /// released and the next candidate in line leads at once); the campaign goes on.
    pub fn resign(&self) {
        self.resign.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Leaves the election: the current term ends as by [`resign`](Self::resign), and
    /// [`Election::run`] returns after it (at once when waiting in line).
    pub fn shut_down(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }
}

/// One candidate of the election `name`, in async code (see `docs/election.md`).
///
/// ```no_run
/// use std::time::Duration;
/// use lock_store::aio::election::{CampaignOptions, Election};
/// use lock_store::aio::Locks;
///
/// # async fn lead() -> Result<(), lock_store::Error> {
/// let locks = Locks::open("redis://127.0.0.1:6379", "jobs").await?;
/// let options = CampaignOptions::new(Duration::from_secs(15).into());
/// let election = Election::new(&locks, "scheduler", "replica-1", options).expect("good options");
/// let control = election.control(); // resign() or shut_down() from anywhere
/// # control.shut_down();
/// election
///     .run(|term| async move {
///         let mut tick = tokio::time::interval(Duration::from_secs(1));
///         loop {
///             tokio::select! {
///                 _ = term.stop() => return,
///                 _ = tick.tick() => { /* schedule jobs, writing with term.fence() */ }
///             }
///         }
///     })
///     .await?;
/// # Ok(())
/// # }
/// ```
pub struct Election<'l> {
    locks: &'l Locks,
    name: String,
    candidate: String,
    /// The recipe as it starts (each run drives a copy).
    campaign: Campaign,
    metadata: String,
    control: Control,
}

type Extension = Pin<Box<dyn Future<Output = (Fence, Result<LocalInstant, Error>)> + Send>>;

impl<'l> Election<'l> {
    /// A candidate `candidate` of the election `name` on `locks`.
    ///
    /// # Errors
    /// The options' [`BadCampaign`].
    pub fn new(
        locks: &'l Locks,
        name: &str,
        candidate: &str,
        options: CampaignOptions,
    ) -> Result<Self, BadCampaign> {
        Ok(Election {
            locks,
            name: name.to_owned(),
            candidate: candidate.to_owned(),
            campaign: Campaign::new(options)?,
            metadata: String::new(),
            control: Control::default(),
        })
    }

    /// With metadata every reader of the leader sees (an address, say).
    #[must_use]
    pub fn metadata(mut self, metadata: &str) -> Self {
        metadata.clone_into(&mut self.metadata);
        self
    }

    /// Its control (resign, shut down).
    #[must_use]
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// Campaigns until shut down (or for one term with [`once`](CampaignOptions::once)),
    /// running the future `body(term)` for each term. The lease is released once the body
    /// returns; a body that has not returned within the grace after its stop signal is dropped
    /// (cancelled) and its lease released. Answers how many terms it led.
    ///
    /// Dropping this future mid-term drops the body and the lease (released by its drop).
    ///
    /// # Errors
    /// [`Error::Lock`] for a bad name, candidate id or metadata; a store that cannot be
    /// reached only delays the campaign.
    pub async fn run<F, Fut>(&self, mut body: F) -> Result<u64, Error>
    where
        F: FnMut(Term) -> Fut,
        Fut: Future<Output = ()>,
    {
        let base = LocalInstant::now();
        let at = |t: LocalInstant| Instant(millis(t.saturating_duration_since(base)));
        let now = || at(LocalInstant::now());
        let mut campaign = self.campaign.clone();
        let options = AcquireOptions::default().metadata(&self.metadata);
        let ttl = Duration::from_millis(campaign.options().ttl.0);
        let control = &self.control;
        let mut lease: Option<Lease> = None;
        let mut stop: Option<watch::Sender<Option<StopReason>>> = None;
        let mut running: Option<Pin<Box<Fut>>> = None;
        let mut extending: Option<Extension> = None;
        loop {
            if control.shut_down.load(Ordering::SeqCst) {
                campaign.shut_down(now());
            }
            if control.resign.swap(false, Ordering::SeqCst) {
                campaign.resign(now());
            }
            while let Some(action) = campaign.poll_action(now()) {
                match action {
                    Action::Campaign => {
                        let acquire = self.locks.acquire_with(
                            &self.name,
                            &self.candidate,
                            ttl,
                            WAIT_CHUNK,
                            &options,
                        );
                        let answer = tokio::select! {
                            answer = acquire => Some(answer),
                            () = shut_down(control) => None,
                        };
                        match answer {
                            Some(Ok(l)) => {
                                campaign.handle_granted(l.fence(), at(l.local_end()), now());
                                lease = Some(l);
                            }
                            Some(Err(e)) => {
                                if campaign.handle_refused(e.refusal(), now()).is_err() {
                                    return Err(e);
                                }
                            }
                            // Shut down in line: the dropped acquire left nothing behind; the
                            // wait ended, and the campaign with it.
                            None => {
                                campaign.shut_down(now());
                                let _ = campaign.handle_refused(Refusal::WaitTimedOut, now());
                            }
                        }
                    }
                    Action::Start { fence } => {
                        let (tx, rx) = watch::channel(None);
                        running = Some(Box::pin(body(Term { fence, stop: rx })));
                        stop = Some(tx);
                    }
                    Action::Extend { fence } => {
                        if let Some(l) = lease.as_ref() {
                            let extension = l.extension(ttl);
                            extending = Some(Box::pin(async move { (fence, extension.await) }));
                        }
                    }
                    Action::Stop { reason, .. } => {
                        if let Some(tx) = stop.as_ref() {
                            tx.send_replace(Some(reason));
                        }
                    }
                    Action::Abandon { .. } => running = None,
                    Action::Release { .. } => {
                        running = None;
                        stop = None;
                        // An extension still in flight is dropped first: nothing polls it while
                        // the release is awaited here, and it holds the key's turn, which the
                        // release waits for (a silent store path deadlocked the two for good).
                        extending = None;
                        if let Some(l) = lease.take() {
                            let _ = l.release().await;
                        }
                        campaign.handle_released(now());
                    }
                    Action::Done => return Ok(campaign.terms()),
                }
            }
            let next = campaign.poll_timeout().map_or(u64::MAX, |t| t.0);
            let sleep = Duration::from_millis(next.saturating_sub(now().0).max(1));
            tokio::select! {
                () = async { running.as_mut().expect("guarded").await }, if running.is_some() => {
                    running = None;
                    campaign.handle_body_returned(now());
                }
                (fence, answer) = async { extending.as_mut().expect("guarded").await }, if extending.is_some() => {
                    extending = None;
                    if campaign.term() == Some(fence) {
                        match answer {
                            Ok(end) => campaign.handle_extended(at(end), now()),
                            Err(Error::Lock(_)) => campaign.handle_lost(now()),
                            Err(_) => campaign.handle_extend_failed(now()),
                        }
                    }
                }
                () = control.wake.notified() => {}
                () = tokio::time::sleep(sleep) => {}
            }
        }
    }
}

/// Completes once a shut-down is asked.
async fn shut_down(control: &Control) {
    while !control.shut_down.load(Ordering::SeqCst) {
        control.wake.notified().await;
    }
    // Leave a wake-up for the driver's loop too.
    control.wake.notify_one();
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
