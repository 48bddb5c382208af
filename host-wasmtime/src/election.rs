//! Leader election among the plugins of one host: [`Election`] drives the core's campaign
//! recipe ([`lock_core::election::Campaign`]) with a [`LockHost`], one key per election, through
//! the driver every blocking face shares (`lock_election`; `docs/election.md`). Time is the
//! host's clock: with a [`ManualClock`](crate::ManualClock) a test moves every term by hand.

use std::sync::Arc;
use std::time::Duration;

use lock_core::election::Campaign;
pub use lock_core::election::{BadCampaign, CampaignOptions, StopReason};
use lock_core::{AcquireOptions, Instant};
use lock_election::{Asked, Candidacy, Extended};
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

/// One candidate (a plugin, say) of the election `name` on a [`LockHost`].
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
pub struct Election<'h> {
    host: &'h LockHost,
    name: String,
    candidate: String,
    /// The recipe as it starts (each run drives a copy).
    campaign: Campaign,
    metadata: String,
    control: Control,
}

impl<'h> Election<'h> {
    /// A candidate `candidate` of the election `name` on `host`.
    ///
    /// # Errors
    /// The options' [`BadCampaign`].
    pub fn new(
        host: &'h LockHost,
        name: &str,
        candidate: &str,
        options: CampaignOptions,
    ) -> Result<Self, BadCampaign> {
        Ok(Election {
            host,
            name: name.to_owned(),
            candidate: candidate.to_owned(),
            campaign: Campaign::new(options)?,
            metadata: String::new(),
            control: Control::default(),
        })
    }

    /// With metadata every reader of the leader sees.
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
    /// running `body` for each term on a thread of its own, with the term's fence and stop
    /// signal. The lease is released once the body returns; a body that does not return within
    /// the grace after its stop signal has its lease released anyway (its late writes are
    /// refused by fence), and the next campaign waits for it. A body that panics shuts the
    /// campaign down and its panic is resumed here, after its lease is released. Answers how
    /// many terms it led.
    ///
    /// # Errors
    /// [`Error::Lock`] for a bad name, candidate id or metadata, [`Error::AlreadyWaiting`] if
    /// another call waits for the key as the same candidate; a trapped component
    /// ([`Error::Host`]) only delays the campaign.
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

    /// [`run`](Self::run) with a [`Body`] of the caller's.
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

    fn candidacy(&self) -> HostCandidacy<'_> {
        HostCandidacy {
            host: self.host,
            name: &self.name,
            candidate: &self.candidate,
            options: AcquireOptions::default().metadata(&self.metadata),
        }
    }
}

/// The election's key on a host, as the shared driver sees it; instants on the host's clock.
struct HostCandidacy<'a> {
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
            Err(Error::WaitTimedOut | Error::Host(_) | Error::Persist(_)) => Asked::NotGranted,
            Err(e) => Asked::Failed(e),
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
