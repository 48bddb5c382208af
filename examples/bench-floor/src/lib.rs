//! The benchmark floor: the call shape of `lock-table.try-acquire`, doing nothing.

wit_bindgen::generate!({
    path: "wit",
    world: "floor",
});

use exports::bench::floor::probe::{Failure, Grant, Guest, GuestTarget, Outcome};

struct Floor;

struct Target;

impl Guest for Floor {
    type Target = Target;
}

impl GuestTarget for Target {
    fn new() -> Self {
        Target
    }

    fn try_acquire(
        &self,
        _key: String,
        _owner: String,
        ttl: u64,
        now: u64,
    ) -> Result<Outcome, Failure> {
        Ok(Outcome::Acquired(Grant {
            fence: ttl,
            deadline: now,
        }))
    }
}

export!(Floor);
