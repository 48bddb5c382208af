//! The collection of forgotten records in the SQL stores (PostgreSQL, MariaDB).

/// The walk that collects forgotten records in the SQL stores, whose rows do not expire by
/// themselves: every [`CollectWalk::EVERY`] writes of a client, one step looks at the next
/// `EVERY` keys after the last key the previous step looked at, and deletes those that are free
/// and forgotten. On average one key is looked at per write, and a namespace of N keys is walked
/// through once every N writes of a client. `K` is the store's key type (the start is
/// `K::default()`, the empty key).
#[derive(Debug, Default)]
pub(crate) struct CollectWalk<K> {
    writes: u32,
    after: K,
}

impl<K: Default> CollectWalk<K> {
    /// Writes per step, and keys looked at per step.
    pub(crate) const EVERY: u32 = 64;

    /// Counts a write. When a step is due, answers the key it starts after (the walk then
    /// starts over unless [`stopped_at`](Self::stopped_at) says where the step stopped: a step
    /// that failed is tried again from the start, later).
    pub(crate) fn count_write(&mut self) -> Option<K> {
        self.writes = self.writes.wrapping_add(1);
        (self.writes.is_multiple_of(Self::EVERY)).then(|| std::mem::take(&mut self.after))
    }

    /// Where the step stopped: the last key it looked at, `None` at the end of the keys.
    pub(crate) fn stopped_at(&mut self, last: Option<K>) {
        self.after = last.unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::CollectWalk;

    #[test]
    fn a_step_every_64_writes_going_on_from_where_the_last_stopped() {
        let mut walk = CollectWalk::<String>::default();
        let steps = |walk: &mut CollectWalk<String>| {
            (0..CollectWalk::<String>::EVERY)
                .filter_map(|_| walk.count_write())
                .collect::<Vec<_>>()
        };
        assert_eq!(steps(&mut walk), vec![String::new()]);
        walk.stopped_at(Some("k63".into()));
        assert_eq!(steps(&mut walk), vec!["k63".to_owned()]);
        // The end of the keys: the next step starts over.
        walk.stopped_at(None);
        assert_eq!(steps(&mut walk), vec![String::new()]);
        // A step that failed (no stopped_at): the next one starts over too.
        assert_eq!(steps(&mut walk), vec![String::new()]);
    }
}
