//! An indexed binary min-heap of per-key wake-up instants: one entry per held key.
//!
//! Entries are ordered by `(instant, fence of the key's lease)`: a total order that depends only on
//! the table's state, never on the order of past calls, so the same state (restored from a
//! snapshot or not) processes simultaneous timers in the same order. Each slot knows its heap
//! position, so rescheduling or removing a key costs O(log n) and never leaves stale entries.

use alloc::vec::Vec;

use crate::{Fence, Instant};

const ABSENT: u32 = u32::MAX;

/// One scheduled wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timer {
    pub(crate) at: Instant,
    pub(crate) fence: Fence,
    pub(crate) slot: u32,
}

impl Timer {
    fn before(&self, other: &Timer) -> bool {
        (self.at, self.fence) < (other.at, other.fence)
    }
}

/// The heap, and for every slot its position in the heap (`ABSENT` if none).
#[derive(Clone, Debug, Default)]
pub(crate) struct TimerHeap {
    heap: Vec<Timer>,
    position: Vec<u32>,
}

impl TimerHeap {
    /// The earliest timer.
    pub(crate) fn peek(&self) -> Option<&Timer> {
        self.heap.first()
    }

    /// Number of scheduled timers.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Schedules `slot` at `(at, fence)`, replacing its previous timer if it had one.
    pub(crate) fn schedule(&mut self, slot: u32, at: Instant, fence: Fence) {
        let timer = Timer { at, fence, slot };
        let index = slot as usize;
        if self.position.len() <= index {
            self.position.resize(index + 1, ABSENT);
        }
        match self.position[index] {
            ABSENT => {
                self.heap.push(timer);
                let pos = self.heap.len() - 1;
                self.position[index] = pos as u32;
                self.sift_up(pos);
            }
            pos => {
                let pos = pos as usize;
                let earlier = timer.before(&self.heap[pos]);
                self.heap[pos] = timer;
                if earlier {
                    self.sift_up(pos);
                } else {
                    self.sift_down(pos);
                }
            }
        }
    }

    /// Removes the timer of `slot`, if any.
    pub(crate) fn remove(&mut self, slot: u32) {
        let Some(&pos) = self.position.get(slot as usize) else {
            return;
        };
        if pos == ABSENT {
            return;
        }
        let pos = pos as usize;
        self.position[slot as usize] = ABSENT;
        let last = self.heap.len() - 1;
        if pos == last {
            self.heap.pop();
            return;
        }
        self.heap.swap_remove(pos);
        self.position[self.heap[pos].slot as usize] = pos as u32;
        if pos > 0 && self.heap[pos].before(&self.heap[(pos - 1) / 2]) {
            self.sift_up(pos);
        } else {
            self.sift_down(pos);
        }
    }

    fn set(&mut self, pos: usize, timer: Timer) {
        self.position[timer.slot as usize] = pos as u32;
        self.heap[pos] = timer;
    }

    fn sift_up(&mut self, mut pos: usize) {
        let timer = self.heap[pos];
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if !timer.before(&self.heap[parent]) {
                break;
            }
            let moved = self.heap[parent];
            self.set(pos, moved);
            pos = parent;
        }
        self.set(pos, timer);
    }

    fn sift_down(&mut self, mut pos: usize) {
        let timer = self.heap[pos];
        let len = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && self.heap[right].before(&self.heap[left]) {
                right
            } else {
                left
            };
            if !self.heap[child].before(&timer) {
                break;
            }
            let moved = self.heap[child];
            self.set(pos, moved);
            pos = child;
        }
        self.set(pos, timer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_order_and_reschedules() {
        let mut h = TimerHeap::default();
        for (slot, at) in [(0u32, 50u64), (1, 10), (2, 30), (3, 10), (4, 70)] {
            h.schedule(slot, Instant(at), Fence(u64::from(slot) + 1));
        }
        h.schedule(4, Instant(5), Fence(5)); // earlier
        h.schedule(1, Instant(60), Fence(2)); // later
        h.remove(2);
        h.remove(2); // twice is harmless
        let mut order = Vec::new();
        while let Some(t) = h.peek().copied() {
            order.push((t.slot, t.at));
            h.remove(t.slot);
        }
        assert_eq!(
            order,
            [
                (4, Instant(5)),
                (3, Instant(10)),
                (0, Instant(50)),
                (1, Instant(60))
            ]
        );
        assert_eq!(h.len(), 0);
    }

    #[test]
    fn ties_break_by_fence() {
        let mut h = TimerHeap::default();
        h.schedule(0, Instant(10), Fence(9));
        h.schedule(1, Instant(10), Fence(3));
        h.schedule(2, Instant(10), Fence(5));
        assert_eq!(h.peek().map(|t| t.slot), Some(1));
    }
}
