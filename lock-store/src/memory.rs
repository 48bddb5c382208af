//! The in-memory store: the embedded default for one process. Clones share the records, so each
//! thread (or each simulated replica in a test) can hold its own client.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use lock_core::{Fence, Instant};

use crate::store::{
    system_now, Read, Store, StoreError, Stored, Write, Written, MAX_FENCE, TOMBSTONE,
};

#[derive(Debug, Default)]
struct Space {
    /// (namespace, key) -> record.
    records: BTreeMap<(String, String), Stored>,
    /// namespace -> last fencing token.
    counters: BTreeMap<String, u64>,
    /// (namespace, key) -> when the record may be collected (free, nothing left to remember).
    forget_at: BTreeMap<(String, String), Instant>,
}

impl Space {
    /// Drops a few records whose time to be forgotten has come, as the other stores do.
    fn collect(&mut self, now: Instant) {
        let due: Vec<(String, String)> = (self.forget_at.iter())
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .take(8)
            .collect();
        for id in due {
            self.forget_at.remove(&id);
            self.records.remove(&id);
        }
    }
}

/// Records in this process's memory. Time is this machine's clock.
#[derive(Clone, Debug)]
pub struct MemoryStore {
    space: Arc<Mutex<Space>>,
    namespace: String,
}

impl MemoryStore {
    /// A new, empty space, seen through namespace `namespace`.
    ///
    /// # Errors
    /// [`StoreError::Namespace`] for a bad name.
    pub fn new(namespace: &str) -> Result<Self, StoreError> {
        crate::store::check_namespace(namespace)?;
        Ok(MemoryStore {
            space: Arc::default(),
            namespace: namespace.to_owned(),
        })
    }

    /// Another namespace of the same space.
    ///
    /// # Errors
    /// [`StoreError::Namespace`] for a bad name.
    pub fn namespace(&self, namespace: &str) -> Result<Self, StoreError> {
        crate::store::check_namespace(namespace)?;
        Ok(MemoryStore {
            space: Arc::clone(&self.space),
            namespace: namespace.to_owned(),
        })
    }

    fn space(&self) -> std::sync::MutexGuard<'_, Space> {
        // The space is consistent after every statement below, so a panic elsewhere while it was
        // held leaves nothing half-written.
        self.space.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn id(&self, key: &str) -> (String, String) {
        (self.namespace.clone(), key.to_owned())
    }
}

impl Store for MemoryStore {
    fn describe(&self) -> String {
        format!("memory namespace \"{}\"", self.namespace)
    }

    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        let space = self.space();
        Ok(Read {
            record: space.records.get(&self.id(key)).cloned(),
            now: system_now(),
        })
    }

    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        let id = self.id(key);
        let mut space = self.space();
        let now = system_now();
        let current = space.records.get(&id);
        let replaced = match current {
            None => write.expected == 0,
            Some(r) => r.version == write.expected && r.bytes == write.replaces,
        };
        let behind = write.not_before.is_some_and(|t| now < t);
        if !replaced || behind {
            return Ok(Written::Conflict(Read {
                record: space.records.get(&id).cloned(),
                now,
            }));
        }
        let last = space.counters.get(&self.namespace).copied().unwrap_or(0);
        let n = write.fresh_fences as u64;
        if last.saturating_add(n) > MAX_FENCE {
            return Err(StoreError::FencesExhausted {
                store: self.describe(),
            });
        }
        let fences: Vec<Fence> = (1..=n).map(|i| Fence(last + i)).collect();
        space.counters.insert(self.namespace.clone(), last + n);
        match (write.bytes, write.forget_at) {
            (Some(_), Some(at)) => space.forget_at.insert(id.clone(), at),
            _ => space.forget_at.remove(&id),
        };
        match write.bytes {
            Some(bytes) => {
                let stored = Stored {
                    version: write.version,
                    bytes: bytes.to_vec(),
                    fences: fences.clone(),
                };
                space.records.insert(id, stored);
            }
            None => {
                space.records.remove(&id);
            }
        }
        space.collect(now);
        Ok(Written::Done { fences })
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        let space = self.space();
        // Tombstones (kept for their version) are not keys.
        Ok((space.records.iter())
            .filter(|((ns, _), stored)| {
                *ns == self.namespace && stored.bytes.len() > TOMBSTONE.len()
            })
            .map(|((_, k), _)| k.clone())
            .collect())
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        Ok(Fence(
            self.space()
                .counters
                .get(&self.namespace)
                .copied()
                .unwrap_or(0),
        ))
    }

    fn install(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        let mut space = self.space();
        let ns = self.namespace.clone();
        space.records.retain(|(n, _), _| *n != ns);
        space.forget_at.retain(|(n, _), _| *n != ns);
        space.counters.remove(&ns);
        Ok(())
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        self.clear()
    }
}
