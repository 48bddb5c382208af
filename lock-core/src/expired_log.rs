//! Bounded memory of lost leases (expired or stolen), so a late `release`/`extend` by a holder
//! that lost its lock answers "expired" or "stolen" whether or not the loss was already reported.
//!
//! Records are kept in expiry order (the table expires leases in order of their deadlines) and are
//! forgotten deterministically: `expired_retention` ms after their deadline, or oldest-first once
//! there are more than `max_expired_records`.

use alloc::collections::{BTreeMap, VecDeque};

use crate::stored_name::Name;
use crate::{ExpiredLeases, Fence, Instant, Limits, LockError};

/// One lost lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExpiredRecord {
    pub(crate) key: Name,
    pub(crate) owner: Name,
    /// When it was lost: its deadline, or the instant of the steal.
    pub(crate) deadline: Instant,
    /// Stolen rather than expired.
    pub(crate) stolen: bool,
}

impl ExpiredRecord {
    /// The answer to a late release or extend of this lease.
    pub(crate) fn error(&self) -> LockError {
        match self.stolen {
            true => LockError::Stolen { at: self.deadline },
            false => LockError::Expired {
                deadline: self.deadline,
            },
        }
    }
}

/// The remembered lost leases.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExpiredLog {
    by_fence: BTreeMap<Fence, ExpiredRecord>,
    order: VecDeque<Fence>,
}

impl ExpiredLog {
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Remembers a lost lease (instants must come in non-decreasing order).
    pub(crate) fn record(&mut self, fence: Fence, record: ExpiredRecord, limits: &Limits) {
        if limits.max_expired_records == 0 || limits.expired_retention.is_zero() {
            return;
        }
        self.by_fence.insert(fence, record);
        self.order.push_back(fence);
        while self.order.len() > limits.max_expired_records {
            self.forget_oldest();
        }
    }

    /// Forgets records whose retention ended at or before `now`.
    pub(crate) fn prune(&mut self, now: Instant, limits: &Limits) {
        while let Some(oldest) = self.order.front().and_then(|f| self.by_fence.get(f)) {
            if oldest.deadline.saturating_add(limits.expired_retention) > now {
                break;
            }
            self.forget_oldest();
        }
    }

    fn forget_oldest(&mut self) {
        if let Some(fence) = self.order.pop_front() {
            self.by_fence.remove(&fence);
        }
    }

    /// Records oldest first, with their fences.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Fence, &ExpiredRecord)> {
        self.order
            .iter()
            .filter_map(|f| self.by_fence.get(f).map(|r| (*f, r)))
    }

    /// The view of one key, for [`KeyState`](crate::KeyState) transitions.
    pub(crate) fn for_key<'a>(&'a self, key: &'a str) -> ExpiredOfKey<'a> {
        ExpiredOfKey { log: self, key }
    }
}

/// [`ExpiredLeases`] restricted to one key.
pub(crate) struct ExpiredOfKey<'a> {
    log: &'a ExpiredLog,
    key: &'a str,
}

impl ExpiredLeases for ExpiredOfKey<'_> {
    fn lost(&self, owner: &str, fence: Fence) -> Option<LockError> {
        self.log
            .by_fence
            .get(&fence)
            .filter(|r| r.key.is(self.key) && r.owner.is(owner))
            .map(ExpiredRecord::error)
    }
}
