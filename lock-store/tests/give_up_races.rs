//! Giving up raced by other clients, on every store, through the Rust faces (the deterministic
//! simulation of the same protocol is `give_up_sim.rs`):
//! - an async acquire dropped (its `timeout` elapsed) while the holder, on another `Locks`,
//!   releases the key: the key is never left handed to the waiter that left, and the same
//!   owner's next acquire is never refused as already waiting;
//! - the timeout-and-retry loop with one owner against a contender: every lease it is handed is
//!   held by the store, with its fence, when it is handed (no phantom lease);
//! - a blocking acquire whose wait ends as the holder releases: nothing stranded either.
//!
//! Rounds per store: `LOCK_RACE_ROUNDS` (the give-up races: 40 unless set; the retry loop: 25
//! times as many, 1 000 by default).
mod common;

use std::time::Duration;

use lock_store::{aio, Error, LockError, Locks};

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn rounds() -> u64 {
    std::env::var("LOCK_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

/// A small seeded generator (splitmix64): the same schedule of delays for a round on every run.
fn jitter(seed: u64, below: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % below
}

/// Runs `check` on a fresh namespace of each store, uninstalled afterwards.
fn each_store(purpose: &str, check: impl Fn(&str, &str, &str)) {
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace(purpose);
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        check(label, &url, &ns);
    }
}

/// Whether the store holds `key` for `owner` with `fence` now.
async fn store_holds(locks: &aio::Locks, key: &str, owner: &str, fence: u64) -> bool {
    let info = locks.inspect(key).await.unwrap();
    info.is_some_and(|i| {
        (i.holders.iter()).any(|h| h.owner == owner && h.fence.0 == fence && h.ended.is_none())
    })
}

#[test]
fn an_async_give_up_raced_by_the_release_strands_nothing_and_the_retry_is_never_already_waiting() {
    each_store("giveup_race", |label, url, ns| {
        common::runtime(2).block_on(async {
            let holder = aio::Locks::open(url, ns).await.unwrap();
            let waiter = aio::Locks::open(url, ns).await.unwrap();
            let other = aio::Locks::open(url, ns).await.unwrap();
            let (mut gave_up, mut handed) = (0, 0);
            for round in 0..rounds() {
                let key = format!("job{round}");
                let h = holder.try_acquire(&key, "h", 30 * S).await.unwrap();
                // The waiter queues, then leaves within a few ms of the release, before or
                // after it.
                let queued = {
                    let (waiter, key) = (waiter.clone(), key.clone());
                    tokio::spawn(async move {
                        let wait = waiter.acquire(&key, "w", 30 * S, 20 * S);
                        tokio::time::timeout(Duration::from_millis(40), wait).await
                    })
                };
                let until_release = 30 + jitter(round, 20);
                tokio::time::sleep(Duration::from_millis(until_release)).await;
                h.release().await.unwrap();
                match queued.await.unwrap() {
                    Ok(Ok(lease)) => {
                        handed += 1;
                        lease.release().await.unwrap();
                    }
                    Ok(Err(e)) => panic!("{label} round {round}: {e}"),
                    Err(_elapsed) => gave_up += 1,
                }
                // The same owner asks again at once (a timeout-and-retry loop): never "already
                // waiting", and never handed a lease the store does not hold.
                let again = waiter.try_acquire(&key, "w", 30 * S).await;
                let again = again.unwrap_or_else(|e| panic!("{label} round {round}: {e}"));
                assert!(
                    store_holds(&other, &key, "w", again.fence().0).await,
                    "{label} round {round}: the retry's lease (fence {}) is not held: {:?}",
                    again.fence().0,
                    other.inspect(&key).await
                );
                again.release().await.unwrap();
                // Nothing of the waiter that left stays behind: another owner takes the key
                // now (not a TTL later).
                let x = other.try_acquire(&key, "x", 30 * S).await;
                let x = x.unwrap_or_else(|e| panic!("{label} round {round}: stranded: {e}"));
                x.release().await.unwrap();
            }
            eprintln!("{label}: {gave_up} gave up, {handed} handed the key in time");
            assert!(gave_up > 0, "{label}: no round gave up");
        });
    });
}

#[test]
fn a_timeout_and_retry_loop_with_one_owner_is_never_handed_a_lease_the_store_does_not_hold() {
    each_store("giveup_retry", |label, url, ns| {
        common::runtime(2).block_on(async {
            let mine = aio::Locks::open(url, ns).await.unwrap();
            let theirs = aio::Locks::open(url, ns).await.unwrap();
            let judge = aio::Locks::open(url, ns).await.unwrap();
            let turns = rounds() * 25;
            // A contender takes and releases the key all along (its errors fail the test: a
            // retry loop must not starve it either).
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let contender = {
                let (theirs, done) = (theirs.clone(), done.clone());
                tokio::spawn(async move {
                    let mut turns = 0_u64;
                    while !done.load(std::sync::atomic::Ordering::SeqCst) {
                        let lease = theirs.acquire("job", "q", 30 * S, 30 * S).await?;
                        tokio::time::sleep(Duration::from_millis(jitter(turns, 5))).await;
                        lease.release().await?;
                        turns += 1;
                    }
                    Ok::<u64, Error>(turns)
                })
            };
            let (mut won, mut timed_out) = (0, 0);
            for turn in 0..turns {
                let wait = mine.acquire("job", "p", 30 * S, 10 * S);
                // From well before a store call can answer to a few of them.
                let bound = Duration::from_micros(300 + jitter(turn, 20_000));
                match tokio::time::timeout(bound, wait).await {
                    Ok(Ok(lease)) => {
                        won += 1;
                        let held = store_holds(&judge, "job", "p", lease.fence().0).await;
                        assert!(
                            held && !lease.is_lost(),
                            "{label} turn {turn}: handed fence {} the store does not hold: {:?}",
                            lease.fence().0,
                            judge.inspect("job").await
                        );
                        lease.release().await.unwrap();
                    }
                    Ok(Err(e)) => panic!("{label} turn {turn}: {e}"),
                    Err(_elapsed) => timed_out += 1,
                }
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            let theirs_turns = contender.await.unwrap();
            let theirs_turns = theirs_turns.unwrap_or_else(|e| panic!("{label}: the contender: {e}"));
            eprintln!(
                "{label}: {turns} turns, {won} handed the key, {timed_out} timed out; the contender held it {theirs_turns} times"
            );
            assert!(won > 0 && timed_out > 0, "{label}: {won} won, {timed_out} timed out");
        });
    });
}

#[test]
fn a_blocking_wait_that_ends_as_the_holder_releases_strands_nothing() {
    each_store("giveup_block", |label, url, ns| {
        let holder = Locks::open(url, ns).unwrap();
        let waiter = Locks::open(url, ns).unwrap();
        let other = Locks::open(url, ns).unwrap();
        let (mut timed_out, mut handed) = (0, 0);
        for round in 0..rounds() {
            let key = format!("job{round}");
            let h = holder.try_acquire(&key, "h", 30 * S).unwrap();
            let release_after = Duration::from_millis(100 + jitter(round, 30));
            let releasing = std::thread::spawn(move || {
                std::thread::sleep(release_after);
                h.release().unwrap();
            });
            match waiter.acquire(&key, "w", 30 * S, 115 * MS) {
                Ok(lease) => {
                    handed += 1;
                    lease.release().unwrap();
                }
                Err(Error::WaitTimedOut) => timed_out += 1,
                Err(e) => panic!("{label} round {round}: {e}"),
            }
            releasing.join().unwrap();
            let x = other.try_acquire(&key, "x", 30 * S);
            match x {
                Ok(x) => x.release().unwrap(),
                Err(Error::Lock(LockError::Held { .. })) => {
                    panic!("{label} round {round}: stranded: {:?}", other.inspect(&key))
                }
                Err(e) => panic!("{label} round {round}: {e}"),
            }
        }
        eprintln!("{label}: {timed_out} timed out, {handed} handed the key");
    });
}

#[test]
fn the_same_owner_right_after_a_dropped_lease_gets_a_lease_the_store_holds() {
    each_store("giveup_drop", |label, url, ns| {
        common::runtime(2).block_on(async {
            let mine = aio::Locks::open(url, ns).await.unwrap();
            let judge = aio::Locks::open(url, ns).await.unwrap();
            for round in 0..rounds() {
                let key = format!("job{round}");
                let first = mine.try_acquire(&key, "p", 30 * S).await.unwrap();
                // Dropped: released in a task; the next acquire by "p" waits for that release
                // rather than being handed this lease as already held and losing it to it.
                drop(first);
                let again = mine.try_acquire(&key, "p", 30 * S).await;
                let again = again.unwrap_or_else(|e| panic!("{label} round {round}: {e}"));
                tokio::task::yield_now().await;
                assert!(
                    store_holds(&judge, &key, "p", again.fence().0).await,
                    "{label} round {round}: fence {} is not held: {:?}",
                    again.fence().0,
                    judge.inspect(&key).await
                );
                again.release().await.unwrap();
            }
        });
    });
}
