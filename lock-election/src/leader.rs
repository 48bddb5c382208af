//! The current leader of an election, as anyone reads it.

use lock_core::{Fence, Instant, KeyInfo};

/// The current leader of an election, as anyone reads it (`Locks::leader` of a store,
/// `LockHost::leader` of a plugin host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// The leader's candidate id.
    pub candidate: String,
    /// Its term's fencing token: a resource that checks it refuses a deposed leader.
    pub fence: Fence,
    /// Its lease's deadline in the lock's time (a store's, a host's clock) (it extends it while it leads).
    pub deadline: Instant,
    /// What it campaigned with (an address, say; empty for none).
    pub metadata: String,
    /// When its term began, in the lock's time: the grant of its lease (extensions keep it).
    /// `None` only for a lease read from a record or snapshot written before grant instants
    /// were kept.
    pub since: Option<Instant>,
}

impl Leader {
    /// The leader of an election's key state (its one live lease).
    #[must_use]
    pub fn of(info: &KeyInfo) -> Option<Leader> {
        (info.holders.iter())
            .find(|h| h.ended.is_none())
            .map(|h| Leader {
                candidate: h.owner.clone(),
                fence: h.fence,
                deadline: h.deadline,
                metadata: h.metadata.clone(),
                since: h.granted_at,
            })
    }
}
