//! Leader election over a store: [`Election`] drives the core's campaign recipe
//! ([`lock_core::election::Campaign`]) with a [`Locks`], one key per election, for replicas on
//! many machines (`docs/election.md`). It decides nothing itself: when to extend, when the stop
//! signal fires and when to campaign again (after which [`Refusal`]) are the recipe's; what a
//! term is (a lease, its fence) is the lock's.

use std::time::Duration;

pub use lock_core::election::{BadCampaign, CampaignOptions, Refusal, StopReason};
use lock_core::{AcquireOptions, Instant};
use lock_election::{Asked, Candidacy, Electorate, Extended};
pub use lock_election::{Body, Control, Leader, Term};

use crate::lease::Lease;
use crate::local::{LocalInstant, ProcessClock};
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

/// One candidate of the election `name` over a store's [`Locks`] (see `docs/election.md`).
/// Its errors are [`Error`]s: [`Error::Lock`] for a bad name, candidate id or metadata; a store
/// that cannot be reached, a place its id left in line and a full line only delay the campaign
/// ([`Refusal`]).
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
pub type Election<'l> = lock_election::Election<'l, Locks>;

impl Electorate for Locks {
    type Candidacy<'a> = StoreCandidacy<'a>;
    type Error = Error;

    fn candidacy<'a>(
        &'a self,
        name: &'a str,
        candidate: &'a str,
        metadata: &'a str,
    ) -> StoreCandidacy<'a> {
        StoreCandidacy {
            locks: self,
            name,
            candidate,
            options: AcquireOptions::default().metadata(metadata),
            base: LocalInstant::now(),
        }
    }
}

/// The election's key on a store, as the shared driver sees it (made by [`Election`]; nothing
/// to call); instants on this process's monotonic clock, from the run's start.
pub struct StoreCandidacy<'a> {
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
            Err(error) => Asked::Refused {
                refusal: error.refusal(),
                error,
            },
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
