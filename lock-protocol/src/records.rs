//! What a store reads and writes, as the protocol sees it: a key's record with its version and
//! fences ([`Stored`]), one read with the store's time ([`Read`]), one compare-and-set
//! ([`Write`]) and what it did ([`Written`]); and the names and limits every store shares.

use lock_core::{Duration, Fence, Instant};

use crate::error::StoreError;

/// A record as a store keeps it: opaque bytes (a [`lock_core::KeyRecord`]), the version a
/// compare-and-set checks, and the fencing tokens allocated at its last write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// Changes at every write (a random non-zero number chosen by the writer).
    pub version: u64,
    /// The encoded record.
    pub bytes: Vec<u8>,
    /// The tokens the store allocated at the write that stored these bytes, in order.
    pub fences: Vec<Fence>,
}

/// One read: the key's record (if any) and the store's clock at the read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    /// The record, `None` if the key has none.
    pub record: Option<Stored>,
    /// The store's time, milliseconds since the Unix epoch.
    pub now: Instant,
}

/// A compare-and-set: replace the record whose version is `expected` (0: no record) and whose
/// bytes are `replaces` by `bytes` (`None`: delete it) with version `version`, allocating
/// `fresh_fences` tokens from the namespace's counter in the same atomic step.
///
/// The store compares the bytes as well as the version: a record damaged in place (its version
/// left as it was) is never written over by a client that remembers it as it was; the write is
/// a conflict, whose read reports the damage ([`StoreError::Corrupt`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write<'a> {
    /// The version the writer decided on; 0 if it saw no record.
    pub expected: u64,
    /// The bytes of the record the writer decided on (a [`TOMBSTONE`]'s included); ignored when
    /// `expected` is 0.
    pub replaces: &'a [u8],
    /// The new version (non-zero, never reused).
    pub version: u64,
    /// The new record, or `None` to delete it.
    pub bytes: Option<&'a [u8]>,
    /// How many fresh fencing tokens to allocate (0 for a deletion).
    pub fresh_fences: usize,
    /// The decision assumed the store's time had reached this instant; a store whose clock is
    /// behind it refuses the write as a conflict (a client never decides ahead of the store).
    /// `None` in test mode, where the caller supplies time.
    pub not_before: Option<Instant>,
    /// When the store may drop the record by itself (a free record whose memory ran out), in
    /// the store's time; `None` to keep it.
    pub forget_at: Option<Instant>,
    /// How long after the decision's instant a lease of the new record holds or keeps its place
    /// (zero: none). A server store keeps the longest it was written as the namespace's
    /// recovery delay: when it finds itself a new authority (a promoted replica, a restart), it
    /// grants nothing for that long (docs/stores.md, "Recovery after a change of authority").
    pub holds_for: Duration,
}

/// What a compare-and-set did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// The record was replaced; these are the fresh tokens, in order.
    Done {
        /// The allocated tokens.
        fences: Vec<Fence>,
    },
    /// Someone else wrote first (or the store's clock was behind `not_before`): nothing changed,
    /// and this is the record now, read in the same step.
    Conflict(Read),
}

/// Highest fencing token a store issues: JavaScript numbers are exact up to here.
pub const MAX_FENCE: u64 = (1 << 53) - 1;

/// Checks a namespace name: 1-40 of `a-z`, `0-9`, `_`, starting with a letter (safe as a SQL
/// identifier part and a Redis key prefix).
///
/// # Errors
/// [`StoreError::Namespace`].
pub fn check_namespace(name: &str) -> Result<(), StoreError> {
    let ok = (1..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::Namespace {
            name: name.to_owned(),
        })
    }
}

/// The bytes of a tombstone: what an engine leaves of a record whose key emptied, for its version
/// (see `Engine`), until the store collects it. Never a valid record (those are longer and start
/// with `LOCKKREC`); stores list no key for it.
pub const TOMBSTONE: &[u8] = b"LOCKTOMB";
