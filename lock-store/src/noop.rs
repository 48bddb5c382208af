//! The no-op store: keeps nothing, so every acquire is granted. For running a single instance
//! without any store, or work that may run concurrently anyway (idempotent jobs, work already
//! partitioned), like the no-op lock providers other libraries offer. **It is not a lock.**
//!
//! Every read sees a free key and every write is accepted and forgotten; fencing tokens still come
//! from one counter per process that never falls behind the clock in microseconds, so tokens
//! never repeat within a process and also grow across restarts. The client's own remembered record answers the holder's calls, so the newest
//! lease of a key releases and extends `Ok`; an older lease of the same key, overlapped by a newer
//! one in the same [`crate::Locks`], answers `not-held` at release (nothing was kept of it).
//! `inspect` and `keys` see nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use lock_core::Fence;

use crate::store::{system_now, Read, Store, StoreError, Write, Written, MAX_FENCE};

/// The last token issued by any no-op store of this process.
static LAST: AtomicU64 = AtomicU64::new(0);

/// A store that keeps nothing: every acquire is granted (see the module documentation).
#[derive(Clone, Debug)]
pub struct NoopStore {
    namespace: String,
}

impl NoopStore {
    /// A no-op store named `namespace` (checked like any namespace, kept only for messages).
    ///
    /// # Errors
    /// [`StoreError::Namespace`] for a bad name.
    pub fn new(namespace: &str) -> Result<Self, StoreError> {
        crate::store::check_namespace(namespace)?;
        Ok(NoopStore {
            namespace: namespace.to_owned(),
        })
    }
}

impl Store for NoopStore {
    fn describe(&self) -> String {
        format!("noop namespace \"{}\" (keeps nothing)", self.namespace)
    }

    fn read(&mut self, _key: &str) -> Result<Read, StoreError> {
        Ok(Read {
            record: None,
            now: system_now(),
        })
    }

    fn write(&mut self, _key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        let n = write.fresh_fences as u64;
        let clock = system_now().0.saturating_mul(1000);
        let mut start = 0;
        LAST.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
            start = last.max(clock);
            start.checked_add(n).filter(|&end| end <= MAX_FENCE)
        })
        .map_err(|_| StoreError::FencesExhausted {
            store: self.describe(),
        })?;
        Ok(Written::Done {
            fences: (1..=n).map(|i| Fence(start + i)).collect(),
        })
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        Ok(Fence(LAST.load(Ordering::SeqCst)))
    }

    fn install(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}
