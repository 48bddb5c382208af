//! Leader election among the plugins of one host: [`Election`] drives the core's campaign
//! recipe ([`lock_core::election::Campaign`]) with a [`LockHost`], one key per election, through
//! the driver every blocking face shares (`lock_election`; `docs/election.md`). Time is the
//! host's clock: with a [`ManualClock`](crate::ManualClock) a test moves every term by hand.

use std::sync::Arc;
use std::time::Duration;

pub use lock_core::election::{BadCampaign, CampaignOptions, Refusal, StopReason};
use lock_core::{AcquireOptions, Instant};
use lock_election::{Asked, Candidacy, Electorate, Extended};
pub use lock_election::{Body, Control, Leader, Term};

use crate::{Error, Lease, LockHost};

impl LockHost {
    /// The current leader of the election `name`, if any (see [`Election`]).
    ///
    /// # Errors
    /// [`Error::Lock`] for a bad name, [`Error::Host`].
    pub fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        Ok(self.inspect(name)?.as_ref().and_then(Leader::of))
    }
}

/// One candidate (a plugin, say) of the election `name` on a [`LockHost`]. Its errors are the
/// host's: [`Error::Lock`] for a bad name, candidate id or metadata; a trapped component, a
/// persistence failure, another call waiting for the key as the same candidate and a full table
/// or line only delay the campaign ([`Refusal`]).
///
/// ```
/// use std::time::Duration;
/// use host_wasmtime::election::{CampaignOptions, Election};
/// use host_wasmtime::LockHost;
///
/// let host = LockHost::new()?;
/// let options = CampaignOptions::new(Duration::from_secs(5).into());
/// let election = Election::new(&host, "indexer", "plugin-a", options)
///     .expect("good options")
///     .metadata("plugin-a v2");
/// let control = election.control(); // resign() or shut_down() from another thread
/// let terms = election.run(|term| {
///     // lead: index, writing with term.fence(); return when term.stopped() says so
///     assert_eq!(host.leader("indexer").unwrap().unwrap().fence, term.fence());
///     control.shut_down(); // one term is enough here
///     let _ = term.wait_stop(Duration::from_secs(1));
/// })?;
/// assert_eq!(terms, 1);
/// assert_eq!(host.leader("indexer")?, None); // released when the body returned
/// # Ok::<(), host_wasmtime::Error>(())
/// ```
pub type Election<'h> = lock_election::Election<'h, LockHost>;

impl Electorate for LockHost {
    type Candidacy<'a> = HostCandidacy<'a>;
    type Error = Error;

    fn candidacy<'a>(
        &'a self,
        name: &'a str,
        candidate: &'a str,
        metadata: &'a str,
    ) -> HostCandidacy<'a> {
        HostCandidacy {
            host: self,
            name,
            candidate,
            options: AcquireOptions::default().metadata(metadata),
        }
    }
}

/// A host's answer to a campaign's ask, in the lock's names (the recipe decides what follows):
/// a trap or a persistence failure is the lock unreachable; a place this candidate id already
/// has in line is another caller's wait as it (a restored snapshot drops its waiters), which
/// ends with that wait, or the key comes to this id.
fn refusal(error: &Error) -> Refusal {
    match error {
        Error::Lock(e) => Refusal::lock(e),
        Error::WaitTimedOut => Refusal::WaitTimedOut,
        Error::AlreadyWaiting => Refusal::AlreadyWaiting,
        Error::Host(_) | Error::Persist(_) => Refusal::Unreachable,
    }
}

/// The election's key on a host, as the shared driver sees it (made by [`Election`]; nothing to
/// call); instants on the host's clock.
pub struct HostCandidacy<'a> {
    host: &'a LockHost,
    name: &'a str,
    candidate: &'a str,
    options: AcquireOptions<'a>,
}

impl Candidacy for HostCandidacy<'_> {
    type Lease = Arc<Lease>;
    type Error = Error;

    fn now(&self) -> Instant {
        self.host.now()
    }

    fn campaign(&self, ttl: Duration, wait: Duration) -> Asked<Arc<Lease>, Error> {
        match (self.host).acquire_with(self.name, self.candidate, ttl, wait, &self.options) {
            Ok(lease) => Asked::Granted {
                fence: lease.fence(),
                end: lease.deadline(),
                lease: Arc::new(lease),
            },
            Err(error) => Asked::Refused {
                refusal: refusal(&error),
                error,
            },
        }
    }

    fn extension(&self, lease: &Arc<Lease>, ttl: Duration) -> Box<dyn FnOnce() -> Extended + Send> {
        let lease = Arc::clone(lease);
        Box::new(move || match lease.extend(ttl) {
            Ok(()) => Extended::Until(lease.deadline()),
            Err(Error::Lock(_)) => Extended::Lost,
            Err(_) => Extended::Failed,
        })
    }

    fn release(&self, lease: Arc<Lease>) {
        let _ = lease.release();
    }
}
