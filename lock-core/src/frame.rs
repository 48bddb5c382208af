//! The byte frame shared by snapshots and key records: magic, version, body length, body, CRC-32;
//! and the little-endian readers and writers of their bodies. All integers little-endian.

use alloc::vec::Vec;

use crate::crc32::crc32;
use crate::{Corruption, Duration, Fence, Instant, LimitName, LockError};

/// Magic (8 bytes), version (u16), body length (u32).
const HEADER: usize = 8 + 2 + 4;
const TRAILER: usize = 4;

/// Appends little-endian integers and length-prefixed strings to a body.
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn len(&mut self, n: usize) {
        // Every count and length is bounded by limits far below u32::MAX.
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// A snapshot or record that fails a check of its body.
pub(crate) const fn corrupt(reason: Corruption) -> LockError {
    LockError::SnapshotCorrupt { reason }
}

/// Reads little-endian integers and length-prefixed strings from a body, refusing to read past it.
pub(crate) struct Reader<'a> {
    pub(crate) rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], LockError> {
        if self.rest.len() < n {
            return Err(corrupt(Corruption::BodyEndsEarly));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, LockError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, LockError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
    pub(crate) fn instant(&mut self) -> Result<Instant, LockError> {
        self.u64().map(Instant::from_millis)
    }
    pub(crate) fn duration(&mut self) -> Result<Duration, LockError> {
        self.u64().map(Duration::from_millis)
    }
    pub(crate) fn fence(&mut self) -> Result<Fence, LockError> {
        self.u64().map(Fence::new)
    }
    /// A count of items that each take at least `min_item_bytes`, refused if the rest cannot hold
    /// them (so a forged count never makes us allocate).
    pub(crate) fn count(&mut self, min_item_bytes: usize) -> Result<usize, LockError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item_bytes) > self.rest.len() {
            return Err(corrupt(Corruption::CountTooLarge));
        }
        Ok(n)
    }
    pub(crate) fn str(&mut self) -> Result<&'a str, LockError> {
        let n = self.u32()? as usize;
        core::str::from_utf8(self.take(n)?).map_err(|_| corrupt(Corruption::NotUtf8))
    }
}

/// Maps a key/owner/TTL validation error to a snapshot error: too long means the snapshot was
/// written under larger limits; empty or invalid means corruption.
pub(crate) fn against_limits(result: Result<(), LockError>) -> Result<(), LockError> {
    match result {
        Ok(()) => Ok(()),
        Err(LockError::KeyTooLong { .. }) => Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxKeyBytes,
        }),
        Err(LockError::OwnerTooLong { .. }) => Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxOwnerBytes,
        }),
        Err(LockError::TtlTooLong { .. }) => Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxTtl,
        }),
        Err(LockError::KeyEmpty | LockError::KeyInvalid) => Err(corrupt(Corruption::InvalidKey)),
        Err(LockError::OwnerEmpty | LockError::OwnerInvalid) => {
            Err(corrupt(Corruption::InvalidOwner))
        }
        Err(_) => Err(corrupt(Corruption::InvalidTtl)),
    }
}

/// Starts a frame: `magic`, `version`, a body length to be patched by [`close_frame`].
pub(crate) fn start_frame(magic: &[u8; 8], version: u16, capacity: usize) -> Writer {
    let mut w = Writer(Vec::with_capacity(HEADER + capacity + TRAILER));
    w.0.extend_from_slice(magic);
    w.0.extend_from_slice(&version.to_le_bytes());
    w.u32(0);
    w
}

/// Ends a frame started by [`start_frame`]: patches the body length, appends the CRC.
pub(crate) fn close_frame(mut w: Writer) -> Vec<u8> {
    let body_len = w.0.len() - HEADER;
    let body_len = u32::try_from(body_len).unwrap_or(u32::MAX).to_le_bytes();
    w.0[10..14].copy_from_slice(&body_len);
    let crc = crc32(&w.0);
    w.u32(crc);
    w.0
}

/// Checks a frame (magic, a version from 1 to `newest`, length, checksum) and returns its
/// version and body.
pub(crate) fn open_frame<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    newest: u16,
) -> Result<(u16, &'a [u8]), LockError> {
    if bytes.len() < magic.len() {
        return Err(if magic.starts_with(bytes) {
            LockError::SnapshotTruncated
        } else {
            LockError::SnapshotBadMagic
        });
    }
    if bytes[..8] != *magic {
        return Err(LockError::SnapshotBadMagic);
    }
    if bytes.len() < HEADER {
        return Err(LockError::SnapshotTruncated);
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if !(1..=newest).contains(&version) {
        return Err(LockError::SnapshotVersion {
            found: version,
            supported: newest,
        });
    }
    let body_len = u32::from_le_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]) as usize;
    let total = HEADER.saturating_add(body_len).saturating_add(TRAILER);
    if bytes.len() < total {
        return Err(LockError::SnapshotTruncated);
    }
    if bytes.len() > total {
        return Err(corrupt(Corruption::BytesAfterEnd));
    }
    let (framed, crc) = bytes.split_at(HEADER + body_len);
    if crc32(framed) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        return Err(LockError::SnapshotChecksum);
    }
    Ok((version, &framed[HEADER..]))
}
