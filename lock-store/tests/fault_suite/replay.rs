//! The replay: each key's committed compare-and-sets form one chain (each names the version it
//! replaced); running `lock-core` on each link's record with the request its client was making
//! and the store time the write was decided at must give exactly the bytes the store
//! committed, and every lease a client was handed must be one of the grants so replayed.
//! Only possible because the core takes time as an input.

use std::collections::{BTreeMap, BTreeSet};

use lock_core::{
    AcquireOptions, AcquireOutcome, EventKind, Fence, Instant, KeyInfo, KeyRecord, Limits, Mode,
    Request, Response,
};
use lock_store::store::TOMBSTONE;

use super::history::Hold;
use super::recorder::{Answer, Recorded, Sent};

/// What the replay found.
#[derive(Debug, Default)]
pub struct Replayed {
    /// Committed writes reproduced by the core.
    pub replayed: usize,
    /// Committed writes whose predecessor's answer was lost and whose record nobody read (its
    /// tokens unknown): not replayed.
    pub unreplayable: usize,
    /// Versions replaced by two committed writes: a server that lost writes (a failover that
    /// promoted a replica which had not received them).
    pub forks: usize,
    /// Leases handed out that cannot be matched to a replayed grant: granted by a write whose
    /// answer was lost (the client found it by reading), or by one not replayed.
    pub unverified: usize,
    /// What cannot be.
    pub violations: Vec<String>,
}

fn record_of(sent: &Sent, fences: &[u64], limits: &Limits) -> Result<KeyRecord, String> {
    match &sent.bytes {
        None => Ok(KeyRecord::new()),
        Some(b) if b.as_slice() == TOMBSTONE => Ok(KeyRecord::new()),
        Some(b) => {
            let fences: Vec<Fence> = fences.iter().map(|f| Fence(*f)).collect();
            KeyRecord::decode(b, &fences, limits).map_err(|e| format!("{e:?}"))
        }
    }
}

/// The bytes an exchange writes for `after` (an emptied record is a tombstone).
fn bytes_of(after: &KeyRecord) -> Vec<u8> {
    if after.is_empty() {
        TOMBSTONE.to_vec()
    } else {
        after.encode()
    }
}

/// The requests `sent`'s client could have been making when it wrote: its acquire (as a
/// try, or queueing with the wait its place in `after` shows), a renewal of that place, a
/// release or extension of each lease it holds in `prev`, a cancelled wait, time alone.
fn candidates<'a>(
    sent: &'a Sent,
    prev: &KeyRecord,
    after: Option<&'a KeyInfo>,
    now: Instant,
    limits: &Limits,
) -> Vec<Request<'a>> {
    let tag = &sent.tag;
    let ttl = lock_core::Duration(tag.ttl_ms);
    let options = AcquireOptions {
        mode: if tag.exclusive {
            Mode::Exclusive
        } else {
            Mode::Shared
        },
        permits: tag.permits,
        ..AcquireOptions::EXCLUSIVE
    };
    let (key, owner) = (sent.key.as_str(), tag.owner.as_str());
    let mut out = vec![
        Request::AcquireWith {
            key,
            owner,
            ttl,
            wait_deadline: now,
            options,
            now,
        },
        Request::TryAcquire {
            key,
            owner,
            ttl,
            now,
        },
        Request::CancelWait { key, owner, now },
        Request::HandleTimeout { now },
    ];
    for w in after
        .iter()
        .flat_map(|a| &a.waiters)
        .filter(|w| w.owner == tag.owner)
    {
        // The wait it asked for and how it keeps its place are not all in the record: each
        // way a client asks is a candidate.
        let alive = lock_core::Duration(lock_store::WAIT_ALIVE.as_millis() as u64);
        let derived = lock_core::Duration(w.wait_deadline.0.saturating_sub(now.0));
        for wait_alive in [lock_core::Duration(0), derived, alive] {
            for wait_deadline in [w.wait_end, w.wait_deadline] {
                let queued = AcquireOptions {
                    mode: w.mode,
                    metadata: &w.metadata,
                    wait_alive,
                    ..options
                };
                out.push(Request::AcquireWith {
                    key,
                    owner,
                    ttl: w.ttl,
                    wait_deadline,
                    options: queued,
                    now,
                });
            }
        }
        for wait_deadline in [w.wait_end, w.wait_deadline] {
            out.push(Request::RenewWait {
                key,
                owner,
                wait_deadline,
                now,
            });
        }
    }
    let mut look = prev.clone();
    if let Ok(Some(info)) = look.inspect(key, now, limits).reply {
        for h in info.holders.iter().filter(|h| h.owner == tag.owner) {
            out.push(Request::Release {
                key,
                owner,
                fence: h.fence,
                now,
            });
            out.push(Request::Extend {
                key,
                owner,
                fence: h.fence,
                ttl,
                now,
            });
        }
    }
    out
}

/// Replays every committed write of `log` (see the module's documentation).
pub fn replay(recorded: &Recorded, holds: &[Hold]) -> Replayed {
    let log = &recorded.sent;
    let limits = Limits::default();
    let mut out = Replayed::default();
    let mut unverified: BTreeSet<&str> = BTreeSet::new();
    let by_version: BTreeMap<u64, &Sent> = log.iter().map(|s| (s.version, s)).collect();
    let mut successors: BTreeMap<(String, u64), usize> = BTreeMap::new();
    let mut grants: BTreeSet<(String, u64)> = BTreeSet::new();
    // Writes whose answer was lost are known written when a later write replaced their
    // version or a read saw it; their tokens are known when a read saw them.
    let replaced: BTreeSet<u64> = log.iter().map(|s| s.expected).collect();
    let mut tokens_unknown: BTreeSet<&str> = BTreeSet::new();
    for sent in log {
        let fresh: Vec<u64> = match &sent.answer {
            Answer::Done(fresh) => fresh.clone(),
            Answer::Unknown
                if !replaced.contains(&sent.version)
                    && !recorded.fences_seen.contains_key(&sent.version) =>
            {
                continue;
            }
            Answer::Unknown => match recorded.fences_seen.get(&sent.version) {
                Some(seen) => seen.clone(),
                None if sent.fresh_fences == 0 => Vec::new(),
                None => {
                    // Written, its tokens never seen: whoever it granted cannot be checked.
                    out.unreplayable += 1;
                    tokens_unknown.insert(&sent.key);
                    continue;
                }
            },
        };
        let fresh = &fresh;
        if sent.expected != 0 {
            *successors
                .entry((sent.key.clone(), sent.expected))
                .or_default() += 1;
        }
        let prev = if sent.expected == 0 {
            KeyRecord::new()
        } else {
            let Some(p) = by_version.get(&sent.expected) else {
                out.violations.push(format!(
                    "{}'s write on {} replaced version {:#x}, which no client wrote",
                    sent.tag.owner, sent.key, sent.expected
                ));
                continue;
            };
            let seen = recorded.fences_seen.get(&p.version);
            let fences = match (&p.answer, seen) {
                (Answer::Done(f), Some(seen)) if f != seen => {
                    out.violations.push(format!(
                        "{}'s write on {} was answered tokens {f:?}, its record read with {seen:?}",
                        p.tag.owner, p.key
                    ));
                    continue;
                }
                (Answer::Done(f), _) => f.clone(),
                (Answer::Unknown, Some(seen)) => seen.clone(),
                (Answer::Unknown, None) if p.fresh_fences == 0 => Vec::new(),
                (Answer::Unknown, None) => {
                    out.unreplayable += 1;
                    unverified.insert(&sent.tag.owner);
                    continue;
                }
            };
            match record_of(p, &fences, &limits) {
                Ok(r) => r,
                Err(e) => {
                    out.violations.push(format!(
                        "a committed record of {} does not decode: {e}",
                        p.key
                    ));
                    continue;
                }
            }
        };
        let now = Instant(sent.at_ms);
        let written = sent.bytes.clone().unwrap_or_else(|| TOMBSTONE.to_vec());
        let fences: Vec<Fence> = fresh.iter().map(|f| Fence(*f)).collect();
        let after = record_of(sent, fresh, &limits)
            .ok()
            .and_then(|mut a| a.inspect(&sent.key, now, &limits).reply.ok().flatten());
        let found = candidates(sent, &prev, after.as_ref(), now, &limits)
            .into_iter()
            .find_map(|request| {
                let mut after = prev.clone();
                let mut step = after.handle(request, &limits);
                (step.changed
                    && step.fresh_fences == sent.fresh_fences
                    && bytes_of(&after) == written)
                    .then(|| {
                        step.settle(&fences);
                        step
                    })
            });
        match found {
            None => {
                let before = prev.clone().inspect(&sent.key, now, &limits).reply;
                out.violations.push(format!(
                    "{}'s write on {} at {} ms: no request of its client, run by the core on the \
                     record it replaced, gives the bytes committed (before: {before:?}; \
                     committed: {after:?})",
                    sent.tag.owner, sent.key, sent.at_ms
                ));
            }
            Some(step) => {
                out.replayed += 1;
                if let Response::Acquire(Ok(AcquireOutcome::Acquired(g))) = step.reply {
                    grants.insert((sent.tag.owner.clone(), g.fence.0));
                }
                // Hand-offs: a release or an expiry that granted the next in line.
                for event in step.events {
                    if let EventKind::Granted { owner, fence, .. } = event.kind {
                        grants.insert((owner, fence.0));
                    }
                }
            }
        }
    }
    out.forks = successors.values().filter(|n| **n > 1).count();
    unverified.extend(
        log.iter()
            .filter(|s| s.answer == Answer::Unknown)
            .map(|s| s.tag.owner.as_str()),
    );
    for hold in holds {
        if grants.contains(&(hold.owner.clone(), hold.fence)) {
            continue;
        }
        if unverified.contains(hold.owner.as_str()) || tokens_unknown.contains(hold.key.as_str()) {
            out.unverified += 1;
        } else {
            out.violations.push(format!(
                "{} was handed fence {} on {}, which no replayed write granted",
                hold.owner, hold.fence, hold.key
            ));
        }
    }
    out
}
