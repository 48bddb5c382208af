//! Helpers shared by the host's test files (each file uses some of them).
#![allow(dead_code)]

use std::time::Duration;

use host_wasmtime::{Error, Lease, LockHost};

/// A small deterministic generator (xorshift): the adversarial tests draw their choices from it.
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A number from the environment variable `name` (how long runs are made longer), or `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Takes ever more keys of 200-odd bytes until the host's sandbox runs out of memory; returns
/// the error (the trap) and the leases held until then. Bounded: a sandbox that never fills up
/// within 100 000 keys fails the test.
pub fn fill_until_trap(host: &LockHost) -> (Error, Vec<Lease>) {
    let big = "k".repeat(200);
    let mut held = Vec::new();
    loop {
        match host.try_acquire(&format!("{big}{}", held.len()), "a", Duration::from_secs(1)) {
            Ok(lease) => held.push(lease),
            Err(e) => return (e, held),
        }
        assert!(
            held.len() < 100_000,
            "a small sandbox cannot hold 100 000 keys"
        );
    }
}
