//! [`Batch`]: many requests encoded for one boundary crossing.

use lock_core::wire::Request;
use lock_core::{Duration, Fence, Instant};

/// Requests to run in one call, encoded as they are added ([`lock_core::wire`]), so the whole
/// batch crosses the boundary as one byte list and one string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    bytes: Vec<u8>,
    names: String,
    len: usize,
}

impl Batch {
    /// An empty batch.
    #[must_use]
    pub fn new() -> Self {
        Batch::default()
    }

    /// Number of requests.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every request, keeping the buffers.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.names.clear();
        self.len = 0;
    }

    /// Adds any request.
    pub fn push(&mut self, request: &Request<'_>) -> &mut Self {
        lock_core::wire::encode_request(&mut self.bytes, &mut self.names, request);
        self.len += 1;
        self
    }

    /// Adds `try-acquire`.
    pub fn try_acquire(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        now: Instant,
    ) -> &mut Self {
        self.push(&Request::TryAcquire {
            key,
            owner,
            ttl,
            now,
        })
    }
    /// Adds `acquire`.
    pub fn acquire(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        now: Instant,
    ) -> &mut Self {
        self.push(&Request::Acquire {
            key,
            owner,
            ttl,
            wait_deadline,
            now,
        })
    }
    /// Adds `release`.
    pub fn release(&mut self, key: &str, owner: &str, fence: Fence, now: Instant) -> &mut Self {
        self.push(&Request::Release {
            key,
            owner,
            fence,
            now,
        })
    }
    /// Adds `extend`.
    pub fn extend(
        &mut self,
        key: &str,
        owner: &str,
        fence: Fence,
        ttl: Duration,
        now: Instant,
    ) -> &mut Self {
        self.push(&Request::Extend {
            key,
            owner,
            fence,
            ttl,
            now,
        })
    }
    /// Adds `cancel-wait`.
    pub fn cancel_wait(&mut self, key: &str, owner: &str, now: Instant) -> &mut Self {
        self.push(&Request::CancelWait { key, owner, now })
    }
    /// Adds `renew-wait`.
    pub fn renew_wait(
        &mut self,
        key: &str,
        owner: &str,
        wait_deadline: Instant,
        now: Instant,
    ) -> &mut Self {
        self.push(&Request::RenewWait {
            key,
            owner,
            wait_deadline,
            now,
        })
    }
    /// Adds `handle-timeout`.
    pub fn handle_timeout(&mut self, now: Instant) -> &mut Self {
        self.push(&Request::HandleTimeout { now })
    }

    /// The encoded requests (their names are kept apart).
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The keys and owners of the requests, concatenated.
    #[must_use]
    pub fn names(&self) -> &str {
        &self.names
    }

    /// The encoded requests (their names are kept apart), e.g. to test how malformed bytes are
    /// refused.
    pub fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }
}
