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

/// The attempts of one `Locks` that may still act on their key, per key and owner.
#[derive(Debug, Default)]
pub struct Departures {
    next: u64,
    /// Per (key, owner): each attempt under way, and whether its caller left it.
    attempts: HashMap<(String, String), Vec<(AttemptId, bool)>>,
}

impl Departures {
    /// An attempt of `owner` on `key` begins; its caller is there (`left`: false), or has
    /// already let it go (`left`: true, as for the release of a dropped lease).
    pub fn begin(&mut self, key: &str, owner: &str, left: bool) -> AttemptId {
        self.next += 1;
        let id = AttemptId(self.next);
        (self.attempts)
            .entry((key.to_owned(), owner.to_owned()))
            .or_default()
            .push((id, left));
        id
    }

    /// The caller of attempt `id` left it (a dropped future): from now on a new acquire by the
    /// same owner waits for it. Nothing if the attempt has finished.
    pub fn leave(&mut self, key: &str, owner: &str, id: AttemptId) {
        let entry = (self.attempts).get_mut(&(key.to_owned(), owner.to_owned()));
        if let Some(attempt) = entry.and_then(|e| e.iter_mut().find(|(a, _)| *a == id)) {
            attempt.1 = true;
        }
    }

    /// Attempt `id` is over: it acts on its key no more. Answers whether an acquire may have
    /// been waiting for it (then wake the waiting acquires).
    pub fn finish(&mut self, key: &str, owner: &str, id: AttemptId) -> bool {
        let name = (key.to_owned(), owner.to_owned());
        let Some(entry) = self.attempts.get_mut(&name) else {
            return false;
        };
        let Some(at) = entry.iter().position(|(a, _)| *a == id) else {
            return false;
        };
        let (_, left) = entry.swap_remove(at);
        if entry.is_empty() {
            self.attempts.remove(&name);
        }
        left
    }

    /// Whether a new acquire of `key` by `owner` must wait: an attempt its caller left is still
    /// leaving the key.
    pub fn must_wait(&self, key: &str, owner: &str) -> bool {
        (self.attempts.get(&(key.to_owned(), owner.to_owned())))
            .is_some_and(|e| e.iter().any(|(_, left)| *left))
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
        d.leave("k", "a", live);
        assert!(d.must_wait("k", "a"));
        assert!(!d.must_wait("k", "b") && !d.must_wait("other", "a"));
        let dropped = d.begin("k", "a", true);
        assert!(d.finish("k", "a", live));
        assert!(
            d.must_wait("k", "a"),
            "the dropped lease's release is still under way"
        );
        assert!(d.finish("k", "a", dropped));
        assert!(!d.must_wait("k", "a"));
        // Finished attempts are forgotten; leaving or finishing one again changes nothing.
        d.leave("k", "a", live);
        assert!(!d.must_wait("k", "a") && !d.finish("k", "a", live));
        let kept = d.begin("k", "a", false);
        assert!(
            !d.finish("k", "a", kept),
            "nobody waited for a live attempt"
        );
        assert!(d.attempts.is_empty());
    }
}
