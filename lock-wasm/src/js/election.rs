//! `RawCampaign`: the core's leader-election recipe ([`lock_core::election::Campaign`]) for the
//! npm package's `Election`, which does the waiting and the calls in JS. Translation only: when
//! to extend, when the stop signal fires, when to campaign again and which refusal ends the
//! campaign are the core's.

use lock_core::election::{Action, Campaign, CampaignOptions, Refusal, StopReason};
use lock_core::{Duration, Fence};
use wasm_bindgen::prelude::*;

use super::{at, ms, span};

/// `poll`: nothing to do now.
const NOTHING: u32 = 0;
/// `poll`: campaign (acquire, waiting in line).
const CAMPAIGN: u32 = 1;
/// `poll`: start the body of the term `fence()`.
const START: u32 = 2;
/// `poll`: extend the term's lease.
const EXTEND: u32 = 3;
/// `poll`: fire the term's stop signal, for `reason()`.
const STOP: u32 = 4;
/// `poll`: the body did not return within the grace.
const ABANDON: u32 = 5;
/// `poll`: release the term's lease.
const RELEASE: u32 = 6;
/// `poll`: the campaign is over.
const DONE: u32 = 7;

/// One candidate's campaign (see `lock_core::election`); instants are the caller's clock in ms.
#[wasm_bindgen]
pub struct RawCampaign {
    campaign: Campaign,
    fence: Fence,
    reason: StopReason,
}

#[wasm_bindgen]
impl RawCampaign {
    /// A campaign for terms of `ttl` ms; `margin`, `grace` and `retry` in ms, negative for the
    /// default. Throws the options' refusal as a message.
    #[wasm_bindgen(constructor)]
    pub fn new(
        ttl: f64,
        margin: f64,
        grace: f64,
        retry: f64,
        once: bool,
    ) -> Result<RawCampaign, JsError> {
        let mut options = CampaignOptions::new(span(ttl));
        let given = |v: f64, default: Duration| if v < 0.0 { default } else { span(v) };
        options.margin = given(margin, options.margin);
        options.grace = given(grace, options.margin);
        options.retry = given(retry, options.retry);
        options.once = once;
        let campaign = Campaign::new(options).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(RawCampaign {
            campaign,
            fence: Fence(0),
            reason: StopReason::Returned,
        })
    }

    /// The next action at `now` (one of the status codes above).
    pub fn poll(&mut self, now: f64) -> u32 {
        let Some(action) = self.campaign.poll_action(at(now)) else {
            return NOTHING;
        };
        match action {
            Action::Start { fence }
            | Action::Extend { fence }
            | Action::Stop { fence, .. }
            | Action::Abandon { fence }
            | Action::Release { fence } => self.fence = fence,
            Action::Campaign | Action::Done => {}
        }
        match action {
            Action::Campaign => CAMPAIGN,
            Action::Start { .. } => START,
            Action::Extend { .. } => EXTEND,
            Action::Stop { reason, .. } => {
                self.reason = reason;
                STOP
            }
            Action::Abandon { .. } => ABANDON,
            Action::Release { .. } => RELEASE,
            Action::Done => DONE,
        }
    }

    /// The fence of the last action that has one (`START`, `EXTEND`, `STOP`, `ABANDON`,
    /// `RELEASE`): the term's.
    pub fn fence(&self) -> f64 {
        self.fence.0 as f64
    }

    /// Why the last `STOP` fired (`returned`, `lost`, `unrenewed`, `resigned`, `shut-down`).
    pub fn reason(&self) -> String {
        self.reason.name().into()
    }

    /// When to poll next without an answer coming (`-1`: only an answer moves it on).
    pub fn timeout(&self) -> f64 {
        self.campaign.poll_timeout().map_or(-1.0, |t| t.0 as f64)
    }

    /// How many terms have started.
    pub fn terms(&self) -> f64 {
        self.campaign.terms() as f64
    }

    /// Granted `fence`, its lease ending at `local_end` at the latest.
    pub fn granted(&mut self, fence: f64, local_end: f64, now: f64) {
        (self.campaign).handle_granted(Fence(ms(fence)), at(local_end), at(now));
    }

    /// The campaign's ask ended without the key, for the refusal `name` (`wait-timed-out`,
    /// `unreachable`, `already-waiting` or a lock error's code; see
    /// `lock_core::election::Refusal`): answers whether the campaign goes on. `false` when the
    /// refusal ended it (`DONE` follows), or for a name the core does not know (nothing
    /// changes): the face ends its run with its error.
    pub fn refused(&mut self, name: &str, now: f64) -> bool {
        Refusal::parse(name).is_some_and(|r| self.campaign.handle_refused(r, at(now)).is_ok())
    }

    /// Extended: the lease ends at `local_end` at the latest.
    pub fn extended(&mut self, local_end: f64, now: f64) {
        self.campaign.handle_extended(at(local_end), at(now));
    }

    /// The extension failed (the store did not answer).
    pub fn extend_failed(&mut self, now: f64) {
        self.campaign.handle_extend_failed(at(now));
    }

    /// The extension was refused: the lease is lost.
    pub fn lost(&mut self, now: f64) {
        self.campaign.handle_lost(at(now));
    }

    /// The body returned.
    pub fn body_returned(&mut self, now: f64) {
        self.campaign.handle_body_returned(at(now));
    }

    /// The release was answered.
    pub fn released(&mut self, now: f64) {
        self.campaign.handle_released(at(now));
    }

    /// Resign the current term.
    pub fn resign(&mut self, now: f64) {
        self.campaign.resign(at(now));
    }

    /// Leave the election.
    pub fn shut_down(&mut self, now: f64) {
        self.campaign.shut_down(at(now));
    }
}
