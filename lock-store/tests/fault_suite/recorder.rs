//! A client's store, recorded: every compare-and-set it sent, with the version it replaced,
//! the bytes it wrote, the store time it was decided at and what the store answered. The
//! replay builds each key's chain from these.

use std::sync::{Arc, Mutex};

use lock_store::store::{OpenWatcher, Read, Store, Write, Written};
use lock_store::StoreError;

use super::client::Tag;

/// What a compare-and-set's answer said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Written, with these fresh tokens.
    Done(Vec<u64>),
    /// No answer (or an unreplicated one): written or not, nobody knows.
    Unknown,
}

/// One compare-and-set a client sent that may have been written (conflicts are not kept:
/// they changed nothing).
#[derive(Clone, Debug)]
pub struct Sent {
    pub client: usize,
    /// The owner and options of the request the client was making.
    pub tag: Tag,
    pub key: String,
    pub expected: u64,
    pub version: u64,
    pub bytes: Option<Vec<u8>>,
    pub fresh_fences: usize,
    /// The store time the write was decided at (`not_before`).
    pub at_ms: u64,
    pub answer: Answer,
}

/// What every client sent and saw.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// The writes, in the order they were answered.
    pub sent: Vec<Sent>,
    /// The tokens of each record version a read (or a conflict) showed: those of a write whose
    /// answer was lost are known once anyone read its record.
    pub fences_seen: std::collections::BTreeMap<u64, Vec<u64>>,
}

/// Every client's writes and reads.
pub type Log = Arc<Mutex<Recorded>>;

impl Recorder {
    fn saw(&self, read: &Read) {
        if let Some(stored) = &read.record {
            let fences = stored.fences.iter().map(|f| f.0).collect();
            self.log
                .lock()
                .unwrap()
                .fences_seen
                .insert(stored.version, fences);
        }
    }
}

/// A store that records its writes in a shared [`Log`].
pub struct Recorder {
    pub inner: Box<dyn Store>,
    pub client: usize,
    pub tag: Arc<Mutex<Tag>>,
    pub log: Log,
}

impl Store for Recorder {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        let read = self.inner.read(key);
        if let Ok(read) = &read {
            self.saw(read);
        }
        read
    }
    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        let written = self.inner.write(key, write);
        let answer = match &written {
            Ok(Written::Conflict(read)) => {
                self.saw(read);
                return written;
            }
            Ok(Written::Done { fences }) => Answer::Done(fences.iter().map(|f| f.0).collect()),
            // Refused before anything was sent (a bad namespace, a closed store): nothing to
            // keep; every other error may hide a write.
            Err(StoreError::NoNamespace { .. }) => return written,
            Err(_) => Answer::Unknown,
        };
        self.log.lock().unwrap().sent.push(Sent {
            client: self.client,
            tag: self.tag.lock().unwrap().clone(),
            key: key.to_owned(),
            expected: write.expected,
            version: write.version,
            bytes: write.bytes.map(<[u8]>::to_vec),
            fresh_fences: write.fresh_fences,
            at_ms: write.not_before.expect("store time").0,
            answer,
        });
        written
    }
    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        self.inner.keys()
    }
    fn last_fence(&mut self) -> Result<lock_core::Fence, StoreError> {
        self.inner.last_fence()
    }
    fn install(&mut self) -> Result<(), StoreError> {
        self.inner.install()
    }
    fn clear(&mut self) -> Result<(), StoreError> {
        self.inner.clear()
    }
    fn uninstall(&mut self) -> Result<(), StoreError> {
        self.inner.uninstall()
    }
    fn announce(&mut self, key: &str, owner: &str) -> Result<(), StoreError> {
        self.inner.announce(key, owner)
    }
    fn bound(&self) -> Option<std::time::Duration> {
        self.inner.bound()
    }
    fn limit_calls(&mut self, left: Option<std::time::Duration>) {
        self.inner.limit_calls(left);
    }
    fn watcher(&self) -> Option<OpenWatcher> {
        self.inner.watcher()
    }
}
