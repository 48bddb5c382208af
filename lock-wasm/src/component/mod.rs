//! The WebAssembly component face (feature `component`): the WIT world `lock` of `wit/`
//! implemented over `lock-core` with wit-bindgen. Built for `wasm32-unknown-unknown` and turned
//! into a component that imports nothing (see `host-wasmtime/build.rs`).

// The only `unsafe` is in the bindings that `wit_bindgen::generate!` writes.

mod convert;
mod records;

use std::cell::RefCell;

use lock_core::{Duration, Fence, Instant};

use exports::expiring::lock::table::{Guest, GuestLockTable, LockTable as LockTableHandle};
use exports::expiring::lock::types::{
    AcquireOptions, AcquireOutcome, Event, Grant, KeyInfo, Limits, LockError, QueryPage,
    ReleaseOutcome, Stats,
};

wit_bindgen::generate!({
    path: "../wit",
    world: "lock",
    default_bindings_module: "crate::component",
});

/// The component.
struct Component;

/// One lock table behind a resource handle. Methods take `&self`, hence the `RefCell`; a
/// component instance runs one call at a time, so it is never borrowed twice.
struct Table(RefCell<lock_core::LockTable>);

impl Guest for Component {
    type LockTable = Table;

    fn default_limits() -> Limits {
        convert::limits_out(&lock_core::Limits::default())
    }
}

impl GuestLockTable for Table {
    fn create(limits: Limits, seed: u64) -> Result<LockTableHandle, LockError> {
        let table = lock_core::LockTable::with_seed(convert::limits_in(&limits), seed)
            .map_err(convert::error)?;
        Ok(LockTableHandle::new(Table(RefCell::new(table))))
    }

    fn try_acquire(
        &self,
        key: String,
        owner: String,
        ttl: u64,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let mut t = self.0.borrow_mut();
        t.try_acquire(&key, &owner, Duration(ttl), Instant(now))
            .map(convert::outcome)
            .map_err(convert::error)
    }

    fn acquire(
        &self,
        key: String,
        owner: String,
        ttl: u64,
        wait_deadline: u64,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let mut t = self.0.borrow_mut();
        t.acquire(
            &key,
            &owner,
            Duration(ttl),
            Instant(wait_deadline),
            Instant(now),
        )
        .map(convert::outcome)
        .map_err(convert::error)
    }

    fn acquire_with(
        &self,
        key: String,
        owner: String,
        ttl: u64,
        wait_deadline: u64,
        options: AcquireOptions,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let mut t = self.0.borrow_mut();
        t.acquire_with(
            &key,
            &owner,
            Duration(ttl),
            Instant(wait_deadline),
            &convert::options_in(&options),
            Instant(now),
        )
        .map(convert::outcome)
        .map_err(convert::error)
    }

    fn steal(
        &self,
        key: String,
        owner: String,
        ttl: u64,
        options: AcquireOptions,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let mut t = self.0.borrow_mut();
        t.steal(
            &key,
            &owner,
            Duration(ttl),
            &convert::options_in(&options),
            Instant(now),
        )
        .map(convert::outcome)
        .map_err(convert::error)
    }

    fn release(
        &self,
        key: String,
        owner: String,
        fence: u64,
        now: u64,
    ) -> Result<ReleaseOutcome, LockError> {
        self.0
            .borrow_mut()
            .release(&key, &owner, Fence(fence), Instant(now))
            .map(convert::release)
            .map_err(convert::error)
    }

    fn extend(
        &self,
        key: String,
        owner: String,
        fence: u64,
        ttl: u64,
        now: u64,
    ) -> Result<Grant, LockError> {
        let mut t = self.0.borrow_mut();
        t.extend(&key, &owner, Fence(fence), Duration(ttl), Instant(now))
            .map(convert::grant)
            .map_err(convert::error)
    }

    fn cancel_wait(&self, key: String, owner: String, now: u64) -> Result<(), LockError> {
        self.0
            .borrow_mut()
            .cancel_wait(&key, &owner, Instant(now))
            .map_err(convert::error)
    }

    fn renew_wait(
        &self,
        key: String,
        owner: String,
        wait_deadline: u64,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let mut t = self.0.borrow_mut();
        t.renew_wait(&key, &owner, Instant(wait_deadline), Instant(now))
            .map(convert::outcome)
            .map_err(convert::error)
    }

    fn handle_timeout(&self, now: u64) {
        self.0.borrow_mut().handle_timeout(Instant(now));
    }

    fn handle_timeout_bounded(&self, now: u64, max_changes: u32) -> bool {
        self.0
            .borrow_mut()
            .handle_timeout_bounded(Instant(now), max_changes)
    }

    fn raise_fence_floor(&self, floor: u64) {
        self.0.borrow_mut().raise_fence_floor(Fence(floor));
    }

    fn cancel_all_waits(&self, now: u64) -> u32 {
        let cancelled = self.0.borrow_mut().cancel_all_waits(Instant(now));
        // At most max-waiters (a u32 in the contract) can be waiting.
        u32::try_from(cancelled).unwrap_or(u32::MAX)
    }

    fn next_wakeup(&self) -> Option<u64> {
        self.0.borrow().next_wakeup().map(Instant::as_millis)
    }

    fn poll_events(&self) -> Vec<Event> {
        self.0
            .borrow_mut()
            .drain_events()
            .map(convert::event)
            .collect()
    }

    fn inspect(&self, key: String, now: u64) -> Result<Option<KeyInfo>, LockError> {
        let mut t = self.0.borrow_mut();
        t.inspect(&key, Instant(now))
            .map(|i| i.map(convert::key_info))
            .map_err(convert::error)
    }

    fn query(
        &self,
        prefix: String,
        after: String,
        limit: u32,
        now: u64,
    ) -> Result<QueryPage, LockError> {
        let mut t = self.0.borrow_mut();
        t.query(&prefix, &after, limit as usize, Instant(now))
            .map(convert::query_page)
            .map_err(convert::error)
    }

    fn stats(&self, now: u64) -> Stats {
        convert::stats(&self.0.borrow_mut().stats(Instant(now)))
    }

    fn snapshot(&self, now: u64) -> Vec<u8> {
        self.0.borrow_mut().snapshot(Instant(now))
    }

    fn restore(&self, bytes: Vec<u8>) -> Result<(), LockError> {
        self.0.borrow_mut().restore(&bytes).map_err(convert::error)
    }

    fn batch(&self, requests: Vec<u8>, names: String) -> Vec<u8> {
        // Responses are at most 18 bytes, requests at least 9: twice the input is plenty.
        let mut out = Vec::with_capacity(requests.len() * 2);
        self.0.borrow_mut().run_batch(&requests, &names, &mut out);
        out
    }
}

export!(Component);
