//! Arbitrary operation sequences with arbitrary strings, TTLs and (even backwards) instants:
//! the table must never panic, fences must strictly increase, no lease may outlive its
//! deadline, and a snapshot must restore to a byte-identical table.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use lock_core::{AcquireOutcome, Duration, EventKind, Fence, Instant, Limits, LockTable};

#[derive(Arbitrary, Debug)]
enum Op {
    Try { key: String, owner: String, ttl: u64 },
    Acquire { key: String, owner: String, ttl: u64, wait: u64 },
    Release { key: String, owner: String, fence: u64 },
    Extend { key: String, owner: String, fence: u64, ttl: u64 },
    Cancel { key: String, owner: String },
    Inspect { key: String },
    Timeout,
    RoundTrip,
}

#[derive(Arbitrary, Debug)]
struct Input {
    small_limits: bool,
    steps: Vec<(u16, bool, Op)>,
}

fuzz_target!(|input: Input| {
    let limits = if input.small_limits {
        Limits {
            max_key_bytes: 8,
            max_owner_bytes: 8,
            max_ttl: Duration(1000),
            max_keys: 4,
            max_waiters_per_key: 2,
            max_waiters: 3,
            expired_retention: Duration(100),
            max_expired_records: 2,
            max_pending_events: 4,
            ..Limits::default()
        }
    } else {
        Limits::default()
    };
    let mut table = LockTable::new(limits.clone()).unwrap();
    let mut now: u64 = 0;
    let mut max_fence = Fence(0);
    for (dt, jump, op) in input.steps {
        now = if jump { now.saturating_mul(2).saturating_add(u64::from(dt)) } else { now.wrapping_add(u64::from(dt)) };
        let request_now = Instant(if dt % 7 == 0 { now / 2 } else { now }); // sometimes backwards
        let granted = match op {
            Op::Try { key, owner, ttl } => table.try_acquire(&key, &owner, Duration(ttl), request_now).ok(),
            Op::Acquire { key, owner, ttl, wait } => table.acquire(&key, &owner, Duration(ttl), Instant(wait), request_now).ok(),
            Op::Release { key, owner, fence } => {
                let _ = table.release(&key, &owner, Fence(fence), request_now);
                None
            }
            Op::Extend { key, owner, fence, ttl } => {
                if let Ok(g) = table.extend(&key, &owner, Fence(fence), Duration(ttl), request_now) {
                    assert!(g.deadline > table.clock() || g.deadline == Instant::MAX);
                }
                None
            }
            Op::Cancel { key, owner } => {
                let _ = table.cancel_wait(&key, &owner, request_now);
                None
            }
            Op::Inspect { key } => {
                if let Ok(Some(info)) = table.inspect(&key, request_now) {
                    for holder in &info.holders {
                        assert!(holder.deadline > table.clock());
                    }
                }
                None
            }
            Op::Timeout => {
                table.handle_timeout(request_now);
                None
            }
            Op::RoundTrip => {
                let bytes = table.snapshot(request_now);
                let _ = table.drain_events().count();
                let mut restored = LockTable::from_snapshot(limits.clone(), 0, &bytes).unwrap();
                assert_eq!(restored.snapshot(table.clock()), bytes);
                table = restored;
                None
            }
        };
        if let Some(AcquireOutcome::Acquired(g)) = granted {
            assert!(g.fence > max_fence);
            max_fence = g.fence;
        }
        let mut pending = Vec::new();
        while let Some(e) = table.poll_event() {
            assert!(e.at <= table.clock());
            pending.push(e);
        }
        for e in pending {
            if let EventKind::Granted { fence, .. } = e.kind {
                assert!(fence <= table.stats(table.clock()).last_fence);
            }
        }
        if let Some(next) = table.next_wakeup() {
            assert!(next > table.clock());
        }
        max_fence = max_fence.max(table.stats(table.clock()).last_fence);
    }
});
