//! Leader election over a store: [`Election`] drives the core's campaign recipe
//! ([`lock_core::election::Campaign`]) with a [`Locks`], one key per election, for replicas on
//! many machines (`docs/election.md`). It decides nothing itself: when to extend, when the stop
//! signal fires and when to campaign again are the recipe's; what a term is (a lease, its fence)
//! is the lock's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use lock_core::election::{Action, Campaign};
pub use lock_core::election::{BadCampaign, CampaignOptions, StopReason};
use lock_core::{AcquireOptions, Fence, Instant, KeyInfo};

use crate::lease::Lease;
use crate::local::LocalInstant;
use crate::locks::{Error, Locks};

/// A campaign waits in line this long at a time, then asks again at once (a shut-down asked
/// meanwhile is heard within it).
const WAIT_CHUNK: Duration = Duration::from_secs(5);

/// The current leader of an election, as anyone reads it ([`Locks::leader`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// The leader's candidate id.
    pub candidate: String,
    /// Its term's fencing token: a resource that checks it refuses a deposed leader.
    pub fence: Fence,
    /// Its lease's deadline in the store's time (it extends it while it leads).
    pub deadline: Instant,
    /// What it campaigned with (an address, say; empty for none).
    pub metadata: String,
}

impl Leader {
    /// The leader of an election's key state (its one live lease).
    #[must_use]
    pub fn of(info: &KeyInfo) -> Option<Leader> {
        (info.holders.iter())
            .find(|h| h.ended.is_none())
            .map(|h| Leader {
                candidate: h.owner.clone(),
                fence: h.fence,
                deadline: h.deadline,
                metadata: h.metadata.clone(),
            })
    }
}

impl Locks {
    /// The current leader of the election `name`, if any (one read; see [`Election`]).
    ///
    /// # Errors
    /// [`Error::Lock`] for a bad name, [`Error::Store`].
    pub fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        Ok(self.inspect(name)?.as_ref().and_then(Leader::of))
    }
}

/// A term, as the leader's body sees it: its fence and its stop signal.
#[derive(Clone, Debug)]
pub struct Term {
    fence: Fence,
    signal: Arc<Signal>,
    /// Told when the body returns.
    kick: Kick,
}

#[derive(Debug, Default)]
struct Signal {
    stopped: Mutex<Option<StopReason>>,
    wake: Condvar,
}

impl Term {
    /// The term's fencing token: pass it with every write, so that a resource that checks it
    /// refuses this leader once another has begun.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.fence
    }

    /// Why the stop signal fired, once it has: stop working and return.
    #[must_use]
    pub fn stopped(&self) -> Option<StopReason> {
        *self
            .signal
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits up to `timeout` for the stop signal; answers why it fired, or `None` if it has
    /// not.
    #[must_use]
    pub fn wait_stop(&self, timeout: Duration) -> Option<StopReason> {
        let stopped = self
            .signal
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (stopped, _) = self
            .signal
            .wake
            .wait_timeout_while(stopped, timeout, |s| s.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        *stopped
    }

    fn fire(&self, reason: StopReason) {
        let mut stopped = self
            .signal
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        stopped.get_or_insert(reason);
        self.signal.wake.notify_all();
    }
}

/// Asks a running [`Election::run`] to resign its term or to shut down, from any thread.
#[derive(Clone, Debug, Default)]
pub struct Control {
    resign: Arc<AtomicBool>,
    shut_down: Arc<AtomicBool>,
    kick: Kick,
}

impl Control {
    /// Ends the current term (its stop signal fires; once the body returns the lease is
    /// released and the next candidate in line leads at once); the campaign goes on.
    pub fn resign(&self) {
        self.resign.store(true, Ordering::SeqCst);
        self.kick.kick();
    }

    /// Leaves the election: the current term ends as by [`resign`](Self::resign), and
    /// [`Election::run`] returns after it (within a few seconds when not leading).
    pub fn shut_down(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
        self.kick.kick();
    }
}

/// Wakes the driver's loop at once (a control asked, a body returned, an extension answered)
/// instead of at its next look.
#[derive(Clone, Debug, Default)]
struct Kick(Arc<(Mutex<bool>, Condvar)>);

impl Kick {
    fn kick(&self) {
        let (kicked, wake) = &*self.0;
        *kicked.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
    }

    /// Waits up to `timeout` for a kick (and takes it).
    fn wait(&self, timeout: Duration) {
        let (kicked, wake) = &*self.0;
        let guard = kicked.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut guard, _) = wake
            .wait_timeout_while(guard, timeout, |k| !*k)
            .unwrap_or_else(PoisonError::into_inner);
        *guard = false;
    }
}

/// One candidate of the election `name` (see `docs/election.md`).
///
/// ```no_run
/// use std::time::Duration;
/// use lock_store::election::{CampaignOptions, Election};
/// use lock_store::Locks;
///
/// let locks = Locks::open("redis://127.0.0.1:6379", "jobs")?;
/// let election = Election::new(&locks, "scheduler", "replica-1", CampaignOptions::new(Duration::from_secs(15).into()))
///     .expect("good options")
///     .metadata("10.0.0.7:8080");
/// let control = election.control(); // resign() or shut_down() from another thread
/// # control.shut_down();
/// election.run(|term| {
///     while term.wait_stop(Duration::from_secs(1)).is_none() {
///         // lead: schedule jobs, writing with term.fence()
///     }
/// })?;
/// # Ok::<(), lock_store::Error>(())
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

    /// Campaigns until shut down (or for one term with
    /// [`once`](CampaignOptions::once)), running `body` for each term on a thread of its own,
    /// with the term's fence and stop signal (a body that panics ends the campaign with its
    /// panic, after its lease is released). The lease is released once the body returns; a
    /// body that does not return within the grace after its stop signal has its lease released
    /// anyway (a thread cannot be killed: its late writes are refused by fence), and the next
    /// campaign waits for it. Answers how many terms it led.
    ///
    /// # Errors
    /// [`Error::Lock`] for a bad name or candidate id, and a store error that is not a lost
    /// connection while it campaigns ([`Error::Store`]); a store that cannot be reached only
    /// delays the campaign.
    pub fn run<F>(&self, mut body: F) -> Result<u64, Error>
    where
        F: FnMut(&Term) + Send,
    {
        std::thread::scope(|scope| {
            let mut threads = ThreadBody {
                scope,
                body: Some(&mut body),
                running: None,
            };
            self.run_with(&mut threads)
        })
    }

    /// [`run`](Self::run) with a [`Body`] of the caller's (a process, say: `lockstore elect`).
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub fn run_with(&self, body: &mut impl Body) -> Result<u64, Error> {
        let base = LocalInstant::now();
        let at = |t: LocalInstant| Instant(millis(t.saturating_duration_since(base)));
        let mut campaign = self.campaign.clone();
        let options = AcquireOptions::default().metadata(&self.metadata);
        let ttl = Duration::from_millis(campaign.options().ttl.0);
        let mut lease: Option<Lease> = None;
        let mut term: Option<Term> = None;
        let mut running = false;
        // The extension out, on a thread of its own: the stop signal keeps its time even when
        // the store does not answer.
        let mut extending: Option<mpsc::Receiver<(Fence, Result<LocalInstant, Error>)>> = None;
        let result = loop {
            let now = LocalInstant::now();
            if let Some(rx) = extending.as_ref() {
                match rx.try_recv() {
                    Ok((fence, answer)) => {
                        extending = None;
                        let ours = campaign.term() == Some(fence);
                        match answer {
                            _ if !ours => {}
                            Ok(end) => campaign.handle_extended(at(end), at(now)),
                            Err(Error::Lock(_)) => campaign.handle_lost(at(now)),
                            Err(_) => campaign.handle_extend_failed(at(now)),
                        }
                    }
                    Err(mpsc::TryRecvError::Empty) => {}
                    Err(mpsc::TryRecvError::Disconnected) => extending = None,
                }
            }
            if self.control.shut_down.load(Ordering::SeqCst) {
                campaign.shut_down(at(now));
            }
            if self.control.resign.swap(false, Ordering::SeqCst) {
                campaign.resign(at(now));
            }
            if running && body.returned() {
                running = false;
                campaign.handle_body_returned(at(now));
            }
            let Some(action) = campaign.poll_action(at(now)) else {
                // Wake at the recipe's next instant, when kicked, or after 10 ms to look at a
                // body that cannot kick (a process).
                let next = campaign.poll_timeout().map_or(u64::MAX, |t| t.0);
                let sleep = next.saturating_sub(at(LocalInstant::now()).0).clamp(1, 10);
                self.control.kick.wait(Duration::from_millis(sleep));
                continue;
            };
            match action {
                Action::Campaign => {
                    // A body abandoned in the last term is waited for first.
                    body.wait();
                    match self.locks.acquire_with(
                        &self.name,
                        &self.candidate,
                        ttl,
                        WAIT_CHUNK,
                        &options,
                    ) {
                        Ok(l) => {
                            let end = at(l.local_end());
                            campaign.handle_granted(l.fence(), end, at(LocalInstant::now()));
                            lease = Some(l);
                        }
                        Err(Error::WaitTimedOut | Error::Store(_)) => {
                            campaign.handle_not_granted(at(LocalInstant::now()));
                        }
                        Err(e) => break Err(e),
                    }
                }
                Action::Start { fence } => {
                    let t = Term {
                        fence,
                        signal: Arc::default(),
                        kick: self.control.kick.clone(),
                    };
                    body.start(&t);
                    term = Some(t);
                    running = true;
                }
                Action::Extend { fence } => {
                    let Some(l) = lease.as_ref() else {
                        continue;
                    };
                    let (tx, rx) = mpsc::channel();
                    let extension = l.extension(ttl);
                    let kick = self.control.kick.clone();
                    std::thread::spawn(move || {
                        let _ = tx.send((fence, extension()));
                        kick.kick();
                    });
                    extending = Some(rx);
                }
                Action::Stop { reason, .. } => {
                    if let Some(t) = term.as_ref() {
                        t.fire(reason);
                        body.stop(t, reason);
                    }
                }
                Action::Abandon { .. } => {
                    running = false;
                    body.abandon();
                }
                Action::Release { .. } => {
                    if let Some(l) = lease.take() {
                        let _ = l.release();
                    }
                    campaign.handle_released(at(LocalInstant::now()));
                }
                Action::Done => break Ok(campaign.terms()),
            }
        };
        body.wait();
        if let Some(l) = lease.take() {
            let _ = l.release();
        }
        result
    }
}

/// What a term runs: the leader's body, started for each term and told of its stop signal.
pub trait Body {
    /// Start the body of `term`.
    fn start(&mut self, term: &Term);
    /// The term's stop signal fired (its [`Term`] already says so): a process is sent
    /// `SIGTERM`, say.
    fn stop(&mut self, term: &Term, reason: StopReason);
    /// Whether the body has returned (asked often while it runs).
    fn returned(&mut self) -> bool;
    /// It did not return within the grace after its stop signal: stop it if it can be (a
    /// process gets `SIGKILL`).
    fn abandon(&mut self);
    /// Wait until a body that still runs (abandoned) has returned.
    fn wait(&mut self);
}

/// The body of [`Election::run`]: a closure run on a scoped thread per term.
struct ThreadBody<'scope, 'env, F> {
    scope: &'scope std::thread::Scope<'scope, 'env>,
    body: Option<&'env mut F>,
    running: Option<std::thread::ScopedJoinHandle<'scope, &'env mut F>>,
}

impl<'scope, 'env, F: FnMut(&Term) + Send> Body for ThreadBody<'scope, 'env, F> {
    fn start(&mut self, term: &Term) {
        // The recipe starts a term only after the last body returned.
        if let Some(f) = self.body.take() {
            let t = term.clone();
            self.running = Some(self.scope.spawn(move || {
                f(&t);
                t.kick.kick();
                f
            }));
        }
    }

    fn stop(&mut self, _term: &Term, _reason: StopReason) {}

    fn returned(&mut self) -> bool {
        if self.running.as_ref().is_some_and(|h| !h.is_finished()) {
            return false;
        }
        self.wait();
        true
    }

    fn abandon(&mut self) {}

    fn wait(&mut self) {
        if let Some(h) = self.running.take() {
            match h.join() {
                Ok(f) => self.body = Some(f),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    }
}

/// The examples of `docs/election.md`, compiled as doctests so that they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../docs/election.md")]
struct ElectionDocDoctests;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
