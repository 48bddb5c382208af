//! The protected resource: a storage that clients write to with their fencing token. It keeps
//! the newest token it has accepted per key and refuses a write with an older one, which is what
//! makes a holder that was frozen past its deadline harmless: by the time it wakes, the next
//! holder has written with a higher token.

use std::collections::BTreeMap;

use super::{LineKind, Playground};

/// One write and the storage's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageWrite {
    /// When (ms on the playground clock).
    pub at: u64,
    /// The key written under.
    pub key: String,
    /// Who wrote.
    pub owner: String,
    /// The fencing token it wrote with.
    pub fence: u64,
    /// Whether the storage accepted it.
    pub accepted: bool,
    /// The newest token the storage had accepted for the key before this write (0: none).
    pub newest_before: u64,
}

/// The storage: the newest accepted token per key, and every write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Storage {
    newest: BTreeMap<String, u64>,
    /// Every write, oldest first.
    pub writes: Vec<StorageWrite>,
}

impl Storage {
    /// Writes under `key` with `fence`: accepted unless an older token than one already
    /// accepted for the key (the same token again is the same holder writing again).
    pub fn write(&mut self, at: u64, key: &str, owner: &str, fence: u64) -> &StorageWrite {
        let newest_before = self.newest(key);
        let accepted = fence >= newest_before;
        if accepted {
            self.newest.insert(key.to_owned(), fence);
        }
        self.writes.push(StorageWrite {
            at,
            key: key.to_owned(),
            owner: owner.to_owned(),
            fence,
            accepted,
            newest_before,
        });
        self.writes.last().expect("just pushed")
    }

    /// The newest token accepted for `key` (0 if none).
    #[must_use]
    pub fn newest(&self, key: &str) -> u64 {
        self.newest.get(key).copied().unwrap_or(0)
    }

    /// Every key written under, with its newest accepted token.
    pub fn keys(&self) -> impl Iterator<Item = (&str, u64)> {
        self.newest.iter().map(|(k, f)| (k.as_str(), *f))
    }
}

impl Playground {
    /// `owner` writes under `key` with `fence`; the log says what the storage answered.
    pub(super) fn write_storage(&mut self, key: &str, owner: &str, fence: u64) {
        let now = self.clock.now();
        let w = self.storage.write(now, key, owner, fence).clone();
        if w.accepted {
            self.note(
                LineKind::Write,
                format!("the storage accepted {owner}'s write to \"{key}\" with fence {fence}"),
            );
        } else {
            self.note(
                LineKind::Refused,
                format!(
                    "the storage refused {owner}'s write to \"{key}\": fence {fence} is older than fence {}, \
                     so {owner}'s lease is over and the newer holder's data is kept",
                    w.newest_before
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_token_is_refused_and_changes_nothing() {
        let mut s = Storage::default();
        assert!(s.write(0, "k", "a", 1).accepted);
        assert!(
            s.write(5, "k", "a", 1).accepted,
            "the same holder writes again"
        );
        assert!(s.write(10, "k", "b", 2).accepted);
        let late = s.write(20, "k", "a", 1).clone();
        assert!(!late.accepted);
        assert_eq!(late.newest_before, 2);
        assert_eq!(s.newest("k"), 2);
        assert!(s.write(30, "other", "a", 1).accepted, "tokens are per key");
    }
}
