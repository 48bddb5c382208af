//! `RawDepartures`: lock-protocol's [`Departures`] for the npm store client, so that a new
//! acquire by an owner waits while an acquire of the same owner on the same key is still giving
//! up (the rule and its reasons are in `lock-protocol/src/departures.rs`). The JS side only
//! waits for the wake-up that [`RawDepartures::finish`] asks for. Attempts cross as numbers.

use lock_protocol::departures::{AttemptId, Departures};
use wasm_bindgen::prelude::*;

/// Which acquires of one `Locks` are still acting on their key (see the module documentation).
#[wasm_bindgen]
#[derive(Default)]
pub struct RawDepartures {
    departures: Departures,
}

#[wasm_bindgen]
impl RawDepartures {
    /// No attempt under way.
    #[wasm_bindgen(constructor)]
    #[must_use]
    pub fn new() -> RawDepartures {
        RawDepartures::default()
    }

    /// An acquire of `key` by `owner` begins (its caller there): the attempt's number, to pass
    /// to `leave` and `finish`.
    pub fn begin(&mut self, key: &str, owner: &str) -> f64 {
        number(self.departures.begin(key, owner, false))
    }

    /// Its caller gave attempt `n` of `key` up (its signal aborted): until it finishes, a new
    /// acquire of the key by the same owner waits.
    pub fn leave(&mut self, key: &str, n: f64) {
        self.departures.leave(key, attempt(n));
    }

    /// Attempt `n` of `key` is over. `true`: an acquire may be waiting for it (wake them).
    pub fn finish(&mut self, key: &str, n: f64) -> bool {
        self.departures.finish(key, attempt(n))
    }

    /// Whether a new acquire of `key` by `owner` must wait for a give-up under way.
    #[must_use]
    pub fn must_wait(&self, key: &str, owner: &str) -> bool {
        self.departures.must_wait(key, owner)
    }
}

/// An attempt's number as JS holds it (exact: attempts are counted from 1, far below 2^53).
#[allow(clippy::cast_precision_loss)]
fn number(id: AttemptId) -> f64 {
    id.number() as f64
}

/// The attempt JS named by [`number`].
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn attempt(n: f64) -> AttemptId {
    AttemptId::from_number(n as u64)
}
