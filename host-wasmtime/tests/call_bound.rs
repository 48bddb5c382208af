//! A call bound means what it says: never shorter than configured. Alone in its test binary, so
//! no other test's threads compete for the two cores while it runs on the real clock (a thread
//! descheduled for a whole 10 ms tick would count against its call).

use std::time::Duration;

use host_wasmtime::{LockComponent, SandboxLimits};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// Issue 9, defect 5: with a 1 ms bound the epoch's 10 ms tick used to trap calls that take
/// microseconds after a few hundred pairs. A bound is never shorter than configured.
#[test]
fn a_small_call_bound_never_stops_a_short_call() {
    let component = LockComponent::embedded().unwrap();
    let mut table = component
        .instantiate(
            &lock_core::Limits::default(),
            0,
            SandboxLimits {
                call_timeout: MS(1),
                ..SandboxLimits::default()
            },
        )
        .unwrap();
    for now in (0..3_000).map(lock_core::Instant) {
        let outcome = table
            .try_acquire("k", "a", lock_core::Duration(10), now)
            .unwrap()
            .unwrap();
        let lock_core::AcquireOutcome::Acquired(g) = outcome else {
            panic!("free key")
        };
        table.release("k", "a", g.fence, now).unwrap().unwrap();
    }
    assert!(!table.is_poisoned());
    assert_eq!(
        SandboxLimits {
            call_timeout: MS(1),
            ..SandboxLimits::default()
        }
        .epoch_ticks(),
        2
    );
    assert_eq!(
        SandboxLimits {
            call_timeout: MS(20),
            ..SandboxLimits::default()
        }
        .epoch_ticks(),
        3
    );
    assert_eq!(
        SandboxLimits {
            call_timeout: MS(0),
            ..SandboxLimits::default()
        }
        .epoch_ticks(),
        0
    );
}
