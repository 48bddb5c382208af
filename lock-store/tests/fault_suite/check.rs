//! The checkers: fences, exclusion, the register; each answers what it found and the
//! violations (what cannot be under the promise the run checks).

use std::collections::BTreeMap;

use super::history::{Hold, Workload, PLACES};
use super::recorder::{Answer, Sent};

use super::register::WriteSeen;

/// Fences never repeat (neither among the leases handed out nor among the tokens any committed
/// write allocated, those a failover lost included), and a lease answered before another was
/// asked for has the lower fence.
pub fn fences(holds: &[Hold], log: &[Sent]) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    for h in holds {
        if let Some(other) = seen.insert(h.fence, &h.owner) {
            out.push(format!(
                "fence {} handed to {} and to {}",
                h.fence, other, h.owner
            ));
        }
    }
    let mut allocated: BTreeMap<u64, u64> = BTreeMap::new();
    for s in log {
        if let Answer::Done(fences) = &s.answer {
            for f in fences {
                if allocated.insert(*f, s.version).is_some() {
                    out.push(format!("token {f} allocated by two committed writes"));
                }
            }
        }
    }
    let mut by_answer: Vec<&Hold> = holds.iter().collect();
    by_answer.sort_by_key(|h| h.granted_us);
    let mut by_ask: Vec<&Hold> = holds.iter().collect();
    by_ask.sort_by_key(|h| h.invoked_us);
    // For each lease (in the order asked), the highest fence of those answered before it was
    // asked for must be below its own.
    let (mut i, mut highest, mut highest_owner) = (0, 0u64, "");
    for h in by_ask {
        while i < by_answer.len() && by_answer[i].granted_us < h.invoked_us {
            if by_answer[i].fence > highest {
                highest = by_answer[i].fence;
                highest_owner = &by_answer[i].owner;
            }
            i += 1;
        }
        if h.fence <= highest {
            out.push(format!(
                "{} was handed fence {} after {} had been handed {}",
                h.owner, h.fence, highest_owner, highest
            ));
        }
    }
    out
}

/// How many places a lease takes of its key.
fn places(h: &Hold) -> u32 {
    match (h.workload, h.exclusive) {
        (Workload::LockSet | Workload::Election, _) => 1,
        (Workload::Places, true) => PLACES,
        (Workload::Places, false) => 1,
    }
}

/// No more holders at once than the key's places, over the time each holder may believe it
/// holds (from its acquire's answer to its release, or to the least its deadline can be).
pub fn exclusion(holds: &[Hold]) -> Vec<String> {
    let mut out = Vec::new();
    let mut by_key: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in holds {
        by_key.entry(&h.key).or_default().push(h);
    }
    for (key, holds) in by_key {
        let most = if key == super::client::PLACES_KEY {
            PLACES
        } else {
            1
        };
        for h in &holds {
            if h.granted_us >= h.believed_until() {
                continue;
            }
            // Everyone believed to hold the key when h was granted.
            let with: Vec<&&Hold> = holds
                .iter()
                .filter(|o| o.granted_us <= h.granted_us && h.granted_us < o.believed_until())
                .collect();
            let taken: u32 = with.iter().map(|o| places(o)).sum();
            if taken > most {
                let who: Vec<String> = with
                    .iter()
                    .map(|o| format!("{} (fence {})", o.owner, o.fence))
                    .collect();
                out.push(format!(
                    "{key}: {taken} places taken of {most} by {}",
                    who.join(", ")
                ));
            }
        }
    }
    out
}

/// What the register saw, checked.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegisterCheck {
    pub writes: usize,
    pub accepted: usize,
    pub refused: usize,
    /// Elements an accepted write added that the final set lacks.
    pub lost_adds: usize,
    /// Refusals of a holder that could still believe it held the lock.
    pub live_refused: usize,
}

pub fn register(
    holds: &[Hold],
    writes: &[WriteSeen],
    final_set: &std::collections::BTreeSet<u64>,
) -> RegisterCheck {
    let accepted = super::client::accepted_adds(writes);
    let believed: BTreeMap<(usize, u64), u64> = holds
        .iter()
        .map(|h| ((h.client, h.fence), h.believed_until()))
        .collect();
    RegisterCheck {
        writes: writes.len(),
        accepted: writes.iter().filter(|w| w.accepted).count(),
        refused: writes.iter().filter(|w| !w.accepted).count(),
        lost_adds: accepted.difference(final_set).count(),
        live_refused: writes
            .iter()
            .filter(|w| {
                !w.accepted
                    && believed
                        .get(&(w.client, w.fence))
                        .is_some_and(|until| w.at_us < *until)
            })
            .count(),
    }
}

impl std::ops::Add for RegisterCheck {
    type Output = RegisterCheck;
    fn add(self, o: RegisterCheck) -> RegisterCheck {
        RegisterCheck {
            writes: self.writes + o.writes,
            accepted: self.accepted + o.accepted,
            refused: self.refused + o.refused,
            lost_adds: self.lost_adds + o.lost_adds,
            live_refused: self.live_refused + o.live_refused,
        }
    }
}
