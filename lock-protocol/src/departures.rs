//! Which attempts of this process are still leaving a key, sans IO: an acquire whose caller
//! gave up, or a dropped lease, goes on in the background until its clean-up (cancelling the
//! wait, releasing what it was handed) is done. The store tells attempts apart only by their
//! owner, so a new acquire of the same key by the same owner must not ask before that clean-up
//! ends: it would be answered "already waiting" for a wait its caller ended, or be handed, as
//! "already held", the lease the clean-up is about to release (two callers believing they hold
//! the key, one of them wrongly). The async face asks [`Departures::must_wait`] before an
//! acquire and waits for [`Departures::finish`] to wake it; nothing here blocks.

use std::collections::HashMap;

/// One attempt of this process on a key (see [`Departures::begin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttemptId(u64);

impl AttemptId {
    /// Its number, for a driver that holds attempts as numbers (the npm engine): unique within
    /// its [`Departures`], counting from 1.
    #[must_use]
    pub const fn number(self) -> u64 {
        self.0
    }

    /// The attempt that [`number`](Self::number) named.
    #[must_use]
    pub const fn from_number(number: u64) -> Self {
        AttemptId(number)
    }
}

/// One attempt under way: its owner, and whether its caller left it.
#[derive(Debug)]
struct Attempt {
    owner: String,
    id: AttemptId,
    left: bool,
}

/// The attempts of one `Locks` that may still act on their key, per key and owner.
#[derive(Debug, Default)]
pub struct Departures {
    next: u64,
    /// Per key: each attempt under way (looked up by `&str`, nothing allocated to ask).
    attempts: HashMap<String, Vec<Attempt>>,
}

impl Departures {
    /// An attempt of `owner` on `key` begins; its caller is there (`left`: false), or has
    /// already let it go (`left`: true, as for the release of a dropped lease).
    pub fn begin(&mut self, key: &str, owner: &str, left: bool) -> AttemptId {
        self.next += 1;
        let id = AttemptId(self.next);
        let attempt = Attempt {
            owner: owner.to_owned(),
            id,
            left,
        };
        match self.attempts.get_mut(key) {
            Some(on_key) => on_key.push(attempt),
            None => {
                self.attempts.insert(key.to_owned(), vec![attempt]);
            }
        }
        id
    }

    /// The caller of attempt `id` left it (a dropped future): from now on a new acquire by the
    /// same owner waits for it. Nothing if the attempt has finished.
    pub fn leave(&mut self, key: &str, id: AttemptId) {
        let on_key = self.attempts.get_mut(key);
        if let Some(attempt) = on_key.and_then(|a| a.iter_mut().find(|a| a.id == id)) {
            attempt.left = true;
        }
    }

    /// Attempt `id` is over: it acts on its key no more. Answers whether an acquire may have
    /// been waiting for it (then wake the waiting acquires).
    pub fn finish(&mut self, key: &str, id: AttemptId) -> bool {
        let Some(on_key) = self.attempts.get_mut(key) else {
            return false;
        };
        let Some(at) = on_key.iter().position(|a| a.id == id) else {
            return false;
        };
        let attempt = on_key.swap_remove(at);
        if on_key.is_empty() {
            self.attempts.remove(key);
        }
        attempt.left
    }

    /// Whether a new acquire of `key` by `owner` must wait: an attempt its caller left is still
    /// leaving the key.
    #[must_use]
    pub fn must_wait(&self, key: &str, owner: &str) -> bool {
        (self.attempts.get(key)).is_some_and(|a| a.iter().any(|a| a.left && a.owner == owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_attempts_their_callers_left_hold_back_the_same_owner_on_the_same_key() {
        let mut d = Departures::default();
        let live = d.begin("k", "a", false);
        // A live attempt does not hold back another (the store answers a duplicate).
        assert!(!d.must_wait("k", "a"));
        d.leave("k", live);
        assert!(d.must_wait("k", "a"));
        assert!(!d.must_wait("k", "b") && !d.must_wait("other", "a"));
        let dropped = d.begin("k", "a", true);
        assert!(d.finish("k", live));
        assert!(
            d.must_wait("k", "a"),
            "the dropped lease's release is still under way"
        );
        assert!(d.finish("k", dropped));
        assert!(!d.must_wait("k", "a"));
        // Finished attempts are forgotten; leaving or finishing one again changes nothing.
        d.leave("k", live);
        assert!(!d.must_wait("k", "a") && !d.finish("k", live));
        let kept = d.begin("k", "a", false);
        assert!(!d.finish("k", kept), "nobody waited for a live attempt");
        assert!(d.attempts.is_empty());
    }
}
