//! Leader election over a store: [`Election`] drives the core's campaign recipe
//! ([`lock_core::election::Campaign`]) with a [`Locks`], one key per election, for replicas on
//! many machines (`docs/election.md`). It decides nothing itself: when to extend, when the stop
//! signal fires and when to campaign again are the recipe's; what a term is (a lease, its fence)
//! is the lock's.

use std::time::Duration;

use lock_core::election::Campaign;
pub use lock_core::election::{BadCampaign, CampaignOptions, StopReason};
use lock_core::{AcquireOptions, Instant};
use lock_election::{Asked, Candidacy, Extended};
pub use lock_election::{Body, Control, Leader, Term};

use crate::lease::Lease;
use crate::local::LocalInstant;
use crate::locks::{Error, Locks};

impl Locks {
    /// The current leader of the election `name`, if any (one read; see [`Election`]).
    ///
    /// # Errors
    /// [`Error::Lock`] for a bad name, [`Error::Store`].
    pub fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        Ok(self.inspect(name)?.as_ref().and_then(Leader::of))
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
    /// [`Error::Lock`] for a bad name, candidate id or metadata; a store that cannot be
    /// reached only delays the campaign.
    pub fn run<F>(&self, body: F) -> Result<u64, Error>
    where
        F: FnMut(&Term) + Send,
    {
        lock_election::run(
            &self.candidacy(),
            self.campaign.clone(),
            &self.control,
            body,
        )
    }

    /// [`run`](Self::run) with a [`Body`] of the caller's (a process, say: `lockstore elect`).
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub fn run_with(&self, body: &mut impl Body) -> Result<u64, Error> {
        lock_election::run_with(
            &self.candidacy(),
            self.campaign.clone(),
            &self.control,
            body,
        )
    }

    fn candidacy(&self) -> StoreCandidacy<'_> {
        StoreCandidacy {
            locks: self.locks,
            name: &self.name,
            candidate: &self.candidate,
            options: AcquireOptions::default().metadata(&self.metadata),
            base: LocalInstant::now(),
        }
    }
}

/// The election's key on a store, as the shared driver sees it; instants on this process's
/// monotonic clock, from the run's start.
struct StoreCandidacy<'a> {
    locks: &'a Locks,
    name: &'a str,
    candidate: &'a str,
    options: AcquireOptions<'a>,
    base: LocalInstant,
}

impl StoreCandidacy<'_> {
    fn at(base: LocalInstant, t: LocalInstant) -> Instant {
        Instant(millis(t.saturating_duration_since(base)))
    }
}

impl Candidacy for StoreCandidacy<'_> {
    type Lease = Lease;
    type Error = Error;

    fn now(&self) -> Instant {
        Self::at(self.base, LocalInstant::now())
    }

    fn campaign(&self, ttl: Duration, wait: Duration) -> Asked<Lease, Error> {
        match (self.locks).acquire_with(self.name, self.candidate, ttl, wait, &self.options) {
            Ok(lease) => Asked::Granted {
                fence: lease.fence(),
                end: Self::at(self.base, lease.local_end()),
                lease,
            },
            // A store that cannot be reached only delays the campaign.
            Err(Error::WaitTimedOut | Error::Store(_)) => Asked::NotGranted,
            Err(e) => Asked::Failed(e),
        }
    }

    fn extension(&self, lease: &Lease, ttl: Duration) -> Box<dyn FnOnce() -> Extended + Send> {
        let (extension, base) = (lease.extension(ttl), self.base);
        Box::new(move || match extension() {
            Ok(end) => Extended::Until(Self::at(base, end)),
            Err(Error::Lock(_)) => Extended::Lost,
            Err(_) => Extended::Failed,
        })
    }

    fn release(&self, lease: Lease) {
        let _ = lease.release();
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
