//! The protected resource: a register holding a set, which the holders of the lock-set key
//! read and write back with one more element. Fenced, it refuses every access (read or write)
//! whose fence is below the highest it has seen, as a storage service checking fencing tokens
//! does; unfenced, it accepts everything (the control that shows why fences matter).

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::history::now_us;

/// One write the register was asked for.
#[derive(Clone, Debug)]
pub struct WriteSeen {
    pub client: usize,
    pub fence: u64,
    /// The element this write added to what its writer read.
    pub add: u64,
    pub at_us: u64,
    pub accepted: bool,
}

#[derive(Default)]
struct State {
    set: BTreeSet<u64>,
    /// The highest fence any access presented.
    fence: u64,
    writes: Vec<WriteSeen>,
}

/// See the module's documentation.
pub struct Register {
    fenced: bool,
    state: Mutex<State>,
}

impl Register {
    pub fn new(fenced: bool) -> Self {
        Register {
            fenced,
            state: Mutex::default(),
        }
    }

    pub fn fenced(&self) -> bool {
        self.fenced
    }

    /// The set, or `None` if the fence is stale (fenced only).
    pub fn read(&self, fence: u64) -> Option<BTreeSet<u64>> {
        let mut state = self.state.lock().unwrap();
        if self.fenced && fence < state.fence {
            return None;
        }
        state.fence = state.fence.max(fence);
        Some(state.set.clone())
    }

    /// Replaces the set by `set` (what the writer read, plus `add`); whether it was accepted.
    pub fn write(&self, client: usize, fence: u64, set: BTreeSet<u64>, add: u64) -> bool {
        let mut state = self.state.lock().unwrap();
        let accepted = !self.fenced || fence >= state.fence;
        if accepted {
            state.fence = state.fence.max(fence);
            state.set = set;
        }
        state.writes.push(WriteSeen {
            client,
            fence,
            add,
            at_us: now_us(),
            accepted,
        });
        accepted
    }

    /// The set now and every write seen, in order.
    pub fn finish(&self) -> (BTreeSet<u64>, Vec<WriteSeen>) {
        let state = self.state.lock().unwrap();
        (state.set.clone(), state.writes.clone())
    }
}
