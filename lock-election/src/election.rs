//! [`Election`]: one candidate of one election over any lock that is an [`Electorate`].

use lock_core::election::{BadCampaign, Campaign, CampaignOptions};

use crate::body::Body;
use crate::control::Control;
use crate::driver::{self, Candidacy};
use crate::term::Term;

/// A lock an election runs over (a store's `Locks`, a plugin host's `LockHost`): it hands the
/// driver a [`Candidacy`] for one candidate of one election.
pub trait Electorate {
    /// The candidacy it hands out.
    type Candidacy<'a>: Candidacy<Error = Self::Error>
    where
        Self: 'a;
    /// What ends a campaign (a bad name, say).
    type Error;

    /// The candidacy of `candidate` in the election `name`, its leases carrying `metadata`.
    fn candidacy<'a>(
        &'a self,
        name: &'a str,
        candidate: &'a str,
        metadata: &'a str,
    ) -> Self::Candidacy<'a>;
}

/// One candidate of the election `name` over the lock `E` (`lock_store::election::Election`,
/// `host_wasmtime::election::Election`; see `docs/election.md`).
pub struct Election<'l, E: ?Sized> {
    lock: &'l E,
    name: String,
    candidate: String,
    /// The recipe as it starts (each run drives a copy).
    campaign: Campaign,
    metadata: String,
    control: Control,
}

impl<'l, E: Electorate + ?Sized> Election<'l, E> {
    /// A candidate `candidate` of the election `name` over `lock`.
    ///
    /// # Errors
    /// The options' [`BadCampaign`].
    pub fn new(
        lock: &'l E,
        name: &str,
        candidate: &str,
        options: CampaignOptions,
    ) -> Result<Self, BadCampaign> {
        Ok(Election {
            lock,
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

    /// Its control (resign, shut down), for any thread.
    #[must_use]
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// Campaigns until shut down (or for one term with [`once`](CampaignOptions::once)),
    /// running `body` for each term on a thread of its own, with the term's fence and stop
    /// signal. The lease is released once the body returns; a body that does not return within
    /// the grace after its stop signal has its lease released anyway (a thread cannot be
    /// killed: its late writes are refused by fence), and the next campaign waits for it. A
    /// body that panics shuts the campaign down and its panic is resumed here, after its lease
    /// is released. Answers how many terms it led.
    ///
    /// # Errors
    /// The lock's error that ended the campaign (a bad name, candidate id or metadata); a lock
    /// that cannot be reached only delays the campaign.
    pub fn run<F>(&self, body: F) -> Result<u64, E::Error>
    where
        F: FnMut(&Term) + Send,
    {
        let candidacy = self.candidacy();
        driver::run(&candidacy, self.campaign.clone(), &self.control, body)
    }

    /// [`run`](Self::run) with a [`Body`] of the caller's (a process, say: `lockstore elect`).
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub fn run_with(&self, body: &mut impl Body) -> Result<u64, E::Error> {
        let candidacy = self.candidacy();
        driver::run_with(&candidacy, self.campaign.clone(), &self.control, body)
    }

    fn candidacy(&self) -> E::Candidacy<'_> {
        self.lock
            .candidacy(&self.name, &self.candidate, &self.metadata)
    }
}
