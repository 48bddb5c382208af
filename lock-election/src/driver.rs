//! The driver loop: the recipe's actions carried out over a [`Candidacy`], a [`Body`] running
//! each term.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use lock_core::election::{Action, Campaign, Refusal};
use lock_core::{Fence, Instant};

use crate::body::{Body, ThreadBody};
use crate::control::{Control, Kick};
use crate::term::Term;

/// How a face asks for the election's key, extends and releases its lease: the driver's only
/// view of the lock (a store's `Locks`, a plugin host's `LockHost`).
pub trait Candidacy {
    /// A held term's lease.
    type Lease;
    /// An error that ends the campaign (a bad name, say).
    type Error;

    /// Now, on the clock the lease ends are given on (the candidate's own monotonic clock, or
    /// a host's clock, manual in tests).
    fn now(&self) -> Instant;

    /// Asks for the key with a lease of `ttl`, waiting in line up to `wait` (then
    /// [`Refusal::WaitTimedOut`]; the driver asks again).
    fn campaign(&self, ttl: Duration, wait: Duration) -> Asked<Self::Lease, Self::Error>;

    /// An extension of `lease` by `ttl`, to run on a thread of its own (a store call can hang
    /// up to its bound, and the stop signal must keep its time meanwhile).
    fn extension(&self, lease: &Self::Lease, ttl: Duration)
        -> Box<dyn FnOnce() -> Extended + Send>;

    /// Releases `lease` (an error is the lease's end by its TTL: nothing to do).
    fn release(&self, lease: Self::Lease);
}

/// The answer to [`Candidacy::campaign`].
#[derive(Debug)]
pub enum Asked<L, E> {
    /// Granted: the lease, its fence, and its end on [`Candidacy::now`]'s clock at the latest.
    Granted {
        /// The lease.
        lease: L,
        /// Its fencing token.
        fence: Fence,
        /// Its end.
        end: Instant,
    },
    /// Not granted: why, in the lock's names (the recipe decides what follows), and the face's
    /// own error for it, which the run returns if the refusal ends the campaign.
    Refused {
        /// The face's answer, translated.
        refusal: Refusal,
        /// The face's answer.
        error: E,
    },
}

/// The answer to an extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extended {
    /// Extended: the lease's new end on [`Candidacy::now`]'s clock at the latest.
    Until(Instant),
    /// Refused: the lease is gone (expired, stolen).
    Lost,
    /// No answer (unreachable, timed out): the recipe retries, and stops the term in time.
    Failed,
}

/// A campaign waits in line this long at a time, then asks again at once (a shut-down asked
/// meanwhile is heard within it).
const WAIT_CHUNK: Duration = Duration::from_secs(5);

/// The longest sleep between looks at a body that cannot tell when it returns (a process) and
/// at a clock that can jump (a manual one).
const LOOK: u64 = 10;

/// Campaigns with `campaign` (the recipe with its options) until shut down through `control`
/// (or for one term with [`once`](lock_core::election::CampaignOptions::once)), running
/// `body` for each term on a scoped thread of its own with the term's fence and stop signal.
/// A body that panics shuts the campaign down; its panic is resumed once its lease is
/// released. Answers how many terms it led.
///
/// # Errors
/// The [`Asked::Refused`] error whose refusal ended the campaign.
pub fn run<C, F>(
    candidacy: &C,
    campaign: Campaign,
    control: &Control,
    mut body: F,
) -> Result<u64, C::Error>
where
    C: Candidacy,
    F: FnMut(&Term) + Send,
{
    let (result, panic) = std::thread::scope(|scope| {
        let mut threads = ThreadBody {
            scope,
            body: Some(&mut body),
            running: None,
            over: Arc::default(),
            control: control.clone(),
            panic: None,
        };
        let result = run_with(candidacy, campaign, control, &mut threads);
        (result, threads.panic.take())
    });
    if let Some(panic) = panic {
        std::panic::resume_unwind(panic);
    }
    result
}

/// [`run`] with a [`Body`] of the caller's (a process, say: `lockstore elect`).
///
/// # Errors
/// As [`run`].
pub fn run_with<C: Candidacy>(
    candidacy: &C,
    mut campaign: Campaign,
    control: &Control,
    body: &mut impl Body,
) -> Result<u64, C::Error> {
    let ttl = Duration::from_millis(campaign.options().ttl.0);
    let mut lease: Option<C::Lease> = None;
    let mut term: Option<Term> = None;
    let mut running = false;
    // The extension out, on a thread of its own.
    let mut extending: Option<mpsc::Receiver<(Fence, Extended)>> = None;
    let result = loop {
        let now = candidacy.now();
        if let Some(rx) = extending.as_ref() {
            match rx.try_recv() {
                Ok((fence, answer)) => {
                    extending = None;
                    if campaign.term() == Some(fence) {
                        match answer {
                            Extended::Until(end) => campaign.handle_extended(end, now),
                            Extended::Lost => campaign.handle_lost(now),
                            Extended::Failed => campaign.handle_extend_failed(now),
                        }
                    }
                }
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => extending = None,
            }
        }
        if control.is_shut_down() {
            campaign.shut_down(now);
        }
        if control.take_resign() {
            campaign.resign(now);
        }
        if let Some(t) = term.as_ref() {
            mark_stop_by(t, &campaign, candidacy.now());
        }
        if running && body.returned() {
            running = false;
            campaign.handle_body_returned(now);
        }
        let Some(action) = campaign.poll_action(now) else {
            // Wake at the recipe's next instant, when kicked, or after a short look.
            let next = campaign.poll_timeout().map_or(u64::MAX, |t| t.0);
            let sleep = next.saturating_sub(candidacy.now().0).clamp(1, LOOK);
            control.kick.wait(Duration::from_millis(sleep));
            continue;
        };
        match action {
            Action::Campaign => {
                // A body abandoned in the last term is waited for first.
                body.wait();
                let asked = candidacy.campaign(ttl, WAIT_CHUNK);
                if control.is_shut_down() {
                    // Asked while it waited in line: a grant now starts no term.
                    campaign.shut_down(candidacy.now());
                }
                match asked {
                    Asked::Granted {
                        lease: l,
                        fence,
                        end,
                    } => {
                        campaign.handle_granted(fence, end, candidacy.now());
                        lease = Some(l);
                    }
                    Asked::Refused { refusal, error } => {
                        if campaign.handle_refused(refusal, candidacy.now()).is_err() {
                            break Err(error);
                        }
                    }
                }
            }
            Action::Start { fence } => {
                let t = Term::new(fence, control.kick.clone());
                mark_stop_by(&t, &campaign, candidacy.now());
                body.start(&t);
                term = Some(t);
                running = true;
            }
            Action::Extend { fence } => {
                let Some(l) = lease.as_ref() else {
                    continue;
                };
                extending = Some(spawn_extension(
                    fence,
                    candidacy.extension(l, ttl),
                    control.kick.clone(),
                ));
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
                    candidacy.release(l);
                }
                campaign.handle_released(candidacy.now());
            }
            Action::Done => break Ok(campaign.terms()),
        }
    };
    body.wait();
    if let Some(l) = lease.take() {
        candidacy.release(l);
    }
    result
}

/// Tells `term` its stop instant (see [`Term::stop_by`]) on this process's monotonic clock,
/// from the campaign's on the candidacy's clock, which reads `now`.
fn mark_stop_by(term: &Term, campaign: &Campaign, now: Instant) {
    if let Some(by) = campaign.stop_by() {
        let left = Duration::from_millis(by.0.saturating_sub(now.0));
        term.set_stop_by(std::time::Instant::now() + left);
    }
}

fn spawn_extension(
    fence: Fence,
    extension: Box<dyn FnOnce() -> Extended + Send>,
    kick: Kick,
) -> mpsc::Receiver<(Fence, Extended)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send((fence, extension()));
        kick.kick();
    });
    rx
}
