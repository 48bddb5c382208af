//! One client of a run: a thread with its own `Locks` (its own connections), taking the
//! lock-set key around a read-modify-write of the register, or a place of the places key, in a
//! seeded order, stalling in its critical section (a process paused past its lease: a
//! `SIGSTOP`, a GC pause) or dying without a release (a `SIGKILL`) now and then.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_store::{AcquireOptions, Locks};

use super::history::{now_us, History, Hold, Rng, Workload, PLACES};
use super::register::Register;

/// The key whose holders read and write the register.
pub const SET_KEY: &str = "set";
/// The key of [`PLACES`] permits.
pub const PLACES_KEY: &str = "places";
/// The election's key.
pub const LEADER_KEY: &str = "leader";
/// The client index of election candidate 0 (candidates' indexes follow).
pub const CANDIDATES: usize = 100;

/// What the client's writes are recorded with: the owner and options of its current request.
#[derive(Clone, Debug, Default)]
pub struct Tag {
    pub owner: String,
    pub exclusive: bool,
    pub permits: u32,
    pub ttl_ms: u64,
}

/// How a client behaves.
#[derive(Clone, Copy, Debug)]
pub struct Behaviour {
    pub ttl: Duration,
    /// Percent of critical sections that stall for 1.5 TTL.
    pub stall: u64,
    /// Percent of leases dropped without a release.
    pub crash: u64,
}

/// What the clients of a run share: the register, the history, the flag that stops them.
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    pub register: &'a Register,
    /// The register the leaders write to.
    pub leader_register: &'a Register,
    pub history: &'a History,
    pub stop: &'a AtomicBool,
}

/// Runs client `index`'s operations until `stop`.
pub fn run(
    index: usize,
    seed: u64,
    locks: &Locks,
    tag: &Arc<Mutex<Tag>>,
    how: Behaviour,
    shared: Shared<'_>,
) {
    let Shared {
        register,
        history,
        stop,
        ..
    } = shared;
    let mut rng = Rng::stream(seed, 1 + index as u64);
    for op in 0.. {
        if stop.load(SeqCst) {
            break;
        }
        let workload = if rng.chance(60) {
            Workload::LockSet
        } else {
            Workload::Places
        };
        let exclusive = workload == Workload::LockSet || rng.chance(25);
        let (key, options) = match workload {
            Workload::LockSet => (SET_KEY, AcquireOptions::EXCLUSIVE),
            Workload::Places if exclusive => {
                (PLACES_KEY, AcquireOptions::EXCLUSIVE.permits(PLACES))
            }
            Workload::Places => (PLACES_KEY, AcquireOptions::shared().permits(PLACES)),
            Workload::Election => unreachable!("the lock clients do not campaign"),
        };
        let owner = format!("c{index}o{op}");
        *tag.lock().unwrap() = Tag {
            owner: owner.clone(),
            exclusive,
            permits: options.permits,
            ttl_ms: how.ttl.as_millis() as u64,
        };
        history.tried.fetch_add(1, SeqCst);
        let invoked_us = now_us();
        let lease = match locks.acquire_with(key, &owner, how.ttl, Duration::ZERO, &options) {
            Ok(lease) => lease,
            Err(e) => {
                let pause = if matches!(e, lock_store::Error::Store(_)) {
                    history.failed.fetch_add(1, SeqCst);
                    rng.between(50, 200)
                } else {
                    rng.between(5, 40)
                };
                std::thread::sleep(Duration::from_millis(pause));
                continue;
            }
        };
        let fence = lease.fence().0;
        let at = {
            let mut holds = history.holds.lock().unwrap();
            holds.push(Hold {
                client: index,
                workload,
                key: key.to_owned(),
                owner: owner.clone(),
                exclusive,
                fence,
                invoked_us,
                granted_us: now_us(),
                // As its holder sees it: its store's deadline on this process's clock (a
                // server whose clock is off says another instant).
                deadline_us: now_us() + u64::try_from(lease.time_left().as_micros()).unwrap(),
                released_us: None,
            });
            holds.len() - 1
        };
        let read = (workload == Workload::LockSet).then(|| register.read(fence));
        if rng.chance(how.stall) {
            history.stalls.fetch_add(1, SeqCst);
            std::thread::sleep(how.ttl * 3 / 2);
        } else {
            std::thread::sleep(Duration::from_millis(rng.between(0, 20)));
        }
        if let Some(Some(mut set)) = read {
            let add = ((index as u64) << 32) | op as u64;
            set.insert(add);
            register.write(index, fence, set, add);
        }
        if rng.chance(how.crash) {
            history.crashes.fetch_add(1, SeqCst);
            std::mem::forget(lease);
        } else {
            history.holds.lock().unwrap()[at].released_us = Some(now_us());
            if let Err(lock_store::Error::Store(_)) = lease.release() {
                history.failed.fetch_add(1, SeqCst);
            }
        }
        std::thread::sleep(Duration::from_millis(rng.between(0, 20)));
    }
}

/// The elements every accepted write of the register added.
pub fn accepted_adds(writes: &[super::register::WriteSeen]) -> BTreeSet<u64> {
    writes
        .iter()
        .filter(|w| w.accepted)
        .map(|w| w.add)
        .collect()
}

/// Runs candidate `index` of the election until `stop`: while it leads, it reads the leader
/// register with its term's fence, pauses (now and then 1.5 TTL without looking at its stop
/// signal: a paused leader), writes back with one more element, looks at its stop signal, and
/// resigns after a few writes.
pub fn run_candidate(
    index: usize,
    seed: u64,
    locks: &Locks,
    tag: &Arc<Mutex<Tag>>,
    how: Behaviour,
    shared: Shared<'_>,
) {
    use lock_store::election::{CampaignOptions, Election};
    let client = CANDIDATES + index;
    let mut rng = Rng::stream(seed, client as u64);
    let candidate = format!("e{index}");
    *tag.lock().unwrap() = Tag {
        owner: candidate.clone(),
        exclusive: true,
        permits: 0,
        ttl_ms: how.ttl.as_millis() as u64,
    };
    let election = Election::new(
        locks,
        LEADER_KEY,
        &candidate,
        CampaignOptions::new(how.ttl.into()),
    )
    .expect("good campaign options");
    let control = election.control();
    let history = shared.history;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !shared.stop.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            control.shut_down();
        });
        let mut writes = 0u64;
        let led = election.run(|term| {
            let fence = term.fence().0;
            let started = now_us();
            let at = {
                let mut holds = history.holds.lock().unwrap();
                holds.push(Hold {
                    client,
                    workload: Workload::Election,
                    key: LEADER_KEY.to_owned(),
                    owner: candidate.clone(),
                    exclusive: true,
                    fence,
                    // Asked in line, maybe long before, and handed over: when is unknown.
                    invoked_us: 0,
                    granted_us: started,
                    deadline_us: started,
                    released_us: None,
                });
                holds.len() - 1
            };
            let terms_writes = rng.between(2, 8);
            for _ in 0..terms_writes {
                if term
                    .wait_stop(Duration::from_millis(rng.between(5, 30)))
                    .is_some()
                {
                    break;
                }
                // It may believe it leads until its stop signal is due (the lease's end on its
                // clock less the margin), as of this look.
                if let Some(by) = term.stop_by() {
                    let left = by.saturating_duration_since(std::time::Instant::now());
                    history.holds.lock().unwrap()[at].deadline_us =
                        now_us() + u64::try_from(left.as_micros()).unwrap();
                }
                let read = shared.leader_register.read(fence);
                if rng.chance(how.stall) {
                    history.stalls.fetch_add(1, SeqCst);
                    std::thread::sleep(how.ttl * 3 / 2);
                }
                if let Some(mut set) = read {
                    writes += 1;
                    let add = ((client as u64) << 32) | writes;
                    set.insert(add);
                    shared.leader_register.write(client, fence, set, add);
                }
            }
            history.holds.lock().unwrap()[at].released_us = Some(now_us());
        });
        if let Err(e) = led {
            panic!("candidate {candidate}'s campaign ended: {e}");
        }
    });
}
