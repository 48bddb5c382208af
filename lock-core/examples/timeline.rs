//! Drives a lock table through a small story with a fake clock and prints the timeline:
//! contention, fair waiting, a crashed holder whose lease expires, hand-offs, a late release
//! that learns it lost the lock, and a resource that refuses a stale fencing token.
//!
//! `cargo run -p lock-core --example timeline`

use lock_core::{AcquireOutcome, Duration, EventKind, Fence, Instant, LockError, LockTable};

/// The host side: a fake clock and the one-timer loop.
struct Host {
    table: LockTable,
    now: Instant,
}

impl Host {
    fn say(&self, text: &str) {
        println!("{:>6} ms  {text}", self.now);
    }

    /// Lets time pass until `until`, waking exactly at each `next_wakeup` on the way.
    fn sleep_until(&mut self, until: Instant) {
        while let Some(wake) = self.table.next_wakeup().filter(|&t| t <= until) {
            self.now = wake;
            self.table.handle_timeout(wake);
            self.report_events();
        }
        self.now = until;
    }

    fn report_events(&mut self) {
        let events: Vec<_> = self.table.drain_events().collect();
        for e in events {
            let line = match e.kind {
                EventKind::Expired { owner, fence, .. } => {
                    format!(
                        "  ! {owner} LOST '{}' (fence {fence}): its lease ran out",
                        e.key
                    )
                }
                EventKind::Granted {
                    owner,
                    fence,
                    deadline,
                    ..
                } => format!(
                    "  > {owner} was handed '{}' (fence {fence}, until {deadline} ms)",
                    e.key
                ),
                EventKind::WaitTimedOut { owner } => {
                    format!("  - {owner} gave up waiting for '{}'", e.key)
                }
                EventKind::Stolen { owner, fence, .. } => {
                    format!("  ! {owner} LOST '{}' (fence {fence}): stolen", e.key)
                }
            };
            println!(
                "{:>6} ms{line}{}",
                e.at,
                if e.at < self.now {
                    "  (reported late)"
                } else {
                    ""
                }
            );
        }
    }

    fn acquire(&mut self, owner: &str, ttl: Duration, wait: Duration) -> Option<Fence> {
        let result = self
            .table
            .acquire(KEY, owner, ttl, self.now + wait, self.now);
        let fence = match result {
            Ok(AcquireOutcome::Acquired(g)) => {
                self.say(&format!(
                    "{owner} acquired '{KEY}' (fence {}, until {} ms)",
                    g.fence, g.deadline
                ));
                Some(g.fence)
            }
            Ok(AcquireOutcome::Queued { position }) => {
                self.say(&format!(
                    "{owner} waits for '{KEY}' (place {position}, up to {wait} ms)"
                ));
                None
            }
            Ok(other) => {
                self.say(&format!("{owner}: {other:?}"));
                None
            }
            Err(e) => {
                self.say(&format!("{owner} was refused: {e}"));
                None
            }
        };
        self.report_events();
        fence
    }
}

const KEY: &str = "nightly-report";

/// A resource that checks fencing tokens: it refuses writes older than the newest it has seen.
#[derive(Default)]
struct Storage {
    newest_fence: Fence,
}

impl Storage {
    fn write(&mut self, who: &str, fence: Fence, at: Instant) {
        if fence < self.newest_fence {
            println!(
                "{at:>6} ms  storage REFUSES {who}'s write with stale fence {fence} (newest {})",
                self.newest_fence
            );
        } else {
            self.newest_fence = fence;
            println!("{at:>6} ms  storage accepts {who}'s write with fence {fence}");
        }
    }
}

fn main() -> Result<(), LockError> {
    let mut host = Host {
        table: LockTable::default(),
        now: Instant(0),
    };
    let mut storage = Storage::default();
    println!("timeline of key '{KEY}' (fake clock, one timer for the whole table)\n");

    let a = host
        .acquire("worker-a", Duration(300), Duration(0))
        .unwrap_or_default();
    host.sleep_until(Instant(100));
    host.acquire("worker-b", Duration(200), Duration(0));
    host.acquire("worker-b", Duration(200), Duration(1_000));
    host.acquire("worker-c", Duration(200), Duration(350));
    storage.write("worker-a", a, host.now);

    host.sleep_until(Instant(250));
    let g = host
        .table
        .extend(KEY, "worker-a", a, Duration(300), host.now)?;
    host.say(&format!(
        "worker-a extended its lease to {} ms, then its process froze",
        g.deadline
    ));

    host.sleep_until(Instant(600));
    let b = host
        .table
        .inspect(KEY, host.now)?
        .and_then(|i| i.holder().map(|h| h.fence))
        .unwrap_or_default();
    storage.write("worker-b", b, host.now);

    host.sleep_until(Instant(620));
    match host.table.release(KEY, "worker-a", a, host.now) {
        Err(e @ LockError::Expired { .. }) => {
            host.say(&format!("worker-a wakes up and tries to release: {e}"))
        }
        other => host.say(&format!("worker-a release: {other:?}")),
    }
    storage.write("worker-a (stale)", a, host.now);

    host.sleep_until(Instant(700));
    host.table.release(KEY, "worker-b", b, host.now)?;
    host.say("worker-b released");
    host.report_events();
    host.sleep_until(Instant(2_000));

    let stats = host.table.stats(host.now);
    println!(
        "\nstats: {} acquired, {} handed off, {} released, {} expired, {} wait timeouts, {} rejected",
        stats.acquired, stats.handed_off, stats.released, stats.expired, stats.wait_timed_out, stats.rejected
    );
    Ok(())
}
