//! Every vector scenario through the in-memory store, fresh and with outdated records.
mod common;

use lock_store::store::MemoryStore;

#[test]
fn vectors_through_memory() {
    let store = MemoryStore::new("vectors").unwrap();
    common::check_vectors("memory", move || store.clone(), false);
}

#[test]
fn vectors_through_memory_from_outdated_records() {
    let store = MemoryStore::new("vectors").unwrap();
    common::check_vectors("memory, stale", move || store.clone(), true);
}
